"""Summarization evaluation beyond ROUGE: novel and repeated n-gram rates
(fairseq_acvi.metrics.ngrams), the lead-3 baseline (fairseq_acvi.summ_eval.lead) and the fixed
test subsets with See et al.'s outputs beside them (data_scripts/cnndm_subset.py).
"""
import gzip
import sys
from pathlib import Path

import pytest
import torch

from fairseq_acvi.cli import lead_baseline
from fairseq_acvi.metrics.ngrams import ngrams, novel_ngram_rates, repeated_ngram_rate
from fairseq_acvi.summ_eval.lead import lead
from fairseq_acvi.summ_eval.scoring import evaluate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "data_scripts"))
import cnndm_subset  # noqa: E402
from common import DataError  # noqa: E402


# ---------------------------------------------------------------- n-gram statistics

def test_ngrams_in_order_and_short_text():
    assert ngrams("a b c d".split(), 3) == [("a", "b", "c"), ("b", "c", "d")]
    assert ngrams(["a"], 2) == []
    with pytest.raises(ValueError):
        ngrams(["a"], 0)


def test_repeated_trigram_rate_hand_computed():
    # "a b c a b c": trigrams abc bca cab abc -> 1 repeat of 4; "x y z": 0 of 1 -> 1 / 5 pooled
    assert repeated_ngram_rate(["a b c a b c", "x y z"]) == pytest.approx(20.0)
    # sentence markers are removed and case is folded before counting
    # n-grams stay within sentences: [a b c .] [a b c .] -> abc "bc ." abc "bc ." -> 2 repeats of 4
    assert repeated_ngram_rate(["<t> A b c . </t> <t> a B c . </t>"]) == pytest.approx(50.0)
    assert repeated_ngram_rate(["a b c . a b c ."]) == pytest.approx(50.0)
    assert repeated_ngram_rate(["a b c d e"]) == 0.0
    with pytest.raises(ValueError, match="3-gram"):
        repeated_ngram_rate(["a b"])


def test_novel_ngram_rates_hand_computed():
    src = ["<t> the cat sat on the mat . </t>"]
    hyp = ["the cat sat on a mat ."]
    got = novel_ngram_rates(hyp, src, orders=(1, 2, 3))
    # 1-grams: "a" novel of 7; 2-grams: "on a", "a mat" novel of 6; 3-grams: 3 of 5 novel
    # ("sat on a", "on a mat", "a mat .")
    assert got[1] == pytest.approx(100 / 7)
    assert got[2] == pytest.approx(100 * 2 / 6)
    assert got[3] == pytest.approx(100 * 3 / 5)
    # two source sentences side by side, reordered: no novel n-gram (none crosses a boundary)
    two = ["<t> one two three . </t> <t> four five six . </t>"]
    assert novel_ngram_rates(["four five six . one two three ."], two, orders=(2, 3)) == {2: 0.0, 3: 0.0}
    # a pure copy has no novel n-grams
    assert novel_ngram_rates(["the cat sat"], src, orders=(1, 2, 3)) == {1: 0.0, 2: 0.0, 3: 0.0}
    with pytest.raises(ValueError, match="2 summaries but 1 sources"):
        novel_ngram_rates(hyp * 2, src)


def test_evaluate_reports_ngram_figures():
    res = evaluate(["a b c a b c ."], ["a b c ."], srcs=["a b c ."], meteor_modes=())
    # trigrams abc bca cab abc "bc ." : one repeat; bca and cab are not in the source
    assert res["repeat_3gram"] == pytest.approx(100 * 1 / 5)
    assert res["novel_3gram"] == pytest.approx(100 * 2 / 5)
    assert res["novel_1gram"] == 0.0


# ---------------------------------------------------------------- lead-3

def test_lead_sentences_keep_closing_quotes_and_markers():
    art = 'he said " stop . " then left ! why ? ( cnn ) more . last one .'
    assert lead(art, 3) == 'he said " stop . " then left ! why ?'
    assert lead("a b . '' c d . e", 2) == "a b . '' c d ."
    assert lead("<t> one </t> <t> two . </t> three .", 2) == "one two ."
    assert lead("only one sentence", 3) == "only one sentence"
    with pytest.raises(ValueError):
        lead("x", 0)


