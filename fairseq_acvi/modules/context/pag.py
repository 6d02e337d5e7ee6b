"""Planning attention: PAG and rPAG (docs/method.md §3.4; seed 001, Gulcehre, Dutil, Trischler &
Bengio 2017, "Plan, Attend, Generate", §2.2-2.3).

Sources. The stored text of seed 001 lost, in extraction, the formulas of §2.2 and the body of
Algorithm 1; it keeps the structure (§2.2 "Alignment and Decoder"; §2.2.1 "Alignment Repeat",
rPAG, with Algorithm 1, the pseudocode "for updating the repeat alignment and commitment
vector"), the number (6) of the deep output layer (unchanged here: the decoder's output layer),
and §2.3's training details: the Gumbel-softmax with the straight-through estimator to
backpropagate through the commitment vector, a learned temperature, plan and commitment
initialised with ones, and an extra loss because "the model can learn to recompute very often".
The formulas below follow the published paper (arXiv 1706.05087): (1) is its candidate-plan
equation; the other parts are named by the paper's symbols (A_t, Ā_t, c_t, g_t, ρ, α_t, ψ_t,
L_com) because their numbers cannot be checked against the stored text.

Notation: h_j source annotations (mem.values, (B, N, d)), s_t the decoder state of this step,
k the plan horizon (``--pag-plan-horizon``), e_t (B, N) the scorer's scores (docs/method.md §1).

PAG, one decoder step (``PAGContext.step``)::

    g_t   = c_{t-1}[0]                                    switch: first element of the commitment
    Ā_t[:, j] = e_tj + W_a tanh(U_h h_j + U_s s_t + U_β A_{t-1}[:, j])      (1), (B, k, N)
    c̃_t   = softmax(f_c(s_t)),  ĉ_t = one-hot sample of c̃_t              commitment plan, (B, k)
    A_t   = g_t Ā_t + (1 − g_t) ρ(A_{t-1})                replan, or shift the plan one step
    c_t   = g_t ĉ_t + (1 − g_t) ρ(c_{t-1})                ... and the commitment
    α_t   = softmax(A_t[0]) over non-padding positions,  ψ_t = Σ_j α_tj h_j     the step's context

ρ drops the first row (entry) and appends a zero one. Because ĉ_t is one-hot over the k
entries, its 1 reaches c[0] after at most k − 1 shifts: a plan made at step t is followed for
1..k steps (rows 0..k−1) and never read beyond its horizon. A_0 and c_0 are ones (§2.3), so the
first step always plans. In the paper's f_align(s_{t-1}, h_j, β_t^j, y_t), β_t^j is a read of
the previous plan's column j (here the linear map U_β of A_{t-1}[:, j]) and y_t the previous
output. **Mapping**: our decoder is Luong's input-feeding LSTM, so s_t is computed from s_{t-1},
y_{t-1} and the previous context ψ_{t-1} (through the attentional feed); the query s_t of this
step therefore carries the paper's s_{t-1}, y_t and the previous context. The existing scorer
(``--attention-type``) gives the content term e_t shared by all k rows; the MLP adds a learned
row-specific term, so that with W_a = 0 every row of the plan is the soft-attention score.

rPAG (``RPAGContext``; §2.2.1, Algorithm 1): no plan matrix. When the switch fires the step
computes a fresh alignment ᾱ_t = softmax(f_align(s, h_j, y)) -- here the scorer,
masked_softmax(e_t) -- and a new commitment c̃_t = softmax(f_c(s_t, ψ_{t-1})); otherwise it
reuses the previous alignment, α_t = α_{t-1}, and shifts the commitment:

    α_t = g_t ᾱ_t + (1 − g_t) α_{t-1},      c_t = g_t ĉ_t + (1 − g_t) ρ(c_{t-1}).

The switch (§2.3). g_t is discrete. In training ĉ_t is a straight-through Gumbel-softmax sample
(Jang et al. 2016, Maddison et al. 2016, with Bengio et al.'s straight-through estimator, as the
paper, "for the model to operate discretely"): the forward pass uses the one-hot argmax of
log c̃_t + Gumbel noise, 0/1 (up to the rounding of the straight-through sum), so a plan is
really followed or really replaced; the backward pass uses the gradient of the relaxed
softmax((log c̃_t + noise)/τ), so the commitment network learns from the likelihood (the paper
found this better than REINFORCE). τ only shapes that gradient; it is ``--pag-temperature``
(fixed; the paper learns it, after Gulcehre et al. 2017 -- not implemented). At evaluation
ĉ_t = one-hot(argmax c̃_t), no noise: decoding is deterministic. Every step computes the
candidate (Ā_t or ᾱ_t) for the whole batch and selects with g_t, so the batch is vectorised and
gradients reach g_t; rPAG's saving of computation is not realised here.

Loss terms (``StepOutput.losses``, (B,) per step, unweighted; ``loss_weight`` weighs them):

* ``commit`` -- the commitment loss L_com = Σ_t Σ_i (1/k − c̃_t[i])² of §2.3, which pulls the
  commitment distribution towards uniform over the horizon and away from "replan at the next
  step". **Decision**: it is counted at the steps that compute a commitment (g_t = 1, used as a
  constant mask) and on the noise-free c̃_t; of a one-hot ĉ_t the sum would be the constant
  1 − 1/k. Weight λ_com = ``--pag-commit-weight``.
* ``replan`` -- g_t itself, weight 0: the ``elbo`` criterion logs it per target token, i.e. the
  fraction of steps that recomputed the plan.

Plans, commitments, attention and the loss are float32 (also under fp16). The state (``plan``
(B, k, N) or ``attn`` (B, N); ``commit`` (B, k)) lives in the decoder's incremental state and is
reordered with the beam (base.py). ``--pag-force-replan`` (or ``force_replan = True``) sets
g_t = 1 at every step: PAG is then attention with the scores Ā_t[0] and rPAG soft attention.
"""
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules.context.base import ContextInference, StepOutput, register_context
from fairseq_acvi.modules.context.soft import attend
from fairseq_acvi.modules.context.scorers import Memory, masked_softmax

