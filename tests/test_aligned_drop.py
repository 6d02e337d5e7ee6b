"""DROP from an aligner (fairseq_acvi.metrics.word_alignment, fairseq_acvi.cli.aligned_drop): on a
word-for-word "language" the aligner recovers the dropped words exactly; the kept links score
again to the same figures; bad input names the file."""
import gzip
import json
import random

import pytest

from fairseq_acvi.cli import aligned_drop as cli
from fairseq_acvi.mt_eval.kept_outputs import keep_outputs

pytest.importorskip("eflomal")

VOCAB = [f"w{i}" for i in range(40)]


def translate(words):
    """The toy target language: each word has one translation, the order is kept."""
    return [w.upper() + "x" for w in words]


def corpus(rng, n):
    src = [rng.sample(VOCAB, rng.randint(4, 9)) for _ in range(n)]
    return [" ".join(s) for s in src], [" ".join(translate(s)) for s in src]


@pytest.fixture
def toy(tmp_path):
    rng = random.Random(0)
    train_src, train_tgt = corpus(rng, 1500)
    test_src, test_ref = corpus(rng, 60)
    files = {}
    for name, lines in (("train.src", train_src), ("train.tgt", train_tgt),
                        ("test.src", test_src), ("test.ref", test_ref)):
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    # run a: the references themselves; run b: the first word's translation left out of every
    # other sentence (30 dropped source words)
    hyps = {"a": test_ref, "b": [" ".join(r.split()[1:]) if i % 2 == 0 else r for i, r in enumerate(test_ref)]}
    runs = {}
    for name, lines in hyps.items():
        run = tmp_path / f"run_{name}"
        run.mkdir()
        (run / "gen_test.txt").write_text(
            "".join(f"H-{i}\t-0.5\t{h}\n" for i, h in enumerate(lines)), encoding="utf-8")
        runs[name] = run
    return files, runs, sum(len(s.split()) for s in test_src)


def _align(files, runs, *extra):
    return cli.main([*map(str, runs), "--split", "test", "--src", str(files["test.src"]),
                     "--ref", str(files["test.ref"]), "--corpus-src", str(files["train.src"]),
                     "--corpus-tgt", str(files["train.tgt"]), *extra])


def test_the_aligner_finds_exactly_the_dropped_words_and_the_links_score_again(toy, capsys):
    files, runs, n_words = toy
    assert _align(files, [runs["a"], runs["b"]]) == 0
    a = json.loads((runs["a"] / "aligned_drop_test.json").read_text())
    b = json.loads((runs["b"] / "aligned_drop_test.json").read_text())
    assert a["reference_aligned_words"] == n_words and a["dropped_words"] == 0 and a["drop"] == 0
    assert b["dropped_words"] == 30 and b["drop"] == pytest.approx(100 * 30 / n_words)
    assert b["corpus_pairs"] == 1500 and "eflomal" in b["aligner"]
    # the kept links give the same figures without the aligner
    assert cli.main([str(runs["a"]), str(runs["b"]), "--split", "test", "--rescore"]) == 0
    assert "as kept" in capsys.readouterr().out
    # a run kept in a results page carries its figures and links
    run_json = {"pair": "x_y", "context": "soft", "tag": "t", "seed": 1}
    (runs["b"] / "run.json").write_text(json.dumps(run_json))
    dest = keep_outputs([dict(run_json, variant="soft-t", dir=str(runs["b"]))], str(runs["b"].parent / "page"))[0]
    assert json.loads(open(f"{dest}/aligned_drop_test.json").read()) == b
    assert cli.main([dest, "--split", "test", "--rescore"]) == 0
    # --skip-done leaves a run with figures alone
    assert _align(files, [runs["a"]], "--skip-done") == 0
    assert "kept (--skip-done)" in capsys.readouterr().out


def test_changed_links_no_longer_score_as_kept_and_bad_input_names_the_file(toy, capsys):
    files, runs, _ = toy
    assert _align(files, [runs["b"]]) == 0
    links = runs["b"] / "aligned_drop_test.links.gz"
    lines = gzip.open(links, "rt").read().splitlines()
    ref = lines[0].split("\t")[0]
    lines[0] = f"{ref}\t{ref}"                           # sentence 0 no longer drops its word
    with gzip.open(links, "wt") as f:
        f.write("\n".join(lines) + "\n")
    assert cli.main([str(runs["b"]), "--split", "test", "--rescore"]) == 1
    assert "NOT as kept" in capsys.readouterr().out
    with gzip.open(links, "wt") as f:
        f.write("0-0 1-1\n")
    assert cli.main([str(runs["b"]), "--split", "test", "--rescore"]) == 2
    assert f"{links}, line 1" in capsys.readouterr().err
    # hypotheses that are not one per source
    (runs["a"] / "gen_test.txt").write_text("H-0\t-0.5\tW1X\n", encoding="utf-8")
    assert _align(files, [runs["a"]]) == 2
    assert "1 hypotheses of test, 60 sources" in capsys.readouterr().err
    assert _align({**files, "test.ref": files["test.ref"].parent / "nope"}, [runs["a"]]) == 2
    assert "--ref" in capsys.readouterr().err
