"""Training: one run of one model (:func:`train_run`) and a setup's runs (:func:`run_setup`).

A run trains the plugin's own task, model and criterion (``babi_qa``, ``memn2n`` /
``t_memn2n``, ``qa_cross_entropy`` / ``t_divergence``; docs/method.md §4.1-4.3) in a plain
PyTorch loop: 32 minibatches per epoch for single tasks (a fresh random partition of the training
set each epoch; or minibatches of --batch-size questions), batches of 32 for joint training; the
learning rate halved every ``anneal_every`` epochs; after every epoch (but the linear-start ones)
the validation score (:func:`~fairseq_acvi.babi_eval.evaluate.validation_score`), keeping the
epoch with the best (validation accuracy, −NLL), ties to the later epoch.

It is not fairseq's ``Trainer``: that would change the random stream, the batches, the
optimiser's update, the gradient scale and the choice of the best epoch, and with them every
number the report has published (docs/recipes/babi.md, "Why the report trains in its own loop").

One model through fairseq's own ``fairseq-train`` / ``fairseq-validate`` works (the plugin's
task, models and criteria are ordinary fairseq components; docs/recipes/babi.md "One model
through fairseq's own CLIs", tests/test_memn2n.py); it is just not this protocol's numbers.
"""
import copy
import math
import os
import time
from typing import List, Optional

import torch

from fairseq_acvi.babi_eval.build import (make_model, make_task, model_options, run_protocol,
                                          setup_args)
from fairseq_acvi.babi_eval.checkpoint import ckpt_name, save_checkpoint
from fairseq_acvi.babi_eval.evaluate import UNCERTAINTY_SAMPLES, evaluate, validation_score
from fairseq_acvi.babi_eval.results import check_variant, load_json, write_json
from fairseq_acvi.babi_eval.selection import selection_key