def test_lead_command_writes_one_line_per_article(tmp_path, capsys):
    src = tmp_path / "a.article"
    src.write_text("s1 . s2 . s3 . s4 .\nonly .\n", encoding="utf-8")
    out = tmp_path / "lead.txt"
    assert lead_baseline.main(["--src", str(src), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == ["s1 . s2 . s3 .", "only ."]
    src.write_text("s1 .\n\ns2 .\n", encoding="utf-8")
    assert lead_baseline.main(["--src", str(src), "--out", str(out)]) == 1
    assert f"{src}:2: empty line" in capsys.readouterr().err


# ---------------------------------------------------------------- subsets

def _fake_prepared(folder: Path, n: int = 7, with_ids: bool = True):
    """A prepared folder: dictionaries, binarised src/tgt and the text files of split 'test'."""
    from fairseq.data import Dictionary, indexed_dataset

    d = Dictionary()
    for w in "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9".split():
        d.add_symbol(w)
    for lang in ("src", "tgt"):
        d.save(str(folder / f"dict.{lang}.txt"))
    g = torch.Generator().manual_seed(0)
    items = {}
    for lang, length in (("src", 9), ("tgt", 4)):
        b = indexed_dataset.make_builder(str(folder / f"test.src-tgt.{lang}.bin"), impl="mmap",
                                         vocab_size=len(d))
        items[lang] = []
        for i in range(n):
            t = torch.randint(4, len(d), (length + i % 3,), generator=g)
            t[-1] = d.eos()
            b.add_item(t)
            items[lang].append(t)
        b.finalize(str(folder / f"test.src-tgt.{lang}.idx"))
    articles = [f"article number {i} about topic {i} ." for i in range(n)]
    (folder / "test.article").write_text("\n".join(articles) + "\n", encoding="utf-8")
    (folder / "test.summary").write_text("\n".join(f"<t> summary {i} . </t>" for i in range(n)) + "\n",
                                         encoding="utf-8")
    if with_ids:
        ids = [f"test_000.bin\t{i}\t{i:040x}" for i in range(n)]
        (folder / "test.ids").write_text("\n".join(ids) + "\n", encoding="utf-8")
    return d, items, articles


def _load(folder: Path, split: str, lang: str, d):
    from fairseq.data import data_utils
    ds = data_utils.load_indexed_dataset(str(folder / f"{split}.src-tgt.{lang}"), d, "mmap")
    return [ds[i] for i in range(len(ds))]


def test_every_k_subset_copies_records_and_text(tmp_path):
    d, items, articles = _fake_prepared(tmp_path)
    assert cnndm_subset.main(["--data", str(tmp_path), "--every", "3"]) == 0
    assert (tmp_path / "test_every3.index").read_text().split() == ["0", "3", "6"]
    for lang in ("src", "tgt"):
        got = _load(tmp_path, "test_every3", lang, d)
        assert [t.tolist() for t in got] == [items[lang][i].tolist() for i in (0, 3, 6)]
    assert (tmp_path / "test_every3.article").read_text().splitlines() == [articles[i] for i in (0, 3, 6)]
    assert (tmp_path / "test_every3.ids").read_text().splitlines()[1].endswith(f"{3:040x}")
    with pytest.raises(DataError, match="--every 99"):
        cnndm_subset.main(["--data", str(tmp_path), "--every", "99"])


def test_see_sample_subsets_align_outputs_with_records(tmp_path):
    data = tmp_path / "bin"
    data.mkdir()
    d, items, articles = _fake_prepared(data)
    sample = tmp_path / "sample"
    (sample / "realsumm_ptrgen").mkdir(parents=True)
    (sample / "summeval").mkdir()
    # REALSumm: rows 0 and 2 are records 5 and 1 (text match, <t> markers and case differ); row 1
    # is not in the split
    rs = ["<t> Article number 5 about topic 5 . </t>", "<t> some other story . </t>",
          "<t> article number 1 about topic 1 . </t>"]
    (sample / "realsumm_ptrgen" / "src.txt").write_text("\n".join(rs), encoding="utf-8")
    for fname in cnndm_subset.REALSUMM_SYSTEMS.values():
        (sample / "realsumm_ptrgen" / fname).write_text(
            "\n".join(f"{fname} row {r}" for r in range(3)), encoding="utf-8")
    # SummEval: ids of records 4 and 2, and one unknown
    se = [f"dm-test-{4:040x}", f"cnn-test-{'f' * 40}", f"dm-test-{2:040x}"]
    (sample / "summeval" / "test.ids").write_text("\n".join(se) + "\n", encoding="utf-8")
    (sample / "summeval" / "test.pointer_generator_M8.txt").write_text(
        "\n".join(f"m8 row {r}" for r in range(3)) + "\n", encoding="utf-8")

    assert cnndm_subset.main(["--data", str(data), "--see-sample", str(sample)]) == 0
    assert (data / "test_realsumm.index").read_text().split() == ["5", "1"]
    assert (data / "test_realsumm.see_pointer_gen.txt").read_text().splitlines() == [
        "out_pointer_gen.txt row 0", "out_pointer_gen.txt row 2"]
    assert [t.tolist() for t in _load(data, "test_realsumm", "src", d)] == [
        items["src"][5].tolist(), items["src"][1].tolist()]
    assert (data / "test_summeval.index").read_text().split() == ["4", "2"]
    assert (data / "test_summeval.see_pointer_gen_m8.txt").read_text().splitlines() == [
        "m8 row 0", "m8 row 2"]

    # a malformed SummEval id is an error naming the file and line
    (sample / "summeval" / "test.ids").write_text("dm-test-xyz\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.ids:1: expected"):
        cnndm_subset.main(["--data", str(data), "--see-sample", str(sample)])


def test_subset_errors_are_clear(tmp_path):
    with pytest.raises(DataError, match="nothing to do"):
        cnndm_subset.main(["--data", str(tmp_path)])
    with pytest.raises(DataError, match="missing file: .*test.article"):
        cnndm_subset.main(["--data", str(tmp_path), "--every", "2"])
    _fake_prepared(tmp_path, with_ids=False)
    with pytest.raises(DataError, match="test.ids"):
        cnndm_subset.main(["--data", str(tmp_path), "--see-sample", str(tmp_path)])
    (tmp_path / "test.summary").write_text("<t> one . </t>\n", encoding="utf-8")
    with pytest.raises(DataError, match="has 1 lines but"):
        cnndm_subset.main(["--data", str(tmp_path), "--every", "2"])


# ---------------------------------------------------------------- the report

def _report_subset(tmp_path):
    """A prepared folder with a two-article subset ``sub``; returns (folder, references)."""
    data = tmp_path / "bin"
    data.mkdir()
    arts = ["the cat sat . the dog ran . a bird sang . it rained .",
            "police found a car . it was red . nobody was hurt . the end ."]
    refs = ["<t> the cat sat . </t> <t> a bird sang . </t>", "<t> police found a red car . </t>"]
    (data / "sub.article").write_text("\n".join(arts) + "\n", encoding="utf-8")
    (data / "sub.summary").write_text("\n".join(refs) + "\n", encoding="utf-8")
    return data, refs


def test_summ_report_rows_missing_systems_and_coverage_change(tmp_path):
    from fairseq_acvi.cli import summ_report

    data, refs = _report_subset(tmp_path)
    (data / "sub.see_pointer_gen.txt").write_text("the cat sat .\npolice found a car .\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    # before coverage: repeats; after: none
    (run / "hyp_sub_phase4.txt").write_text("the cat sat the cat sat the cat sat .\n"
                                            "police found police found police found .\n", encoding="utf-8")
    (run / "hyp_sub.txt").write_text("the cat sat . a bird sang .\npolice found a car .\n", encoding="utf-8")
    out = tmp_path / "report"
    assert summ_report.main(["--data", str(data), "--subset", "sub",
                             "--system", f"soft={run}/hyp_{{subset}}_phase4.txt",
                             "--system", f"soft+cov={run}/hyp_{{subset}}.txt",
                             "--system", f"acvi={run}/missing_{{subset}}.txt",
                             "--coverage-pair", "soft:soft+cov", "--paired", "soft:soft+cov",
                             "--paired", "soft:acvi", "--out-dir", str(out)]) == 0
    import json

    from fairseq_acvi.metrics.rouge import rouge_per_pair
    rep = json.loads((out / "results.json").read_text())["subsets"]["sub"]
    # two articles: the bootstrap interval of a mean is the range of the two articles' scores,
    # and the paired one the range of their differences
    per = {name: rouge_per_pair((run / f).read_text().splitlines(), refs)["rouge1"]
           for name, f in (("soft", "hyp_sub_phase4.txt"), ("soft+cov", "hyp_sub.txt"))}
    assert rep["rows"]["soft"]["ci"]["rouge1"] == pytest.approx([min(per["soft"]), max(per["soft"])])
    diffs = [b - a for a, b in zip(per["soft"], per["soft+cov"])]
    pr = rep["paired"]["soft:soft+cov"]["rouge1"]
    assert pr["delta"] == pytest.approx(sum(diffs) / 2)
    assert [pr["low"], pr["high"]] == pytest.approx([min(diffs), max(diffs)])
    assert rep["paired"]["soft:acvi"]["skipped"] == "summaries of acvi not scored here for this subset"
    # a label with ':' in it pairs as well; a misspelt label is an error listing the labels
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--system", f"soft={run}/hyp_sub.txt",
                             "--paired", "See et al.: pointer_gen:soft", "--out-dir", str(tmp_path / "p")]) == 0
    p = json.loads((tmp_path / "p" / "results.json").read_text())["subsets"]["sub"]["paired"]
    assert p["See et al.: pointer_gen:soft"]["a"] == "See et al.: pointer_gen"
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--paired", "lead-3:sotf",
                             "--out-dir", str(tmp_path / "p")]) == 1
    assert list(rep["rows"]) == ["lead-3", "See et al.: pointer_gen", "soft", "soft+cov"]
    assert rep["missing"] == {"acvi": f"{run}/missing_sub.txt"}
    assert rep["rows"]["lead-3"]["novel_3gram"] == 0.0
    # 8 + 5 trigrams, 4 + 2 of them repeats
    assert rep["rows"]["soft"]["repeat_3gram"] == pytest.approx(100 * 6 / 13)
    assert rep["rows"]["soft+cov"]["repeat_3gram"] == 0
    assert rep["coverage"]["soft:soft+cov"]["relative_change"] == pytest.approx(-1.0)
    assert rep["rows"]["soft+cov"]["rouge1"] > rep["rows"]["soft"]["rouge1"]
    md = (out / "results.md").read_text()
    assert "| acvi | not decoded for this subset |" in md and "repeated 3-grams" in md
    # the absent file is named in results.json, not quoted in the report as if it were there
    assert rep["missing"]["acvi"].endswith(".txt") and rep["missing"]["acvi"] not in md
    assert "Paired soft+cov − soft (1,000 resamples of the same articles): R-1 +" in md
    assert "Paired acvi − soft: not computed (summaries of acvi not scored here" in md
    # a system with the wrong number of lines is an error naming the file
    (run / "hyp_sub.txt").write_text("one line only .\n", encoding="utf-8")
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--system",
                             f"x={run}/hyp_{{subset}}.txt", "--out-dir", str(out)]) == 1


