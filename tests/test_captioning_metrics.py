"""Caption metrics (COCO toolkit: BLEU-4, ROUGE-L, CIDEr-D, METEOR 1.5) on hand-made cases, and the
evaluation command's mapping of fairseq-generate output to videos (docs/method.md §3.2, §5)."""
import json
import math
import shutil

import pytest

pytest.importorskip("pycocoevalcap")

from fairseq_acvi.cli import eval_captioning  # noqa: E402
from fairseq_acvi.metrics.captioning import (  # noqa: E402
    format_table3,
    normalize_caption,
    score_captions,
)
from fairseq_acvi.published import CAPTIONING_TABLE3  # noqa: E402


def _f_beta(p, r, beta=1.2):
    return (1 + beta ** 2) * p * r / (r + beta ** 2 * p)


def test_identical_captions_reach_the_maxima():
    refs = {"v1": ["a man is playing a guitar"], "v2": ["the cat eats some food now"], "v3": ["two dogs run on grass"]}
    hyps = {k: v[0] for k, v in refs.items()}
    s = score_captions(hyps, refs, metrics=["BLEU-4", "ROUGE-L", "CIDEr"])
    assert s["BLEU-4"] == pytest.approx(1.0, abs=1e-6)
    assert s["ROUGE-L"] == pytest.approx(1.0)
    assert s["CIDEr"] == pytest.approx(10.0)  # CIDEr-D: 10 x mean over n=1..4 of cosine 1, no length penalty


def test_rouge_l_hand_computed_lcs():
    # LCS("a b c d", "a c e d f") = "a c d" = 3 -> P = 3/4, R = 3/5, F_1.2
    one = _f_beta(3 / 4, 3 / 5)
    assert one == pytest.approx(0.6535714, abs=1e-6)
    s = score_captions({"v": "a b c d"}, {"v": ["a c e d f"]}, metrics=["ROUGE-L"])
    assert s["ROUGE-L"] == pytest.approx(one)
    # several references: precision and recall are maximised separately (ref 1: P 2/4 R 2/2; ref 2: P 3/4 R 3/5)
    s = score_captions({"v": "a b c d"}, {"v": ["a b", "a c e d f"]}, metrics=["ROUGE-L"])
    assert s["ROUGE-L"] == pytest.approx(_f_beta(3 / 4, 1.0))
    # corpus value = mean over videos; an empty hypothesis counts 0
    s = score_captions({"v": "a b c d", "w": "x y", "e": ""}, {"v": ["a c e d f"], "w": ["x y"], "e": ["q"]},
                       metrics=["ROUGE-L"])
    assert s["ROUGE-L"] == pytest.approx((one + 1.0 + 0.0) / 3)


def test_bleu4_hand_computed():
    # p1..p4 = 4/5, 3/4, 2/3, 1/2, no brevity penalty -> (0.2) ** 0.25
    s = score_captions({"v": "a b c d e"}, {"v": ["a b c d f"]}, metrics=["BLEU-4"])
    assert s["BLEU-4"] == pytest.approx(0.2 ** 0.25, abs=1e-6)
    # all precisions 1, hypothesis 4 words vs closest reference 6 -> brevity penalty exp(1 - 6/4)
    s = score_captions({"v": "a b c d"}, {"v": ["a b c d e f", "q r s t u v w x"]}, metrics=["BLEU-4"])
    assert s["BLEU-4"] == pytest.approx(math.exp(-0.5), abs=1e-6)


