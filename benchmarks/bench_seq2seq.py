"""Speed of the seq2seq core against its targets, measured side by side in one run.

Prints, on the same synthetic batches and dimensions:
  * training target words/s of every --context-inference variant relative to ``soft``
    (targets: acvi ≥ 0.95×, structured ≥ 0.5×);
  * training words/s of our ``soft`` relative to fairseq's built-in ``lstm`` arch with the same
    sizes (target ≥ 1.0×);
  * decoding sentences/s (beam search) with K = 10 Monte-Carlo samples relative to K = 1
    (target ≥ 0.85×).
Timings are interleaved (variant order rotates each round) and reported as medians.

    python benchmarks/bench_seq2seq.py [--rounds 5] [--batch 64] [--len 30] [--vocab 8000]
        [--variants pag,rpag] [--device cuda]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fairseq_acvi  # noqa: E402,F401
from bench_common import device_label, timed, training_words_per_second  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models.lstm import LSTMModel, base_architecture as fairseq_lstm_arch  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture  # noqa: E402

VARIANTS = ["soft", "acvi", "structured", "variational", "ved", "none"]


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def make_dict(V):
    d = Dictionary()
    for i in range(V - d.nspecial):
        d.add_symbol(f"w{i}")
    return d


def ours(d, variant, dim, layers, mc=10, **options):
    args = argparse.Namespace(arch="acvi_lstm", context_inference=variant, encoder_embed_dim=dim,
                              decoder_embed_dim=dim, encoder_hidden_size=dim,
                              decoder_hidden_size=dim, encoder_layers=layers,
                              decoder_layers=layers, dropout=0.2, mc_samples=mc, **options)
    base_architecture(args)
    return ACVILSTMModel.build_model(args, _Task(d))


def fairseq_lstm(d, dim, layers):
    args = argparse.Namespace(arch="lstm", encoder_embed_dim=dim, decoder_embed_dim=dim,
                              encoder_hidden_size=dim, decoder_hidden_size=dim,
                              encoder_layers=layers, decoder_layers=layers,
                              encoder_bidirectional=True, dropout=0.2, decoder_out_embed_dim=dim,
                              max_source_positions=1024, max_target_positions=1024,
                              criterion="cross_entropy")
    fairseq_lstm_arch(args)
    return LSTMModel.build_model(args, _Task(d))


def batch(d, B, N, seed, S=None, device="cpu"):
    """B sentences on ``device``: source length S (default N), target length N."""
    S = S or N
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(d.nspecial, len(d), (B, S), generator=g)
    src[:, -1] = d.eos()
    prev = torch.randint(d.nspecial, len(d), (B, N), generator=g)
    prev[:, 0] = d.eos()
    tgt = torch.roll(prev, -1, 1)
    tgt[:, -1] = d.eos()
    return tuple(t.to(device) for t in (src, torch.full((B,), S), prev, tgt))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--len", type=int, default=30, help="target length (and source, by default)")
    p.add_argument("--src-len", type=int, default=None,
                   help="source length (default: --len), e.g. 20 BPE tokens against 72 characters")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--decode-sentences", type=int, default=32)
    p.add_argument("--beam", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated context-inference variants to time (soft is always in)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d = make_dict(a.vocab)
    variants = ["soft"] + [v for v in a.variants.split(",") if v and v != "soft"]
    models = {v: ours(d, v, a.dim, a.layers).to(a.device) for v in variants}
    models["fairseq-lstm"] = fairseq_lstm(d, a.dim, a.layers).to(a.device)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.0) for k, m in models.items()}
    b = batch(d, a.batch, a.len, 0, a.src_len, a.device)
    words = a.batch * a.len
    wps = training_words_per_second(models, opts, b, words, a.rounds)
    keys = list(models)
    print(f"# training: batch {a.batch}×{a.len} target words (source {a.src_len or a.len}), "
          f"vocab {a.vocab}, dim {a.dim}, "
          f"layers {a.layers}, {a.rounds} rounds, {a.threads} thread(s), "
          f"device {device_label(a.device)}; medians")
    print(f"{'model':<14} {'words/s':>9} {'vs soft':>8}")
    for k in keys:
        print(f"{k:<14} {wps[k]:9.0f} {wps[k] / wps['soft']:8.3f}")
    print(f"soft / fairseq-lstm = {wps['soft'] / wps['fairseq-lstm']:.3f}  (target ≥ 1.0)")
    if "acvi" in wps:
        print(f"acvi / soft         = {wps['acvi'] / wps['soft']:.3f}  (target ≥ 0.95)")
    if "structured" in wps:
        print(f"structured / soft   = {wps['structured'] / wps['soft']:.3f}  (target ≥ 0.5)")

    # decoding: K = 1 vs K = 10 on the same ACVI model and sentences
    model = (models.get("acvi") or ours(d, "acvi", a.dim, a.layers).to(a.device)).eval()
    src, lengths, _, _ = batch(d, a.decode_sentences, a.len, 1, a.src_len, a.device)
    gen = SequenceGenerator([model], d, beam_size=a.beam, max_len_a=0, max_len_b=a.len,
                            min_len=a.len)  # fixed output length: same work for both K
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    dec = {1: [], 10: []}
    with torch.no_grad():
        for r in range(max(3, a.rounds // 2)):
            for K in ((1, 10) if r % 2 == 0 else (10, 1)):
                model.decoder.context.mc_samples = K
                dec[K].append(timed(lambda: gen.forward(sample)))
    sps = {K: a.decode_sentences / statistics.median(v) for K, v in dec.items()}
    print(f"# decoding: {a.decode_sentences} sentences, beam {a.beam}, {a.len} steps; medians")
    print(f"K=1: {sps[1]:.2f} sent/s   K=10: {sps[10]:.2f} sent/s   "
          f"K=10 / K=1 = {sps[10] / sps[1]:.3f}  (target ≥ 0.85)")


if __name__ == "__main__":
    main()
