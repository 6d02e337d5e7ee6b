"""Operators dispatched per decoder step, forward and backward: what a launch-bound device pays.

On a GPU at small batch sizes a recurrent decoder's training step is bound by kernel launches,
not arithmetic (docs/results/gpu_checks_2026-11-28/README.md: PAG at 0.30× ``soft``); each
dispatched operator that is not a view is, to a first approximation, one kernel launch. This
script counts them on the CPU, where the count is the same as on a GPU: for each
``--context-inference`` variant it runs one training step (``elbo_loss``'s forward and backward)
of the same model at two target lengths, T and 2T, and divides the difference by T, so the
encoder, the output layer and the loss drop out and what remains is the cost of one step of the
loop. The ``<v> parallel`` rows are the same model without input feeding through the parallel
path (docs/method.md §3.7), where the per-step count is what the batched calls add per step.

    python benchmarks/count_step_ops.py [--variants soft,acvi,pag,rpag] [--len 10]
"""
import argparse
import collections
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fairseq_acvi  # noqa: E402,F401
from bench_common import elbo_loss  # noqa: E402
from bench_seq2seq import batch, make_dict, ours  # noqa: E402


class OperatorCount(TorchDispatchMode):
    """Counts the ATen operators dispatched inside it that are not views (``by_name``)."""

    def __init__(self):
        super().__init__()
        self.by_name = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.by_name[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def operators(model, d, batch_size: int, length: int, src_len: int) -> collections.Counter:
    """The operators of one training step's forward and backward at target length ``length``."""
    src, lengths, prev, tgt = batch(d, batch_size, length, 0, src_len, "cpu")
    model.zero_grad()
    with OperatorCount() as count:
        elbo_loss(model, src, lengths, prev, tgt).backward()
    return count.by_name


def per_step(model, d, a) -> collections.Counter:
    """Operators of one decoder step: (count at 2T − count at T) / T, per operator name."""
    one = operators(model, d, a.batch, a.len, a.src_len)
    two = operators(model, d, a.batch, 2 * a.len, a.src_len)
    return collections.Counter({k: (two[k] - one[k]) / a.len for k in two if two[k] != one[k]})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", default="soft,acvi,pag,rpag")
    p.add_argument("--parallel", default="soft,acvi",
                   help="variants also counted without input feeding, on the parallel path")
    p.add_argument("--len", type=int, default=10, help="T: the counts at T and 2T are compared")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--src-len", type=int, default=6)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--top", type=int, default=8, help="operators listed per variant")
    a = p.parse_args()
    torch.manual_seed(0)
    d = make_dict(100)
    rows = {}
    for v in [v for v in a.variants.split(",") if v]:
        rows[v] = per_step(ours(d, v, a.dim, a.layers, mc=3).train(), d, a)
    for v in [v for v in a.parallel.split(",") if v]:
        model = ours(d, v, a.dim, a.layers, mc=3, input_feeding=0).train()
        assert model.decoder.runs_in_parallel, f"{v}: no parallel path"
        rows[f"{v} parallel"] = per_step(model, d, a)
    ref = sum(rows[next(iter(rows))].values())
    print(f"# operators (not views) per decoder step, forward + backward of one training step; "
          f"batch {a.batch}, T = {a.len} vs {2 * a.len}, dim {a.dim}, layers {a.layers}")
    print(f"{'variant':<16} {'ops/step':>9} {'vs ' + next(iter(rows)):>9}  most frequent")
    for k, c in rows.items():
        total = sum(c.values())
        top = ", ".join(f"{n.removeprefix('aten.')} {x:g}" for n, x in c.most_common(a.top))
        print(f"{k:<16} {total:9.1f} {total / ref:9.2f}  {top}")


if __name__ == "__main__":
    main()