def test_cider_d_hand_checked_value_and_ordering():
    # 2 videos -> idf of an n-gram seen in one video = log 2. Video A: hyp "a" vs ref "a b": unigram
    # cosine 1/sqrt(2), no bigrams; length penalty exp(-1/(2*6^2)). Video B: identical 2-word caption:
    # cosines 1 for n = 1, 2 and 0 for n = 3, 4 (no such n-grams). CIDEr-D = 10 * mean_n, mean over videos.
    a = 10 / 4 * (1 / math.sqrt(2)) * math.exp(-1 / 72)
    b = 10 / 4 * 2
    s = score_captions({"A": "a", "B": "c d"}, {"A": ["a b"], "B": ["c d"]}, metrics=["CIDEr"])
    assert s["CIDEr"] == pytest.approx((a + b) / 2, rel=1e-9)
    # ordering: exact > partial overlap > unrelated
    refs = {"v1": ["a man is slicing a tomato", "someone cuts a tomato"], "v2": ["a dog is running in a park"],
            "v3": ["a woman is singing on a stage"]}
    base = {"v2": "a dog is running in a park", "v3": "a woman is singing on a stage"}
    exact = score_captions({**base, "v1": "a man is slicing a tomato"}, refs, ["CIDEr"])["CIDEr"]
    partial = score_captions({**base, "v1": "a man is cutting an onion"}, refs, ["CIDEr"])["CIDEr"]
    wrong = score_captions({**base, "v1": "birds fly over the sea"}, refs, ["CIDEr"])["CIDEr"]
    assert exact > partial > wrong > 0
    # idf comes from the scored set: a single video gives every n-gram weight log(1) = 0
    assert score_captions({"v": "a b c d"}, {"v": ["a b c d"]}, ["CIDEr"])["CIDEr"] == 0.0


def test_normalisation_and_input_checks():
    assert normalize_caption("A Man's playing, the GUITAR!") == "a man s playing the guitar"
    # punctuation and case do not change the scores
    s1 = score_captions({"v": "A dog runs."}, {"v": ["a dog runs fast"]}, ["BLEU-4", "ROUGE-L"])
    s2 = score_captions({"v": "a dog runs"}, {"v": ["a dog runs fast"]}, ["BLEU-4", "ROUGE-L"])
    assert s1 == s2
    with pytest.raises(ValueError, match="without a hypothesis"):
        score_captions({"v": "x"}, {"v": ["x"], "w": ["y"]}, ["CIDEr"])
    with pytest.raises(ValueError, match="unknown metrics"):
        score_captions({"v": "x"}, {"v": ["x"]}, ["SPICE"])


def test_table3_layout_shows_published_and_ours():
    table = format_table3({"valid": {"ROUGE-L": 0.61, "CIDEr": 0.7}, "test": {"ROUGE-L": 0.5, "CIDEr": 0.4}},
                          name="mine", extra_metrics=())
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "split", "SA", "Structured", "Variational", "VED", "ACVI", "mine"]
    assert lines[2].split() == ["ROUGE-L", "valid", "0.5628", "0.5804", "0.5809", "0.5839", "0.5968", "0.6100"]
    assert lines[5].split() == ["CIDEr", "test", "0.4210", "0.4283", "0.4289", "0.4298", "0.4375", "0.4000"]
    assert CAPTIONING_TABLE3["ACVI"][("CIDEr", "valid")] == 0.6039


# ----------------------------------------------------------------------------------------------
# the evaluation command


def _captions(tmp_path):
    p = tmp_path / "test.tsv"
    p.write_text("vid5\ta man plays a guitar\nvid5\tsomeone plays guitar\nvid9\ta cat eats food\n"
                 "vid7\ta woman slices an onion\nvid9\tthe cat is eating\n")
    return p


