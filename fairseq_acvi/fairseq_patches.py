"""The plugin's patches to fairseq's training loop (fairseq-fixed 0.12.3.1), applied on import.

Each patch wraps one fairseq function, is idempotent, and is tested (tests/test_fairseq_patches.py,
tests/reliability/). What each changes and why:

* :func:`keep_remainder_batches` — ``batch_by_size`` drops the last batch when it is not a
  multiple of ``--required-batch-size-multiple``: training never saw those examples and
  ``fairseq-generate`` / ``fairseq-validate`` skipped up to 7 test sentences.
* :func:`resume_with_the_same_batches` — a run resumed in epoch 2 or later trained on other
  batches than the uninterrupted run.
* :func:`cheap_cpu_reseeding` — fairseq reseeds torch before every update, and each
  ``torch.manual_seed`` on a machine without an accelerator captured a stack trace for devices
  that do not exist (0.3-0.7 ms per update); seeding the default generator alone gives the
  identical random stream.
* :func:`atomic_checkpoint_copies` — the later files of a save (``checkpoint_last.pt``, ...)
  were plain copies over the previous ones, so a kill during a save could leave a truncated
  ``checkpoint_last.pt``, the file a restarted run loads.
* :func:`cpu_fp16_overflow_recovery` — an fp16 overflow on a CPU called CUDA and crashed instead
  of skipping the update.
* :func:`keep_patience_across_resumes` — ``--patience``'s count lived in no checkpoint and
  restarted from zero on every resume, so a resumed run could train past where the uninterrupted
  one stopped.
* :func:`replay_epoch_end_lr_step` — a resume from an end-of-epoch checkpoint skipped the
  scheduler's end-of-epoch step.
* :func:`no_update_past_max_update` — restarting a finished run trained one update past
  ``--max-update`` and overwrote ``checkpoint_last.pt``.

The checkpoint allow-list of torch's weights-only loading is :mod:`fairseq_acvi.checkpoint_allowlist`.
"""
import torch

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


def resume_with_the_same_batches() -> None:
    """Make a run resumed in epoch 2 or later train on the batches the uninterrupted run uses.

    fairseq's ``FairseqTask.get_batch_iterator`` builds the batches under
    ``numpy_seed(seed + epoch)`` (the random tie-breaking among equally long examples decides
    which examples share a batch) and, for datasets whose iterator can be reused across epochs
    (the default), builds them once, at epoch 1, and only reshuffles their order every epoch
    after. A run resumed from a checkpoint of epoch E ≥ 2 builds its iterator afresh with
    ``seed + E``: different batches from then on, so the resumed run silently trained on other
    batches than the run that never stopped (tests/reliability/test_resume.py found it; every
    translation and bAbI model was affected). When the iterator is reusable (and not sharded,
    cached or rebuilt per epoch), the wrapped method now builds the batches as for epoch 1, as the
    uninterrupted run did, and then puts the iterator and the dataset at epoch E; in every other
    case, and for every iterator that starts at epoch 1, fairseq's code runs unchanged.
    (``--update-ordered-indices-seed`` changes the seed per epoch and is not covered.) Idempotent.
    """
    from fairseq.tasks.fairseq_task import FairseqTask

    original = FairseqTask.get_batch_iterator
    if getattr(original, "_acvi_same_batches", False):
        return

    def get_batch_iterator(self, dataset, *args, **kwargs):
        epoch = kwargs.get("epoch", 1)
        reusable = (epoch > 1 and not args
                    and not kwargs.get("disable_iterator_cache", False)
                    and not kwargs.get("update_epoch_batch_itr", False)
                    and not getattr(getattr(self, "cfg", None), "rebuild_batches", False)
                    and self.can_reuse_epoch_itr(dataset)
                    and dataset not in getattr(self, "dataset_to_epoch_iter", {}))
        if not reusable:
            return original(self, dataset, *args, **kwargs)
        itr = original(self, dataset, **dict(kwargs, epoch=1))
        itr.epoch = epoch  # all the constructor does with its epoch argument
        dataset.set_epoch(epoch)
        return itr

    get_batch_iterator._acvi_same_batches = True
    FairseqTask.get_batch_iterator = get_batch_iterator


resume_with_the_same_batches()


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


def _is_local(path) -> bool:
    return "://" not in str(path)


