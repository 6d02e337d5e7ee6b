#!/usr/bin/env python
"""Score See et al.'s (2017) published outputs on the shared CNN/DM sample with our evaluation.

    python experiments/eval_see_outputs.py [--data SAMPLE] [--meteor exact,full] [--bootstrap 1000] [--json OUT]

``--data``: the CNN/DM sample folder (``realsumm_ptrgen/``, ``summeval/``); default
``$ACVI_DATA/cnn_dm_sample`` (``ACVI_DATA``: the data root holding ``cnn_dm_sample/``), an error when
neither is given.

Systems: ``realsumm_ptrgen/out_{baseline,pointer_gen,pointer_gen_cov}.txt`` against ``ref.txt``
(100 test articles, sources ``src.txt``), plus SummEval's M8 (See et al.'s pointer-generator) on
another 100 test articles (``summeval/test.pointer_generator_M8.txt`` against the original
reference ``test.target``). Metrics as ``python -m fairseq_acvi.cli.eval_summarization``;
the OOV-adoption rate needs the 50k training vocabulary, which the sample does not hold, so it
is not computed. The paired bootstrap gives, for consecutive systems on the same 100 articles,
the share of resamples (of the articles) in which the later system scores higher.
Prints a markdown table next to See et al.'s Table 1 (full test set, 11,490 articles).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path


from fairseq_acvi.data.text_lines import read_aligned
from fairseq_acvi.metrics.meteor import meteor, meteor_resources
from fairseq_acvi.metrics.novelty import novelty
from fairseq_acvi.metrics.rouge import rouge_per_pair

# See et al. 2017, Table 1 (= dissertation Table 20 rows), R-L, METEOR exact, full
PAPER = {
    "baseline": (31.33, 11.81, 28.83, 12.03, 13.20),
    "pointer_gen": (36.44, 15.66, 33.42, 15.35, 16.65),
    "pointer_gen_cov": (39.53, 17.28, 36.38, 17.32, 18.72),
}
SYSTEMS = [
    ("baseline", "realsumm_ptrgen", "out_baseline.txt", "ref.txt", "src.txt"),
    ("pointer_gen", "realsumm_ptrgen", "out_pointer_gen.txt", "ref.txt", "src.txt"),
    ("pointer_gen_cov", "realsumm_ptrgen", "out_pointer_gen_cov.txt", "ref.txt", "src.txt"),
    ("pointer_gen (SummEval M8)", "summeval", "test.pointer_generator_M8.txt", "test.target",
     "test.source"),
]
KEYS = ("rouge1", "rouge2", "rougeLsum")
MODES_ALL = ("exact", "full")


def paired_bootstrap(a, b, n: int, seed: int = 0) -> float:
    """Share of resamples of the pairs in which mean(b) > mean(a)."""
    rng = random.Random(seed)
    m = len(a)
    wins = 0
    for _ in range(n):
        idx = [rng.randrange(m) for _ in range(m)]
        wins += sum(b[i] - a[i] for i in idx) > 0
    return wins / n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None,
                   help="the CNN/DM sample folder (default: $ACVI_DATA/cnn_dm_sample)")
    p.add_argument("--meteor", default="exact,full")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.data is None:
        if not os.environ.get("ACVI_DATA"):
            p.error("no sample folder: pass --data <folder holding realsumm_ptrgen/ and summeval/> or set "
                    "ACVI_DATA=<data root holding cnn_dm_sample/> (e.g. ACVI_DATA=../shared/data)")
        args.data = str(Path(os.environ["ACVI_DATA"]) / "cnn_dm_sample")
    modes = [] if args.meteor == "none" else args.meteor.split(",")
    data = Path(args.data)
    print(f"METEOR resources: {meteor_resources()}", file=sys.stderr)
    results, per_pair = {}, {}
    for name, sub, hyp, ref, src in SYSTEMS:
        t0 = time.time()
        d = read_aligned({"hyp": str(data / sub / hyp), "ref": str(data / sub / ref),
                          "src": str(data / sub / src)})
        per = rouge_per_pair(d["hyp"], d["ref"])
        per_pair[name] = per
        res = {"n": len(d["hyp"])}
        res.update({k: sum(v) / len(v) for k, v in per.items()})
        for mode in modes:
            res[f"meteor_{mode}"] = meteor(d["hyp"], d["ref"], mode=mode)["score"]
        nov = novelty(d["hyp"], d["src"])
        res.update({"novel_rate": nov["novel_rate"], "unk_rate": nov["unk_rate"]})
        results[name] = res
        print(f"scored {name} in {time.time() - t0:.1f} s", file=sys.stderr)

    print("| system (sample) | R-1 | R-2 | R-L | METEOR exact | METEOR full | novel % | UNK % "
          "| paper R-1/R-2/R-L; METEOR exact/full |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, _, _, _, _ in SYSTEMS:
        r = results[name]
        paper = PAPER.get(name)  # M8: SummEval does not say which pointer-generator variant
        ptxt = (f"{paper[0]}/{paper[1]}/{paper[2]}; {paper[3]}/{paper[4]}" if paper else "")
        cells = [f"{r[k]:.2f}" for k in KEYS]
        cells += [f"{r[f'meteor_{m}']:.2f}" if f"meteor_{m}" in r else "-" for m in MODES_ALL]
        cells += [f"{r['novel_rate']:.3f}", f"{r['unk_rate']:.2f}"]
        print(f"| {name} (n={r['n']}) | " + " | ".join(cells) + f" | {ptxt} |")
    boot = {}
    if args.bootstrap > 0:
        print("\nPaired bootstrap over the 100 REALSumm articles "
              f"({args.bootstrap} resamples): P(later system > earlier)")
        print("| comparison | R-1 | R-2 | R-L |\n|---|---:|---:|---:|")
        for a, b in (("baseline", "pointer_gen"), ("pointer_gen", "pointer_gen_cov")):
            boot[f"{b}>{a}"] = {k: paired_bootstrap(per_pair[a][k], per_pair[b][k],
                                                    args.bootstrap) for k in KEYS}
            print(f"| {b} > {a} | " + " | ".join(f"{boot[f'{b}>{a}'][k]:.3f}" for k in KEYS)
                  + " |")
    order_ok = all(results["baseline"][k] < results["pointer_gen"][k]
                   < results["pointer_gen_cov"][k]
                   for k in list(KEYS) + [f"meteor_{m}" for m in modes])
    print(f"\norder baseline < pointer_gen < pointer_gen_cov on every metric: {order_ok}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"results": results, "bootstrap": boot, "paper": PAPER,
                       "order_ok": order_ok}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
