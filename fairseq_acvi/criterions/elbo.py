"""``elbo``: token cross-entropy + weighted latent-variable terms (docs/method.md §2.2, P 22, D 83).

    loss = Σ_t −log P(y_t | …)  +  Σ_name weight_name · term_name

The terms are whatever the model's context inference returns in ``net_output[1]["losses"]``
as ``{name: (sum, weight)}``: the ACVI KL (weight β with optional warm-up), the variational
attention KL and REINFORCE surrogate, the VED KL (annealed), the coverage loss (weight
``--coverage-weight``; docs/method.md §3.1). Each term is logged separately, per target token, in nats;
``loss`` and ``nll_loss`` are logged per token in base 2 like fairseq's cross-entropy.
Everything here is float32 (the model returns float32 log-probabilities).

``--label-smoothing ε`` (default 0: the loss above, unchanged) replaces each token's −log P(y_t)
by the cross-entropy against the smoothed target that puts 1 − ε on y_t and ε / (V − 1) on each
other token: (1 − ε) (−log P(y_t)) + ε/(V−1) Σ_{v≠y_t} (−log P(v)), the same loss as fairseq's
``label_smoothed_cross_entropy``. ``nll_loss`` stays the unsmoothed likelihood.

Logged besides: ``kl_weight``, the weight the schedule gives the ``kl`` term at this update (ACVI's
β after its delay and warm-up, VED's annealing), so a run's log shows where the schedule stands.

Choosing ``--criterion elbo`` makes ``--best-checkpoint-metric nll_loss`` the default: the best
checkpoint is the one with the best validation likelihood, not the best ``loss`` (which adds the
weighted terms, whose weights change along the schedule). ``--valid-mc-samples K`` scores
validation with K context samples instead of the model's ``--mc-samples`` (K = 0: the mean
context, K times cheaper).
"""
import contextlib
import math
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq import metrics, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass

from fairseq_acvi.modules.context import ContextInference, check_sample_count


@dataclass
class ELBOConfig(FairseqDataclass):
    coverage_weight: float = field(
        default=1.0, metadata={"help": "λ of the coverage loss λ Σ_i min(a_ti, k_ti) (docs/method.md §3.1)"})
    sentence_avg: bool = field(default=False, metadata={"help": "normalise by sentences, not tokens"})
    label_smoothing: float = field(
        default=0.0, metadata={"help": "ε of label smoothing (0 = off): 1 − ε on the gold token, "
                                       "ε/(V−1) on each other one, as label_smoothed_cross_entropy"})
    valid_mc_samples: Optional[int] = field(
        default=None, metadata={"help": "K, the context samples averaged when validation is scored "
                                        "(default: the model's --mc-samples; 0 = the mean context)"})


@contextlib.contextmanager
def mc_samples_of(model, k: Optional[int]):
    """Within the block, every context-inference module of ``model`` that draws samples at
    evaluation (ACVI: its ``mc_samples``) draws ``k``; unchanged when ``k`` is None."""
    modules = [] if k is None else [m for m in model.modules()
                                    if isinstance(m, ContextInference) and hasattr(m, "mc_samples")]
    saved = [m.mc_samples for m in modules]
    for m in modules:
        m.mc_samples = k
    try:
        yield
    finally:
        for m, v in zip(modules, saved):
            m.mc_samples = v


@register_criterion("elbo", dataclass=ELBOConfig)
class ELBOCriterion(FairseqCriterion):
    def __init__(self, task, coverage_weight=1.0, sentence_avg=False, label_smoothing=0.0,
                 valid_mc_samples=None):
        super().__init__(task)
        if not coverage_weight >= 0.0:
            raise ValueError(f"--coverage-weight must be ≥ 0, got {coverage_weight}")
        self.coverage_weight = coverage_weight
        self.sentence_avg = sentence_avg
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = label_smoothing
        self.valid_mc_samples = (None if valid_mc_samples is None else
                                 check_sample_count("--valid-mc-samples", valid_mc_samples))

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        # the best checkpoint by likelihood unless the user chooses another metric (module docstring)
        parser.set_defaults(best_checkpoint_metric="nll_loss")

    def forward(self, model, sample, reduce=True):
        with mc_samples_of(model, None if model.training else self.valid_mc_samples):
            return self._forward(model, sample)

    def _forward(self, model, sample):
        # the plugin's seq2seq models say what their forward needs from the gold target (the
        # pointer-generator scores the gold tokens itself, without its (B, T, V) output; the
        # variational context conditions on y); any other model gets the plain net_input
        inputs = getattr(model, "training_inputs", None)
        net_input = inputs(sample) if callable(inputs) else sample["net_input"]
        score_target = bool(net_input.get("score_target", False))
        net_output = model(**net_input)
        target = model.get_targets(sample, net_output)
        mask = target.ne(self.padding_idx)
        if score_target:
            if self.label_smoothing > 0:
                raise ValueError("--label-smoothing needs the full output distribution; this "
                                 f"model ({type(model).__name__}) scores the gold tokens only")
            tok_lp = net_output[1]["target_lprobs"].float()
        else:
            lprobs = model.get_normalized_probs(net_output, log_probs=True).float()
            tok_lp = lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        nll = -(tok_lp * mask).sum()
        loss = nll
        if self.label_smoothing > 0:
            eps, V = self.label_smoothing, lprobs.size(-1)
            others = -(lprobs.sum(-1) - tok_lp)                        # (B, T): Σ_{v≠y} −log P(v)
            loss = (1.0 - eps) * nll + eps / (V - 1) * (others * mask).sum()
        logging_output = {}
        ntokens = int(mask.sum())
        for name, (value, weight) in net_output[1].get("losses", {}).items():
            value = value.float()
            if weight is None:
                weight = self.coverage_weight if name == "coverage" else 1.0
            if weight != 0.0:
                loss = loss + weight * value
            logging_output[name] = value.detach()
            if name == "kl":    # weight × tokens: sums over batches and workers like the terms
                logging_output["kl_weight_tokens"] = float(weight) * ntokens
        if not torch.isfinite(loss):
            parts = ", ".join(f"{k}={float(v):.4g}" for k, v in logging_output.items())
            raise FloatingPointError(f"elbo: non-finite loss (nll={float(nll):.4g}, {parts}); "
                                     "refusing to train on it")
        sample_size = sample["target"].size(0) if self.sentence_avg else ntokens
        logging_output.update(
            loss=loss.detach(), nll_loss=nll.detach(), ntokens=ntokens,
            nsentences=sample["target"].size(0), sample_size=sample_size)
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(float(log.get(key, 0)) for log in logging_outputs)

        ntokens, sample_size = total("ntokens"), total("sample_size")
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1) / math.log(2),
                           sample_size, round=3)
        metrics.log_scalar("nll_loss", total("nll_loss") / max(ntokens, 1) / math.log(2),
                           ntokens, round=3)
        metrics.log_derived("ppl", lambda m: utils.get_perplexity(m["nll_loss"].avg))
        names = {k for log in logging_outputs for k in log} - {
            "loss", "nll_loss", "ntokens", "nsentences", "sample_size", "kl_weight_tokens"}
        for name in sorted(names):
            metrics.log_scalar(name, total(name) / max(ntokens, 1), ntokens, round=4)
        if any("kl_weight_tokens" in log for log in logging_outputs):
            metrics.log_scalar("kl_weight", total("kl_weight_tokens") / max(ntokens, 1), ntokens,
                               round=6)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