#: default plan horizon k: 10, as we read the published paper's set-up (the experiment section
#: of seed 001's stored text is cut short and does not give it)
DEFAULT_PLAN_HORIZON = 10


def shift(x: Tensor) -> Tensor:
    """ρ: drop the first entry of dim 1 and append zeros. (B, k, ...) -> (B, k, ...)."""
    return torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], dim=1)


def select(g: Tensor, new: Tensor, old: Tensor) -> Tensor:
    """g·new + (1 − g)·old with g (B,) broadcast over the other dims of new, old (B, ...)."""
    g = g.view(-1, *([1] * (new.dim() - 1)))
    return g * new + (1.0 - g) * old


def plan_softmax(logits: Tensor, pad_mask: Tensor) -> Tensor:
    """α = softmax over non-padding positions of finite logits (B, N): float32, 0 at padding."""
    return F.softmax(logits.float().masked_fill(pad_mask, float("-inf")), dim=-1)


@register_context("pag")
class PAGContext(ContextInference):
    """PAG: an alignment-plan matrix A_t (B, k, N) and a commitment vector c_t (B, k)."""

    DEFAULTS = dict(pag_plan_horizon=DEFAULT_PLAN_HORIZON, pag_temperature=1.0,
                    pag_commit_weight=1.0, pag_force_replan=False)
    stateful = True
    #: the plan's own softmax over A_t[0] (and rPAG's fresh alignment) are not routed through
    #: ``--attention-normalizer`` (docs/method.md §3.5)
    NORMALIZERS = ("softmax",)

    def __init__(self, args, value_dim, query_dim, enc_final_dim):
        super().__init__(args, value_dim, query_dim, enc_final_dim)
        self.k = int(self.option(args, "pag_plan_horizon"))
        if self.k < 1:
            raise ValueError(f"--pag-plan-horizon must be ≥ 1, got {self.k}")
        self.tau = float(self.option(args, "pag_temperature"))
        if not self.tau > 0:
            raise ValueError(f"--pag-temperature must be > 0, got {self.tau}")
        self.commit_weight = float(self.option(args, "pag_commit_weight"))
        if not self.commit_weight >= 0:
            raise ValueError(f"--pag-commit-weight must be ≥ 0, got {self.commit_weight}")
        self.force_replan = bool(self.option(args, "pag_force_replan"))
        self.commit_net = nn.Linear(self.commit_input_dim(query_dim, value_dim), self.k)   # f_c
        attn_dim = getattr(args, "attention_dim", None) or value_dim       # size of f_align's layer
        self.build_align(attn_dim, query_dim, value_dim)

    @staticmethod
    def add_args(parser):
        parser.add_argument("--pag-plan-horizon", type=int, metavar="K",
                            help="pag/rpag: plan horizon k, the rows of the alignment plan and "
                                 f"the entries of the commitment vector (default "
                                 f"{DEFAULT_PLAN_HORIZON}; docs/method.md §3.4)")
        parser.add_argument("--pag-temperature", type=float, metavar="TAU",
                            help="pag/rpag: temperature of the straight-through Gumbel-softmax "
                                 "that samples the commitment in training (default 1)")
        parser.add_argument("--pag-commit-weight", type=float, metavar="W",
                            help="pag/rpag: weight λ_com of the commitment loss "
                                 "Σ_i (1/k − c_i)², which discourages replanning at every step "
                                 "(default 1; logged as 'commit')")
        parser.add_argument("--pag-force-replan", action="store_true",
                            help="pag/rpag: recompute the plan at every step (switch g_t = 1); "
                                 "an ablation and a test hook")

    # -- parts that rPAG replaces ------------------------------------------------------------------
    def commit_input_dim(self, query_dim: int, value_dim: int) -> int:
        """PAG: c̃_t = softmax(f_c(s)) reads the decoder state only."""
        return query_dim

    def commit_input(self, query: Tensor, mem: Memory, state: Dict[str, Tensor]) -> Tensor:
        return query

    def build_align(self, attn_dim: int, query_dim: int, value_dim: int):
        """f_align of (1): U_h, U_s, U_β into ``attn_dim``, then W_a to the k rows."""
        self.U_h = nn.Linear(value_dim, attn_dim, bias=False)
        self.U_s = nn.Linear(query_dim, attn_dim, bias=True)
        self.U_b = nn.Linear(self.k, attn_dim, bias=False)
        self.W_a = nn.Linear(attn_dim, self.k, bias=False)

    def prepare(self, mem, enc_final, target_emb=None, target_pad=None):
        return {"pag_keys": self.U_h(mem.values)}                      # (B, N, a): U_h h_j

    def init_alignment(self, mem: Memory) -> Dict[str, Tensor]:
        """A_0 = ones (§2.3)."""
        B, N = mem.pad_mask.shape
        return {"plan": mem.values.new_ones(B, self.k, N, dtype=torch.float32)}

    def candidate_plan(self, scores: Tensor, query: Tensor, mem: Memory,
                       prepared: Dict[str, Tensor], plan: Tensor) -> Tensor:
        """Ā_t (1): scores (B, N) with -inf at padding, query (B, d_q), plan A_{t-1} (B, k, N)
        -> (B, k, N) float32, finite (0 + MLP term at padding; masked by ``plan_softmax``)."""
        keys = prepared["pag_keys"]                                     # (B, N, a)
        read = self.U_b(plan.transpose(1, 2).to(keys.dtype))            # (B, N, a): β_t^j
        pre = torch.tanh(keys + self.U_s(query).unsqueeze(1).to(keys.dtype) + read)
        rows = self.W_a(pre).float().transpose(1, 2)                    # (B, k, N)
        content = scores.float().masked_fill(mem.pad_mask, 0.0)         # e_t, finite
        return rows + content.unsqueeze(1)

    def align(self, g: Tensor, scores: Tensor, query: Tensor, mem: Memory,
              prepared: Dict[str, Tensor], state: Dict[str, Tensor]):
        """A_t = g Ā_t + (1 − g) ρ(A_{t-1}); α_t = softmax(A_t[0]). -> (α_t (B, N), new state)."""
        old = state["plan"]
        plan = select(g, self.candidate_plan(scores, query, mem, prepared, old), shift(old))
        return plan_softmax(plan[:, 0], mem.pad_mask), {"plan": plan}

    # -- shared -----------------------------------------------------------------------------------
    def init_state(self, prepared, mem):
        """c_0 = ones (so g_1 = 1: the first step plans) and the initial alignment state."""
        B = mem.pad_mask.size(0)
        state = {"commit": mem.values.new_ones(B, self.k, dtype=torch.float32)}
        state.update(self.init_alignment(mem))
        return state

    def switch(self, commit: Tensor) -> Tensor:
        """g_t = c_{t-1}[0] (B,), 0/1 (straight-through gradient in training); 1 if forced."""
        if self.force_replan:
            return torch.ones_like(commit[:, 0])
        return commit[:, 0]

    def sample_commitment(self, logits: Tensor):
        """logits (B, k) -> (ĉ_t one-hot (B, k), c̃_t = softmax(logits) (B, k)), float32.
        Training: straight-through Gumbel-softmax at temperature τ; evaluation: argmax."""
        logits = logits.float()
        probs = F.softmax(logits, dim=-1)
        if self.training:
            onehot = F.gumbel_softmax(logits, tau=self.tau, hard=True, dim=-1)
        else:
            onehot = F.one_hot(logits.argmax(-1), self.k).to(logits.dtype)
        return onehot, probs

    def commit_loss(self, g: Tensor, probs: Tensor) -> Tensor:
        """L_com at this step: g_t · Σ_i (1/k − c̃_t[i])², g_t a constant mask. (B,) float32."""
        return g.detach() * (probs - 1.0 / self.k).pow(2).sum(-1)

    def step(self, scores, query, mem, prepared, t, state=None):
        if state is None:
            raise ValueError(f"--context-inference {self.name} needs its recurrent state "
                             "(the decoder passes state=...; see ContextInference.stateful)")
        g = self.switch(state["commit"])                                      # (B,)
        logits = self.commit_net(self.commit_input(query, mem, state))
        onehot, probs = self.sample_commitment(logits)                         # (B, k) each
        commit = select(g, onehot, shift(state["commit"]))
        attn, new_state = self.align(g, scores, query, mem, prepared, state)
        new_state["commit"] = commit
        losses = {"commit": self.commit_loss(g, probs), "replan": g.detach().float()}
        return StepOutput(mean=attend(attn, mem.values), attn=attn, losses=losses,
                          state=new_state)

    def loss_weight(self, name: str) -> float:
        if name == "commit":
            return self.commit_weight
        if name == "replan":
            return 0.0
        return 1.0


