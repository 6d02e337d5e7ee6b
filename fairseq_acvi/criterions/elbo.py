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
"""
import math
from dataclasses import dataclass, field

import torch
from fairseq import metrics, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass


@dataclass
class ELBOConfig(FairseqDataclass):
    coverage_weight: float = field(
        default=1.0, metadata={"help": "λ of the coverage loss λ Σ_i min(a_ti, k_ti) (docs/method.md §3.1)"})
    sentence_avg: bool = field(default=False, metadata={"help": "normalise by sentences, not tokens"})
    label_smoothing: float = field(
        default=0.0, metadata={"help": "ε of label smoothing (0 = off): 1 − ε on the gold token, "
                                       "ε/(V−1) on each other one, as label_smoothed_cross_entropy"})


@register_criterion("elbo", dataclass=ELBOConfig)
class ELBOCriterion(FairseqCriterion):
    def __init__(self, task, coverage_weight=1.0, sentence_avg=False, label_smoothing=0.0):
        super().__init__(task)
        self.coverage_weight = coverage_weight
        self.sentence_avg = sentence_avg
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = label_smoothing

    def forward(self, model, sample, reduce=True):
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
        for name, (value, weight) in net_output[1].get("losses", {}).items():
            value = value.float()
            if weight is None:
                weight = self.coverage_weight if name == "coverage" else 1.0
            if weight != 0.0:
                loss = loss + weight * value
            logging_output[name] = value.detach()
        if not torch.isfinite(loss):
            parts = ", ".join(f"{k}={float(v):.4g}" for k, v in logging_output.items())
            raise FloatingPointError(f"elbo: non-finite loss (nll={float(nll):.4g}, {parts}); "
                                     "refusing to train on it")
        ntokens = int(mask.sum())
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
            "loss", "nll_loss", "ntokens", "nsentences", "sample_size"}
        for name in sorted(names):
            metrics.log_scalar(name, total(name) / max(ntokens, 1), ntokens, round=4)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
