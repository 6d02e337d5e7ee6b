"""Every headline result of README.md, BENCHMARKS.md and docs/guide.md, recomputed from the result
file it comes from.

Figures are found by their row label (tables, located by the paragraph just above them) or by the
words around them (prose), never by line number, so sections may move. Each one is recomputed from
``docs/results/…`` (mean ± sample std over seeds, paired differences seed by seed) with the
rounding the reports use (two decimals; bAbI: one decimal, a task passed at ≥ 95 %). A mismatch, or
a figure that cannot be found where it is expected, fails naming the document, the figure and the
result file.
"""
import json
import math
import re
import statistics
from pathlib import Path

import pytest

from fairseq_acvi.babi_eval.results import load_json

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"


# ----------------------------------------------------------------------------------- formatting
def f2(x):
    return f"{x:.2f}"


def signed(x):
    return f"{x:+.2f}"


def mean_std(values, sign=False):
    """'m ± s' over seeds (sample std), two decimals, as mt_report writes it; one value: 'm'."""
    m = statistics.mean(values)
    head = signed(m) if sign else f2(m)
    return head if len(values) == 1 else f"{head} ± {statistics.stdev(values):.2f}"


def norm(text):
    """Compare figures as written: bold, the typographic minus and dash ranges do not count."""
    return (text.replace("**", "").replace("−", "-").replace("–", "-").strip())


# ----------------------------------------------------------------------------------- documents
class Doc:
    """A markdown document's figures: tables by caption and row label, prose by pattern."""

    def __init__(self, path):
        self.path = Path(path)
        self.name = str(self.path.relative_to(REPO))
        self.text = self.path.read_text(encoding="utf-8")
        self.flat = " ".join(self.text.split())
        self.errors = []
        self._tables = self._parse_tables()

    def _parse_tables(self):
        """[(caption, [[cell, ...], ...])]: caption = the paragraph just above the table."""
        lines, tables, i = self.text.splitlines(), [], 0
        while i < len(lines):
            if lines[i].lstrip().startswith("|"):
                j = i
                while j < len(lines) and lines[j].lstrip().startswith("|"):
                    j += 1
                k = i - 1
                while k >= 0 and not lines[k].strip():
                    k -= 1
                cap = []
                while k >= 0 and lines[k].strip() and not lines[k].lstrip().startswith("|"):
                    cap.insert(0, lines[k].strip())
                    k -= 1
                rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines[i:j]]
                rows = [r for r in rows if not all(set(c) <= set("-: ") for c in r)]
                tables.append((" ".join(cap), rows))
                i = j
            else:
                i += 1
        return tables

    def fail(self, figure, message):
        self.errors.append(f"{self.name}: {figure}: {message}")

    def row(self, caption, label, source):
        """The cells of the one row whose first cell contains ``label``, in the one table whose
        caption contains ``caption``; None (and an error) when either is missing or ambiguous."""
        tables = [rows for cap, rows in self.tables if caption in cap]
        if len(tables) != 1:
            self.fail(f"table under {caption!r}", f"{len(tables)} tables found (figures from {source})")
            return None
        rows = [r for r in tables[0][1:] if label in r[0]]
        if len(rows) != 1:
            self.fail(f"row {label!r} of the table under {caption!r}",
                      f"{len(rows)} rows found (figures from {source})")
            return None
        return rows[0]

    @property
    def tables(self):
        return self._tables

    def check_row(self, caption, label, wants, source):
        """``wants``: {column index: expected cell text}."""
        cells = self.row(caption, label, source)
        if cells is None:
            return
        for col, want in wants.items():
            got = cells[col] if col < len(cells) else "<no cell>"
            if norm(got) != norm(want):
                self.fail(f"{label!r} column {col} (table under {caption!r})",
                          f"reads {got!r}, {source} gives {want!r}")

    def check_prose(self, pattern, wants, figure, source):
        """``pattern``: a regex over the whitespace-collapsed text, one group per figure; it must
        match exactly once; group i must read ``wants[i]``."""
        found = list(re.finditer(pattern, self.flat))
        if len(found) != 1:
            self.fail(figure, f"the sentence /{pattern}/ is found {len(found)} times, expected once "
                              f"(figures from {source})")
            return
        for i, want in enumerate(wants, 1):
            got = found[0].group(i)
            if norm(got) != norm(want):
                self.fail(figure, f"reads {got!r}, {source} gives {want!r}")

    def assert_ok(self):
        assert not self.errors, "\n".join(self.errors)


NN = r"[+−-]?\d+(?:\.\d+)?"             # one figure, inside a larger group
N = rf"({NN})"                            # one figure
MSN = r"[+−-]?\d+\.\d+ ± \d+\.\d+"      # mean ± std, inside a larger group
MS = rf"({MSN})"                          # mean ± std


# ----------------------------------------------------------------------------------- result files
def _babi_json(rel):
    """A bAbI results file kept under docs/results/ (gzipped there: ``rel`` + ``.gz``)."""
    path = RESULTS / f"{rel}.gz"
    assert path.exists(), f"{path} is missing"
    return load_json(str(path))


class MT:
    """An mt_report results.json: runs by (pair, variant, seed)."""

    def __init__(self, rel):
        self.source = f"docs/results/{rel}"
        data = json.loads((RESULTS / rel).read_text())
        self.runs = {(r["pair"], r["variant"], r["seed"]): r for r in data["runs"]}

    def run(self, pair, variant, seed):
        try:
            return self.runs[(pair, variant, seed)]
        except KeyError:
            raise AssertionError(f"{self.source}: no run {variant} seed {seed} ({pair})")

    def bleu(self, pair, variant, seed, decode):
        return self.run(pair, variant, seed)["bleu"][decode]["bleu_tok"]

    def ppl(self, pair, variant, seed):
        return self.run(pair, variant, seed)["valid_ppl"]

    def cells(self, pair, variant, seeds, decodes=("valid", "test2016", "test2017")):
        """{column: text} of a results row: seeds, valid ppl, valid / test2016 / test2017 BLEU."""
        decodes = [d if isinstance(d, dict) else {s: d for s in seeds} for d in decodes]
        return {1: str(len(seeds)), 2: mean_std([self.ppl(pair, variant, s) for s in seeds]),
                **{3 + i: mean_std([self.bleu(pair, variant, s, d[s]) for s in seeds])
                   for i, d in enumerate(decodes)}}

    def paired(self, pair, a, b, seeds, decode_a, decode_b=None):
        """b − a seed by seed (two-decimal BLEU as filed)."""
        return [self.bleu(pair, b, s, decode_b or decode_a) - self.bleu(pair, a, s, decode_a)
                for s in seeds]


README = REPO / "README.md"
OVERVIEW = RESULTS / "README.md"  # the results overview: the tables the README links
BENCH = REPO / "BENCHMARKS.md"
GUIDE = REPO / "docs" / "guide.md"  # the user's guide: the reference the README links
VN = "multi30k_2026-11-27_value-norm-4seeds/results.json"
MAIN = "multi30k_2026-12-01/results.json"  # the main table, every hypothesis kept
MAIN_INTERVALS = RESULTS / "multi30k_2026-12-01" / "intervals.json"


def _intervals(path, base, other):
    """The paired bootstrap intervals of ``other`` − ``base`` in an mt_report intervals.json."""
    return [r for r in json.loads(path.read_text())["intervals"]
            if r["base_variant"] == base and r["other_variant"] == other]
ANTI = {2: "test2016_K10-antithetic", 3: "test2016_K10-antithetic", 4: "test2016"}  # the preset's rule
ANTI_VALID = {2: "valid_K10-antithetic", 3: "valid_K10-antithetic", 4: "valid"}


def single(pair, mt, variant, seed=1):
    """A one-seed row's cells: valid ppl, valid, test2016, test2017."""
    return {2: f2(mt.ppl(pair, variant, seed)),
            **{3 + i: f2(mt.bleu(pair, variant, seed, d)) for i, d in
               enumerate(("valid", "test2016", "test2017"))}}


# ----------------------------------------------------------------------------------- Multi30K
def test_multi30k_en_de_table_and_its_differences():
    doc, main = Doc(OVERVIEW), MT(MAIN)
    vn, e20 = MT(VN), MT("multi30k_2026-11-26_e20_3seeds/results.json")
    # the table trained again with its hypotheses kept: soft, ACVI and its control, seeds 1-3
    cap = "En→De, every hypothesis kept"
    for label, variant in (("`soft`", "soft"), ("**ACVI, the preset**", "acvi"),
                           ("its deterministic control", "acvi-det")):
        doc.check_row(cap, label, main.cells("en_de", variant, [1, 2, 3]), main.source)
    diffs = [mean_std(main.paired("en_de", a, b, [1, 2, 3], d), sign=True)
             for a, b in (("soft", "acvi"), ("soft", "acvi-det"), ("acvi-det", "acvi"))
             for d in ("valid", "test2016", "test2017")]
    doc.check_prose(rf"Paired by seed \(each seed's paired bootstrap interval is on the page\): ACVI − "
                    rf"`soft` {MS} validation, {MS} test2016, {MS} test2017; control − `soft` {MS}, "
                    rf"{MS}, {MS}; ACVI − control {MS}, {MS}, {MS}\.",
                    diffs, "En→De paired differences, seeds 1-3", main.source)
    # "most of it on every split" (the control's share of ACVI's gain, each split), and which
    # seeds' intervals of ACVI − control are clear of zero
    shares = []
    for d in ("valid", "test2016", "test2017"):
        gain, ctl = (statistics.mean(main.paired("en_de", "soft", v, [1, 2, 3], d))
                     for v in ("acvi", "acvi-det"))
        assert ctl > gain / 2, f"{main.source}: the control gets {ctl:.2f} of ACVI's {gain:.2f} ({d})"
        shares.append(f"{100 * ctl / gain:.0f}")
    doc.check_prose(rf"\(the paired differences below: (\d+) % of it on validation, (\d+) % on test2016,"
                    rf" (\d+) % on test2017\)", shares, "the control's share of ACVI's gain", main.source)
    rows = _intervals(MAIN_INTERVALS, "acvi-det", "acvi")
    assert len(rows) == 9, f"{MAIN_INTERVALS}: {len(rows)} ACVI − control intervals, 3 seeds × 3 splits wanted"
    outside = sorted((r["seed"], r["split"]) for r in rows if not r["low"] <= 0 <= r["high"])
    assert outside == [(3, "test2016"), (3, "test2017")], \
        f"{MAIN_INTERVALS}: ACVI − control intervals clear of zero: {outside}; the overview says seed 3's two test sets"
    doc.check_prose(r"with a 95 % interval clear of zero on one seed of three \(seed (\d), on both test sets; "
                    r"the other seeds' six intervals hold zero\)", ["3"], "ACVI − control intervals", str(MAIN_INTERVALS))
    # the earlier runs, scores only
    cap = "En→De, the earlier runs"
    doc.check_row(cap, "`soft` of those runs", vn.cells("en_de", "soft-e20", [1, 2, 3]), vn.source)
    doc.check_row(cap, "fairseq `lstm`", {1: "1", **single("en_de", e20, "lstm-e20")}, e20.source)
    doc.check_row(cap, "ACVI before 2026-11-27",
                  vn.cells("en_de", "acvi-b1e-4-d234-wu117-e20", [1, 2, 3]), vn.source)
    doc.check_row(cap, "`none`", {1: "1", **single("en_de", vn, "none-e20")}, vn.source)
    three = [single("en_de", vn, f"{v}-e20") for v in ("structured", "variational", "ved")]
    doc.check_row(cap, "`structured` / `variational` / `ved`",
                  {c: " / ".join(t[c] for t in three) for c in (2, 3, 4, 5)}, vn.source)
    old = vn.paired("en_de", "soft-e20", "acvi-b1e-4-d234-wu117-e20", [1, 2, 3], "test2016")
    doc.check_prose(r"ACVI as first built \(no normalisation\) trailed the same runs' `soft` by "
                    r"(\d+\.\d+ ± \d+\.\d+) on En→De",
                    [mean_std([-d for d in old])], "unnormalised ACVI − soft, test2016", vn.source)
    # K = 10 (antithetic) against K = 0: every paired decode of seeds 2-4
    gen = ["valid_K10-antithetic-seed2", "valid_K10-antithetic-seed3"]
    decodes = {2: ["valid_K10-antithetic", "test2016_K10-antithetic"] + gen,
               3: ["valid_K10-antithetic", "test2016_K10-antithetic"] + gen, 4: ["valid", "test2016"] + gen}
    deltas = [vn.run("en_de", "acvi-vnorm-e20", s)["bleu"][k]["paired"]["delta"]
              for s, keys in decodes.items() for k in keys]
    doc.check_prose(r"decoding with K = 10 is never more than (\d+\.\d+) BLEU below the mean context "
                    r"\(K = 0\) in (\w+) paired En→De decodes",
                    [f2(-min(deltas)), {12: "twelve"}.get(len(deltas), str(len(deltas)))],
                    "K = 10 − K = 0, lowest of the antithetic decodes", vn.source)
    # "beats `soft` on both pairs and both test sets, by A-B BLEU": differences of the means
    fr = MT("multi30k_en_fr_2026-11-27/results.json")
    mean = lambda mt, pair, v, seeds, d: statistics.mean(
        mt.bleu(pair, v, s, d[s] if isinstance(d, dict) else d) for s in seeds)
    gains = [mean(main, "en_de", "acvi", [1, 2, 3], d) - mean(main, "en_de", "soft", [1, 2, 3], d)
             for d in ("test2016", "test2017")]
    gains += [mean(fr, "en_fr", "acvi-vnorm-e20", [1, 2, 3, 4], d) - mean(fr, "en_fr", "soft-e20", [1, 2, 3, 4], d)
              for d in ("test2016", "test2017")]
    doc.check_prose(rf"beats `soft` on both pairs and both test sets, by {N}-{N} BLEU",
                    [f"{min(gains):.1f}", f"{max(gains):.1f}"], "ACVI − soft, range of the gains",
                    f"{main.source} and {fr.source}")
    doc.assert_ok()


def test_multi30k_en_fr_table_and_its_differences():
    doc = Doc(OVERVIEW)
    fr, ctl = MT("multi30k_en_fr_2026-11-27/results.json"), MT("multi30k_en_fr_2026-11-27_control/results.json")
    cap = "En→Fr (2026-11-26 and 2026-11-27; scores only"
    doc.check_row(cap, "fairseq `lstm`", {1: "1", **single("en_fr", fr, "lstm-e20")}, fr.source)
    doc.check_row(cap, "`soft`", fr.cells("en_fr", "soft-e20", [1, 2, 3, 4]), fr.source)
    doc.check_row(cap, "**ACVI, the preset**", fr.cells("en_fr", "acvi-vnorm-e20", [1, 2, 3, 4]), fr.source)
    acvi1 = " / ".join(single("en_fr", fr, "acvi-vnorm-e20")[c] for c in (2, 3, 4, 5))
    doc.check_row(cap, f"ACVI's seed 1: {acvi1}", {1: "1", **single("en_fr", ctl, "acvi-vnorm-det-e20")},
                  ctl.source)
    doc.check_row(cap, "`none`", {1: "1", **single("en_fr", fr, "none-e20")}, fr.source)
    three = [single("en_fr", fr, f"{v}-e20") for v in ("structured", "variational", "ved")]
    doc.check_row(cap, "`structured` / `variational` / `ved`",
                  {c: " / ".join(t[c] for t in three) for c in (2, 3, 4, 5)}, fr.source)
    doc.check_prose(rf"on En→Fr \(seed 1\) the control gets nearly all of it \(ACVI − control {N} "
                    rf"test2016, {N} test2017, {N} validation\)",
                    [signed(ctl.paired("en_fr", "acvi-vnorm-det-e20", "acvi-vnorm-e20", [1], d)[0])
                     for d in ("test2016", "test2017", "valid")], "En→Fr ACVI − control (seed 1)", ctl.source)
    doc.check_prose(rf"ACVI − `soft`, paired by seed: En→Fr {MS} \(test2016\) and {MS} \(test2017\)",
                    [mean_std(fr.paired("en_fr", "soft-e20", "acvi-vnorm-e20", [1, 2, 3, 4], d), sign=True)
                     for d in ("test2016", "test2017")], "En→Fr ACVI − soft", fr.source)
    sweep = [f2(fr.bleu("en_fr", "acvi-vnorm-e20", 1, d))
             for d in ("valid_K0", "valid_K1", "valid_K5", "valid", "valid_K20")]
    doc.check_prose(rf"K = 0 / 1 / 5 / 10 / 20: {N} / {N} / {N} / {N} / {N}\)", sweep,
                    "En→Fr Monte-Carlo sweep (overview)", fr.source)
    doc.assert_ok()


