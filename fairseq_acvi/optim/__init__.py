"""Optimizers the plugin registers with fairseq (``--optimizer torch_adam``)."""
from fairseq_acvi.optim import torch_adam  # noqa: F401
