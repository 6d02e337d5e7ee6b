"""Checkpoints of the chosen runs (OUT/ckpt/<setup>_<arch>_<tasks>.pt) and the models rebuilt
from them (``--render-only`` and ``--merge`` render the per-hop attention from them).

A checkpoint is ``{"model": state dict, "options": model options}``, the options being
:func:`~fairseq_acvi.babi_eval.build.model_options`' plain dict ("arch", δ as "embed_dim",
"hops", "tying", "random_noise", "empty_memories", "linear_start_epochs", and t-MEM-NN's
"prior_dof", "escort_sampler", "sigma_init"): the model is rebuilt from exactly these, whatever
the later command line says. Plain Python values load with ``torch.load(weights_only=True)``.

Legacy: checkpoints written before 2026-11-26 are plain state dicts. They are rebuilt through
:func:`args_from_state`, which reads δ, the tying and the random noise off the weight shapes and
takes the rest (hops, empty memories, t-MEM-NN's prior and sampler) from the command line.
"""
import copy
import math
from typing import Any, Dict, Optional, Tuple

import torch

from fairseq_acvi.babi_eval.build import build_model, model_options


def ckpt_name(setup: str, arch: str, spec: str) -> str:
    """File name (under OUT/ckpt) of the chosen run's checkpoint, e.g. single_memn2n_3.pt."""
    return f"{setup}_{arch}_{spec.replace(',', '-')}.pt"


def save_checkpoint(path: str, model, options: Dict[str, Any]) -> None:
    """Save ``model``'s state dict with the ``options`` it was built with (plain values)."""
    torch.save({"model": model.state_dict(), "options": dict(options)}, path)


def read_checkpoint(path: str) -> Tuple[Dict[str, torch.Tensor], Optional[Dict[str, Any]]]:
    """(state dict, model options) of a checkpoint; options None for a legacy plain state dict."""
    obj = torch.load(path, weights_only=True)
    if isinstance(obj.get("model"), dict) and isinstance(obj.get("options"), dict):
        return obj["model"], obj["options"]
    return obj, None                                             # legacy: a bare state dict


def load_model(path: str, task, arch: str, args):
    """The ``arch`` model saved in ``path``, rebuilt on ``task`` (its dictionary and memory size)
    from the options the checkpoint carries; a legacy checkpoint from :func:`args_from_state`
    (its weights, then ``args``)."""
    state, options = read_checkpoint(path)
    legacy = options is None
    if legacy:
        options = model_options(arch, args_from_state(args, state, task.cfg.memory_size))
    elif options.get("arch") != arch:
        raise ValueError(f"{path} holds a {options.get('arch')} model, not {arch}")
    model = build_model(task, options)
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        if legacy:
            raise ValueError(f"{path} does not fit the model options given "
                             f"(--hops {args.hops}); pass the options its run was trained "
                             f"with: {e}") from e
        raise ValueError(f"{path} does not fit the options it carries ({options}) on tasks "
                         f"whose dictionary has {len(task.source_dictionary)} types: {e}") from e
    return model


def args_from_state(args, state: Dict[str, torch.Tensor], memory_size: int):
    """Legacy checkpoints (plain state dicts): the options a saved single-task model was built
    with, as far as its weights tell them: δ (the tables' width), the tying (layer-wise models
    have ``out_proj``) and whether random noise was on (the temporal tables have rows beyond the
    memory size); the rest (hops, empty memories) from ``args``. So a report re-rendered or
    merged with other options still rebuilds each chosen model as it was trained."""
    run_args = copy.copy(args)
    run_args.embed_dim = next(v.shape[-1] for k, v in state.items()
                              if k.startswith(("emb.", "posterior.mu")))
    run_args.t_embed_dim = None
    run_args.tying = "layerwise" if "out_proj.weight" in state else "adjacent"
    extra_rows = state["temporal.0"].shape[0] - memory_size
    if extra_rows <= 0:
        run_args.random_noise = 0.0
    elif math.ceil(args.random_noise * memory_size) != extra_rows:
        run_args.random_noise = extra_rows / memory_size
    return run_args
