"""OOV position markers (docs/method.md §3.1): encoding, dictionary, truncation, prepare → restore."""
import importlib.util
import json
import os
import subprocess
from collections import Counter

import pytest
import torch

from conftest import REPO, fast_python
from fairseq_acvi.data import oov_markers as om


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "data_scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


prepare = _load_script("prepare_cnndm")
restore_cli = _load_script("restore_oov")

VOCAB = {"the", "police", "said", "a", "man", "was", "in", ".", "arrested"}


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- encoding rules (hand-made)

def test_repeated_source_oov_gets_first_position_marker():
    src = "the zorblax man said zorblax was in quux zorblax".split()
    enc, first = om.encode_source(src, VOCAB)
    assert enc == ["the", "<unk-1>", "man", "said", "<unk-1>", "was", "in", "<unk-7>", "<unk-1>"]
    assert first == {"zorblax": 1, "quux": 7}


def test_target_oov_in_source_gets_marker_and_absent_oov_gets_unk():
    src = "police arrested zorblax in quux .".split()
    _, first = om.encode_source(src, VOCAB)
    tgt = "zorblax was arrested in wibble , quux said .".split()
    enc = om.encode_target(tgt, VOCAB, first)
    # "," is OOV too (not in VOCAB) and absent from the source → <unk>
    assert enc == ["<unk-2>", "was", "arrested", "in", "<unk>", "<unk>", "<unk-4>", "said", "."]


def test_restore_inverts_markers_and_rejects_positions_past_the_source():
    src = "police arrested zorblax in quux .".split()
    assert om.restore(["<unk-4>", "met", "<unk-2>", "<unk>"], src) == \
        ["quux", "met", "zorblax", "<unk>"]
    with pytest.raises(ValueError, match="<unk-6>"):
        om.restore(["<unk-6>"], src)


def test_build_vocab_is_top_k_with_alphabetical_ties_and_no_reserved_tokens():
    counts = Counter({"b": 5, "a": 5, "c": 9, "d": 1, "<unk>": 99, "<unk-3>": 50, "e": 1})
    assert om.build_vocab(counts, 3) == ["c", "a", "b"]
    assert om.build_vocab(counts, 10) == ["c", "a", "b", "d", "e"]


def test_demote_markers_maps_markers_past_a_phase_limit_to_unk():
    # ids: 4 real words from 4, markers start at 8 (<unk-0> = 8 ... <unk-5> = 13); unk = 3
    ids = torch.tensor([[4, 8, 10, 12], [13, 3, 7, 9]])
    out = om.demote_markers(ids, first_marker_id=8, max_positions=3, unk_id=3)
    assert out.tolist() == [[4, 8, 10, 3], [3, 3, 7, 9]]


# ---------------------------------------------------------------- prepare_cnndm.py

def _tiny_corpus(tmp_path):
    # train: frequent words become the vocabulary; test: OOV words, truncation
    train_src = _write(tmp_path / "train.source",
                       "<t> the police said a man was arrested . </t>\n"
                       "the man was in the police car .\n"
                       "a man said the police was in .\n")
    train_tgt = _write(tmp_path / "train.target",
                       "<t> a man was arrested . </t>\n"
                       "the man was in .\n"
                       "police said .the man was in .\n")  # See-style glued sentence
    test_src = _write(tmp_path / "test.source",
                      "zorblax said the man zorblax was in quux . wibble was arrested\n"
                      "the police arrested flim .\n")
    test_tgt = _write(tmp_path / "test.target",
                      "zorblax was in quux .wibble was arrested .\n"
                      "flim and flam .\n")
    return train_src, train_tgt, test_src, test_tgt


