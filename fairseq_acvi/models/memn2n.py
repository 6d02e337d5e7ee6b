"""End-to-end memory networks for bAbI: ``memn2n`` and the Bayesian ``t_memn2n`` (docs/method.md §4.1-4.2).

Shapes: B batch, M memory slots (slot 0 = most recent statement), L words per sentence, Lq words
per question, d = δ embedding size, V dictionary size, K hops, S posterior samples.

One hop k (D 33-36):  m_i = Σ_j l_j ⊙ A^k x_ij + T_A^k(i),  c_i = Σ_j l_j ⊙ C^k x_ij + T_C^k(i),
ϖ = softmax(uᵀ m) over non-empty slots,  o = Σ_i ϖ_i c_i,  u ← u + o;  â = softmax(W u^{K+1}).
u¹ = Σ_j l_j ⊙ B q_j. Position encoding l_kj = (1 − j/J) − (k/d)(1 − 2j/J) with J the sentence's
own length (j = 1..J, k = 1..d); the nil word (pad) embeds to 0.
Tying: ``layerwise`` (A¹ = … = A^K, C¹ = … = C^K, one B, separate W) or ``adjacent``
(A^{k+1} = C^k, B = A¹, W = C^{K}ᵀ; K + 1 matrices E_0..E_K).
Random noise (training only): per story, 0..⌈0.1 n⌉ empty memories are inserted at random
positions, i.e. the temporal indices of the n real memories are a random ordered subset of
0..n+n_blank−1. Linear start: no softmax in the hops for the first ``--linear-start-epochs``.

Answer classes: the softmax runs over every dictionary symbol (V), or, with the task's
``--answer-classes answers``, over the training files' answers only (the others get −1e9 before
the softmax, probability 0; ``answer_bias`` (V,)): then a story word that is never an answer,
such as Hindi's inflected ``gusalkhaney`` beside the answer ``gusalkhana``, is no candidate
(docs/results/babi_hindi_2026-11-28.md).

``t_memn2n`` replaces each embedding matrix by a Student-t posterior
(:class:`~fairseq_acvi.modules.student_t.StudentTMatrices`); T_A, T_C and W stay point estimates.
Training uses one escort draw per minibatch; evaluation averages the answer distribution over
``--mc-samples`` draws in probability space (float32), or uses μ (0). The S draws are
folded into the batch: one pass, the data-only position-encoding bags are shared by all draws.
In evaluation ``extra["uncertainty"]`` (B, 3) holds H[p̄], E_s H[p_s] and the mutual information
of the S draws per question (:mod:`fairseq_acvi.mc_prediction.uncertainty`; MemN2N and the posterior
mean: one distribution, I = 0), which the criteria log for right and wrong answers.
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from torch import Tensor

from fairseq_acvi.mc_prediction import uncertainty as unc
from fairseq_acvi.modules.student_t import SAMPLERS, StudentTMatrices, WeightedDivergence

TYING = ChoiceEnum(["layerwise", "adjacent"])
EMPTY = ChoiceEnum(["mask", "attend"])
SAMPLER = ChoiceEnum(list(SAMPLERS))


def position_encoding(lengths: Tensor, max_len: int, dim: int) -> Tensor:
    """l_kj = (1 − j/J) − (k/d)(1 − 2j/J) for j ≤ J, 0 beyond (docs/method.md §4.1).

    lengths: (*) sentence lengths J (0 for an empty slot). Returns (*, max_len, dim) float32.
    """
    j = torch.arange(1, max_len + 1, device=lengths.device, dtype=torch.float32)   # (L,)
    k = torch.arange(1, dim + 1, device=lengths.device, dtype=torch.float32)       # (d,)
    J = lengths.to(torch.float32).clamp(min=1).unsqueeze(-1)                       # (*, 1)
    jj = j / J                                                                      # (*, L)
    pe = (1 - jj).unsqueeze(-1) - (k / dim) * (1 - 2 * jj).unsqueeze(-1)            # (*, L, d)
    return pe * (j <= J).unsqueeze(-1).to(pe.dtype)


def noisy_time_index(n_mem: Tensor, slots: int, noise: float) -> Tensor:
    """Temporal indices with random empty memories inserted (§4.1 "random noise").

    n_mem: (B,) number of real memories. Returns (B, slots) long: for each story an ordered
    random subset of 0..n+n_blank−1 (n_blank uniform in 0..⌈noise·n⌉) in its first n entries;
    entries beyond n are padding (their memories are masked anyway).
    """
    B = n_mem.size(0)
    extra = int(math.ceil(noise * slots))
    K = slots + extra
    dev = n_mem.device
    n_blank = torch.floor(torch.rand(B, device=dev) * (torch.ceil(noise * n_mem.float()) + 1)).long()
    total = n_mem + n_blank                                                     # (B,)
    pos = torch.arange(K, device=dev).expand(B, K)
    keys = torch.rand(B, K, device=dev).masked_fill(pos >= total[:, None], 2.0)
    first = keys.argsort(1)[:, :slots]                       # the n smallest keys lead each row
    first = first.masked_fill(pos[:, :slots] >= n_mem[:, None], 2 * K)
    return first.sort(1).values.clamp(max=K - 1)


@dataclass
class MemN2NConfig(FairseqDataclass):
    embed_dim: int = field(default=20, metadata={"help": "embedding size δ"})
    hops: int = field(default=3, metadata={"help": "number of memory hops K"})
    tying: TYING = field(default="layerwise", metadata={"help": "weight tying across hops"})
    position_encoding: bool = field(default=True, metadata={"help": "position encoding (else BoW)"})
    temporal_encoding: bool = field(default=True, metadata={"help": "learned T_A, T_C"})
    random_noise: float = field(default=0.1, metadata={
        "help": "share of empty memories inserted at random during training (0 = off)"})
    linear_start_epochs: int = field(default=0, metadata={
        "help": "epochs without the attention softmax at the start of training (0 = off)"})
    init_std: float = field(default=0.1, metadata={"help": "N(0, std²) initialisation"})
    empty_memories: EMPTY = field(default="mask", metadata={
        "help": "mask: attention over the non-empty slots only (docs/method.md §4.1); attend: the "
                "memory_size − n empty slots of the fixed-size memory take part in the softmax "
                "with score 0 and no content, as in the seed's code (a learned 'attend to "
                "nothing' option)"})


class MemN2NModel(BaseFairseqModel):
    """MemN2N (Sukhbaatar et al. 2015) with PE, TE, RN, layer-wise/adjacent tying (§4.1).

    forward(story (B, M, L), query (B, Lq)) -> (log_probs (B, V) float32,
    {"attn": (B, K, M) per-hop attention, "mem_mask": (B, M) bool}).
    """

    def __init__(self, cfg, dictionary, memory_size: int, answer_classes=None):
        super().__init__()
        self.cfg = cfg
        self.pad = dictionary.pad()
        self.vocab = len(dictionary)
        self.dim = cfg.embed_dim
        self.hops = cfg.hops
        self.tying = cfg.tying
        self.memory_size = memory_size
        self.linear_start = cfg.linear_start_epochs > 0
        # plain copies of the options read in every forward (fairseq passes an omegaconf
        # DictConfig, whose attribute access costs more than a small op)
        self.position_encoding = bool(cfg.position_encoding)
        self.temporal_encoding = bool(cfg.temporal_encoding)
        self.random_noise = float(cfg.random_noise)
        self.attend_empty = str(getattr(cfg, "empty_memories", "mask")) == "attend"
        t_rows = memory_size + int(math.ceil(cfg.random_noise * memory_size))
        n_tables = 2 if self.tying == "layerwise" else self.hops + 1
        std = cfg.init_std
        self.temporal = nn.ParameterList(
            [nn.Parameter(torch.randn(t_rows, self.dim) * std) for _ in range(n_tables)])
        keep = torch.ones(self.vocab, 1)
        keep[self.pad] = 0.0
        self.register_buffer("keep", keep, persistent=False)
        # (V,) 0 for the classes an answer may take, -1e9 for the others (probability 0 in
        # float32, and finite, so entropies stay 0·log 0 = 0); None: every symbol (the task's
        # --answer-classes; not saved: the task rebuilds it from the data)
        bias = None
        if answer_classes is not None:
            bias = torch.full((self.vocab,), -1e9)
            bias[torch.as_tensor(list(answer_classes), dtype=torch.long)] = 0.0
        self.register_buffer("answer_bias", bias, persistent=False)
        self.build_embeddings()
        if self.tying == "layerwise":
            self.out_proj = nn.Linear(self.dim, self.vocab, bias=False)
            nn.init.normal_(self.out_proj.weight, std=std)

    # ----------------------------------------------------------------- embeddings
    def embedding_names(self) -> List[str]:
        if self.tying == "layerwise":
            return ["A", "B", "C"]
        return [f"E{k}" for k in range(self.hops + 1)]

    def build_embeddings(self):
        self.emb = nn.ParameterDict({n: nn.Parameter(torch.randn(self.vocab, self.dim)
                                                     * self.cfg.init_std)
                                     for n in self.embedding_names()})

    def embedding_tables(self, samples: Optional[int], divergence: Optional[Tuple[str, float]] = None
                         ) -> Tuple[Dict[str, Tensor], int, Optional[WeightedDivergence]]:
        """name -> table: (V, d), or (S, V, d) for S draws; returns (tables, S, divergence term
        or None). ``divergence`` (mode, weight): see :meth:`forward`."""
        if divergence is not None:
            raise ValueError("criterion t_divergence needs a model with Student-t posteriors "
                             "(--arch t_memn2n); use --criterion qa_cross_entropy for memn2n")
        return {n: w * self.keep for n, w in self.emb.items()}, 1, None

    # ----------------------------------------------------------------- fairseq API
    @classmethod
    def build_model(cls, cfg, task):
        classes = task.answer_class_indices() if hasattr(task, "answer_class_indices") else None
        return cls(cfg, task.source_dictionary, task.cfg.memory_size, classes)

    def begin_epoch(self, epoch: int):
        """Linear start: the attention softmax is off for epochs 1..linear_start_epochs."""
        self.linear_start = epoch <= self.cfg.linear_start_epochs

    def get_normalized_probs(self, net_output, log_probs: bool, sample=None):
        lp = net_output[0].float()
        return lp if log_probs else lp.exp()

    def answer_log_probs(self, story: Tensor, query: Tensor) -> Tensor:
        """(B, V) float32 log-probabilities of the answer over the task dictionary."""
        return self(story, query)[0].float()

    def max_positions(self):
        return None

    # ----------------------------------------------------------------- forward
    def forward(self, story: Tensor, query: Tensor, divergence: Optional[Tuple[str, float]] = None):
        """story (B, M, L), query (B, Lq) -> (log p̄ (B, V) float32, extra).

        ``extra``: ``attn`` (B, hops, M), ``mem_mask``; in evaluation ``uncertainty`` (B, 3).
        ``divergence`` = (mode, weight), asked for by the ``t_divergence`` criterion (t-MEM-NN
        only): ``extra["divergence"]`` is then the :class:`WeightedDivergence` weight·D_t of the
        posteriors (computed with a training forward's draw in one node) and ``extra["nu"]`` the
        fitted ν per embedding name.
        """
        tables, S, div = self.embedding_tables(self.eval_samples(), divergence)
        logits, attn, mem_mask = self.memory_hops(story, query, tables, S)
        logits = logits.float()
        if self.answer_bias is not None:                                  # --answer-classes answers
            logits = logits + self.answer_bias
        lp = torch.log_softmax(logits, dim=-1)                            # (S·B, V)
        per_draw = None
        if S > 1:
            B = story.size(0)
            per_draw = lp.view(S, B, -1)
            lp = torch.logsumexp(per_draw, dim=0) - math.log(S)           # mean of probabilities
            attn = attn.view(S, B, *attn.shape[1:]).mean(0)
        extra = {"attn": attn, "mem_mask": mem_mask}
        if div is not None:
            extra["divergence"], extra["nu"] = div, dict(zip(self.names, div.nus))
        if not self.training:
            # (B, 3): H[p̄], E_s H[p_s], mutual information of the S draws (docs/uncertainty.md)
            extra["uncertainty"] = (unc.single(lp) if per_draw is None
                                    else unc.decompose(per_draw.transpose(0, 1), lp))
        return lp, extra

    def eval_samples(self) -> Optional[int]:
        return None

    def bag_weights(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        """Position-encoding bags of a set of sentences (exact rewrite of the PE sum).

        Since l_kj = a_j + k·b_j with a_j = 1 − j/J and b_j = −(1 − 2j/J)/d, the sentence vector
        Σ_j l_j ⊙ E x_j equals P_a E + k ⊙ (P_b E) with P_a[v] = Σ_{j: x_j = v} a_j and
        P_b[v] = Σ_{j: x_j = v} b_j: two (·, V) × (V, d) products instead of a gather over words.
        tokens (*, L) -> P_a, P_b (*, V) float32 (BoW when position encoding is off: P_b = 0).
        """
        P = self._bags(tokens, 0)
        return P[0], P[1]

    def _bags(self, tokens: Tensor, dim: int) -> Tensor:
        """:meth:`bag_weights` with P_a and P_b stacked at ``dim`` (one scatter for both).

        tokens (*, L) -> (*, V) pairs stacked at ``dim``: e.g. (B, n, L), dim 1 -> (B, 2, n, V),
        whose view (B·2n, V) is what the bag products need (no concatenation).
        """
        nonpad = tokens.ne(self.pad)
        J = nonpad.sum(-1, keepdim=True).clamp(min=1).float()                  # (*, 1)
        j = torch.arange(1, tokens.size(-1) + 1, device=tokens.device, dtype=torch.float32)
        if self.position_encoding:
            a = (1 - j / J) * nonpad                                            # (*, L)
            b = (2 * j / J - 1).mul_(nonpad / self.dim)
        else:
            a, b = nonpad.float(), torch.zeros_like(J).expand_as(nonpad)
        ab = torch.stack([a, b], dim)
        index = tokens.unsqueeze(dim).expand(ab.shape)
        shape = ab.shape[:-1] + (self.vocab,)
        return torch.zeros(shape, device=tokens.device).scatter_add_(-1, index, ab)

    def memory_hops(self, story: Tensor, query: Tensor, tables: Dict[str, Tensor], S: int):
        """Run the K hops for S parameter draws (S = 1 for point estimates).

        story (B, M, L), query (B, Lq); tables name -> (V, d) or (S, V, d). Returns logits
        (S·B, V), attention (S·B, K, M), memory mask (B, M). Rows s·B..(s+1)·B belong to draw s.
        """
        B, M, L = story.shape
        d = self.dim
        mem_mask = story.ne(self.pad).any(-1)                                  # (B, M)
        table_dtype = next(iter(tables.values())).dtype                      # half under fp16
        kvec = torch.arange(1, d + 1, device=story.device, dtype=table_dtype)
        Ps = self._bags(story, 1)                                              # (B, 2, M, V)
        Pq = self._bags(query[:, None], 1)                                     # (B, 2, 1, V)
        if self.training and self.random_noise > 0:
            tidx = noisy_time_index(mem_mask.sum(-1), M, self.random_noise)   # (B, M)
        else:
            tidx = torch.arange(M, device=story.device).expand(B, M)

        def sentences(P: Tensor, table: Tensor) -> Tensor:
            # (B, 2, n, V) x (V, d) or (S, V, d) -> (S·B, n, d)
            n = P.size(2)
            x = torch.matmul(P.view(1, B * 2 * n, -1).type_as(table),
                             table.view(-1, self.vocab, d))                     # (S, B·2n, d)
            # one unbind, not two slices: each slice's backward would zero-fill the whole x
            pa, pb = x.view(-1, B, 2, n, d).unbind(2)
            return torch.addcmul(pa, kvec, pb).reshape(-1, n, d)

        def memories(table: Tensor, temporal: Tensor) -> Tensor:              # (S·B, M, d)
            e = sentences(Ps, table)
            if self.temporal_encoding:
                # index_select: its backward (index_add) is twice as fast as embedding's
                t_enc = temporal.index_select(0, tidx.reshape(-1)).view(B, M, d)
                e = (e.view(-1, B, M, d) + t_enc).view(-1, M, d)
            return e

        if self.tying == "layerwise":
            u = sentences(Pq, tables["B"]).squeeze(1)                           # (S·B, d)
            m = memories(tables["A"], self.temporal[0])
            c = memories(tables["C"], self.temporal[1])
            ms, cs = [m] * self.hops, [c] * self.hops
        else:
            u = sentences(Pq, tables["E0"]).squeeze(1)
            e = [memories(tables[f"E{k}"], self.temporal[k]) for k in range(self.hops + 1)]
            ms, cs = e[:-1], e[1:]
        mask = mem_mask.repeat(S, 1) if S > 1 else mem_mask                     # (S·B, M)
        if self.attend_empty:
            # the memory_size − n empty slots (score 0, zero content) are one extra logit
            # log(memory_size − n): −inf when the memory is full
            n_empty = (self.memory_size - mask.sum(-1)).clamp(min=0).float()    # (S·B,)
            null = torch.log(n_empty).unsqueeze(-1)                              # (S·B, 1)
        attn = []
        for k in range(self.hops):
            # uᵀ m_i as a product and a sum: a batch of matrix-vector bmm calls (and their
            # outer-product backward) is several times slower on a CPU
            scores = (ms[k] * u.unsqueeze(1)).sum(-1).float()                  # (S·B, M)
            if self.linear_start and self.training:
                p = scores.masked_fill(~mask, 0.0)
            elif self.attend_empty:
                p = torch.softmax(torch.cat([scores.masked_fill(~mask, -1e9), null], -1),
                                  dim=-1)[:, :-1] * mask
            else:
                p = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1) * mask
            attn.append(p)
            u = u + torch.bmm(p.unsqueeze(1).type_as(cs[k]), cs[k]).squeeze(1)
        if self.tying == "layerwise":
            logits = self.out_proj(u)
        else:
            W = tables[f"E{self.hops}"].view(-1, self.vocab, d)                  # (S, V, d)
            logits = torch.bmm(u.view(W.size(0), -1, d), W.transpose(1, 2)).reshape(-1, self.vocab)
        return logits, torch.stack(attn, dim=1), mem_mask


@dataclass
class TMemN2NConfig(MemN2NConfig):
    prior_dof: float = field(default=10.0, metadata={"help": "ν of the prior t(0, I, ν)"})
    nu_init: float = field(default=100.0, metadata={"help": "initial ν_A, ν_B, ν_C"})
    sigma_init: float = field(default=0.01, metadata={"help": "initial posterior σ"})
    mc_samples: int = field(default=10, metadata={
        "help": "posterior draws averaged at evaluation (≥ 1), or 0: the posterior mean μ"})
    escort_sampler: SAMPLER = field(default="polar", metadata={
        "help": "construction of the escort draws (same distribution, unbiased gradients): "
                "polar = Bailey's polar method in closed form (no Gamma draw, several times "
                "cheaper on CPU); gamma = torch.distributions.StudentT's chi-square draw "
                "(gradient to ν through the Gamma)"})


class TMemN2NModel(MemN2NModel):
    """t-MEM-NN (D §6.3): Student-t posteriors over the embedding matrices (§4.2).

    Training: one escort draw per forward. Evaluation: mc_samples draws averaged in probability
    space, or the posterior mean. ``posterior`` (StudentTMatrices) stacks the matrices named
    ``names``; the forward returns the divergence when the criterion asks for it.
    """

    def build_embeddings(self):
        c = self.cfg
        self.names = self.embedding_names()
        self.posterior = StudentTMatrices(len(self.names), self.vocab, self.dim, c.init_std,
                                          c.sigma_init, c.nu_init, zero_rows=(self.pad,),
                                          sampler=str(getattr(c, "escort_sampler", "polar")))
        self.prior_dof = float(c.prior_dof)
        self.set_mc_samples(c.mc_samples)

    def set_mc_samples(self, value: int):
        """0 -> use μ; n ≥ 1 -> average n draws at evaluation. (Checkpoints written before the
        option became an int hold it as a string of digits: accepted.)"""
        v = str(value).strip()
        if isinstance(value, bool) or not v.isdigit():
            raise ValueError(f"--mc-samples must be an integer >= 0 (0: the posterior mean), "
                             f"got {value!r}")
        self.mc_samples = int(v)

    def nus(self) -> Dict[str, Tensor]:
        """name -> fitted ν (scalar tensors): nu_A, nu_B, nu_C with layer-wise tying."""
        return dict(zip(self.names, self.posterior.nu.unbind(0)))

    def nu_values(self) -> Dict[str, float]:
        """name -> fitted ν as Python floats (logging; no graph)."""
        return dict(zip(self.names, self.posterior.nu_values()))

    def eval_samples(self) -> Optional[int]:
        return None if self.training else self.mc_samples

    def embedding_tables(self, samples: Optional[int], divergence: Optional[Tuple[str, float]] = None
                         ) -> Tuple[Dict[str, Tensor], int, Optional[WeightedDivergence]]:
        div = None
        if samples is None:                                   # training: one escort draw
            if divergence is None:
                w = self.posterior.sample()
            else:                                             # the draw and weight·D_t in one node
                w, div = self.posterior.sample_with_divergence(self.prior_dof, *divergence)
            w, S = w.unbind(0), 1
        elif samples == 0:                                    # posterior mean
            w, S = self.posterior.mean().unbind(0), 1
        else:                                                 # (S, n, V, d) -> per name (S, V, d)
            w, S = self.posterior.sample(samples).unbind(1), samples
        if divergence is not None and div is None:            # evaluation: D_t of the posterior
            mode, weight = divergence
            div = self.posterior.weighted(self.posterior.divergence(self.prior_dof, mode), weight)
        return dict(zip(self.names, w)), S, div


register_model("memn2n", dataclass=MemN2NConfig)(MemN2NModel)
register_model("t_memn2n", dataclass=TMemN2NConfig)(TMemN2NModel)


def _base(args):
    args.embed_dim = getattr(args, "embed_dim", 20)
    args.hops = getattr(args, "hops", 3)


@register_model_architecture("memn2n", "memn2n_joint")
def memn2n_joint(args):
    """Joint training over the 20 tasks (Sukhbaatar et al. use δ = 50)."""
    args.embed_dim = getattr(args, "embed_dim", 50)
    _base(args)


@register_model_architecture("memn2n", "memn2n_adjacent")
def memn2n_adjacent(args):
    args.tying = getattr(args, "tying", "adjacent")
    _base(args)


@register_model_architecture("t_memn2n", "t_memn2n_joint")
def t_memn2n_joint(args):
    args.embed_dim = getattr(args, "embed_dim", 50)
    _base(args)
