"""ACVI: amortized context vector inference (docs/method.md §2.2; P 13-25, D 79-88).

The context is latent with the Gaussian-mixture posterior
    p(c_t; D) = Σ_i a_ti N(c_t | μ(h_i), diag σ²(h_i))                         (P 13, 17)
and prior N(0, I) (P 21). Training draws one reparameterised sample per step from the
moment-matched Gaussian (D 85-87)
    m_t = Σ_i a_ti μ(h_i),   v_t = Σ_i a_ti² σ²(h_i),   c_t = m_t + √v_t ⊙ ε,
and adds KL_t = ½ Σ_d (m_td² + v_td − 1 − log v_td)  (corrected D 84), computed in float32.
With ``--acvi-free-bits λ`` the optimised term is Σ_d max(λ, KL_td) (a per-dimension floor in nats,
Kingma et al. 2016 applied per token; no gradient below λ); the logged ``kl`` is that term.

Diagnostics (weight 0, logged per target token by the ``elbo`` criterion): the KL's two parts,
``kl_mean_part`` = ½ ‖m_t‖² and ``kl_var_part`` = ½ Σ_d (v_td − 1 − log v_td) (they sum to the
true KL_t), ``ctx_norm2`` = ‖m_t‖² and ``ctx_var`` = mean_d v_td (the context's posterior variance).
Evaluation averages the predictive distribution over K = ``--mc-samples`` samples (D 88) drawn in
one batched call; K = 0 uses m_t. The recurrent path always uses m_t (beams never fork per sample),
so a decoder step computes only a_t and m_t; v_t, the KL and the samples are formed for all steps
at once after the loop (:meth:`ACVIContext.finish`). ``--acvi-train-samples 0`` trains on m_t instead
of a sample: the deterministic control (the same networks without the latent noise).
"""
from dataclasses import replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from fairseq_acvi.mc_prediction.combination import check_mc_combine
from fairseq_acvi.mc_prediction.sampling import check_mc_sampling, draw_gaussian
from fairseq_acvi.modules.context.base import (ContextInference, StepOutput, check_sample_count,
                                               register_context)
from fairseq_acvi.modules.context.soft import attend
from fairseq_acvi.modules.precision import at_least_float32


def mlp(dim_in: int, hidden: int, dim_out: int, depth: int) -> nn.Sequential:
    """``depth`` hidden ReLU layers of size ``hidden`` followed by a linear map."""
    layers, d = [], dim_in
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    layers.append(nn.Linear(d, dim_out))
    return nn.Sequential(*layers)


def gaussian_kl_to_standard(mean, var):
    """KL(N(mean, diag var) || N(0, I)) summed over the last dim, in float32. (..., d) -> (...)."""
    mean, var = at_least_float32(mean), at_least_float32(var)
    return 0.5 * (mean.pow(2) + var - 1.0 - var.log()).sum(-1)


def gaussian_kl_parts(mean, var):
    """The two parts of KL(N(mean, diag var) || N(0, I)) per dimension, float32:
    (½ mean², ½ (var − 1 − log var)), each (..., d); their sum over d is the KL."""
    mean, var = at_least_float32(mean), at_least_float32(var)
    return 0.5 * mean.pow(2), 0.5 * (var - 1.0 - var.log())


#: ACVI's defaults, in every model: the configuration chosen on Multi30K En→De validation
#: (docs/results/multi30k_acvi_remedies_2026-11-26.md) and used since on En→Fr, the transformer,
#: CNN/DM and a 3,000-pair corpus: β = 1e-4, the KL off for the first 234 updates and then a
#: 117-update linear warm-up, the annotations normalised before μ and σ², and the K evaluation
#: samples drawn in antithetic pairs. The schedule counts updates, not epochs: the drift of σ²
#: towards the prior that the delay prevents takes some 30 updates under Adam whatever the corpus
#: (docs/acvi_kl_notes.md §5), and the delay must outlast the updates the decoder needs to start
#: relying on its source (the rule for another corpus: docs/acvi_kl_notes.md §6).
VALIDATED_CHOICE = dict(acvi_beta=1e-4, acvi_kl_delay_updates=234, acvi_kl_warmup_updates=117,
                        acvi_value_norm="layernorm", mc_sampling="antithetic")

#: the papers' set-up (P 22, D 83): β = 1 from the first update, no schedule, the annotations as
#: they are, iid evaluation samples — the ``*_paper`` presets (``acvi_lstm_paper``)
PAPERS_CHOICE = dict(acvi_beta=1.0, acvi_kl_delay_updates=0, acvi_kl_warmup_updates=0,
                     acvi_value_norm="none", mc_sampling="iid")