def test_multi30k_figures_in_benchmarks():
    doc, vn = Doc(BENCH), MT(VN)
    fr, ctl = MT("multi30k_en_fr_2026-11-27/results.json"), MT("multi30k_en_fr_2026-11-27_control/results.json")
    t = ("test2016", "test2017")
    ms = lambda mt, pair, v, seeds: " / ".join(mean_std([mt.bleu(pair, v, s, d) for s in seeds]) for d in t)
    one = lambda mt, pair, v, s=1: " / ".join(f2(mt.bleu(pair, v, s, d)) for d in t)
    main, e20 = MT(MAIN), MT("multi30k_2026-11-26_e20_3seeds/results.json")
    doc.check_prose(rf"with its hypotheses kept \(\[page\]\(docs/results/multi30k_2026-12-01/README.md\)\), "
                    rf"`soft` ({MSN} / {MSN}) \(3 seeds\), ACVI with normalised annotations \(the preset, "
                    rf"K = 10 antithetic samples\) \*\*({MSN} / {MSN})\*\* \(3\), its deterministic control "
                    rf"({MSN} / {MSN}) \(3\); the earlier runs' fairseq `lstm` (\S+ / \S+) \(1, where their "
                    rf"`soft` has ({MSN} / {MSN})\)",
                    [ms(main, "en_de", "soft", [1, 2, 3]), ms(main, "en_de", "acvi", [1, 2, 3]),
                     ms(main, "en_de", "acvi-det", [1, 2, 3]), one(e20, "en_de", "lstm-e20"),
                     ms(vn, "en_de", "soft-e20", [1, 2, 3])], "where it stands: En→De", main.source)
    doc.check_prose(rf"En→Fr `soft` ({MSN} / {MSN}) \(4\), `lstm` (\S+ / \S+) \(1\), ACVI \*\*({MSN} / {MSN})\*\* \(4\)",
                    [ms(fr, "en_fr", "soft-e20", [1, 2, 3, 4]), one(fr, "en_fr", "lstm-e20"),
                     ms(fr, "en_fr", "acvi-vnorm-e20", [1, 2, 3, 4])], "where it stands: En→Fr", fr.source)
    doc.check_prose(r"its deterministic control (\d+\.\d+ / \d+\.\d+) \(seed 1, where ACVI has (\d+\.\d+ / \d+\.\d+)",
                    [one(ctl, "en_fr", "acvi-vnorm-det-e20"), one(ctl, "en_fr", "acvi-vnorm-e20")],
                    "where it stands: En→Fr control", ctl.source)
    # the 20-epoch table of every variant moved from BENCHMARKS.md to the remedies page
    page = Doc(RESULTS / "multi30k_acvi_remedies_2026-11-26.md")
    cap = "Three seeds of the control, normalised annotations, and the other variants"
    page.check_row(cap, "K = 10 iid samples (seed 1 H100", vn.cells("en_de", "acvi-vnorm-e20", [1, 2, 3]), vn.source)
    anti = vn.cells("en_de", "acvi-vnorm-e20", [2, 3, 4], (ANTI_VALID, ANTI))
    page.check_row(cap, "K = 10 antithetic samples", {3: anti[3], 4: anti[4]}, vn.source)
    page.check_row(cap, "its control: normalised",
                   {**vn.cells("en_de", "acvi-vnorm-det-e20", [2, 3]), 1: "2 (seeds 2-3)"}, vn.source)
    page.check_row(cap, "soft", vn.cells("en_de", "soft-e20", [1, 2, 3]), vn.source)
    page.assert_ok()
    fr_ms = lambda d: mean_std([fr.bleu("en_fr", "acvi-vnorm-e20", s, d) for s in (1, 2, 3, 4)])
    doc.check_prose(rf"ACVI with normalised annotations {MS}, \*\*{MS}\*\*, \*\*{MS}\*\* \(paired {MS} / {MS}",
                    [mean_std([fr.ppl("en_fr", "acvi-vnorm-e20", s) for s in (1, 2, 3, 4)]),
                     fr_ms("test2016"), fr_ms("test2017")]
                    + [mean_std(fr.paired("en_fr", "soft-e20", "acvi-vnorm-e20", [1, 2, 3, 4], d), sign=True) for d in t],
                    "En→Fr paragraph: ACVI", fr.source)
    doc.assert_ok()


# ----------------------------------------------------------------------------------- transformer
def test_transformer_table_and_paired_differences():
    tx = MT("multi30k_transformer_2026-11-27/results.json")
    doc = Doc(OVERVIEW)
    cap = "Multi30K En→De, 30 epochs (2026-11-27"
    doc.check_row(cap, "fairseq `transformer`", {1: "1", **single("en_de", tx, "transformer")}, tx.source)
    doc.check_row(cap, "`acvi_transformer`, `soft`", tx.cells("en_de", "soft-transformer", [1, 2, 3]), tx.source)
    doc.check_row(cap, "`acvi_transformer`, ACVI", tx.cells("en_de", "acvi-transformer", [1, 2, 3]), tx.source)
    diffs = {d: tx.paired("en_de", "soft-transformer", "acvi-transformer", [1, 2, 3], d)
             for d in ("valid", "test2016", "test2017")}
    doc.check_prose(rf"ACVI − `soft` paired by seed: {MS} validation, {MS} test2016, {MS} test2017",
                    [mean_std(diffs[d], sign=True) for d in diffs], "transformer ACVI − soft", tx.source)
    doc.assert_ok()
    bench = Doc(BENCH)
    ms = lambda v: " / ".join(mean_std([tx.bleu("en_de", v, s, d) for s in (1, 2, 3)]) for d in ("test2016", "test2017"))
    bench.check_prose(rf"fairseq `transformer` (\S+ / \S+) and `soft` seed 1 the same to the hundredth; "
                      rf"`soft` ({MSN} / {MSN}) and ACVI ({MSN} / {MSN}) over three seeds \(ACVI − `soft` paired "
                      rf"({MSN} / {MSN})\)",
                      [" / ".join(f2(tx.bleu("en_de", "transformer", 1, d)) for d in ("test2016", "test2017")),
                       ms("soft-transformer"), ms("acvi-transformer"),
                       " / ".join(mean_std(diffs[d], sign=True) for d in ("test2016", "test2017"))],
                      "transformer paragraph", tx.source)
    bench.assert_ok()
    page = Doc(RESULTS / "multi30k_transformer_2026-11-27.md")
    for s in (1, 2, 3):
        cells = page.row("ACVI − soft, paired by seed", f"{s}", tx.source)
        if cells is None:
            continue
        for col, d in enumerate(diffs, 1):
            got = cells[col].split(" (")[0]
            if norm(got) != norm(signed(diffs[d][s - 1])):
                page.fail(f"seed {s} {d} difference", f"reads {got!r}, {tx.source} gives {signed(diffs[d][s - 1])!r}")
    page.check_row("ACVI − soft, paired by seed", "mean ± std",
                   {i: mean_std(diffs[d], sign=True) for i, d in enumerate(diffs, 1)}, tx.source)
    page.assert_ok()


# ----------------------------------------------------------------------------------- CNN/DM
def _cnndm():
    rel = "cnndm_2026-11-28_nocopy_acvi/results.json"
    data = json.loads((RESULTS / rel).read_text())["subsets"]
    return data, f"docs/results/{rel}"


def _r(row):
    return " / ".join(f2(row[k]) for k in ("rouge1", "rouge2", "rougeL"))


def test_cnndm_rouge_figures():
    data, src = _cnndm()
    rows, every = data["test_every5"]["rows"], data["test_every5"]
    soft, soft_cov = rows["pointer-gen (ours, soft, phase 4)"], rows["pointer-gen + coverage (ours, soft)"]
    acvi, run1, run2 = rows["ACVI (ours, run 2, phase 4)"], rows["ACVI + coverage (ours, run 1)"], rows["ACVI + coverage (ours, run 2)"]
    lead, nocopy = rows["lead-3"], rows["no-copy + coverage (ours)"]
    cov = every["coverage"]
    rel = lambda k: f"{100 * cov[k]['relative_change']:.0f}".replace("-", "−")
    paired = every["paired"]["ACVI + coverage (ours, run 1):ACVI + coverage (ours, run 2)"]["rouge1"]
    real = data["test_realsumm"]["rows"]
    doc = Doc(OVERVIEW)
    doc.check_prose(r"reaches \*\*(\S+ / \S+ / \S+) ROUGE-1/2/L on `test_every5`\*\* \(898 test articles; lead-3 (\S+ / \S+ / \S+)\)",
                    [_r(soft_cov), _r(lead)], "soft pointer-generator and lead-3", src)
    doc.check_prose(rf"cuts repeated trigrams from {N} % to {N} % \({N} %\) while raising ROUGE-1 by {N}",
                    [f2(soft["repeat_3gram"]), f2(soft_cov["repeat_3gram"]),
                     rel("pointer-gen (ours, soft, phase 4):pointer-gen + coverage (ours, soft)"),
                     f"{soft_cov['rouge1'] - soft['rouge1']:.1f}"], "soft coverage phase", src)
    doc.check_prose(rf"reaches {N} ROUGE-1 before coverage \(soft: {N}\) and \*\*{N} and {N} with coverage\*\* "
                    rf"\(two runs; 95 % interval of run 2's ROUGE-1 {N}–{N}\)",
                    [f2(acvi["rouge1"]), f2(soft["rouge1"]), f2(run1["rouge1"]), f2(run2["rouge1"]),
                     f2(run2["ci"]["rouge1"][0]), f2(run2["ci"]["rouge1"][1])], "ACVI ROUGE-1", src)
    doc.check_prose(rf"ACVI's coverage phase cuts repeated trigrams from {N} % to {N} % \({N} %\)",
                    [f2(acvi["repeat_3gram"]), f2(run2["repeat_3gram"]),
                     rel("ACVI (ours, run 2, phase 4):ACVI + coverage (ours, run 2)")], "ACVI coverage phase", src)
    doc.check_prose(rf"barely learned \({N} ROUGE-1", [f2(nocopy["rouge1"])], "no-copy ROUGE-1", src)
    doc.check_prose(rf"its 95 % bootstrap interval of ROUGE-1 is {N}-{N}",
                    [f2(lead["ci"]["rouge1"][0]), f2(lead["ci"]["rouge1"][1])], "lead-3 interval", src)
    doc.check_prose(rf"outputs show coverage cutting repeated trigrams from {N} % to {N} %",
                    [f2(real["See et al.: pointer_gen"]["repeat_3gram"]),
                     f2(real["See et al.: pointer_gen_cov"]["repeat_3gram"])], "See et al. on REALSumm", src)
    doc.assert_ok()
    bench = Doc(BENCH)
    bench.check_prose(rf"before coverage (\S+ / \S+ / \S+), repeated trigrams {N} %; with coverage (\S+ / \S+ / \S+) "
                      rf"\(run 1\) and (\S+ / \S+ / \S+) \(run 2, ROUGE-1 95 % CI {N}–{N}\), repeated trigrams {N} % "
                      rf"and {N} % \({N} %\): level with soft before coverage, {N} and {N} ROUGE-1 below it after, "
                      rf"while the two ACVI runs differ by {N} \(paired 95 % CI {N} to {N}\)",
                      [_r(acvi), f2(acvi["repeat_3gram"]), _r(run1), _r(run2), f2(run2["ci"]["rouge1"][0]),
                       f2(run2["ci"]["rouge1"][1]), f2(run1["repeat_3gram"]), f2(run2["repeat_3gram"]),
                       rel("ACVI (ours, run 2, phase 4):ACVI + coverage (ours, run 2)"),
                       f2(soft_cov["rouge1"] - run1["rouge1"]), f2(soft_cov["rouge1"] - run2["rouge1"]),
                       signed(paired["delta"]), signed(paired["low"]), signed(paired["high"])],
                      "ACVI pointer-generator", src)
    bench.check_prose(r"coverage: (\S+ / \S+ / \S+) \(barely trained", [_r(nocopy)], "no-copy baseline", src)
    bench.check_prose(rf"before coverage (\S+ / \S+ / \S+) ROUGE-1/2/L, repeated trigrams {N} %; \*\*with coverage "
                      rf"(\S+ / \S+ / \S+), repeated trigrams {N} %\*\* \({N} %\); lead-3 (\S+ / \S+ / \S+)\.",
                      [_r(soft), f2(soft["repeat_3gram"]), _r(soft_cov), f2(soft_cov["repeat_3gram"]),
                       rel("pointer-gen (ours, soft, phase 4):pointer-gen + coverage (ours, soft)"), _r(lead)],
                      "soft pointer-generator", src)
    bench.assert_ok()


# ----------------------------------------------------------------------------------- PAG
def test_pag_figures():
    pag = MT("pag_multi30k_char_2026-11-28_seeds1-3/results.json")
    pair = next(iter(pag.runs))[0]
    seeds = [1, 2, 3]
    chrf = lambda v, s, d="test2016": pag.run(pair, v, s)["bleu"][d]["chrf"]
    bleu_chrf = lambda v: f"{mean_std([pag.bleu(pair, v, s, 'test2016') for s in seeds])} / " \
                          f"{f2(statistics.mean([chrf(v, s) for s in seeds]))}"
    diff = lambda d, f: [f(("pag", s), d) - f(("soft", s), d) for s in seeds]
    b = lambda vs, d: pag.bleu(pair, vs[0], vs[1], d)
    c = lambda vs, d: chrf(vs[0], vs[1], d)
    rpag = [pag.bleu(pair, "soft", s, "test2016") - pag.bleu(pair, "rpag", s, "test2016") for s in seeds]
    replan = [pag.run(pair, "pag", s)["replan"] for s in seeds]
    wps = lambda v: statistics.mean(pag.run(pair, v, s)["train_wps"] for s in seeds)
    doc = Doc(OVERVIEW)
    doc.check_prose(rf"soft ({MSN} / {NN}), PAG ({MSN} / {NN}), rPAG ({MSN} / {NN})\.",
                    [bleu_chrf(v) for v in ("soft", "pag", "rpag")], "PAG, test2016 BLEU / chrF", pag.source)
    doc.check_prose(rf"seed by seed PAG is {MS} BLEU and {MS} chrF from soft on test2016 \({MS} BLEU on validation\)",
                    [mean_std(diff("test2016", b), sign=True), mean_std(diff("test2016", c), sign=True),
                     mean_std(diff("valid", b), sign=True)], "PAG − soft", pag.source)
    doc.check_prose(rf"recomputes its plan at {N}-{N} % of the validation steps",
                    [f"{100 * min(replan):.0f}", f"{100 * max(replan):.0f}"], "PAG replanning", pag.source)
    doc.check_prose(rf"loses {N}-{N} BLEU on every seed", [f"{min(rpag):.1f}", f"{max(rpag):.1f}"],
                    "rPAG − soft", pag.source)
    doc.check_prose(rf"PAG trains at {N}× soft's speed \(target 0.7×\), rPAG at {N}×",
                    [f"{wps('pag') / wps('soft'):.3f}", f"{wps('rpag') / wps('soft'):.2f}"], "PAG speed", pag.source)
    doc.assert_ok()


def test_small_corpus_defaults_figures():
    rel = "multi30k_3k_defaults_2026-11-28"
    mt = MT(f"{rel}/results.json")
    pair = "en_de"
    paired = json.loads((RESULTS / rel / "paired_acvi_vs_soft_test2016.json").read_text())["paired"]
    acvi = mt.run(pair, "acvi", 1)
    doc = Doc(OVERVIEW)
    doc.check_prose(rf"ACVI reaches {N} valid and {N} test2016 BLEU against `soft`'s {N} and {N} "
                    rf"\(paired difference on test2016 {N}, 95 % interval {N} to {N}\)",
                    [f2(mt.bleu(pair, "acvi", 1, "valid")), f2(mt.bleu(pair, "acvi", 1, "test2016")),
                     f2(mt.bleu(pair, "soft", 1, "valid")), f2(mt.bleu(pair, "soft", 1, "test2016")),
                     f"{paired['delta']:+.2f}", f"{paired['low']:+.2f}", f"{paired['high']:+.2f}"],
                    "3,000 pairs: ACVI and soft BLEU", mt.source)
    doc.check_prose(rf"a posterior variance of {N} per dimension and a context it reads \(zeroing it "
                    rf"costs {N} valid BLEU\); a delay of two of this corpus's epochs instead ends "
                    rf"level \({N} test2016\)",
                    [f2(acvi["end"]["ctx_var"]), f2(acvi["source_use"]["zero"]["bleu_drop"]), f2(mt.bleu(pair, "acvi-delay2ep", 1, "test2016"))],
                    "3,000 pairs: variance, ablation, short delay", mt.source)
    doc.assert_ok()


