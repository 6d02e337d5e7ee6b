"""bAbI report: train and test MemN2N and t-MEM-NN, and compare with the published table.

Usage (from the repository root)::

    python -m fairseq_acvi.cli.babi_report --data PATH/TO/tasks_1-20_v1-2/en --out-dir OUT \\
        [--variant en] [--tasks all] [--models memn2n,t_memn2n] [--setups single,joint] [--seeds 1]

Any folder of the bAbI v1.2 release trains (``en``, ``hn``, ``shuffled`` and their ``-10k``
versions; multi-word answers are one class each, fairseq_acvi/data/babi.py). Answers are predicted over every dictionary symbol (the published protocol), or with
``--answer-classes answers`` over the training files' answers only (Hindi's inflected answers:
docs/results/babi_hindi_2026-11-28.md); a checkpoint records which. ``--variant`` names the
data in the report (default: the ``--data`` folder's name) and is recorded with every run; a results
file of one variant is not resumed or merged with another's. The published columns are the seed's
table for that folder (single tasks: D Table 2 for ``en``, Tables 11-15 for the other five; joint:
D Table 10, en-1k's only); where it has none they are en-1k's, headed "pub. en-1k".

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
supporting facts), ``babi_accuracy_<setup>.png`` (bar charts) and ``ckpt/`` (the chosen runs'
weights with the options that rebuild their models, fairseq_acvi/babi_eval/checkpoint.py).
``--render-only`` rebuilds the markdown and the chart from the JSON files.

More seeds later: ``--first-seed 11 --seeds 10`` trains seeds 11..20 into a new ``--out-dir``;
``--merge DIR_1_10 DIR_11_20 --out-dir OUT`` then keeps, per model and task, the run that one
best-of-20 run would have kept (:func:`~fairseq_acvi.babi_eval.selection.selection_key`) and
renders OUT (a results_<setup>*.json file can stand for a folder:
:func:`~fairseq_acvi.babi_eval.selection.merge_sources`).

The protocol's parts are fairseq_acvi/babi_eval/ (training, evaluation, selection and merging,
checkpoints, rendering); this module is the command: its options and :func:`main`.
"""
import argparse
import os
import sys

import torch

# (importing any fairseq_acvi module registers the plugin's task, models and criteria)
from fairseq_acvi.babi_eval.results import data_variant
from fairseq_acvi.babi_eval.render import render
from fairseq_acvi.babi_eval.selection import merge_dirs
from fairseq_acvi.babi_eval.train import run_setup
from fairseq_acvi.modules.student_t import SAMPLERS


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
                        "results_joint*.json file, plain or .gz) into --out-dir, keeping per "
                        "model and task the best run by validation (ties: the lower seed), as "
                        "one best-of-(N1 + N2 + ...) run would have; copies the chosen "
                        "checkpoints and renders the report (each model rebuilt with the "
                        "options its checkpoint carries; checkpoints from before 2026-11-26: δ, "
                        "tying and random noise read from its weights, --empty-memories and "
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
    p.add_argument("--batch-size", type=int, default=None,
                   help="single tasks: minibatches of this many questions instead of "
                        "--batches-per-epoch (Sukhbaatar et al.'s 32; on a 10k folder 32 minibatches "
                        "would hold ~280 questions each)")
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
    p.add_argument("--answer-classes", default="dictionary", choices=["dictionary", "answers"],
                   help="classes an answer is predicted over: every dictionary symbol (the "
                        "published runs), or only the answers of the training files (story words "
                        "such as Hindi's inflected 'gusalkhaney' are no candidates); task "
                        "babi_qa's --answer-classes")
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


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not args.data:
        sys.exit("--data (or $BABI_DATA) is required: a bAbI folder such as tasks_1-20_v1-2/en")
    torch.set_num_threads(args.threads)
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
