"""Speed of ``acvi_transformer`` against fairseq's ``transformer``, measured side by side.

Prints, on the same synthetic batches, at the same size (by default ``acvi_transformer_multi30k``'s:
3 + 3 layers, 256-d, FFN 1024, 4 heads, shared decoder embeddings):
  * training target words/s (one Adam-free SGD step on NLL + Σ weight·term, as the ``elbo``
    criterion computes it) of acvi_transformer with ``soft`` and ``acvi`` contexts, relative to
    fairseq's ``transformer`` (target: acvi ≥ 0.9×);
  * decoding sentences/s (beam search, fixed output length so that all do the same number of
    steps) of the ACVI model with K = 10 Monte-Carlo samples relative to K = 1 (target ≥ 0.5×),
    and with K = 0 (the mean context) relative to fairseq's transformer (the adapter's overhead).
Timings are interleaved (the order rotates every round) and reported as medians.

    OMP_NUM_THREADS=1 python benchmarks/bench_transformer.py [--rounds 7] [--batch 32] [--len 25]
"""
import argparse
import statistics

import torch

import fairseq_acvi  # noqa: F401
from bench_common import timed, training_words_per_second
from bench_seq2seq import batch, make_dict
from fairseq.models.transformer import TransformerModel
from fairseq.models.transformer.transformer_legacy import base_architecture as fairseq_base
from fairseq.sequence_generator import SequenceGenerator

from fairseq_acvi.models.acvi_transformer import ACVITransformerModel, acvi_transformer_multi30k


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def sizes(a):
    return dict(encoder_embed_dim=a.dim, decoder_embed_dim=a.dim, encoder_ffn_embed_dim=4 * a.dim,
                decoder_ffn_embed_dim=4 * a.dim, encoder_layers=a.layers, decoder_layers=a.layers,
                encoder_attention_heads=a.heads, decoder_attention_heads=a.heads, dropout=0.3,
                share_decoder_input_output_embed=True, max_source_positions=1024,
                max_target_positions=1024)


def fairseq_transformer(d, a):
    args = argparse.Namespace(**sizes(a))
    fairseq_base(args)
    return TransformerModel.build_model(args, _Task(d))


def ours(d, a, context, mc=10):
    args = argparse.Namespace(context_inference=context, mc_samples=mc,
                              acvi_kl_delay_updates=0, **sizes(a))
    acvi_transformer_multi30k(args)
    return ACVITransformerModel.build_model(args, _Task(d))


def set_k(model, k):
    for attn in model.decoder.latent_attn:
        attn.acvi.mc_samples = k


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--len", type=int, default=25)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--decode-sentences", type=int, default=16)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--decode-rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d = make_dict(a.vocab)
    models = {"fairseq-transformer": fairseq_transformer(d, a), "soft": ours(d, a, "soft"),
              "acvi": ours(d, a, "acvi")}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.0) for k, m in models.items()}
    b = batch(d, a.batch, a.len, 0)
    words = a.batch * a.len
    wps = training_words_per_second(models, opts, b, words, a.rounds)
    keys = list(models)
    base = wps["fairseq-transformer"]
    print(f"# training: batch {a.batch}×{a.len} target words, vocab {a.vocab}, dim {a.dim}, "
          f"{a.layers}+{a.layers} layers, {a.heads} heads, {a.rounds} rounds, "
          f"{a.threads} thread(s); medians")
    print(f"{'model':<20} {'words/s':>9} {'vs fairseq':>10}")
    for k in keys:
        print(f"{k:<20} {wps[k]:9.0f} {wps[k] / base:10.3f}")
    print(f"acvi / fairseq-transformer = {wps['acvi'] / base:.3f}  (target ≥ 0.9)")

    # decoding: freshly initialised models (the training rounds' SGD steps on one batch may
    # leave a model with non-finite outputs, which beam search cannot finish)
    torch.manual_seed(1)
    model = ours(d, a, "acvi").eval()
    src, lengths, _, _ = batch(d, a.decode_sentences, a.len, 1)
    gens = {name: SequenceGenerator([m.eval()], d, beam_size=a.beam, max_len_a=0,
                                    max_len_b=a.len, min_len=a.len)
            for name, m in (("acvi", model), ("fairseq", fairseq_transformer(d, a)))}
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    runs = [("acvi", 1), ("acvi", 10), ("acvi", 0), ("fairseq", None)]
    dec = {r: [] for r in runs}
    with torch.no_grad():
        for name, K in runs:  # warm-up
            set_k(model, K or 0)
            gens[name].forward(sample)
        for r in range(a.decode_rounds):
            for name, K in runs[r % len(runs):] + runs[: r % len(runs)]:
                set_k(model, K or 0)
                dec[(name, K)].append(timed(lambda: gens[name].forward(sample)))
    sps = {r: a.decode_sentences / statistics.median(v) for r, v in dec.items()}
    print(f"# decoding: {a.decode_sentences} sentences, beam {a.beam}, {a.len} steps, "
          f"{a.decode_rounds} rounds; medians")
    print(f"fairseq transformer: {sps[('fairseq', None)]:.2f} sent/s   acvi K=0: "
          f"{sps[('acvi', 0)]:.2f} sent/s ({sps[('acvi', 0)] / sps[('fairseq', None)]:.3f}×)")
    k1, k10 = sps[("acvi", 1)], sps[("acvi", 10)]
    print(f"K=1: {k1:.2f} sent/s   K=10: {k10:.2f} sent/s   K=10 / K=1 = {k10 / k1:.3f}  "
          f"(target ≥ 0.5)")


if __name__ == "__main__":
    main()