# ----------------------------------------------------------------------------------- uncertainty
def test_uncertainty_study_figures():
    rel = "uncertainty_study_2026-11-29/uncertainty.json"
    src = f"docs/results/{rel}"
    rep = json.loads((RESULTS / rel).read_text(encoding="utf-8"))

    def fig(question, key, method):
        (f,) = [f for f in rep["questions"][question]["figures"] if f["key"] == key]
        r = f["methods"][method]
        return f"{r['mean']:.3f}" if r.get("shared") else f"{r['mean']:.3f} ± {r['std']:.3f}"

    def cost(method):
        r = rep["cost"][method]["times_single_pass"]
        return f"{r['mean']:.1f}"

    methods = ("acvi", "soft", "mcdrop", "ensemble")
    three = ("acvi", "mcdrop", "ensemble")
    for doc in (Doc(OVERVIEW), Doc(RESULTS / "uncertainty_study_2026-11-29" / "README.md")):
        doc.check_prose(rf"ECE: ACVI {MS}, `soft` {MS}, MC dropout {MS}, the ensemble {N}",
                        [fig("tokens", "ece", m) for m in methods], "token ECE", src)
        doc.check_prose(rf"wrong-token AUROC of I: ACVI {MS}, MC dropout {MS}, the ensemble {N}",
                        [fig("tokens", "auroc_mutual_information", m) for m in three], "AUROC I", src)
        doc.check_prose(rf"Pearson correlation of the mean token I with sentence chrF: ACVI {MS}, "
                        rf"MC dropout {MS}, the ensemble {N}",
                        [fig("quality_estimation", "mean_mi/chrf/pearson", m) for m in three],
                        "quality estimation", src)
        doc.check_prose(rf"AUROC of the mean token I, test2016 against COCO: ACVI {MS}, MC dropout "
                        rf"{MS}, the ensemble {N}",
                        [fig("ood_detection", "mean_mi", m) for m in three], "out-of-domain AUROC", src)
        doc.check_prose(rf"decode times of the study: ACVI {N}×, MC dropout {N}×, the ensemble {N}× "
                        rf"a single `soft` pass",
                        [cost(m) for m in three], "cost", src)
        doc.assert_ok()


def _interval(paired):
    return f"{signed(paired['delta'])} [{signed(paired['low'])}, {signed(paired['high'])}]"


def _speed_table(path):
    """words/s by model name from a bench_parallel_decoder.py output (with or without
    ``--count``'s columns)."""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"(\S.*?)\s{2,}(\d+)\s+\d+\.\d+(\s|$)", line)  # (then --count's columns)
        if m:
            rows[m.group(1)] = int(m.group(2))
    return rows


def _gpu_page(name, stems):
    """(the results folder ``name``, its README as a :class:`Doc`, {table label: words/s by model}
    from the benchmark output ``stems[label]``.txt beside it)."""
    page = RESULTS / name
    return page, Doc(page / "README.md"), {label: _speed_table(page / f"{stem}.txt")
                                           for label, stem in stems.items()}


def test_gpu_checks_2026_11_29_figures():
    """docs/results/gpu_checks_2026-11-29: the speed tables and their ratios, recomputed from the
    benchmark outputs beside the page; the headline in BENCHMARKS and the guide."""
    shapes = {"Multi30K preset": "parallel_multi30k", "word targets, 2 layers": "parallel_word2",
              "character targets": "compiled_char", "CNN/DM": "parallel_cnndm"}
    page, doc, speed = _gpu_page("gpu_checks_2026-11-29", shapes)
    cap = "Training target words/s"
    for label, t in speed.items():
        src = f"docs/results/gpu_checks_2026-11-29/{shapes[label]}.txt"
        wants = {2: f"{t['soft loop+feed']:,}", 3: f"{t['soft parallel']:,}",
                 5: f"{t['soft parallel'] / t['soft loop+feed']:.2f}×",
                 6: f"{t['acvi parallel'] / t['acvi loop+feed']:.2f}×"}
        if "fairseq-lstm" in t:
            wants.update({1: f"{t['fairseq-lstm']:,}",
                          4: f"{t['soft parallel'] / t['fairseq-lstm']:.2f}×"})
        doc.check_row(cap, label, wants, src)
    char, src = speed["character targets"], "docs/results/gpu_checks_2026-11-29/compiled_char.txt"
    for label, name in (("`soft`", "soft"), ("ACVI", "acvi"), ("PAG (plan", "pag"), ("rPAG (", "rpag")):
        eager, graphs = char[f"{name} loop+feed"], char[f"{name} loop+feed reduce-overhead"]
        doc.check_row("The step compiled, at the character shape", label, {
            1: f"{eager:,}", 2: f"{graphs:,}", 3: f"{char[f'{name} loop+feed inductor']:,}",
            4: f"{graphs / eager:.2f}×", 5: f"{graphs / char['soft loop+feed']:.2f}"}, src)
    pag = char["pag loop+feed reduce-overhead"]
    doc.check_prose(r"at 0.77× `soft` compiled the same way \(([\d,]+) / ([\d,]+)\)",
                    [f"{pag:,}", f"{char['soft loop+feed reduce-overhead']:,}"], "PAG vs soft", src)
    assert f"{pag / char['soft loop+feed reduce-overhead']:.2f}" == "0.77"
    doc.assert_ok()
    word = speed["word targets, 2 layers"]
    bench = Doc(REPO / "BENCHMARKS.md")
    bench.check_prose(rf"trains `soft` at \**{N}×\** fairseq's `lstm` at the 2-layer word shape",
                      [f"{word['soft parallel'] / word['fairseq-lstm']:.2f}"], "GPU word shape",
                      "docs/results/gpu_checks_2026-11-29/parallel_word2.txt")
    bench.check_prose(rf"trains {N}× faster than its eager step loop, at \**{N}×\** `soft`'s",
                      [f"{pag / char['pag loop+feed']:.2f}", f"{pag / char['soft loop+feed']:.2f}"],
                      "GPU PAG compiled", src)
    bench.assert_ok()
    guide = Doc(REPO / "docs" / "guide.md")
    guide.check_prose(rf"`reduce-overhead` trains PAG {N}× faster \({N}× `soft` instead of {N}×\)",
                      [f"{pag / char['pag loop+feed']:.1f}", f"{pag / char['soft loop+feed']:.2f}",
                       f"{char['pag loop+feed'] / char['soft loop+feed']:.2f}"], "guide PAG", src)
    guide.assert_ok()
    readme = Doc(REPO / "README.md")
    readme.check_prose(rf"replays each step as a CUDA graph \(PAG trains {N}× faster\)",
                       [f"{pag / char['pag loop+feed']:.1f}"], "README PAG compiled", src)
    readme.assert_ok()


def _profile_table(path):
    """{model: (wall ms, device ms, busy %, launches, copy and synchronisation calls)} from a
    profile_train_step.py output as it was printed on 2026-11-30 (figures as it prints them)."""
    rows, name = {}, None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"## (.+): ([\d.]+) ms a step", line)
        if m:
            name, wall = m.group(1), m.group(2)
        m = re.match(r"device busy ([\d.]+) ms \((\d+) % .*?; (\d+) launches .*?, "
                     r"(\d+) synchronising", line)       # (the output's words on 2026-11-30)
        if m and name:
            rows[name] = (wall, *m.groups())
    return rows


def test_gpu_checks_2026_11_30_figures():
    """docs/results/gpu_checks_2026-11-30: the speed table and the profile table, recomputed from
    the outputs beside the page; the headline in BENCHMARKS and the guide."""
    runs = {"(first call)": "parallel_word2", "the same, second call": "parallel_word2_repeat",
            "Multi30K preset": "parallel_multi30k"}
    page, doc, speed = _gpu_page("gpu_checks_2026-11-30", runs)
    cap = "**parallel reduce-overhead** is new"
    for label, t in speed.items():
        lstm, par, comp = t["fairseq-lstm"], t["soft parallel"], t["soft parallel reduce-overhead"]
        doc.check_row(cap, label, {1: f"{lstm:,}", 2: f"{par:,}", 3: f"{comp:,}",
                                   4: f"{par / lstm:.2f}×", 5: f"{comp / lstm:.2f}×"},
                      f"docs/results/gpu_checks_2026-11-30/{runs[label]}.txt")
    acvi = [(t["acvi parallel"] / t["fairseq-lstm"], t["acvi parallel reduce-overhead"] / t["fairseq-lstm"])
            for t in speed.values()]
    doc.check_prose(rf"parallel / `lstm` {N}×, {N}×, {N}×; parallel reduce-overhead / `lstm` {N}×, "
                    rf"{N}×, {N}×", [f"{a:.2f}" for a, _ in acvi] + [f"{c:.2f}" for _, c in acvi],
                    "ACVI ratios", "the three speed outputs")
    word = [speed[k] for k in ("(first call)", "the same, second call")]
    comp_r = [t["soft parallel reduce-overhead"] / t["fairseq-lstm"] for t in word]
    eager_r = [t["soft parallel"] / t["fairseq-lstm"] for t in word]
    compiled, eager = [f"{r:.2f}" for r in comp_r], [f"{r:.2f}" for r in eager_r]
    doc.check_prose(rf"reduce-overhead`\): {N}× and {N}× in two calls", compiled, "word shape compiled",
                    "parallel_word2*.txt")
    prof = _profile_table(page / "profile_word2.txt")
    assert len(prof) == 4, prof
    for name, (wall, busy, share, launches, syncs) in prof.items():
        label = name.replace("soft", "`soft`").replace("fairseq-lstm", "fairseq `lstm`")
        label += ", eager" if name.endswith("parallel") else ""
        doc.check_row("five profiled steps after three unprofiled ones", label,
                      {1: f"{float(wall):.1f} ms", 2: f"{float(busy):.1f} ms", 3: f"{share} %",
                       4: f"{int(launches):,}", 5: syncs},
                      "docs/results/gpu_checks_2026-11-30/profile_word2.txt")
    doc.assert_ok()
    bench = Doc(REPO / "BENCHMARKS.md")
    bench.check_prose(rf"trains at \*\*{N}×\*\* and \*\*{N}×\*\* fairseq's `lstm` in two calls",
                      compiled, "GPU word shape compiled", "parallel_word2*.txt")
    bench.check_prose(rf"the eager parallel path {N}× and {N}× \(2.87× on", eager,
                      "GPU word shape eager", "parallel_word2*.txt")
    bench.assert_ok()
    guide = Doc(REPO / "docs" / "guide.md")
    guide.check_prose(rf"`soft` then trains at {N}-{N}× fairseq's `lstm` at the 2-layer word shape "
                      rf"\({N}-{N}× uncompiled\)",
                      [f"{f(r):.1f}" for r in (comp_r, eager_r) for f in (min, max)],
                      "guide parallel compiled", "parallel_word2*.txt")
    guide.assert_ok()
    readme = Doc(REPO / "README.md")
    readme.check_prose(rf"with both `soft` trains at {N}-{N}× fairseq's `lstm` on an H200",
                       [f"{f(comp_r):.1f}" for f in (min, max)], "README GPU speed",
                       "parallel_word2*.txt")
    readme.assert_ok()


def test_attention_grid_figures():
    """docs/results/attention_grid_2026-11-29: every trained cell's BLEU and perplexity on the
    page and in BENCHMARKS, from its grid.json and results.json (which the report computed from the
    kept runs): the cells' figures are the grid seed's (:func:`_grid_of_grid_seed`)."""
    page = RESULTS / "attention_grid_2026-11-29"
    src = "docs/results/attention_grid_2026-11-29/grid.json and results.json"
    grid = _grid_of_grid_seed(page)
    done = [r for r in grid["rows"] if r["ours"]["status"] == "run"]
    assert done, "no trained cell on the page"
    doc, bench = Doc(page / "README.md"), Doc(REPO / "BENCHMARKS.md")
    for r in done:
        label = "none (no attention)" if r["scorer"] is None else f"{r['scorer']} ({r['config']})"
        o = r["ours"]
        doc.check_row("Tokenised BLEU (valid / test2016 / test2017) and validation perplexity",
                      label, {1: f2(o["valid"]["mean"]), 2: f2(o["test2016"]["mean"]),
                              3: f2(o["test2017"]["mean"]), 4: f2(o["valid_ppl"]["mean"])}, src)
        short = "none" if r["scorer"] is None else label
        bench.check_prose(re.escape(short) + rf" {N} / {N} / {N}",
                          [f2(o[k]["mean"]) for k in ("valid", "test2016", "test2017")],
                          f"grid cell {short}", src)
        kept = page / "outputs" / "en_de" / f"{r['variant']}_seed1" / "attention_stats_valid.json"
        if r["scorer"] is not None and kept.is_file():
            st = json.loads(kept.read_text(encoding="utf-8"))
            doc.check_row("the mean entropy of a decoded step's attention", label,
                          {5: f2(st["entropy"]), 6: f2(st["max_weight"]), 7: f"{st['drop_attn']:.1f}"},
                          str(kept.relative_to(REPO)))
    cells = {(r["scorer"], r["config"]): r["ours"] for r in done}
    if ("additive", "i") in cells and ("key-value", "i") in cells:
        a, k = cells["additive", "i"], cells["key-value", "i"]
        doc.check_prose(rf"Key-value \(i\) trails additive \(i\) by {N} / {N} / {N} BLEU",
                        [f2(a[s]["mean"] - k[s]["mean"]) for s in ("valid", "test2016", "test2017")],
                        "key-value vs additive", src)
    if (None, None) in cells:
        t16 = [o["test2016"]["mean"] for key, o in cells.items() if key != (None, None)]
        log = page / "outputs" / "en_de" / "none-grid-none_seed1" / "train.log.gz"
        ppl = _valid_ppl(log)
        before, after, _ = _last_epoch_fall(ppl)
        doc.check_prose(rf"every attention cell, {N} test2016 BLEU against ({NN}-{NN}), as in the seed's "
                        rf"table .* was still falling at the end of its {N} epochs \({N}, then {N}\)",
                        [f2(cells[None, None]["test2016"]["mean"]), f"{f2(min(t16))}-{f2(max(t16))}",
                         str(max(ppl)), f2(before), f2(after)],
                        "the baseline", f"{src} and {log.relative_to(REPO)}")
    for scorer, c in grid["claim"].items():
        b = c["bootstrap"]
        if all("ii-i" in b.get(t, {}) for t in ("test2016", "test2017")):
            doc.check_prose(rf"{re.escape(scorer)} {N} \[{N}, {N}\] / {N} \[{N}, {N}\]",
                            [signed(b[t]["ii-i"][k]) for t in ("test2016", "test2017")
                             for k in ("delta", "low", "high")], f"{scorer} (ii) − (i)", src)
    from fairseq_acvi.mt_eval.seed003_grid import SCORERS, seed_difference
    wmt = [seed_difference(sc, "i", "ii")["wmt"] for sc in SCORERS]
    if "(ii) − (i) in tokenised BLEU" in doc.flat:
        doc.check_prose(rf"The seed's own \(ii\) − \(i\) lies between {N} and {N} BLEU on WMT",
                        [f2(min(wmt)), signed(max(wmt))], "the seed's (ii) − (i)", "seed 003's Table 1")
    if ("key-value", "ii") in cells and ("multiplicative", "ii") in cells:
        _check_key_value_ii(doc, grid, page / "outputs" / "en_de")
    if ("multiplicative", "iii") in cells:
        _check_multiplicative_iii(doc, grid, page)
    if all((sc, "iii") in cells for sc in ("scaled-dot", "key-value")) and (page / "score_scale_iii.json").is_file():
        _check_scaled_dot_key_value_iii(doc, grid, page)
    if (page / "key_value_control_paired.json").is_file():
        _check_key_value_control(doc, grid, page)
    _check_over_seeds(doc, page)
    _check_acvi_cell(doc, bench, page)
    if all((s, "i") in cells for s in ("additive", "multiplicative", "scaled-dot", "key-value")):
        _check_key_value_diagnosis(doc, page / "outputs" / "en_de")
        _check_grid_overview(grid, page / "outputs" / "en_de", src)
    doc.assert_ok()
    bench.assert_ok()


