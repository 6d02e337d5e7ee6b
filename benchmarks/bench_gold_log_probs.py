"""Speed of scoring the gold tokens over a large vocabulary, forward and backward, side by side.

The pointer-generator's training output (``copy_mixture_target_log_probs``, the no-copy
``vocab_only_target_log_probs``) needs log P_vocab(y) at the gold id of every position. Two exact
ways, timed interleaved in one run (medians), at the shape of the CNN/DM CPU schedule's phases
(16 articles × 50-100 target tokens, See et al.'s 50k vocabulary):

  * ``logsumexp``: logit_y − logsumexp(logits), the code before 2026-11-27;
  * ``log_softmax``: log_softmax(logits)[y] (``fairseq_acvi.modules.seq2seq.copy_generator.gold_vocab_log_probs``).

Prints seconds per forward + backward of each and the speed ratio, and checks the values and the
gradients agree.

    python benchmarks/bench_gold_log_probs.py [--rows 800 1600] [--vocab 50000] [--rounds 7]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import timed  # noqa: E402
from fairseq_acvi.modules.seq2seq.copy_generator import gold_vocab_log_probs  # noqa: E402


def by_logsumexp(logits, y):
    logit_y = logits.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    return logit_y - torch.logsumexp(logits, dim=-1)


WAYS = {"logsumexp": by_logsumexp, "log_softmax": gold_vocab_log_probs}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[800, 1600],
                   help="target positions per batch (16 articles × 50 / 100 tokens)")
    p.add_argument("--vocab", type=int, default=50000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# {a.vocab}-way vocabulary, float32, {a.threads} thread(s), {a.rounds} interleaved "
          "rounds, medians of forward + backward")
    for rows in a.rows:
        g = torch.Generator().manual_seed(rows)
        logits = torch.randn(rows, a.vocab, generator=g).requires_grad_()
        y = torch.randint(0, a.vocab, (rows,), generator=g)
        vals, grads = {}, {}
        for name, fn in WAYS.items():
            vals[name] = fn(logits, y)
            grads[name], = torch.autograd.grad(vals[name].sum(), logits)
        assert torch.allclose(vals["logsumexp"], vals["log_softmax"], atol=1e-4)
        assert torch.allclose(grads["logsumexp"], grads["log_softmax"], atol=1e-6)

        def run(fn):
            return lambda: torch.autograd.grad(fn(logits, y).sum(), logits)

        times = {name: [] for name in WAYS}
        for r in range(a.rounds):
            order = list(WAYS) if r % 2 == 0 else list(reversed(WAYS))
            for name in order:
                times[name].append(timed(run(WAYS[name])))
        med = {name: statistics.median(t) for name, t in times.items()}
        print(f"rows {rows}: logsumexp {med['logsumexp']:.3f} s, log_softmax {med['log_softmax']:.3f} s, "
              f"speed log_softmax / logsumexp {med['logsumexp'] / med['log_softmax']:.2f}x")


if __name__ == "__main__":
    main()
