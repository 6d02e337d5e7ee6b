"""bAbI report: train and test MemN2N and t-MEM-NN, and compare with the published table.

Usage (from the repository root)::

    python -m fairseq_acvi.cli.babi_report --data PATH/TO/tasks_1-20_v1-2/en --out-dir OUT \\
        [--variant en] [--tasks all] [--models memn2n,t_memn2n] [--setups single,joint] [--seeds 1]

Any folder of the bAbI v1.2 release trains (``en``, ``hn``, ``shuffled`` and their ``-10k``
versions; multi-word answers are one class each, fairseq_acvi/data/babi.py). ``--variant`` names the
data in the report (default: the ``--data`` folder's name) and is recorded with every run; a results
file of one variant is not resumed or merged with another's. The published columns are en-1k's (the
only ones docs/method.md §5 lists): for any other variant they are headed "pub. en-1k".

For every setup (``single``: one model per task, 100 epochs, lr halved every 25; ``joint``: one
model on all selected tasks, 60 epochs, lr halved every 15, δ = ``--joint-embed-dim`` (50), β =
``--joint-divergence-weight``, ``--joint-seeds`` runs; docs/method.md §4.1, §4.3) and model it
trains ``--seeds`` runs (seeds 1..N) in-process with the plugin's own task, model and criterion
(``babi_qa``, ``memn2n`` / ``t_memn2n``, ``qa_cross_entropy`` / ``t_divergence``) in a plain
PyTorch loop (32 minibatches per epoch for single tasks, batches of 32 for joint training), keeps
for each run the epoch with the best validation accuracy, and picks the best run by validation
accuracy (protocol "best of N by validation"); ties, frequent on 100 validation questions, go to
the lower validation NLL of the true answers, then to the earlier seed. Test accuracy is measured
for every run (MemN2N; t-MEM-NN with S = 1 and S = 10 posterior draws) and recorded, never used
for selection; the report shows the chosen run's.

Outputs in ``--out-dir``: ``results_<setup>.json`` (appended as runs finish, so a partial run
still reports), ``babi_report.md`` (tables shaped like D Table 2 / Table 10 with the published
numbers of docs/method.md §5 side by side, the fitted ν, per-hop attention for chosen stories next to the
supporting facts), ``babi_accuracy_<setup>.png`` (bar charts) and ``ckpt/`` (state dicts of the chosen
runs). ``--render-only`` rebuilds the markdown and the chart from the JSON files.

More seeds later: ``--first-seed 11 --seeds 10`` trains seeds 11..20 into a new ``--out-dir``;
``--merge DIR_1_10 DIR_11_20 --out-dir OUT`` then keeps, per model and task, the run that one
best-of-20 run would have kept (:func:`selection_key`) and renders OUT (a results_<setup>*.json
file can stand for a folder: :func:`merge_sources`).
"""
import argparse
import copy
import json
import math
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch

from fairseq_acvi.modules.student_t import SAMPLERS
from fairseq_acvi.published import BABI_JOINT, BABI_SINGLE, BABI_TASK_NAMES

