"""Token-level calibration and error detection on reference translations (docs/uncertainty.md).

Usage (from the repository root)::

    python -m fairseq_acvi.cli.calibration --data data-bin/multi30k_en_de --subset valid \\
        --model soft=runs/multi30k/en_de/soft-e20_seed2/checkpoint_best.pt \\
        --model acvi=runs/multi30k/en_de/acvi-b1e-4-d234-wu117-e20_seed2/checkpoint_best.pt \\
        --mc-samples 10 --out-dir runs/calibration/valid

Every model reads the reference translations of ``--subset`` teacher-forced (one pass, no beam
search): at every target position t it predicts p̄_t (the K-sample average for ACVI, D 88), and
the position counts as *right* when argmax p̄_t is the reference token. Per token the command keeps
the confidence max_v p̄_t(v), H[p̄_t], E_k H[p_t^(k)] and the mutual information I_t (the decoder's
``extra["uncertainty"]``, :mod:`fairseq_acvi.mc_prediction.uncertainty`). It reports per model:

* accuracy, NLL of the reference per token, mean confidence;
* ECE over ``--bins`` equal-width confidence bins, and the reliability diagram of all models
  (``reliability.png``);
* each model's ECE minus the first model's, with a 95 % interval over resamples of the sentences
  (``--bootstrap``, paired);
* AUROC of "this score flags a wrong token" for 1 − confidence, H[p̄] and I (I only for models
  that average samples; with one distribution per step I = 0 carries no signal), the AUROC of I
  within the deciles of H[p̄] (what I adds to the entropy), the mean I over right and over wrong
  tokens and Spearman's ρ between H[p̄] and I; ``mutual_information.png`` shows I for right and
  wrong tokens.

Ensembles and Monte-Carlo dropout (docs/uncertainty.md §6): ``--model NAME=a.pt:b.pt`` averages
the checkpoints' distributions in probability space (as ``fairseq-generate --path a.pt:b.pt``)
and ``--mc-dropout NAME=K`` gives the model NAME K dropout chains (``--mc-dropout-rate P``: their
dropout probability instead of the model's own); their numbers are over all members × context
samples, and the members' part of I (``members_mutual_information``) is kept beside them.

Outputs in ``--out-dir``: ``calibration.json`` (everything above, with the bins), ``calibration.md``
(the table) and the two PNGs (matplotlib, ``pip install -e .[eval]``); with ``--save-tokens`` the
per-token arrays (``tokens_NAME.npz``), from which ``--render-only`` redraws the table and PNGs.
"""
import argparse
import json
import os
import sys
from typing import Dict, List, Tuple

import numpy as np
import torch

from fairseq_acvi.calibration_eval.measure import ece_difference, summarize, token_statistics
from fairseq_acvi.calibration_eval.render import fmt, write_outputs
from fairseq_acvi.modules.seq2seq.mc_dropout import check_members, check_rate, wrap_mc_dropout


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="data-bin folder the models were trained on")
    p.add_argument("--subset", default="valid", help="fairseq subset name (valid, test, test1)")
    p.add_argument("--model", action="append", default=[], metavar="NAME=CHECKPOINT[:CHECKPOINT…]",
                   help="a model to evaluate (repeat the option for each); several checkpoints "
                        "joined by ':' are an ensemble")
    p.add_argument("--mc-samples", type=int, default=10, help="K for models that sample (ACVI)")
    p.add_argument("--mc-dropout", action="append", default=[], metavar="NAME=K",
                   help="Monte-Carlo dropout for the model NAME: K dropout chains averaged "
                        "(docs/uncertainty.md §6; repeat for each model)")
    p.add_argument("--mc-dropout-rate", type=float, default=None, metavar="P",
                   help="the dropout probability of the --mc-dropout chains (default: each "
                        "model's own)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    p.add_argument("--max-sentences", type=int, default=None, help="only the first N sentences")
    p.add_argument("--bins", type=int, default=15, help="confidence bins of the ECE")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                   help="sentence resamples for the interval of each model's ECE minus the first "
                        "model's")
    p.add_argument("--render-only", action="store_true",
                   help="redo calibration.md and the PNGs from --out-dir's calibration.json and "
                        "tokens_NAME.npz (written with --save-tokens); no model is run")
    p.add_argument("--save-tokens", action="store_true",
                   help="also write the per-token arrays of every model (tokens_NAME.npz)")
    return p