def test_summ_report_keeps_outputs_and_brings_in_an_earlier_report(tmp_path, capsys):
    import json

    from fairseq_acvi.cli import summ_report

    data, refs = _report_subset(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "hyp_old.txt").write_text("the cat sat the cat sat .\npolice found police found .\n",
                                     encoding="utf-8")
    (run / "hyp_new.txt").write_text("the cat sat . a bird sang .\npolice found a car .\n", encoding="utf-8")
    first = tmp_path / "first"
    (data / "sub.see_pointer_gen.txt").write_text("the cat sat .\npolice found a car .\n", encoding="utf-8")
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--system", f"soft={run}/hyp_old.txt",
                             "--keep-outputs", "--out-dir", str(first)]) == 0
    # ours are kept; See et al.'s published outputs are data and stay beside the subset
    assert sorted(p.name for p in (first / "outputs" / "sub").iterdir()) == ["soft.txt.gz"]
    kept = first / "outputs" / "sub" / "soft.txt.gz"
    assert gzip.decompress(kept.read_bytes()).decode() == (run / "hyp_old.txt").read_text()
    old = json.loads((first / "results.json").read_text())
    assert old["subsets"]["sub"]["rows"]["soft"]["kept"] == "outputs/sub/soft.txt.gz"
    old["date"] = "2026-01-02"
    (first / "results.json").write_text(json.dumps(old))

    # the old summaries are gone; a new system is scored now, the old row comes from the report
    (run / "hyp_old.txt").unlink()
    second = tmp_path / "second"
    assert summ_report.main(["--data", str(data), "--subset", "sub",
                             "--system", f"acvi={run}/hyp_new.txt", "--system", f"soft={run}/hyp_old.txt",
                             "--earlier", str(first / "results.json"), "--keep-outputs",
                             "--coverage-pair", "soft:acvi", "--out-dir", str(second)]) == 0
    # only the summaries scored now are kept (the earlier row's file is gone)
    assert sorted(p.name for p in (second / "outputs" / "sub").iterdir()) == ["acvi.txt.gz"]
    rep = json.loads((second / "results.json").read_text())["subsets"]["sub"]
    assert list(rep["rows"]) == ["lead-3", "See et al.: pointer_gen", "acvi", "soft"] and rep["missing"] == {}
    see = rep["rows"]["See et al.: pointer_gen"]
    assert see["published"] is True and "kept" not in see
    assert rep["rows"]["soft"]["rouge1"] == old["subsets"]["sub"]["rows"]["soft"]["rouge1"]
    assert rep["rows"]["soft"]["scored"] == "2026-01-02"
    assert rep["coverage"]["soft:acvi"]["relative_change"] == pytest.approx(-1.0)
    md = (second / "results.md").read_text()
    assert "| soft † |" in md and "| acvi |" in md and "† scored on 2026-01-02" in md

    # scored again in the same folder from its own kept summaries: they stay, and so do the figures
    again = summ_report.main(["--data", str(data), "--subset", "sub", "--system",
                              f"acvi={second}/outputs/{{subset}}/acvi.txt.gz", "--keep-outputs",
                              "--out-dir", str(second)])
    kept = (second / "outputs" / "sub" / "acvi.txt.gz").read_bytes()
    assert again == 0 and gzip.decompress(kept).decode() == (run / "hyp_new.txt").read_text()
    rep2 = json.loads((second / "results.json").read_text())["subsets"]["sub"]
    assert rep2["rows"]["acvi"]["rouge1"] == rep["rows"]["acvi"]["rouge1"]

    # two labels that would overwrite each other's kept file are refused
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--system", f"a b={run}/hyp_new.txt",
                             "--system", f"a_b={run}/hyp_new.txt", "--keep-outputs",
                             "--out-dir", str(tmp_path / "x")]) == 1
    assert "'a b' and 'a_b' give the same file name a_b.txt.gz" in capsys.readouterr().err
    # another set of references: the earlier lead-3 no longer agrees, so its rows are refused
    (data / "sub.summary").write_text("<t> it rained . </t>\n<t> the end . </t>\n", encoding="utf-8")
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--earlier",
                             str(first / "results.json"), "--out-dir", str(tmp_path / "x")]) == 1
    assert "lead-3 of sub gives rouge1" in capsys.readouterr().err
    # a file that is not a report is an error naming it
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--earlier",
                             str(tmp_path / "bad.json"), "--out-dir", str(tmp_path / "x")]) == 1
    assert "bad.json: not a summ_report results.json" in capsys.readouterr().err


def test_summ_report_pairs_a_system_only_where_a_subset_has_it(tmp_path):
    import json
    import shutil

    from fairseq_acvi.cli import summ_report

    data, _ = _report_subset(tmp_path)
    for ext in ("article", "summary"):
        shutil.copyfile(data / f"sub.{ext}", data / f"other.{ext}")
    (data / "sub.see_x.txt").write_text("the cat sat .\npolice found a car .\n", encoding="utf-8")
    out = tmp_path / "r"
    assert summ_report.main(["--data", str(data), "--subset", "sub", "--subset", "other",
                             "--paired", "lead-3:See et al.: x", "--out-dir", str(out)]) == 0
    rep = json.loads((out / "results.json").read_text())["subsets"]
    assert rep["sub"]["paired"]["lead-3:See et al.: x"]["rouge1"]["n_resamples"] == 1000
    assert rep["other"]["paired"] == {}          # the subset has no such system: nothing to say