def _grid_of_grid_seed(page):
    """The page's grid.json with each trained cell's ``ours`` figures (BLEU per split, validation
    perplexity) those of the grid seed's run in results.json, not the mean over the seeds: the
    page's table and prose are the grid seed's, and more seeds of a cell leave them as they are."""
    grid = _grid_json(page)
    runs = {(r["variant"], r["seed"]): r for r in json.loads((page / "results.json").read_text())["runs"]
            if r["pair"] == grid["pair"]}
    for row in grid["rows"]:
        if row["ours"]["status"] == "run":
            run = runs[row["variant"], grid["grid_seed"]]
            row["ours"] = dict(row["ours"], valid_ppl={"mean": run["valid_ppl"]},
                               **{s: {"mean": run["bleu"][s]["bleu_tok"]} for s in ("valid", "test2016", "test2017")})
    return grid


def _check_key_value_ii(doc, grid, kept):
    """The key-value (ii) paragraph of the attention grid page: its (ii) − (i), the attention
    statistics kept beside it and the last epoch's fall of the (ii) cells' validation perplexity."""
    def fall(cell):
        return _last_epoch_fall(_valid_ppl(kept / f"soft-{cell}_seed1" / "train.log.gz"))
    b = grid["claim"]["key-value"]["bootstrap"]
    st = json.loads((kept / "soft-key-value-ii_seed1" / "attention_stats_valid.json").read_text())
    kv, mu = fall("key-value-ii"), fall("multiplicative-ii")
    others = [fall(c)[2] for c in ("additive-ii", "scaled-dot-ii")]
    src = "grid.json and the kept train.log.gz and attention_stats_valid.json of the (ii) cells"
    doc.check_prose(rf"Key-value gains the most from the decoder's past, \(ii\) − \(i\) {N} / {N} on test2016",
                    [signed(b[t]["ii-i"]["delta"]) for t in ("test2016", "test2017")], "key-value (ii) − (i)", src)
    doc.check_prose(rf"harder still in \(ii\): {N} nats a decoded step, a largest weight of {N} and {N} % of "
                    rf"its softmax weights exactly 0\. Its validation perplexity \({N}\) still fell by {N} %",
                    [f2(st["entropy"]), f2(st["max_weight"]), f"{100 * st['zero_fraction']:.1f}", f2(kv[1]),
                     f"{kv[2]:.1f}"], "key-value (ii)'s attention", src)
    doc.check_prose(rf"\({N}, then {N}: {N} %\), against ({NN}-{NN}) % for additive and scaled-dot \(ii\)",
                    [f2(mu[0]), f2(mu[1]), f"{mu[2]:.1f}", f"{min(others):.1f}-{max(others):.1f}"],
                    "the (ii) cells' last epoch", src)


def _check_multiplicative_iii(doc, grid, page):
    """The multiplicative (iii) paragraph of the attention grid page: its kept log, attention
    statistics and score scales (trained and fresh), and its (iii) − (i)."""
    kept = page / "outputs" / "en_de" / "soft-multiplicative-iii_seed1"
    ppl_before, ppl_last, ppl_fall = _last_epoch_fall(_valid_ppl(kept / "train.log.gz"))
    st = json.loads((kept / "attention_stats_valid.json").read_text())
    sd, fresh1 = _score_spread(page / "score_scale_multiplicative.json", "_seed1")
    _, fresh3 = _score_spread(page / "score_scale_multiplicative_iii_fresh.json", "_seed1")
    row = _grid_row(grid, "multiplicative", "iii")
    d16 = grid["claim"]["multiplicative"]["bootstrap"]["test2016"]["iii-i"]["delta"]
    src = "the kept log, attention statistics and score_scale_multiplicative*.json"
    doc.check_prose(rf"Multiplicative \(iii\) is (?:the grid's lowest attention cell|far below \(i\) and \(ii\)) \({N} test2016 BLEU; validation perplexity {N}, still "
                    rf"falling by {N} % in the last epoch\) and its attention [a-z ]+: {N} nats a decoded step, "
                    rf"DROP-attn {N} %",
                    [f2(row["ours"]["test2016"]["mean"]), f2(ppl_last), f"{ppl_fall:.1f}", f2(st["entropy"]),
                     f"{st['drop_attn']:.1f}"], "multiplicative (iii)", src)
    doc.check_prose(rf"has a median of {N} after training, against {N} in \(i\) and {N} in \(ii\), and "
                    rf"already {N} in a fresh \(iii\) model against {N} in a fresh \(i\) model",
                    [f2(sd[f"multiplicative-{c}"]) for c in ("iii", "i", "ii")] + [f2(fresh3), f2(fresh1)],
                    "multiplicative (iii)'s scores", src)
    doc.check_prose(rf"ours is {N} below on test2016", [f2(-d16)], "multiplicative (iii) − (i)", src)
    add3 = page / "outputs" / "en_de" / "soft-additive-iii_seed1" / "attention_stats_valid.json"
    if add3.is_file():
        sa = json.loads(add3.read_text())
        a3 = _grid_row(grid, "additive", "iii")["ours"]
        doc.check_prose(rf"Additive \(iii\), whose scorer is bounded by tanh, is not hurt: its attention is "
                        rf"(?:the softest of the grid|softer than \(i\)'s) \({N} nats, DROP-attn {N} %\), its validation "
                        rf"perplexity (?:the lowest of the grid|below \(i\)'s and \(ii\)'s) \({N}\)",
                        [f2(sa["entropy"]), f"{sa['drop_attn']:.1f}", f2(a3["valid_ppl"]["mean"])],
                        "additive (iii)", str(add3.relative_to(REPO)))
        ab = grid["claim"]["additive"]["bootstrap"]
        if "no interval separates its BLEU" in doc.flat:
            assert all(ab[t][k]["low"] <= 0 <= ab[t][k]["high"] for t in ("test2016", "test2017")
                       for k in ("iii-i", "iii-ii")), "the page says no interval separates additive (iii)"


def _check_key_value_control(doc, grid, page):
    """The key-value control (the scaled-dot scorer on the keys, configuration (i)) on the grid page,
    in the overview and in the README row: its BLEU and perplexity (results.json), its paired
    bootstraps against key-value (i) and additive (i), its attention statistics and score spread."""
    run = next(r for r in json.loads((page / "results.json").read_text())["runs"]
               if (r["variant"], r["seed"]) == ("soft-key-value-scaled-dot-i", 1))
    kv = _grid_row(grid, "key-value", "i")["ours"]
    pb = json.loads((page / "key_value_control_paired.json").read_text())
    st = json.loads((page / "outputs" / "en_de" / "soft-key-value-scaled-dot-i_seed1" / "attention_stats_valid.json").read_text())
    st_kv = _grid_i_stats(page / "outputs" / "en_de")["key-value"]
    spread, _ = _score_spread(page / "score_scale_key_value_control.json", "-i_seed1")
    spread_i, _ = _score_spread(page / "score_scale_i.json", "-i_seed1")

    def iv(x):
        return [signed(x["delta"]), signed(x["low"]), signed(x["high"])]
    src = "results.json, key_value_control_paired.json, attention_stats_valid.json, score_scale_*.json"
    doc.check_prose(rf"tests this: {N} / {N} / {N} BLEU \(valid / test2016 / test2017\) at a validation perplexity "
                    rf"of {N} \(key-value \(i\), the same order: {N} / {N} / {N}, {N}\); control − key-value \(i\) "
                    rf"{N} \[{N}, {N}\] on test2016 and {N} \[{N}, {N}\] on test2017, control − additive \(i\) "
                    rf"{N} \[{N}, {N}\] and {N} \[{N}, {N}\]",
                    [f2(run["bleu"][k]["bleu_tok"]) for k in ("valid", "test2016", "test2017")]
                    + [f2(run["valid_ppl"])] + [f2(kv[k]["mean"]) for k in ("valid", "test2016", "test2017", "valid_ppl")]
                    + iv(pb["minus_key_value_i"]["test2016"]) + iv(pb["minus_key_value_i"]["test2017"])
                    + iv(pb["minus_additive_i"]["test2016"]) + iv(pb["minus_additive_i"]["test2017"]),
                    "the key-value control", src)
    doc.check_prose(rf"Its attention has {N} nats a decoded step and DROP-attn {N} % \(key-value \(i\): {N}, {N} %\), "
                    rf"and its scores a median spread of {N} after training \({N};",
                    [f2(st["entropy"]), f"{st['drop_attn']:.1f}", f2(st_kv["entropy"]), f"{st_kv['drop_attn']:.1f}",
                     f2(spread["key-value-scaled-dot"]), f2(spread_i["key-value"])], "the key-value control's attention", src)
    if "level with additive (i) (no interval excludes 0)" in doc.flat:
        assert all(pb["minus_key_value_i"][t]["low"] > 0 and pb["minus_additive_i"][t]["low"] <= 0
                   <= pb["minus_additive_i"][t]["high"] for t in ("test2016", "test2017")), pb
    add = _grid_row(grid, "additive", "i")["ours"]
    gaps = [add[k]["mean"] - kv[k]["mean"] for k in ("valid", "test2016", "test2017")]
    gains = [pb["minus_key_value_i"][t]["delta"] for t in ("test2016", "test2017")]
    method = Doc(REPO / "docs" / "method.md")
    method.check_prose(rf"key-value \(i\) trails additive \(i\) by ({NN}-{NN}) BLEU on Multi30K .* it is ({NN}-{NN}) "
                       rf"BLEU above that on the test sets",
                       [f"{min(gaps):.1f}-{max(gaps):.1f}", f"{min(gains):.1f}-{max(gains):.1f}"],
                       "method.md: the scorer of the keys", src)
    method.assert_ok()
    ov, readme = Doc(OVERVIEW), Doc(README)
    ov.check_prose(rf"scaled-dot`\) it scores {N}: {N} \[{N}, {N}\] over key-value \(i\) and {N} \[{N}, {N}\] "
                   rf"against additive \(i\)",
                   [f2(run["bleu"]["test2016"]["bleu_tok"])] + iv(pb["minus_key_value_i"]["test2016"])
                   + iv(pb["minus_additive_i"]["test2016"]), "overview: the key-value control", src)
    bench = Doc(REPO / "BENCHMARKS.md")
    bench.check_prose(rf"the key-value control \(i\) with the scaled-dot scorer on its keys {N} / {N} / {N}",
                      [f2(run["bleu"][k]["bleu_tok"]) for k in ("valid", "test2016", "test2017")],
                      "BENCHMARKS: the key-value control", src)
    bench.assert_ok()
    readme.check_prose(rf"level with additive \(i\) with the scaled-dot scorer on its keys, {N} \[{N}, {N}\]",
                       iv(pb["minus_additive_i"]["test2016"]), "README: the key-value control", src)
    ov.assert_ok()
    readme.assert_ok()


def _check_over_seeds(doc, page):
    """The grid page's 'Over seeds' table: the mean ± std of every cell with two or more seeds
    (grid.json), and no such table while every cell has one."""
    grid = _grid_json(page)
    multi = [r for r in grid["rows"] if r["ours"]["status"] == "run" and len(r["ours"]["seeds"]) >= 2]
    assert ("## Over seeds" in (page / "README.md").read_text()) == bool(multi), "the 'Over seeds' section"
    for r in multi:
        o = r["ours"]
        doc.check_row("mean ± std over the finished seeds", f"{r['scorer']} ({r['config']})",
                      {1: ", ".join(map(str, o["seeds"])),
                       **{i: f"{f2(o[k]['mean'])} ± {f2(o[k]['std'])}"
                          for i, k in enumerate(("valid", "test2016", "test2017", "valid_ppl"), start=2)}},
                      "grid.json")


def _grid_json(page):
    return json.loads((page / "grid.json").read_text(encoding="utf-8"))


def _ms(x, sign=False):
    """A {mean, std, n} figure as the pages write it: the mean, and ± std when over several seeds."""
    m = signed(x["mean"]) if sign else f2(x["mean"])
    return m if x["n"] == 1 else f"{m} ± {f2(x['std'])}"


def _ms_pattern(n):
    """The regex group of a figure :func:`_ms` writes over ``n`` seeds."""
    return N if n == 1 else MS


def _check_acvi_cell(doc, bench, page):
    """The grid page's ACVI section: soft's and ACVI's (and the control's) mean ± std over seeds,
    ACVI − soft seed by seed and each seed's paired bootstrap (grid.json); no section without ACVI;
    BENCHMARKS' line of ACVI and soft in the cell."""
    entries = [a for a in _grid_json(page).get("acvi", []) if a["acvi"]["status"] == "run"]
    assert ("## ACVI in the best cell" in (page / "README.md").read_text()) == bool(entries), "the ACVI section"
    for a in entries:
        bench.check_prose(rf"ACVI in {re.escape(a['scorer'])} \({a['config']}\), mean of seeds [0-9, -]+, {N} / {N} / {N} "
                          rf"\(soft, seeds [0-9, -]+: {N} / {N} / {N}[;)]",
                          [f2(a[c][s]["mean"]) for c in ("acvi", "soft") for s in ("valid", "test2016", "test2017")],
                          "ACVI in the grid's best cell", "docs/results/attention_grid_2026-11-29/grid.json (acvi)")
        if a.get("control", {}).get("status") == "run":
            bench.check_prose(rf"its deterministic control, (?:mean of )?seeds? [0-9, -]+: {N} / {N} / {N}",
                              [f2(a["control"][s]["mean"]) for s in ("valid", "test2016", "test2017")],
                              "ACVI's control in the grid's best cell",
                              "docs/results/attention_grid_2026-11-29/grid.json (acvi)")
        rows = [("soft", a["soft"]), ("ACVI", a["acvi"])] + ([("control (no latent noise)", a["control"])]
                                                             if a.get("control", {}).get("status") == "run" else [])
        for label, c in rows:
            doc.check_row("Tokenised BLEU and validation perplexity, mean ± std over the seeds", label,
                          {1: ", ".join(map(str, c["seeds"])),
                           **{i: _ms(c[k])
                              for i, k in enumerate(("valid", "test2016", "test2017", "valid_ppl"), start=2)}},
                          "grid.json (acvi)")
        d = a["acvi_minus_soft"]
        doc.check_prose(rf"ACVI − soft, seed by seed over the seeds both have: valid {N} ± {N}; "
                        rf"test2016 {N} ± {N}; test2017 {N} ± {N}",
                        [x for s in ("valid", "test2016", "test2017") for x in (signed(d[s]["mean"]), f2(d[s]["std"]))],
                        "ACVI − soft", "grid.json (acvi)")
        for seed in sorted({x for b in a["bootstrap"].values() for x in b}, key=int):
            bs = [a["bootstrap"][t][seed] for t in ("test2016", "test2017")]
            doc.check_prose(rf"(?:sentence by sentence \(bootstrap, 95 %, `grid\.md`\): |; )seed {seed}: test2016 {N} "
                            rf"\[{N}, {N}\], test2017 {N} \[{N}, {N}\]",
                            [signed(b[k]) for b in bs for k in ("delta", "low", "high")],
                            f"ACVI − soft, seed {seed}", "grid.json (acvi bootstrap)")
        if a.get("control", {}).get("status") == "run":
            _check_acvi_control(doc, a, page)


