"""The update budget of the model without input feeding in experiments/input_feeding_multi30k.sh:
as many updates as the input-feeding model's 20 epochs take in the same time on one quiet core.

The two models' training steps are timed side by side in this one process, on the same real
Multi30K training batches (fairseq's batches of ``--max-tokens``), each step forward, backward,
gradient clipping and an Adam update, the order alternating batch by batch; what else runs on
the machine slows both alike. Then

    ratio  = Σ_batches time(input feeding) / Σ_batches time(no input feeding)
    budget = round(updates of the input-feeding run at its last epoch × ratio)

A wall-clock budget (``--stop-time-hours``) would instead depend on how busy the machine was
during each run. Writes a JSON record (the times, the ratio, the budget and the commands' options)
to ``--out``; prints the budget.

    python experiments/input_feeding_budget.py --data data-bin/multi30k_en_de --context acvi \\
        --feed-log runs/multi30k/en_de/acvi_seed1/train.log --out budget.json

``--feed-updates N`` replaces ``--feed-log`` when the input-feeding run has not trained yet (its
updates per epoch are fixed by the data and ``--max-tokens``), so both can train side by side.
"""
import argparse
import json
import statistics
import sys
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # this checkout's plugin, as --user-dir is

import torch  # noqa: E402
from fairseq import options, tasks, utils  # noqa: E402

from fairseq_acvi.mt_eval import parse_train_log  # noqa: E402


def feed_updates(log: Path, epoch: int) -> int:
    """Updates of the input-feeding run at the end of ``epoch`` (its json train log's validation
    record of that epoch)."""
    valid = parse_train_log(str(log))["valid"]
    if epoch not in valid or "num_updates" not in valid[epoch]:
        sys.exit(f"error: {log} has no validation record of epoch {epoch} with num_updates")
    return int(valid[epoch]["num_updates"])


def build(a, feeding: int):
    """(args, task, model, criterion, optimizer) of the preset with ``--input-feeding feeding``,
    on the command line of recipes/mt_multi30k.sh."""
    argv = [a.data, "--user-dir", str(REPO / "fairseq_acvi"), "--task", "translation",
            "-s", a.src, "-t", a.tgt, "--arch", a.arch, "--context-inference", a.context,
            "--criterion", "elbo", "--optimizer", "adam", "--lr", str(a.lr),
            "--max-tokens", str(a.max_tokens), "--seed", str(a.seed), "--cpu",
            "--input-feeding", str(feeding)]
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=argv)
    utils.import_user_module(args)
    task = tasks.setup_task(args)
    task.load_dataset("train")
    torch.manual_seed(a.seed)
    model = task.build_model(args)
    criterion = task.build_criterion(args)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    return args, task, model, criterion, opt


def train_step(model, criterion, opt, sample, clip: float) -> float:
    """One training step; its seconds."""
    t0 = time.perf_counter()
    model.train()
    loss, _, _ = criterion(model, sample)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="the Multi30K data-bin")
    p.add_argument("--context", required=True, choices=["soft", "acvi"])
    feed_source = p.add_mutually_exclusive_group(required=True)
    feed_source.add_argument("--feed-log", type=Path,
                             help="train.log of the input-feeding run whose budget is matched")
    feed_source.add_argument("--feed-updates", type=int, metavar="N",
                             help="instead of --feed-log: the input-feeding run's updates at "
                                  "--epoch, known before it trains (fairseq's batches are fixed "
                                  "by --max-tokens and the data: 117 per Multi30K epoch), so "
                                  "that both runs can train side by side")
    p.add_argument("--epoch", type=int, default=20, help="its last epoch")
    p.add_argument("--batches", type=int, default=40, help="training batches timed per model")
    p.add_argument("--arch", default="acvi_lstm_multi30k")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.feed_updates is not None and a.feed_updates < 1:
        p.error(f"--feed-updates must be ≥ 1, got {a.feed_updates}")
    updates = feed_updates(a.feed_log, a.epoch) if a.feed_log else a.feed_updates
    feed = build(a, 1)
    nofeed = build(a, 0)
    assert nofeed[2].decoder.runs_in_parallel, "the model without input feeding has no parallel path"
    task, args = feed[1], feed[0]
    itr = task.get_batch_iterator(
        dataset=task.dataset("train"), max_tokens=a.max_tokens,
        max_positions=utils.resolve_max_positions(task.max_positions(),
                                                  feed[2].max_positions()),
        seed=a.seed, ignore_invalid_inputs=True).next_epoch_itr(shuffle=True)
    times = {"feed": [], "nofeed": []}
    for i, sample in enumerate(itr):
        if i > a.batches:
            break
        order = [("feed", feed), ("nofeed", nofeed)]
        for name, (_, _, model, criterion, opt) in (order if i % 2 else order[::-1]):
            t = train_step(model, criterion, opt, sample, a.clip_norm)
            if i > 0:                                                   # batch 0: warm-up
                times[name].append(t)
    ratio = sum(times["feed"]) / sum(times["nofeed"])
    record = {
        "context": a.context, "feed_log": a.feed_log and str(a.feed_log), "feed_epoch": a.epoch,
        "feed_updates": updates, "batches_timed": len(times["feed"]),
        "seconds_feed": sum(times["feed"]), "seconds_nofeed": sum(times["nofeed"]),
        "median_step_feed": statistics.median(times["feed"]),
        "median_step_nofeed": statistics.median(times["nofeed"]),
        "ratio": ratio, "budget_updates": round(updates * ratio),
        "options": {"arch": a.arch, "lr": a.lr, "clip_norm": a.clip_norm,
                    "max_tokens": a.max_tokens, "seed": a.seed, "threads": a.threads},
        "date": date.today().isoformat(),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{a.context}: no-feed / feed speed {ratio:.3f} over {len(times['feed'])} batches; "
          f"budget {record['budget_updates']} updates (input feeding: {updates})")


if __name__ == "__main__":
    main()
