#!/usr/bin/env python
"""Collect the runs of run_experiment.sh into this folder: per-run JSON (training curve, chosen epoch,
scores of every decode, per-clip test CIDEr), the decoded captions, and summary.json with the tables
(mean ± std over seeds) and the paired bootstraps of per-clip test CIDEr (fairseq_acvi/metrics/bootstrap.py).

    python docs/results/captioning_msrvtt_2026-11-28/analyse.py [RUNS_DIR] [DATA_DIR]

Per-clip CIDEr: pycocoevalcap's Cider over the 100 test clips with all 20 references each, the captions
normalised as fairseq_acvi.metrics.captioning does; its document frequencies come from the references
only, so a clip's score does not depend on the other clips' hypotheses and the corpus CIDEr is the mean
of the per-clip scores: a paired bootstrap over clips resamples exactly that mean.
"""
import json
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from fairseq_acvi.cli.eval_captioning import hypotheses_by_video  # noqa: E402
from fairseq_acvi.data.video_features import group_references, read_caption_file  # noqa: E402
from fairseq_acvi.metrics.bootstrap import paired_mean_bootstrap  # noqa: E402
from fairseq_acvi.metrics.captioning import _prepare  # noqa: E402

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
RUNS = Path(ARGS[0]) if len(ARGS) > 0 else REPO / "runs" / "captioning_msrvtt_2026-11-28"
DATA = Path(ARGS[1]) if len(ARGS) > 1 else REPO / "data-bin" / "msrvtt_1k_min3"
METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
MAIN = ("none", "soft", "acvi", "acvi-det")   # acvi-det: the deterministic control (run_experiment.sh)
ONE_SEED = ("structured", "variational", "ved")
BETA = ("acvi-beta1e-5", "acvi-beta1e-3")      # ACVI's β on validation, seed 1 (the default is 10⁻⁴)
TAGS = {"": "K=10 (standard decode)", "_k0": "K=0 (mean context)", "_k1": "K=1", "_zero": "context zeroed",
        "_shuffle": "annotations of another clip"}

_VALID = re.compile(r"\| valid \| epoch (\d+) \| valid on 'valid' subset \| loss ([\d.]+) \| nll_loss ([\d.]+)"
                    r".*\| num_updates (\d+)")
_TRAIN = re.compile(r"\| train \| epoch (\d+) \| loss ([\d.]+) \| nll_loss ([\d.]+).*\| num_updates (\d+).*"
                    r"train_wall (\d+) \| .*wall (\d+)")


def per_clip_cider(gen: Path, split: str):
    from pycocoevalcap.cider.cider import Cider
    caps = str(DATA / f"{split}.tsv")
    refs = group_references(read_caption_file(caps))
    hyps = hypotheses_by_video(str(gen), caps)
    gts, res = _prepare(hyps, refs)
    mean, per = Cider().compute_score(gts, res)
    return float(mean), {k: float(v) for k, v in zip(gts.keys(), per)}, hyps, refs


def curve(log: Path):
    valid, train = {}, {}
    for line in log.read_text(errors="replace").splitlines():
        m = _VALID.search(line)
        if m:
            valid[int(m.group(1))] = {"loss": float(m.group(2)), "nll_loss": float(m.group(3)),
                                      "num_updates": int(m.group(4))}
        m = _TRAIN.search(line)
        if m:
            train[int(m.group(1))] = {"loss": float(m.group(2)), "nll_loss": float(m.group(3)),
                                      "num_updates": int(m.group(4)), "train_wall_s": int(m.group(5)),
                                      "wall_s": int(m.group(6))}
    return train, valid