def parse_models(specs: List[str]) -> List[Tuple[str, str]]:
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--model takes NAME=CHECKPOINT, got {spec!r}")
        out.append((name, path))
    if len({n for n, _ in out}) != len(out):
        raise ValueError("--model names must be distinct")
    return out


def parse_mc_dropout(specs: List[str], names: List[str]) -> Dict[str, int]:
    """``--mc-dropout NAME=K`` options -> {NAME: K}, NAME one of the ``--model`` names."""
    out = {}
    for spec in specs:
        name, sep, k = spec.partition("=")
        if not sep or name not in names or not k.isdigit():
            raise ValueError(f"--mc-dropout takes NAME=K with NAME one of the --model names "
                             f"({', '.join(names)}) and K a whole number, got {spec!r}")
        out[name] = check_members(int(k))
    return out


def render_only(args):
    with open(os.path.join(args.out_dir, "calibration.json")) as f:
        report = json.load(f)
    args.data, args.subset, args.bins = report["data"], report["subset"], report["bins"]
    args.bootstrap = report.get("bootstrap_resamples", args.bootstrap)
    args.models = [(n, r["checkpoint"]) for n, r in report["models"].items()]
    stats = {}
    for name in report["models"]:
        with np.load(os.path.join(args.out_dir, f"tokens_{name}.npz")) as z:
            stats[name] = {k: z[k] for k in z.files}
    write_outputs(report["models"], stats, args)
    return report


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.render_only:
        return render_only(args)
    if not args.data or not args.model:
        raise SystemExit("--data and at least one --model are required (or --render-only)")
    args.models = parse_models(args.model)
    mc = parse_mc_dropout(args.mc_dropout, [n for n, _ in args.models])
    rate = check_rate(args.mc_dropout_rate)
    torch.set_num_threads(args.threads)
    import fairseq_acvi  # noqa: F401  (registers the models)
    from fairseq import checkpoint_utils

    os.makedirs(args.out_dir, exist_ok=True)
    results, stats = {}, {}
    for name, path in args.models:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            path.split(":"), arg_overrides={"data": args.data, "mc_samples": args.mc_samples})
        task.load_dataset(args.subset)
        # K where the context inference samples (ACVI), else 1 (one distribution per step), times
        # the members: the checkpoints and the dropout chains
        samples = len(models) * mc.get(name, 1) * (
            getattr(getattr(models[0].decoder, "context", None), "mc_samples", None) or 1)
        if name in mc:
            models = [wrap_mc_dropout(m, mc[name], rate) for m in models]
        torch.manual_seed(args.seed)
        stats[name] = token_statistics(models, task, args.subset, args.batch_size,
                                       args.max_sentences)
        results[name] = summarize(stats[name], args.bins, samples)
        if args.save_tokens:
            np.savez_compressed(os.path.join(args.out_dir, f"tokens_{name}.npz"), **stats[name])
        r = results[name]
        print(f"{name}: {r['tokens']} tokens, accuracy {r['accuracy']:.4f}, ECE {r['ece']:.4f}, "
              f"AUROC H {fmt(r['auroc_wrong']['entropy'])}, "
              f"AUROC I {fmt(r['auroc_wrong']['mutual_information'])}", flush=True)
    base = args.models[0][0]
    for name, _ in args.models[1:]:
        results[name]["ece_minus_first"] = ece_difference(stats[name], stats[base], args.bins,
                                                          args.bootstrap, args.seed)
    report = {"data": args.data, "subset": args.subset, "bins": args.bins, "seed": args.seed,
              "mc_dropout": mc, "mc_dropout_rate": rate,
              "max_sentences": args.max_sentences, "bootstrap_resamples": args.bootstrap,
              "models": {n: dict(results[n], checkpoint=p) for n, p in args.models}}
    with open(os.path.join(args.out_dir, "calibration.json"), "w") as f:
        json.dump(report, f, indent=1)
    write_outputs(results, stats, args)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