def _check_acvi_control(doc, a, page):
    """The grid page's sentences on ACVI's deterministic control: ACVI − control seed by seed and
    each seed's paired bootstrap (grid.json), control − soft seed by seed (results.json)."""
    dc = a["acvi_minus_control"]
    pat = _ms_pattern(dc["valid"]["n"])
    doc.check_prose(rf"ACVI − control, seed by seed over the seeds both have: valid {pat}; test2016 {pat}; "
                    rf"test2017 {pat}", [_ms(dc[s], sign=True) for s in ("valid", "test2016", "test2017")],
                    "ACVI − control", "grid.json (acvi)")
    cb = a["control_bootstrap"]
    for seed in sorted({x for b in cb.values() for x in b}, key=int):
        doc.check_prose(rf"(?:paired against the control's \(bootstrap, 95 %\): |; )seed {seed} test2016 {N} "
                        rf"\[{N}, {N}\], test2017 {N} \[{N}, {N}\]",
                        [signed(cb[t][seed][k]) for t in ("test2016", "test2017") for k in ("delta", "low", "high")],
                        f"ACVI − control, seed {seed}", "grid.json (acvi control_bootstrap)")
    ivs = [cb[t][s] for t in cb for s in cb[t]]
    above, beside = sum(b["low"] > 0 for b in ivs), sum(b["low"] <= 0 <= b["high"] for b in ivs)
    if beside == len(ivs):
        doc.check_prose(r"(No interval of ACVI − control excludes 0)", ["No interval of ACVI − control excludes 0"],
                        "ACVI − control: the verdict", "grid.json (acvi control_bootstrap)")
    elif above < len(ivs):
        doc.check_prose(r"ACVI − control excludes 0 in (\d+) of the (\d+) intervals",
                        [str(len(ivs) - beside), str(len(ivs))], "ACVI − control: the verdict",
                        "grid.json (acvi control_bootstrap)")
    runs = {(r["variant"], r["seed"]): r["bleu"] for r in json.loads((page / "results.json").read_text())["runs"]}
    both = [s for s in a["control"]["seeds"] if (a["soft_variant"], s) in runs]
    diffs = {sp: [runs[a["control_variant"], s][sp]["bleu_tok"] - runs[a["soft_variant"], s][sp]["bleu_tok"] for s in both]
             for sp in ("valid", "test2016", "test2017")}
    want = [_ms({"mean": statistics.mean(x), "std": statistics.stdev(x) if len(x) > 1 else 0.0, "n": len(x)}, sign=True)
            for x in diffs.values()]
    pat = _ms_pattern(len(both))
    doc.check_prose(rf"Control − soft, the normalisation without the latent, seed by seed \(seeds? [0-9, ]+\): "
                    rf"valid {pat}; test2016 {pat}; test2017 {pat}", want, "control − soft", "results.json")


def _grid_row(grid, scorer, config):
    """The row of grid.json (or of :func:`_grid_of_grid_seed`) of one cell."""
    return next(r for r in grid["rows"] if (r["scorer"], r["config"]) == (scorer, config))


def _score_spread(path, suffix):
    """{scorer: median score spread} of a score_scale JSON whose checkpoints are grid cells
    ``soft-<scorer><suffix>/checkpoint_best.pt``, and the fresh model's spread (or None)."""
    sc = json.loads(path.read_text())
    spread = {k.split("/")[-2][len("soft-"):-len(suffix)]: x["score_std_median"] for k, x in sc["checkpoints"].items()}
    return spread, sc.get("fresh", {}).get("score_std_median")


def _check_scaled_dot_key_value_iii(doc, grid, page):
    """The scaled-dot (iii) and key-value (iii) paragraph of the attention grid page: their (iii) − (i),
    the attention statistics kept beside them, their score spreads (trained and fresh) and the
    conclusion that (iii) is below (i) and (ii) only for the unscaled dot products."""
    kept = page / "outputs" / "en_de"
    st = {sc: json.loads((kept / f"soft-{sc}-iii_seed1" / "attention_stats_valid.json").read_text())
          for sc in ("scaled-dot", "key-value")}
    s3, fresh_kv = _score_spread(page / "score_scale_iii.json", "-iii_seed1")
    s1, _ = _score_spread(page / "score_scale_i.json", "-i_seed1")
    _, fresh_sd = _score_spread(page / "score_scale_scaled_dot_iii_fresh.json", "-iii_seed1")
    _, fresh_mult = _score_spread(page / "score_scale_multiplicative_iii_fresh.json", "-iii_seed1")
    b = grid["claim"]["scaled-dot"]["bootstrap"]
    kv = _grid_row(grid, "key-value", "iii")["ours"]
    src = "grid.json, attention_stats_valid.json and score_scale_iii.json, score_scale_*_fresh.json"
    doc.check_prose(rf"Scaled-dot \(iii\), whose product of projected states is divided by √a, is not hurt either: "
                    rf"\(iii\) − \(i\) {N} \[{N}, {N}\] on test2016 and {N} \[{N}, {N}\] on test2017, attention "
                    rf"entropy {N} nats, DROP-attn {N} %, and a median score spread of {N} after training \({N} in "
                    rf"scaled-dot \(i\)\) and {N} in a fresh model",
                    [signed(b[t]["iii-i"][f]) for t in ("test2016", "test2017") for f in ("delta", "low", "high")]
                    + [f2(st["scaled-dot"]["entropy"]), f"{st['scaled-dot']['drop_attn']:.1f}",
                       f2(s3["scaled-dot"]), f2(s1["scaled-dot"]), f2(fresh_sd)], "scaled-dot (iii)", src)
    doc.check_prose(rf"Key-value \(iii\), whose keys are a learned map of the layer-normed states scored by the "
                    rf"unscaled product, is [a-z' ()]+ \({N} test2016 BLEU, validation perplexity {N}\) and its "
                    rf"attention [a-z ]+ \({N} nats, DROP-attn {N} %\): its median score spread is {N} after "
                    rf"training \({N} in key-value \(i\)\) and {N} in a fresh model, as multiplicative \(iii\)'s {N}",
                    [f2(kv["test2016"]["mean"]), f2(kv["valid_ppl"]["mean"]), f2(st["key-value"]["entropy"]),
                     f"{st['key-value']['drop_attn']:.1f}", f2(s3["key-value"]), f2(s1["key-value"]),
                     f2(fresh_kv), f2(fresh_mult)], "key-value (iii)", src)
    if "and only there" in doc.flat:     # the conclusion: (iii) below both for the unscaled products only
        verdicts = {sc: c["verdict"] for sc, c in grid["claim"].items()}
        assert [sc for sc, v in verdicts.items() if v == "reproduced"] == ["multiplicative", "key-value"], verdicts
    falls = [-grid["claim"][sc]["bootstrap"][t]["iii-i"]["delta"]
             for sc in ("multiplicative", "key-value") for t in ("test2016", "test2017")]
    method = Doc(REPO / "docs" / "method.md")
    method.check_prose(rf"\(iii\) {N}-{N} BLEU below \(i\) for these two scorers",
                       [str(math.floor(min(falls))), str(math.ceil(max(falls)))], "method.md: (iii) − (i)", src)
    method.assert_ok()
    guide = Doc(REPO / "docs" / "guide.md")
    guide.check_prose(rf"costs `multiplicative` and `key-value` {N}-{N} BLEU and `scaled-dot` and `additive` no measurable BLEU",
                      [str(math.floor(min(falls))), str(math.ceil(max(falls)))], "guide: (iii) − (i)", src)
    guide.assert_ok()
    if "already spread over 100 times" in Doc(OVERVIEW).flat:
        _, mult_i = _score_spread(page / "score_scale_multiplicative.json", "_seed1")
        assert min(fresh_mult, fresh_kv) > 100 * mult_i, (fresh_mult, fresh_kv, mult_i)


def _valid_ppl(log):
    """{epoch: validation perplexity} of a kept training log."""
    from fairseq_acvi.mt_eval.logs import parse_train_log
    return {e: r["ppl"] for e, r in parse_train_log(str(log))["valid"].items()}


def _last_epoch_fall(ppl):
    """(the perplexity before the last epoch, after it, the fall in %) of {epoch: perplexity}."""
    last = max(ppl)
    return ppl[last - 1], ppl[last], 100 * (1 - ppl[last] / ppl[last - 1])


def _grid_i_stats(kept):
    """{scorer: the attention statistics kept beside its (i) cell} of the attention grid page."""
    return {s: json.loads((kept / f"soft-{s}-i_seed1" / "attention_stats_valid.json").read_text())
            for s in ("additive", "multiplicative", "scaled-dot", "key-value")}


def _check_grid_overview(grid, kept, src):
    """The attention grid's section of the results overview and its README row, from grid.json and
    the kept attention statistics of the (i) cells."""
    done = [r for r in grid["rows"] if r["ours"]["status"] == "run"]
    t16 = {(r["scorer"], r["config"]): r["ours"]["test2016"]["mean"] for r in done}
    ov, readme = Doc(OVERVIEW), Doc(README)
    for (scorer, config), v in t16.items():
        label = "none" if scorer is None else f"{scorer} ({config})"
        ov.check_prose(rf"{re.escape(label)} {N}[,.] ", [f2(v)], f"overview: {label}", src)
    for scorer, c in grid["claim"].items():       # (ii) − (i) on test2016, in both documents
        b = c["bootstrap"].get("test2016", {}).get("ii-i")
        if b is None:
            continue
        for d, where in ((ov, "overview"), (readme, "README")):
            d.check_prose(rf"[,:] {re.escape(scorer)} {N} \[{N}, {N}\]",
                          [signed(b["delta"]), signed(b["low"]), signed(b["high"])],
                          f"{where}: {scorer} (ii) − (i)", src)
        b3 = c["bootstrap"].get("test2016", {})
        if "iii-i" in b3 and "iii-ii" in b3:        # self-attention against (i) and (ii), overview only
            ov.check_prose(rf"{re.escape(scorer)} \(iii\) − \(i\) {N} \[{N}, {N}\], \(iii\) − \(ii\) {N} "
                           rf"\[{N}, {N}\] \({re.escape(c['verdict'])}\)",
                           [signed(b3[k][f]) for k in ("iii-i", "iii-ii") for f in ("delta", "low", "high")],
                           f"overview: {scorer} (iii)", src)
    entropy = {s: st["entropy"] for s, st in _grid_i_stats(kept).items()}
    others = [entropy[s] for s in ("additive", "multiplicative", "scaled-dot")]
    gap = f2(t16["additive", "i"] - t16["key-value", "i"])
    ov.check_prose(rf"Key-value \(i\) is {N} test2016 BLEU behind additive \(i\): its attention is nearly "
                   rf"hard \({N} nats a decoded step, against ({NN}-{NN}) for the other scorers\)",
                   [gap, f2(entropy["key-value"]), f"{f2(min(others))}-{f2(max(others))}"],
                   "overview: key-value", src)
    att = [v for (scorer, config), v in t16.items() if scorer is not None and config == "i"]
    readme.check_prose(rf"seed 1; (all 13 cells|\d+ of the 13 cells so far) \| no attention {N} test2016 BLEU, "
                       rf"configuration \(i\) ({NN}-{NN});",
                       ["all 13 cells" if len(done) == 13 else f"{len(done)} of the 13 cells so far",
                        f2(t16[None, None]), f"{f2(min(att))}-{f2(max(att))}"],
                       "README: the grid", src)
    readme.check_prose(rf"key-value \(i\) {N} behind additive \(i\)", [gap], "README: key-value", src)
    for a in grid.get("acvi", []):                 # ACVI in the best cell and its control, in both documents
        if a["acvi"]["status"] != "run":
            continue
        fig = rf"({MSN}|{NN})"
        readme.check_prose(rf"ACVI in {re.escape(a['scorer'])} \({a['config']}\) {fig} test2016 BLEU \(seeds [0-9, ]+\) "
                           rf"against soft {fig}", [_ms(a["acvi"]["test2016"]), _ms(a["soft"]["test2016"])],
                           "README: ACVI in the grid's best cell", src)
        if a.get("control", {}).get("status") != "run":
            continue
        cb = a["control_bootstrap"]
        per = "; ".join(rf"seed {s}: test2016 {N} \[{N}, {N}\], test2017 {N} \[{N}, {N}\]" for s in sorted(cb["test2016"], key=int))
        want = [_ms(a["control"]["test2016"])] + [signed(cb[t][s][k]) for s in sorted(cb["test2016"], key=int)
                                                  for t in ("test2016", "test2017") for k in ("delta", "low", "high")]
        for d, where in ((ov, "overview"), (readme, "README")):
            d.check_prose(rf"its deterministic control \(the annotation normalisation without the latent; seeds? [0-9, ]+\) "
                          rf"scores {fig} test2016 BLEU; ACVI − control {per}", want, f"{where}: ACVI's control", src)
    ov.assert_ok()
    readme.assert_ok()


def _check_key_value_diagnosis(doc, kept):
    """The key-value (i) paragraph of the attention grid page: the perplexities of the kept
    training logs and the attention statistics kept beside each (i) cell."""
    others = ("additive", "multiplicative", "scaled-dot")
    ppl = {s: _valid_ppl(kept / f"soft-{s}-i_seed1" / "train.log.gz") for s in others + ("key-value",)}
    st = _grid_i_stats(kept)
    kv_last = max(ppl["key-value"])
    near = min(ppl["additive"], key=lambda e: abs(ppl["additive"][e] - ppl["key-value"][kv_last]))
    fall = {s: _last_epoch_fall(ppl[s])[2] for s in ppl}
    src = "the kept train.log.gz and attention_stats_valid.json of the (i) cells"
    doc.check_prose(rf"after {N} epochs, {N}, is additive's after {N} \({N}\), and it still fell by "
                    rf"{N} % in the last epoch, against ({NN}-{NN}) %",
                    [str(kv_last), f2(ppl["key-value"][kv_last]), str(near), f2(ppl["additive"][near]),
                     f"{fall['key-value']:.1f}",
                     f"{min(fall[s] for s in others):.1f}-{max(fall[s] for s in others):.1f}"],
                    "key-value's training speed", src)
    doc.check_prose(rf"{N} nats of entropy per decoded step \(multiplicative {N}, scaled-dot {N}, "
                    rf"additive {N}\), a largest weight of {N} on average, and {N} % of its softmax "
                    rf"weights exactly 0",
                    [f2(st[s]["entropy"]) for s in ("key-value", "multiplicative", "scaled-dot", "additive")]
                    + [f2(st["key-value"]["max_weight"]), f"{100 * st['key-value']['zero_fraction']:.1f}"],
                    "key-value's attention", src)
    assert all(st[s]["zero_fraction"] == 0.0 for s in others), "the page says: none for the other three"
    scale = json.loads((kept.parents[1] / "score_scale_i.json").read_text())["checkpoints"]
    spread = {s: v["score_std_median"] for k, v in scale.items() for s in others + ("key-value",)
              if f"/soft-{s}-i_seed1/" in k}
    assert len(spread) == 4, sorted(scale)
    doc.check_prose(rf"has a median of {N}, against {N} \(multiplicative\), {N} \(scaled-dot\) and {N} "
                    rf"\(additive\)", [f2(spread[s]) for s in ("key-value", "multiplicative", "scaled-dot",
                                                               "additive")],
                    "key-value's score spread", "docs/results/attention_grid_2026-11-29/score_scale_i.json")
    doc.check_prose(rf"is {N} % against ({NN}-{NN}) %",
                    [f"{st['key-value']['drop_attn']:.1f}",
                     f"{min(st[s]['drop_attn'] for s in others):.1f}-{max(st[s]['drop_attn'] for s in others):.1f}"],
                    "key-value's DROP-attn", src)