COLUMNS = [("memn2n", None, "MemN2N"), ("t_memn2n", 1, "t-MEM-NN S=1"),
           ("t_memn2n", 10, "t-MEM-NN S=10")]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=os.environ.get("BABI_DATA", ""),
                   help="bAbI variant folder (en, en-10k, …); default $BABI_DATA")
    p.add_argument("--variant", default=None,
                   help="the data's name in the report and the results (en, en-10k, hn, hn-10k, "
                        "shuffled, shuffled-10k, or any label); default: the --data folder's name")
    p.add_argument("--out-dir", default="babi_report")
    p.add_argument("--tasks", default="all", help="'all', '1,2,3' or '1-20'")
    p.add_argument("--models", default="memn2n,t_memn2n")
    p.add_argument("--setups", default="single,joint", help="single, joint or both")
    p.add_argument("--seeds", type=int, default=1, help="runs per model; the best by validation is kept")
    p.add_argument("--first-seed", type=int, default=1,
                   help="seeds are first-seed .. first-seed + N - 1 (to extend an earlier best-of-N "
                        "run with more seeds in another --out-dir, then --merge them)")
    p.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="instead of training: combine the results of runs over disjoint seed "
                        "ranges (each DIR an earlier --out-dir, or a results_single*.json / "
                        "results_joint*.json file) into --out-dir, keeping per "
                        "model and task the best run by validation (ties: the lower seed), as "
                        "one best-of-(N1 + N2 + ...) run would have; copies the chosen "
                        "checkpoints and renders the report (each model rebuilt with its own δ, "
                        "tying and random noise, read from its weights; --empty-memories and "
                        "--hops from this command line)")
    p.add_argument("--t-seeds", type=int, default=None,
                   help="runs for t_memn2n (default: --seeds)")
    p.add_argument("--joint-seeds", type=int, default=None,
                   help="runs per model for joint training (default: --seeds / --t-seeds)")
    p.add_argument("--epochs", type=int, default=100, help="single-task epochs")
    p.add_argument("--anneal-every", type=int, default=25, help="single-task lr halving period (epochs)")
    p.add_argument("--joint-epochs", type=int, default=60)
    p.add_argument("--joint-anneal-every", type=int, default=15)
    p.add_argument("--joint-batch-size", type=int, default=32)
    p.add_argument("--batches-per-epoch", type=int, default=32, help="single-task minibatches per epoch")
    p.add_argument("--optimizer", default="adam", choices=["adam", "adagrad", "sgd"])
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--clip-norm", type=float, default=40.0)
    p.add_argument("--embed-dim", type=int, default=20, help="δ for single-task training")
    p.add_argument("--t-embed-dim", type=int, default=None,
                   help="δ for single-task t_memn2n (default: --embed-dim)")
    p.add_argument("--joint-embed-dim", type=int, default=50,
                   help="δ for joint training (Sukhbaatar et al. use 50)")
    p.add_argument("--hops", type=int, default=3)
    p.add_argument("--tying", default="layerwise", choices=["layerwise", "adjacent"])
    p.add_argument("--empty-memories", default="mask", choices=["mask", "attend"],
                   help="attend: empty slots of the 50-slot memory join the softmax (seed code)")
    p.add_argument("--random-noise", type=float, default=0.1, help="share of empty memories (0 = off)")
    p.add_argument("--linear-start-epochs", type=int, default=0,
                   help="epochs without the attention softmax at the start (Sukhbaatar et al.'s "
                        "linear start); validation selection only considers later epochs")
    p.add_argument("--t-divergence", default="seed", choices=["seed", "exact", "tied"])
    p.add_argument("--prior-dof", type=float, default=10.0)
    p.add_argument("--sigma-init", type=float, default=0.01,
                   help="t-MEM-NN's initial posterior σ (TMemN2NConfig.sigma_init)")
    p.add_argument("--escort-sampler", default="polar", choices=list(SAMPLERS),
                   help="t-MEM-NN escort draw construction (same distribution; polar is faster)")
    p.add_argument("--divergence-weight", type=float, default=1.0,
                   help="β on the t-divergence term (1 = D 54-55)")
    p.add_argument("--joint-divergence-weight", type=float, default=None,
                   help="β for joint training (default: --divergence-weight). The prior term is "
                        "β·(B/N)·D_t, so the prior weight per example is β/N: the joint training "
                        "set is 20× the single-task one")
    p.add_argument("--valid-samples", type=int, default=10, help="t-MEM-NN draws for validation")
    p.add_argument("--attention", default="1:202,11:3,14:22",
                   help="task:question-index (0-based, test file) pairs shown with per-hop attention")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--render-only", action="store_true")
    return p


# ------------------------------------------------------------------------------------------ train
def make_task(data: str, tasks: str):
    from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask
    task = BabiQATask.setup_task(BabiQAConfig(data=data, babi_tasks=tasks, seed=1))
    for split in ("train", "valid", "test"):
        task.load_dataset(split)
    return task


def data_variant(data: str, variant: Optional[str] = None) -> str:
    """The variant a report names: ``variant`` if given, else the data folder's name.

    A ``variant`` that is one release folder's name while ``data`` is another's (``--variant hn``
    with ``--data .../en``) is an error: the report would mislabel its numbers.
    """
    from fairseq_acvi.data.babi import RELEASE_VARIANTS
    folder = os.path.basename(os.path.normpath(data))
    if not variant:
        return folder
    if variant != folder and variant in RELEASE_VARIANTS and folder in RELEASE_VARIANTS:
        raise ValueError(f"--variant {variant} but --data is the release's {folder!r} folder "
                         f"({data}); pass the {variant} folder or drop --variant")
    return variant


def check_variant(results: dict, variant: str, where: str) -> None:
    """Refuse results recorded for another variant (runs from before variants were recorded
    carry none and pass)."""
    other = sorted({i["variant"] for i in results.values() if i.get("variant")} - {variant})
    if other:
        raise ValueError(f"{where} holds results for variant {', '.join(other)}, not {variant}: "
                         f"use another --out-dir")


def t_embed_dim(args) -> int:
    """δ of a t_memn2n run: --t-embed-dim if given (single task), else --embed-dim."""
    return getattr(args, "t_embed_dim", None) or args.embed_dim


