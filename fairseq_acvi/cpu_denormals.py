"""Subnormal floats flushed to zero on the CPU when ``FAIRSEQ_ACVI_FLUSH_DENORMAL=1`` (read once,
when the plugin is imported; off by default, so every result stays as it was trained).

A float32 below 2^-126 (about 1.2e-38) is subnormal; x86 CPUs compute on subnormal operands in
slow microcode. Attention whose scores spread by more than about 87 gives softmax weights in that
range, and the backward pass carries them into large matrix products: a training step of the
attention grid's key-value (iii) cell runs 1.57x faster with them flushed
(``benchmarks/bench_denormals.py``, BENCHMARKS.md). Flushing changes results only below 1.2e-38.

``torch.set_flush_denormal`` sets the calling thread's flag, and a thread takes the flag of the
thread that creates it: set at plugin import, before the first parallel operation creates the
intra-op threads, it holds in all of them. Where the threads already exist, one parallel product
of subnormals finds the ones that keep them, and a warning says so.
"""
import logging
import os

import torch

ENV = "FAIRSEQ_ACVI_FLUSH_DENORMAL"

logger = logging.getLogger(__name__)


def requested(value=None) -> bool:
    """Whether ``value`` (default: the environment's ``FAIRSEQ_ACVI_FLUSH_DENORMAL``, unset = off)
    asks for flushing; anything but 0/1 (or false/true, no/yes, off/on) raises a ValueError
    naming the variable."""
    raw = os.environ.get(ENV, "0") if value is None else value
    v = raw.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{ENV}={raw!r}: expected 1 (flush subnormal floats to zero on the CPU) or 0")


def apply(value=None) -> bool:
    """Flush subnormals on this thread when :func:`requested`; -> whether they are flushed."""
    if not requested(value):
        return False
    if not torch.set_flush_denormal(True):
        logger.warning("%s=1: this CPU cannot flush subnormal floats; they are kept", ENV)
        return False
    kept = kept_fraction()
    if kept > 0:
        logger.warning("%s=1 came after the CPU's %d intra-op threads were made: %.0f %% of a parallel "
                       "product's subnormal results are kept (set it before the first parallel "
                       "operation, or OMP_NUM_THREADS=1)", ENV, torch.get_num_threads(), 100 * kept)
    logger.info("%s=1: subnormal floats are flushed to zero on the CPU", ENV)
    return True


def kept_fraction() -> float:
    """The fraction of subnormal results an elementwise product over every intra-op thread keeps
    (0 when every thread flushes them)."""
    n = 65536 * max(1, torch.get_num_threads())       # above ATen's grain size for each thread
    x = torch.full((n,), 1 << 22, dtype=torch.int32).view(torch.float32)   # 5.9e-39, from its bits
    return ((x * torch.ones(n)) != 0).float().mean().item()


FLUSHED = apply()
