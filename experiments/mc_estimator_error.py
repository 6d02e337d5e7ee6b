"""How far a K-sample predictive average is from its limit: iid against antithetic draws.

The decoder predicts p̄_K = (1/K) Σ_k p(· | c^(k)), an estimate of E_q[p(· | c)] (D 88). This
script reads the reference translations of a subset teacher-forced (no beam search) with one
LSTM-decoder checkpoint (ACVI) and compares, token by token, p̄_K for each K of ``--ks`` drawn
``iid`` and ``antithetic`` (``--mc-sampling``, docs/method.md §2.2), ``--repeats`` times each,
with a reference p̄ of ``--reference-k`` iid samples:

* ``gold_rmse``: root mean square error of log p̄_K(gold token) against the reference's, nats;
* ``tv``: mean total-variation distance ½ Σ_v |p̄_K(v) − p̄_ref(v)|;
* ``top1_agree``: the share of tokens whose argmax equals the reference's;
* ``mse_ratio``: antithetic's mean squared gold error over iid's at the same K (< 1: variance
  reduced; the reference's own error is common to both).

K = 0 (the mean context, no samples) is reported beside them: how far the mean context's
distribution is from the sample average's limit, a difference no K removes.

Usage (from the repository root)::

    python experiments/mc_estimator_error.py --data data-bin/multi30k_en_de \\
        --path runs/multi30k/en_de/acvi-vnorm-e20_seed2/checkpoint_best.pt \\
        --ks 2 10 20 --repeats 3 --reference-k 200 --max-sentences 300 --json OUT.json
"""
import argparse
import json
import sys
import time
from typing import Dict, List

import torch


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="data-bin folder the model was trained on")
    p.add_argument("--path", required=True, help="checkpoint of an ACVI model (LSTM decoder)")
    p.add_argument("--subset", default="valid")
    p.add_argument("--ks", type=int, nargs="+", default=[2, 10, 20])
    p.add_argument("--repeats", type=int, default=3, help="independent draws per K and sampling")
    p.add_argument("--reference-k", type=int, default=200)
    p.add_argument("--max-sentences", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write the results here")
    return p


def _set(ctx, k: int, antithetic: bool):
    ctx.mc_samples, ctx.antithetic = k, antithetic


def measure(model, task, args) -> Dict:
    ctx = getattr(model.decoder, "context", None)
    if ctx is None or not hasattr(ctx, "antithetic"):
        raise SystemExit(f"{args.path}: not an ACVI model with an LSTM decoder "
                         "(--context-inference acvi); nothing to sample")
    settings = [("K0", 0, False)] + [(f"K{k}-{s}", k, s == "antithetic")
                                     for k in args.ks for s in ("iid", "antithetic")]
    acc = {name: {"sq": 0.0, "tv": 0.0, "agree": 0.0, "n": 0} for name, _, _ in settings}
    dataset = task.dataset(args.subset)
    n = min(args.max_sentences, len(dataset))
    pad = task.target_dictionary.pad()
    model.eval()
    torch.manual_seed(args.seed)
    with torch.no_grad():
        for start in range(0, n, args.batch_size):
            sample = dataset.collater([dataset[i] for i in range(start, min(n, start + args.batch_size))])
            keep = sample["target"].ne(pad)
            gold = sample["target"][keep][:, None]

            def predict(k, antithetic):
                _set(ctx, k, antithetic)
                return model(**sample["net_input"])[0].float()[keep]          # (n_tok, V) log p̄

            ref = predict(args.reference_k, False)
            ref_p, ref_gold, ref_top = ref.exp(), ref.gather(-1, gold), ref.argmax(-1)
            for name, k, anti in settings:
                for _ in range(1 if k == 0 else args.repeats):
                    lp = predict(k, anti)
                    a = acc[name]
                    a["sq"] += float(((lp.gather(-1, gold) - ref_gold) ** 2).sum())
                    a["tv"] += float(0.5 * (lp.exp() - ref_p).abs().sum(-1).sum())
                    a["agree"] += float(lp.argmax(-1).eq(ref_top).sum())
                    a["n"] += int(keep.sum())
    out = {}
    for name, a in acc.items():
        out[name] = {"gold_rmse": (a["sq"] / a["n"]) ** 0.5, "gold_mse": a["sq"] / a["n"],
                     "tv": a["tv"] / a["n"], "top1_agree": a["agree"] / a["n"]}
    for k in args.ks:
        out[f"K{k}-antithetic"]["mse_ratio"] = (out[f"K{k}-antithetic"]["gold_mse"]
                                                / out[f"K{k}-iid"]["gold_mse"])
    return {"tokens": acc["K0"]["n"], "sentences": n, "settings": out}


def table(res: Dict, ks: List[int]) -> str:
    s = res["settings"]
    lines = ["| K | sampling | gold log p̄ RMSE (nats) | TV to reference | top-1 = reference | MSE ratio |",
             "|---|---|---|---|---|---|",
             f"| 0 | mean context | {s['K0']['gold_rmse']:.4f} | {s['K0']['tv']:.4f} | "
             f"{100 * s['K0']['top1_agree']:.2f}% | |"]
    for k in ks:
        for kind in ("iid", "antithetic"):
            r = s[f"K{k}-{kind}"]
            ratio = f"{r['mse_ratio']:.2f}" if "mse_ratio" in r else ""
            lines.append(f"| {k} | {kind} | {r['gold_rmse']:.4f} | {r['tv']:.4f} | "
                         f"{100 * r['top1_agree']:.2f}% | {ratio} |")
    return "\n".join(lines)


def main(argv=None):
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    import fairseq_acvi  # noqa: F401  (registers the models)
    from fairseq import checkpoint_utils
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [args.path], arg_overrides={"data": args.data})
    task.load_dataset(args.subset)
    t0 = time.perf_counter()
    res = measure(models[0], task, args)
    res.update(checkpoint=args.path, subset=args.subset, reference_k=args.reference_k,
               repeats=args.repeats, seed=args.seed, seconds=round(time.perf_counter() - t0, 1))
    print(f"{args.path}: {res['sentences']} sentences, {res['tokens']} tokens of {args.subset}, "
          f"reference K = {args.reference_k} (iid), {args.repeats} draws per setting")
    print(table(res, args.ks))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