def test_prepare_dictionary_holds_vocab_then_contiguous_markers(tmp_path):
    from fairseq.data import Dictionary
    tr_s, tr_t, te_s, te_t = _tiny_corpus(tmp_path)
    out = tmp_path / "out"
    assert prepare.main(["--train-source", tr_s, "--train-target", tr_t, "--test-source", te_s,
                         "--test-target", te_t, "--out-dir", str(out), "--vocab-size", "6",
                         "--max-source-positions", "7"]) == 0
    words, n = om.read_vocab(str(out / "dict.txt"))
    # counts over train articles + summaries: the 6 most frequent, ties alphabetical
    assert words == [".", "man", "the", "was", "in", "police"]
    assert n == 7
    d = Dictionary.load(str(out / "dict.txt"))
    assert len(d) == 4 + 6 + 7
    assert om.marker_id_range(d) == (4 + 6, 7)
    assert [d[i] for i in range(10, 17)] == [f"<unk-{j}>" for j in range(7)]


def test_prepare_truncation_changes_marker_positions(tmp_path):
    tr_s, tr_t, te_s, te_t = _tiny_corpus(tmp_path)
    out = tmp_path / "out"
    assert prepare.main(["--train-source", tr_s, "--train-target", tr_t, "--test-source", te_s,
                         "--test-target", te_t, "--out-dir", str(out), "--vocab-size", "6",
                         "--max-source-positions", "7", "--max-target-positions", "8"]) == 0
    src = (out / "test.src").read_text().splitlines()
    tgt = (out / "test.tgt").read_text().splitlines()
    # source truncated to 7 tokens: "zorblax said the man zorblax was in"
    assert src[0] == "<unk-0> <unk-1> the man <unk-0> was in"
    # quux (position 7) and wibble (position 9) were cut off → <unk>; target cut to 8 tokens
    assert tgt[0] == "<unk-0> was in <unk> . <unk> was <unk>"
    assert src[1] == "the police <unk-2> <unk-3> ."
    assert tgt[1] == "<unk-3> <unk> <unk> ."
    # side files keep the full text; references get one <t> … </t> per sentence
    art = (out / "test.article").read_text().splitlines()
    assert art[0] == "zorblax said the man zorblax was in quux . wibble was arrested"
    summ = (out / "test.summary").read_text().splitlines()
    assert summ[0] == "<t> zorblax was in quux . </t> <t> wibble was arrested . </t>"
    stats = json.loads((out / "prepare_stats.json").read_text())
    assert stats["test"]["src_truncated"] == 1 and stats["test"]["tgt_truncated"] == 1
    # a longer limit: quux (7), wibble (9) and arrested (11) become copyable
    out2 = tmp_path / "out2"
    assert prepare.main(["--train-source", tr_s, "--train-target", tr_t, "--test-source", te_s,
                         "--test-target", te_t, "--out-dir", str(out2), "--vocab-size", "6",
                         "--max-source-positions", "12"]) == 0
    assert (out2 / "test.tgt").read_text().splitlines()[0] == \
        "<unk-0> was in <unk-7> . <unk-9> was <unk-11> ."


def test_prepare_rejects_dictionary_with_too_few_markers(tmp_path, capsys):
    tr_s, tr_t, te_s, te_t = _tiny_corpus(tmp_path)
    out = tmp_path / "out"
    assert prepare.main(["--train-source", tr_s, "--train-target", tr_t, "--out-dir", str(out),
                         "--max-source-positions", "5"]) == 0
    rc = prepare.main(["--test-source", te_s, "--test-target", te_t, "--out-dir",
                       str(tmp_path / "o2"), "--dict", str(out / "dict.txt")])
    assert rc == 1 and "5 markers < --max-source-positions 400" in capsys.readouterr().err


@pytest.mark.parametrize("which,lineno", [("source", 2), ("target", 3)])
def test_prepare_empty_line_is_an_error_naming_file_and_line(tmp_path, capsys, which, lineno):
    src = "a man .\nthe police .\nthe man was in .\n"
    tgt = "a man .\nthe police .\nthe man .\n"
    if which == "source":
        src = "a man .\n   \nthe man was in .\n"
    else:
        tgt = "a man .\nthe police .\n<t> </t>\n"
    s, t = _write(tmp_path / "s", src), _write(tmp_path / "t", tgt)
    rc = prepare.main(["--train-source", s, "--train-target", t, "--out-dir",
                       str(tmp_path / "o")])
    err = capsys.readouterr().err
    bad = s if which == "source" else t
    assert rc == 1 and f"{bad}:{lineno}: empty" in err