def make_model(task, arch: str, args):
    from fairseq_acvi.criterions.qa_cross_entropy import QACrossEntropyCriterion
    from fairseq_acvi.criterions.t_divergence import TDivergenceCriterion
    from fairseq_acvi.models.memn2n import (MemN2NConfig, MemN2NModel, TMemN2NConfig,
                                            TMemN2NModel)
    if arch == "memn2n":
        cfg = MemN2NConfig(embed_dim=args.embed_dim, hops=args.hops, tying=args.tying,
                           random_noise=args.random_noise, empty_memories=args.empty_memories,
                           linear_start_epochs=args.linear_start_epochs)
        return MemN2NModel.build_model(cfg, task), QACrossEntropyCriterion(task)
    cfg = TMemN2NConfig(embed_dim=t_embed_dim(args), hops=args.hops, tying=args.tying,
                        random_noise=args.random_noise, empty_memories=args.empty_memories,
                        prior_dof=args.prior_dof, escort_sampler=args.escort_sampler,
                        sigma_init=getattr(args, "sigma_init", 0.01),
                        linear_start_epochs=args.linear_start_epochs)
    return TMemN2NModel.build_model(cfg, task), TDivergenceCriterion(task, args.t_divergence,
                                                                   args.divergence_weight)


@torch.no_grad()
def predict(model, dataset, samples: Optional[int] = None, batch: int = 500, seed: int = 0,
            with_log_probs: bool = False, with_uncertainty: bool = False):
    """Argmax answers (N,) over a BabiDataset; t-MEM-NN with ``samples`` draws (0 = mean).
    With ``with_log_probs`` also the log-probability of each true answer (N,), float32; with
    ``with_uncertainty`` also the model's per-question (N, 3) H[p̄], E_s H[p_s] and mutual
    information (nats; docs/uncertainty.md), last. The draws are the same with or without them.

    The posterior draws use their own seeded stream (``seed``) in a forked RNG, so evaluating
    between epochs leaves the training run's random stream (batch order, escort draws) as it was.
    """
    model.eval()
    if samples is not None:
        model.set_mc_samples(samples)
    preds, gold_lp, unc = [], [], []
    answers = dataset.tensors["answer"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for idx in torch.arange(len(dataset)).split(batch):
            s = dataset.batch(idx)
            lp, extra = model(**s["net_input"])
            lp = lp.float()
            preds.append(lp.argmax(-1))
            gold_lp.append(lp.gather(-1, answers[idx].view(-1, 1)).view(-1))
            if with_uncertainty:
                unc.append(extra["uncertainty"])
    out = [torch.cat(preds)]
    if with_log_probs:
        out.append(torch.cat(gold_lp))
    if with_uncertainty:
        out.append(torch.cat(unc))
    return out[0] if len(out) == 1 else tuple(out)


#: the t-MEM-NN prediction whose uncertainty the report gives (S posterior draws)
UNCERTAINTY_SAMPLES = 10
UNCERTAINTY_NAMES = ("entropy", "expected_entropy", "mutual_information")


def uncertainty_by_task(pred, unc, answers, tasks) -> Dict[str, dict]:
    """task (str) and "all" -> {"right"/"wrong": {"n", "entropy", "expected_entropy",
    "mutual_information"}}: counts and mean uncertainties (nats) of the right and wrong answers.
    pred, answers, tasks (N,), unc (N, 3)."""
    ok = pred == answers
    out = {}
    for key, sel in [(str(int(t)), tasks == t) for t in tasks.unique()] + [("all", None)]:
        rows = {}
        for part, mask in (("right", ok), ("wrong", ~ok)):
            m = mask if sel is None else mask & sel
            n = int(m.sum())
            rows[part] = {"n": n, **{name: (float(unc[m, i].mean()) if n else None)
                                     for i, name in enumerate(UNCERTAINTY_NAMES)}}
        out[key] = rows
    return out


def validation_score(model, dataset, samples=None) -> Tuple[float, float]:
    """(accuracy %, NLL in nats per question) on a validation set: the selection signal.

    A 100-question validation set measures accuracy in steps of 1 %, so epochs and seeds tie
    often; the NLL of the true answers (the predictive distribution averaged over the ``samples``
    draws for t-MEM-NN) is continuous and breaks those ties (:func:`selection_key`).
    """
    pred, gold_lp = predict(model, dataset, samples, with_log_probs=True)
    acc = 100.0 * (pred == dataset.tensors["answer"]).float().mean().item()
    return acc, -gold_lp.mean().item()


def selection_key(info: dict) -> Tuple[float, float, int]:
    """Order of runs (or epochs) by validation: accuracy first, then the lower validation NLL,
    then the lower seed. Runs recorded before the NLL was (no ``valid_nll``) compare by accuracy
    and seed alone; :func:`merge_results` refuses to mix the two kinds."""
    return (info["valid"], -info.get("valid_nll", 0.0), -info.get("seed", 0))


def per_task_accuracy(model, dataset, samples=None) -> Dict[int, float]:
    pred = predict(model, dataset, samples)
    ok = (pred == dataset.tensors["answer"]).float()
    tasks = torch.tensor([ex.task for ex in dataset.examples])
    return {int(t): 100.0 * ok[tasks == t].mean().item() for t in tasks.unique()}


def train_run(task, arch: str, seed: int, epochs: int, anneal_every: int, args,
              batches_per_epoch: Optional[int] = None, batch_size: Optional[int] = None):
    """Train one run; returns (model with the best-validation state, info dict)."""
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
            "ms_per_update": 1000 * (time.time() - t0) / max(updates, 1)}
    info["embed_dim"] = model.dim  # the δ the run was built with
    if arch == "t_memn2n":
        info["nu"] = {k: float(v.detach()) for k, v in model.nus().items()}
        info["divergence_weight"] = args.divergence_weight
        info["escort_sampler"] = model.posterior.sampler
        info["sigma_init"] = model.cfg.sigma_init
    return model, info


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


