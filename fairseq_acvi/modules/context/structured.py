"""Structured (segmentation) attention of Kim et al. 2017 (docs/method.md §2.3).

At every decoder step t a binary linear-chain CRF over the real source positions decides which
positions are "selected" (z_ti = 1). Potentials: unary e_ti for state 1 and 0 for state 0 (e_t are
the scorer's attention scores), a learned 2×2 transition matrix and learned start/end scores
(all initialised to 0, where the chain factorises and p(z_ti = 1) = sigmoid(e_ti)). The node
marginals p_ti = p(z_ti = 1) come from the log-space forward-backward of
:func:`fairseq_acvi.modules.context.crf.binary_crf` (parallel scan, no loop over batch or positions) and

    c_t = λ · Σ_i p_ti h_i / Σ_i p_ti,       attn_t = p_t / Σ_i p_ti,

λ learned (``--structured-lambda learned``, initialised to 1) or fixed to 1. The normalised weights
are a masked softmax of log p_ti, which stays exact when every marginal is tiny. Gradients flow
through the forward-backward by autograd. Padded positions get zero weight and do not change the
partition function of the real positions.
"""
import torch
import torch.nn as nn

from fairseq_acvi.modules.context.base import ContextInference, StepOutput, register_context
from fairseq_acvi.modules.context.soft import attend
from fairseq_acvi.modules.context.crf import binary_crf
from fairseq_acvi.modules.precision import at_least_float32


@register_context("structured")
class StructuredContext(ContextInference):
    DEFAULTS = dict(structured_lambda="learned")
    #: the weights are the CRF's normalised node marginals, not a normalised score vector
    #: (docs/method.md §3.5)
    NORMALIZERS = ("softmax",)
    parallel = True

    def __init__(self, args, value_dim, query_dim, enc_final_dim):
        super().__init__(args, value_dim, query_dim, enc_final_dim)
        self.transition = nn.Parameter(torch.zeros(2, 2))   # [z_{i-1}, z_i]
        self.start = nn.Parameter(torch.zeros(2))
        self.end = nn.Parameter(torch.zeros(2))
        mode = self.option(args, "structured_lambda")
        if mode not in ("learned", "fixed"):
            raise ValueError(f"--structured-lambda: unknown value {mode!r}; choose learned or fixed")
        if mode == "learned":
            self.lam = nn.Parameter(torch.ones(()))
        else:
            self.register_buffer("lam", torch.ones(()), persistent=False)

    def reset_method_parameters(self):
        """A uniform chain (potentials 0) and λ = 1 (docs/method.md §2.3)."""
        for p in (self.transition, self.start, self.end):
            nn.init.zeros_(p)
        if isinstance(self.lam, nn.Parameter):
            nn.init.ones_(self.lam)

    @staticmethod
    def add_args(parser):
        parser.add_argument("--structured-lambda", choices=["learned", "fixed"],
                            help="scale λ of the normalised structured context: learned "
                                 "(initialised to 1, default) or fixed to 1 (docs/method.md §2.3)")

    def marginals(self, scores, pad_mask):
        """Log node marginals log p(z_ti = 1) (B, N), −inf at padding, and log Z (B,); every
        step at once: scores (B, T, N) -> (B, T, N) and (B, T) (one chain per step)."""
        if scores.dim() == 2:
            return binary_crf(scores, pad_mask, self.transition, self.start, self.end)
        B, T, N = scores.shape
        log_p1, log_z = binary_crf(scores.reshape(B * T, N),
                                   pad_mask.unsqueeze(1).expand(B, T, N).reshape(B * T, N),
                                   self.transition, self.start, self.end)
        return log_p1.view(B, T, N), log_z.view(B, T)

    def step(self, scores, query, mem, prepared, t):
        log_p1, _ = self.marginals(scores, mem.pad_mask)          # (B, [T,] N) float32, -inf at pad
        attn = at_least_float32(torch.softmax(log_p1, dim=-1))    # p / Σ p, 0 at padding
        mean = attend(attn, mem.values) * self.lam.to(mem.values.dtype)
        return StepOutput(mean=mean, attn=attn)