def collect(run_dir: Path):
    name = run_dir.name
    context, seed = name.rsplit("_seed", 1)
    train, valid = curve(run_dir / "train.log") if (run_dir / "train.log").is_file() else ({}, {})
    rec = {"name": name, "context": context, "seed": int(seed), "train": train, "valid": valid,
           "finished": False, "decodes": {}}
    if valid:
        best = min(valid, key=lambda e: valid[e]["loss"])
        rec["chosen_epoch"] = best
        rec["chosen_valid_loss"] = valid[best]["loss"]
    # fairseq's "train_wall" of an epoch's summary line is that epoch's training time (validation excluded)
    rec["train_wall_s_per_epoch"] = [train[e]["train_wall_s"] for e in sorted(train)]
    for tag, label in TAGS.items():
        sj = run_dir / f"scores{tag}.json"
        if not sj.is_file():
            continue
        dec = {"label": label, "scores": json.loads(sj.read_text())}
        gen = run_dir / f"gen_test{tag}.txt"
        if gen.is_file():
            cider, per, hyps, _ = per_clip_cider(gen, "test")
            dec["test_cider_recomputed"] = cider
            dec["test_cider_per_clip"] = per
            dec["test_distinct_captions"] = len(set(hyps.values()))
            out = HERE / "captions" / f"{name}{tag}_test.tsv"
            out.parent.mkdir(exist_ok=True)
            out.write_text("".join(f"{v}\t{hyps[v]}\n" for v in per), encoding="utf-8")
        genv = run_dir / f"gen_valid{tag}.txt"
        if genv.is_file() and tag == "":
            _, dec["valid_cider_per_clip"], hyps, _ = per_clip_cider(genv, "valid")
            (HERE / "captions" / f"{name}_valid.tsv").write_text(
                "".join(f"{v}\t{h}\n" for v, h in hyps.items()), encoding="utf-8")
        dec["test_cider_per_clip"] = dec.get("test_cider_per_clip")
        rec["decodes"][tag or "K10"] = dec
    rec["finished"] = "K10" in rec["decodes"]
    return rec


def mean_std(xs):
    if not xs:
        return None
    return {"mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else None, "n": len(xs),
            "values": xs}


def main():
    (HERE / "runs").mkdir(exist_ok=True)
    records = {}
    for d in sorted(p for p in RUNS.iterdir() if p.is_dir() and "_seed" in p.name):
        rec = collect(d)
        records[rec["name"]] = rec
        (HERE / "runs" / f"{rec['name']}.json").write_text(json.dumps(rec, indent=1))
    table = {}
    for c in MAIN + ONE_SEED + BETA:
        runs = [r for r in records.values() if r["context"] == c and r["finished"]]
        table[c] = {split: {m: mean_std([r["decodes"]["K10"]["scores"][split][m] for r in runs])
                            for m in METRICS} for split in ("valid", "test")}
        table[c]["seeds"] = sorted(r["seed"] for r in runs)
        table[c]["distinct_test_captions"] = [r["decodes"]["K10"].get("test_distinct_captions") for r in runs]
    pairs = [("none", "soft"), ("none", "acvi"), ("soft", "acvi"), ("soft", "acvi-det"),
             ("acvi-det", "acvi"), ("acvi", "acvi-beta1e-5"), ("acvi", "acvi-beta1e-3")]
    boots, boots_valid = {}, {}
    for base, other in pairs:
        for seed in (1, 2, 3):
            a, b = records.get(f"{base}_seed{seed}"), records.get(f"{other}_seed{seed}")
            if not (a and b and a["finished"] and b["finished"]):
                continue
            for split, into in (("test", boots), ("valid", boots_valid)):
                pa = a["decodes"]["K10"][f"{split}_cider_per_clip"]
                pb = b["decodes"]["K10"][f"{split}_cider_per_clip"]
                clips = sorted(pa)
                into[f"{other}|{base}_seed{seed}"] = paired_mean_bootstrap(
                    [pa[k] for k in clips], [pb[k] for k in clips], n_resamples=1000, level=0.95, seed=0)
    extras = {}
    for c in ("acvi", "soft"):
        r = records.get(f"{c}_seed1")
        if r:
            extras[c] = {tag: {"label": d["label"], "test": d["scores"].get("test"),
                               "distinct": d.get("test_distinct_captions")}
                         for tag, d in r["decodes"].items()}
            base = r["decodes"].get("K10")
            for tag, d in r["decodes"].items():
                if tag != "K10" and base and d.get("test_cider_per_clip"):
                    pa, pb = base["test_cider_per_clip"], d["test_cider_per_clip"]
                    clips = sorted(pa)
                    extras[c][tag]["vs_K10"] = paired_mean_bootstrap(
                        [pa[k] for k in clips], [pb[k] for k in clips], n_resamples=1000, level=0.95, seed=0)
    summary = {"table": table, "bootstrap_test_cider": boots, "bootstrap_valid_cider": boots_valid,
               "decodes_seed1": extras,
               "runs": {n: {"finished": r["finished"], "chosen_epoch": r.get("chosen_epoch"),
                            "epochs_run": len(r["valid"]),
                            "updates": max((v["num_updates"] for v in r["valid"].values()), default=0),
                            "train_wall_s_per_epoch": r["train_wall_s_per_epoch"]}
                        for n, r in records.items()}}
    (HERE / "summary.json").write_text(json.dumps(summary, indent=1))
    for n, r in summary["runs"].items():
        print(n, r)
    for c, t in table.items():
        if t["seeds"]:
            print(c, t["seeds"], {m: (round(t["test"][m]["mean"], 4), t["test"][m]["std"] and round(t["test"][m]["std"], 4))
                                  for m in METRICS})
    for k, v in boots.items():
        print(k, {x: round(v[x], 4) for x in ("base", "other", "delta", "low", "high", "p_other_better")})
    for c, e in extras.items():
        for tag, d in e.items():
            print(c, tag, d["label"], d["test"], {x: round(d["vs_K10"][x], 4) for x in ("delta", "low", "high")}
                  if "vs_K10" in d else "")


