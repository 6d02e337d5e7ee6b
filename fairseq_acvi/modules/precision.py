"""The precision of the numerically delicate parts (docs/method.md §2, "float32 even under fp16").

Softmaxes, log-probabilities, Gaussian moments and KL terms are computed in float32 whatever the
model's dtype (float16 under ``--fp16``), and in float64 when the model runs in float64 (the
gradient checks and the exactness tests, which compare two computations to 1e-10).
"""
import torch
from torch import Tensor


def at_least_float32(x: Tensor) -> Tensor:
    """x in float32, or float64 when it is float64."""
    return x if x.dtype == torch.float64 else x.float()