def test_sparse_attention_training_figures():
    """docs/results/sparse_attention_training_2026-11-29: the decode-time swap, the score scale and
    the early dynamics, from the page's JSON files; its headline in BENCHMARKS, the overview and
    the guide."""
    page = RESULTS / "sparse_attention_training_2026-11-29"
    src = "docs/results/sparse_attention_training_2026-11-29"

    def load(rel):
        return json.loads((page / rel).read_text(encoding="utf-8"))

    doc = Doc(page / "README.md")
    cap = "Tokenised BLEU; Δ against the run's own softmax decode"
    soft = {s: load(f"posthoc/softmax_seed{s}_bleu.json")["bleu_tok"] for s in (1, 2, 3)}
    swap = {(s, n): load(f"posthoc/seed{s}_{n}_bleu.json") for s in (1, 2, 3)
            for n in ("sparsemax", "entmax15")}
    for s in (1, 2, 3):
        doc.check_row(cap, str(s), {1: f2(soft[s]), 2: f2(swap[s, "sparsemax"]["bleu_tok"]),
                                    3: _interval(swap[s, "sparsemax"]["paired"]),
                                    4: f2(swap[s, "entmax15"]["bleu_tok"]),
                                    5: _interval(swap[s, "entmax15"]["paired"])}, src)
    mean_delta = {n: statistics.mean(swap[s, n]["paired"]["delta"] for s in (1, 2, 3))
                  for n in ("sparsemax", "entmax15")}
    doc.check_row(cap, "mean", {1: f2(statistics.mean(soft.values())),
                                2: f"{f2(statistics.mean(swap[s, 'sparsemax']['bleu_tok'] for s in (1, 2, 3)))}"
                                   f" ({f2(mean_delta['sparsemax'])})",
                                4: f"{f2(statistics.mean(swap[s, 'entmax15']['bleu_tok'] for s in (1, 2, 3)))}"
                                   f" ({f2(mean_delta['entmax15'])})"}, src)
    trained = load("posthoc/sparsemax_trained_seed1_bleu.json")
    doc.check_prose(rf"\*\*Trained with sparsemax\*\* \(seed 1\): {N}, ({NN} \[{NN}, {NN}\])",
                    [f2(trained["bleu_tok"]), _interval(trained["paired"])], "trained sparsemax", src)

    final = load("final.json")
    by_name = {"fresh": final["fresh"]}
    for path, stats in final["checkpoints"].items():
        by_name["sparsemax, trained" if "sparsemax" in path else "softmax, trained"] = stats
    for label, st in by_name.items():
        doc.check_row("where each model sits", label, {
            1: f"{st['score_std_median']:.3f}" if label == "fresh" else f"{st['score_std_median']:.1f}",
            2: f"{st['top_gap_median']:.3f}" if label == "fresh" else f"{st['top_gap_median']:.1f}",
            3: f"{st['sparsemax_support_mean']:.2f}", 4: f"{100 * st['support1_fraction']:.0f} %",
            5: f"{st['softmax_max_mean']:.2f}"}, src)
    g = final["grad_at_init"]
    doc.check_prose(rf"gradient is {N}× softmax's under sparsemax and {N}× under 1.5-entmax",
                    [f"{g['sparsemax']['scorer_ratio_to_softmax']:.1f}",
                     f"{g['entmax15']['scorer_ratio_to_softmax']:.1f}"], "gradient at init", src)

    early = {n: list(load(f"early_{n}.json")["checkpoints"].values()) for n in ("softmax", "sparsemax")}
    for i, updates in enumerate((30, 60, 90, 120, 150, 180)):
        cells = {}
        for col, n in ((1, "softmax"), (2, "sparsemax")):
            st = early[n][i]
            cells[col] = (f"{st['score_std_median']:.1f} / {100 * st['support1_fraction']:.0f} % / "
                          f"{st['softmax_max_mean']:.2f}")
        doc.check_row("The first 180 updates of both", str(updates), cells, src)
    ppl = load("valid_ppl.json")
    tables = [rows for c, rows in doc.tables if "Validation perplexity per epoch" in c]
    assert len(tables) == 1, "the perplexity table"
    head, *rows = tables[0]
    for r in rows:
        if r[0] in ("softmax", "sparsemax"):
            for ep, cell in zip(head[1:], r[1:]):
                v = ppl[r[0]]["valid_ppl"][ep]
                want = f"{v:.1f}" if v >= 10 else f"{v:.2f}"
                if norm(cell) != want:
                    doc.fail(f"{r[0]} ppl epoch {ep}", f"reads {cell!r}, {src}/valid_ppl.json gives {want!r}")

    stats_files = {"softmax": "stats_softmax", "softmax, decoded with sparsemax": "stats_softmax_decoded_sparsemax",
                   "softmax, decoded with 1.5-entmax": "stats_softmax_decoded_entmax15",
                   "sparsemax, trained": "stats_sparsemax_trained"}
    tables = [rows for c, rows in doc.tables if "The attention of greedy decodes of seed 1" in c]
    assert len(tables) == 1, "the attention statistics table"
    seen = set()
    for r in tables[0][1:]:
        st = load(f"posthoc/{stats_files[r[0]]}.json")
        want = [f"{100 * st['zero_fraction']:.1f}", f"{st['rep_per_100']:.2f}", f"{st['drop_attn']:.1f}"]
        if [norm(c) for c in r[1:4]] != want:
            doc.fail(f"attention statistics of {r[0]!r}", f"read {r[1:4]}, {src} gives {want}")
        seen.add(r[0])
    assert seen == set(stats_files), seen

    sp = mean_delta["sparsemax"]
    en = mean_delta["entmax15"]
    one_word = f"{100 * by_name['sparsemax, trained']['support1_fraction']:.0f}"
    bench = Doc(BENCH)
    bench.check_prose(rf"behind softmax\. The softmax models of seeds 1-3, decoded with sparsemax \(or 1\.5-entmax\) in "
                      rf"place of softmax and not retrained, lose nothing: Δ {N} \({N}\)", [f2(sp), f2(en)],
                      "decode-time swap", src)
    bench.check_prose(rf"is {N} valid BLEU \[{N}, {N}\] behind softmax",
                      [signed(trained["paired"]["delta"]), signed(trained["paired"]["low"]),
                       signed(trained["paired"]["high"])], "trained sparsemax", src)
    bench.check_prose(rf"Trained, {N} % of the sparsemax model's steps attend to one word", [one_word],
                      "one-word steps", src)
    ov = Doc(OVERVIEW)
    ov.check_prose(rf"costs {N} and {N} on average", [f2(sp), f2(en)], "decode-time swap", src)
    ov.check_prose(rf"is {N} valid BLEU behind softmax \(\[{N}, {N}\]\)",
                   [f2(-trained["paired"]["delta"]), signed(trained["paired"]["low"]),
                    signed(trained["paired"]["high"])], "trained sparsemax", src)
    ov.check_prose(rf"Trained, {N} % of the sparsemax model's steps attend to one word", [one_word],
                   "one-word steps", src)
    readme = Doc(README)
    readme.check_prose(rf"trained with sparsemax, {N} valid BLEU behind softmax \(\[{N}, {N}\]\); softmax "
                       rf"models decoded with sparsemax instead lose {N} on average: the deficit is made in "
                       rf"training \({N} % of its steps attend to one word",
                       [f2(-trained["paired"]["delta"]), signed(trained["paired"]["low"]),
                        signed(trained["paired"]["high"]), f2(sp), one_word], "README's row", src)
    zeros = load("posthoc/stats_softmax_decoded_sparsemax.json")["zero_fraction"]
    guide = Doc(GUIDE)
    guide.check_prose(rf"gives sparse attention \({N} % exact zeros\) at softmax's BLEU",
                      [f"{100 * zeros:.0f}"], "zeros of the swap", src)
    for d in (doc, bench, ov, guide, readme):
        d.assert_ok()


# ----------------------------------------------------------------------------------- bAbI
def _babi_best(entry, max_seed, key, task, seeds_from=1):
    """Test accuracy of the run chosen by validation among seeds [seeds_from, max_seed]
    (ties: the lower validation NLL), as babi_report selects."""
    runs = [r for r in entry["runs"] if seeds_from <= r["seed"] <= max_seed]
    best = max(runs, key=lambda r: (r["valid"], -r["valid_nll"]))
    return best["test"][key][str(task)]


def _passed(accs):
    return sum(round(a, 4) >= 95 for a in accs)


def test_babi_en_10k_pass_counts_and_means():
    rel = "babi_en-10k_2026-11-27/results_single.json"
    src = f"docs/results/{rel}.gz"
    data = _babi_json(rel)
    columns = [("memn2n", "memn2n"), ("t_memn2n", "t_memn2n_S1"), ("t_memn2n", "t_memn2n_S10")]

    def best_of(n):
        accs = [[_babi_best(data[f"{m}|{t}"], n, k, t) for t in range(1, 21)] for m, k in columns]
        return [_passed(a) for a in accs], [statistics.mean(a) for a in accs]

    counts = {n: best_of(n) for n in (1, 3, 6, 7, 8, 10)}
    slash = lambda xs: " / ".join(str(x) for x in xs)
    bench = Doc(BENCH)
    bench.check_prose(rf"best of seeds 1-10 passes (\d+) \(MemN2N\) / (\d+) \(t-MEM-NN S = 1\) / (\d+) \(S = 10\) "
                      rf"of 20, means ([\d.]+ / [\d.]+ / [\d.]+) % \(best of 1-3: (\S+ / \S+ / \S+); 1-6: (\S+ / \S+ / \S+); "
                      rf"1-7 and 1-8: (\S+ / \S+ / \S+)\) \(seed 1 alone: (\S+ / \S+ / \S+), means ([\d.]+ / [\d.]+ / [\d.]+) %\)",
                      [str(c) for c in counts[10][0]] + [slash(f"{m:.1f}" for m in counts[10][1]),
                       slash(counts[3][0]), slash(counts[6][0]), slash(counts[7][0]),
                       slash(counts[1][0]), slash(f"{m:.1f}" for m in counts[1][1])],
                      "bAbI en-10k", src)
    if counts[7][0] != counts[8][0]:
        bench.fail("bAbI en-10k best of 1-7 and 1-8", f"{src} gives {counts[7][0]} and {counts[8][0]}")
    bench.assert_ok()
    doc = Doc(GUIDE)
    errors = [100 - m for m in counts[10][1]]
    same = len(set(counts[10][0])) == 1
    doc.check_prose(r"the best of seeds 1-10 passes (\d+) tasks for each model, mean error ([\d.]+-[\d.]+) %",
                    [str(counts[10][0][0]) if same else slash(counts[10][0]),
                     f"{min(errors):.1f}-{max(errors):.1f}"], "bAbI en-10k (docs/guide.md)", src)
    doc.assert_ok()


def test_babi_hindi_and_shuffled_tables_11_and_12():
    """bAbI `hn` and `shuffled` (Tables 11 and 12): pass counts and means (best of seeds 1-10 by
    validation) on BENCHMARKS.md and on the Hindi page's summary table, and Hindi task 1,
    recomputed from the merged results."""
    columns = [("memn2n", "memn2n"), ("t_memn2n", "t_memn2n_S1"), ("t_memn2n", "t_memn2n_S10")]
    slash = lambda xs: " / ".join(str(x) for x in xs)
    found = {}
    for variant, folder in (("hn", "table11_hn"), ("shuffled", "table12_shuffled")):
        rel = f"babi_hindi_2026-11-28/{folder}/results_single.json"
        data = _babi_json(rel)
        accs = [[_babi_best(data[f"{m}|{t}"], 10, k, t) for t in range(1, 21)] for m, k in columns]
        found[variant] = ([_passed(a) for a in accs], [f"{statistics.mean(a):.1f}" for a in accs],
                          [f"{a[0]:.1f}" for a in accs], f"docs/results/{rel}.gz")
    (hn_pass, hn_mean, hn_task1, hn_src), (sh_pass, sh_mean, _, sh_src) = found["hn"], found["shuffled"]
    bench = Doc(BENCH)
    bench.check_prose(r"passes `hn` \*\*(\d+ / \d+ / \d+)\*\* \(MemN2N / t-MEM-NN S = 1 / S = 10\), means "
                      r"([\d.]+ / [\d.]+ / [\d.]+) %",
                      [slash(hn_pass), slash(hn_mean)], "bAbI hn (Table 11)", hn_src)
    bench.check_prose(r"Hindi task 1 ([\d.]+ / [\d.]+ / [\d.]+) %", [slash(hn_task1)],
                      "bAbI hn task 1", hn_src)
    bench.check_prose(r"`shuffled` \*\*(\d+ / \d+ / \d+)\*\*,\s+([\d.]+ / [\d.]+ / [\d.]+) %",
                      [slash(sh_pass), slash(sh_mean)], "bAbI shuffled (Table 12)", sh_src)
    bench.assert_ok()
    page = Doc(RESULTS / "babi_hindi_2026-11-28.md")
    for variant, label, (passes, means, _, src) in (("hn", "`hn` (D Table 11)", found["hn"]),
                                                  ("shuffled", "`shuffled` (D Table 12)", found["shuffled"])):
        page.check_prose(re.escape(f"| {label} |") + r" \d+ / \*\*(\d+)\*\* \| \d+ / \*\*(\d+)\*\* \| "
                         r"\d+ / \*\*(\d+)\*\* \| ([\d.]+ / [\d.]+ / [\d.]+) \(",
                         [str(p) for p in passes] + [slash(means)], f"bAbI {variant}, page summary", src)
    page.assert_ok()


def test_babi_random_noise_protocol_table():
    src1 = "docs/results/babi_2026-11-24_random-noise/results_single_rn0.1_seeds1-10.json.gz"
    first = _babi_json("babi_2026-11-24_random-noise/results_single_rn0.1_seeds1-10.json")
    more = {m: _babi_json(f"babi_2026-11-24_random-noise/results_single_{m}_rn0.1_seeds11-20.json")
            for m in ("memn2n", "t_memn2n")}
    joint = _babi_json("babi_2026-11-24_random-noise/results_joint_rn0.1.json")
    src20 = f"{src1} and …_seeds11-20.json"

    def merged(model, task):
        return {"runs": first[f"{model}|{task}"]["runs"] + more[model][f"{model}|{task}"]["runs"]}

    def row(model, key, n):
        accs = [_babi_best(merged(model, t), n, key, t) for t in range(1, 21)]
        return {1: str(_passed(accs)), 2: f"{statistics.mean(accs):.1f}"}

    doc = Doc(BENCH)
    cap = "The results of every run, with the rendered report"
    doc.check_row(cap, "MemN2N, single task, best of 10", row("memn2n", "memn2n", 10), src1)
    doc.check_row(cap, "MemN2N, single task, best of 20", row("memn2n", "memn2n", 20), src20)
    doc.check_row(cap, "t-MEM-NN S = 10, single task, best of 10", row("t_memn2n", "t_memn2n_S10", 10), src1)
    doc.check_row(cap, "t-MEM-NN S = 1, single task, best of 20", row("t_memn2n", "t_memn2n_S1", 20), src20)
    doc.check_row(cap, "t-MEM-NN S = 10, single task, best of 20", row("t_memn2n", "t_memn2n_S10", 20), src20)
    for label, model, key in (("MemN2N, single task, mean of 20 seeds", "memn2n", "memn2n"),
                              ("t-MEM-NN S = 10, single task, mean of 20 seeds", "t_memn2n", "t_memn2n_S10")):
        means = []
        for t in range(1, 21):
            runs = merged(model, t)["runs"]
            if len(runs) != 20:
                doc.fail(label, f"{src20} holds {len(runs)} runs of task {t}, not 20")
            means.append(statistics.mean(r["test"][key][str(t)] for r in runs))
        doc.check_row(cap, label, {1: str(_passed(means)), 2: f"{statistics.mean(means):.1f}"}, src20)
    for label, model, key in (("MemN2N, joint", "memn2n", "memn2n"),
                              ("t-MEM-NN S = 10, joint", "t_memn2n", "t_memn2n_S10")):
        entry = joint[f"{model}|" + ",".join(str(t) for t in range(1, 21))]
        accs = [entry["test"][key][str(t)] for t in range(1, 21)]
        doc.check_row(cap, label, {1: str(_passed(accs)), 2: f"{statistics.mean(accs):.1f}"},
                      "docs/results/babi_2026-11-24_random-noise/results_joint_rn0.1.json.gz")
    doc.assert_ok()


def test_a_changed_figure_fails_naming_doc_figure_and_file(tmp_path, monkeypatch):
    """The checker itself: one digit changed in a copy of the overview fails, naming all three."""
    text = OVERVIEW.read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| `acvi_transformer`, ACVI |"))
    bad = tmp_path / "README.md"
    bad.write_text(text.replace(row, row.replace("| 3.71 ± 0.01 |", "| 3.72 ± 0.01 |")), encoding="utf-8")
    monkeypatch.setattr(Doc, "__init__", _rooted_init(Doc.__init__, bad))
    with pytest.raises(AssertionError) as err:
        test_transformer_table_and_paired_differences()
    message = str(err.value)
    assert "docs/results/README.md" in message and "`acvi_transformer`, ACVI" in message
    assert "'3.72 ± 0.01'" in message and "'3.71 ± 0.01'" in message
    assert "docs/results/multi30k_transformer_2026-11-27/results.json" in message


def _rooted_init(init, replacement):
    """Doc.__init__ that reads ``replacement`` in place of the overview (same name in messages)."""
    def patched(self, path):
        init(self, path)
        if Path(path) == OVERVIEW:
            self.text = replacement.read_text(encoding="utf-8")
            self.flat = " ".join(self.text.split())
            self._tables = self._parse_tables()
    return patched


# ----------------------------------------------------------------------------------- README's summary
FIGURE = re.compile(r"[-+−]?\d[\d,]*\.\d+(?: ± \d+\.\d+)?")


