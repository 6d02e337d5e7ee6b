"""Checkpoints that say when they are damaged, and ``--model-overrides`` that say when they miss.

Importing this module (``import fairseq_acvi`` does) wraps two functions of
``fairseq.checkpoint_utils``, the ones every fairseq command saves and loads checkpoints through:

* ``torch_persistent_save``: a checkpoint gets one more top-level entry, :data:`CHECKSUM_KEY`, the
  SHA-256 of everything else it holds (:func:`state_digest`: every tensor's dtype, shape and bytes
  and every other value's ``repr``, in a fixed order);
* ``load_checkpoint_to_cpu``: the file is read as before (``torch.load``, weights only), then

  - a file torch cannot read at all (a text file given as ``--path``, a truncated download)
    stops with :class:`CheckpointError` naming the file, instead of torch's ``KeyError: 101`` or
    "failed finding central directory";
  - a checkpoint whose recomputed digest differs from its stored one (flipped bytes: torch's zip
    reader does not check its records) is refused with its name — it would otherwise load and
    decode garbage; checkpoints written before the checksum existed load as before (nothing to
    verify);
  - a ``--model-overrides`` key that names no option of the checkpoint (``mc_sample`` for
    ``mc_samples``) stops with an error naming it and the closest option, where fairseq sets it
    silently and decoding goes on with the value unchanged.

Weights-only loading is untouched: nothing here loads anything torch's weights-only unpickler would
refuse.
"""
import argparse
import difflib
import hashlib
import os
from contextlib import contextmanager
from typing import Optional, Set

import torch

#: the top-level checkpoint entry holding the digest of the rest
CHECKSUM_KEY = "acvi_sha256"


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used; the message names the file."""


def _feed(h, obj) -> None:
    """Add ``obj`` to the running hash ``h`` in a canonical order (dict keys sorted by repr)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(b"{")
        for key in sorted(obj, key=repr):
            _feed(h, key)
            _feed(h, obj[key])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[" if isinstance(obj, list) else b"(")
        for item in obj:
            _feed(h, item)
        h.update(b"]")
    elif isinstance(obj, argparse.Namespace):
        h.update(b"N")
        _feed(h, vars(obj))
    elif isinstance(obj, (set, frozenset)):
        h.update(b"S")
        _feed(h, sorted(obj, key=repr))
    else:
        h.update(repr(obj).encode())
    h.update(b";")


def state_digest(state: dict) -> str:
    """SHA-256 (hex) of a checkpoint's state, :data:`CHECKSUM_KEY` left out."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != CHECKSUM_KEY})
    return h.hexdigest()


def verify(state, path) -> None:
    """Raise :class:`CheckpointError` when ``state`` (as loaded from ``path``) is not a dict or its
    stored digest differs from the recomputed one; a state without a digest passes."""
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a fairseq checkpoint (it holds a "
                              f"{type(state).__name__}, not a dict of model and training state)")
    stored = state.get(CHECKSUM_KEY)
    if stored is not None and stored != state_digest(state):
        raise CheckpointError(
            f"{path}: the checkpoint is corrupted: its contents no longer match the checksum written "
            "with it (a damaged copy or disk). Use another copy, or checkpoint_last.pt / an "
            "epoch checkpoint of the same run")


def _read_error(path, err: Exception) -> CheckpointError:
    kind = type(err).__name__
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if "Weights only load failed" in str(err):
        return CheckpointError(
            f"{path}: holds objects that weights-only loading refuses ({first}); fairseq-acvi "
            "loads only checkpoints written by fairseq and this plugin, and never turns "
            "weights-only loading off")
    return CheckpointError(f"{path}: not a readable PyTorch checkpoint ({kind}: {first}); "
                           "check that --path names a checkpoint_*.pt file and that it was copied whole")


@contextmanager
def _verifying_torch_load(path, seen: dict):
    """While active, ``torch.load`` (as fairseq's checkpoint loader calls it) reports unreadable
    files, verifies the checksum of what it read and puts into ``seen["options"]`` the option
    names the checkpoint holds, before fairseq applies any override to them."""
    original = torch.load

    def load(f, *args, **kwargs):
        try:
            state = original(f, *args, **kwargs)
        except Exception as err:               # every way a file can fail to be a checkpoint
            raise _read_error(path, err) from err
        verify(state, path)
        seen["options"] = (_option_keys(state.get("cfg") or {}) | _option_keys(state.get("args") or {})
                           | _model_option_names(state))
        return state

    torch.load = load
    try:
        yield
    finally:
        torch.load = original


def _option_keys(cfg) -> Set[str]:
    """Every option name a checkpoint's ``cfg`` (plain containers and the model's Namespace, as
    saved) or legacy ``args`` holds, at any depth."""
    keys: Set[str] = set()
    items = vars(cfg).items() if isinstance(cfg, argparse.Namespace) else (
        cfg.items() if isinstance(cfg, dict) else ())
    for key, value in items:
        keys.add(str(key))
        if isinstance(value, (dict, argparse.Namespace)):
            keys |= _option_keys(value)
    return keys


def _model_option_names(state) -> Set[str]:
    """The options today's parser of the checkpoint's model defines (an option newer than the
    checkpoint may be overridden too)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    model_cfg = (state.get("cfg") or {}).get("model") if isinstance(state.get("cfg"), dict) else None
    args = state.get("args") or model_cfg
    arch = getattr(args, "arch", None) if args is not None else None
    if arch is None and isinstance(model_cfg, dict):
        arch = model_cfg.get("arch") or model_cfg.get("_name")
    model = ARCH_MODEL_REGISTRY.get(arch)
    if model is None or not hasattr(model, "add_args"):
        return set()
    parser = argparse.ArgumentParser(add_help=False)
    try:
        model.add_args(parser)
    except Exception:                          # a model whose options need more than a parser
        return set()
    return {a.dest for a in parser._actions}


def check_override_keys(known: Set[str], overrides: Optional[dict], path) -> None:
    """Refuse a ``--model-overrides`` key that is not in ``known`` (the option names of the
    checkpoint read from ``path`` and of its model's parser today), naming the closest one."""
    unknown = [k for k in (overrides or {}) if k not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise CheckpointError(f"--model-overrides: {', '.join(hints)} is not an option of the "
                              f"model in {path}; nothing was loaded")


def _plain_path(path) -> str:
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)


def verify_checkpoints() -> None:
    """Wrap fairseq's checkpoint save and load as the module docstring says. Idempotent."""
    from fairseq import checkpoint_utils

    save = checkpoint_utils.torch_persistent_save
    if not getattr(save, "_acvi_checksum", False):
        def torch_persistent_save(obj, filename, async_write: bool = False):
            if isinstance(obj, dict):
                obj = dict(obj)
                obj[CHECKSUM_KEY] = state_digest(obj)
            return save(obj, filename, async_write)

        torch_persistent_save._acvi_checksum = True
        checkpoint_utils.torch_persistent_save = torch_persistent_save

    load = checkpoint_utils.load_checkpoint_to_cpu
    if not getattr(load, "_acvi_checksum", False):
        def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
            name = _plain_path(path)
            if not os.path.exists(name) and "://" not in name:
                raise CheckpointError(f"{name}: no such checkpoint file")
            seen = {}
            with _verifying_torch_load(name, seen):
                state = load(path, arg_overrides, load_on_all_ranks)
            if "options" in seen:                 # read through torch.load (not a remote copy)
                check_override_keys(seen["options"], arg_overrides, name)
            return state

        load_checkpoint_to_cpu._acvi_checksum = True
        checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu


verify_checkpoints()
