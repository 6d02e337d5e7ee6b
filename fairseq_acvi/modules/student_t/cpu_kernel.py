"""The t-MEM-NN training step as a compiled CPU kernel (``fairseq_acvi/modules/student_t/posterior_step.cpp``).

The kernel computes what :class:`fairseq_acvi.modules.student_t._PosteriorStep` computes with the
``polar`` sampler (the escort draw of D 61-62 and the (D 56) divergence, forward and backward, in one
autograd node), for float32 CPU tensors, in one pass over the elements with ATen's vectorised
math instead of ~50 tensor operations. Its noise comes from a counter-based generator seeded by
one draw from torch's default generator (so ``torch.manual_seed`` fixes it; the numbers differ
from ``torch.rand``'s, not their distribution); the forward keeps two per-element arrays for the
backward (∂Θ/∂σ and the ν weight), which recomputes the σ terms from ρ. The Python node stays the reference (and the path for
CUDA, other dtypes and the ``gamma`` sampler); ``tests/test_cpu_kernel.py`` checks that both agree
on the same noise.

It is compiled on first use with ``torch.utils.cpp_extension.load`` (about a minute, cached
under torch's extensions folder, ``TORCH_EXTENSIONS_DIR``) for the CPU it runs on: AVX-512 or
AVX2 code where PyTorch reports that capability, ATen's portable vector code elsewhere. If
compiling fails (no C++ compiler, no ninja), a warning says why and training uses the Python
node: the same distribution, slower. ``FAIRSEQ_ACVI_CPU_KERNEL=0`` turns the kernel off (e.g.
to reproduce a run made before it existed: the Python node draws its noise with ``torch.rand``).
"""
from __future__ import annotations

import logging
import os
import platform
import threading
import warnings
from pathlib import Path
from typing import Optional

import torch

SOURCE = Path(__file__).resolve().parent / "posterior_step.cpp"
ENV = "FAIRSEQ_ACVI_CPU_KERNEL"

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_state = {"module": None, "tried": False, "error": None}
#: False when ``FAIRSEQ_ACVI_CPU_KERNEL=0`` (read once, at import; tests switch it here)
ENABLED = os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")

_ISA_FLAGS = {
    "avx512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma",
               "-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512"],
    "avx2": ["-mavx2", "-mfma", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"],
    "default": ["-DCPU_CAPABILITY=DEFAULT"],
}


def native_isa() -> str:
    """The instruction set to build for: PyTorch's own choice for this CPU (at::vec's
    CPU_CAPABILITY) on x86-64, ATen's portable vector code elsewhere."""
    cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "DEFAULT"
    if platform.machine().lower() in ("x86_64", "amd64") and cap in ("AVX512", "AVX2"):
        return cap.lower()
    return "default"


def build(isa: str):
    """Compile (or load the cached build of) the kernel for ``isa`` (avx512 | avx2 | default)."""
    from torch.utils.cpp_extension import load as load_extension
    return load_extension(name=f"fairseq_acvi_posterior_step_{isa}", sources=[str(SOURCE)],
                          extra_cflags=["-O3"] + _ISA_FLAGS[isa], verbose=False)


def load():
    """The compiled module for this CPU, or None when it is turned off or cannot be built (then
    a warning, once, says why). The first call in a process compiles it or loads the cached
    build (about a minute the first time on a machine)."""
    if not ENABLED:
        return None
    if _state["tried"]:
        return _state["module"]
    with _lock:
        if not _state["tried"]:
            isa = native_isa()
            logger.info(f"t-MEM-NN CPU kernel: loading (or, the first time, compiling) "
                        f"{SOURCE.name} for {isa}")
            try:
                _state["module"] = build(isa)
            except Exception as exc:  # noqa: BLE001 - any build failure falls back to Python
                _state["error"] = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"fairseq_acvi: could not build the t-MEM-NN CPU kernel ({SOURCE.name}); "
                              f"using the Python implementation (the same distribution, slower). "
                              f"Set {ENV}=0 to silence this. Cause: {_state['error'][:500]}")
            _state["tried"] = True
    return _state["module"]


def usable(mu: torch.Tensor, rho: Optional[torch.Tensor] = None) -> bool:
    """Whether the kernel applies to parameters like ``mu`` (and ``rho``): contiguous float32 on
    the CPU (checked without building it)."""
    return (ENABLED and mu.dtype == torch.float32 and mu.device.type == "cpu"
            and mu.is_contiguous() and (rho is None or rho.is_contiguous()))


def posterior_step(mu, rho, log_nu, keep, n_keep: float, prior_dof: Optional[float],
                   weight: float = 1.0, seed: int = -1):
    """(Θ, weight·D, D, [ν_i]) from the kernel, or None if it is unavailable: Θ (n, V, d) and
    weight·D (float32 scalar) in the graph, D and the ν values as Python floats (for logging).
    Arguments as for :class:`~fairseq_acvi.modules.student_t._PosteriorStep` (contiguous float32
    CPU tensors, see :func:`usable`); ``prior_dof`` None = tied. The ``polar`` noise is drawn
    inside from ``seed`` (0 ≤ seed < 2⁶³; by default one draw from torch's default CPU
    generator): :func:`uniforms` gives the same numbers."""
    module = load()
    if module is None:
        return None
    return module.posterior_step(mu, rho, log_nu, keep, n_keep,
                                 -1.0 if prior_dof is None else prior_dof, weight, seed)


def uniforms(n: int, rows: int, dim: int, seed: int) -> torch.Tensor:
    """The (2, n, V, d) float32 uniforms the kernel draws for ``seed`` (U₁ then U₂ of the polar
    draw, :func:`~fairseq_acvi.modules.student_t.polar_from_uniforms`)."""
    module = load()
    if module is None:
        raise RuntimeError("the t-MEM-NN CPU kernel is not available here")
    return module.posterior_uniforms(n, rows, dim, seed)
