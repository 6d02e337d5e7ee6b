"""Decoding speed with per-token uncertainty on against off, side by side (docs/uncertainty.md).

Beam search over the same sentences with the same generator settings, once as fairseq builds it
(off) and once through ``enable_uncertainty`` (on: the decoder also forms H[p̄], E_k H[p_k] and
the mutual information of every step, and every hypothesis carries them). The two modes alternate
(the order rotates each round), each round re-seeds torch so both see the same ACVI samples, and
the hypotheses of the two modes are checked to be identical. Prints sentences/s per mode (median
over rounds) and the ratio on / off (target ≥ 0.95), from wall-clock time and from the process's
CPU time (the steadier of the two when other jobs share the machine; one thread).

A trained checkpoint (the translation issue's Multi30K models)::

    python benchmarks/bench_uncertainty.py --path runs/multi30k/en_de/acvi-b1e-4-d234-wu117-e20_seed2/checkpoint_best.pt \\
        --data data-bin/multi30k_en_de --subset valid --sentences 128 --batch 128 --beam 10 --mc-samples 10

Without ``--path``: an untrained ``acvi_lstm_multi30k``-sized model (V = 7,859, 256-d) on random
sources (lengths 8-16, ``--max-len-b`` bounds the outputs).
"""
import argparse
import statistics

import torch

import fairseq_acvi  # noqa: F401
from bench_common import interleaved_decodes, load_checkpoints, subset_batches

from fairseq_acvi.generation.uncertainty import enable_uncertainty


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--path", help="checkpoint (default: an untrained Multi30K-sized ACVI model)")
    p.add_argument("--data", help="data-bin folder of the checkpoint")
    p.add_argument("--subset", default="valid")
    p.add_argument("--sentences", type=int, default=128, help="the first N sentences of --subset")
    p.add_argument("--batch", type=int, default=128, help="sentences per beam-search call")
    p.add_argument("--beam", type=int, default=10)
    p.add_argument("--mc-samples", type=int, default=10, help="K (ACVI)")
    p.add_argument("--max-len-a", type=float, default=2.0)
    p.add_argument("--max-len-b", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def checkpoint_batches(args):
    models, task = load_checkpoints([args.path], args.data, mc_samples=args.mc_samples)
    return models[0], task, subset_batches(task, args.subset, args.sentences, args.batch)


def synthetic_batches(args):
    from argparse import Namespace

    from fairseq.data import Dictionary
    from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, acvi_lstm_multi30k

    d = Dictionary()
    for i in range(7859 - d.nspecial):
        d.add_symbol(f"w{i}")
    margs = Namespace(arch="acvi_lstm_multi30k", context_inference="acvi",
                      mc_samples=args.mc_samples)
    acvi_lstm_multi30k(margs)
    task = Namespace(source_dictionary=d, target_dictionary=d)
    model = ACVILSTMModel.build_model(margs, task)
    g = torch.Generator().manual_seed(0)
    batches = []
    for s in range(0, args.sentences, args.batch):
        B = min(args.batch, args.sentences - s)
        lengths = torch.randint(8, 17, (B,), generator=g).sort(descending=True).values
        src = torch.randint(d.nspecial, len(d), (B, int(lengths[0])), generator=g)
        src[torch.arange(src.size(1))[None] >= lengths[:, None]] = d.pad()
        src[torch.arange(B), lengths - 1] = d.eos()
        batches.append({"id": torch.arange(s, s + B),
                        "net_input": {"src_tokens": src, "src_lengths": lengths}})

    class _Task:
        target_dictionary = d

        def build_generator(self, models, gen_args):
            from fairseq.sequence_generator import SequenceGenerator
            return SequenceGenerator(models, d, beam_size=gen_args.beam,
                                     max_len_a=gen_args.max_len_a, max_len_b=gen_args.max_len_b)

    return model, _Task(), batches


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    model, task, batches = (checkpoint_batches if args.path else synthetic_batches)(args)
    model.eval()
    gen_args = argparse.Namespace(beam=args.beam, max_len_a=args.max_len_a,
                                  max_len_b=args.max_len_b)
    gens = {"off": task.build_generator([model], gen_args),
            "on": enable_uncertainty(task.build_generator([model], gen_args))}
    n_sent = sum(len(b["id"]) for b in batches)
    modes = list(gens)
    timing, outputs = interleaved_decodes({m: (g, [model]) for m, g in gens.items()}, batches,
                                          args.rounds)
    times = {m: timing[m]["wall"] for m in modes}
    cpu = {m: timing[m]["cpu"] for m in modes}
    same = all(torch.equal(h["tokens"], g["tokens"])
               for bo, bn in zip(outputs["off"], outputs["on"])
               for ho, hn in zip(bo, bn) for h, g in zip(ho, hn))
    speed = {m: n_sent / statistics.median(times[m]) for m in modes}
    cpu_speed = {m: n_sent / statistics.median(cpu[m]) for m in modes}
    print(f"model: {args.path or 'untrained acvi_lstm_multi30k size'}  K={args.mc_samples} "
          f"beam={args.beam} batch={args.batch} sentences={n_sent} threads={args.threads} "
          f"rounds={args.rounds}")
    print(f"wall: off {speed['off']:.2f} sentences/s   on {speed['on']:.2f} sentences/s   "
          f"ratio on/off {speed['on'] / speed['off']:.3f}")
    print(f"cpu:  off {cpu_speed['off']:.2f} sentences/s   on {cpu_speed['on']:.2f} sentences/s   "
          f"ratio on/off {cpu_speed['on'] / cpu_speed['off']:.3f}   (process CPU time: steadier "
          f"than wall time on a shared machine)")
    print(f"same hypotheses: {same}")


if __name__ == "__main__":
    main()
