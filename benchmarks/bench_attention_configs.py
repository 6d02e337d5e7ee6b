"""Speed of seed 003's attention configurations against configuration (i), side by side in one run
(docs/method.md §3.6).

The same ``acvi_lstm`` model, scorer and context inference in four configurations:

  (i)      attention over the encoder's annotations only (the options off)
  (ii)     + ``--attend-decoder-past``: the decoder also attends over its own earlier outputs
  (iii)    + ``--self-attention-heads H``: self-attention over the annotations and (causal) over
           the decoder's states
  (ii+iii) both: seed 003's Table 1 row "attn on encoder and decoder + self-attention"

Prints, for each ``--attention-type`` of ``--scorers``, training target words/s (one ELBO step:
forward, backward, SGD) and beam-search decoding sentences/s, each relative to (i) with the same
scorer. Timings are interleaved (the order rotates each round) and reported as medians; the
decoding output length is fixed so that every configuration does the same number of steps.
Defaults: the CPU preset's sizes (``acvi_lstm_multi30k``: one layer, 256-d) on Multi30K-like
batches (32 sentences of 20 target and 16 source tokens, 8,000 words), 2 heads as the seed.
``--input-feeding 0`` builds seed 003's decoder, which reads only the previous word (seed 003
l. 115): every configuration then trains through the parallel path (docs/method.md §3.7), and
``--with-loop`` adds each configuration forced through the step loop (``<config> loop``).

    python benchmarks/bench_attention_configs.py [--scorers multiplicative,additive]
        [--rounds 5] [--batch 32] [--len 20] [--src-len 16] [--heads 2] [--device cuda]
        [--input-feeding 0 [--with-loop]]
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
from bench_seq2seq import _Task, batch, make_dict  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture  # noqa: E402
from fairseq_acvi.modules.context.scorers import SCORERS  # noqa: E402


def configs(heads: int):
    """name -> the options of that configuration."""
    return {"(i)": {}, "(ii)": dict(attend_decoder_past=True),
            "(iii)": dict(self_attention_heads=heads),
            "(ii+iii)": dict(attend_decoder_past=True, self_attention_heads=heads)}


def build(d, scorer, variant, dim, layers, options, feeding=1, parallel=True):
    args = argparse.Namespace(arch="acvi_lstm", context_inference=variant, encoder_embed_dim=dim,
                              decoder_embed_dim=dim, encoder_hidden_size=dim,
                              decoder_hidden_size=dim, encoder_layers=layers,
                              decoder_layers=layers, dropout=0.3, attention_type=scorer,
                              attention_dim=dim, mc_samples=0, input_feeding=feeding, **options)
    base_architecture(args)
    model = ACVILSTMModel.build_model(args, _Task(d))
    model.decoder.parallel_teacher_forcing = parallel
    return model


def decoding_sentences_per_second(models, sample, n, steps, beam, rounds):
    """Sentences/s of fairseq's beam search for each model, ``steps`` output tokens each,
    interleaved rounds, medians."""
    gens = {k: SequenceGenerator([m.eval()], m.decoder.dictionary, beam_size=beam, max_len_a=0,
                                 max_len_b=steps, min_len=steps) for k, m in models.items()}
    times = {k: [] for k in models}
    keys = list(models)
    with torch.no_grad():
        for k in keys:                                                 # warm-up
            gens[k].forward(sample)
        for r in range(rounds):
            for k in keys[r % len(keys):] + keys[: r % len(keys)]:
                times[k].append(timed(lambda: gens[k].forward(sample)))
    return {k: n / statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scorers", default="multiplicative",
                   help=f"comma-separated --attention-type values ({', '.join(SCORERS)})")
    p.add_argument("--context-inference", default="soft")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--len", type=int, default=20, help="target length")
    p.add_argument("--src-len", type=int, default=16)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--decode-sentences", type=int, default=16)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--input-feeding", type=int, choices=[0, 1], default=1)
    p.add_argument("--with-loop", action="store_true",
                   help="with --input-feeding 0: also each configuration through the step loop")
    a = p.parse_args()
    if a.with_loop and a.input_feeding:
        p.error("--with-loop compares the parallel path with the loop: it needs --input-feeding 0")
    torch.set_num_threads(a.threads)
    d = make_dict(a.vocab)
    b = batch(d, a.batch, a.len, 0, a.src_len, a.device)
    src, lengths, _, _ = batch(d, a.decode_sentences, a.len, 1, a.src_len, a.device)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    print(f"# {a.context_inference} attention, batch {a.batch}×{a.len} target words (source "
          f"{a.src_len}), vocab {a.vocab}, dim {a.dim}, layers {a.layers}, {a.heads} heads, "
          f"input feeding {a.input_feeding}, "
          f"{a.rounds} rounds, {a.threads} thread(s), device {device_label(a.device)}; medians; "
          f"decoding: {a.decode_sentences} sentences, beam {a.beam}, {a.len} steps")
    print(f"{'scorer':<15} {'config':<9} {'train w/s':>10} {'vs (i)':>7} {'decode s/s':>11} "
          f"{'vs (i)':>7}")
    for scorer in a.scorers.split(","):
        torch.manual_seed(0)
        models = {k: build(d, scorer, a.context_inference, a.dim, a.layers, o,
                           a.input_feeding).to(a.device) for k, o in configs(a.heads).items()}
        if a.with_loop:
            models.update({f"{k} loop": build(d, scorer, a.context_inference, a.dim, a.layers,
                                              o, 0, parallel=False).to(a.device)
                           for k, o in configs(a.heads).items()})
        opts = {k: torch.optim.SGD(m.parameters(), lr=0.0) for k, m in models.items()}
        wps = training_words_per_second(models, opts, b, a.batch * a.len, a.rounds)
        # beam search is step by step whatever the path: the loop rows decode as their configuration
        sps = decoding_sentences_per_second({k: m for k, m in models.items() if " loop" not in k},
                                            sample, a.decode_sentences, a.len, a.beam,
                                            max(3, a.rounds // 2))
        for k in models:
            dec = (f"{sps[k]:11.2f} {sps[k] / sps['(i)']:7.3f}" if k in sps
                   else f"{'-':>11} {'-':>7}")
            print(f"{scorer:<15} {k:<9} {wps[k]:10.0f} {wps[k] / wps['(i)']:7.3f} {dec}",
                  flush=True)


if __name__ == "__main__":
    main()
