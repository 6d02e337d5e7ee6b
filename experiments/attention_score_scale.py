"""How hard each checkpoint's attention is, teacher-forced on a subset, and how much gradient a fresh
model's scorer gets under each normaliser (docs/method.md §3.5; the statistics of
:mod:`fairseq_acvi.metrics.score_scale`). The diagnosis of the sparse normalisers' training on
Multi30K (docs/results/sparse_attention_training_2026-11-29).

    python experiments/attention_score_scale.py --data data-bin/multi30k_en_de \\
        --path runs/x/checkpoint_best.pt [--path ...] [--fresh] [--grad-at-init] \\
        --subset valid --max-sentences 300 --out scale.json

Per checkpoint it records the attention scores of every real target step of the first
``--max-sentences`` sentences of ``--subset`` (reference prefixes, eval mode) and summarises them.
``--fresh`` does the same for a model built from the checkpoint's configuration with
``--seed`` (its initialisation). ``--grad-at-init`` builds that fresh model, takes ``--batches``
training batches (``--max-tokens``) and reports, for softmax, sparsemax and 1.5-entmax on the same
weights and batches, the mean gradient norm of the scorer's parameters (names containing
``scorer``) and of all parameters, for the token-mean negative log-likelihood.
"""
import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Dict, List

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_acvi.data.text_lines import write_bytes_whole  # noqa: E402
from fairseq_acvi.metrics.score_scale import summarize  # noqa: E402


def _load(path: str, data: str):
    from fairseq import checkpoint_utils, utils
    utils.import_user_module(argparse.Namespace(user_dir=str(REPO / "fairseq_acvi")))
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": data})
    return models[0], cfg, task


def _normalizers(model) -> List[torch.nn.Module]:
    from fairseq_acvi.modules.context.normalizers import AttentionNormalizer
    found = [m for m in model.modules() if isinstance(m, AttentionNormalizer)]
    if not found:
        raise SystemExit("error: the model has no attention normaliser (an attentional model is needed)")
    return found


def _batch_rows(captured, target_mask):
    """One batch's captured scores -> (rows, N) scores and mask of its real target steps: either
    one (B, T, N) call (parallel over steps) or T calls of (B, N) (the step loop)."""
    if len(captured) == 1 and captured[0][0].dim() == 3:
        scores, pad = captured[0]
    elif all(s.dim() == 2 for s, _ in captured) and len(captured) == target_mask.size(1):
        scores, pad = torch.stack([s for s, _ in captured], dim=1), captured[0][1]
    else:
        raise SystemExit(f"error: {len(captured)} normaliser calls for {target_mask.size(1)} target "
                         "steps: one attention per step is expected")
    B, T, N = scores.shape
    return scores[target_mask], pad.unsqueeze(1).expand(B, T, N)[target_mask]


def score_summary(model, task, subset: str, max_sentences: int) -> Dict[str, float]:
    """Teacher-forced scores of the real target steps of the first ``max_sentences`` of ``subset``,
    summarised."""
    captured, rows = [], []

    def hook(module, args):
        scores, mem = args[0], args[1]
        captured.append((scores.detach().float().clone(), mem.pad_mask.detach().clone()))

    handles = [m.register_forward_pre_hook(hook) for m in _normalizers(model)]
    task.load_dataset(subset)
    itr = task.get_batch_iterator(task.dataset(subset), max_sentences=50).next_epoch_itr(shuffle=False)
    pad = task.target_dictionary.pad()
    model.eval()
    seen = 0
    try:
        with torch.no_grad():
            for batch in itr:
                captured.clear()
                model(**batch["net_input"])
                rows.append(_batch_rows(captured, batch["target"].ne(pad)))
                seen += batch["nsentences"]
                if seen >= max_sentences:
                    break
    finally:
        for h in handles:
            h.remove()
    out = summarize(rows)
    out["sentences"] = seen
    return out


def grad_at_init(model, task, batches: int, max_tokens: int, seed: int) -> Dict[str, object]:
    """Mean scorer / total gradient norms per normaliser on the same fresh weights and batches."""
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=max_tokens, seed=seed).next_epoch_itr(shuffle=True)
    data = list(itertools.islice(itr, batches))   # fewer when the training set is smaller
    pad = task.target_dictionary.pad()
    model.train()
    out: Dict[str, Dict[str, float]] = {}
    for name in ("softmax", "sparsemax", "entmax15"):
        for m in _normalizers(model):
            m.name = name
        scorer, total = [], []
        for batch in data:
            model.zero_grad()
            torch.manual_seed(seed)  # the same dropout masks for every normaliser
            lprobs = model.get_normalized_probs(model(**batch["net_input"]), log_probs=True)
            loss = torch.nn.functional.nll_loss(lprobs.view(-1, lprobs.size(-1)), batch["target"].view(-1),
                                                ignore_index=pad, reduction="sum") / batch["ntokens"]
            loss.backward()
            grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            scorer.append(sum(float(g.norm()) ** 2 for n, g in grads.items() if "scorer" in n) ** 0.5)
            total.append(sum(float(g.norm()) ** 2 for g in grads.values()) ** 0.5)
        out[name] = dict(scorer_grad_norm=sum(scorer) / len(scorer), total_grad_norm=sum(total) / len(total))
    for name in ("sparsemax", "entmax15"):
        out[name]["scorer_ratio_to_softmax"] = out[name]["scorer_grad_norm"] / out["softmax"]["scorer_grad_norm"]
    out["batches"] = len(data)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--path", action="append", required=True, help="a checkpoint (repeatable)")
    p.add_argument("--subset", default="valid")
    p.add_argument("--max-sentences", type=int, default=300)
    p.add_argument("--fresh", action="store_true", help="also summarise a fresh model of the first checkpoint's configuration")
    p.add_argument("--grad-at-init", action="store_true")
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="write the JSON here")
    args = p.parse_args(argv)
    result: Dict[str, object] = {"subset": args.subset, "checkpoints": {}}
    for path in args.path:
        model, _, task = _load(path, args.data)
        result["checkpoints"][path] = score_summary(model, task, args.subset, args.max_sentences)
    if args.fresh or args.grad_at_init:
        _, cfg, task = _load(args.path[0], args.data)
        torch.manual_seed(args.seed)
        fresh = task.build_model(cfg.model)
        if args.fresh:
            result["fresh"] = score_summary(fresh, task, args.subset, args.max_sentences)
        if args.grad_at_init:
            result["grad_at_init"] = grad_at_init(fresh, task, args.batches, args.max_tokens, args.seed)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        write_bytes_whole(args.out, (text + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
