"""Make fairseq checkpoints loadable under torch's weights-only unpickler (torch ≥ 2.6).

fairseq's ``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load`` and, since torch 2.6,
that refuses any global that is not allow-listed. fairseq checkpoints store an
``argparse.Namespace`` (legacy ``args``; ``cfg`` is saved as plain containers). We allow-list
exactly that class: loading a checkpoint still cannot run code,
and weights-only loading is never switched off.
"""
import argparse

import torch

#: the only non-tensor class fairseq writes into its checkpoints (the legacy ``args``);
#: measured with ``torch.serialization.get_unsafe_globals_in_checkpoint`` on fp32 and fp16
#: checkpoints of every model of the package
SAFE_GLOBALS = [argparse.Namespace]


def allow_fairseq_checkpoints() -> None:
    """Register the classes above with ``torch.serialization.add_safe_globals`` (idempotent)."""
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is None:  # torch < 2.4 does not load weights-only by default
        return
    add(SAFE_GLOBALS)


allow_fairseq_checkpoints()


def keep_remainder_batches() -> None:
    """Stop fairseq from silently dropping examples when it batches a dataset.

    ``fairseq.data.data_utils.batch_by_size`` (upstream main, as packaged in fairseq-fixed)
    discards the last batch when its size is not a multiple of ``--required-batch-size-multiple``
    (default 8): training never sees those examples and ``fairseq-generate`` / ``fairseq-validate``
    silently skip up to 7 test sentences. We wrap it so that the dropped indices come back as a
    final, smaller batch, in their original order. Idempotent.
    """
    import numpy as np
    from fairseq.data import data_utils

    original = data_utils.batch_by_size
    if getattr(original, "_acvi_keeps_remainder", False):
        return

    def batch_by_size(indices, *args, **kwargs):
        batches = original(indices, *args, **kwargs)
        indices = np.asarray(indices if isinstance(indices, np.ndarray) else list(indices),
                             dtype=np.int64)
        if sum(len(b) for b in batches) < len(indices):
            covered = np.concatenate(batches) if len(batches) else np.zeros(0, dtype=np.int64)
            missing = indices[~np.isin(indices, covered)]
            if len(missing):
                batches = list(batches) + [missing]
        return batches

    batch_by_size._acvi_keeps_remainder = True
    data_utils.batch_by_size = batch_by_size


keep_remainder_batches()


def _no_accelerator() -> bool:
    """True when this process has no accelerator torch could seed (CUDA, XPU, MPS, MTIA, a
    custom backend) and no torch_xla; checked once per process."""
    global _NO_ACCELERATOR
    if _NO_ACCELERATOR is None:
        from fairseq import utils
        acc = getattr(torch, "accelerator", None)
        available = acc.is_available() if acc is not None else torch.cuda.is_available()
        _NO_ACCELERATOR = not available and getattr(utils, "xm", None) is None
    return _NO_ACCELERATOR


_NO_ACCELERATOR = None


def cheap_cpu_reseeding() -> None:
    """Make fairseq's per-update reseeding cheap on a machine without an accelerator.

    fairseq's ``Trainer`` reseeds torch before every update (``utils.set_torch_seed(seed +
    num_updates)``, so that resumed runs replay the same random numbers). ``torch.manual_seed``
    also queues the seed for CUDA, XPU and MTIA, and while such a device is not initialised each
    queueing captures ``traceback.format_stack()``: 0.3-0.7 ms per update on a CPU-only box,
    more than a whole bAbI update's optimizer step. When the process has no accelerator
    (:func:`_no_accelerator`), seeding ``torch.default_generator`` alone gives the identical
    random stream, so that is what the wrapped ``set_torch_seed`` does; with an accelerator,
    fairseq's own code runs unchanged. The context-manager behaviour (restoring the previous RNG
    state on exit) is kept. Idempotent.
    """
    from fairseq import utils

    original = utils.set_torch_seed
    if getattr(original, "_acvi_cheap_cpu_reseeding", False):
        return

    class set_torch_seed(original):
        _acvi_cheap_cpu_reseeding = True

        def __init__(self, seed):
            if not _no_accelerator():
                super().__init__(seed)
                return
            assert isinstance(seed, int)
            self.rng_state = utils.get_rng_state()
            torch.default_generator.manual_seed(seed)

    utils.set_torch_seed = set_torch_seed


cheap_cpu_reseeding()