def readme_results_rows(text):
    """[(row label, its figures, the pages it links)] of the README's one-line-a-system table."""
    section = text[text.index("## Results on real data"):]
    section = section[:section.index("\n## ", 3)]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| system")]
    out = []
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        links = re.findall(r"\]\((docs/[^)#]+)", ln)
        out.append((cells[0] + ", " + cells[1], FIGURE.findall(norm(cells[2])), links))
    return out


def check_readme_summary(text):
    """Each figure of a README summary row is written the same way on the overview (whose figures
    the tests above recompute) or on the page that row links; returns the mismatches."""
    overview = norm(" ".join(OVERVIEW.read_text(encoding="utf-8").split()))
    errors, rows = [], readme_results_rows(text)
    assert len(rows) >= 8, f"README.md: the results summary has {len(rows)} rows"
    for label, figures, links in rows:
        pages = [overview] + [norm(" ".join((REPO / l).read_text(encoding="utf-8").split())) for l in links]
        for fig in figures:
            if not any(fig in page for page in pages):
                errors.append(f"README.md, results summary, {label!r}: {fig!r} is on neither "
                              f"docs/results/README.md nor {links}")
    return errors


def test_readme_summary_figures_come_from_checked_pages():
    errors = check_readme_summary(README.read_text(encoding="utf-8"))
    assert not errors, "\n".join(errors)
    rows = readme_results_rows(README.read_text(encoding="utf-8"))
    assert sum(len(f) for _, f, _ in rows) >= 15, "the summary lost its figures"


def test_readme_summary_check_catches_a_changed_figure():
    text = README.read_text(encoding="utf-8").replace("ACVI 38.55 ± 0.41", "ACVI 38.65 ± 0.41")
    errors = check_readme_summary(text)
    assert len(errors) == 1 and "38.65 ± 0.41" in errors[0] and "transformer" in errors[0]


def test_subnormals_figures():
    """docs/results/subnormals_2026-11-30: the words/s of each kept training log, their medians and
    ratio, on the page, in BENCHMARKS and in the guide; both runs logged the same losses."""
    from fairseq_acvi.mt_eval.logs import log_lines
    page = RESULTS / "subnormals_2026-11-30"

    def train_inner(name):
        """(the lines of the kept log ``name``, its train_inner records)."""
        lines = list(log_lines(page / name))
        return lines, [json.loads(line.split("| train_inner | ", 1)[1])
                       for line in lines if "| train_inner | " in line]

    logs = {mode: train_inner(f"train_{mode}.log.gz")[1] for mode in ("kept", "flushed")}
    assert [r["loss"] for r in logs["kept"]] == [r["loss"] for r in logs["flushed"]]
    wps = {m: [float(r["wps"]) for r in rows] for m, rows in logs.items()}
    med = {m: statistics.median(v) for m, v in wps.items()}
    ratio = f"{med['flushed'] / med['kept']:.2f}"
    src = "the two kept training logs"
    doc = Doc(page / "README.md")
    caption = "Training words/s of each 10-update interval"
    for label, mode in (("kept (the default)", "kept"), ("flushed", "flushed")):
        doc.check_row(caption, label, {1: ", ".join(f"{w:.1f}" for w in wps[mode]),
                                       2: f"{med[mode]:.1f}"}, src)
    doc.check_prose(rf"Flushed / kept: \*\*{N}×\*\* by the medians", [ratio], "the ratio", src)
    doc.check_prose(rf"logged three decimals in both runs \(({NN}(?:, {NN})*)\)",
                    [", ".join(r["loss"] for r in logs["kept"])], "the losses", src)
    doc.assert_ok()
    bench = Doc(REPO / "BENCHMARKS.md")
    bench.check_prose(rf"after its 4th epoch: {N} → {N} words/s \(\*\*{N}×",
                      [f"{med['kept']:.1f}", f"{med['flushed']:.1f}", ratio], "BENCHMARKS: subnormals", src)
    bench.assert_ok()
    guide = Doc(REPO / "docs" / "guide.md")
    guide.check_prose(rf"`fairseq-train` on that cell {N}× faster", [ratio], "guide: subnormals", src)
    guide.assert_ok()
    # late in training: kept, flushed and flushed-and-resumed logged the same losses, and the
    # resumed run loaded its own checkpoint inside the epoch
    late = {mode: train_inner(f"late_{mode}.log.gz") for mode in ("kept", "flushed", "flushed_resumed")}
    losses = {mode: [r["loss"] for r in records] for mode, (_, records) in late.items()}
    assert len(losses["kept"]) == 4 and losses["kept"] == losses["flushed"] == losses["flushed_resumed"]
    assert any("(epoch 21 @ 2360 updates)" in line for line in late["flushed_resumed"][0])
    doc.check_prose(rf"the four logged losses\s+are the same in the three logs \(({NN}), ({NN}), …, ({NN}) at update 2,380\)",
                    [losses["kept"][0], losses["kept"][1], losses["kept"][-1]], "late losses", src)
    doc.assert_ok()


def _parallel_ratios(path):
    """{variant: {"loop+feed", "loop"}} and parallel soft / fairseq-lstm (None without it), as
    bench_parallel_decoder.py printed them (from unrounded words/s)."""
    raw = path.read_text(encoding="utf-8")
    r = {v: dict(zip(("loop+feed", "loop"), re.search(
        rf"^{v}: parallel / loop\+feed = ({NN}) .* parallel / loop \(same model\) = ({NN})$", raw, re.M).groups()))
         for v in ("soft", "acvi")}
    lstm = re.search(rf"^soft: parallel / fairseq-lstm = ({NN})", raw, re.M)
    return r, lstm.group(1) if lstm else None


def test_parallel_decoder_measured_again_with_fixed_weights():
    """docs/results/parallel_decoder_2026-11-29: the 2026-11-30 re-measurement (weights held fixed)
    at the four shapes, its ratios from the kept benchmark outputs, on the page and in BENCHMARKS."""
    page = RESULTS / "parallel_decoder_2026-11-29"
    src = "cpu_multi30k_fixed_weights_2026-11-30.txt"
    r, lstm = _parallel_ratios(page / src)
    doc = Doc(page / "README.md")
    bench = Doc(REPO / "BENCHMARKS.md")
    doc.check_prose(rf"`soft` parallel / loop\+feed \*\*{N}×\*\* \(parallel / loop {N}×\), ACVI "
                    rf"\*\*{N}×\*\* \({N}×\), parallel `soft` / fairseq's `lstm` {N}×",
                    [r["soft"]["loop+feed"], r["soft"]["loop"], r["acvi"]["loop+feed"], r["acvi"]["loop"], lstm],
                    "fixed-weights ratios", src)
    others = {}
    for shape, label in (("word2", "word targets, 2 layers"), ("char", "Multi30K character targets"),
                         ("cnndm", "CNN/DM pointer-generator")):
        name = f"cpu_{shape}_fixed_weights_2026-11-30.txt"
        others[shape], shape_lstm = _parallel_ratios(page / name)
        o = others[shape]
        doc.check_row("The other three shapes, measured again", label,
                      {1: f"{o['soft']['loop+feed']}×", 2: f"{o['soft']['loop']}×",
                       3: f"{o['acvi']['loop+feed']}×", 4: f"{o['acvi']['loop']}×"}, name)
        if shape_lstm is not None:
            others[shape]["lstm"] = shape_lstm
    parts = [dict((k, float(v)) for k, v in re.findall(r"(step|encoder|output layer) (\d+\.\d+) s", line))
             for line in (page / "cpu_time_parts_fixed_weights_2026-11-30.txt").read_text(encoding="utf-8").splitlines()
             if line.startswith("input feeding 1:")]
    shared = [x["encoder"] + x["output layer"] for x in parts]
    doc.check_prose(rf"the input-feeding step took {N} s and {N} s, of which the encoder and the output layer "
                    rf"{N} s and {N} s \({N} % and {N} %\): a free decoder would make it at most {N}× and {N}× faster",
                    [f"{x['step']:.3f}" for x in parts] + [f"{x:.3f}" for x in shared]
                    + [f"{100 * sh / x['step']:.0f}" for sh, x in zip(shared, parts)]
                    + [f"{x['step'] / sh:.2f}" for sh, x in zip(shared, parts)],
                    "time parts, fixed weights", "cpu_time_parts_fixed_weights_2026-11-30.txt")
    doc.check_prose(rf"Parallel `soft` / fairseq's `lstm`: {N}× at the 2-layer word shape, {N}× at characters",
                    [others["word2"]["lstm"], others["char"]["lstm"]], "fixed weights against lstm",
                    "cpu_{word2,char}_fixed_weights_2026-11-30.txt")
    doc.assert_ok()
    bench.check_prose(rf"could slow a CPU step up to 6×\): `soft` {N}×, ACVI {N}× at the Multi30K preset; "
                      rf"{N}× and {N}× at 2-layer word targets, {N}× and {N}× at character targets, {N}× "
                      rf"and {N}× on CNN/DM",
                      [r["soft"]["loop+feed"], r["acvi"]["loop+feed"]]
                      + [others[s][v]["loop+feed"] for s in ("word2", "char", "cnndm") for v in ("soft", "acvi")],
                      "BENCHMARKS: fixed weights", "cpu_*_fixed_weights_2026-11-30.txt")
    bench.assert_ok()


def test_normalizer_speed_ratios():
    """docs/results/speed_normalizers_2026-11-30: each ratio of the page's table and of BENCHMARKS,
    from the two kept benchmark outputs."""
    page = RESULTS / "speed_normalizers_2026-11-30"
    order = ("sparsemax", "entmax15", "csoftmax", "csparsemax")

    def ratios(name):
        text = (page / name).read_text(encoding="utf-8")
        train, decode = text.split("# decoding:")
        pick = lambda part: {m.group(1): m.group(2) for m in re.finditer(r"^(\w+)\s+\S+\s+(\d\.\d+)$", part, re.M)}
        return [f"{float(pick(p)[n]):.2f}×" for p in (train, decode) for n in order]

    big, small = ratios("dim256_vocab8000.txt"), ratios("dim64_vocab1000.txt")
    src = "the kept outputs of bench_normalizers.py"
    doc = Doc(page / "README.md")
    caption = "Words/s (training) and sentences/s (beam 5) relative to softmax"
    doc.check_row(caption, "dim 256, vocabulary 8,000", dict(zip(range(2, 6), big[:4])), src)
    doc.check_row(caption, "dim 64, vocabulary 1,000", dict(zip(range(2, 6), small[:4])), src)
    rows = [r for cap, rows in doc.tables if caption in cap for r in rows if r[1] == "beam search"]
    assert [r[2:6] for r in rows] == [big[4:], small[4:]]
    doc.assert_ok()
    bench = Doc(REPO / "BENCHMARKS.md")
    bench.check_prose(rf"at dim 256, vocabulary 8,000: sparsemax ({NN}×), 1.5-entmax ({NN}×), csoftmax ({NN}×), "
                      rf"csparsemax ({NN}×); at `--dim 64 --vocab 1000` ({NN}×) / ({NN}×) / ({NN}×) / ({NN}×) "
                      rf"\(beam search ({NN}×) / ({NN}×) / ({NN}×) / ({NN}×)\)", big[:4] + small, "normalisers", src)
    bench.assert_ok()


def test_compiled_step_measured_again_with_fixed_weights():
    """docs/results/speed_compiled_step_2026-11-29: the 2026-11-30 paragraph's ratios, from the two
    kept benchmark outputs (as the benchmark printed them; eager PAG / soft from its words/s)."""
    page = RESULTS / "speed_compiled_step_2026-11-29"
    raw = {shape: (page / f"cpu_{shape}_fixed_weights_2026-11-30.txt").read_text(encoding="utf-8")
           for shape in ("char", "multi30k", "cnndm")}

    def compiled(shape, v):
        return re.search(rf"^{v}: loop\+feed inductor / loop\+feed = ({NN})", raw[shape], re.M).group(1)

    wps = _speed_table(page / "cpu_char_fixed_weights_2026-11-30.txt")

    def vs_soft(v):
        after = re.search(rf"^{v}: .* / soft loop\+feed = ({NN})", raw["char"], re.M).group(1)
        return [f"{wps[f'{v} loop+feed'] / wps['soft loop+feed']:.2f}", after]

    src = "the kept fixed-weights outputs"
    doc = Doc(page / "README.md")
    doc.check_prose(rf"eager step loop: characters `soft` {N}×, ACVI {N}×, PAG \*\*{N}×\*\*, rPAG \*\*{N}×\*\* "
                    rf"\(PAG {N} → {N} of the eager `soft` loop, rPAG {N} → {N}\); Multi30K `soft` {N}×, ACVI {N}×",
                    [compiled("char", v) for v in ("soft", "acvi", "pag", "rpag")] + vs_soft("pag") + vs_soft("rpag")
                    + [compiled("multi30k", v) for v in ("soft", "acvi")], "compiled step, fixed weights", src)
    cnndm = _parallel_ratios(page / "cpu_cnndm_fixed_weights_2026-11-30.txt")[0]
    doc.check_prose(rf"compiled / eager step loop `soft` \*\*{N}×\*\*, ACVI \*\*{N}×\*\*\. The table's 1\.33-1\.35× "
                    rf"does not hold.* In the same run the parallel path \(no input feeding\) gave {N}× \(`soft`\) "
                    rf"and {N}× \(ACVI\)",
                    [compiled("cnndm", v) for v in ("soft", "acvi")]
                    + [cnndm[v]["loop+feed"] for v in ("soft", "acvi")], "compiled step, CNN/DM", src)
    pag_first = [r for cap, rows in doc.tables if "compiled / eager step loop" in " ".join(rows[0])
                 for r in rows if len(r) > 2 and r[1] == "PAG"]
    doc.assert_ok()
    both = sorted([float(compiled("char", "pag")), float(norm(pag_first[0][2]).rstrip("×"))])
    guide = Doc(REPO / "docs" / "guide.md")
    guide.check_prose(rf"On one CPU core it trains PAG {N}-{N}× faster \(two measurements\)", [f"{x:.2f}" for x in both],
                      "guide: PAG compiled on the CPU", src + " and the 2026-11-29 table")
    guide.assert_ok()


def test_input_feeding_page_figures():
    """docs/results/input_feeding_multi30k_2026-11-30: the page's tables and figures from the
    report's input_feeding.json (itself made from the kept outputs beside it)."""
    page = RESULTS / "input_feeding_multi30k_2026-11-30"
    src = "input_feeding_multi30k_2026-11-30/input_feeding.json"
    table = json.loads((page / "input_feeding.json").read_text(encoding="utf-8"))
    doc = Doc(page / "README.md")
    names = {"feed": "input feeding", "nofeed": "no input feeding, parallel path",
             "control": "input feeding to the no-feed updates (control)"}
    splits = ("valid", "test2016", "test2017")
    rows = {norm(" | ".join(r)) for cap, rs in doc.tables if "best epoch" in " ".join(rs[0]) for r in rs[1:]}
    for e in table["pairs"]:
        head = f"{e['context']} | {e['seed']} |"
        for key, name in names.items():
            r = e[key]
            want = (f"{head} {name} | {r['updates']} | {r['epochs']:.0f} | {r['best_epoch']:.0f} | "
                    f"{f2(r['valid_ppl'])} | " + " | ".join(f2(r["bleu"][s]) for s in splits))
            if norm(want) not in rows:
                doc.fail(f"{e['context']} {name} row", f"not on the page; {src} gives {want!r}")
        for caption, paired, lead in (("same training time", e["paired"],
                                       f"{e['budget']['ratio']:.3f} | {e['budget']['budget_updates']}"),
                                      ("same updates", e["paired_control"], str(e["control"]["updates"]))):
            cells = doc.row(caption, e["context"], src)
            want = [e["context"], str(e["seed"])] + lead.split(" | ") + [_interval(paired[s]) for s in splits]
            if cells is not None and [norm(c) for c in cells] != [norm(w) for w in want]:
                doc.fail(f"{e['context']} differences at the {caption}", f"reads {cells}, {src} gives {want}")
    doc.assert_ok()
    (soft,) = [e for e in table["pairs"] if e["context"] == "soft"]
    (acvi,) = [e for e in table["pairs"] if e["context"] == "acvi"]
    d, c = soft["paired"], soft["paired_control"]
    for doc in (Doc(page / "README.md"), Doc(OVERVIEW)):
        for entry in (soft, acvi):
            _check_input_feeding_prose(doc, entry, src)
    assert all(p["low"] > 0 for p in d.values()) and c["test2016"]["low"] < 0 < c["test2016"]["high"]
    assert acvi["paired"]["test2016"]["high"] < 0          # the page says ACVI goes the other way