if __name__ == "__main__" and "--markdown" not in sys.argv:
    main()


def fmt(ms, digits=3):
    if ms is None:
        return "–"
    if ms["std"] is None:
        return f"{ms['mean']:.{digits}f}"
    return f"{ms['mean']:.{digits}f} ± {ms['std']:.{digits}f}"


def markdown():
    """tables.md: the page's tables from summary.json."""
    s = json.loads((HERE / "summary.json").read_text())
    out = ["| variant | seeds | " + " | ".join(f"test {m}" for m in METRICS)
           + " | valid CIDEr | distinct test captions (of 100) |",
           "|---|---|" + "---|" * (len(METRICS) + 2)]
    for c, t in s["table"].items():
        if not t["seeds"]:
            continue
        out.append(f"| `{c}` | {', '.join(map(str, t['seeds']))} | "
                   + " | ".join(fmt(t["test"][m]) for m in METRICS) + f" | {fmt(t['valid']['CIDEr'])} | "
                   + ", ".join(map(str, t["distinct_test_captions"])) + " |")
    out += ["", "| comparison (test CIDEr, per clip) | seed | base | other | difference | 95 % interval | P(other better) |",
            "|---|---|---|---|---|---|---|"]
    for k, v in s["bootstrap_test_cider"].items():
        pair, seed = k.rsplit("_seed", 1)
        other, base = pair.split("|")
        out.append(f"| `{other}` − `{base}` | {seed} | {v['base']:.3f} | {v['other']:.3f} | {v['delta']:+.3f} | "
                   f"[{v['low']:+.3f}, {v['high']:+.3f}] | {v['p_other_better']:.3f} |")
    out += ["", "| comparison (validation CIDEr, per clip) | seed | base | other | difference | 95 % interval | "
            "P(other better) |", "|---|---|---|---|---|---|---|"]
    for k, v in s["bootstrap_valid_cider"].items():
        pair, seed = k.rsplit("_seed", 1)
        other, base = pair.split("|")
        out.append(f"| `{other}` − `{base}` | {seed} | {v['base']:.3f} | {v['other']:.3f} | {v['delta']:+.3f} | "
                   f"[{v['low']:+.3f}, {v['high']:+.3f}] | {v['p_other_better']:.3f} |")
    out += ["", "| model (seed 1) | decoding | " + " | ".join(f"test {m}" for m in METRICS)
            + " | distinct | CIDEr vs K=10 [95 %] |", "|---|---|" + "---|" * (len(METRICS) + 2)]
    for c, e in s["decodes_seed1"].items():
        for tag, d in e.items():
            t = d["test"] or {}
            vs = d.get("vs_K10")
            out.append(f"| `{c}` | {d['label']} | " + " | ".join(f"{t[m]:.3f}" if m in t else "–" for m in METRICS)
                       + f" | {d['distinct']}"
                       + (f" | {vs['delta']:+.3f} [{vs['low']:+.3f}, {vs['high']:+.3f}] |" if vs else " | |"))
    out += ["", "| run | finished | epochs | updates | chosen epoch (valid loss) | train seconds per epoch |",
            "|---|---|---|---|---|---|"]
    for n, r in s["runs"].items():
        out.append(f"| {n} | {'yes' if r['finished'] else 'no'} | {r['epochs_run']} | {r['updates']} | "
                   f"{r['chosen_epoch']} | {', '.join(map(str, r['train_wall_s_per_epoch']))} |")
    (HERE / "tables.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__" and "--markdown" in sys.argv:
    markdown()
