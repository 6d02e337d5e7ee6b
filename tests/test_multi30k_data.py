"""data_scripts/prepare_multi30k.{sh,py}: Multi30K task 1 -> fairseq data-bin (word level, tok/ text).

A small fake Multi30K folder (the first 300 train / 40 val and test lines of the shared copy, or synthetic
text where the shared copy is absent) is run through the shell entry point; the binarised data are read
back with fairseq and compared with the text they came from. Bad inputs must stop the script (exit 2)
with a message naming the file (and line). One test builds the real En->De data from the shared copy.
"""
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import SHARED_DATA, fast_python

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "data_scripts"
M30K = SHARED_DATA / "multi30k"
LANGS = ("en", "de", "fr", "cs")
# corpus file stem -> languages it exists in (Multi30K has no Czech test_2017_flickr)
STEMS = {"train": LANGS, "val": LANGS, "test_2016_flickr": LANGS, "test_2017_flickr": ("en", "de", "fr")}
N_TRAIN, N_OTHER = 300, 40


def _tok(stem, lang):
    return f"{stem}.lc.norm.tok.{lang}"


def _lines(path):
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def _write(path, lines):
    Path(path).write_text("".join(l + "\n" for l in lines), encoding="utf-8")


def _run(**env):
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable, **{k: str(v) for k, v in env.items()})
    for k in ("SRC", "TGT", "DEST", "MULTI30K_DIR", "THRESHOLD", "TRAIN_LINES", "WORKERS"):
        if k not in env:
            full.pop(k, None)
    return subprocess.run(["bash", str(SCRIPTS / "prepare_multi30k.sh")], capture_output=True, text=True,
                          env=full, cwd=str(REPO), timeout=600)