def atomic_checkpoint_copies() -> None:
    """Make fairseq's checkpoint copies atomic, so that a kill during a save never leaves a
    truncated ``checkpoint_last.pt``.

    ``checkpoint_utils.save_checkpoint`` writes the first file of a save atomically (into
    ``NAME.tmp``, then renamed), then *copies* it to the others (``checkpoint_best.pt``,
    ``checkpoint_last.pt``) with ``PathManager.copy``: ``shutil.copyfile`` straight over the
    previous file. A process killed during that copy (a pre-empted job, an out-of-memory kill,
    Ctrl-C twice) left a truncated ``checkpoint_last.pt``, the file a restarted run loads, and the
    restart stopped with torch's "PytorchStreamReader failed reading zip archive … checkpoint file
    is corrupted" (tests/reliability/test_kill_during_save.py found it). For local paths the copy
    now goes to ``DEST.tmp`` in the same folder, which is then renamed over ``DEST``
    (``os.replace``, atomic on POSIX and Windows): ``checkpoint_last.pt`` is always a complete
    checkpoint, the previous one or the new one. Other paths (iopath URIs) use fairseq's copy.
    Idempotent.
    """
    import os
    import shutil

    from fairseq.file_io import PathManager

    original = PathManager.copy
    if getattr(original, "_acvi_atomic", False):
        return

    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if not (_is_local(src_path) and _is_local(dst_path)):
            return original(src_path, dst_path, overwrite=overwrite)
        tmp = f"{dst_path}.tmp"
        shutil.copyfile(src_path, tmp)
        os.replace(tmp, dst_path)
        return True

    copy._acvi_atomic = True
    PathManager.copy = staticmethod(copy)


atomic_checkpoint_copies()


def _identity_cuda(self, *args, **kwargs):
    return self


def cpu_fp16_overflow_recovery() -> None:
    """Let ``--fp16`` / ``--memory-efficient-fp16`` training on a machine without an accelerator
    survive a gradient overflow.

    When the scaled gradients overflow, fairseq's ``Trainer.train_step`` skips the update, halves
    the loss scale and goes on, but on its way it sets ``grad_norm = torch.tensor(0.0).cuda()``:
    without CUDA that raises "Torch not compiled with CUDA enabled" and the run dies at its first
    overflow, which comes in any long run: the scale doubles after every ``--fp16-scale-window``
    overflow-free updates (16,384 by default) until it overflows, and a loss spike comes sooner
    (tests/reliability/test_fp16_soak.py found it). On a machine with no accelerator
    (:func:`_no_accelerator`) the wrapped ``train_step`` runs with ``Tensor.cuda`` returning the
    tensor itself: the overflow branch then does what it does on a GPU (the gradient is dropped,
    no update is applied, the update counter does not move, the loss scale is lowered). Without
    an accelerator every other ``.cuda()`` call would have failed the same way, so nothing else
    changes; with one, fairseq's method runs untouched. Idempotent.
    """
    from fairseq.trainer import Trainer

    original = Trainer.train_step
    if getattr(original, "_acvi_cpu_overflow", False):
        return

    def train_step(self, samples, raise_oom=False):
        if not _no_accelerator():
            return original(self, samples, raise_oom)
        saved = torch.Tensor.__dict__.get("cuda")
        torch.Tensor.cuda = _identity_cuda
        try:
            return original(self, samples, raise_oom)
        finally:
            if saved is None:
                del torch.Tensor.cuda
            else:
                torch.Tensor.cuda = saved

    train_step._acvi_cpu_overflow = True
    Trainer.train_step = train_step


cpu_fp16_overflow_recovery()


def _early_stop_functions():
    """fairseq-train's ``should_stop_early`` (it keeps ``--patience``'s state in attributes of
    itself): in ``fairseq_cli.train`` and, under ``python -m fairseq_cli.train``, in
    ``__main__``."""
    import sys
    out = []
    for name in ("__main__", "fairseq_cli.train"):
        fn = getattr(sys.modules.get(name), "should_stop_early", None)
        if callable(fn) and getattr(fn, "__module__", None) in ("__main__", "fairseq_cli.train"):
            out.append(fn)
    return out


