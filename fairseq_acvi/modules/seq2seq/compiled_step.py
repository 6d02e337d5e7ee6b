"""The step loop's step compiled (``--compile-decoder-step``, docs/method.md §3.8): what removes the
per-step launch overhead of the recurrent configurations on a GPU; the parallel path's pass
(§3.7) compiled the same way, where a configuration runs it.

A decoder with input feeding, planning attention, coverage or a constrained normaliser runs its
teacher-forced passes one step after the other, each step a few dozen to a few hundred small
kernels (benchmarks/count_step_ops.py: 68 for ``soft``, 167 for PAG, forward and backward). A GPU
spends that step launching them. The decoder's step
(:meth:`~fairseq_acvi.modules.seq2seq.decoder_passes.DecoderPasses._recurrent_step`: the LSTM
layers, seed 003's self-attention and decoder-past attention, the scorer, the context inference's
step, coverage and W_c) takes and returns tensors, dicts of tensors and the step index only, so
``torch.compile`` captures it whole, forward and backward. The modes:

* ``none`` (default): the eager step, the code every result of the project was computed with.
* ``inductor``: ``torch.compile`` with TorchInductor: each step's elementwise work fused into a
  few generated kernels (Triton on a GPU, C++ on a CPU).
* ``reduce-overhead``: the same kernels, each step's launches recorded once per input shape as a
  CUDA graph and replayed as one (PyTorch's CUDA graph trees; on a CPU it is ``inductor``).

(PyTorch's ``cudagraphs`` backend, graphs of the unfused kernels, is not offered: in torch 2.13
its partition of forward and backward fails on dropout.)

A model in half precision on a CPU (``--memory-efficient-fp16`` there) keeps the eager step, with
one warning: TorchInductor's C++ kernels for float16 fail to build in torch 2.13 (a conflicting
declaration in its vectorised reduction); on a GPU the kernels are Triton's.

A configuration that runs the parallel path (``--input-feeding 0`` and a context inference that
allows it) has no step loop in its teacher-forced passes: there the mode compiles the whole pass
(:meth:`~fairseq_acvi.modules.seq2seq.decoder_passes.DecoderPasses._all_steps`: the LSTM layers
over all steps, the scores, the context inference and W_c), one graph for every step at once.

Every mode computes the eager step's values up to float rounding (tests/test_compiled_step.py,
float64, 1e-10, values and gradients). One exception: random draws (dropout, ACVI's samples at
training time) come from the compiled code's own generator under ``inductor`` and
``reduce-overhead`` — the same distributions, other numbers — unless
``torch._inductor.config.fallback_random`` is set, as the tests do. Incremental decoding (beam
search) keeps the eager step: one step per call, its state reordered between calls.

Shapes: the step is compiled for the shapes it meets, a second shape making the batch and source
sizes symbolic (PyTorch's automatic dynamic shapes); a CUDA graph is recorded for each distinct
(batch, source length) pair, and with seed 003's decoder options, whose caches of earlier steps
grow step by step, for each step index too; the parallel pass, for each (batch, source length,
target length). fairseq's ``--required-seq-len-multiple K`` (translation and summarization tasks)
pads source and target lengths to multiples of K and so bounds the number of recordings;
fairseq's batches by ``--max-tokens`` vary in size, ``--batch-size`` fixes it. Compile time is
paid once per process (tens of seconds; more for PAG).
"""
import functools
import logging
from typing import Callable, Dict, Optional, Tuple

import torch

logger = logging.getLogger(__name__)

MODES = ("none", "inductor", "reduce-overhead")

#: torch.compile's arguments for each mode but ``none``
_COMPILE_ARGS = {
    "inductor": {},
    "reduce-overhead": {"mode": "reduce-overhead"},
}

#: compiled versions of the step TorchDynamo keeps (``recompile_limit``, raised to this when a step
#: is compiled)
RECOMPILE_LIMIT = 64

#: (decoder class, mode) -> the compiled unbound step, shared by every decoder of the class (the
#: decoder is an argument: its parameters are inputs of the compiled graph, not constants)
_COMPILED: Dict[Tuple[type, str], Callable] = {}


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else a ValueError naming the option."""
    if mode not in MODES:
        raise ValueError(f"--compile-decoder-step: unknown mode {mode!r}; choose from "
                         f"{', '.join(MODES)}")
    return mode


#: the decoder methods a mode compiles: the step loop's step, the parallel path's pass
METHODS = ("_recurrent_step", "_all_steps")


def compiled(cls: type, mode: str, method: str = "_recurrent_step", **compile_args) -> Callable:
    """The compiled unbound ``cls.<method>`` (one of :data:`METHODS`) for ``mode`` (cached; extra
    keyword arguments, e.g. ``fullgraph=True`` in tests, make a separate entry)."""
    if method not in METHODS:
        raise ValueError(f"compiled_step.compiled: unknown method {method!r}; choose from "
                         f"{', '.join(METHODS)}")
    key = (cls, mode, method, tuple(sorted(compile_args.items())))
    fn = _COMPILED.get(key)
    if fn is None:
        check_mode(mode)
        # one code object serves every configuration of the decoder (each context inference,
        # training and evaluation, static then dynamic shapes, each mode): TorchDynamo's default
        # of 8 compiled versions per code object would send the ninth back to the eager step
        # without an error
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                                   RECOMPILE_LIMIT)
        fn = torch.compile(getattr(cls, method), **_COMPILE_ARGS[mode], **compile_args)
        _COMPILED[key] = fn
    return fn


def uses_cuda_graphs(mode: str) -> bool:
    return mode == "reduce-overhead"


#: the reasons already logged (:func:`eager_reason`): each is said once per process
_WARNED = set()


def eager_reason(decoder) -> Optional[str]:
    """Why ``decoder`` must keep the eager step although a mode asks otherwise (module
    docstring), or None."""
    p = next(decoder.parameters(), None)
    if p is not None and p.device.type == "cpu" and p.dtype in (torch.float16, torch.bfloat16):
        return (f"a {str(p.dtype).replace('torch.', '')} model on a CPU: TorchInductor's C++ "
                "kernels for it fail to build in this torch; the eager step runs")
    return None


def step_function(decoder, mode: str, method: str = "_recurrent_step") -> Callable:
    """The step ``decoder`` runs in its step loop (``method`` ``_recurrent_step``), or its
    parallel pass (``_all_steps``): its eager method for ``none``, else the compiled one bound
    to it. Under the CUDA-graph modes each call of this function starts a new pass
    (``torch.compiler.cudagraph_mark_step_begin``): the previous pass's outputs are no longer
    read (its loss is formed and its backward done), so its graphs' memory may be reused."""
    eager = getattr(decoder, method)
    if mode == "none":                     # (the decoder checked its mode when it was built)
        return eager
    reason = eager_reason(decoder)
    if reason is not None:
        if reason not in _WARNED:
            _WARNED.add(reason)
            logger.warning(f"--compile-decoder-step {mode}: {reason}")
        return eager
    if uses_cuda_graphs(mode):
        torch.compiler.cudagraph_mark_step_begin()
    return functools.partial(compiled(type(decoder), mode, method), decoder)