def test_prepare_line_count_mismatch_and_reserved_tokens_are_errors(tmp_path, capsys):
    s = _write(tmp_path / "s", "a man .\nthe police .\n")
    t = _write(tmp_path / "t", "a man .\n")
    assert prepare.main(["--train-source", s, "--train-target", t, "--out-dir",
                         str(tmp_path / "o")]) == 1
    assert "has 2 lines but" in capsys.readouterr().err
    s2 = _write(tmp_path / "s2", "a man .\nthe <unk-3> police .\n")
    t2 = _write(tmp_path / "t2", "a man .\nthe police .\n")
    assert prepare.main(["--train-source", s2, "--train-target", t2, "--out-dir",
                         str(tmp_path / "o")]) == 1
    assert f"{s2}:2: reserved token '<unk-3>'" in capsys.readouterr().err


def test_story_files_are_parsed_like_see_et_al(tmp_path, capsys):
    stories = tmp_path / "stories"
    stories.mkdir()
    _write(stories / "b.story",
           "(CNN) Mr. Smith didn't go to Washington.\n\nHe stayed home\n\n"
           "@highlight\n\nSmith stayed home\n\n@highlight\n\nHe said \"no\"\n")
    _write(stories / "a.story", "Police arrested a man.\n\n@highlight\n\nA man was arrested\n")
    out = tmp_path / "out"
    assert prepare.main(["--train-stories", str(stories), "--out-dir", str(out),
                         "--tokenize", "ptb"]) == 0
    art = (out / "train.article").read_text().splitlines()
    summ = (out / "train.summary").read_text().splitlines()
    assert art[0] == "police arrested a man ."  # a.story comes first (sorted)
    assert art[1] == "( cnn ) mr. smith did n't go to washington . he stayed home ."
    assert summ[1] == "<t> smith stayed home . </t> <t> he said `` no '' </t>"
    # empty article / no highlights → error naming the story
    bad = tmp_path / "bad"
    bad.mkdir()
    _write(bad / "x.story", "@highlight\n\nonly a highlight\n")
    assert prepare.main(["--train-stories", str(bad), "--out-dir", str(out)]) == 1
    assert f"{bad / 'x.story'}:1: empty article" in capsys.readouterr().err
    _write(bad / "x.story", "an article without highlights .\n")
    assert prepare.main(["--train-stories", str(bad), "--out-dir", str(out)]) == 1
    assert "no @highlight sentences" in capsys.readouterr().err


# ---------------------------------------------------------------- restore_oov.py + round trips

def test_round_trip_prepare_then_restore_gives_back_the_words(tmp_path, shared_data):
    """Real articles: restoring the encoded targets gives the truncated references back,
    except exactly the OOV words that do not occur in the truncated source (<unk>)."""
    d = shared_data / "cnn_dm_sample" / "realsumm_ptrgen"
    src_lines = (d / "src.txt").read_text(encoding="utf-8").split("\n")[:20]
    ref_lines = (d / "ref.txt").read_text(encoding="utf-8").split("\n")[:20]
    s = _write(tmp_path / "s", "\n".join(src_lines) + "\n")
    t = _write(tmp_path / "t", "\n".join(ref_lines) + "\n")
    out = tmp_path / "out"
    n_src, n_tgt = 300, 100
    assert prepare.main(["--train-source", s, "--train-target", t, "--out-dir", str(out),
                         "--vocab-size", "800", "--max-source-positions", str(n_src),
                         "--max-target-positions", str(n_tgt)]) == 0
    restored = tmp_path / "restored"
    assert restore_cli.main(["--src", str(out / "train.article"), "--hyp",
                             str(out / "train.tgt"), "--out", str(restored)]) == 0
    words, _ = om.read_vocab(str(out / "dict.txt"))
    vocab = set(words)
    arts = (out / "train.article").read_text().splitlines()
    summs = (out / "train.summary").read_text().splitlines()
    got = restored.read_text().splitlines()
    n_markers = n_unk = 0
    for art, summ, hyp, enc in zip(arts, summs, got, (out / "train.tgt").read_text().splitlines()):
        ref = [w for w in summ.split() if w not in ("<t>", "</t>")][:n_tgt]
        src_t = set(art.split()[:n_src])
        expect = [w if (w in vocab or w in src_t) else "<unk>" for w in ref]
        assert hyp.split() == expect
        n_markers += sum(x.startswith("<unk-") for x in enc.split())
        n_unk += enc.split().count("<unk>")
    assert n_markers > 20 and n_unk > 0  # the sample really exercises both cases


