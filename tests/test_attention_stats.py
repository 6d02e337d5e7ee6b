"""fairseq_acvi/metrics/attention_stats.py: REP and DROP on hand-counted cases, the exact-zero
fraction and DROP-attn of attention matrices, and the command line on an attention.json and on a
checkpoint decoded over a subset."""
import json
import math

import pytest

from fairseq_acvi.metrics.attention_stats import (attention_drop, attention_sharpness, drop_score,
                                                  main, rep_score, rep_sentence, summarize,
                                                  zero_fraction)


def test_rep_counts_repeated_bigrams_beyond_the_reference_and_doubled_words_twice():
    hyp = "a b a b a b c c".split()
    ref = "a b x a b".split()
    # bigrams of hyp: (a,b)×3, (b,a)×2, (b,c)×1, (c,c)×1; ref: (a,b)×2
    # repeated (count > 1): (a,b) 3 − 2 = 1, (b,a) 2 − 0 = 2 -> 3; doubled word (c,c): 1 -> 2 × 1
    assert rep_sentence(hyp, ref) == 3 + 2
    assert rep_sentence("the cat sat".split(), "the cat sat".split()) == 0
    # a repetition the reference has as well costs nothing
    assert rep_sentence("very very good".split(), "very very good".split()) == 0
    out = rep_score([hyp, "x y".split()], [ref, "x y z w z".split()])
    assert out["rep"] == 5 and out["reference_words"] == 10 and out["rep_per_100"] == 50.0
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        rep_score([hyp, hyp], [ref])


def test_drop_counts_source_words_aligned_to_the_reference_only():
    src_ref = ["0-0 1-1 2-2 3-3", "0-1 1-0"]
    src_hyp = ["0-0 2-1 2-2", "0-0 1-1 1-2"]
    # sentence 1: words 1 and 3 dropped of 4; sentence 2: none of 2 -> 2 / 6
    out = drop_score(src_ref, src_hyp)
    assert out["dropped_words"] == 2 and out["reference_aligned_words"] == 6
    assert out["drop"] == pytest.approx(100 * 2 / 6)
    with pytest.raises(ValueError, match="not i-j"):
        drop_score(["0:0"], ["0-0"])


def test_zero_fraction_and_attention_drop():
    a = [[0.0, 0.5, 0.5, 0.0],          # two steps over three words + </s>
         [0.0, 0.0, 0.8, 0.2]]
    b = [[1.0, 0.0]]
    assert zero_fraction([a, b]) == 5 / 10
    # Σ_t a_tj: a: 0, 0.5, 1.3 (</s> skipped) -> word 0 dropped; b: 1.0 -> none
    assert attention_drop([a, b]) == (1, 4)
    assert attention_drop([a, b], threshold=0.6) == (2, 4)
    stats = summarize([{"attn": a, "hypothesis": ["x", "x", "</s>"], "reference": ["x"]}])
    assert stats["zero_fraction"] == 0.5 and stats["drop_attn"] == pytest.approx(100 / 3)
    assert stats["rep"] == 2.0                              # (x, x) doubled: w₂ · 1


def test_sharpness_is_zero_for_one_hot_rows_and_log_n_for_uniform_ones():
    one_hot = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    uniform = [[0.25] * 4]
    assert attention_sharpness([one_hot]) == (0.0, 2.0, 2)
    entropy, largest, rows = attention_sharpness([uniform])
    assert entropy == pytest.approx(math.log(4)) and largest == 0.25 and rows == 1
    # [0.5, 0.5, 0]: log 2 nats, 0 log 0 counted as 0
    stats = summarize([{"attn": one_hot + uniform + [[0.5, 0.5, 0.0]], "hypothesis": ["x"]}])
    assert stats["steps"] == 4
    assert stats["entropy"] == pytest.approx((math.log(4) + math.log(2)) / 4)
    assert stats["max_weight"] == pytest.approx((1 + 1 + 0.25 + 0.5) / 4)


