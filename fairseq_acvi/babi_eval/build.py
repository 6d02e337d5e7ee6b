"""The task and the model of a bAbI run, from the report's options (docs/method.md §4.1-4.3).

A model is built from its *model options* (:func:`model_options`): a dict of plain Python
values (str / int / float) naming the architecture and every config field the report sets.
They are what a checkpoint carries (fairseq_acvi/babi_eval/checkpoint.py), so a saved model is
rebuilt as it was trained whatever the later command line says. That includes the classes an
answer is predicted over (``answer_classes``: the whole dictionary, or the training files'
answers), which the model takes from the task's data when it is built.
"""
import copy
from typing import Any, Dict

#: the model options of both architectures (argparse names of fairseq_acvi/cli/babi_report.py,
#: the config fields of MemN2NConfig); t_memn2n adds T_OPTIONS
MODEL_OPTIONS = ("embed_dim", "hops", "tying", "random_noise", "empty_memories",
                 "linear_start_epochs")
T_OPTIONS = ("prior_dof", "escort_sampler", "sigma_init")


def make_task(data: str, tasks: str):
    """The ``babi_qa`` task of the tasks ``tasks`` ("3" or "1,2,...") with its train, valid
    and test sets loaded (fairseq_acvi/tasks/babi_qa.py; the dictionary is these tasks')."""
    from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask
    task = BabiQATask.setup_task(BabiQAConfig(data=data, babi_tasks=tasks, seed=1))
    for split in ("train", "valid", "test"):
        task.load_dataset(split)
    return task


def t_embed_dim(args) -> int:
    """δ of a t_memn2n run: --t-embed-dim if given (single task), else --embed-dim."""
    return getattr(args, "t_embed_dim", None) or args.embed_dim


def setup_args(setup: str, args):
    """The options a setup trains with: joint training takes --joint-embed-dim and
    --joint-divergence-weight."""
    if setup == "joint":
        args = copy.copy(args)
        args.embed_dim = args.joint_embed_dim
        args.t_embed_dim = None
        if args.joint_divergence_weight is not None:
            args.divergence_weight = args.joint_divergence_weight
    return args


def model_options(arch: str, args) -> Dict[str, Any]:
    """The options that build an ``arch`` model ("memn2n" or "t_memn2n") from the command
    line's ``args``: {"arch", "embed_dim" (δ; t_memn2n: :func:`t_embed_dim`), "hops", "tying",
    "random_noise", "empty_memories", "linear_start_epochs"} and for t_memn2n "prior_dof",
    "escort_sampler", "sigma_init"; plain Python values only. ``answer_classes`` is added when
    it is not the default ``dictionary`` (``answers``: the training files' answers only), so a
    checkpoint of the default model carries the options it always did."""
    opts: Dict[str, Any] = {
        "arch": arch, "embed_dim": int(args.embed_dim if arch == "memn2n" else t_embed_dim(args)),
        "hops": int(args.hops), "tying": str(args.tying), "random_noise": float(args.random_noise),
        "empty_memories": str(args.empty_memories),
        "linear_start_epochs": int(args.linear_start_epochs)}
    if str(getattr(args, "answer_classes", "dictionary")) != "dictionary":
        opts["answer_classes"] = str(args.answer_classes)
    if arch != "memn2n":
        opts.update(prior_dof=float(args.prior_dof), escort_sampler=str(args.escort_sampler),
                    sigma_init=float(getattr(args, "sigma_init", 0.01)))
    return opts


def run_protocol(arch: str, args, epochs: int, anneal_every: int) -> Dict[str, Any]:
    """The training options one run records beside its results (``info["protocol"]``), so that a
    report merged from several commands states the options its runs were trained with: the
    model's options but δ (:func:`model_options`; δ is ``info["embed_dim"]``), the optimizer, its
    learning rate and halving interval, the epochs, the gradient clip and, for t-MEM-NN, the
    t-divergence. Plain Python values only."""
    opts = {k: v for k, v in model_options(arch, args).items() if k not in ("arch", "embed_dim")}
    opts.update(optimizer=str(args.optimizer), lr=float(args.lr), epochs=int(epochs),
                anneal_every=int(anneal_every), clip_norm=float(args.clip_norm))
    if arch != "memn2n":
        opts["t_divergence"] = str(args.t_divergence)
    return opts


def build_model(task, options: Dict[str, Any]):
    """The model that :func:`model_options` describe, on ``task``'s dictionary and memory size:
    MemN2NModel / TMemN2NModel (fairseq_acvi/models/memn2n.py), freshly initialised from the
    global torch RNG. forward(story (B, M, L), query (B, Lq)) -> (log-probs (B, V), extra)."""
    from fairseq_acvi.models.memn2n import (MemN2NConfig, MemN2NModel, TMemN2NConfig,
                                            TMemN2NModel)
    fields = {k: options[k] for k in MODEL_OPTIONS}
    classes = answer_classes(task, options.get("answer_classes", "dictionary"))
    d, size = task.source_dictionary, task.cfg.memory_size
    if options["arch"] == "memn2n":
        return MemN2NModel(MemN2NConfig(**fields), d, size, classes)
    if options["arch"] != "t_memn2n":
        raise ValueError(f"unknown bAbI architecture {options['arch']!r}")
    cfg = TMemN2NConfig(**fields, **{k: options[k] for k in T_OPTIONS})
    return TMemN2NModel(cfg, d, size, classes)


def answer_classes(task, mode: str):
    """The classes a model answers over: None (``dictionary``: every symbol) or the dictionary
    indices of the training files' answers (``answers``; BabiQATask.answer_indices)."""
    if mode == "dictionary":
        return None
    if mode != "answers":
        raise ValueError(f"answer classes must be 'dictionary' or 'answers', got {mode!r}")
    return task.answer_indices()


def make_model(task, arch: str, args):
    """(model, criterion) of an ``arch`` run with the command line's ``args``: MemN2N with
    ``qa_cross_entropy``, t-MEM-NN with ``t_divergence`` (--t-divergence, β = --divergence-weight;
    docs/method.md §4.2)."""
    from fairseq_acvi.criterions.qa_cross_entropy import QACrossEntropyCriterion
    from fairseq_acvi.criterions.t_divergence import TDivergenceCriterion
    model = build_model(task, model_options(arch, args))
    if arch == "memn2n":
        return model, QACrossEntropyCriterion(task)
    return model, TDivergenceCriterion(task, args.t_divergence, args.divergence_weight)