def test_restore_reads_fairseq_generate_output_in_id_order(tmp_path):
    src = _write(tmp_path / "art", "zorblax met quux .\npolice found flim .\n")
    gen = _write(tmp_path / "gen",
                 "S-1\tpolice found <unk-2> .\nH-1\t-0.3\t<unk-2> was found\n"
                 "D-1\t-0.3\t<unk-2> was found\nP-1\t-0.1 -0.2 -0.3\n"
                 "S-0\t<unk-0> met <unk-2> .\nH-0\t-0.5\t<unk-0> met <unk-2> <unk>\n"
                 "H-0\t-0.9\tsecond best\nGenerate test with beam=5\n")
    out = tmp_path / "out"
    assert restore_cli.main(["--src", src, "--hyp", gen, "--out", str(out)]) == 0
    assert out.read_text().splitlines() == ["zorblax met quux <unk>", "flim was found"]
    assert restore_cli.main(["--src", src, "--hyp", gen, "--out", str(out),
                             "--unk", "[UNK]"]) == 0
    assert out.read_text().splitlines()[0] == "zorblax met quux [UNK]"


def test_restore_errors_name_file_and_line(tmp_path, capsys):
    src = _write(tmp_path / "art", "a b c\nd e\n")
    hyp = _write(tmp_path / "hyp", "<unk-1> x\n<unk-5> y\n")
    assert restore_cli.main(["--src", src, "--hyp", hyp]) == 1
    assert f"{hyp}:2: <unk-5> points past the end of a source of 2 tokens" in \
        capsys.readouterr().err
    hyp2 = _write(tmp_path / "hyp2", "<unk-1> x\n")
    assert restore_cli.main(["--src", src, "--hyp", hyp2]) == 1
    assert "has 1 lines but" in capsys.readouterr().err
    gen = _write(tmp_path / "gen", "H-0\t-0.1\tx\n")
    assert restore_cli.main(["--src", src, "--hyp", gen]) == 1
    assert "no H- line for 1 of 2 sample ids (first missing: 1)" in capsys.readouterr().err


def test_prepare_sh_binarises_with_markers(tmp_path):
    """The shell wrapper runs prepare + the real fairseq-preprocess; the binarised target ids
    of an OOV copied from the source are marker ids of the joined dictionary."""
    from fairseq.data import Dictionary, data_utils
    tr_s, tr_t, te_s, te_t = _tiny_corpus(tmp_path)
    env = dict(os.environ, OUT_DIR=str(tmp_path / "txt"), BIN_DIR=str(tmp_path / "bin"),
               VOCAB_SIZE="6", MAX_SOURCE_POSITIONS="7", PYTHON=fast_python(),
               OMP_NUM_THREADS="1")
    res = subprocess.run(["bash", "data_scripts/prepare_cnndm.sh", "--train-source", tr_s,
                          "--train-target", tr_t, "--test-source", te_s, "--test-target", te_t],
                         cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    bin_dir = tmp_path / "bin"
    d = Dictionary.load(str(bin_dir / "dict.tgt.txt"))
    first, n = om.marker_id_range(d)
    assert (first, n) == (10, 7)
    tgt = data_utils.load_indexed_dataset(str(bin_dir / "test.src-tgt.tgt"), d)
    src = data_utils.load_indexed_dataset(str(bin_dir / "test.src-tgt.src"), d)
    assert tgt[0].tolist()[:3] == [first + 0, d.index("was"), d.index("in")]
    assert src[0].tolist() == [first, first + 1, d.index("the"), d.index("man"), first,
                               d.index("was"), d.index("in"), d.eos()]
    assert (bin_dir / "test.article").is_file() and (bin_dir / "test.summary").is_file()