def test_command_line_on_an_attention_json(tmp_path, capsys):
    records = {"sentences": [
        {"id": 1, "source": ["a", "b", "</s>"], "hypothesis": ["y", "y", "</s>"],
         "attn": [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]},
        {"id": 0, "source": ["c", "</s>"], "hypothesis": ["z", "</s>"],
         "attn": [[0.6, 0.4], [0.2, 0.8]]}]}
    path = tmp_path / "attention.json"
    path.write_text(json.dumps(records))
    refs = tmp_path / "refs.txt"
    refs.write_text("z w\ny x\n")
    (tmp_path / "sr.align").write_text("0-0 1-1\n0-0\n")
    (tmp_path / "sh.align").write_text("0-0\n0-0\n")
    assert main(["--json", str(path), "--refs", str(refs), "--src-ref-align",
                 str(tmp_path / "sr.align"), "--src-hyp-align", str(tmp_path / "sh.align"),
                 "--out", str(tmp_path / "stats.json")]) == 0
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats == json.loads(capsys.readouterr().out)
    assert stats["zero_fraction"] == 6 / 13
    assert stats["steps"] == 5 and stats["max_weight"] == pytest.approx((3 + 0.6 + 0.8) / 5)
    assert (stats["drop_attn_words"], stats["source_words"]) == (1, 3)     # word "b"
    assert stats["rep"] == 2.0 and stats["reference_words"] == 4           # "y y" vs "y x"
    assert stats["drop"] == pytest.approx(100 / 3)
    with pytest.raises(SystemExit, match="DROP needs both"):
        main(["--json", str(path), "--src-ref-align", str(tmp_path / "sr.align")])


@pytest.mark.slow
def test_command_line_decodes_a_checkpoint(tmp_path, capsys):
    """A model trained through fairseq-train with csparsemax and fertility 1, decoded over the
    test subset here: the records' attention rows are distributions over the source with its
    </s>, and the statistics are those of the records."""
    from test_translation_cli import reversal_bin, train
    (tmp_path / "raw").mkdir()
    data = reversal_bin(tmp_path / "raw")
    train(data, tmp_path, "--attention-normalizer", "csparsemax", "--attention-fertility-value",
          "1", updates=4)
    assert main(["--data", str(data), "--path", str(tmp_path / "checkpoint_best.pt"), "--subset",
                 "test", "--beam", "2", "--max-len-b", "10", "--out", str(tmp_path / "s.json"),
                 "--records-out", str(tmp_path / "r.json")]) == 0
    stats = json.loads((tmp_path / "s.json").read_text())
    recs = json.loads((tmp_path / "r.json").read_text())["sentences"]
    assert len(recs) == 12 == stats["sentences"]
    zeros = total = 0
    for r in recs:
        assert r["source"][-1] == "</s>" and all(len(row) == len(r["source"]) for row in r["attn"])
        assert len(r["attn"]) == len(r["hypothesis_pieces"])
        for row in r["attn"]:
            assert abs(sum(row) - 1) < 1e-5
            zeros, total = zeros + sum(a == 0 for a in row), total + len(row)
        # fertility 1: each word's total attention stays ≤ 1 (the sink, </s>, takes the rest)
        for j in range(len(r["source"]) - 1):
            assert sum(row[j] for row in r["attn"]) <= 1 + 1e-5
    assert stats["zero_fraction"] == zeros / total
    assert stats["rep"] == rep_score([r["hypothesis"] for r in recs],
                                     [r["reference"] for r in recs])["rep"]
    # the same checkpoint decoded with a tighter fertility, 0.4 (--model-overrides): every word's
    # total attention now stays ≤ 0.4, where fertility 1 let some word take more
    def most(records):
        return max(sum(row[j] for row in r["attn"]) for r in records for j in range(len(r["source"]) - 1))
    assert most(recs) > 0.4 + 1e-3
    assert main(["--data", str(data), "--path", str(tmp_path / "checkpoint_best.pt"), "--subset",
                 "test", "--beam", "2", "--max-len-b", "10", "--out", str(tmp_path / "d.json"),
                 "--records-out", str(tmp_path / "d_r.json"),
                 "--model-overrides", "{'attention_fertility_value': 0.4}"]) == 0
    assert most(json.loads((tmp_path / "d_r.json").read_text())["sentences"]) <= 0.4 + 1e-5
    with pytest.raises(SystemExit, match="--model-overrides"):
        main(["--data", str(data), "--path", str(tmp_path / "checkpoint_best.pt"),
              "--model-overrides", "attention_normalizer=softmax"])
