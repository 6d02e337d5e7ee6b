"""Tables 11 and 12 beside the dissertation's: the seed-by-seed view of a merged bAbI report.

Usage (repository root): python docs/results/babi_hindi_2026-11-28/tables_11_12.py VARIANT RESULTS_JSON
[ENGLISH_JSON ...] (VARIANT hn or shuffled; RESULTS_JSON the results_single.json that
`babi_report --merge` wrote over the ten seed folders; ENGLISH_JSON: results files of English
bAbI-1k under the same protocol, merged in order, for the last column; plain or gzipped, as kept
here). Prints Markdown: per task
and column, the dissertation's figure, the run chosen by validation (the report's protocol), how
many of the ten seeds reach 95 % on test, their median and their best test accuracy (the best is
chosen on test: an upper bound, never a result), the English run chosen the same way, and the
pass counts of each; test accuracies are read, never used to choose.
"""
import statistics
import sys

from fairseq_acvi.babi_eval.results import load_json
from fairseq_acvi.published import BABI_SINGLE_OTHER

COLUMNS = (("MemN2N", "memn2n", "memn2n", 0), ("t-MEM-NN S=1", "t_memn2n", "t_memn2n_S1", 1),
           ("t-MEM-NN S=10", "t_memn2n", "t_memn2n_S10", 2))
PASS = 95.0


def seed_tests(info: dict, column: str, task: int):
    """{seed: test accuracy} of every run of one model on one task."""
    return {r["seed"]: r["test"][column][str(task)] for r in info["runs"]}


def main(variant: str, path: str, english_paths=()) -> None:
    results = load_json(path)
    english = {}
    for p in english_paths:
        english.update(load_json(p))
    source, published = BABI_SINGLE_OTHER[variant]
    tasks = sorted({int(k.split("|")[1]) for k in results})
    head = "| task | " + " | ".join(
        f"{name}: {source} / chosen / seeds ≥ 95 / median / best" for name, *_ in COLUMNS) + " |"
    if english:
        head += " English, same protocol, chosen: " + " / ".join(n for n, *_ in COLUMNS) + " |"
    print(head)
    print("|---" * (len(COLUMNS) + 1 + bool(english)) + "|")
    count = {name: {"pub": 0, "chosen": 0, "best": 0, "en": 0} for name, *_ in COLUMNS}
    per_seed = {name: {} for name, *_ in COLUMNS}
    for t in tasks:
        cells = []
        for name, arch, column, i in COLUMNS:
            info = results[f"{arch}|{t}"]
            tests = seed_tests(info, column, t)
            chosen = info["test"][column][str(t)]
            pub = published[t][i]
            n_pass = sum(a >= PASS for a in tests.values())
            best = max(tests.values())
            cells.append(f"{pub} / {chosen:.1f} / {n_pass} of {len(tests)} / "
                         f"{statistics.median(tests.values()):.1f} / {best:.1f}")
            count[name]["pub"] += pub >= PASS
            count[name]["chosen"] += chosen >= PASS
            count[name]["best"] += best >= PASS
            for s, a in tests.items():
                per_seed[name][s] = per_seed[name].get(s, 0) + (a >= PASS)
        if english:
            en = [english[f"{arch}|{t}"]["test"][column][str(t)] for _, arch, column, _ in COLUMNS]
            for (name, *_), a in zip(COLUMNS, en):
                count[name]["en"] += a >= PASS
            cells.append(" / ".join(f"{a:.1f}" for a in en))
        print(f"| {t} | " + " | ".join(cells) + " |")
    print()
    print(f"| passed (≥ {PASS:.0f} %) | {source} | chosen by validation | best of the seeds on test "
          "(upper bound) | one seed: mean (min-max) |" + (" English, chosen |" if english else ""))
    print("|---|---|---|---|---|" + ("---|" if english else ""))
    for name, *_ in COLUMNS:
        c, seeds = count[name], list(per_seed[name].values())
        print(f"| {name} | {c['pub']} | {c['chosen']} | {c['best']} | "
              f"{statistics.mean(seeds):.1f} ({min(seeds)}-{max(seeds)}) |"
              + (f" {c['en']} |" if english else ""))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