#: each context's two sentences on the input-feeding page and in the overview: no-feed − feed at the
#: same time (test2016 with its interval, test2017, valid), and the control (its updates and BLEU,
#: no-feed − control on test2016 with its interval)
INPUT_FEEDING_SENTENCES = {
    "soft": (rf"scored \*\*{N} BLEU on test2016 \[{N}, {N}\]\*\* and {N} on test2017 above the "
             rf"preset with input feeding, and {N} on validation",
             rf"trained to the same ([\d,]+) updates it scored {N} / {N} / {N}, and the model without "
             rf"input feeding is level with it: {N} \[{N}, {N}\] on test2016"),
    "acvi": (rf"In the same time without input feeding it scored \*\*{N} BLEU on test2016 \[{N}, {N}\]\*\*, "
             rf"{N} on test2017 and {N} on validation",
             rf"Trained to the same ([\d,]+) updates, ACVI with input feeding scored {N} / {N} / {N}; "
             rf"without input feeding − this control: {N} \[{N}, {N}\] on test2016"),
}


def _check_input_feeding_prose(doc, entry, src):
    """One context's two sentences (:data:`INPUT_FEEDING_SENTENCES`) from its pair's figures."""
    splits = ("valid", "test2016", "test2017")
    d, c = entry["paired"], entry["paired_control"]
    at_same_time, at_same_updates = INPUT_FEEDING_SENTENCES[entry["context"]]
    doc.check_prose(at_same_time, [signed(d["test2016"][k]) for k in ("delta", "low", "high")]
                    + [signed(d["test2017"]["delta"]), signed(d["valid"]["delta"])],
                    f"{entry['context']} at the same time", src)
    doc.check_prose(at_same_updates, [f"{entry['control']['updates']:,}"]
                    + [f2(entry["control"]["bleu"][s]) for s in splits]
                    + [signed(c["test2016"][k]) for k in ("delta", "low", "high")],
                    f"{entry['context']}'s control", src)
    doc.assert_ok()


def _fixed_weights_figures(page):
    """The figures of docs/results/speed_cpu_fixed_weights_2026-11-30 from its raw outputs, as the
    benchmarks printed them (ranges over the four scorers from the configurations' tables)."""
    raw = {p.stem: p.read_text(encoding="utf-8") for p in page.glob("*.txt")}
    one = lambda name, pattern: re.search(pattern, raw[name], re.M).group(1)
    seq = {v: one("seq2seq", rf"^{v}\s+\d+\s+({NN})$") for v in ("acvi", "structured", "variational")}
    seq["lstm"] = one("seq2seq", rf"^soft / fairseq-lstm = ({NN})")
    seq["decode"] = one("seq2seq", rf"K=10 / K=1 = ({NN})")
    pag = {v: one("pag_char", rf"^{v}\s+\d+\s+({NN})$") for v in ("pag", "rpag")}
    summ = {"train": one("summarization", rf"acvi/soft = ({NN})"), "decode": one("summarization", rf"K10/K1 = ({NN})")}
    cap = {"train": one("captioning", rf"acvi / soft training = ({NN})"), "decode": one("captioning", rf"K=10 / K=1 = ({NN})")}
    trf = {k: [one(f"transformer_run{i}", pat) for i in (1, 2)]
           for k, pat in (("train", rf"acvi / fairseq-transformer = ({NN})"), ("decode", rf"K=10 / K=1 = ({NN})"))}

    def configs(name):
        rows = {}
        for m in re.finditer(r"^(\S+)\s+(\(\S+\)(?: loop)?)\s+(\d+)\s+(\d\.\d+)\s+(\S+)\s+(\S+)$", raw[name], re.M):
            rows[(m.group(1), m.group(2))] = (int(m.group(3)), float(m.group(4)), m.group(6))
        return rows

    def span(values):
        return f"{min(values):.2f}-{max(values):.2f}"

    feed, nofeed = configs("attention_configs"), configs("attention_configs_nofeed")
    scorers = sorted({k[0] for k in feed})
    conf = {}
    for c in ("(ii)", "(iii)", "(ii+iii)"):
        conf[c] = (span([feed[(s, c)][1] for s in scorers]), span([float(feed[(s, c)][2]) for s in scorers]))
        conf["nofeed " + c] = span([nofeed[(s, c)][1] for s in scorers])
    for c in ("(i)", "(ii)", "(iii)", "(ii+iii)"):
        conf["parallel " + c] = span([nofeed[(s, c)][0] / nofeed[(s, c + " loop")][0] for s in scorers])
    return seq, pag, summ, cap, trf, conf


def test_cpu_speed_measured_again_with_fixed_weights():
    """docs/results/speed_cpu_fixed_weights_2026-11-30: the table's fixed-weights column and
    BENCHMARKS' sentences, from the kept benchmark outputs."""
    page = RESULTS / "speed_cpu_fixed_weights_2026-11-30"
    seq, pag, summ, cap, trf, conf = _fixed_weights_figures(page)
    src = "speed_cpu_fixed_weights_2026-11-30/*.txt"
    doc = Doc(page / "README.md")
    (table,) = [rows for cap_, rows in doc.tables if "fixed weights, 2026-11-30" in " ".join(rows[0])]
    got = {r[1]: norm(r[3]) for r in table[1:]}
    want = {"ACVI / `soft` training": None, "`structured` / `soft` training": seq["structured"],
            "`variational` (enum) / `soft` training": seq["variational"],
            "`soft` / fairseq `lstm` training": seq["lstm"], "PAG / `soft` training": pag["pag"],
            "rPAG / `soft` training": pag["rpag"],
            "ACVI / fairseq `transformer` training": ", ".join(trf["train"]),
            "(ii) training / beam": None, "(iii) training / beam": None, "(ii) + (iii) training / beam": None,
            "parallel / step loop, (i)": conf["parallel (i)"], "(ii)": conf["parallel (ii)"],
            "(iii)": conf["parallel (iii)"], "(ii) + (iii)": conf["parallel (ii+iii)"],
            "relative to (i): (ii) / (iii) / both, training":
                " / ".join(conf[f"nofeed {c}"] for c in ("(ii)", "(iii)", "(ii+iii)"))}
    for label, value in want.items():
        if value is not None and got.get(label) != value:
            doc.fail(label, f"reads {got.get(label)!r}, {src} gives {value!r}")
    rows = [(r[1], norm(r[3])) for r in table[1:]]
    assert [v for k, v in rows if k == "ACVI / `soft` training"] == [seq["acvi"], summ["train"], cap["train"]]
    assert [v for k, v in rows if k == "decoding K = 10 / K = 1"] == [seq["decode"], summ["decode"], cap["decode"],
                                                                        ", ".join(trf["decode"])]
    assert [v for k, v in rows if "training / beam" in k] == [" / ".join(conf[c]) for c in ("(ii)", "(iii)", "(ii+iii)")]
    doc.assert_ok()
    bench = Doc(REPO / "BENCHMARKS.md")
    bench.check_prose(rf"Measured again with fixed weights \(2026-11-30, \[[^]]+\]\([^)]+\)\): ACVI {N}, `structured` {N}, "
                      rf"`variational` {N}, `soft` / `lstm` {N}, decoding K = 10 / K = 1 {N}",
                      [seq[k] for k in ("acvi", "structured", "variational", "lstm", "decode")], "seq2seq", src)
    bench.check_prose(rf"training {N}× and {N}× \(about at the target\), decoding {N}× and {N}×",
                      trf["train"] + trf["decode"], "transformer", src)
    bench.check_prose(rf"at the character shape: PAG {N}×, rPAG {N}×", [pag["pag"], pag["rpag"]], "PAG", src)
    bench.check_prose(rf"ACVI / soft training {N}×, K = 10 / K = 1 decoding {N}×", [summ["train"], summ["decode"]],
                      "summarization", src)
    bench.check_prose(rf"weights, 2026-11-30: {N}× and {N}×\)", [cap["train"], cap["decode"]], "captioning", src)
    bench.check_prose(rf"\(ii\) ({NN}-{NN})× / ({NN}-{NN})×, \(iii\) ({NN}-{NN})× / ({NN}-{NN})×, both ({NN}-{NN})× / "
                      rf"({NN}-{NN})×", [x for c in ("(ii)", "(iii)", "(ii+iii)") for x in conf[c]], "configurations", src)
    bench.check_prose(rf"parallel / step loop ({NN}-{NN})× \(i\), ({NN}-{NN})× \(ii\), ({NN}-{NN})× \(iii\), "
                      rf"({NN}-{NN})× both", [conf[f"parallel {c}"] for c in ("(i)", "(ii)", "(iii)", "(ii+iii)")],
                      "configurations without input feeding", src)
    bench.check_prose(rf"`transformer` in training is about at its 0\.9 target \({N}× and {N}×", trf["train"],
                      "introduction", src)
    bench.assert_ok()


# ----------------------------------------------------------------------------------- normalisers
def test_normalizers_page_tables_and_prose():
    """The normaliser comparison's page (docs/results/normalizers_2026-12-01) against the report it
    links (normalizers.json, made from the kept runs)."""
    page = RESULTS / "normalizers_2026-12-01"
    src = "normalizers_2026-12-01/normalizers.json"
    table = json.loads((page / "normalizers.json").read_text())["mt"]
    doc = Doc(page / "README.md")

    def ms(x, scale=1.0):
        return "–" if x is None else (f"{scale * x['mean']:.2f}" if x["n"] == 1
                                      else f"{scale * x['mean']:.2f} ± {scale * x['std']:.2f}")

    labels = {("softmax", False): "softmax", ("sparsemax", False): "sparsemax",
              ("entmax15", False): "1.5-entmax", ("csparsemax", False): "csparsemax",
              ("sparsemax", True): "softmax, decoded with sparsemax",
              ("entmax15", True): "softmax, decoded with 1.5-entmax"}
    rows = {labels[(r["normalizer"], r["decoded_only"])]: r for r in table["rows"]}
    ov, readme = Doc(OVERVIEW), Doc(README)
    trained = {k: v for k, v in rows.items() if not v["decoded_only"]}
    for d, caption, pick, want_rows in ((doc, "Tokenised BLEU, mean ± std over the seeds", None, rows),
                                        (doc, "Attention on test2016: exactly-zero weights", "stats", rows),
                                        (ov, "Tokenised BLEU, mean ± std over the seeds", None, trained)):
        found = [t for c, t in d.tables if caption in c]
        assert len(found) == 1, caption
        assert {r[0] for r in found[0][1:]} == set(want_rows), f"the rows of the table under {caption!r}"
        for label, r in want_rows.items():
            if pick is None:
                want = {1: ", ".join(map(str, r["seeds"])),
                        **{2 + i: ms(r["bleu"][s]["tok"]) for i, s in enumerate(table["splits"])}}
            else:
                want = {1: str(r["n"]), 2: ms(r["zero_fraction"], 100), 3: ms(r["rep_per_100"]),
                        4: ms(r["drop"]), 5: ms(r["drop_attn"])}
            row = [x for x in found[0][1:] if x[0] == label][0]
            for col, w in want.items():
                if norm(row[col]) != norm(w):
                    d.fail(f"{label!r} column {col} under {caption!r}", f"reads {row[col]!r}, {src} gives {w!r}")
    pm = {k: rows[k]["paired_mean"] for k in ("sparsemax", "1.5-entmax")}
    doc.check_prose(rf"Trained with sparsemax the model is {MS} / {MS} BLEU behind softmax on test2016 / "
                    rf"test2017, with 1\.5-entmax {MS} / {MS};",
                    [ms(pm["sparsemax"]["test2016"]).replace("-", ""), ms(pm["sparsemax"]["test2017"]).replace("-", ""),
                     ms(pm["1.5-entmax"]["test2016"]).replace("-", ""), ms(pm["1.5-entmax"]["test2017"]).replace("-", "")],
                    "the trained normalisers' deficits", src)
    sgn = lambda x: ms(x).replace("-", "−")
    doc.check_prose(rf"test2016 / test2017: sparsemax {MS} / {MS}, 1\.5-entmax {MS} / {MS}, csparsemax {MS} / {MS}\.", [sgn(rows[k]["paired_mean"][s]) for k in ("sparsemax", "1.5-entmax", "csparsemax")
                                         for s in ("test2016", "test2017")], "mean differences", src)
    drops = [rows[k]["paired_mean"]["drop"]["mean"] for k in ("sparsemax", "1.5-entmax", "csparsemax")]
    swaps = [rows[k]["paired_mean"]["drop"]["mean"] for k in ("softmax, decoded with sparsemax",
                                                               "softmax, decoded with 1.5-entmax")]
    doc.check_prose(rf"by the aligner's count \({N}, {N} and {N} points\), while the decode-time swaps drop "
                    rf"none more \({N}, {N}\)", [f"{d:+.1f}" for d in drops] + [f"{d:.1f}" for d in swaps],
                    "DROP differences", src)
    verdict = [v for v in table["verdicts"] if v["normalizer"] == "csparsemax"][0]
    doc.check_prose(rf"REP {MS} against softmax's {MS} over all its seeds, yet lower than softmax of the same seed "
                    rf"on both seeds \(by {N} and {N}\), DROP {MS} % against {MS} %",
                    [ms(rows["csparsemax"]["rep_per_100"]), ms(rows["softmax"]["rep_per_100"]),
                     *[f"{-e['rep_per_100']:.2f}" for e in rows["csparsemax"]["paired_seeds"]],
                     ms(rows["csparsemax"]["drop"]), ms(rows["softmax"]["drop"])], "csparsemax's target", src)
    assert all(e["rep_per_100"] < 0 for e in rows["csparsemax"]["paired_seeds"])
    assert verdict["drop_key"] == "drop" and verdict["status"] == "not met"
    rep_pm = rows["csparsemax"]["paired_mean"]["rep_per_100"]
    assert rep_pm["mean"] < 0
    ov.check_prose(rf"Constrained sparsemax repeats about as much as softmax \(REP {N} per 100 words against {N}; "
                   rf"{MS} less than softmax of the same seed\) but drops more words: Malaviya et al\.'s DROP, "
                   rf"counted with an aligner that sees no model \(eflomal\), is {N} % against softmax's {N} %",
                   [f"{verdict['rep_per_100'][1]:.2f}", f"{verdict['rep_per_100'][0]:.2f}",
                    ms(rep_pm).replace("-", ""),
                    f"{verdict['drop'][1]:.2f}", f"{verdict['drop'][0]:.2f}"], "csparsemax (overview)", src)
    delta = {k: rows[k]["paired_mean"]["test2016"] for k in ("sparsemax", "1.5-entmax")}
    readme.check_prose(rf"test2016 BLEU against softmax's {MS}: sparsemax {MS}, 1\.5-entmax {MS}, csparsemax {MS}: "
                       rf"the literature's parity not reproduced; csparsemax repeats about as much \(REP {MS} against "
                       rf"{MS}\) and drops more words \(DROP by an aligner {MS} % against {MS} %\)",
                       [ms(rows["softmax"]["bleu"]["test2016"]["tok"]), ms(delta["sparsemax"]).replace("-", "−"),
                        ms(delta["1.5-entmax"]).replace("-", "−"),
                        ms(rows["csparsemax"]["paired_mean"]["test2016"]).replace("-", "−"),
                        ms(rows["csparsemax"]["rep_per_100"]), ms(rows["softmax"]["rep_per_100"]),
                        ms(rows["csparsemax"]["drop"]), ms(rows["softmax"]["drop"])], "README's row", src)
    bench = Doc(BENCH)
    bench.check_prose(rf"Test2016 tokenised BLEU: softmax {MS}, sparsemax {MS}, 1\.5-entmax {MS}, csparsemax {MS};",
                      [ms(rows[k]["bleu"]["test2016"]["tok"]) for k in ("softmax", "sparsemax", "1.5-entmax", "csparsemax")],
                      "BENCHMARKS' normaliser figures", src)
    bench.check_prose(rf"csparsemax REP {N} per 100 words against softmax's {N}, DROP by an aligner \(eflomal\) "
                      rf"{N} % against {N} %",
                      [f"{verdict['rep_per_100'][1]:.2f}", f"{verdict['rep_per_100'][0]:.2f}",
                       f"{verdict['drop'][1]:.2f}", f"{verdict['drop'][0]:.2f}"], "BENCHMARKS' csparsemax", src)
    for d in (doc, ov, readme, bench):
        d.assert_ok()
