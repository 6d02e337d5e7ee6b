"""The machine-translation data scripts and BLEU scorer (docs/method.md §3.3), run on the shared data.

The IWSLT'15 and WMT'16 scripts are run in SMOKE mode (the copies under $ACVI_DATA hold no training sets)
into a tmp dir through their shell entry points, finding their input through ACVI_DATA alone; the
binarised data are read back with fairseq and compared with the text they came from. Bad inputs must
stop the scripts with a message naming the file. No input location is assumed: with neither the
script's own variable nor ACVI_DATA they download, and offline they stop (exit 2) naming both.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_DATA  # module-scoped fixtures below need the path the shared_data fixture uses

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "data_scripts"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_mt_{name}", SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(script, **env):
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable, **{k: str(v) for k, v in env.items()})
    for k in ("IWSLT_DIR", "WMT_DIR", "ACVI_DATA", "SMOKE", "DEST", "SRC", "TGT", "VOCAB_SIZE"):
        if k not in env:
            full.pop(k, None)
    return subprocess.run(["bash", str(SCRIPTS / script)], capture_output=True, text=True, env=full,
                          cwd=str(REPO), timeout=600)


def _lines(path):
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def _dataset(prefix, dictionary):
    from fairseq.data import data_utils
    ds = data_utils.load_indexed_dataset(str(prefix), dictionary)
    assert ds is not None, f"no binarised data at {prefix}"
    return ds


# ----------------------------------------------------------------------------------------------- IWSLT
@pytest.fixture(scope="module")
def iwslt_dir():
    d = SHARED_DATA / "iwslt15_en_vi"
    if not d.is_dir():
        pytest.skip(f"{d} is not present (set ACVI_DATA to the real-data root holding iwslt15_en_vi/)")
    return d


@pytest.fixture(scope="module")
def iwslt_bin(iwslt_dir, tmp_path_factory):
    dest = tmp_path_factory.mktemp("iwslt") / "bin"
    # no IWSLT_DIR: SMOKE=1 finds $ACVI_DATA/iwslt15_en_vi
    res = _run("prepare_iwslt15_en_vi.sh", ACVI_DATA=iwslt_dir.parent, SMOKE=1, DEST=dest, SRC="en", TGT="vi")
    assert res.returncode == 0, res.stderr[-4000:]
    assert f"SMOKE: using $ACVI_DATA/iwslt15_en_vi: {iwslt_dir}" in res.stderr
    return dest


def test_iwslt_dictionaries_are_the_official_vocabularies(iwslt_bin, iwslt_dir):
    from fairseq.data import Dictionary
    for lang, n_official in (("en", 17191), ("vi", 7709)):
        vocab = _lines(iwslt_dir / f"vocab.{lang}")
        assert len(vocab) == n_official
        d = Dictionary.load(str(iwslt_bin / f"dict.{lang}.txt"))
        # the official file lists </s> <unk> <s>; fairseq has its own 4 specials (<s> <pad> </s> <unk>)
        assert len(d) == n_official - 3 + 4
        words = [w for w in vocab if w not in ("<unk>", "<s>", "</s>")]
        assert [d[i] for i in range(d.nspecial, len(d))] == words  # same words, same order
    assert len(Dictionary.load(str(iwslt_bin / "dict.en.txt"))) == 17192
    assert len(Dictionary.load(str(iwslt_bin / "dict.vi.txt"))) == 7710


def test_iwslt_binarised_splits_match_the_text(iwslt_bin, iwslt_dir):
    from fairseq.data import Dictionary
    dicts = {l: Dictionary.load(str(iwslt_bin / f"dict.{l}.txt")) for l in ("en", "vi")}
    stems = {"train": "tst2012", "valid": "tst2013", "test": "tst2013"}  # SMOKE layout
    for split, stem in stems.items():
        for lang in ("en", "vi"):
            text = _lines(iwslt_dir / f"{stem}.{lang}")
            ds = _dataset(iwslt_bin / f"{split}.en-vi.{lang}", dicts[lang])
            assert len(ds) == len(text) == {"tst2012": 1553, "tst2013": 1268}[stem]
            d = dicts[lang]
            for i in (0, len(text) // 2, len(text) - 1):
                want = " ".join(w if d.index(w) != d.unk() else d.unk_word for w in text[i].split())
                assert d.string(ds[i]) == want
                assert ds[i][-1].item() == d.eos()
    # the references the recipe scores against are the untouched tokenised files
    assert _lines(iwslt_bin / "raw" / "test.vi") == _lines(iwslt_dir / "tst2013.vi")
    assert "SMOKE" in (iwslt_bin / "PROVENANCE.txt").read_text()


def test_iwslt_without_train_set_names_the_missing_file(iwslt_dir, tmp_path):
    res = _run("prepare_iwslt15_en_vi.sh", IWSLT_DIR=iwslt_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2
    assert "train.en" in res.stderr and "SMOKE=1" in res.stderr
    assert not (tmp_path / "bin" / "dict.en.txt").exists()


def test_iwslt_mismatched_line_counts_name_both_files(iwslt_dir, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for f in ("tst2012.en", "tst2013.en", "tst2013.vi", "vocab.en", "vocab.vi"):
        shutil.copy(iwslt_dir / f, raw / f)
    (raw / "tst2012.vi").write_text("".join(l + "\n" for l in _lines(iwslt_dir / "tst2012.vi")[:-5]),
                                     encoding="utf-8")
    res = _run("prepare_iwslt15_en_vi.sh", IWSLT_DIR=raw, SMOKE=1, DEST=tmp_path / "bin")
    assert res.returncode == 2
    assert "tst2012.en has 1553 lines" in res.stderr and "tst2012.vi has 1548 lines" in res.stderr
    (raw / "vocab.vi").unlink()
    res = _run("prepare_iwslt15_en_vi.sh", IWSLT_DIR=raw, SMOKE=1, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "missing file(s)" in res.stderr and "vocab.vi" in res.stderr


def test_vocab_conversion_rejects_bad_entries(tmp_path):
    common = _load("common")
    good = tmp_path / "v.txt"
    good.write_text("<unk>\n<s>\n</s>\nthe\n,\nof\n", encoding="utf-8")
    assert common.vocab_to_fairseq_dict(good, tmp_path / "d.txt") == 3
    assert _lines(tmp_path / "d.txt") == ["the 3", ", 2", "of 1"]
    for body, line, what in (("a\nb\na\n", 3, "duplicate"), ("a\n\nb\n", 2, "empty"),
                             ("a\nb c\n", 2, "whitespace"), ("a\n<pad>\n", 2, "special")):
        bad = tmp_path / "bad.txt"
        bad.write_text(body, encoding="utf-8")
        with pytest.raises(common.DataError, match=rf"bad\.txt:{line}: .*{what}"):
            common.vocab_to_fairseq_dict(bad, tmp_path / "d2.txt")
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"a\r\nb\r\n")
    with pytest.raises(common.DataError, match=r"crlf\.txt:1: carriage return"):
        common.read_lines(crlf)


# ------------------------------------------------------------------------------------------------- WMT
@pytest.fixture(scope="module")
def wmt_dir():
    d = SHARED_DATA / "wmt16_en_ro"
    if not d.is_dir():
        pytest.skip(f"{d} is not present (set ACVI_DATA to the real-data root holding wmt16_en_ro/)")
    return d


@pytest.fixture(scope="module")
def wmt_bin(wmt_dir, tmp_path_factory):
    dest = tmp_path_factory.mktemp("wmt") / "bin"
    # no WMT_DIR: SMOKE=1 finds $ACVI_DATA/wmt16_en_ro
    res = _run("prepare_wmt16_en_ro.sh", ACVI_DATA=wmt_dir.parent, SMOKE=1, DEST=dest, SRC="ro", TGT="en",
               VOCAB_SIZE=2000)
    assert res.returncode == 0, res.stderr[-4000:]
    assert f"SMOKE: using $ACVI_DATA/wmt16_en_ro: {wmt_dir}" in res.stderr
    return dest


def test_wmt_joint_dictionary_is_the_sentencepiece_vocabulary(wmt_bin):
    import sentencepiece as spm
    from fairseq.data import Dictionary
    sp = spm.SentencePieceProcessor(model_file=str(wmt_bin / "spm.model"))
    assert sp.get_piece_size() == 2000
    assert (wmt_bin / "dict.en.txt").read_bytes() == (wmt_bin / "dict.ro.txt").read_bytes()
    d = Dictionary.load(str(wmt_bin / "dict.ro.txt"))
    assert len(d) == sp.get_piece_size() - 3 + 4
    assert [d[i] for i in range(d.nspecial, len(d))] == [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]


def test_wmt_splits_and_sentencepiece_round_trip(wmt_bin, wmt_dir):
    import sentencepiece as spm
    from fairseq.data import Dictionary
    sp = spm.SentencePieceProcessor(model_file=str(wmt_bin / "spm.model"))
    d = Dictionary.load(str(wmt_bin / "dict.en.txt"))
    text = {l: _lines(wmt_dir / f"newsdev2016.{l}") for l in ("en", "ro")}
    spans = {"train": (0, 1599), "valid": (1599, 1799), "test": (1799, 1999)}
    for split, (lo, hi) in spans.items():
        for lang in ("ro", "en"):
            ds = _dataset(wmt_bin / f"{split}.ro-en.{lang}", d)
            assert len(ds) == hi - lo
            for i in (0, hi - lo - 1):
                pieces = d.string(ds[i]).split(" ")
                assert "<unk>" not in pieces or split != "train"
                if "<unk>" not in pieces:  # binarised pieces decode back to the raw sentence
                    assert sp.decode_pieces(pieces) == " ".join(text[lang][lo + i].split())
    s = "Fostul șef al cabinetului prezidențial brazilian este adus în fața instanței"
    assert sp.decode(sp.encode(s)) == s
    assert len(sp.encode(s, out_type=str)) > len(s.split())  # subword units, not whole words
    assert _lines(wmt_bin / "raw" / "test.en") == text["en"][1799:]
    assert "SMOKE" in (wmt_bin / "PROVENANCE.txt").read_text()


def test_wmt_bad_inputs_name_the_file(wmt_dir, tmp_path):
    res = _run("prepare_wmt16_en_ro.sh", WMT_DIR=wmt_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "no training corpus" in res.stderr and "europarl-v8.ro-en.en" in res.stderr
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(wmt_dir / "newsdev2016.en", raw / "newsdev2016.en")
    res = _run("prepare_wmt16_en_ro.sh", WMT_DIR=raw, SMOKE=1, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "newsdev2016.ro" in res.stderr
    (raw / "newsdev2016.ro").write_text("".join(l + "\n" for l in _lines(wmt_dir / "newsdev2016.ro")[:-1]),
                                        encoding="utf-8")
    res = _run("prepare_wmt16_en_ro.sh", WMT_DIR=raw, SMOKE=1, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "newsdev2016.ro has 1998 lines" in res.stderr
    assert not (tmp_path / "bin" / "spm.model").exists()


def test_sgm_reader(tmp_path):
    wmt = _load("prepare_wmt16_en_ro")
    sgm = tmp_path / "newsdev2016-enro-src.en.sgm"
    sgm.write_text('<srcset setid="x">\n<doc docid="1">\n<seg id="1">A & B</seg>\n<seg id="2"> c </seg>\n'
                   "</doc>\n</srcset>\n", encoding="utf-8")
    assert wmt.read_sgm(sgm) == ["A & B", "c"]
    (tmp_path / "newsdev2016-enro-ref.ro.sgm").write_text('<seg id="1">a</seg>\n<seg id="2">b</seg>\n',
                                                          encoding="utf-8")
    assert wmt.read_eval_set(tmp_path, "newsdev2016", "ro", "en") == (["a", "b"], ["A & B", "c"])
    sgm.write_text('<seg id="1">broken\n', encoding="utf-8")
    with pytest.raises(wmt.DataError, match=r"src\.en\.sgm:1: malformed"):
        wmt.read_sgm(sgm)


# ------------------------------------------------------------------------------------ input location
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",  # refused at once
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}


@pytest.mark.parametrize("script, variable, extra", [
    ("prepare_iwslt15_en_vi", "IWSLT_DIR", ["--smoke"]),
    ("prepare_wmt16_en_ro", "WMT_DIR", ["--smoke"]),
    ("prepare_multi30k", "MULTI30K_DIR", []),
])
def test_no_input_location_downloads_and_offline_stops_naming_both_variables(tmp_path, script, variable, extra):
    """Neither the script's own variable (--raw-dir) nor ACVI_DATA: no path outside the repository is
    tried, the script downloads into --download-dir, and when that fails it exits 2 naming both."""
    env = dict(os.environ, OMP_NUM_THREADS="1", **OFFLINE)
    for k in ("ACVI_DATA", variable):
        env.pop(k, None)
    dl = tmp_path / "dl"
    res = subprocess.run([sys.executable, str(SCRIPTS / f"{script}.py"), *extra, "--download-dir", str(dl),
                          "--dest", str(tmp_path / "bin")], capture_output=True, text=True, env=env,
                         cwd=str(REPO), timeout=120)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "could not download" in res.stderr and variable in res.stderr and "ACVI_DATA" in res.stderr
    assert "[data] downloading http" in res.stderr
    assert not (tmp_path / "bin").exists()


@pytest.mark.parametrize("script, sub", [("prepare_iwslt15_en_vi", "iwslt15_en_vi"),
                                         ("prepare_wmt16_en_ro", "wmt16_en_ro"),
                                         ("prepare_multi30k", "multi30k")])
def test_the_data_root_comes_from_acvi_data_only(tmp_path, monkeypatch, script, sub):
    """SHARED_COPY is $ACVI_DATA/<sub>, and nothing when ACVI_DATA is unset (no default path)."""
    monkeypatch.setenv("ACVI_DATA", str(tmp_path / "root"))
    assert _load(script).SHARED_COPY == tmp_path / "root" / sub
    monkeypatch.delenv("ACVI_DATA")
    assert _load(script).SHARED_COPY is None
    monkeypatch.setenv("ACVI_DATA", "")
    assert _load(script).SHARED_COPY is None


def test_iwslt_uses_the_acvi_data_copy_in_smoke_mode_only(tmp_path, monkeypatch):
    """The copy under ACVI_DATA has no training set: SMOKE uses it, a full build downloads; an explicit
    IWSLT_DIR (--raw-dir) wins over both."""
    (tmp_path / "root" / "iwslt15_en_vi").mkdir(parents=True)
    monkeypatch.setenv("ACVI_DATA", str(tmp_path / "root"))
    mod = _load("prepare_iwslt15_en_vi")
    urls = []
    monkeypatch.setattr(mod, "download", lambda url, dest: urls.append(url) or dest)
    assert mod.locate_input(None, True, tmp_path / "dl") == tmp_path / "root" / "iwslt15_en_vi"
    assert urls == []
    assert mod.locate_input(None, False, tmp_path / "dl") == tmp_path / "dl"
    assert len(urls) == len(mod.needed_files(False)) and any(u.endswith("/train.en") for u in urls)
    assert mod.locate_input(str(tmp_path / "mine"), True, tmp_path / "dl") == tmp_path / "mine"


# --------------------------------------------------------------------------------------------- scorer
def test_bleu_scorer(tmp_path):
    score_mt = _load("score_mt")
    refs = ["Tôi đã rất tự hào về đất nước tôi .", "&quot; Không , &quot; anh ấy nói .",
            "Nó không phải là một câu chuyện đã kết thúc ."]
    (tmp_path / "ref").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    gen = "".join(f"S-{i}\tx\nH-{i}\t-0.5\t{refs[i]}\nD-{i}\t-0.5\t{refs[i]}\n" for i in (2, 0, 1))
    (tmp_path / "gen").write_text(gen, encoding="utf-8")
    hyps = score_mt.read_hypotheses(tmp_path / "gen", 3)
    assert hyps == refs  # reordered by sample id
    s = score_mt.score(hyps, refs, moses_lang="vi")
    assert s["bleu_detok"] == 100.0 and s["bleu_tok"] == 100.0
    import sacrebleu
    wrong = ["Tôi rất tự hào về đất nước .", refs[1], "Nó không phải là câu chuyện kết thúc ."]
    s = score_mt.score(wrong, refs)
    assert s["bleu_tok"] == round(sacrebleu.corpus_bleu(wrong, [refs], tokenize="none").score, 2) < 100
    # the Moses detokeniser undoes the escapes and re-attaches punctuation
    s_det = score_mt.score([refs[1]], [refs[1]], moses_lang="vi")
    assert s_det["bleu_detok"] == 100.0
    from sacremoses import MosesDetokenizer
    assert MosesDetokenizer(lang="vi").detokenize(refs[1].split(), unescape=True) == '"Không," anh ấy nói.'
    (tmp_path / "gen2").write_text("H-0\t-1\ta\nH-2\t-1\tb\n", encoding="utf-8")
    with pytest.raises(score_mt.DataError, match=r"gen2: 2 hypotheses for 3 references \(missing ids, first ones: \[1\]\)"):
        score_mt.read_hypotheses(tmp_path / "gen2", 3)


def test_bleu_scorer_pairs_two_decodes_by_bootstrap(tmp_path, capsys):
    score_mt = _load("score_mt")
    refs = [f"ein mann mit hut nummer {i} geht ." for i in range(40)]
    (tmp_path / "ref").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    worse = [r.replace("hut", "mütze") if i % 2 else r for i, r in enumerate(refs)]
    for name, hyps in (("good", refs), ("bad", worse)):
        (tmp_path / name).write_text("".join(f"H-{i}\t-1\t{h}\n" for i, h in enumerate(hyps)),
                                     encoding="utf-8")
    assert score_mt.main(["--gen", str(tmp_path / "good"), "--ref", str(tmp_path / "ref"),
                          "--against", str(tmp_path / "bad"), "--json", str(tmp_path / "s.json")]) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    import sacrebleu
    delta = 100 - sacrebleu.corpus_bleu(worse, [refs], tokenize="none").score
    assert s["bleu_tok"] == 100.0 and s["paired"]["against"] == "bad"
    assert s["paired"]["delta"] == pytest.approx(delta, abs=1e-4)
    assert 0 < s["paired"]["low"] < delta < s["paired"]["high"] and s["paired"]["p_other_better"] == 1.0
    assert "vs bad: tokenised BLEU +" in capsys.readouterr().out
    (tmp_path / "short").write_text("H-0\t-1\ta\n", encoding="utf-8")     # another test set
    with pytest.raises(score_mt.DataError, match="short: 1 hypotheses for 40 references"):
        score_mt.main(["--gen", str(tmp_path / "good"), "--ref", str(tmp_path / "ref"),
                       "--against", str(tmp_path / "short")])
