"""Criterion ``t_divergence``: the t-MEM-NN objective (docs/method.md §4.2; D 54-55).

Per minibatch of B questions from a training set of N:

    loss = Σ_b −log p(a_b | W, Θ_s)  +  β · (B / N) · Σ_{Θ ∈ A,B,C} D_t(q(Θ) ‖ t(0, I, ν))

with Θ_s one escort draw (the model draws it in training mode), so that loss / B is the expected
NLL per question plus the divergence per training example. β = ``--divergence-weight`` is 1 in
the paper's objective; a smaller β tempers the prior (an option, not part of D 54-55). ``--t-divergence`` picks the form
(seed | exact | tied, see :mod:`fairseq_acvi.modules.student_t`); the prior ν is the model's
``--prior-dof``. The divergence is computed in float32 (exact: float64) whatever the model dtype.
In evaluation the NLL is that of the S-sample predictive distribution.

Logged: loss, nll_loss (base 2 per question), divergence (nats, whole-model D_t, unscaled),
accuracy (%), and nu_<name> for each posterior (nu_A, nu_B, nu_C with layer-wise tying); in
evaluation the uncertainty of the S-draw prediction over right and wrong answers (H_right, MI_wrong,
…; :mod:`fairseq_acvi.criterions.qa_cross_entropy`).
"""
import logging
from dataclasses import dataclass, field

import torch
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from fairseq_acvi.criterions.qa_cross_entropy import (answer_nll_and_correct, log_value,
                                                     reduce_qa_metrics, uncertainty_logs)
from fairseq_acvi.modules.student_t import DIVERGENCES

logger = logging.getLogger(__name__)

#: ν below which ``--t-divergence seed`` is taken to have collapsed (one warning per run)
NU_COLLAPSED = 0.01


@dataclass
class TDivergenceConfig(FairseqDataclass):
    t_divergence: ChoiceEnum(list(DIVERGENCES)) = field(default="seed", metadata={
        "help": "seed: (D 56) verbatim; exact: the definition by quadrature; tied: prior ν = ν_Θ"})
    divergence_weight: float = field(default=1.0, metadata={
        "help": "β in NLL + β·(B/N)·D_t (1 = the objective of D 54-55; < 1 tempers the prior, "
                "which with 1k examples and σ₀ = 0.01 outweighs the data term)"})


@register_criterion("t_divergence", dataclass=TDivergenceConfig)
class TDivergenceCriterion(FairseqCriterion):
    def __init__(self, task, t_divergence="seed", divergence_weight=1.0):
        super().__init__(task)
        self.mode = str(t_divergence)
        self.beta = float(divergence_weight)
        if not self.beta >= 0:
            raise ValueError(f"--divergence-weight must be >= 0, got {divergence_weight!r}")
        if self.mode not in DIVERGENCES:
            raise ValueError(f"--t-divergence must be one of {DIVERGENCES}, got {self.mode!r}")
        self.warned_collapse = False

    def forward(self, model, sample, reduce=True):
        n = sample["target"].numel()
        train_size = getattr(self.task, "train_size", None)
        if not train_size:
            raise ValueError("t_divergence: the task does not report its training-set size")
        weight = self.beta * n / train_size
        # the model returns weight·D_t (computed with a training forward's draw in one autograd
        # node: StudentTMatrices.sample_with_divergence) and the fitted ν
        nll, correct, extra = answer_nll_and_correct(model, sample,
                                                     divergence=(self.mode, weight))
        div = extra["divergence"]
        loss = nll + div.weighted
        nll_v, div_v = log_value(nll), div.value
        logging_output = {"loss": nll_v + weight * div_v, "nll_loss": nll_v,
                          "ncorrect": log_value(correct), "nsentences": n, "ntokens": n,
                          "sample_size": n, "divergence": div_v * n}
        for name, nu in extra["nu"].items():
            logging_output[f"nu_{name}"] = nu * n
        if self.mode == "seed" and model.training and not self.warned_collapse:
            self.warn_if_collapsed(extra["nu"])
        logging_output.update(uncertainty_logs(extra))
        return loss, n, logging_output

    def warn_if_collapsed(self, nus) -> bool:
        """One warning per run when a fitted ν falls below ``NU_COLLAPSED`` under ``seed``: (D 56)
        with ν_Θ ≠ ν is not a divergence and falls without bound as ν_Θ → 0 (about −2/ν_Θ² per
        element; docs/method.md §4.2), so ν runs to its floor (≈ 0.002) whatever the data say."""
        low = {name: float(nu) for name, nu in nus.items() if float(nu) < NU_COLLAPSED}
        if low:
            self.warned_collapse = True
            logger.warning(
                "t_divergence: ν collapsed (%s < %g) under --t-divergence seed: (D 56) with the "
                "posterior's ν different from the prior's is unbounded below as ν → 0, so ν runs "
                "to its floor and the divergence to about −2/ν² per element (docs/method.md §4.2). "
                "--t-divergence tied or exact are true divergences and do not collapse.",
                ", ".join(f"nu_{k} = {v:.3g}" for k, v in sorted(low.items())), NU_COLLAPSED)
        return bool(low)

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        reduce_qa_metrics(logging_outputs)
        n = sum(log.get("nsentences", 0) for log in logging_outputs)
        keys = {k for log in logging_outputs for k in log if k == "divergence" or k.startswith("nu_")}
        for k in sorted(keys):
            metrics.log_scalar(k, sum(log.get(k, 0) for log in logging_outputs) / max(n, 1), n,
                               round=3)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