def _load_script():
    spec = importlib.util.spec_from_file_location("_m30k_prepare_multi30k", SCRIPTS / "prepare_multi30k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dataset(prefix, dictionary):
    from fairseq.data import data_utils
    ds = data_utils.load_indexed_dataset(str(prefix), dictionary)
    assert ds is not None, f"no binarised data at {prefix}"
    return ds


def _dicts(dest, *langs):
    from fairseq.data import Dictionary
    return {l: Dictionary.load(str(dest / f"dict.{l}.txt")) for l in langs}


def _with_unk(d, line):
    return " ".join(w if d.index(w) != d.unk() else d.unk_word for w in line.split())


def _synthetic(rng, lang, n):
    # Zipf-like word draws: frequent words, words seen twice and singletons all occur
    return [" ".join(f"{lang}{int(rng.paretovariate(1.0))}" for _ in range(rng.randint(4, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory):
    """A Multi30K task-1 folder (tok/ only) with N_TRAIN train and N_OTHER val/test lines per language."""
    root = tmp_path_factory.mktemp("m30k") / "fake_multi30k"
    (root / "tok").mkdir(parents=True)
    rng = random.Random(0)
    for stem, langs in STEMS.items():
        n = N_TRAIN if stem == "train" else N_OTHER
        for lang in langs:
            src = M30K / "tok" / _tok(stem, lang)
            lines = _lines(src)[:n] if src.is_file() else _synthetic(rng, lang, n)
            _write(root / "tok" / _tok(stem, lang), lines)
    return root


@pytest.fixture(scope="module")
def fake_bin(fake_dir, tmp_path_factory):
    dest = tmp_path_factory.mktemp("m30k_bin") / "bin"
    res = _run(MULTI30K_DIR=fake_dir, SRC="en", TGT="de", DEST=dest)
    assert res.returncode == 0, res.stderr[-4000:]
    return dest


@pytest.fixture
def bad_dir(fake_dir, tmp_path):
    """A private copy of the fake folder for a test to break."""
    d = tmp_path / "broken_multi30k"
    shutil.copytree(fake_dir, d)
    return d


# --------------------------------------------------------------------------------------------- fake slice
def test_splits_counts_and_provenance(fake_bin, fake_dir):
    splits = json.loads((fake_bin / "splits.json").read_text())
    assert splits == {"train": "train", "valid": "valid", "test2016": "test", "test2017": "test1"}
    d = _dicts(fake_bin, "en", "de")
    want = {"train": N_TRAIN, "valid": N_OTHER, "test": N_OTHER, "test1": N_OTHER}
    for subset, n in want.items():
        for lang in ("en", "de"):
            assert len(_dataset(fake_bin / f"{subset}.en-de.{lang}", d[lang])) == n
    prov = (fake_bin / "PROVENANCE.txt").read_text()
    assert f"sentences: train={N_TRAIN}, valid={N_OTHER}, test2016={N_OTHER}, test2017={N_OTHER}" in prov
    assert "input folder: fake_multi30k " in prov and str(fake_dir) not in prov  # a name, not a path
    assert f"train = all {N_TRAIN} training pairs" in prov and "FIRST" not in prov
    assert "lc.norm.tok" in prov and "threshold 2" in prov
    assert 'splits.json: {"train": "train", "valid": "valid", "test2016": "test", "test2017": "test1"}' in prov
    assert f"en={len(d['en']) - 4} + 4 = {len(d['en'])}" in prov


def test_binarised_splits_decode_to_the_aligned_text(fake_bin, fake_dir):
    d = _dicts(fake_bin, "en", "de")
    stems = {"train": "train", "valid": "val", "test": "test_2016_flickr", "test1": "test_2017_flickr"}
    n_unk = 0
    for subset, stem in stems.items():
        for lang in ("en", "de"):
            text = _lines(fake_dir / "tok" / _tok(stem, lang))
            ds = _dataset(fake_bin / f"{subset}.en-de.{lang}", d[lang])
            assert len(ds) == len(text)
            for i, line in enumerate(text):  # line i of the en and the de file: the pair stays aligned
                assert d[lang].string(ds[i]) == _with_unk(d[lang], line), (subset, lang, i)
                assert ds[i][-1].item() == d[lang].eos()
                n_unk += int((ds[i] == d[lang].unk()).sum())
    assert n_unk > 0  # the threshold does map rare words to <unk>
    # the BLEU references are the tok files, byte for byte
    for split, stem in (("valid", "val"), ("test2016", "test_2016_flickr"), ("test2017", "test_2017_flickr")):
        for lang in ("en", "de"):
            assert (fake_bin / "raw" / f"{split}.{lang}").read_bytes() == \
                (fake_dir / "tok" / _tok(stem, lang)).read_bytes()
    assert sorted(p.name for p in (fake_bin / "raw").iterdir()) == sorted(
        f"{s}.{l}" for s in ("valid", "test2016", "test2017") for l in ("en", "de"))


def test_dictionaries_honour_the_threshold(fake_bin, fake_dir):
    d = _dicts(fake_bin, "en", "de")
    for lang in ("en", "de"):
        train = _lines(fake_dir / "tok" / _tok("train", lang))
        counts = Counter(w for line in train for w in line.split())
        words = {d[lang][i] for i in range(d[lang].nspecial, len(d[lang]))}
        assert words == {w for w, c in counts.items() if c >= 2}  # exactly: no fillers, separate dicts
        assert len(d[lang]) == len(words) + 4
        once = [w for w, c in counts.items() if c == 1]
        twice = [w for w, c in counts.items() if c == 2]
        assert once and twice
        assert d[lang].index(once[0]) == d[lang].unk() and d[lang].index(twice[0]) != d[lang].unk()
        i = next(k for k, line in enumerate(train) if once[0] in line.split())
        ds = _dataset(fake_bin / f"train.en-de.{lang}", d[lang])
        assert ds[i][train[i].split().index(once[0])].item() == d[lang].unk()
    assert set(_lines(fake_bin / "dict.en.txt")) != set(_lines(fake_bin / "dict.de.txt"))


def test_train_lines_prefix(fake_dir, tmp_path):
    dest = tmp_path / "bin"
    res = _run(MULTI30K_DIR=fake_dir, SRC="de", TGT="en", DEST=dest, TRAIN_LINES=100, THRESHOLD=1)
    assert res.returncode == 0, res.stderr[-4000:]
    d = _dicts(dest, "de", "en")
    for lang in ("de", "en"):
        train = _lines(fake_dir / "tok" / _tok("train", lang))[:100]
        ds = _dataset(dest / f"train.de-en.{lang}", d[lang])
        assert len(ds) == 100
        assert [d[lang].string(ds[i]) for i in range(100)] == [" ".join(l.split()) for l in train]  # no <unk>
        # threshold 1 on the prefix: every word of the first 100 lines, nothing from the rest
        assert len(d[lang]) - 4 == len({w for line in train for w in line.split()})
        assert len(_dataset(dest / f"valid.de-en.{lang}", d[lang])) == N_OTHER
    prov = (dest / "PROVENANCE.txt").read_text()
    assert f"train = FIRST 100 of the {N_TRAIN} training pairs" in prov and "NOT the full corpus" in prov
    assert f"sentences: train=100, valid={N_OTHER}" in prov and "threshold 1" in prov
    res = _run(MULTI30K_DIR=fake_dir, DEST=tmp_path / "bin2", TRAIN_LINES=N_TRAIN + 1)
    assert res.returncode == 2 and f"--train-lines {N_TRAIN + 1}" in res.stderr and "train.lc.norm.tok.en" in res.stderr


def test_czech_has_no_test2017(fake_dir, tmp_path):
    dest = tmp_path / "bin"
    res = _run(MULTI30K_DIR=fake_dir, SRC="en", TGT="cs", DEST=dest)
    assert res.returncode == 0, res.stderr[-4000:]
    assert json.loads((dest / "splits.json").read_text()) == {"train": "train", "valid": "valid", "test2016": "test"}
    assert not list(dest.glob("test1.*")) and not list((dest / "raw").glob("test2017.*"))
    d = _dicts(dest, "cs")
    assert len(_dataset(dest / "test.en-cs.cs", d["cs"])) == N_OTHER
    prov = (dest / "PROVENANCE.txt").read_text()
    assert "test2017: NOT built" in prov and "Czech" in prov


# --------------------------------------------------------------------------------------------- bad input
def test_missing_files_are_all_named(bad_dir, tmp_path):
    (bad_dir / "tok" / _tok("val", "de")).unlink()
    (bad_dir / "tok" / _tok("test_2017_flickr", "en")).unlink()
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "missing file(s)" in res.stderr
    assert "val.lc.norm.tok.de" in res.stderr and "test_2017_flickr.lc.norm.tok.en" in res.stderr
    assert "MULTI30K_DIR" in res.stderr
    assert not (tmp_path / "bin").exists()


def test_line_count_mismatch_names_both_files(bad_dir, tmp_path):
    path = bad_dir / "tok" / _tok("val", "de")
    _write(path, _lines(path)[:-1])
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2
    assert f"val.lc.norm.tok.en has {N_OTHER} lines" in res.stderr
    assert f"val.lc.norm.tok.de has {N_OTHER - 1} lines" in res.stderr
    assert not (tmp_path / "bin").exists()


@pytest.mark.parametrize("blank", ["", " \t "])
def test_empty_line_names_file_and_line(bad_dir, tmp_path, blank):
    path = bad_dir / "tok" / _tok("test_2016_flickr", "de")
    lines = _lines(path)
    lines[6] = blank
    _write(path, lines)
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "test_2016_flickr.lc.norm.tok.de:7: empty line" in res.stderr
    assert not (tmp_path / "bin").exists()


def test_crlf_and_bad_utf8_name_file_and_line(bad_dir, tmp_path):
    path = bad_dir / "tok" / _tok("train", "en")
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "train.lc.norm.tok.en:1: carriage return" in res.stderr
    lines = _lines(bad_dir / "tok" / _tok("val", "en"))
    path.write_bytes("".join(l + "\n" for l in lines[:2]).encode() + b"caf\xe9\n" + b"x\n" * (N_TRAIN - 3))
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "train.lc.norm.tok.en:3: not UTF-8" in res.stderr
    assert not (tmp_path / "bin").exists()


def test_bad_language_options(fake_dir, tmp_path):
    res = _run(MULTI30K_DIR=fake_dir, SRC="de", TGT="de", DEST=tmp_path / "bin")
    assert res.returncode == 2 and "--src and --tgt must differ" in res.stderr
    res = _run(MULTI30K_DIR=fake_dir, SRC="en", TGT="ro", DEST=tmp_path / "bin")
    assert res.returncode == 2 and "invalid choice: 'ro'" in res.stderr
    assert not (tmp_path / "bin").exists()


# ------------------------------------------------------------------------------------- input location
def test_input_falls_back_to_download(fake_dir, tmp_path, monkeypatch):
    mod = _load_script()
    monkeypatch.setattr(mod, "SHARED_COPY", tmp_path / "absent")
    assert mod.locate_input(str(fake_dir), "en", "de", tmp_path / "dl") == fake_dir  # an explicit dir wins
    urls = []

    def fake_download(url, dest):
        urls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fake_dir / "tok" / url.rsplit("/", 1)[1], dest)
        return dest

    monkeypatch.setattr(mod, "download", fake_download)
    got = mod.locate_input(None, "en", "fr", tmp_path / "dl")
    assert got == tmp_path / "dl"
    base = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/tok/"
    assert urls == [base + _tok(s, l) for s in ("train", "val", "test_2016_flickr", "test_2017_flickr")
                    for l in ("en", "fr")]
    assert (got / "tok" / _tok("test_2017_flickr", "fr")).read_bytes() == \
        (fake_dir / "tok" / _tok("test_2017_flickr", "fr")).read_bytes()

    def failing_download(url, dest):
        raise mod.DataError(f"could not download {url} (URLError: offline)")

    monkeypatch.setattr(mod, "download", failing_download)
    with pytest.raises(mod.DataError, match=r"(?s)could not download .*train\.lc\.norm\.tok\.en.*Set MULTI30K_DIR"):
        mod.locate_input(None, "en", "de", tmp_path / "dl2")
    # with the shared copy present and no dir given, the shared copy is used
    monkeypatch.setattr(mod, "SHARED_COPY", fake_dir)
    assert mod.locate_input(None, "en", "de", tmp_path / "dl3") == fake_dir


# ----------------------------------------------------------------------------------- real shared copy
def test_real_multi30k_en_de(tmp_path):
    if not (M30K / "tok").is_dir():
        pytest.skip(f"the shared Multi30K copy ({M30K}) is not present")
    dest = tmp_path / "bin"
    res = _run(MULTI30K_DIR=M30K, SRC="en", TGT="de", DEST=dest)
    assert res.returncode == 0, res.stderr[-4000:]
    splits = json.loads((dest / "splits.json").read_text())
    assert splits == {"train": "train", "valid": "valid", "test2016": "test", "test2017": "test1"}
    d = _dicts(dest, "en", "de")
    # threshold 2 on the 29,000 training pairs: 5,917 English and 7,855 German words (+ 4 specials)
    assert (len(d["en"]), len(d["de"])) == (5917 + 4, 7855 + 4)
    for lang in ("en", "de"):
        train = _lines(M30K / "tok" / _tok("train", lang))
        counts = Counter(w for line in train for w in line.split())
        assert {d[lang][i] for i in range(4, len(d[lang]))} == {w for w, c in counts.items() if c >= 2}
    want = {"train": ("train", 29000), "valid": ("val", 1014), "test2016": ("test_2016_flickr", 1000),
            "test2017": ("test_2017_flickr", 1000)}
    for split, (stem, n) in want.items():
        for lang in ("en", "de"):
            text = _lines(M30K / "tok" / _tok(stem, lang))
            ds = _dataset(dest / f"{splits[split]}.en-de.{lang}", d[lang])
            assert len(ds) == len(text) == n
            for i in (0, n // 2, n - 1):
                assert d[lang].string(ds[i]) == _with_unk(d[lang], text[i])
            if split != "train":
                assert (dest / "raw" / f"{split}.{lang}").read_bytes() == (M30K / "tok" / _tok(stem, lang)).read_bytes()
    prov = (dest / "PROVENANCE.txt").read_text()
    assert "sentences: train=29000, valid=1014, test2016=1000, test2017=1000" in prov
    assert "input folder: multi30k " in prov and "en=5917 + 4 = 5921, de=7855 + 4 = 7859" in prov


# --------------------------------------------------------------------------------------------- the recipe
def _recipe(data_bin, runs, **env):
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=fast_python(), DATA_BIN=str(data_bin),
                RUNS=str(runs), BEAM="2", GEN_BATCH="16", **{k: str(v) for k, v in env.items()})
    return subprocess.run(["bash", str(REPO / "recipes" / "mt_multi30k.sh"), "--max-update", "2",
                           "--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim",
                           "16", "--decoder-hidden-size", "16", "--decoder-out-embed-dim", "16"],
                          capture_output=True, text=True, env=full, cwd=str(REPO), timeout=900)


def test_recipe_smoke_acvi_and_fairseq_lstm_then_report(fake_bin, tmp_path):
    """recipes/mt_multi30k.sh with a tiny budget: train -> checkpoint -> decode every split, the
    source-use ablation and the K sweep through the stock CLIs; then the report reads the runs."""
    runs = tmp_path / "runs"
    res = _recipe(fake_bin, runs, CONTEXT="acvi", MAX_EPOCH=1, MC_SWEEP="0", TAG="tiny")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run = runs / "en_de" / "acvi-tiny_seed1"
    names = ["valid", "test2016", "test2017", "valid_ablate-zero", "valid_ablate-shuffle"] + \
        [f"{s}_K{k}" for s in ("valid", "test2016", "test2017") for k in (0,)]
    for name in names:
        b = json.loads((run / f"bleu_{name}.json").read_text())
        assert b["n"] == N_OTHER and 0.0 <= b["bleu_tok"] <= 100.0
        assert b["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "signature nrefs:1" in res.stdout            # the sacreBLEU signature is printed
    ablate = json.loads((run / "ablate.json").read_text())
    assert (ablate["base"], ablate["mc_samples"]) == ("valid_K0", 0)
    # the decodes of the sampled context and the ablations are paired with the mean context's
    for name in ("valid", "valid_ablate-zero", "valid_ablate-shuffle"):
        paired = json.loads((run / f"bleu_{name}.json").read_text())["paired"]
        assert paired["against"] == "gen_valid_K0.txt" and paired["low"] <= paired["delta"] <= paired["high"]
    assert "paired" not in json.loads((run / "bleu_valid_K0.json").read_text())
    assert "vs gen_valid_K0.txt: tokenised BLEU" in res.stdout
    meta = json.loads((run / "run.json").read_text())
    assert (meta["context"], meta["tag"], meta["seed"], meta["max_epoch"]) == ("acvi", "tiny", 1, 1)
    # SKIP_DONE=1 resumes an evaluation cut short: what exists after the checkpoint is kept, the
    # missing decode is made; a newer checkpoint makes its evaluations stale again
    kept = {n: (run / f"bleu_{n}.json").stat().st_mtime_ns for n in ("valid", "test2016")}
    (run / "bleu_test2017.json").unlink()
    (run / "validate_valid.log").write_text("INFO | fairseq_cli.validate | loading\n")   # cut short
    res = _recipe(fake_bin, runs, CONTEXT="acvi", TAG="tiny", TRAIN=0, SKIP_DONE=1)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads((run / "bleu_test2017.json").read_text())["n"] == N_OTHER
    assert {n: (run / f"bleu_{n}.json").stat().st_mtime_ns for n in kept} == kept
    assert "kept (SKIP_DONE=1)" in res.stdout and "bleu_test2017.json" not in res.stdout
    assert "| valid | {" in (run / "validate_valid.log").read_text()                   # made again
    (run / "checkpoint_best.pt").touch()
    res = _recipe(fake_bin, runs, CONTEXT="acvi", TAG="tiny", TRAIN=0, SKIP_DONE=1, EVAL_SPLITS="valid",
                  ABLATE=0, MC_SWEEP="2", MC_COMBINE="geometric", MC_SAMPLING="antithetic",
                  MC_GEN_SEED="2")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (run / "bleu_valid.json").stat().st_mtime_ns > kept["valid"]
    assert json.loads((run / "bleu_valid_K2-geometric-antithetic-seed2.json").read_text())["n"] == N_OTHER
    assert "'seed': 2" in res.stdout + res.stderr                     # fairseq-generate --seed 2
    # fairseq logs the overrides
    assert "'mc_combine': 'geometric', 'mc_sampling': 'antithetic'" in res.stdout + res.stderr
    # a rule asked for is imposed on the model, whatever the checkpoint's own default, and names the
    # decode (the presets' ACVI decodes antithetic: MC_SAMPLING=iid must not fall back on that)
    res = _recipe(fake_bin, runs, CONTEXT="acvi", TAG="tiny", TRAIN=0, EVAL_SPLITS="valid",
                  DEFAULT_DECODE=0, ABLATE=0, MC_SWEEP="2", MC_SAMPLING="iid")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "{'mc_samples': 2, 'mc_sampling': 'iid'}" in res.stdout + res.stderr
    assert json.loads((run / "bleu_valid_K2-iid.json").read_text())["n"] == N_OTHER
    # fairseq's own LSTM through the same recipe (valid only), then the report over both runs
    res = _recipe(fake_bin, runs, CONTEXT="lstm", MAX_EPOCH=1, EVAL_SPLITS="valid")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (runs / "en_de" / "lstm_seed1" / "bleu_valid.json").is_file()
    assert not (runs / "en_de" / "lstm_seed1" / "bleu_test2016.json").exists()
    from fairseq_acvi.cli import mt_report
    out = tmp_path / "report"
    assert mt_report.main([str(runs), "--out-dir", str(out), "--no-charts"]) == 0
    data = json.loads((out / "results.json").read_text())
    by_variant = {r["variant"]: r for r in data["runs"]}
    assert set(by_variant) == {"acvi-tiny", "lstm"}
    acvi = by_variant["acvi-tiny"]
    assert acvi["best_epoch"] == 1 and acvi["valid_ppl"] > 1.0
    assert set(acvi["end"]) == {"kl", "kl_true", "kl_mean_part", "kl_var_part", "ctx_norm2", "ctx_var"}
    assert acvi["end"]["kl"] == pytest.approx(acvi["end"]["kl_mean_part"] + acvi["end"]["kl_var_part"], rel=1e-3)
    assert set(acvi["source_use"]) == {"zero", "shuffle"} and "ppl_ratio" in acvi["source_use"]["zero"]
    assert set(acvi["mc_sweep"]) == {"valid", "test2016", "test2017"}
    # valid was decoded again for the newer checkpoint, whose K = 0 decode is not made: unpaired
    assert "paired" not in acvi["bleu"]["valid"] and "paired" in acvi["bleu"]["valid_ablate-zero"]
    assert "| acvi-tiny | 1 | valid_ablate-zero | valid_K0 | " in (out / "report.md").read_text()
    assert by_variant["lstm"]["valid_ppl"] > 1.0 and "end" in by_variant["lstm"]


def test_recipe_rejects_bad_options(tmp_path):
    res = _recipe(tmp_path / "nowhere", tmp_path / "runs", CONTEXT="transformer")
    assert res.returncode == 2 and "CONTEXT must be" in res.stderr
    res = _recipe(tmp_path / "nowhere", tmp_path / "runs", MC_COMBINE="mean")
    assert res.returncode == 2 and "MC_COMBINE must be prob|geometric, got 'mean'" in res.stderr
    res = _recipe(tmp_path / "nowhere", tmp_path / "runs", MC_SAMPLING="sobol")
    assert res.returncode == 2 and "MC_SAMPLING must be iid|antithetic, got 'sobol'" in res.stderr
    res = _recipe(tmp_path / "nowhere", tmp_path / "runs", MC_GEN_SEED="two")
    assert res.returncode == 2 and "MC_GEN_SEED must be a whole number, got 'two'" in res.stderr
    res = _recipe(tmp_path / "nowhere", tmp_path / "runs", EVAL_SPLITS="valid test2018")
    assert res.returncode == 2 and ("EVAL_SPLITS must be a ' '-separated list of valid|test2016|test2017, "
                                    "got 'valid test2018'") in res.stderr


def test_sparsemax_warm_start_control_continues_the_softmax_checkpoint(fake_bin, tmp_path):
    """experiments/sparsemax_controls.sh warm: softmax for WARM_EPOCHS epochs (decoded on valid only),
    then the same model trained on with sparsemax from that checkpoint to MAX_EPOCH and decoded on
    every split; the controls' options are checked before anything runs."""
    runs = tmp_path / "runs"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=fast_python(), DATA_BIN=str(fake_bin),
               RUNS=str(runs), BEAM="2", GEN_BATCH="16", WARM_EPOCHS="1", MAX_EPOCH="2")
    tiny = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
            "--decoder-hidden-size", "16", "--decoder-out-embed-dim", "16"]
    script = str(REPO / "experiments" / "sparsemax_controls.sh")
    res = subprocess.run(["bash", script, "warm", *tiny], capture_output=True, text=True, env=env,
                         cwd=str(REPO), timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    first, second = runs / "en_de" / "soft-softmax-e1_seed1", runs / "en_de" / "soft-sparsemax-warm1_seed1"
    assert (first / "bleu_valid.json").is_file() and not (first / "bleu_test2016.json").exists()
    for split in ("valid", "test2016", "test2017"):
        assert json.loads((second / f"bleu_{split}.json").read_text())["n"] == N_OTHER
    log = (second / "train.log").read_text()
    # the first stage's log was copied, then the second stage loaded its epoch-1 checkpoint
    assert "attention_normalizer='softmax'" in log and "attention_normalizer='sparsemax'" in log
    assert log.index("attention_normalizer='softmax'") < log.index("attention_normalizer='sparsemax'")
    tail = log[log.index("attention_normalizer='sparsemax'"):]
    loaded = re.search(r"Loaded checkpoint \S+checkpoint_last\.pt \(epoch 2 @ (\d+) updates\)", tail)
    assert loaded and int(loaded.group(1)) > 0            # resumed after the softmax epoch, not from scratch
    assert f'"valid_num_updates": "{2 * int(loaded.group(1))}"' in tail   # and trained one more epoch
    assert json.loads((second / "run.json").read_text())["max_epoch"] == 2
    # a bad option is refused before anything is trained
    bad = subprocess.run(["bash", script, "warm"], capture_output=True, text=True, cwd=str(REPO),
                         env=dict(env, WARM_EPOCHS="2"), timeout=60)
    assert bad.returncode == 2 and "WARM_EPOCHS (2) must be below MAX_EPOCH (2)" in bad.stderr
