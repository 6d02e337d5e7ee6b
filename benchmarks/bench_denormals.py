"""Training speed on the CPU with subnormal floats flushed to zero against kept, side by side in
one run.

A float32 below 2^-126 (about 1.2e-38) is subnormal, and x86 CPUs compute on subnormal operands
in slow microcode. An attention whose scores spread over more than about 87 (natural log of
2^126) gives softmax weights in that range, and they spread into the products of the backward
pass; the attention grid's key-value and multiplicative (iii) cells have such scores
(docs/results/attention_grid_2026-11-29). ``torch.set_flush_denormal(True)`` makes the CPU treat
subnormal operands and results as 0: the results change only below 1.2e-38.

For each checkpoint: training target words/s of one step (forward, backward of the summed
negative log-likelihood and any loss terms, SGD with learning rate 0 so that every step sees the
same weights) on the first ``--sentences`` sentences of ``--subset``, with subnormals kept and
flushed, interleaved (the order rotates every round), medians over ``--rounds``; the ratio
flushed / kept. One thread (the flag is set and unset between rounds, on the calling thread).

    OMP_NUM_THREADS=1 python benchmarks/bench_denormals.py --data data-bin/multi30k_en_de \\
        --path runs/mt_attention_grid/en_de/soft-key-value-iii_seed1/checkpoint_last.pt [--path ...] \\
        [--subset valid] [--sentences 128] [--rounds 5]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fairseq_acvi  # noqa: E402,F401
from bench_common import elbo_train_step, interleaved_times, load_checkpoints, subset_batches  # noqa: E402


def step_args(b):
    """(src, lengths, prev, tgt) of a fairseq batch, as :func:`bench_common.elbo_train_step` takes them."""
    ni = b["net_input"]
    return ni["src_tokens"], ni["src_lengths"], ni["prev_output_tokens"], b["target"]


def measure(model, b, rounds: int):
    """{"kept": [s, ...], "flushed": [s, ...]}: seconds of one training step of ``model`` on ``b``
    with subnormals kept and flushed, interleaved; the flag is restored afterwards."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    args = step_args(b)

    def step(flush):
        def run():
            torch.set_flush_denormal(flush)
            elbo_train_step(model, opt, *args)
        return run
    try:
        return interleaved_times({"kept": step(False), "flushed": step(True)}, rounds)
    finally:
        torch.set_flush_denormal(False)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the data-bin folder of the checkpoints")
    p.add_argument("--path", action="append", required=True, help="a checkpoint (repeat for more)")
    p.add_argument("--subset", default="valid")
    p.add_argument("--sentences", type=int, default=128, help="the batch: the subset's first sentences")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if not torch.set_flush_denormal(False):
        sys.exit("bench_denormals: this CPU cannot flush subnormal floats (torch.set_flush_denormal)")
    for path in args.path:
        (model,), task = load_checkpoints([path], args.data)
        b = subset_batches(task, args.subset, args.sentences, args.sentences)[0]
        words = int(b["ntokens"])
        t = measure(model, b, args.rounds)
        kept, flushed = (words / statistics.median(t[m]) for m in ("kept", "flushed"))
        print(f"{path}: {words} target words; kept {kept:.0f} words/s, flushed {flushed:.0f} words/s, "
              f"flushed / kept {flushed / kept:.2f}x", flush=True)


if __name__ == "__main__":
    main()
