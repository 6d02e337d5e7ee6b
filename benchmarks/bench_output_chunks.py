"""Memory and speed of many contexts per step through the output layer: whole against chunked.

Variational attention (exact enumeration, docs/method.md §2.4) sends all N source positions of
every step through the V-way output layer in training; the decoder does it in chunks of at most
``MC_CHUNK_ELEMENTS`` (mc_prediction/averaging.py) log-probabilities, each recomputed in the backward pass. This script
trains the same model on the same batch both ways, interleaved, and prints per update:

  * the bytes autograd keeps for the backward pass (saved tensors of one forward), whole / chunked;
  * the median wall time, chunked / whole (the recomputation costs one more forward of the
    output layer);
  * the largest loss difference between the two (float32 rounding only).

    python benchmarks/bench_output_chunks.py [--batch 128] [--len 25] [--vocab 8000] [--rounds 5]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fairseq_acvi  # noqa: E402,F401
from bench_common import elbo_loss, elbo_train_step, timed  # noqa: E402
from bench_seq2seq import _Task, batch, make_dict  # noqa: E402

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture  # noqa: E402
from fairseq_acvi.mc_prediction import averaging  # noqa: E402

WHOLE = 1 << 62                                      # every context at once
CHUNKED = averaging.MC_CHUNK_ELEMENTS         # the decoder's default


def build(d, dim, layers):
    args = argparse.Namespace(arch="acvi_lstm", context_inference="variational",
                              variational_mode="enum", encoder_embed_dim=dim, decoder_embed_dim=dim,
                              encoder_hidden_size=dim, decoder_hidden_size=dim,
                              encoder_layers=layers, decoder_layers=layers, dropout=0.0,
                              mc_samples=0)
    base_architecture(args)
    return ACVILSTMModel.build_model(args, _Task(d))


def saved_bytes(model, b):
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = elbo_loss(model, *b)
    return total[0], loss.item()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--len", type=int, default=25, help="source and target length")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d = make_dict(a.vocab)
    model = build(d, a.dim, a.layers).to(a.device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)   # lr 0: every round sees the same weights
    b = tuple(t.to(a.device) for t in batch(d, a.batch, a.len, 0))
    modes = {"whole": WHOLE, "chunked": CHUNKED}
    mem, losses, times = {}, {}, {k: [] for k in modes}
    for k, limit in modes.items():
        averaging.MC_CHUNK_ELEMENTS = limit
        mem[k], losses[k] = saved_bytes(model, b)
        elbo_train_step(model, opt, *b)          # warm-up
    for r in range(a.rounds):
        for k in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
            averaging.MC_CHUNK_ELEMENTS = modes[k]
            times[k].append(timed(lambda: elbo_train_step(model, opt, *b)))
    averaging.MC_CHUNK_ELEMENTS = CHUNKED
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"# variational (enum) training: batch {a.batch}×{a.len}, vocab {a.vocab}, dim {a.dim}, "
          f"layers {a.layers}, {a.rounds} rounds, {a.threads} thread(s), {a.device}; medians")
    print(f"{'mode':<8} {'saved MB':>9} {'s/update':>9}")
    for k in modes:
        print(f"{k:<8} {mem[k] / 2**20:9.1f} {med[k]:9.3f}")
    print(f"saved memory whole / chunked = {mem['whole'] / mem['chunked']:.2f}x")
    print(f"time chunked / whole         = {med['chunked'] / med['whole']:.3f}")
    print(f"loss |whole - chunked|       = {abs(losses['whole'] - losses['chunked']):.3g} "
          f"(of {abs(losses['whole']):.6g})")


if __name__ == "__main__":
    main()
