"""fairseq-acvi: latent-variable attention for fairseq (``--user-dir fairseq_acvi``).

Importing the package makes fairseq checkpoints loadable under torch's weights-only loading
(:mod:`fairseq_acvi.checkpoint_allowlist`), applies the plugin's patches to fairseq's training
loop (:mod:`fairseq_acvi.fairseq_patches`: remainder batches, resumes, fp16 on a CPU, atomic
checkpoint copies, ...), gives every checkpoint a checksum that loading verifies
(:mod:`fairseq_acvi.checkpoint_integrity`), lets ``fairseq-interactive`` answer an empty line
(:mod:`fairseq_acvi.interactive_input`), flushes subnormal floats on the CPU when
``FAIRSEQ_ACVI_FLUSH_DENORMAL=1`` (:mod:`fairseq_acvi.cpu_denormals`) and registers every
model, criterion, task and optimizer of the plugin.
"""
from fairseq_acvi import checkpoint_allowlist  # noqa: F401  (must run before any checkpoint is loaded)
from fairseq_acvi import fairseq_patches  # noqa: F401  (fairseq's training loop, mended)
from fairseq_acvi import checkpoint_integrity  # noqa: F401  (checksums; unreadable files, unknown overrides)
from fairseq_acvi import interactive_input  # noqa: F401  (fairseq-interactive answers an empty line)
from fairseq_acvi import quiet, sacrebleu_fix, tensorboard_check  # noqa: F401  (fairseq's noise, --sacrebleu, tensorboard)
from fairseq_acvi import cpu_denormals  # noqa: F401  (FAIRSEQ_ACVI_FLUSH_DENORMAL=1: subnormals flushed)
from fairseq_acvi import modules  # noqa: F401
from fairseq_acvi.modules import context  # noqa: F401
from fairseq_acvi import criterions, models, optim, tasks  # noqa: F401

__version__ = "0.1.0"
