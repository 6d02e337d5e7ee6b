"""ROUGE / METEOR / novelty (docs/method.md §5, P Tables 1-2) and the eval_summarization command."""
import json
import shutil

import pytest

from conftest import run_cli
from fairseq_acvi.cli import eval_summarization as ev
from fairseq_acvi.data.text_lines import read_lines
from fairseq_acvi.metrics.meteor import meteor, meteor_resources
from fairseq_acvi.metrics.novelty import novelty
from fairseq_acvi.metrics.rouge import rouge, summary_sentences, unglue_periods

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="METEOR needs java")


def _write(path, lines, final_newline=True):
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- text normalisation

def test_summary_sentences_split_markers_periods_and_see_glue():
    assert summary_sentences("<t> a b .375 c .the d . </t> <t> e ! f ? g") == \
        [["a", "b", ".375", "c", "."], ["the", "d", "."], ["e", "!"], ["f", "?"], ["g"]]
    # ".26-year" is glue (a sentence starting with "26-year"); "..." is not
    assert unglue_periods("died .26-year - old x ... y") == "died . 26-year - old x ... y"
    assert summary_sentences("   ") == []


# ---------------------------------------------------------------- ROUGE

def test_rouge_identical_is_100_and_disjoint_is_0():
    text = "<t> the man was arrested . </t> <t> police said he fled . </t>"
    assert rouge([text], [text]) == pytest.approx({"rouge1": 100, "rouge2": 100,
                                                   "rougeLsum": 100})
    assert rouge(["alpha beta gamma"], ["delta epsilon zeta eta"]) == \
        {"rouge1": 0.0, "rouge2": 0.0, "rougeLsum": 0.0}


def test_rouge_hand_computed_with_stemming():
    # stemmed, punctuation dropped: hyp [polic arrest the man], ref [the man wa arrest by polic
    # yesterday]. R1: 4 matches, P=4/4, R=4/7 → F=8/11. R2: only "the man": P=1/3, R=1/6 →
    # F=2/9. LCS = "the man" (2): P=2/4, R=2/7 → F=4/11.
    got = rouge(["police arrested the man ."], ["the man was arrested by police yesterday ."])
    assert got["rouge1"] == pytest.approx(100 * 8 / 11)
    assert got["rouge2"] == pytest.approx(100 * 2 / 9)
    assert got["rougeLsum"] == pytest.approx(100 * 4 / 11)


def test_rouge_l_is_summary_level_over_sentences():
    # reference sentences "alpha beta gamma" | "delta epsilon" (See-style glued period): the
    # union LCS recovers all 5 words (F=100); over one concatenated sentence the LCS is 3 (60).
    hyp = ["delta epsilon alpha beta gamma ."]
    assert rouge(hyp, ["alpha beta gamma .delta epsilon ."])["rougeLsum"] == pytest.approx(100)
    assert rouge(hyp, ["alpha beta gamma delta epsilon ."])["rougeLsum"] == pytest.approx(60)
    # mean over pairs: (100 + 0) / 2
    assert rouge(["a b", "c d"], ["a b", "e f"])["rouge1"] == pytest.approx(50)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        rouge(["a", "b"], ["a"])


def test_rouge_orders_see_et_al_systems_like_the_paper(shared_data):
    """See et al. (2017) Table 1: baseline < pointer-gen < pointer-gen + coverage on R-1/2/L."""
    d = shared_data / "cnn_dm_sample" / "realsumm_ptrgen"
    refs = read_lines(str(d / "ref.txt"))
    scores = [rouge(read_lines(str(d / f"out_{s}.txt")), refs)
              for s in ("baseline", "pointer_gen", "pointer_gen_cov")]
    for k in ("rouge1", "rouge2", "rougeLsum"):
        assert scores[0][k] < scores[1][k] < scores[2][k], (k, scores)
    assert 28 < scores[0]["rouge1"] < 35 and 35 < scores[2]["rouge1"] < 43


# ---------------------------------------------------------------- METEOR

def test_meteor_resources_shipped_with_pycocoevalcap():
    res = meteor_resources()
    assert res["jar"] and res["paraphrase-en"]


@needs_java
def test_meteor_exact_identical_is_one_and_orders_by_closeness():
    ref = "the cat sat on the mat ."
    hyps = [ref, "the cat sat on a rug .", "dogs bark loudly at night ."]
    out = meteor(hyps, [ref] * 3, mode="exact")
    seg = out["segments"]
    assert seg[0] == pytest.approx(100.0, abs=1e-6)
    assert seg[0] > seg[1] > seg[2] >= 0
    assert 0 < out["score"] < 100
    # exact mode gives no credit for a morphological variant
    assert meteor(["cats"], ["cat"], mode="exact")["score"] == 0.0


