"""``--tensorboard-logdir`` without tensorboard installed: a clear error instead of a silent run.

What fairseq does: ``fairseq/logging/progress_bar.py`` imports ``SummaryWriter`` from
``torch.utils.tensorboard`` (which needs the ``tensorboard`` package) or ``tensorboardX``; when
both fail, ``TensorboardProgressBarWrapper`` logs one warning among the training log and the run
goes on writing nothing to the folder the user asked for. The plugin's ``tensorboard`` extra
installs the writer; this module makes the progress bar refuse to start without it, naming the
option, the folder and the package to install. The error comes when fairseq-train opens the first
epoch's progress bar: after the model and data are built, before the first update, so no training
is lost.
"""
from fairseq.logging import progress_bar

INSTALL = "pip install 'fairseq-acvi[tensorboard]' (or: pip install tensorboard)"


class TensorboardMissing(ImportError):
    """``--tensorboard-logdir`` was given and no tensorboard writer can be imported."""


def missing_message(logdir: str) -> str:
    """The error text for ``--tensorboard-logdir logdir`` with no writer installed."""
    return (f"--tensorboard-logdir {logdir}: tensorboard is not installed, so nothing would be "
            f"written there. Install it with {INSTALL}, or leave out --tensorboard-logdir.")


def install() -> None:
    """Wrap ``TensorboardProgressBarWrapper.__init__`` once: raise :class:`TensorboardMissing`
    when fairseq found no ``SummaryWriter``."""
    wrapper = progress_bar.TensorboardProgressBarWrapper
    original = wrapper.__init__
    if getattr(original, "_acvi_tensorboard", False):
        return

    def __init__(self, wrapped_bar, tensorboard_logdir):
        if progress_bar.SummaryWriter is None:
            raise TensorboardMissing(missing_message(tensorboard_logdir))
        original(self, wrapped_bar, tensorboard_logdir)

    __init__._acvi_tensorboard = True
    wrapper.__init__ = __init__


install()
