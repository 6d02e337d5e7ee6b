"""VED: variational encoder-decoder with a sentence latent (Bahuleyan et al. 2018; docs/method.md §2.5).

Soft attention (§2.1) as usual, plus one latent vector per sentence

    q(z | x) = N(μ(h_N), diag σ²(h_N)),   p(z) = N(0, I),

μ and log σ² being linear maps of the final encoder state h_N (``enc_final``, (B, enc_final_dim)).
z (B, latent_dim) is concatenated to every decoder input (:meth:`decoder_input`) and to the output
layer input: the step's context is [c_t ; z], so ``context_dim = value_dim + latent_dim``.
Training draws z = μ + σ ⊙ ε (reparameterised); evaluation and decoding use z = μ.

Sentence loss ``ved_kl`` = KL(q(z|x) || N(0, I)) = ½ Σ_d (μ² + σ² − 1 − log σ²), float32.
Its weight is annealed (``--ved-kl-anneal``, default sigmoid):
    sigmoid: β / (1 + exp(−k (n − n₀)))      k = --ved-kl-anneal-rate, n₀ = --ved-kl-anneal-midpoint
    linear:  β · min(1, n / (2 n₀))          (also 0.5β at n₀; reaches β at 2 n₀)
    none:    β
with n the number of updates. Word dropout on the decoder inputs (keep probability
``--ved-word-keep``, default 0.75) is applied by the decoder, which reads :attr:`word_keep`.
"""
import math

import torch
import torch.nn as nn

from fairseq_acvi.modules.context.acvi import gaussian_kl_to_standard
from fairseq_acvi.modules.context.base import ContextInference, StepOutput, register_context
from fairseq_acvi.modules.context.soft import attend

ANNEALS = ("sigmoid", "linear", "none")


@register_context("ved")
class VEDContext(ContextInference):
    parallel = True
    DEFAULTS = dict(ved_latent_dim=100, ved_kl_anneal="sigmoid", ved_kl_anneal_rate=0.0025,
                    ved_kl_anneal_midpoint=2500, ved_beta=1.0, ved_word_keep=0.75)

    def __init__(self, args, value_dim, query_dim, enc_final_dim):
        super().__init__(args, value_dim, query_dim, enc_final_dim)
        self.latent_dim = self.option(args, "ved_latent_dim")
        if self.latent_dim <= 0:
            raise ValueError(f"--ved-latent-dim must be positive, got {self.latent_dim}")
        self.mu_net = nn.Linear(enc_final_dim, self.latent_dim)
        self.logvar_net = nn.Linear(enc_final_dim, self.latent_dim)
        self.logvar_min, self.logvar_max = -20.0, 10.0
        self.decoder_input_dim = self.latent_dim
        self.context_dim = value_dim + self.latent_dim
        self.anneal = self.option(args, "ved_kl_anneal")
        if self.anneal not in ANNEALS:
            raise ValueError(f"--ved-kl-anneal: unknown value {self.anneal!r}; choose from "
                             f"{', '.join(ANNEALS)}")
        self.rate = self.option(args, "ved_kl_anneal_rate")
        self.midpoint = self.option(args, "ved_kl_anneal_midpoint")
        self.beta = self.option(args, "ved_beta")
        if not 0 <= self.beta < float("inf"):
            raise ValueError(f"--ved-beta must be ≥ 0, got {self.beta}")
        if not self.rate >= 0:
            raise ValueError(f"--ved-kl-anneal-rate must be ≥ 0, got {self.rate}")
        self.word_keep = self.option(args, "ved_word_keep")
        if not 0.0 < self.word_keep <= 1.0:
            raise ValueError(f"--ved-word-keep must be in (0, 1], got {self.word_keep}")

    @staticmethod
    def add_args(parser):
        parser.add_argument("--ved-latent-dim", type=int, metavar="D",
                            help="dimension of the sentence latent z (default 100; 128 for "
                                 "summarization, docs/method.md §2.5)")
        parser.add_argument("--ved-kl-anneal", choices=list(ANNEALS),
                            help="schedule of the KL weight (default sigmoid)")
        parser.add_argument("--ved-kl-anneal-rate", type=float, metavar="K",
                            help="slope k of the sigmoid schedule β/(1+exp(-k(n-n0))) "
                                 "(default 0.0025)")
        parser.add_argument("--ved-kl-anneal-midpoint", type=float, metavar="N0",
                            help="update n0 at which the KL weight is β/2 (default 2500)")
        parser.add_argument("--ved-beta", type=float, metavar="B",
                            help="final weight of the KL term (default 1)")
        parser.add_argument("--ved-word-keep", type=float, metavar="P",
                            help="keep probability of decoder input words (word dropout, "
                                 "default 0.75; 1 = off)")

    def prepare(self, mem, enc_final, target_emb=None, target_pad=None):
        """enc_final (B, enc_final_dim) -> z (B, latent) in the model dtype, μ and σ² float32."""
        mu = self.mu_net(enc_final)
        var = self.logvar_net(enc_final).float().clamp(self.logvar_min, self.logvar_max).exp()
        if self.training:
            z = mu.float() + var.sqrt() * torch.randn_like(var)
        else:
            z = mu.float()
        return {"ved_z": z.to(mu.dtype), "ved_mu": mu.float(), "ved_var": var,
                **super().prepare(mem, enc_final)}

    def decoder_input(self, prepared):
        return prepared["ved_z"]

    def sentence_losses(self, prepared):
        return {"ved_kl": gaussian_kl_to_standard(prepared["ved_mu"], prepared["ved_var"])}

    def step(self, scores, query, mem, prepared, t, state=None):
        attn, state = self.normalize(scores, mem, prepared, state)     # (B, [T,] N) float32 (§3.5)
        c = attend(attn, mem.values)                                   # (B, [T,] value_dim)
        z = prepared["ved_z"].to(c.dtype)                              # (B, latent)
        if c.dim() == 3:
            z = z.unsqueeze(1).expand(-1, c.size(1), -1)
        mean = torch.cat([c, z], dim=-1)                               # (B, [T,] value_dim + latent)
        return StepOutput(mean=mean, attn=attn, state=state)

    def kl_weight(self, num_updates: float) -> float:
        """The annealed KL weight after ``num_updates`` updates (see the module docstring)."""
        n = float(num_updates)
        if self.anneal == "sigmoid":
            x = -self.rate * (n - self.midpoint)
            # 1/(1+e^x) without overflow for large x
            w = math.exp(-x) / (1.0 + math.exp(-x)) if x > 0 else 1.0 / (1.0 + math.exp(x))
        elif self.anneal == "linear":
            w = 1.0 if self.midpoint <= 0 else min(1.0, n / (2.0 * self.midpoint))
        else:
            w = 1.0
        return self.beta * w

    def loss_weight(self, name):
        return self.kl_weight(self.num_updates) if name == "ved_kl" else 1.0