def evaluate(model, arch: str, task) -> Tuple[Dict[str, Dict[int, float]], Optional[dict]]:
    """(column -> task -> test accuracy, t-MEM-NN's uncertainty of its S = 10 prediction by task
    and right / wrong answer (:func:`uncertainty_by_task`), None for MemN2N)."""
    te = task.datasets["test"]
    if arch == "memn2n":
        return {"memn2n": per_task_accuracy(model, te)}, None
    acc = {"t_memn2n_S1": per_task_accuracy(model, te, 1)}
    # the S = 10 column and its uncertainty from one pass (the same draws as per_task_accuracy)
    pred, unc = predict(model, te, UNCERTAINTY_SAMPLES, with_uncertainty=True)
    answers = te.tensors["answer"]
    tasks = torch.tensor([ex.task for ex in te.examples])
    ok = (pred == answers).float()
    acc[f"t_memn2n_S{UNCERTAINTY_SAMPLES}"] = {int(t): 100.0 * ok[tasks == t].mean().item()
                                               for t in tasks.unique()}
    return acc, uncertainty_by_task(pred, unc, answers, tasks)


def run_setup(setup: str, tasks: List[int], args, results_path: str):
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
                    model, info = train_run(task, arch, seed, args.epochs, args.anneal_every, args,
                                            batches_per_epoch=args.batches_per_epoch)
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
            torch.save(model.state_dict(), os.path.join(args.out_dir, "ckpt",
                                                        ckpt_name(setup, arch, spec)))
            print(f"[{setup}] {arch} tasks {spec}: test {info['test']}", flush=True)
            results = load_json(results_path)
            results[key] = info
            with open(results_path + ".tmp", "w") as f:
                json.dump(results, f, indent=1)
            os.replace(results_path + ".tmp", results_path)


def ckpt_name(setup: str, arch: str, spec: str) -> str:
    """File name (under OUT/ckpt) of the chosen run's state dict, e.g. single_memn2n_3.pt."""
    return f"{setup}_{arch}_{spec.replace(',', '-')}.pt"


def merge_results(parts: List[dict]) -> Dict[str, dict]:
    """Combine results of one setup trained over disjoint seed ranges (``--first-seed``).

    parts: results dicts (key "arch|tasks" -> info with "valid", "seed", "test", "runs").
    Returns key -> info of the best run by (validation accuracy, lower seed), the same choice
    :func:`run_setup` makes over all the seeds at once, with "runs" the union of the parts'
    runs and "from_part" the index of the part whose run (and checkpoint) was kept. A seed that
    appears in two parts is an error: its runs would be counted twice; so are runs recorded on
    two different variants (runs recorded before the variant was carry none and merge with any).
    """
    merged: Dict[str, dict] = {}
    for i, part in enumerate(parts):
        for key, info in part.items():
            info = dict(info, from_part=i)
            if key not in merged:
                merged[key] = info
                continue
            old = merged[key]
            variant = old.get("variant") or info.get("variant")   # runs from before: none
            if old.get("variant") and info.get("variant") and old["variant"] != info["variant"]:
                raise ValueError(f"--merge: {key} has runs on variant {old['variant']} and "
                                 f"on {info['variant']}; merge runs on the same data")
            seen = {r["seed"] for r in old["runs"]}
            dup = seen & {r["seed"] for r in info["runs"]}
            if dup:
                raise ValueError(f"--merge: {key} seed(s) {sorted(dup)} appear in two result "
                                 "files; merge runs over disjoint seed ranges (--first-seed)")
            if ("valid_nll" in old) != ("valid_nll" in info):
                raise ValueError(f"--merge: {key} mixes runs selected by validation accuracy "
                                 "alone with runs that record the validation NLL (the tie-break "
                                 "since 2026-11-24); their choices are not comparable: rerun one")
            runs = old["runs"] + info["runs"]
            best = max((old, info), key=selection_key)
            merged[key] = dict(best, runs=sorted(runs, key=lambda r: r["seed"]))
            if variant:
                merged[key]["variant"] = variant
    return merged