@needs_java
@pytest.mark.slow
def test_meteor_full_rewards_stems_and_synonyms():
    """Full mode loads the paraphrase table (~20-40 s)."""
    hyp, ref = ["the kittens sat on the rug ."], ["the kitten sat on the carpet ."]
    exact = meteor(hyp, ref, mode="exact")["score"]
    full = meteor(hyp, ref, mode="full")["score"]
    assert full > exact > 0


# ---------------------------------------------------------------- novelty

def test_novelty_hand_computed():
    src = ["<t> the cat sat on the mat zyx . </t>", "police found 62-year-old qwv"]
    hyps = ["the dog sat on zyx UNK .", "police found 62-year - old qwv qwv"]
    vocab = {"the", "cat", "sat", "on", "mat", "dog", "police", "found", "62-year", "old"}
    got = novelty(hyps, src, vocab)
    # word tokens: 6 + 6 ("." and "-" are punctuation) = 12. novel: "dog" only ("62-year"
    # splits into 62 + year, both in the source). unknown: UNK. adopted OOV: zyx, qwv, qwv.
    assert got["words"] == 12
    assert got["novel_rate"] == pytest.approx(100 * 1 / 12)
    assert got["unk_rate"] == pytest.approx(100 * 1 / 12)
    assert got["oov_adoption"] == pytest.approx(100 * 3 / 12)
    assert got["oov_per_summary"] == pytest.approx(1.5)
    no_vocab = novelty(hyps, src)
    assert no_vocab["oov_adoption"] is None and no_vocab["novel_rate"] == got["novel_rate"]


# ---------------------------------------------------------------- the command

def test_read_lines_errors_and_last_line_without_newline(tmp_path):
    p = _write(tmp_path / "f", ["a", "b"], final_newline=False)
    assert read_lines(p) == ["a", "b"]
    q = _write(tmp_path / "g", ["a", "", "c"])
    with pytest.raises(ValueError, match=f"{q}:2: empty line"):
        read_lines(q)


def test_eval_command_errors_name_file_and_line(tmp_path, capsys):
    ref = _write(tmp_path / "ref", ["a b c .", "d e f .", "g h ."])
    hyp = _write(tmp_path / "hyp", ["a b c .", "d e f .", " "])
    assert ev.main(["--hyp", hyp, "--ref", ref, "--meteor", "none"]) == 1
    assert f"{hyp}:3: empty line" in capsys.readouterr().err
    short = _write(tmp_path / "short", ["a b c .", "d e f ."])
    assert ev.main(["--hyp", short, "--ref", ref, "--meteor", "none"]) == 1
    assert f"{ref} has 3 lines but {short} has 2" in capsys.readouterr().err
    marked = _write(tmp_path / "marked", ["a <unk-4> c .", "d e f .", "g h ."])
    assert ev.main(["--hyp", marked, "--ref", ref, "--meteor", "none"]) == 1
    assert f"{marked}:1: unrestored OOV marker <unk-4>" in capsys.readouterr().err
    assert ev.main(["--hyp", hyp, "--ref", ref, "--meteor", "none", "--allow-empty-hyp"]) == 0


@needs_java
def test_eval_command_on_shared_sample(tmp_path, shared_data):
    """The real command in a subprocess on 6 documents of See et al.'s pointer-generator."""
    d = shared_data / "cnn_dm_sample" / "realsumm_ptrgen"
    n = 6
    files = {}
    for name in ("src", "ref", "out_pointer_gen"):
        lines = read_lines(str(d / f"{name}.txt"))[:n]
        files[name] = _write(tmp_path / name, lines)
    # a vocabulary without a few source words, so that some output words are adopted OOVs
    hyps = read_lines(files["out_pointer_gen"])
    srcs = read_lines(files["src"])
    oov = {"koirala", "nepal", "kathmandu"}
    words = sorted({w for s in srcs for w in s.split()} - oov - {"<t>", "</t>"})
    dict_path = _write(tmp_path / "dict.txt", [f"{w} 1" for w in words] + ["<unk-0> 0"])
    out_json = tmp_path / "scores.json"
    res = run_cli("fairseq_acvi.cli.eval_summarization", "--hyp", files["out_pointer_gen"],
                  "--ref", files["ref"], "--src", files["src"], "--dict", dict_path,
                  "--meteor", "exact", "--json", out_json)
    assert "ROUGE-1 F1" in res.stdout and "METEOR exact" in res.stdout
    got = json.loads(out_json.read_text())
    assert got["n"] == n
    expect = rouge(hyps, read_lines(files["ref"]))
    assert got["rouge1"] == pytest.approx(expect["rouge1"])
    assert got["rougeL"] == pytest.approx(expect["rougeLsum"])
    nov = novelty(hyps, srcs, set(words))
    assert got["novel_rate"] == pytest.approx(nov["novel_rate"])
    assert got["oov_adoption"] == pytest.approx(nov["oov_adoption"]) and got["oov_adoption"] > 0
    assert 5 < got["meteor_exact"] < 40 and "meteor_full" not in got