def train_run(task, arch: str, seed: int, epochs: int, anneal_every: int, args,
              batches_per_epoch: Optional[int] = None, batch_size: Optional[int] = None):
    """Train one run; returns (model with the best-validation state, info dict).

    info: "valid" (accuracy %), "valid_nll" (nats per question) and "best_epoch" of the kept
    epoch, "seconds", "ms_per_update", "updates_per_epoch", "embed_dim" (δ), and for t-MEM-NN
    "nu" (fitted ν per matrix), "divergence_weight" (β), "escort_sampler", "sigma_init";
    "protocol": the training options (:func:`~fairseq_acvi.babi_eval.build.run_protocol`).
    ``batches_per_epoch`` (a fresh partition of the training set into that many parts each
    epoch) or ``batch_size`` (parts of that many questions) sets the minibatches.
    """
    if not (batches_per_epoch or batch_size):
        raise ValueError("train_run needs batches_per_epoch or batch_size")
    torch.manual_seed(seed)
    model, crit = make_model(task, arch, args)
    params = list(model.parameters())
    if args.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=args.lr, foreach=True)
    elif args.optimizer == "adagrad":
        opt = torch.optim.Adagrad(params, lr=args.lr, foreach=True)
    else:
        opt = torch.optim.SGD(params, lr=args.lr, foreach=True)
    tr, va = task.datasets["train"], task.datasets["valid"]
    n = len(tr)
    nb = batches_per_epoch or max(1, math.ceil(n / batch_size))
    vs = args.valid_samples if arch == "t_memn2n" else None
    best, best_state, best_epoch = (-1.0, -math.inf), None, 0
    t0, updates = time.time(), 0
    for epoch in range(1, epochs + 1):
        model.train()
        model.begin_epoch(epoch)
        for g in opt.param_groups:
            g["lr"] = args.lr * 0.5 ** ((epoch - 1) // anneal_every)
        for idx in torch.randperm(n).tensor_split(nb):
            loss, sample_size, _ = crit(model, tr.batch(idx))
            opt.zero_grad(set_to_none=True)
            (loss / sample_size).backward()
            torch.nn.utils.clip_grad_norm_(params, args.clip_norm)
            opt.step()
            updates += 1
        if epoch <= args.linear_start_epochs < epochs:
            continue                      # the linear model is not what evaluation runs
        acc, nll = validation_score(model, va, vs)
        if (acc, -nll) >= best:           # ties (same accuracy and NLL): the later epoch
            best, best_epoch = (acc, -nll), epoch
            best_state = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    info = {"valid": best[0], "valid_nll": -best[1], "best_epoch": best_epoch,
            "seconds": time.time() - t0,
            "ms_per_update": 1000 * (time.time() - t0) / max(updates, 1),
            "updates_per_epoch": nb, "train_questions": n}
    info["embed_dim"] = model.dim  # the δ the run was built with
    info["protocol"] = run_protocol(arch, args, epochs, anneal_every)
    if model.answer_bias is not None:  # --answer-classes answers (absent: the whole dictionary)
        info["answer_classes"] = "answers"
    if arch == "t_memn2n":
        info["nu"] = {k: float(v.detach()) for k, v in model.nus().items()}
        info["divergence_weight"] = args.divergence_weight
        info["escort_sampler"] = model.posterior.sampler
        info["sigma_init"] = model.cfg.sigma_init
    return model, info


def run_setup(setup: str, tasks: List[int], args, results_path: str):
    """Train, test and select a setup's runs: ``single`` (one model per task, --epochs,
    --batches-per-epoch or --batch-size, lr halved every --anneal-every) or ``joint`` (one model
    on all ``tasks``, --joint-epochs, batches of --joint-batch-size, --joint-anneal-every; δ and β
    from :func:`~fairseq_acvi.babi_eval.build.setup_args`). For every model and task group not yet in
    ``results_path``: seeds --first-seed .. (--seeds, --t-seeds, --joint-seeds of them), every
    run tested, the best by :func:`~fairseq_acvi.babi_eval.selection.selection_key` saved to
    OUT/ckpt with its model options and written to the results file (resumable)."""
    args = setup_args(setup, args)
    results = load_json(results_path)
    variant = getattr(args, "variant", None)
    if variant:
        check_variant(results, variant, results_path)
    groups = [[t] for t in tasks] if setup == "single" else [tasks]
    for group in groups:
        spec = ",".join(map(str, group))
        task = None
        for arch in args.models.split(","):
            key = f"{arch}|{spec}"
            if key in results:
                continue
            task = task or make_task(args.data, spec)
            runs = []
            n_seeds = args.t_seeds if arch == "t_memn2n" and args.t_seeds else args.seeds
            if setup == "joint" and args.joint_seeds:
                n_seeds = args.joint_seeds
            for seed in range(args.first_seed, args.first_seed + n_seeds):
                if setup == "single":
                    single_batch = getattr(args, "batch_size", None)
                    model, info = train_run(task, arch, seed, args.epochs, args.anneal_every, args,
                                            batches_per_epoch=None if single_batch else
                                            args.batches_per_epoch, batch_size=single_batch)
                else:
                    model, info = train_run(task, arch, seed, args.joint_epochs,
                                            args.joint_anneal_every, args,
                                            batch_size=args.joint_batch_size)
                info["seed"] = seed
                if variant:
                    info["variant"] = variant
                # every run's test accuracy is recorded (never used for selection): it gives
                # the mean over seeds, and shows what the best-by-validation choice cost
                accs, uncertainty = evaluate(model, arch, task)
                info["test"] = {k: {str(t): a for t, a in v.items()} for k, v in accs.items()}
                if uncertainty is not None:
                    info["test_uncertainty"] = {f"t_memn2n_S{UNCERTAINTY_SAMPLES}": uncertainty}
                runs.append((model, info))
                print(f"[{setup}] {arch} tasks {spec} seed {seed}: valid {info['valid']:.1f} "
                      f"nll {info['valid_nll']:.4f} (epoch {info['best_epoch']}, "
                      f"{info['seconds']:.0f}s, {info['ms_per_update']:.1f} ms/update) "
                      f"{info.get('nu', '')}", flush=True)
            model, info = max(runs, key=lambda r: selection_key(r[1]))
            info = dict(info, runs=[r[1] for r in runs])
            os.makedirs(os.path.join(args.out_dir, "ckpt"), exist_ok=True)
            save_checkpoint(os.path.join(args.out_dir, "ckpt", ckpt_name(setup, arch, spec)),
                            model, model_options(arch, args))
            print(f"[{setup}] {arch} tasks {spec}: test {info['test']}", flush=True)
            results = load_json(results_path)
            results[key] = info
            write_json(results_path, results)
