"""Student's-t posteriors, escort sampling and the t-divergence (docs/method.md §4.2; D 48-62).

Univariate notation per element l of a matrix Θ (all functions are elementwise and summed):

* posterior  q = t(μ, σ², ν_q), prior p = t(0, 1, ν_p), t = 1 + 2/(1 + ν_q)          (D 51, 48, 59)
* escort     q̃ = t(μ, ν_q/(ν_q+2)·σ², ν_q+2); its variance is σ² (ν_q > 0)           (D 60)
* sample     Θ = μ + √(ν_q/(ν_q+2))·σ·ε,  ε ~ t(0, 1, ν_q+2)  (reparameterised, gradients
  reach ν_q)                                                                          (D 61-62)
* D_t(q‖p) = ∫ q̃ log_t q − ∫ q̃ log_t p,  log_t(x) = (x^{1−t} − 1)/(1 − t)            (D 46)

Two exact samplers of ε (``--escort-sampler``); they draw from the same distribution and give
unbiased pathwise gradients, differing only in which noise is held fixed when ν moves:

``gamma``  ε = z/√(u/k), z ~ N(0, 1), u = 2g, g ~ Gamma(k/2, 1), k = ν+2: the chi-square
           construction of ``torch.distributions.StudentT.rsample`` (same draws for a seed),
           dε/dν through the Gamma's implicit reparameterisation gradient.
``polar``  ε = cos(2πU)·√(k·expm1(2E/k)), U ~ U(0, 1), E ~ Exp(1): Bailey's (1994) polar
           method for the t distribution with its accepted point written in polar form (its
           squared radius is e^{−E}), so no rejection and no Gamma draw; dε/dν is an
           elementwise closed form. Much cheaper than the Gamma on CPU (a serial rejection
           sampler plus a series for its gradient): see ``benchmarks/bench_babi.py``.

Three forms of the divergence (``--t-divergence``):

``seed``   (D 56) verbatim:  Σ_l [Ψ_ql(1 + 1/ν_q) − Ψ_p(1 + (σ_l² + μ_l²)/ν_p)] / (1 − t).
           Exact only when ν_q = ν_p (Ding et al. 2011); otherwise not a divergence (can be < 0).
``exact``  the definition: the first term in closed form, Ψ_q(1 + 1/ν_q) − 1 over (1 − t), and
           ∫ q̃ log_t p = (E_q̃[p^{1−t}] − 1)/(1 − t) with the expectation by fixed-node
           Gauss-Legendre quadrature (z = tan θ substitution, computed in float64). The
           expectation is infinite when 2(ν_p+1)/(ν_q+1) ≥ ν_q+2 (a posterior with much heavier
           tails than the prior); the fixed nodes then return a large finite value that keeps
           growing as ν_q falls, i.e. a barrier, not the (infinite) true value.
``tied``   the prior's ν is tied to ν_q, so (D 56) is exact.

Ψ_q = (Γ((ν_q+1)/2) / (Γ(ν_q/2)(πν_q)^{1/2} σ))^{−2/(ν_q+1)},  Ψ_p the same with ν_p, σ = 1
(D 57-58), evaluated in log space with lgamma.

The package, one job per file: :mod:`.distribution` (the density's constants, Ψ, the
parameterisation of σ and ν), :mod:`.samplers` (the escort draws), :mod:`.divergence` (the three
forms of D_t), :mod:`.fused` (the autograd nodes of a training step, the Python twin of the
compiled CPU kernel in fairseq_acvi/modules/student_t/cpu_kernel.py) and :mod:`.posterior`
(:class:`StudentTMatrices`, the module the t-MEM-NN model holds).
"""
from fairseq_acvi.modules.student_t.distribution import (  # noqa: F401
    DIVERGENCES, SAMPLERS, _nu_from, _nu_values, _sigma_from, escort_scale, log_psi,
    log_t_density_const)
from fairseq_acvi.modules.student_t.divergence import (  # noqa: F401
    EscortQuadrature, t_divergence, t_divergence_exact, t_divergence_seed)
from fairseq_acvi.modules.student_t.fused import (  # noqa: F401
    _digamma, _PosteriorDraw, _PosteriorStep, _SeedDivergence)
from fairseq_acvi.modules.student_t.posterior import StudentTMatrices, WeightedDivergence  # noqa: F401
from fairseq_acvi.modules.student_t.samplers import (  # noqa: F401
    _polar_forward, _polar_nu_weight, escort_noise, polar_from_uniforms, polar_noise,
    sample_escort)