#: logged by the elbo criterion, never added to the loss (weight 0)
DIAGNOSTICS = ("kl_mean_part", "kl_var_part", "ctx_norm2", "ctx_var")


@register_context("acvi")
class ACVIContext(ContextInference):
    parallel = True
    DEFAULTS = dict(acvi_mean="identity", acvi_logvar_layers=1, acvi_logvar_init=-6.0,
                    acvi_logvar_bound=None, acvi_sampler="gaussian", acvi_gumbel_temperature=0.5,
                    acvi_free_bits=0.0, acvi_kl_cycle_updates=0, acvi_train_samples=1,
                    **VALIDATED_CHOICE)

    def __init__(self, args, value_dim, query_dim, enc_final_dim):
        super().__init__(args, value_dim, query_dim, enc_final_dim)
        d = value_dim
        depth = self.option(args, "acvi_logvar_layers")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise ValueError(f"--acvi-logvar-layers must be a whole number ≥ 0, got {depth!r}")
        self.mean_net = mlp(d, d, d, 1) if self.option(args, "acvi_mean") == "mlp" else None
        #: ``--acvi-value-norm layernorm``: the annotations are normalised (no parameters) before μ and σ²
        self.value_norm = self.option(args, "acvi_value_norm")
        if self.value_norm not in ("none", "layernorm"):
            raise ValueError(f"--acvi-value-norm must be none or layernorm, got {self.value_norm!r}")
        self.logvar_net = mlp(d, d, d, depth)
        # start close to the σ → 0 limit (= soft attention): with σ² ≈ 1 at initialisation the
        # noise drowns the (small) LSTM annotations and the decoder learns to ignore the context
        self.logvar_init = self.option(args, "acvi_logvar_init")
        self.reset_method_parameters()
        self.logvar_min, self.logvar_max = -20.0, 10.0
        #: smooth upper bound X on log σ² (``--acvi-logvar-bound``): X − softplus(X − raw), or None
        self.logvar_bound = self.option(args, "acvi_logvar_bound")
        if self.logvar_bound is not None and not self.logvar_min < self.logvar_bound <= self.logvar_max:
            raise ValueError(f"--acvi-logvar-bound must lie in ({self.logvar_min}, {self.logvar_max}], "
                             f"got {self.logvar_bound}")
        self.sampler = self.option(args, "acvi_sampler")
        #: samples per step in training: 1 (the method) or 0 (the deterministic control, c_t = m_t)
        self.train_samples = self.option(args, "acvi_train_samples")
        if self.train_samples not in (0, 1):
            raise ValueError(f"--acvi-train-samples must be 0 or 1, got {self.train_samples}")
        self.gumbel_tau = self.option(args, "acvi_gumbel_temperature")
        if not self.gumbel_tau > 0:
            raise ValueError(f"--acvi-gumbel-temperature must be > 0, got {self.gumbel_tau}")
        self.beta = self.option(args, "acvi_beta")
        if not 0 <= self.beta < float("inf"):
            raise ValueError(f"--acvi-beta must be ≥ 0 (the KL's weight; a negative one rewards "
                             f"moving away from the prior), got {self.beta}")
        self.free_bits = self.option(args, "acvi_free_bits")
        if self.free_bits < 0:
            raise ValueError(f"--acvi-free-bits must be ≥ 0, got {self.free_bits}")
        self.derive_defaults(args)
        self.warmup = self.option(args, "acvi_kl_warmup_updates")
        self.cycle = self.option(args, "acvi_kl_cycle_updates")
        self.delay = self.option(args, "acvi_kl_delay_updates")
        if self.delay < 0:
            raise ValueError(f"--acvi-kl-delay-updates must be ≥ 0, got {self.delay}")
        if self.warmup < 0 or self.cycle < 0 or (self.warmup > 0 and self.cycle > 0):
            raise ValueError("--acvi-kl-warmup-updates and --acvi-kl-cycle-updates must be ≥ 0 and "
                             f"at most one of them set, got {self.warmup} and {self.cycle}")
        self.mc_samples = check_sample_count("--mc-samples", self.option(args, "mc_samples"))
        #: how the K evaluation samples are combined (``--mc-combine``; training: one sample)
        self.mc_combine = check_mc_combine(self.option(args, "mc_combine"))
        #: ``--mc-sampling antithetic``: the K evaluation samples in ± pairs (training: one sample)
        self.antithetic = check_mc_sampling(self.option(args, "mc_sampling")) == "antithetic"

    @staticmethod
    def derive_defaults(args):
        """Cyclical annealing takes the place of the warm-up: with ``--acvi-kl-cycle-updates``
        set and no ``--acvi-kl-warmup-updates``, the warm-up is 0, not its default."""
        if (getattr(args, "acvi_kl_cycle_updates", None) or 0) > 0 \
                and getattr(args, "acvi_kl_warmup_updates", None) is None:
            args.acvi_kl_warmup_updates = 0

    def reset_method_parameters(self):
        """The log σ² output bias starts at ``--acvi-logvar-init`` (kept by the model's uniform
        initialisation, modules/seq2seq/init.py)."""
        nn.init.constant_(self.logvar_net[-1].bias, self.logvar_init)

    @staticmethod
    def add_args(parser):
        parser.add_argument("--acvi-mean", choices=["identity", "mlp"],
                            help="μ(h): identity (P 17, default) or a 2-layer MLP (D 79)")
        parser.add_argument("--acvi-value-norm", choices=["none", "layernorm"],
                            help="normalise each annotation h_i to zero mean and unit variance over its "
                                 "dimensions (layer norm without parameters) before μ and σ²: the "
                                 "context's scale then matches the N(0, I) prior's (default layernorm; "
                                 "none: the papers' annotations as they are)")
        parser.add_argument("--acvi-logvar-layers", type=int, metavar="L",
                            help="hidden ReLU layers of the log σ² network (P 18: 1, D 80: 2)")
        parser.add_argument("--acvi-logvar-init", type=float, metavar="X",
                            help="initial bias of the log σ² output layer (default -6: starts "
                                 "near soft attention)")
        parser.add_argument("--acvi-logvar-bound", type=float, metavar="X",
                            help="smooth upper bound on log σ²: X − softplus(X − raw), so that "
                                 "every component's σ² stays below e^X and keeps a gradient "
                                 "(default: none, only the clamp to [-20, 10])")
        parser.add_argument("--acvi-sampler", choices=["gaussian", "gumbel"],
                            help="training sample: moment-matched Gaussian with one ε per step "
                                 "(default) or Gumbel-softmax mixture sampling (P 23)")
        parser.add_argument("--acvi-gumbel-temperature", type=float, metavar="TAU")
        parser.add_argument("--acvi-train-samples", type=int, choices=[0, 1], metavar="S",
                            help="context samples per step in training: 1 (the method, default) "
                                 "or 0, the deterministic control that trains on the mean m_t — "
                                 "the same networks (μ, attention) without the latent noise; the "
                                 "KL is still computed, logged and weighted by β")
        parser.add_argument("--acvi-beta", type=float, metavar="B",
                            help="weight of the KL term, ≥ 0 (default 1e-4; the papers: 1)")
        parser.add_argument("--acvi-kl-warmup-updates", type=int, metavar="N",
                            help="linear KL warm-up from 0 to β over N updates, after the delay "
                                 "(default 117; 0 = off)")
        parser.add_argument("--acvi-kl-cycle-updates", type=int, metavar="N",
                            help="cyclical KL annealing (Fu et al. 2019): in every cycle of N "
                                 "updates the weight rises linearly from 0 to β over the first "
                                 "half, then stays at β (0 = off, the default; it replaces the "
                                 "warm-up)")
        parser.add_argument("--acvi-kl-delay-updates", type=int, metavar="N",
                            help="KL weight 0 for the first N updates; the warm-up or cycles "
                                 "start after them (default 234; 0 = off). With Adam the KL's small but "
                                 "one-signed gradient on the log σ² network raises σ² toward 1 "
                                 "within ~30 updates at any β > 0 unless the decoder already "
                                 "relies on the context (docs/acvi_kl_notes.md §5)")
        parser.add_argument("--acvi-free-bits", type=float, metavar="L",
                            help="per-dimension KL floor in nats: the loss uses Σ_d max(L, KL_td) "
                                 "(0 = off, the default)")

    def prepare(self, mem, enc_final, target_emb=None, target_pad=None):
        mu, var = self.value_moments(mem.values)
        # (B, N, d) float32 both: the moments and the KL are computed in float32 (docs/method.md §2.2)
        return {"acvi_mu": mu, "acvi_var": var, **super().prepare(mem, enc_final)}

    # -- the maths, shared with the transformer's per-head adapter (modules/transformer_context.py)
    def value_moments(self, h):
        """Component means and variances (P 17-18; §2.2): h (..., N, d) -> μ(h), σ²(h), each
        (..., N, d) float32 (log σ² under the smooth ``--acvi-logvar-bound`` when set, then clamped
        to [logvar_min, logvar_max]). Under ``--acvi-value-norm layernorm`` h is first normalised
        over d, in float32."""
        if self.value_norm == "layernorm":
            h = F.layer_norm(at_least_float32(h), h.shape[-1:]).to(h.dtype)
        mu = self.mean_net(h) if self.mean_net is not None else h
        logvar = at_least_float32(self.logvar_net(h))
        if self.logvar_bound is not None:
            logvar = self.logvar_bound - F.softplus(self.logvar_bound - logvar)
        logvar = logvar.clamp(self.logvar_min, self.logvar_max)
        return at_least_float32(mu), logvar.exp()

    def kl_terms(self, m, v):
        """The loss terms of a context with moments m, v (..., d) float32 (§2.2, corrected D 84):
        name -> (...) float32: ``kl`` (with the free-bits floor when set) and the weight-0
        diagnostics of :data:`DIAGNOSTICS` (no gradient)."""
        mean_part, var_part = gaussian_kl_parts(m, v)                  # (..., d) float32 each
        kl_d = mean_part + var_part
        kl = (kl_d.clamp_min(self.free_bits) if self.free_bits > 0 else kl_d).sum(-1)
        with torch.no_grad():
            mean_sum, var_sum = mean_part.sum(-1), var_part.sum(-1)
            return {"kl": kl, "kl_mean_part": mean_sum, "kl_var_part": var_sum,
                    "ctx_norm2": 2.0 * mean_sum, "ctx_var": v.mean(-1)}

    def step(self, scores, query, mem, prepared, t, state=None):
        """The recurrent path's part only: a_t and m_t = Σ_i a_ti μ(h_i). The variance, the KL and
        the samples, which the recurrence never reads, are formed for all steps in :meth:`finish`.
        a_t = softmax(e_t) or another ``--attention-normalizer`` (docs/method.md §3.5)."""
        attn, state = self.normalize(scores, mem, prepared, state)     # (B, [T,] N) float32
        m = attend(attn, prepared["acvi_mu"])                           # (B, [T,] d) float32
        aux = {"m": m}
        if self.training and self.sampler == "gumbel":
            # the mixture's log-weights: the scores themselves under softmax, else log a_t
            # (−inf where a_t = 0, with no gradient there)
            aux["scores"] = (scores if self.normalizer.name == "softmax" else
                             torch.where(attn > 0, attn.clamp_min(1e-30).log(),
                                         torch.full_like(attn, float("-inf"))))
        return StepOutput(mean=m.to(mem.values.dtype), attn=attn, aux=aux, state=state)

    def finish(self, out, prepared):
        """All T steps at once: v_t = Σ_i a_ti² σ²(h_i) (D 87), the KL terms (B, T) and the
        samples (B, T, K, d) — ``--acvi-train-samples`` (1, or 0 for the deterministic control) for
        training, K = ``--mc-samples`` for evaluation; none (the mean m_t) when that number is 0."""
        mu, var = prepared["acvi_mu"], prepared["acvi_var"]            # (B, N, d) float32
        m = out.aux["m"]                                               # (B, T, d) float32
        v = torch.bmm(out.attn.pow(2), var).clamp_min(1e-12)           # (B, T, d) float32
        k = self.train_samples if self.training else self.mc_samples
        if k <= 0:
            samples = None
        elif self.training and self.sampler == "gumbel":
            samples = self._gumbel_sample(out.aux["scores"], mu, var).unsqueeze(2).to(out.mean.dtype)
        else:
            samples = draw_gaussian(m, v, k, out.mean.dtype,           # (B, T, K, d)
                                    antithetic=self.antithetic and not self.training)
        return replace(out, samples=samples, losses=self.kl_terms(m, v),
                       combine="prob" if self.training else self.mc_combine)

    def _gumbel_sample(self, scores, mu, var):
        """Relaxed mixture sample (P 23): z = softmax((log a + g)/τ), c = Σ z_i μ_i + √(Σ z_i σ_i²) ε.
        scores (B, T, N) (−inf at padding), mu and var (B, N, d) float32 -> (B, T, d) float32."""
        z = F.gumbel_softmax(torch.log_softmax(at_least_float32(scores), -1), tau=self.gumbel_tau,
                            dim=-1)
        m, v = torch.bmm(z, mu), torch.bmm(z, var)
        return m + v.sqrt() * torch.randn_like(m)

    def loss_weight(self, name):
        if name in DIAGNOSTICS:
            return 0.0
        if name != "kl":
            return 1.0
        n = self.num_updates - self.delay
        if n < 0:
            return 0.0
        if self.warmup > 0:
            return self.beta * min(1.0, n / self.warmup)
        if self.cycle > 0:
            return self.beta * min(1.0, (n % self.cycle) / (0.5 * self.cycle))
        return self.beta
