"""Training speed of each ``--attention-normalizer`` against softmax, measured side by side in one run
(docs/method.md §3.5).

On the same synthetic batch and sizes, one ``acvi_lstm`` model per normaliser (the same
``--context-inference``, soft by default) is trained with the ``elbo`` loss and SGD; every
round times one update of each model, the order rotating each round, and the script prints the
median target words/s of each and its ratio to softmax. Optionally (``--decode-sentences``) the
same for beam-search decoding (sentences/s), where the constrained normalisers' per-step sort or
bisection runs on beam × batch rows.

    python benchmarks/bench_normalizers.py [--rounds 7] [--batch 64] [--len 30] [--src-len 30]
        [--context soft] [--normalizers sparsemax,entmax15,csoftmax,csparsemax] [--device cuda]

Costs per decoder step and row of N source positions: softmax O(N); sparsemax and 1.5-entmax a
sort, O(N log N) (the ``entmax`` package); csoftmax one sort of N values and cumulative sums,
csparsemax one sort of the 2N breakpoints and cumulative sums, both O(N log N) and batched over
rows (fairseq_acvi/modules/context/constrained.py), plus the bounds' O(N) update. Run on an
otherwise idle machine for absolute numbers; the ratios are what this script is for.
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
from bench_seq2seq import batch, make_dict  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture  # noqa: E402
from fairseq_acvi.modules.context.normalizers import CONSTRAINED, NORMALIZERS  # noqa: E402


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build(d, context, normalizer, dim, layers, fertility):
    opts = dict(arch="acvi_lstm", context_inference=context, attention_normalizer=normalizer,
                encoder_embed_dim=dim, decoder_embed_dim=dim, encoder_hidden_size=dim,
                decoder_hidden_size=dim, encoder_layers=layers, decoder_layers=layers,
                dropout=0.2, mc_samples=0)
    if normalizer in CONSTRAINED:
        opts["attention_fertility"] = fertility
        opts["attention_fertility_value"] = 2.0 if fertility == "fixed" else 3.0
    args = argparse.Namespace(**opts)
    base_architecture(args)
    return ACVILSTMModel.build_model(args, _Task(d))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--len", type=int, default=30, help="target length (and source, by default)")
    p.add_argument("--src-len", type=int, default=None, help="source length (default: --len)")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--context", default="soft", help="--context-inference of every model (soft, acvi, ved)")
    p.add_argument("--fertility", default="fixed", choices=["fixed", "predicted"],
                   help="--attention-fertility of the constrained models")
    p.add_argument("--normalizers", default=",".join(n for n in NORMALIZERS if n != "softmax"),
                   help="comma-separated normalisers to time against softmax (always in)")
    p.add_argument("--decode-sentences", type=int, default=0,
                   help="also time beam search on this many sentences (0 = off)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d = make_dict(a.vocab)
    names = ["softmax"] + [n for n in a.normalizers.split(",") if n and n != "softmax"]
    for n in names:
        if n not in NORMALIZERS:
            raise SystemExit(f"--normalizers: unknown {n!r}; choose from {', '.join(NORMALIZERS)}")
    models = {n: build(d, a.context, n, a.dim, a.layers, a.fertility).to(a.device) for n in names}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.0) for k, m in models.items()}
    b = batch(d, a.batch, a.len, 0, a.src_len, a.device)
    words = a.batch * a.len
    wps = training_words_per_second(models, opts, b, words, a.rounds)
    print(f"# training: --context-inference {a.context}, batch {a.batch}×{a.len} target words "
          f"(source {a.src_len or a.len}), vocab {a.vocab}, dim {a.dim}, layers {a.layers}, "
          f"fertility {a.fertility}, {a.rounds} rounds, {a.threads} thread(s), device "
          f"{device_label(a.device)}; medians")
    print(f"{'normaliser':<12} {'words/s':>9} {'vs softmax':>10}")
    for k in names:
        print(f"{k:<12} {wps[k]:9.0f} {wps[k] / wps['softmax']:10.3f}")
    if a.decode_sentences > 0:
        src, lengths, _, _ = batch(d, a.decode_sentences, a.len, 1, a.src_len, a.device)
        sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
        times = {k: [] for k in names}
        with torch.no_grad():
            for m in models.values():
                m.eval()
            gens = {k: SequenceGenerator([models[k]], d, beam_size=a.beam, max_len_a=0,
                                         max_len_b=a.len, min_len=a.len) for k in names}
            for k in names:
                gens[k].forward(sample)                                  # warm-up
            for r in range(max(3, a.rounds // 2)):
                for k in names[r % len(names):] + names[: r % len(names)]:
                    times[k].append(timed(lambda: gens[k].forward(sample)))
        sps = {k: a.decode_sentences / statistics.median(v) for k, v in times.items()}
        print(f"# decoding: {a.decode_sentences} sentences, beam {a.beam}, {a.len} steps; medians")
        print(f"{'normaliser':<12} {'sent/s':>9} {'vs softmax':>10}")
        for k in names:
            print(f"{k:<12} {sps[k]:9.2f} {sps[k] / sps['softmax']:10.3f}")


if __name__ == "__main__":
    main()