def merge_sources(entries: List[str]) -> Dict[str, List[Tuple[str, Optional[str]]]]:
    """setup -> [(results JSON, its run's ckpt/ folder or None)] for the ``--merge`` entries.

    An entry is an earlier ``--out-dir`` (its results_single.json / results_joint.json, and its
    ckpt/) or one results file whose name says its setup, ``results_single*.json`` or
    ``results_joint*.json`` (e.g. the files under docs/results/babi_2026-*/; no checkpoints).
    """
    sources: Dict[str, List[Tuple[str, Optional[str]]]] = {"single": [], "joint": []}
    for entry in entries:
        if os.path.isdir(entry):
            for setup in sources:
                path = os.path.join(entry, f"results_{setup}.json")
                if os.path.exists(path):
                    sources[setup].append((path, os.path.join(entry, "ckpt")))
            continue
        name = os.path.basename(entry)
        setup = next((s for s in sources if name.startswith(f"results_{s}")), None)
        if not os.path.isfile(entry) or setup is None or not name.endswith(".json"):
            raise ValueError(f"--merge: {entry!r} is neither an --out-dir folder nor a "
                             "results_single*.json / results_joint*.json file")
        sources[setup].append((entry, None))
    return sources


def merge_dirs(entries: List[str], out_dir: str) -> None:
    """``--merge``: merge_results over each setup's results files (:func:`merge_sources`);
    copies the chosen runs' checkpoints where their folder has them."""
    import shutil
    os.makedirs(os.path.join(out_dir, "ckpt"), exist_ok=True)
    for setup, sources in merge_sources(entries).items():
        if not sources:
            continue
        merged = merge_results([load_json(path) for path, _ in sources])
        for key, info in merged.items():
            arch, spec = key.split("|")
            name = ckpt_name(setup, arch, spec)
            ckpt_dir = sources[info.pop("from_part")][1]
            if ckpt_dir and os.path.exists(os.path.join(ckpt_dir, name)):
                shutil.copyfile(os.path.join(ckpt_dir, name), os.path.join(out_dir, "ckpt", name))
        with open(os.path.join(out_dir, f"results_{setup}.json"), "w") as f:
            json.dump(merged, f, indent=1)
        print(f"merged {len(merged)} {setup} results from {len(sources)} files")


def load_json(path: str) -> dict:
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


# ----------------------------------------------------------------------------------------- render
def collect(results: dict) -> Dict[str, Dict[int, float]]:
    """column name -> task -> test accuracy, from one setup's results."""
    cols: Dict[str, Dict[int, float]] = {}
    for key, info in results.items():
        for col, accs in info.get("test", {}).items():
            for t, a in accs.items():
                cols.setdefault(col, {})[int(t)] = a
    return cols


