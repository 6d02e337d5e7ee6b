"""Soft attention: c_t = Σ_i a_ti h_i (docs/method.md §2.1, P 3). The deterministic baseline.

a_t = softmax(e_t), or another ``--attention-normalizer`` (docs/method.md §3.5); the constrained
ones make the variant stateful (the cumulative attention, :class:`ContextInference`).
"""
from fairseq_acvi.modules.context.base import ContextInference, StepOutput, register_context


def attend(attn, values):
    """attn: (B, N) float32, values: (B, N, d) -> (B, d) in the values' dtype; every step at
    once: attn (B, T, N) -> (B, T, d)."""
    a = attn.to(values.dtype)
    return a.bmm(values) if a.dim() == 3 else a.unsqueeze(1).bmm(values).squeeze(1)


@register_context("soft")
class SoftContext(ContextInference):
    parallel = True

    def step(self, scores, query, mem, prepared, t, state=None):
        attn, state = self.normalize(scores, mem, prepared, state)  # (B, N) float32
        return StepOutput(mean=attend(attn, mem.values), attn=attn, state=state)
