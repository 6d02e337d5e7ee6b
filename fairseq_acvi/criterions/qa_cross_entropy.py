"""Criterion ``qa_cross_entropy``: answer NLL for memory networks, logging accuracy (docs/method.md §4.1).

The model returns (log_probs (B, V) float32, extra); loss = Σ_b −log p(a_b), sample_size = B.
Logged: loss and nll_loss (base 2, per question, as fairseq does), accuracy (% of argmax = answer);
in evaluation (fairseq-validate, validation in fairseq-train) also the mean predictive entropy
H[p̄], expected entropy E_s H[p_s] and mutual information I over the right and the wrong answers
(``H_right``, ``EH_right``, ``MI_right``, ``H_wrong``, …; nats per question; docs/uncertainty.md).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass


def answer_nll_and_correct(model, sample, **forward_args):
    """Forward once: (Σ NLL, #correct, extra) for a bAbI sample; NLL in float32 (nats).
    ``extra["right"]`` (B,) bool marks the questions answered right; ``forward_args`` go to the
    model's forward (e.g. ``divergence``, :class:`~fairseq_acvi.models.memn2n.MemN2NModel`)."""
    lprobs, extra = model(**sample["net_input"], **forward_args)
    target = sample["target"]
    lprobs = lprobs.float()
    nll = F.nll_loss(lprobs, target, reduction="sum")
    right = lprobs.argmax(-1) == target
    extra = dict(extra, right=right)
    return nll, right.sum(), extra


#: the per-question uncertainty the model reports in evaluation (docs/uncertainty.md), logged as
#: sums over right and wrong answers and reduced to means per question: H_right, MI_wrong, …
UNCERTAINTY_LOGS = (("H", 0), ("EH", 1), ("MI", 2))


def uncertainty_logs(extra) -> dict:
    """Sums of H[p̄], E H and I (nats) over the right and the wrong answers of a batch, for the
    logging output; {} when the model reported none (training)."""
    u = extra.get("uncertainty")
    if u is None:
        return {}
    right = extra["right"]
    out = {}
    for name, col in UNCERTAINTY_LOGS:
        out[f"{name}_right"] = log_value(u[right, col].sum())
        out[f"{name}_wrong"] = log_value(u[~right, col].sum())
    return out


def log_value(t: torch.Tensor):
    """A logging-output value: a Python float on the CPU (fairseq then aggregates plain numbers,
    not tensors), the detached tensor elsewhere (no device sync per update)."""
    return t.item() if t.device.type == "cpu" else t.detach()


def reduce_qa_metrics(logging_outputs):
    """Aggregate loss/nll (base 2 per question) and accuracy over logging outputs."""
    n = sum(log.get("nsentences", 0) for log in logging_outputs)
    sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
    loss = sum(log.get("loss", 0) for log in logging_outputs)
    nll = sum(log.get("nll_loss", 0) for log in logging_outputs)
    correct = sum(log.get("ncorrect", 0) for log in logging_outputs)
    metrics.log_scalar("loss", loss / max(sample_size, 1) / math.log(2), sample_size, round=4)
    metrics.log_scalar("nll_loss", nll / max(n, 1) / math.log(2), n, round=4)
    metrics.log_scalar("accuracy", 100.0 * correct / max(n, 1), n, round=2)
    if any("MI_right" in log for log in logging_outputs):
        # means per question over right / wrong answers (nats; docs/uncertainty.md)
        for part, count in (("right", correct), ("wrong", n - correct)):
            if not count:
                continue
            for name, _ in UNCERTAINTY_LOGS:
                key = f"{name}_{part}"
                total = sum(log.get(key, 0) for log in logging_outputs)
                metrics.log_scalar(key, total / count, count, round=4)


@dataclass
class QACrossEntropyConfig(FairseqDataclass):
    pass


@register_criterion("qa_cross_entropy", dataclass=QACrossEntropyConfig)
class QACrossEntropyCriterion(FairseqCriterion):
    """Cross-entropy of the one-token answer; logs accuracy."""

    def forward(self, model, sample, reduce=True):
        nll, correct, extra = answer_nll_and_correct(model, sample)
        n = sample["target"].numel()
        nll_v = log_value(nll)
        logging_output = {"loss": nll_v, "nll_loss": nll_v, "ncorrect": log_value(correct),
                          "nsentences": n, "ntokens": n, "sample_size": n}
        logging_output.update(uncertainty_logs(extra))
        return nll, n, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        reduce_qa_metrics(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