def keep_patience_across_resumes() -> None:
    """Keep ``--patience``'s early-stopping state in the checkpoint, so that a resumed run stops
    where the uninterrupted run stops.

    fairseq-train counts the validations without improvement in attributes of its function
    ``should_stop_early`` (the best validation loss and the count), which no checkpoint holds: a
    resumed run started counting from zero and took its first validation after the resume as the
    best so far, however bad, so with ``--patience`` (the Multi30K recipes use 3) it could train
    epochs longer than the run that was never stopped (tests/reliability/test_resume.py shows
    it). The wrapped ``Trainer.save_checkpoint`` adds both values to ``extra_state``
    (``acvi_early_stopping``: a float and an int, weights-only loadable); the wrapped
    ``checkpoint_utils.load_checkpoint`` puts them back unless the optimizer or meters are reset
    (the condition under which fairseq restores its own ``best``). Idempotent.
    """
    from fairseq import checkpoint_utils
    from fairseq.trainer import Trainer

    original_save = Trainer.save_checkpoint
    if getattr(original_save, "_acvi_patience", False):
        return
    original_load = checkpoint_utils.load_checkpoint

    def save_checkpoint(self, filename, extra_state):
        for fn in _early_stop_functions():
            if hasattr(fn, "best") and isinstance(extra_state, dict):
                extra_state = dict(extra_state, acvi_early_stopping={
                    "best": fn.best, "num_runs": int(getattr(fn, "num_runs", 0))})
                break
        return original_save(self, filename, extra_state)

    def load_checkpoint(cfg, trainer, **passthrough_args):
        extra_state, epoch_itr = original_load(cfg, trainer, **passthrough_args)
        saved = (extra_state or {}).get("acvi_early_stopping")
        if saved and not cfg.reset_optimizer and not cfg.reset_meters:
            for fn in _early_stop_functions():
                fn.best, fn.num_runs = saved["best"], saved["num_runs"]
        return extra_state, epoch_itr

    save_checkpoint._acvi_patience = True
    load_checkpoint._acvi_patience = True
    Trainer.save_checkpoint = save_checkpoint
    checkpoint_utils.load_checkpoint = load_checkpoint


keep_patience_across_resumes()


def replay_epoch_end_lr_step() -> None:
    """Give the learning-rate scheduler, on a resume from a checkpoint written at the end of an
    epoch, the end-of-epoch step the uninterrupted run gave it.

    fairseq-train writes the end-of-epoch checkpoint (inside ``validate_and_save``) *before* it
    calls ``trainer.lr_step(epoch, valid_loss)``, so a run resumed from that checkpoint never
    passed that epoch's validation loss to its scheduler: its stored state differed from the
    uninterrupted run's (``best`` of inverse_sqrt / fixed / step: tracked, not used) and a
    scheduler that uses the loss (``reduce_lr_on_plateau``) missed one observation
    (tests/reliability/test_resume.py found it). The wrapped ``checkpoint_utils.load_checkpoint``
    makes that call when the restored iterator stands at the start of an epoch after the first
    (the checkpoint ended the previous one), with the validation loss the checkpoint stores, unless
    the scheduler or the data loader is reset; fairseq's own ``lr_step`` for the new epoch follows
    as before. Idempotent.
    """
    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_checkpoint
    if getattr(original, "_acvi_epoch_end_lr", False):
        return

    def load_checkpoint(cfg, trainer, **passthrough_args):
        extra_state, epoch_itr = original(cfg, trainer, **passthrough_args)
        itr = (extra_state or {}).get("train_iterator") or {}
        if (itr.get("iterations_in_epoch") == 0 and itr.get("epoch", 1) > 1
                and not cfg.reset_lr_scheduler and not cfg.reset_dataloader):
            trainer.lr_step(itr["epoch"] - 1, extra_state.get("val_loss"))
            trainer.lr_step(epoch_itr.epoch)  # what fairseq's load_checkpoint ends with
        return extra_state, epoch_itr

    load_checkpoint._acvi_epoch_end_lr = True
    checkpoint_utils.load_checkpoint = load_checkpoint


replay_epoch_end_lr_step()


def no_update_past_max_update() -> None:
    """Let a run resumed from a checkpoint that has reached ``--max-update`` stop there.

    fairseq-train checks ``--max-update`` only after an update, so restarting a finished run (a
    job scheduler re-running it, or a restart after a kill that came after the last save) trained
    one update more and overwrote ``checkpoint_last.pt`` with it (tests/reliability: the kill
    campaign found it). The wrapped ``checkpoint_utils.load_checkpoint`` ends the process (exit
    status 0, with a log line saying why) when the restored update count is already at or past
    ``--max-update``, as fairseq already does for a finished ``--max-epoch``. Idempotent.
    """
    import logging

    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_checkpoint
    if getattr(original, "_acvi_max_update", False):
        return

    def load_checkpoint(cfg, trainer, **passthrough_args):
        extra_state, epoch_itr = original(cfg, trainer, **passthrough_args)
        max_update = trainer.cfg.optimization.max_update
        if extra_state is not None and 0 < max_update <= trainer.get_num_updates():
            logging.getLogger("fairseq_cli.train").info(
                f"the checkpoint has {trainer.get_num_updates()} updates, --max-update is "
                f"{max_update}: training is complete, nothing to do")
            raise SystemExit(0)
        return extra_state, epoch_itr

    load_checkpoint._acvi_max_update = True
    checkpoint_utils.load_checkpoint = load_checkpoint


no_update_past_max_update()
