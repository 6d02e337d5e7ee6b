"""fairseq-acvi-prepare-parallel (fairseq_acvi/cli/prepare_parallel.py): every bad input stops it with
``error: FILE[:LINE]: …`` and exit 2 before anything is written; a good corpus gives the data-bin,
splits.json, raw/ references and dictionaries that fairseq loads, and --sentencepiece round-trips."""
import json
import re
from pathlib import Path

import pytest

from fairseq_acvi.cli import prepare_parallel
from conftest import run_cli
from toy_parallel import write_toy_corpus

SMALL = {"train": 60, "valid": 10, "test": 10}


def args(corpus: Path, dest: Path, *extra):
    return ["--src", "en", "--tgt", "de", "--train", str(corpus / "train"), "--valid", str(corpus / "valid"),
            "--test", str(corpus / "test"), "--dest", str(dest), *extra]


def fails(tmp_path, capsys, corpus, pattern):
    """Run on ``corpus``: exit 2, the message matches ``pattern``, and nothing is written."""
    dest = tmp_path / "out" / "bin"
    assert prepare_parallel.main(args(corpus, dest)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err), err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    return err


@pytest.fixture
def corpus(tmp_path):
    return write_toy_corpus(tmp_path / "my_corpus", SMALL)


def test_ragged_files_name_both_files_and_counts(tmp_path, capsys, corpus):
    with open(corpus / "valid.de", "a", encoding="utf-8") as f:
        f.write("W1 W2\n")
    fails(tmp_path, capsys, corpus, r"valid\.en has 10 lines, \S*valid\.de has 11 lines")


def test_a_ragged_file_points_at_its_empty_line(tmp_path, capsys, corpus):
    lines = (corpus / "train.de").read_text().split("\n")
    lines.insert(7, "")
    (corpus / "train.de").write_text("\n".join(lines))
    fails(tmp_path, capsys, corpus, r"train\.de has 61 lines; \S*train\.de:8 is an empty line")


def test_empty_line_names_file_and_line(tmp_path, capsys, corpus):
    lines = (corpus / "test.en").read_text().split("\n")
    lines[4] = "   "
    (corpus / "test.en").write_text("\n".join(lines))
    fails(tmp_path, capsys, corpus, r"test\.en:5: empty line \(whitespace only\)")


def test_invalid_utf8_names_file_and_line(tmp_path, capsys, corpus):
    data = (corpus / "train.en").read_bytes().split(b"\n")
    data[2] = b"w1 \xff\xfe w2"
    (corpus / "train.en").write_bytes(b"\n".join(data))
    fails(tmp_path, capsys, corpus, r"train\.en:3: not UTF-8")


def test_carriage_returns_name_file_and_line(tmp_path, capsys, corpus):
    text = (corpus / "valid.de").read_text()
    (corpus / "valid.de").write_bytes(text.replace("\n", "\r\n").encode())
    fails(tmp_path, capsys, corpus, r"valid\.de:1: carriage return")


def test_every_missing_file_is_named(tmp_path, capsys, corpus):
    (corpus / "test.de").unlink()
    (corpus / "valid.en").unlink()
    err = fails(tmp_path, capsys, corpus, r"missing file\(s\): ")
    assert "valid.en" in err and "test.de" in err and "train" not in err.split("(each")[0]


def test_an_empty_file_is_named(tmp_path, capsys, corpus):
    (corpus / "test.en").write_text("")
    (corpus / "test.de").write_text("")
    fails(tmp_path, capsys, corpus, r"test\.en is empty")


def test_a_foreign_dest_is_refused_and_left_alone(tmp_path, capsys, corpus):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    assert prepare_parallel.main(args(corpus, dest)) == 2
    assert "holds no corpus.json" in capsys.readouterr().err
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


def test_option_errors_name_the_option(tmp_path, capsys, corpus):
    for extra, text in ((["--sentencepiece", "8", ], "--sentencepiece must be"),
                        (["--sentencepiece", "50", "--threshold", "2"], "--threshold applies to words"),
                        (["--test", str(corpus / "valid")], "a split named 'valid' exists")):
        with pytest.raises(SystemExit) as e:
            prepare_parallel.main(args(corpus, tmp_path / "bin", *extra))
        assert e.value.code == 2 and text in capsys.readouterr().err
    assert not (tmp_path / "bin").exists()


