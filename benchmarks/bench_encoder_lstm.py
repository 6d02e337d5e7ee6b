"""The bidirectional LSTM encoder on a CPU: PyTorch's packed call against the unpacked
``bilstm_by_segments`` (modules/seq2seq/segmented_lstm.py), forward + backward, side by side.

Shapes (``--shape B,N,E,H,MIN_LEN``, repeatable): the CNN/DM CPU schedule's long phases (16
articles of up to 400 words, embeddings 128, H 256) and a Multi30K batch (about 270 sentences of
up to 30 tokens, 256 / 256). Lengths are drawn uniformly in [MIN_LEN, N] with one of length N.
Interleaved rounds, medians; the two must agree (outputs to 1e-5).

    python benchmarks/bench_encoder_lstm.py [--rounds 5] [--shape 16,400,128,256,200 ...]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import timed  # noqa: E402
from fairseq_acvi.modules.seq2seq.segmented_lstm import bilstm_by_segments, bilstm_packed  # noqa: E402

WAYS = {"packed": bilstm_packed, "segments": bilstm_by_segments}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", action="append", default=None,
                   help="B,N,E,H,MIN_LEN (default: 16,400,128,256,200 and 270,30,256,256,8)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    shapes = a.shape or ["16,400,128,256,200", "270,30,256,256,8"]
    print(f"# {a.threads} thread(s), {a.rounds} interleaved rounds, medians of forward + backward")
    for shape in shapes:
        B, N, E, H, lo = (int(v) for v in shape.split(","))
        torch.manual_seed(0)
        lstm = nn.LSTM(E, H, bidirectional=True, batch_first=True)
        x = torch.randn(B, N, E, requires_grad=True)
        lengths = torch.randint(lo, N + 1, (B,))
        lengths[0] = N
        ref, got = bilstm_packed(lstm, x, lengths), bilstm_by_segments(lstm, x, lengths)
        assert all(torch.allclose(r, g, atol=1e-5) for r, g in zip(ref, got))

        def run(fn):
            def go():
                out, h, c = fn(lstm, x, lengths)
                (out.sum() + h.sum() + c.sum()).backward()
            return go

        times = {name: [] for name in WAYS}
        for r in range(a.rounds):
            for name in (list(WAYS) if r % 2 == 0 else list(reversed(WAYS))):
                times[name].append(timed(run(WAYS[name])))
        med = {name: statistics.median(t) for name, t in times.items()}
        print(f"B {B} N {N} E {E} H {H} ({len(set(lengths.tolist()))} distinct lengths): packed "
              f"{med['packed']:.3f} s, segments {med['segments']:.3f} s, speed segments / packed "
              f"{med['packed'] / med['segments']:.2f}x")


if __name__ == "__main__":
    main()
