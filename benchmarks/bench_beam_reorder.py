"""Beam search with the per-sentence tensors left in place while rows move within their sentences
(modules/seq2seq/beam_rows.py; docs/method.md §3.9) against copying every tensor at every step,
side by side on the same sentences.

Each model decodes the same batches both ways, alternating, the order rotating each round; the
hypotheses and scores of the two ways are checked to be identical. Prints process CPU seconds
(medians over the rounds) and the speed-up, per model: ``soft``, ACVI with K samples, and MC
dropout with K chains of the ``soft`` model.

    python benchmarks/bench_beam_reorder.py --data data-bin/multi30k_en_de \\
        --soft runs/multi30k/en_de/soft_seed1/checkpoint_best.pt \\
        --acvi runs/multi30k/en_de/acvi_seed1/checkpoint_best.pt --sentences 128 --rounds 3

``--cnndm-shape`` instead: the CNN/DM pointer-generator preset (``soft`` and ACVI, untrained: the
copying does not depend on the weights) on 16 random 400-word articles, beam 4, 35 to 100 words
out (See et al.'s decoding), no checkpoint needed::

    python benchmarks/bench_beam_reorder.py --cnndm-shape --rounds 3
"""
import argparse
import statistics
from contextlib import contextmanager

import torch

import fairseq_acvi  # noqa: F401
from bench_common import interleaved_decodes, load_checkpoints, subset_batches

from fairseq_acvi.modules.seq2seq import beam_rows
from fairseq_acvi.modules.seq2seq.mc_dropout import set_rows_per_sentence, wrap_mc_dropout


@contextmanager
def copying_everything():
    """Within the block, every reorder copies every tensor (as before beam_rows)."""
    reordered, share = beam_rows.reordered, beam_rows.share_within_sentences
    beam_rows.reordered = lambda s, o: (reordered(s, o)[0], False)
    beam_rows.share_within_sentences = lambda *a: False
    try:
        yield
    finally:
        beam_rows.reordered, beam_rows.share_within_sentences = reordered, share


class _Way:
    """A generator that decodes with the per-sentence tensors kept (``copy`` False) or copied."""

    def __init__(self, generator, copy: bool):
        self.generator, self.copy = generator, copy

    def generate(self, models, batch):
        if not self.copy:
            return self.generator.generate(models, batch)
        with copying_everything():
            return self.generator.generate(models, batch)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data")
    p.add_argument("--soft", help="a soft checkpoint (also MC dropout's model)")
    p.add_argument("--cnndm-shape", action="store_true",
                   help="untrained pointer-generators at the CNN/DM shape (module docstring)")
    p.add_argument("--acvi", help="an ACVI checkpoint")
    p.add_argument("--subset", default="test")
    p.add_argument("--sentences", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--beam", type=int, default=10)
    p.add_argument("--mc-samples", type=int, default=10)
    p.add_argument("--mc-dropout", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def cnndm_shape(args):
    """({name: [model]}, a task-like object, the batches) at the CNN/DM preset's shape."""
    import bench_summarization as summ
    from fairseq.sequence_generator import SequenceGenerator

    from fairseq_acvi.models.pointer_generator import PointerGeneratorModel
    from fairseq_acvi.models.pointer_generator import base_architecture

    d = summ.make_dict(50000, 400)
    models = {}
    for variant in ("soft", "acvi"):
        margs = argparse.Namespace(arch="acvi_pointer_generator", context_inference=variant,
                                   coverage=True, mc_samples=args.mc_samples)
        base_architecture(margs)
        torch.manual_seed(0)
        models[variant] = [PointerGeneratorModel.build_model(margs, summ._Task(d)).eval()]
    g = torch.Generator().manual_seed(0)
    src = torch.randint(d.nspecial, len(d), (args.sentences, 400), generator=g)
    src[:, -1] = d.eos()
    batches = []
    for s in range(0, args.sentences, args.batch):
        rows = src[s:s + args.batch]
        batches.append({"id": torch.arange(s, s + rows.size(0)),
                        "net_input": {"src_tokens": rows,
                                      "src_lengths": torch.full((rows.size(0),), 400)}})

    class _Task:
        def build_generator(self, ms, gen_args):
            return SequenceGenerator(ms, d, beam_size=gen_args.beam, min_len=35, max_len_a=0,
                                     max_len_b=100)

    return models, _Task(), batches


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.cnndm_shape:
        args.beam, args.batch, args.sentences = 4, 16, min(args.sentences, 16)
        models, task, batches = cnndm_shape(args)
    else:
        if not (args.data and args.soft):
            raise SystemExit("error: --data and --soft are needed (or --cnndm-shape)")
        soft, task = load_checkpoints([args.soft], args.data)
        models = {"soft": soft}
        if args.acvi:
            models["acvi"] = load_checkpoints([args.acvi], args.data,
                                              mc_samples=args.mc_samples)[0]
        models["mcdrop"] = [wrap_mc_dropout(soft[0], args.mc_dropout)]
        batches = subset_batches(task, args.subset, args.sentences, args.batch)
    gen_args = argparse.Namespace(beam=args.beam, max_len_a=2.0, max_len_b=10)
    n_sent = sum(len(b["id"]) for b in batches)
    print(f"sentences={n_sent} beam={args.beam} batch={args.batch} K={args.mc_samples} "
          f"(acvi) / {args.mc_dropout} (mcdrop) threads={args.threads} rounds={args.rounds}")
    print("| model | CPU s, copying every tensor | CPU s, per-sentence kept | speed-up "
          "| same hypotheses |")
    print("|---|---:|---:|---:|---|")
    for name, ms in models.items():
        gen = task.build_generator(ms, gen_args)
        if name == "mcdrop":
            set_rows_per_sentence(ms, args.beam)
        methods = {"copy": (_Way(gen, True), ms), "kept": (_Way(gen, False), ms)}
        times, outputs = interleaved_decodes(methods, batches, args.rounds,
                                             report=lambda line: None)
        same = all(torch.equal(a["tokens"], b["tokens"])
                   and torch.equal(a["positional_scores"], b["positional_scores"])
                   for ba, bb in zip(outputs["copy"], outputs["kept"])
                   for ha, hb in zip(ba, bb) for a, b in zip(ha, hb))
        c, k = (statistics.median(times[w]["cpu"]) for w in ("copy", "kept"))
        print(f"| {name} | {c:.1f} | {k:.1f} | {c / k:.2f}× | {same} |", flush=True)


if __name__ == "__main__":
    main()