def test_generate_output_maps_ids_to_videos(tmp_path):
    caps = _captions(tmp_path)
    gen = tmp_path / "gen.txt"
    # video mode: ids 0, 1, 2 = vid5, vid9, vid7 (first appearance); nbest 2 for id 1: the first H wins
    gen.write_text("S-0\t\nT-1\tx\nH-1\t-0.5\ta cat eats food\nH-1\t-0.9\ta dog\nH-0\t-0.1\ta man plays a guitar\n"
                   "P-0\t-0.1 -0.2\nH-2\t-0.3\ta woman slices an onion\n")
    hyps = eval_captioning.hypotheses_by_video(str(gen), str(caps))
    assert hyps == {"vid5": "a man plays a guitar", "vid9": "a cat eats food", "vid7": "a woman slices an onion"}
    # D- lines (detokenised) are preferred when present
    gen.write_text(gen.read_text() + "D-0\t-0.1\tDETOK\nD-1\t-0.5\tb\nD-2\t-0.3\tc\n")
    assert eval_captioning.hypotheses_by_video(str(gen), str(caps))["vid5"] == "DETOK"
    # caption mode: ids are caption lines (0..4 -> vid5 vid5 vid9 vid7 vid9); each video takes its lowest id
    gen.write_text("H-4\t0\tlate\nH-2\t0\tcat\nH-1\t0\tsecond\nH-0\t0\tfirst\nH-3\t0\tonion\n")
    assert eval_captioning.hypotheses_by_video(str(gen), str(caps), id_mode="caption") == {
        "vid5": "first", "vid9": "cat", "vid7": "onion"}
    # the same file read in video mode has out-of-range ids -> a clear error, not a silent mix-up
    with pytest.raises(ValueError, match=r"out of range for 3 items.*--caption-eval-unique-videos"):
        eval_captioning.hypotheses_by_video(str(gen), str(caps), id_mode="video")


def test_eval_command_scores_and_reports_missing_videos(tmp_path, capsys):
    caps = _captions(tmp_path)
    hyp = tmp_path / "hyp.tsv"
    hyp.write_text("vid7\ta woman slices an onion\nvid5\ta man plays a guitar\nvid9\ta cat eats food\n")
    out = tmp_path / "s.json"
    res = eval_captioning.main(["--split", "test", str(caps), str(hyp), "--metrics", "BLEU-4", "ROUGE-L", "CIDEr",
                                "--json", str(out), "--name", "mine"])
    refs = {"vid5": ["a man plays a guitar", "someone plays guitar"], "vid9": ["a cat eats food", "the cat is eating"],
            "vid7": ["a woman slices an onion"]}
    expect = score_captions({"vid5": "a man plays a guitar", "vid9": "a cat eats food",
                             "vid7": "a woman slices an onion"}, refs, ["BLEU-4", "ROUGE-L", "CIDEr"])
    assert res["test"] == pytest.approx(expect)
    assert res["test"]["ROUGE-L"] == pytest.approx(1.0)
    assert json.loads(out.read_text())["test"] == pytest.approx(expect)
    printed = capsys.readouterr().out
    assert "mine" in printed and "0.5766" in printed
    # a video without a hypothesis is an error naming it
    hyp.write_text("vid7\ta woman\nvid5\ta man\n")
    with pytest.raises(ValueError, match=r"no hypothesis for 1 of 3 videos.*vid9"):
        eval_captioning.main(["--split", "test", str(caps), str(hyp), "--metrics", "CIDEr"])
    hyp.write_text("vid7\ta woman\nvid7\ta man\n")
    with pytest.raises(ValueError, match=r"hyp\.tsv:2: second hypothesis for video 'vid7'"):
        eval_captioning.main(["--split", "test", str(caps), str(hyp), "--metrics", "CIDEr"])


@pytest.mark.slow  # starts METEOR 1.5 in a JVM and loads its paraphrase table: ~1 min on 2 busy cores
@pytest.mark.skipif(shutil.which("java") is None, reason="METEOR needs java")
def test_meteor_ordering():
    from fairseq_acvi.metrics.captioning import meteor_scores

    r1, r2 = ["a man is playing a guitar", "a man plays the guitar"], ["a cat is eating food"]
    gts = {"same1": r1, "same2": r2, "close1": r1, "close2": r2, "wrong1": r1, "wrong2": r2}
    res = {"same1": ["a man is playing a guitar"], "same2": ["a cat is eating food"],
           "close1": ["a man is playing guitar"], "close2": ["a cat eats food"],
           "wrong1": ["birds fly over sea"], "wrong2": ["a car drives fast"]}
    corpus, seg = meteor_scores(gts, res)  # one JVM for all cases
    for i in ("1", "2"):
        assert 0.9 < seg["same" + i] <= 1.0
        assert seg["same" + i] > seg["close" + i] > seg["wrong" + i] >= 0.0
    assert 0.0 < corpus < 1.0