@register_context("rpag")
class RPAGContext(PAGContext):
    """rPAG (§2.2.1, Algorithm 1): reuse α_{t-1} until the switch fires; no plan matrix."""

    @staticmethod
    def add_args(parser):
        """rPAG shares PAG's ``--pag-*`` options."""

    def commit_input_dim(self, query_dim, value_dim):
        """c̃_t = softmax(f_c(s, ψ_{t-1})) (Algorithm 1)."""
        return query_dim + value_dim

    def commit_input(self, query, mem, state):
        prev_ctx = attend(state["attn"], mem.values)                          # ψ_{t-1} (B, d)
        return torch.cat([query, prev_ctx.to(query.dtype)], dim=-1)

    def build_align(self, attn_dim, query_dim, value_dim):
        """f_align is the scorer (no plan, no extra parameters)."""

    def prepare(self, mem, enc_final, target_emb=None, target_pad=None):
        return {}

    def init_alignment(self, mem):
        """α_0 = 0 (never attended: g_1 = 1), so ψ_0 = 0 like the decoder's first feed."""
        return {"attn": mem.values.new_zeros(mem.pad_mask.shape, dtype=torch.float32)}

    def align(self, g, scores, query, mem, prepared, state):
        """α_t = g ᾱ_t + (1 − g) α_{t-1}, ᾱ_t = masked_softmax(e_t)."""
        fresh = masked_softmax(scores)                                        # (B, N) float32
        attn = select(g, fresh, state["attn"])
        return attn, {"attn": attn}