def table(setup: str, results: dict, published: dict, pub_label: str = "pub.") -> List[str]:
    """Markdown table: per task, the published and our test accuracy of each column, then the
    passed (≥ 95 %) and mean rows. ``pub_label`` heads the published columns ("pub. en-1k" when the
    data is another variant)."""
    cols = collect(results)
    names = ["memn2n", "t_memn2n_S1", "t_memn2n_S10"]
    tasks = sorted({t for c in cols.values() for t in c})
    p = pub_label
    lines = [f"| task | MemN2N ({p}) | MemN2N (ours) | t-MEM-NN S=1 ({p}) | t-MEM-NN S=1 (ours) "
             f"| t-MEM-NN S=10 ({p}) | t-MEM-NN S=10 (ours) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for t in tasks:
        row = [f"{t}: {BABI_TASK_NAMES.get(t, '')}"]
        for i, c in enumerate(names):
            pub = published.get(t, (None,) * 3)[i]
            ours = cols.get(c, {}).get(t)
            row += ["—" if pub is None else f"{pub}", "—" if ours is None else f"{ours:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    # summary rows
    for label, fn in [("passed (≥ 95%)", lambda v: f"{sum(a >= 95 for a in v)}"),
                      ("mean", lambda v: f"{sum(v) / len(v):.1f}")]:
        row = [f"**{label}** (over the {len(tasks)} tasks run)"]
        for i, c in enumerate(names):
            pv = [published[t][i] for t in tasks if t in published]
            ov = [cols[c][t] for t in tasks if c in cols and t in cols[c]]
            row += [fn(pv) if pv else "—", fn(ov) if ov else "—"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def selection_table(results: dict) -> List[str]:
    """What selection did, from the test accuracy every run records (never used to select):
    per column, passed (≥ 95 %) / mean over tasks of the chosen runs, of the runs validation
    accuracy alone would choose (ties to the lower seed), and the mean over all runs.
    Empty for results recorded before runs kept their test accuracy (single setup only)."""
    by_col: Dict[str, Dict[str, List[float]]] = {}
    for key, info in results.items():
        runs = info.get("runs", [])
        if not runs or not all("test" in r for r in runs) or "," in key.split("|")[1]:
            continue
        by_acc = max(runs, key=lambda r: (r["valid"], -r["seed"]))
        for col, accs in info["test"].items():
            t = next(iter(accs))
            row = by_col.setdefault(col, {"chosen": [], "acc_only": [], "mean": []})
            row["chosen"].append(accs[t])
            row["acc_only"].append(by_acc["test"][col][t])
            row["mean"].append(sum(r["test"][col][t] for r in runs) / len(runs))
    if not by_col:
        return []
    label = {"memn2n": "MemN2N", "t_memn2n_S1": "t-MEM-NN S=1", "t_memn2n_S10": "t-MEM-NN S=10"}

    def cell(v: List[float]) -> str:
        return f"{sum(a >= 95 for a in v)} / {sum(v) / len(v):.1f}"
    lines = ["| test accuracy: passed / mean over tasks | chosen (accuracy, then NLL) "
             "| validation accuracy alone | mean over all runs |", "|---|---|---|---|"]
    for col in sorted(by_col):
        r = by_col[col]
        lines.append(f"| {label.get(col, col)} ({len(r['chosen'])} tasks) | {cell(r['chosen'])} "
                     f"| {cell(r['acc_only'])} | {cell(r['mean'])} |")
    return lines


def uncertainty_table(results: dict) -> List[str]:
    """Per task, t-MEM-NN's (S = 10) mean predictive entropy, expected entropy and mutual
    information over its right and its wrong test answers (the chosen runs; nats per question),
    and the pooled row. Empty for results recorded before runs kept it."""
    col = f"t_memn2n_S{UNCERTAINTY_SAMPLES}"
    per_task, pooled = {}, []
    for key, info in results.items():
        arch, spec = key.split("|")
        u = info.get("test_uncertainty", {}).get(col)
        if arch != "t_memn2n" or not u:
            continue
        for t, rows in u.items():
            if t == "all":
                pooled.append(rows)
            else:
                per_task.setdefault(int(t), rows)
    if not per_task:
        return []

    def cell(rows, name, part):
        v = rows[part][name]
        return "—" if v is None else f"{v:.3f}"
    lines = ["| task | right / wrong | H[p̄] right | H[p̄] wrong | E H right | E H wrong "
             "| I right | I wrong |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in sorted(per_task):
        r = per_task[t]
        lines.append(f"| {t}: {BABI_TASK_NAMES.get(t, '')} | {r['right']['n']} / {r['wrong']['n']} | "
                     + " | ".join(cell(r, name, part) for name in UNCERTAINTY_NAMES
                                  for part in ("right", "wrong")) + " |")
    # pooled over every question of every task: weighted by the counts
    tot = {}
    for part in ("right", "wrong"):
        n = sum(rows[part]["n"] for rows in pooled)
        tot[part] = {"n": n, **{name: (sum(rows[part]["n"] * rows[part][name] for rows in pooled
                                           if rows[part]["n"]) / n if n else None)
                                for name in UNCERTAINTY_NAMES}}
    lines.append(f"| **all questions** | {tot['right']['n']} / {tot['wrong']['n']} | "
                 + " | ".join(cell(tot, name, part) for name in UNCERTAINTY_NAMES
                              for part in ("right", "wrong")) + " |")
    return lines


def nu_table(results: dict) -> List[str]:
    lines = ["| run | ν per matrix | β | best epoch | valid acc | s per run | ms/update |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for key in sorted(results, key=lambda k: (k.split("|")[0], k.split("|")[1])):
        info = results[key]
        nu = ", ".join(f"ν_{k}={v:.3g}" for k, v in info.get("nu", {}).items()) or "—"
        arch, spec = key.split("|")
        beta = info.get("divergence_weight", "—")
        lines.append(f"| {arch}, tasks {spec} (seed {info.get('seed')}) | {nu} | {beta} | {info['best_epoch']} | "
                     f"{info['valid']:.1f} | {info['seconds']:.0f} | {info['ms_per_update']:.1f} |")
    return lines


def chart(out_dir: str, results: dict, published: dict, setup: str,
          variant: str = "en") -> Optional[str]:
    try:
        import logging
        import matplotlib
        matplotlib.use("Agg")
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    cols = collect(results)
    tasks = sorted({t for c in cols.values() for t in c})
    if not tasks:
        return None
    names = [("memn2n", "MemN2N"), ("t_memn2n_S1", "t-MEM-NN S=1"), ("t_memn2n_S10", "t-MEM-NN S=10")]
    fig, ax = plt.subplots(figsize=(max(6, len(tasks) * 0.7), 4))
    w = 0.8 / (2 * len(names))
    for i, (c, label) in enumerate(names):
        xs = [t + (2 * i - len(names)) * w for t in tasks]
        ax.bar(xs, [cols.get(c, {}).get(t, 0) for t in tasks], w, label=f"{label} (ours)")
        ax.bar([x + w for x in xs], [published.get(t, (0, 0, 0))[i] for t in tasks], w,
               label=f"{label} (published{'' if variant == 'en' else ', en-1k'})", alpha=0.45)
    ax.axhline(95, color="k", lw=0.8, ls="--")
    ax.set_xticks(tasks)
    ax.set_xlabel("bAbI task")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"bAbI {variant}, {setup} training"
                 + ("" if variant == "en" else " (published: en-1k)"))
    ax.legend(fontsize=6, ncol=3, loc="lower left")
    fig.tight_layout()
    name = f"babi_accuracy_{setup}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=120)
    plt.close(fig)
    return name


def args_from_state(args, state: Dict[str, torch.Tensor], memory_size: int):
    """The options a saved single-task model was built with, as far as its weights tell them:
    δ (the tables' width), the tying (layer-wise models have ``out_proj``) and whether random
    noise was on (the temporal tables have rows beyond the memory size); the rest (hops, empty
    memories) from ``args``. So a report re-rendered or merged with other options still rebuilds
    each chosen model as it was trained."""
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


def attention_section(args) -> List[str]:
    """Per-hop most-attended fact of each model for the chosen test questions (answers as
    written: a multi-word answer shows its words, :func:`~fairseq_acvi.data.babi.answer_text`)."""
    from fairseq_acvi.data.babi import answer_text
    lines = []
    for item in [x for x in args.attention.split(",") if x]:
        t, q = (int(v) for v in item.split(":"))
        spec = str(t)
        paths = {a: os.path.join(args.out_dir, "ckpt", ckpt_name("single", a, spec))
                 for a in ("memn2n", "t_memn2n")}
        if not all(os.path.exists(p) for p in paths.values()):
            continue
        task = make_task(args.data, spec)
        te = task.datasets["test"]
        if q >= len(te):
            continue
        ex = te.examples[q]
        mem = ex.story[-task.cfg.memory_size:]
        s = te.batch(torch.tensor([q]))
        lines += [f"### Task {t}, test question {q} ({os.path.basename(ex.source)})", "",
                  "Facts: " + " / ".join(f"{i + 1}. {' '.join(w)}" for i, w in enumerate(mem)), "",
                  f"Question: {' '.join(ex.query)}? — answer **{answer_text(ex.answer)}**; supporting facts: "
                  + "; ".join(' '.join(ex.story[i]) for i in ex.supports), "",
                  "| model | predicted | hop 1 | hop 2 | hop 3 |", "|---|---|---|---|---|"]
        for arch, samples in [("memn2n", None), ("t_memn2n", 1), ("t_memn2n", 10)]:
            state = torch.load(paths[arch], weights_only=True)
            model, _ = make_model(task, arch, args_from_state(args, state, task.cfg.memory_size))
            try:
                model.load_state_dict(state)
            except RuntimeError as e:
                raise ValueError(f"{paths[arch]} does not fit the model options given "
                                 f"(--hops {args.hops}); pass the options its run was trained "
                                 f"with: {e}") from e
            model.eval()
            if samples is not None:
                model.set_mc_samples(samples)
            torch.manual_seed(0)
            with torch.no_grad():
                lp, extra = model(**s["net_input"])
            pred = answer_text(task.target_dictionary[int(lp.argmax(-1))])
            hops = []
            for h in range(extra["attn"].size(1)):
                a = extra["attn"][0, h]
                j = int(a.argmax())                      # slot j = j-th most recent fact
                fact = mem[len(mem) - 1 - j]
                hops.append(f"{' '.join(fact)} ({a[j]:.2f})")
            label = "MemN2N" if samples is None else f"t-MEM-NN S={samples}"
            lines.append(f"| {label} | {pred} | " + " | ".join(hops) + " |")
        lines.append("")
    return lines


def runs_line(results: dict) -> str:
    """What the results themselves say about their protocol (true also for --merge and
    --render-only, whose command-line options need not be the runs'): per model, runs per task,
    seed range, δ, and t-MEM-NN's escort sampler (runs recorded before the option existed used
    ``gamma``)."""
    parts = []
    for arch, label in (("memn2n", "MemN2N"), ("t_memn2n", "t-MEM-NN")):
        infos = [v for k, v in results.items() if k.split("|")[0] == arch]
        if not infos:
            continue
        n = sorted({len(v.get("runs", [])) for v in infos})
        seeds = [r["seed"] for v in infos for r in v.get("runs", [])]
        dims = sorted({v.get("embed_dim") for v in infos if v.get("embed_dim")})
        line = (f"{label}: best of {'/'.join(map(str, n))} runs per task by validation "
                f"(seeds {min(seeds)}-{max(seeds)}), δ {'/'.join(map(str, dims)) or '?'}")
        if arch == "t_memn2n":
            samplers = sorted({r.get("escort_sampler", "gamma")
                               for v in infos for r in v.get("runs", [])})
            line += f", escort sampler {'/'.join(samplers)}"
        parts.append(line)
    return "From the results: " + "; ".join(parts) + "."


def render(args):
    variant = getattr(args, "variant", None) or data_variant(args.data)
    folder = os.path.basename(os.path.normpath(args.data))
    pub = "pub." if variant == "en" else "pub. en-1k"
    out = [f"# bAbI report: {variant} (docs/method.md §4-5)", "",
           f"Data: `{variant}`" + ("" if folder == variant else f" (folder `{folder}`)")
           + f"; optimizer {args.optimizer}, lr {args.lr} (halved every "
           f"{args.anneal_every} epochs single / {args.joint_anneal_every} joint), clip {args.clip_norm}, "
           f"δ={args.embed_dim} (t-MEM-NN: {t_embed_dim(args)}; joint: {args.joint_embed_dim}), hops={args.hops}, {args.tying} tying, empty memories "
           f"`{args.empty_memories}`, random noise {args.random_noise}, linear start "
           f"{args.linear_start_epochs} epochs, t-divergence `{args.t_divergence}`, prior ν="
           f"{args.prior_dof}, initial σ {args.sigma_init}, escort sampler `{args.escort_sampler}`, "
           f"divergence weight "
           f"β={args.divergence_weight} (joint: "
           f"{setup_args('joint', args).divergence_weight}); best of {args.seeds} "
           f"seed(s) (t-MEM-NN: {args.t_seeds or args.seeds}; joint: "
           f"{args.joint_seeds or 'the same'}) by validation accuracy, ties broken by the lower "
           f"validation NLL (runs that record one); each run keeps its best-validation epoch "
           f"by the same order.", ""]
    for setup, published, title in [("single", BABI_SINGLE, "Single-task training (D Table 2)"),
                                    ("joint", BABI_JOINT, "Joint training (D Table 10)")]:
        path = os.path.join(args.out_dir, f"results_{setup}.json")
        res = load_json(path)
        if not res:
            continue
        check_variant(res, variant, path)
        out += [f"## {title}", "", runs_line(res), ""]
        if variant != "en":
            out += [f"The published columns are bAbI en-1k's (docs/method.md §5 lists no {variant} "
                    f"figures); ours are on {variant}.", ""]
        out += table(setup, res, published, pub) + [""]
        sel = selection_table(res)
        if sel:
            out += ["Selection (every run's test accuracy is recorded, never used to select; "
                    "\"mean over all runs\" is the expected result of a single seed):", ""] + sel + [""]
        png = chart(args.out_dir, res, published, setup, variant)
        if png:
            out += [f"![accuracy]({png})", ""]
        unc_rows = uncertainty_table(res)
        if unc_rows:
            out += [f"### What the posterior draws know (t-MEM-NN, S = {UNCERTAINTY_SAMPLES})", "",
                    "Mean over the test questions answered right and wrong: predictive entropy "
                    "H[p̄], expected entropy E_s H[p_s] and their difference I, the mutual "
                    "information of the answer and the embedding matrices (nats; "
                    "docs/uncertainty.md).", ""] + unc_rows + [""]
        out += ["### Runs and fitted ν", ""] + nu_table(res) + [""]
    att = attention_section(args)
    if att:
        out += ["## Per-hop attention (most attended fact and its weight)", ""] + att
    path = os.path.join(args.out_dir, "babi_report.md")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}")


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not args.data:
        sys.exit("--data (or $BABI_DATA) is required: a bAbI folder such as tasks_1-20_v1-2/en")
    torch.set_num_threads(args.threads)
    import fairseq_acvi  # noqa: F401  (registers the plugin)
    from fairseq_acvi.data.babi import find_task_files, parse_task_list
    try:
        args.variant = data_variant(args.data, args.variant)
    except ValueError as e:
        sys.exit(str(e))
    os.makedirs(args.out_dir, exist_ok=True)
    tasks = parse_task_list(args.tasks, list(find_task_files(args.data)))
    if args.merge:
        merge_dirs(args.merge, args.out_dir)
    elif not args.render_only:
        for setup in args.setups.split(","):
            if setup not in ("single", "joint"):
                sys.exit(f"--setups: unknown setup {setup!r}")
            run_setup(setup, tasks, args, os.path.join(args.out_dir, f"results_{setup}.json"))
    render(args)


if __name__ == "__main__":
    main()
