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
