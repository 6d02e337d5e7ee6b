"""Predictions and scores of a trained bAbI model: test accuracy per task (MemN2N; t-MEM-NN
with S = 1 and S = 10 posterior draws, docs/method.md §4.2, §5), t-MEM-NN's uncertainty over
its right and wrong answers (docs/uncertainty.md) and the validation score runs are selected by
(fairseq_acvi/babi_eval/selection.py)."""
from typing import Dict, Optional, Tuple

import torch

#: the t-MEM-NN prediction whose uncertainty the report gives (S posterior draws)
UNCERTAINTY_SAMPLES = 10
UNCERTAINTY_NAMES = ("entropy", "expected_entropy", "mutual_information")


@torch.no_grad()
def predict(model, dataset, samples: Optional[int] = None, batch: int = 500, seed: int = 0,
            with_log_probs: bool = False, with_uncertainty: bool = False):
    """Argmax answers (N,) over a BabiDataset; t-MEM-NN with ``samples`` draws (0 = mean).
    With ``with_log_probs`` also the log-probability of each true answer (N,), float32; with
    ``with_uncertainty`` also the model's per-question (N, 3) H[p̄], E_s H[p_s] and mutual
    information (nats; docs/uncertainty.md), last. The draws are the same with or without them.

    The posterior draws use their own seeded stream (``seed``) in a forked RNG, so evaluating
    between epochs leaves the training run's random stream (batch order, escort draws) as it was.
    """
    model.eval()
    if samples is not None:
        model.set_mc_samples(samples)
    preds, gold_lp, unc = [], [], []
    answers = dataset.tensors["answer"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for idx in torch.arange(len(dataset)).split(batch):
            s = dataset.batch(idx)
            lp, extra = model(**s["net_input"])
            lp = lp.float()
            preds.append(lp.argmax(-1))
            gold_lp.append(lp.gather(-1, answers[idx].view(-1, 1)).view(-1))
            if with_uncertainty:
                unc.append(extra["uncertainty"])
    out = [torch.cat(preds)]
    if with_log_probs:
        out.append(torch.cat(gold_lp))
    if with_uncertainty:
        out.append(torch.cat(unc))
    return out[0] if len(out) == 1 else tuple(out)


def uncertainty_by_task(pred, unc, answers, tasks) -> Dict[str, dict]:
    """task (str) and "all" -> {"right"/"wrong": {"n", "entropy", "expected_entropy",
    "mutual_information"}}: counts and mean uncertainties (nats) of the right and wrong answers.
    pred, answers, tasks (N,), unc (N, 3)."""
    ok = pred == answers
    out = {}
    for key, sel in [(str(int(t)), tasks == t) for t in tasks.unique()] + [("all", None)]:
        rows = {}
        for part, mask in (("right", ok), ("wrong", ~ok)):
            m = mask if sel is None else mask & sel
            n = int(m.sum())
            rows[part] = {"n": n, **{name: (float(unc[m, i].mean()) if n else None)
                                     for i, name in enumerate(UNCERTAINTY_NAMES)}}
        out[key] = rows
    return out


def validation_score(model, dataset, samples=None) -> Tuple[float, float]:
    """(accuracy %, NLL in nats per question) on a validation set: the selection signal.

    A 100-question validation set measures accuracy in steps of 1 %, so epochs and seeds tie
    often; the NLL of the true answers (the predictive distribution averaged over the ``samples``
    draws for t-MEM-NN) is continuous and breaks those ties
    (:func:`~fairseq_acvi.babi_eval.selection.selection_key`).
    """
    pred, gold_lp = predict(model, dataset, samples, with_log_probs=True)
    acc = 100.0 * (pred == dataset.tensors["answer"]).float().mean().item()
    return acc, -gold_lp.mean().item()


def per_task_accuracy(model, dataset, samples=None) -> Dict[int, float]:
    """task -> accuracy (%) of the model's answers on ``dataset`` (``samples``: t-MEM-NN's
    posterior draws, as :func:`predict`)."""
    pred = predict(model, dataset, samples)
    tasks = torch.tensor([ex.task for ex in dataset.examples])
    return accuracy_by_task(pred == dataset.tensors["answer"], tasks)


def accuracy_by_task(ok: torch.Tensor, tasks: torch.Tensor) -> Dict[int, float]:
    """task -> 100 · (right answers) / (questions), from integer counts: 950 of 1,000 is exactly
    95.0 (a float32 mean gave 94.9999988, which failed the ≥ 95 % pass)."""
    return {int(t): 100.0 * int(ok[tasks == t].sum()) / int((tasks == t).sum())
            for t in tasks.unique()}


def evaluate(model, arch: str, task) -> Tuple[Dict[str, Dict[int, float]], Optional[dict]]:
    """(column -> task -> test accuracy, t-MEM-NN's uncertainty of its S = 10 prediction by task
    and right / wrong answer (:func:`uncertainty_by_task`), None for MemN2N)."""
    te = task.datasets["test"]
    if arch == "memn2n":
        return {"memn2n": per_task_accuracy(model, te)}, None
    acc = {"t_memn2n_S1": per_task_accuracy(model, te, 1)}
    # the S = 10 column and its uncertainty from one pass (the same draws as per_task_accuracy)
    pred, unc = predict(model, te, UNCERTAINTY_SAMPLES, with_uncertainty=True)
    answers = te.tensors["answer"]
    tasks = torch.tensor([ex.task for ex in te.examples])
    acc[f"t_memn2n_S{UNCERTAINTY_SAMPLES}"] = accuracy_by_task(pred == answers, tasks)
    return acc, uncertainty_by_task(pred, unc, answers, tasks)
