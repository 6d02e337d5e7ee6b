"""Planning attention's data and recipe (docs/method.md §3.4): Multi30K with a BPE source and a
character target (data_scripts/prepare_multi30k_char.{sh,py}), the character detokenisation and
chrF of data_scripts/score_mt.py, the presets pag_lstm_wmt15 / pag_lstm_multi30k_char, and
recipes/mt_pag.sh.

The fake Multi30K folder (first 300 train / 40 val and test lines of the shared copy, or synthetic text)
and its helpers are test_multi30k_data.py's.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fast_python
from test_multi30k_data import (M30K, N_OTHER, N_TRAIN, SCRIPTS, _dataset, _dicts, _lines, _tok,  # noqa: F401
                                _write, bad_dir, fake_dir)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCRIPTS))
import prepare_multi30k_char as char_data  # noqa: E402
import score_mt  # noqa: E402

B = char_data.BOUNDARY
#: the fake folder holds the shared copy's first lines, or synthetic text (no ACVI_DATA) whose
#: 300 lines support only about 110 BPE pieces
REAL_TEXT = (M30K / "tok" / _tok("train", "en")).is_file()
VOCAB = 500 if REAL_TEXT else 100
TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
        "--decoder-hidden-size", "16", "--decoder-out-embed-dim", "16", "--attention-dim", "16"]


def _run(**env):
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable, **{k: str(v) for k, v in env.items()})
    for k in ("SRC", "TGT", "DEST", "MULTI30K_DIR", "VOCAB_SIZE", "TRAIN_LINES", "WORKERS"):
        if k not in env:
            full.pop(k, None)
    return subprocess.run(["bash", str(SCRIPTS / "prepare_multi30k_char.sh")], capture_output=True, text=True,
                          env=full, cwd=str(REPO), timeout=600)


@pytest.fixture(scope="module")
def char_bin(fake_dir, tmp_path_factory):
    dest = tmp_path_factory.mktemp("m30k_char") / "bin"
    res = _run(MULTI30K_DIR=fake_dir, SRC="en", TGT="de", DEST=dest, VOCAB_SIZE=VOCAB)
    assert res.returncode == 0, res.stderr[-4000:]
    return dest


# ------------------------------------------------------------------------------------------- the data
def test_splits_counts_dictionaries_and_provenance(char_bin, fake_dir):
    import sentencepiece as spm
    splits = json.loads((char_bin / "splits.json").read_text())
    assert splits == {"train": "train", "valid": "valid", "test2016": "test", "test2017": "test1"}
    d = _dicts(char_bin, "en", "de")
    for subset, n in {"train": N_TRAIN, "valid": N_OTHER, "test": N_OTHER, "test1": N_OTHER}.items():
        for lang in ("en", "de"):
            assert len(_dataset(char_bin / f"{subset}.en-de.{lang}", d[lang])) == n
    sp = spm.SentencePieceProcessor(model_file=str(char_bin / "spm.model"))
    assert sp.get_piece_size() == VOCAB
    assert [d["en"][i] for i in range(4, len(d["en"]))] == [sp.id_to_piece(i) for i in range(3, VOCAB)]
    train_de = _lines(fake_dir / "tok" / _tok("train", "de"))
    assert {d["de"][i] for i in range(4, len(d["de"]))} == {c for l in train_de for c in l if c != " "} | {B}
    prov = (char_bin / "PROVENANCE.txt").read_text()
    assert f"sentences: train={N_TRAIN}, valid={N_OTHER}, test2016={N_OTHER}, test2017={N_OTHER}" in prov
    assert f"pieces {VOCAB} (requested {VOCAB}); fairseq dictionary {VOCAB - 3} pieces + 4 specials" in prov
    assert "threshold 0, padding factor 1" in prov and "U+2581" in prov and "input folder: fake_multi30k " in prov
    # the BLEU / chrF references are the tok word text, byte for byte
    for split, stem in (("valid", "val"), ("test2016", "test_2016_flickr"), ("test2017", "test_2017_flickr")):
        for lang in ("en", "de"):
            assert (char_bin / "raw" / f"{split}.{lang}").read_bytes() == \
                (fake_dir / "tok" / _tok(stem, lang)).read_bytes()


def test_target_is_characters_with_a_boundary_aligned_with_the_source(char_bin, fake_dir):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(char_bin / "spm.model"))
    d = _dicts(char_bin, "en", "de")
    stems = {"train": "train", "valid": "val", "test": "test_2016_flickr", "test1": "test_2017_flickr"}
    for subset, stem in stems.items():
        src = _lines(fake_dir / "tok" / _tok(stem, "en"))
        tgt = _lines(fake_dir / "tok" / _tok(stem, "de"))
        ds_src = _dataset(char_bin / f"{subset}.en-de.en", d["en"])
        ds_tgt = _dataset(char_bin / f"{subset}.en-de.de", d["de"])
        for i in range(0, len(src), 7):   # line i of both sides comes from line i of both files
            chars = d["de"].string(ds_tgt[i])
            want = []
            for j, word in enumerate(tgt[i].split()):
                want += ([B] if j else []) + list(word)
            if subset == "train":          # every training character is in the dictionary
                assert chars == " ".join(want) == char_data.text_to_chars(tgt[i])
            assert chars.split(" ").count(B) == len(tgt[i].split()) - 1 or "<unk>" in chars
            assert all(len(t) == 1 for t in chars.split(" ")) or "<unk>" in chars
            if "<unk>" not in chars:
                assert char_data.chars_to_text(chars) == tgt[i]
            assert ds_tgt[i][-1].item() == d["de"].eos()
            pieces = d["en"].string(ds_src[i]).split(" ")
            assert pieces == sp.encode(src[i], out_type=str) or "<unk>" in pieces
            assert "".join(pieces).replace(B, " ").strip() == src[i] or "<unk>" in pieces
    assert char_data.text_to_chars("ein hund .") == f"e i n {B} h u n d {B} ."


def test_source_bpe_is_subword_and_learnt_from_the_training_source_only(char_bin, fake_dir):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(char_bin / "spm.model"))
    train_en = _lines(fake_dir / "tok" / _tok("train", "en"))
    seen = {c for l in train_en for c in l}
    piece_chars = {c for i in range(3, sp.get_piece_size()) for c in sp.id_to_piece(i)} - {B}
    assert piece_chars <= seen        # nothing from the target side or the held-out splits
    words = [w for l in train_en for w in l.split()]
    assert any(len(sp.encode(w)) > 1 for w in words)                    # rare words are split ...
    assert sum(len(sp.encode(l)) for l in train_en) >= len(words)      # ... frequent ones stay whole
    assert any(len(p) > 2 for p in (sp.id_to_piece(i) for i in range(3, sp.get_piece_size())))


def test_bpe_stops_below_a_vocabulary_the_text_cannot_support(fake_dir, tmp_path):
    """The default 8,000 pieces on a 50-line slice: sentencepiece stops early instead of failing
    (PROVENANCE.txt then reports pieces and the requested size)."""
    train = tmp_path / "train.en"
    _write(train, _lines(fake_dir / "tok" / _tok("train", "en"))[:50])
    sp = char_data.train_source_bpe(train, tmp_path / "spm", char_data.VOCAB_DEFAULT, 1)
    assert (100 if REAL_TEXT else 20) < sp.get_piece_size() < char_data.VOCAB_DEFAULT
    assert (tmp_path / "spm.model").is_file() and char_data.VOCAB_DEFAULT == 8000


# ------------------------------------------------------------------------------------------ bad input
def test_missing_file_is_named(bad_dir, tmp_path):
    (bad_dir / "tok" / _tok("test_2016_flickr", "de")).unlink()
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "missing file(s)" in res.stderr
    assert "test_2016_flickr.lc.norm.tok.de" in res.stderr and "MULTI30K_DIR" in res.stderr
    assert not (tmp_path / "bin").exists()


def test_line_count_mismatch_names_both_files(bad_dir, tmp_path):
    path = bad_dir / "tok" / _tok("train", "de")
    _write(path, _lines(path)[:-2])
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2
    assert f"train.lc.norm.tok.en has {N_TRAIN} lines" in res.stderr
    assert f"train.lc.norm.tok.de has {N_TRAIN - 2} lines" in res.stderr
    assert not (tmp_path / "bin").exists()


def test_text_holding_the_boundary_symbol_names_file_and_line(bad_dir, tmp_path):
    path = bad_dir / "tok" / _tok("val", "de")
    lines = _lines(path)
    lines[4] = f"ein {B} hund"
    _write(path, lines)
    res = _run(MULTI30K_DIR=bad_dir, DEST=tmp_path / "bin")
    assert res.returncode == 2 and "val.lc.norm.tok.de:5: holds the word-boundary symbol" in res.stderr
    assert not (tmp_path / "bin").exists()


# --------------------------------------------------------------------------- detokenisation and chrF
def test_chars_round_trip_is_the_identity_on_the_tok_text(fake_dir):
    n = 0
    for path in sorted((fake_dir / "tok").iterdir()):
        for line in _lines(path):
            chars = char_data.text_to_chars(line)
            assert B not in line and chars.split(" ").count(B) == len(line.split()) - 1
            assert char_data.chars_to_text(chars) == line, (path.name, line)
            n += 1
    assert n == 4 * N_TRAIN + 11 * N_OTHER   # en de fr cs; no Czech test2017
    # what a decoder may emit: stray, repeated, leading and trailing boundaries, <unk>
    assert char_data.chars_to_text(f"{B} a {B} {B} b c {B}") == "a bc"
    assert char_data.chars_to_text(f"h <unk> u {B} .") == "h<unk>u ."
    assert char_data.chars_to_text("") == ""


def test_score_mt_char_target_and_chrf_against_sacrebleu(tmp_path, capsys):
    import sacrebleu
    refs = ["ein hund läuft durch den schnee .", "zwei männer spielen &quot; fußball &quot; ."]
    words = ["ein hund rennt durch schnee .", "zwei männer spielen &quot; fußball &quot; ."]
    (tmp_path / "ref").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    gen = "".join(f"S-{i}\tx\nH-{i}\t-0.5\t{char_data.text_to_chars(words[i])}\n" for i in (1, 0))
    (tmp_path / "gen").write_text(gen, encoding="utf-8")
    out = tmp_path / "s.json"
    assert score_mt.main(["--gen", str(tmp_path / "gen"), "--ref", str(tmp_path / "ref"), "--char-target",
                          "--chrf", "--label", "[t] ", "--json", str(out)]) == 0
    s = json.loads(out.read_text())
    chrf = sacrebleu.metrics.CHRF()
    assert s["chrf"] == round(chrf.corpus_score(words, [refs]).score, 2) < 100
    assert s["chrf_signature"] == str(chrf.get_signature()) and "nc:6|nw:0" in s["chrf_signature"]
    assert s["bleu_tok"] == round(sacrebleu.corpus_bleu(words, [refs], tokenize="none").score, 2)
    printed = capsys.readouterr().out.splitlines()
    assert printed[1] == f"[t] chrF (sacrebleu) = {s['chrf']:.2f}   [2 sentences]   signature {s['chrf_signature']}"
    # with --moses-detok, chrF is on the detokenised text, as the detokenised BLEU
    s2 = score_mt.score(words, refs, moses_lang="de", chrf=True)
    from sacremoses import MosesDetokenizer
    md = MosesDetokenizer(lang="de")
    det = lambda xs: [md.detokenize(x.split(), unescape=True) for x in xs]  # noqa: E731
    assert s2["chrf"] == round(sacrebleu.metrics.CHRF().corpus_score(det(words), [det(refs)]).score, 2)
    # the character sequences scored as words are perfect; without the options nothing changes
    assert score_mt.score(refs, refs, chrf=True)["chrf"] == 100.0
    (tmp_path / "gen_w").write_text("".join(f"H-{i}\t-1\t{w}\n" for i, w in enumerate(words)), encoding="utf-8")
    assert score_mt.main(["--gen", str(tmp_path / "gen_w"), "--ref", str(tmp_path / "ref"), "--json", str(out)]) == 0
    assert set(json.loads(out.read_text())) == {"bleu_detok", "bleu_tok", "detok_signature",
                                                "sacrebleu_signature", "n"}
    assert len(capsys.readouterr().out.splitlines()) == 1


# ------------------------------------------------------------------------------------------- presets
def _dict_of_size(n):
    from fairseq.data import Dictionary
    d = Dictionary()
    for i in range(n - d.nspecial):
        d.add_symbol(f"w{i}")
    return d


def _build(preset, n_src, n_tgt, **opts):
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq_acvi.models import lstm_seq2seq
    assert ARCH_MODEL_REGISTRY[preset] is lstm_seq2seq.ACVILSTMModel
    args = argparse.Namespace(arch=preset, **opts)
    getattr(lstm_seq2seq, preset)(args)

    class Task:
        source_dictionary, target_dictionary = _dict_of_size(n_src), _dict_of_size(n_tgt)

    return args, lstm_seq2seq.ACVILSTMModel.build_model(args, Task())


def test_pag_presets_build_with_their_sizes():
    from fairseq_acvi.modules.context.pag import PAGContext, RPAGContext
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    # the paper's WMT'15 set-up: dl4mt-cdec's 24,440 BPE symbols and 300 characters (+ fairseq's specials)
    args, model = _build("pag_lstm_wmt15", 24440 - 2 + 4, 300 + 4)
    assert (args.context_inference, args.dropout, args.attention_type, args.attention_dim) == ("pag", 0.0, "additive", 1024)
    assert (args.encoder_layers, args.encoder_embed_dim, args.encoder_hidden_size) == (1, 512, 512)
    assert (args.decoder_layers, args.decoder_embed_dim, args.decoder_hidden_size, args.decoder_out_embed_dim) == \
        (2, 512, 1024, 512)
    assert isinstance(model.decoder.context, PAGContext) and model.decoder.context.k == 10
    assert model.encoder.output_units == 1024 and args.max_target_positions >= 500
    assert count(model) == 41_197_882
    # the CPU preset: acvi_lstm_multi30k's size on the character data's 8,001 / 64 symbols
    args, model = _build("pag_lstm_multi30k_char", 8001, 64)
    assert (args.context_inference, args.encoder_layers, args.decoder_layers, args.dropout) == ("pag", 1, 1, 0.3)
    assert (args.encoder_hidden_size, args.decoder_hidden_size, args.attention_type) == (256, 256, "multiplicative")
    assert args.max_target_positions == 1024 and model.max_positions() == (1024, 1024)   # >= 4x the longest (258)
    assert args.acvi_kl_delay_updates == 234 and count(model) == 4_717_130   # ACVI's defaults, recorded
    # explicit options win over the preset
    args, model = _build("pag_lstm_multi30k_char", 50, 20, context_inference="rpag", pag_plan_horizon=3,
                         decoder_hidden_size=32, encoder_hidden_size=16)
    assert isinstance(model.decoder.context, RPAGContext) and model.decoder.context.k == 3
    assert args.decoder_hidden_size == 32


# -------------------------------------------------------------------------------------------- recipe
def _pag_recipe(data_bin, runs, *extra, **env):
    """recipes/mt_pag.sh as test_multi30k_data._recipe runs recipes/mt_multi30k.sh (tiny model, 2 updates)."""
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=fast_python(), DATA_BIN=str(data_bin), RUNS=str(runs),
                BEAM="2", GEN_BATCH="16", GEN_ARGS="--max-len-a 0 --max-len-b 40",
                **{k: str(v) for k, v in env.items()})
    return subprocess.run(["bash", str(REPO / "recipes" / "mt_pag.sh"), "--max-update", "2", *TINY, *extra],
                          capture_output=True, text=True, env=full, cwd=str(REPO), timeout=900)


@pytest.mark.slow
def test_recipe_smoke_pag(char_bin, tmp_path):
    runs = tmp_path / "runs"
    res = _pag_recipe(char_bin, runs, CONTEXT="pag", MAX_EPOCH=1, TAG="tiny")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run = runs / "en_de" / "pag-tiny_seed1"
    for split in ("valid", "test2016"):
        b = json.loads((run / f"bleu_{split}.json").read_text())
        assert b["n"] == N_OTHER and 0.0 <= b["bleu_tok"] <= 100.0 and 0.0 <= b["chrf"] <= 100.0
        assert b["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0")
        hyps = [l.split("\t")[2] for l in _lines(run / f"gen_{split}.txt") if l.startswith("H-")]
        assert len(hyps) == N_OTHER and all(len(t) == 1 or t == "<unk>" for h in hyps for t in h.split())
    assert not (run / "bleu_test2017.json").exists()
    assert "chrF (sacrebleu) = " in res.stdout and "signature nrefs:1|case:mixed|eff:yes|nc:6" in res.stdout
    replan = json.loads((run / "replan.json").read_text())
    assert replan["best"]["epoch"] == replan["last"]["epoch"] == 1
    assert 0.0 <= replan["best"]["replan"] <= 1.0 and "plan recomputed at" in res.stdout
    meta = json.loads((run / "run.json").read_text())
    assert (meta["context"], meta["tag"], meta["seed"], meta["max_epoch"], meta["beam"], meta["arch"]) == \
        ("pag", "tiny", 1, 1, 2, "pag_lstm_multi30k_char")
    assert "--max-update 2" in meta["extra_train_args"]


def test_recipe_writes_replan_json_from_the_train_log(tmp_path):
    """recipes/lib_mt.sh's mt_replan_json (the recipe's last step, which the slow smoke run alone
    reached): the replan share of the best (lowest nll_loss) and of the last epoch; null for a
    model that logs none; a log without validation is a clear error."""
    def record(ep, nll, replan=None):
        rec = {"epoch": ep, "valid_loss": str(nll), "valid_nll_loss": str(nll)}
        if replan is not None:
            rec["valid_replan"] = str(replan)
        return f"2026-11-27 10:00:00 | INFO | valid | {json.dumps(rec)}\n"

    def replan_json(log_text):
        log, out = tmp_path / "train.log", tmp_path / "replan.json"
        log.write_text(log_text)
        res = subprocess.run(["bash", "-c", 'source recipes/lib_mt.sh; mt_replan_json "$1" "$2"', "_",
                              str(log), str(out)], capture_output=True, text=True, cwd=str(REPO),
                             env=dict(os.environ, MT_LIB_ONLY="1", PYTHON=sys.executable), timeout=120)
        return res, (json.loads(out.read_text()) if res.returncode == 0 else None)

    res, rp = replan_json(record(1, 1.5, 0.4) + record(2, 1.1, 0.6) + record(3, 1.2, 0.7))
    assert res.returncode == 0, res.stderr
    assert rp["best"] == {"epoch": 2, "replan": 0.6, "nll_loss": 1.1}
    assert rp["last"] == {"epoch": 3, "replan": 0.7, "nll_loss": 1.2}
    assert "plan recomputed at 60.0% of validation steps (best epoch 2)" in res.stdout
    res, rp = replan_json(record(1, 0.9))                         # soft: no replan logged
    assert res.returncode == 0 and rp["best"]["replan"] is None and "at n/a" in res.stdout
    res, _ = replan_json("no records\n")
    assert res.returncode != 0 and "no validation record in" in res.stderr


def test_recipe_rejects_bad_options(tmp_path):
    for env, msg in (({"CONTEXT": "acvi"}, "CONTEXT must be soft|pag|rpag, got 'acvi'"),
                     ({"EVAL_SPLITS": "valid test2018"},
                      "EVAL_SPLITS must be a ' '-separated list of valid|test2016|test2017"),
                     ({"PAIR": "ende"}, "PAIR must look like en_de")):
        res = _pag_recipe(tmp_path / "nowhere", tmp_path / "runs", **env)
        assert res.returncode == 2 and msg in res.stderr, res.stderr
    assert not (tmp_path / "nowhere").exists()
