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
