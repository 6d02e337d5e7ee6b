"""Silence the noise fairseq's own code makes, at the plugin's import, keeping fairseq's INFO log
and every warning about the user's run.

Where each kind of noise comes from (fairseq 0.12.3 with hydra 1.3, torch 2.x, checked on a
2-update ``fairseq-train``, ``fairseq-generate`` and ``attention_pictures`` run):

* **hydra deprecation warnings** (about 20 lines before every command's first log line):
  ``fairseq.dataclass.utils.convert_namespace_to_omegaconf`` composes its config with
  ``hydra.experimental.initialize`` / ``compose(..., strict=False)``, no ``version_base``, config
  files headed ``# @package _group_`` and a config named like its ConfigStore schema. Each is a
  ``UserWarning`` about fairseq's use of hydra, none about the run; they are ignored by message.
* **DEBUG lines** (``DEBUG:hydra.core.utils`` in ``fairseq-generate``, 226
  ``DEBUG:matplotlib`` lines in ``attention_pictures``): importing fairseq imports
  ``fairseq/models/wav2vec/wav2vec2_classification.py``, which calls
  ``logging.basicConfig(level=logging.DEBUG)`` at module level. Where no handler existed yet (every
  command except ``fairseq-train``, which configures logging before importing fairseq) this puts the
  root logger at DEBUG with a bare handler, and the command's own ``basicConfig(level=INFO)`` then
  does nothing. :func:`undo_debug_root_logger` sets that root logger back to fairseq's level
  (``$LOGLEVEL``, INFO by default), so every INFO line stays and DEBUG goes.
* **torch warnings that fairseq's code triggers on every run**: its epoch iterator always asks
  ``pin_memory=True`` (a warning on a machine without an accelerator) and its training step uses
  the deprecated ``torch.cuda.amp.autocast(...)`` spelling (a ``FutureWarning``). Both are ignored
  by message.

Out of the plugin's reach: ``INFO:fairseq.tasks.text_to_speech: Please install tensorboardX`` is
logged while fairseq itself is imported, before any ``--user-dir`` is.
"""
import logging
import os
import sys
import warnings

import fairseq  # noqa: F401  (its import is what configures the root logger; undone below)

#: message patterns (``warnings.filterwarnings`` matches them at the message's start, any case)
#: of the warnings fairseq's code causes on every run, none of them about the run itself
FAIRSEQ_NOISE = (
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental"),
    (UserWarning, r"\s*The version_base parameter is not specified"),
    (UserWarning, r"In '[^']*': Usage of deprecated keyword in package header"),
    (UserWarning, r"\s*'[^']*' is validated against ConfigStore schema with the same name"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated"),
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found"),
    (FutureWarning, r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated"),
)

_WAV2VEC_CLASSIFICATION = "fairseq.models.wav2vec.wav2vec2_classification"


def ignore_fairseq_warnings() -> None:
    """Add one ``ignore`` filter per pattern of :data:`FAIRSEQ_NOISE` (other warnings untouched)."""
    for category, message in FAIRSEQ_NOISE:
        warnings.filterwarnings("ignore", message=message, category=category)


def undo_debug_root_logger() -> bool:
    """Put the root logger back to ``$LOGLEVEL`` (INFO by default, as fairseq's commands use) when
    fairseq's ``wav2vec2_classification`` import left it at DEBUG with a bare ``basicConfig``
    handler; returns whether it did. A root logger configured otherwise (e.g. a user's DEBUG on
    purpose, with their own format) is left alone."""
    root = logging.getLogger()
    wanted = os.environ.get("LOGLEVEL", "INFO").upper()
    if root.level != logging.DEBUG or wanted == "DEBUG" or _WAV2VEC_CLASSIFICATION not in sys.modules:
        return False
    bare = all(getattr(h.formatter, "_fmt", None) == logging.BASIC_FORMAT for h in root.handlers)
    if not root.handlers or not bare:
        return False
    root.setLevel(logging.getLevelName(wanted) if isinstance(logging.getLevelName(wanted), int)
                  else logging.INFO)
    return True


ignore_fairseq_warnings()
undo_debug_root_logger()
