"""What each source of uncertainty costs at decoding, side by side (docs/uncertainty.md §8, the
uncertainty study's cost question).

Beam search over the same sentences with per-token uncertainty recorded (``enable_uncertainty``,
as ``--print-uncertainty`` does), once per method:
  * ``soft``: the first soft checkpoint, one distribution a step (the single K = 1 pass);
  * ``acvi``: the ACVI checkpoint with K context samples averaged at every step;
  * ``mcdrop``: the first soft checkpoint with K Monte-Carlo dropout masks
    (modules/seq2seq/mc_dropout.py);
  * ``ensemble``: every soft checkpoint as one ensemble (fairseq's ``EnsembleModel``), when two or
    more are given.
The methods alternate and the order rotates each round; every method re-seeds torch before its
decode. Prints, per method, the median sentences/s over the rounds from wall time and from the
process's CPU time (the steadier of the two when other jobs share the machine; one thread), and
each method's time as a multiple of ``soft``'s: the study's "× a single K = 1 pass".

    python benchmarks/bench_uncertainty_methods.py --data data-bin/multi30k_en_de --subset test \\
        --soft runs/multi30k/en_de/soft_seed1/checkpoint_best.pt:runs/multi30k/en_de/soft_seed2/checkpoint_best.pt:runs/multi30k/en_de/soft_seed3/checkpoint_best.pt \\
        --acvi runs/multi30k/en_de/acvi_seed1/checkpoint_best.pt --sentences 100 --rounds 3
"""
import argparse
import statistics

import torch

import fairseq_acvi  # noqa: F401
from bench_common import interleaved_decodes as measure
from bench_common import load_checkpoints, subset_batches

from fairseq_acvi.generation.uncertainty import enable_uncertainty
from fairseq_acvi.modules.seq2seq.mc_dropout import wrap_mc_dropout


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="data-bin folder of the checkpoints")
    p.add_argument("--soft", required=True, help="soft checkpoints joined by ':' (the first is "
                   "the K = 1 pass and MC dropout's model; all of them the ensemble)")
    p.add_argument("--acvi", help="ACVI checkpoint")
    p.add_argument("--subset", default="test", help="the data's split (test: test2016)")
    p.add_argument("--sentences", type=int, default=100, help="the first N sentences of --subset")
    p.add_argument("--batch", type=int, default=64, help="sentences per beam-search call")
    p.add_argument("--beam", type=int, default=10)
    p.add_argument("--mc-samples", type=int, default=10, help="K of ACVI")
    p.add_argument("--mc-dropout", type=int, default=10, help="K of MC dropout")
    p.add_argument("--max-len-a", type=float, default=2.0)
    p.add_argument("--max-len-b", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def build_methods(args):
    """{method: (generator, its models)}, and the task (the soft checkpoints')."""
    soft_paths = args.soft.split(":")
    soft, task = load_checkpoints(soft_paths, args.data)
    gen_args = argparse.Namespace(beam=args.beam, max_len_a=args.max_len_a,
                                  max_len_b=args.max_len_b)

    def gen(models):
        return enable_uncertainty(task.build_generator(models, gen_args)), models

    methods = {"soft": gen(soft[:1])}
    if args.acvi:
        acvi, _ = load_checkpoints([args.acvi], args.data, mc_samples=args.mc_samples)
        methods["acvi"] = gen(acvi)
    methods["mcdrop"] = gen([wrap_mc_dropout(soft[0], args.mc_dropout)])
    if len(soft) > 1:
        methods["ensemble"] = gen(soft)
    return methods, task


def summary(times, n_sent: int, base: str = "soft"):
    """{method: {"wall_sps", "cpu_sps", "wall_x", "cpu_x"}}: median sentences/s and the median
    time as a multiple of ``base``'s."""
    out = {}
    for m, t in times.items():
        w, c = statistics.median(t["wall"]), statistics.median(t["cpu"])
        bw, bc = statistics.median(times[base]["wall"]), statistics.median(times[base]["cpu"])
        out[m] = {"wall_sps": n_sent / w, "cpu_sps": n_sent / c, "wall_x": w / bw, "cpu_x": c / bc}
    return out


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    methods, task = build_methods(args)
    batches = subset_batches(task, args.subset, args.sentences, args.batch)
    n_sent = sum(len(b["id"]) for b in batches)
    times, outputs = measure(methods, batches, args.rounds)
    missing = [m for m, out in outputs.items()
               if any("uncertainty" not in h[0] for batch in out for h in batch)]
    if missing:
        raise SystemExit(f"error: hypotheses without uncertainty from {missing}")
    print(f"sentences={n_sent} beam={args.beam} batch={args.batch} K(acvi)={args.mc_samples} "
          f"K(mcdrop)={args.mc_dropout} ensemble={len(args.soft.split(':'))} "
          f"threads={args.threads} rounds={args.rounds}")
    print("| method | sentences/s (wall) | sentences/s (CPU) | × soft (wall) | × soft (CPU) |")
    print("|---|---:|---:|---:|---:|")
    for m, s in summary(times, n_sent).items():
        print(f"| {m} | {s['wall_sps']:.2f} | {s['cpu_sps']:.2f} | {s['wall_x']:.2f}× | "
              f"{s['cpu_x']:.2f}× |")


if __name__ == "__main__":
    main()
