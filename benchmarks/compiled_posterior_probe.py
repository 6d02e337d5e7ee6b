"""Probe (not part of the plugin): the t-MEM-NN training step's posterior work compiled with
``torch.compile``, timed inside the full bAbI update of ``bench_babi.py``.

What it measures: the polar escort draw and the ``tied`` divergence written as plain tensor ops
(no Python-float ν algebra, no host syncs), compiled into one graph (forward and backward), then
patched into ``StudentTMatrices.sample`` for the training draw, so that ``bench_babi.py`` times
t-MEM-NN / MemN2N with it. It first checks the compiled step against the plugin's Python fused
node (same seed: draw, divergence and gradients); the compiled CPU kernel, which draws its own
noise, is switched off while it runs, so on the CPU this compares the probe with the old path.

    python benchmarks/compiled_posterior_probe.py --device cuda [--mode reduce-overhead]
        [bench_babi.py options]

Findings (2026-11-24, BENCHMARKS.md): on an H100 the update ratio falls from 1.34× to 1.19×
(``default``) / 1.16× (``reduce-overhead``, CUDA graphs), not to 1.05×; on the 2-core CPU it
does not help (0.43 → 0.33 ms for the step alone, lost in the update). Two hazards kept it out
of the plugin: inductor's CPU code computes ``expm1`` as ``exp(x) − 1`` (``expm1(1e-8)`` gives
0; here replaced by a series below 0.1), and compiling costs seconds per new shape and process.
"""
import argparse
import os
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import fairseq_acvi  # noqa: E402,F401
from fairseq_acvi.modules import cpu_kernel  # noqa: E402
from fairseq_acvi.modules.student_t import (StudentTMatrices, _nu_from,  # noqa: E402
                                            _polar_nu_weight, _sigma_from, log_t_density_const,
                                            polar_noise)


def _expm1(x):
    """expm1 that survives inductor's CPU lowering: a degree-6 series below 0.1."""
    small = x * (1 + x * (0.5 + x * (1 / 6 + x * (1 / 24 + x * (1 / 120 + x / 720)))))
    return torch.where(x < 0.1, small, torch.exp(x) - 1)


class _PolarScale(torch.autograd.Function):
    """zr = c·√(ν·expm1(2E/(ν+2))) with the closed-form dzr/dν = zr·(1/(2ν) − m) (student_t.py)."""

    @staticmethod
    def forward(ctx, nu3, c, e):
        x = e * (2 / (nu3 + 2))
        em = _expm1(x)
        zr = torch.sqrt(em * nu3) * c
        ctx.save_for_backward(nu3, x, em, zr)
        return zr

    @staticmethod
    def backward(ctx, g):
        nu3, x, em, zr = ctx.saved_tensors
        m = _polar_nu_weight(x, nu3, em)
        return (g * zr * (1 / (2 * nu3) - m)).sum_to_size(nu3.shape), None, None


def posterior_step(mu, rho, log_nu, keep, c, e, n_keep: float):
    """Draw (D 61, polar) and tied (D 56) divergence; the ν algebra in float64 tensors."""
    sigma = _sigma_from(rho)
    nu = _nu_from(log_nu)
    nu3 = nu.view(-1, 1, 1)
    draw = (mu + sigma * _PolarScale.apply(nu3, c, e)) * keep
    nd = nu.double()
    a = 2 / (nd + 1)
    ee = torch.exp(-a * log_t_density_const(nd))
    s1 = (torch.exp(a.float().view(-1, 1, 1) * torch.log(sigma)) * keep).sum((1, 2)).double()
    s2 = ((sigma * sigma + mu * mu) * keep).sum((1, 2)).double()
    div = (-(1 + nd) / 2 * ((1 + 1 / nd) * ee * s1 - ee * (n_keep + s2 / nd))).sum().float()
    return draw, div


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="default", help="torch.compile mode")
    args, rest = ap.parse_known_args()
    dev = args.device
    step = torch.compile(posterior_step, mode=args.mode, fullgraph=True, dynamic=False)
    # the reference is the Python node, which draws with torch.rand as the compiled step does
    # (the CPU kernel has its own generator)
    cpu_kernel.ENABLED = False
    eager_sample = StudentTMatrices.sample

    def sample(self, s=None):
        slot = self._divergence_slot
        if (s is None and slot is not None and not slot.value and slot.prior_dof is None
                and self.sampler == "polar" and self.mu.dtype == torch.float32):
            c, e = polar_noise(self.mu.shape, torch.float32, self.mu.device)
            out, div = step(self.mu, self.rho, self.log_nu, self.keep, c, e, self.n_keep)
            slot.fill(div * slot.weight, div.item() if div.device.type == "cpu" else div.detach())
            return out
        return eager_sample(self, s)

    for V in (23, 178):                          # task 1's and the joint dictionary's sizes
        torch.manual_seed(0)
        post = StudentTMatrices(4, V, 50, zero_rows=(1,)).to(dev)
        w = torch.randn(4, V, 50, device=dev)
        params = [post.mu, post.rho, post.log_nu]
        res = []
        for f in (eager_sample, sample):
            torch.manual_seed(1)
            with post.fused_divergence(10.0, "tied") as slot:
                d = f(post)
            g = torch.autograd.grad((d * w).sum() + slot.value[0] * 1e-3, params)
            res.append((d, slot.value[0], g))
        (d1, D1, g1), (d2, D2, g2) = res
        print(f"V={V}: draw max |diff| {(d1 - d2).abs().max().item():.1e}, divergence rel. diff "
              f"{abs(D2.item() / D1.item() - 1):.1e}, gradient rel. diff (μ, ρ, log ν) "
              + " ".join(f"{((a - b).abs().max() / b.abs().max()).item():.1e}"
                         for a, b in zip(g1, g2)))
    StudentTMatrices.sample = sample
    import bench_babi
    sys.argv = ["bench_babi.py", "--device", dev] + rest
    bench_babi.main()


if __name__ == "__main__":
    main()
