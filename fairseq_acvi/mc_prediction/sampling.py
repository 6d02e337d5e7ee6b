"""How the K evaluation samples of a Gaussian context are drawn (docs/method.md §2.2, ``--mc-sampling``).

ACVI's context at a step is the moment-matched Gaussian N(m, diag v) (D 85-87); evaluation and
decoding average the predictions of K reparameterised samples c_k = m + √v ⊙ ε_k. ``iid`` (the
papers') draws the K noises independently; ``antithetic`` (the default of the package's presets)
draws ε_1..ε_⌈K/2⌉ and appends their negatives −ε_1..−ε_⌊K/2⌋: every sample is still N(m, v), the
sample mean is exactly m for even K, and the odd-order terms of the noise cancel in the average.
Used by the LSTM decoders' ACVI (modules/context/acvi.py) and the transformer's per-head ACVI
(modules/transformer_context.py).
"""
import torch
from torch import Tensor

#: how the K samples' noise is drawn at evaluation (``--mc-sampling``)
MC_SAMPLING_CHOICES = ("iid", "antithetic")


def check_mc_sampling(value: str) -> str:
    """``--mc-sampling`` checked (also when it comes from ``--model-overrides``, past argparse)."""
    if value not in MC_SAMPLING_CHOICES:
        raise ValueError(f"--mc-sampling must be one of {', '.join(MC_SAMPLING_CHOICES)}, got {value!r}")
    return value


def draw_gaussian(m: Tensor, v: Tensor, k: int, dtype, antithetic: bool = False) -> Tensor:
    """K reparameterised samples c = m + √v ⊙ ε (D 85), one batched draw: m, v (..., d) float32
    -> (..., K, d) in ``dtype``. ``antithetic``: ε_1..ε_⌈K/2⌉ ~ N(0, I) followed by
    −ε_1..−ε_⌊K/2⌋ (module docstring)."""
    if antithetic and k > 1:
        eps = torch.randn(*m.shape[:-1], (k + 1) // 2, m.size(-1), device=m.device)
        eps = torch.cat([eps, -eps[..., :k // 2, :]], dim=-2)
    else:
        eps = torch.randn(*m.shape[:-1], k, m.size(-1), device=m.device)
    return (m.unsqueeze(-2) + v.sqrt().unsqueeze(-2) * eps).to(dtype)
