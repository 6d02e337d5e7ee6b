"""The attention's normaliser: scores e_t -> weights a_t (docs/method.md §3.5, ``--attention-normalizer``).

* ``softmax`` (default): a_t = softmax(e_t), exactly :func:`~fairseq_acvi.modules.context.scorers.masked_softmax`.
* ``sparsemax`` (Martins & Astudillo 2016): the Euclidean projection of e_t onto the simplex;
  ``entmax15`` (Peters, Niculae & Martins 2019): 1.5-entmax. Both from the ``entmax`` package
  (sort-based, exact gradients); both give exact zeros.
* ``csoftmax`` / ``csparsemax`` (Martins & Kreutzer 2017; Malaviya, Ferreira & Martins 2018):
  a_t = csoftmax / csparsemax(e_t + c·u_t, u_t) (:mod:`fairseq_acvi.modules.context.constrained`) with the
  per-source-word upper bounds u_t = f − β_{t−1}, β_{t−1} = Σ_{s<t} a_s the cumulative attention
  and f the fertilities (``--attention-fertility``):

    fixed      f_j = F (``--attention-fertility-value``, default 2) for every source word;
    predicted  f_j = 1 + (F − 1)·σ(wᵀh_j + b) from the encoder annotation h_j, computed once per
               sentence (:meth:`AttentionNormalizer.prepare`) and trained with the model.

  c = ``--attention-exhaustion`` (default 0) adds c·u_t to the scores, which pushes attention
  towards words whose fertility is not used up (our reading of Malaviya et al.'s exhaustion
  strategy, the ``cattn`` of their scripts; docs/method.md §3.5).
  The **sink**: the last real source position (fairseq's ``</s>``, which every source of the text
  tasks ends with; the captioner's last frame) has an unbounded fertility (its bound is 1 at every
  step), so that every step's bounds sum to ≥ 1 and the problem stays feasible after the words'
  fertilities are spent. It plays the part of the paper's ``<sink>`` token, which Malaviya et al.
  append to every source sentence; using the ``</s>`` the encoder already reads needs no extra
  position and no change to the encoder or the data.

  The constrained normalisers are recurrent: β lives in the context inference's state
  (``attn_cum`` (B, N) float32), which the decoder keeps in its incremental state and reorders
  with the beam, so that decoding step by step gives the teacher-forced pass's weights.

Every weight is float32 (scores are cast first, also under fp16); padded positions get exactly 0.
Shapes: B batch (× beam), N source positions.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_acvi.modules.context.constrained import csoftmax, csparsemax
from fairseq_acvi.modules.precision import at_least_float32
from fairseq_acvi.modules.context.scorers import Memory, masked_softmax

NORMALIZERS = ("softmax", "sparsemax", "entmax15", "csoftmax", "csparsemax")
CONSTRAINED = ("csoftmax", "csparsemax")
FERTILITIES = ("fixed", "predicted")
#: the defaults of the normaliser's options (ContextInference.DEFAULTS holds them)
DEFAULTS = dict(attention_normalizer="softmax", attention_fertility="fixed",
                attention_fertility_value=2.0, attention_exhaustion=0.0)


def _entmax():
    try:
        import entmax
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("--attention-normalizer sparsemax / entmax15 needs the 'entmax' package: "
                          "pip install entmax") from err
    return entmax


def sparse_normalize(name: str, scores: Tensor, pad_mask: Tensor) -> Tensor:
    """scores (..., N) with −inf at padding -> float32 weights (..., N), exactly 0 at padding.
    ``name``: softmax, sparsemax or entmax15."""
    if name == "softmax":
        return masked_softmax(scores)
    x = at_least_float32(scores)
    if name == "sparsemax":
        attn = _entmax().sparsemax(x, dim=-1)
    elif name == "entmax15":
        attn = _entmax().entmax15(x, dim=-1)
    else:
        raise ValueError(f"--attention-normalizer: {name!r} is not an unconstrained normaliser")
    return attn.masked_fill(pad_mask, 0.0)


def last_real_position(pad_mask: Tensor) -> Tensor:
    """(B, N) bool, True at the last non-padding position of each row (either padding side)."""
    N = pad_mask.size(-1)
    pos = torch.arange(N, device=pad_mask.device).expand_as(pad_mask)
    idx = pos.masked_fill(pad_mask, -1).argmax(-1, keepdim=True)
    return torch.zeros_like(pad_mask).scatter_(-1, idx, True)


class AttentionNormalizer(nn.Module):
    """One of :data:`NORMALIZERS` with its options (module docstring).

    ``stateful`` for the constrained ones: :meth:`init_state` gives β_0 = 0 and :meth:`forward`
    returns β_t. ``value_dim`` is the size of the annotations that predicted fertilities read.
    """

    def __init__(self, name: str = "softmax", value_dim: int = 0, fertility: str = "fixed",
                 fertility_value: float = 2.0, exhaustion: float = 0.0):
        super().__init__()
        if name not in NORMALIZERS:
            raise ValueError(f"--attention-normalizer: unknown value {name!r}; choose from "
                             f"{', '.join(NORMALIZERS)}")
        if fertility not in FERTILITIES:
            raise ValueError(f"--attention-fertility: unknown value {fertility!r}; choose from "
                             f"{', '.join(FERTILITIES)}")
        fertility_value = float(fertility_value)
        if not (math.isfinite(fertility_value) and fertility_value > 0):
            raise ValueError(f"--attention-fertility-value must be a finite number > 0, got "
                             f"{fertility_value}")
        if fertility == "predicted" and fertility_value <= 1.0:
            raise ValueError("--attention-fertility predicted: --attention-fertility-value is the "
                             f"largest fertility F and must be > 1 (f = 1 + (F − 1)·σ(·)), got "
                             f"{fertility_value}")
        exhaustion = float(exhaustion)
        if not (math.isfinite(exhaustion) and exhaustion >= 0):
            raise ValueError(f"--attention-exhaustion must be a finite number ≥ 0, got {exhaustion}")
        self.name = name
        self.stateful = name in CONSTRAINED
        self.fertility = fertility
        self.fertility_value = fertility_value
        self.exhaustion = exhaustion
        self.fertility_net: Optional[nn.Linear] = None
        if self.stateful and fertility == "predicted":
            if value_dim <= 0:
                raise ValueError("--attention-fertility predicted needs the annotations' size")
            self.fertility_net = nn.Linear(value_dim, 1)
            self.reset_method_parameters()

    def reset_method_parameters(self):
        """Predicted fertilities start at (1 + F)/2 for every word (w = 0, b = 0)."""
        if self.fertility_net is not None:
            nn.init.zeros_(self.fertility_net.weight)
            nn.init.zeros_(self.fertility_net.bias)

    # -- once per sentence ------------------------------------------------------------------------
    def prepare(self, mem: Memory) -> Dict[str, Tensor]:
        """The fertilities f (B, N) float32 (0 at padding) and the sink (B, N) bool; {} unless
        constrained."""
        if not self.stateful:
            return {}
        pad = mem.pad_mask
        sink = last_real_position(pad)
        if self.fertility_net is None:
            fert = torch.full(pad.shape, self.fertility_value, dtype=torch.float32,
                              device=pad.device)
        else:
            raw = self.fertility_net(mem.values).squeeze(-1).float()            # (B, N)
            fert = 1.0 + (self.fertility_value - 1.0) * torch.sigmoid(raw)
        fert = fert.masked_fill(pad, 0.0)
        return {"attn_fertility": fert, "attn_sink": sink}

    def init_state(self, prepared: Dict[str, Tensor], mem: Memory) -> Dict[str, Tensor]:
        """β_0 = 0 (B, N) float32; {} unless constrained."""
        if not self.stateful:
            return {}
        return {"attn_cum": torch.zeros(mem.pad_mask.shape, dtype=torch.float32,
                                        device=mem.pad_mask.device)}

    def bounds(self, prepared: Dict[str, Tensor], state: Dict[str, Tensor]) -> Tensor:
        """u_t = max(f − β_{t−1}, 0), 1 at the sink (B, N) float32."""
        u = (prepared["attn_fertility"] - state["attn_cum"]).clamp_min(0.0)
        return torch.where(prepared["attn_sink"], torch.ones_like(u), u)

    # -- once per step ----------------------------------------------------------------------------
    def forward(self, scores: Tensor, mem: Memory, prepared: Dict[str, Tensor],
                state: Optional[Dict[str, Tensor]] = None) -> Tuple[Tensor, Dict[str, Tensor]]:
        """scores (B, N), −inf at padding -> (a_t (B, N) float32, the next state: {} or
        {"attn_cum": β_t}). The unconstrained ones also take every step at once: scores
        (B, T, N) -> (B, T, N)."""
        if not self.stateful:
            pad = mem.pad_mask if scores.dim() == 2 else mem.pad_mask.unsqueeze(1)
            return sparse_normalize(self.name, scores, pad), {}
        if state is None or "attn_cum" not in state:
            raise ValueError(f"--attention-normalizer {self.name} needs the cumulative attention "
                             "(the context inference's recurrent state; the decoder passes "
                             "state=...)")
        if "attn_fertility" not in prepared:
            raise ValueError(f"--attention-normalizer {self.name}: prepare() was not called")
        u = self.bounds(prepared, state)
        z = at_least_float32(scores)
        if self.exhaustion > 0:
            z = z + self.exhaustion * u
        fn = csparsemax if self.name == "csparsemax" else csoftmax
        attn = fn(z, u, mem.pad_mask)
        return attn, {"attn_cum": state["attn_cum"] + attn}


def build_normalizer(cls, args, value_dim: int) -> AttentionNormalizer:
    """The normaliser the options of ``args`` name, for context-inference class ``cls`` (whose
    :meth:`option` reads them, with defaults)."""
    return AttentionNormalizer(cls.option(args, "attention_normalizer"), value_dim,
                               cls.option(args, "attention_fertility"),
                               cls.option(args, "attention_fertility_value"),
                               cls.option(args, "attention_exhaustion"))


def add_normalizer_args(parser):
    """``--attention-normalizer`` and the fertility options (docs/method.md §3.5)."""
    parser.add_argument("--attention-normalizer", choices=NORMALIZERS,
                        help="how attention scores become weights (docs/method.md §3.5): softmax "
                             "(default), sparsemax or entmax15 (sparse, the entmax package), "
                             "csoftmax or csparsemax (constrained by per-word fertilities, "
                             "Malaviya et al. 2018; the source's last position, </s>, is the sink)")
    parser.add_argument("--attention-fertility", choices=FERTILITIES,
                        help="csoftmax/csparsemax: fertility of each source word: fixed "
                             "(--attention-fertility-value for every word, default) or predicted "
                             "from its encoder annotation, 1 + (F − 1)·sigmoid(w·h + b)")
    parser.add_argument("--attention-fertility-value", type=float, metavar="F",
                        help="csoftmax/csparsemax: the fixed fertility, or the largest predicted "
                             "one (default 2)")
    parser.add_argument("--attention-exhaustion", type=float, metavar="C",
                        help="csoftmax/csparsemax: add C times the remaining bound u_t to the "
                             "scores, towards words whose fertility is not spent (default 0)")