def test_a_good_corpus_gives_what_fairseq_and_the_recipes_read(tmp_path, corpus):
    from fairseq.data import Dictionary, data_utils
    (corpus / "news.en").write_text("w1 w2 w3\nw99 w4\n")      # a second test set, with an unknown word
    (corpus / "news.de").write_text("W3 W2 W1\nW4 W99\n")
    dest = tmp_path / "data-bin" / "toy"
    dest.mkdir(parents=True)                                  # an empty folder may be written into
    assert prepare_parallel.main(args(corpus, dest, "--test", str(corpus / "news"), "--lowercase")) == 0
    assert json.loads((dest / "splits.json").read_text()) == {
        "train": "train", "valid": "valid", "test": "test", "news": "test1"}
    record = json.loads((dest / "corpus.json").read_text())
    assert record["src"] == "en" and record["tgt"] == "de" and record["remove_bpe"] is None
    assert record["sentences"] == {"train": 60, "valid": 10, "test": 10, "news": 2}
    assert record["lowercase"] is True
    # references: the text as given (lower-cased here), every split but train
    assert sorted(p.name for p in (dest / "raw").iterdir()) == [
        "news.de", "news.en", "test.de", "test.en", "valid.de", "valid.en"]
    assert (dest / "raw" / "news.de").read_text() == "w3 w2 w1\nw4 w99\n"
    assert (dest / "raw" / "valid.en").read_text() == (corpus / "valid.en").read_text().lower()
    # dictionaries: the training words exactly (padding factor 1), fairseq's 4 specials first
    train_words = {w for line in (corpus / "train.de").read_text().lower().split("\n") for w in line.split()}
    tgt_dict = Dictionary.load(str(dest / "dict.de.txt"))
    assert len(tgt_dict) == len(train_words) + 4 == record["dictionary_sizes"]["de"]
    # the binarised test1 holds the news sentences, the unseen word as <unk>
    ds = data_utils.load_indexed_dataset(str(dest / "test1.en-de.de"), tgt_dict)
    assert len(ds) == 2
    assert tgt_dict.string(ds[1]) == "w4 <unk>"
    assert record["unknown_token_percent"]["news.de"] == pytest.approx(100 * 1 / 5, abs=0.01)
    prov = (dest / "PROVENANCE.txt").read_text()
    assert "news -> test1" in prov and "sha256" in prov and "lower-cased (--lowercase)" in prov
    assert not list(dest.parent.glob(".toy.building-*"))      # the work folder is gone
    # a second run replaces its own earlier output (here without the news set: no stale test1)
    assert prepare_parallel.main(args(corpus, dest)) == 0
    assert not (dest / "test1.en-de.de.bin").exists() and not (dest / "raw" / "news.de").exists()


def test_sentencepiece_round_trips_through_fairseq_remove_bpe(tmp_path, corpus):
    from fairseq.data import Dictionary, data_utils
    from fairseq.data.data_utils import post_process
    dest = tmp_path / "spm"
    assert prepare_parallel.main(args(corpus, dest, "--sentencepiece", "30")) == 0
    record = json.loads((dest / "corpus.json").read_text())
    assert record["remove_bpe"] == "sentencepiece" and record["subwords"]["pieces"] == 30
    d = Dictionary.load(str(dest / "dict.de.txt"))
    assert (dest / "dict.en.txt").read_text() == (dest / "dict.de.txt").read_text()   # joined
    assert len(d) == 30 - 3 + 4
    ds = data_utils.load_indexed_dataset(str(dest / "test.en-de.de"), d)
    refs = (dest / "raw" / "test.de").read_text().split("\n")[:-1]
    assert refs == (corpus / "test.de").read_text().split("\n")[:-1]                # references: the words
    assert len(ds) == len(refs) == SMALL["test"]
    pieces = [d.string(ds[i]) for i in range(len(ds))]
    assert sum(len(p.split()) for p in pieces) > sum(len(r.split()) for r in refs)  # words were split
    assert [post_process(p, "sentencepiece") for p in pieces] == refs
    assert (dest / "spm.model").is_file()


def test_too_many_pieces_is_an_error_naming_the_option(tmp_path, capsys, corpus):
    assert prepare_parallel.main(args(corpus, tmp_path / "bin", "--sentencepiece", "5000")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --sentencepiece 5000: ") and "Vocabulary size" in err
    assert not (tmp_path / "bin").exists() and not list(tmp_path.glob(".bin.building-*"))


def test_runs_as_a_module_with_exit_code_2(tmp_path, corpus):
    (corpus / "valid.en").write_bytes(b"w1\r\nw2\r\n")
    res = run_cli("fairseq_acvi.cli.prepare_parallel", *args(corpus, tmp_path / "bin"), check=False)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith("error: ") and "valid.en:1: carriage return" in res.stderr
