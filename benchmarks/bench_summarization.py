"""Speed and memory of the pointer-generator against its targets, measured side by side in one run.

Prints, on the same synthetic batches (sources with OOV position markers):
  * training target words/s (forward + backward + Adam step) of ``acvi`` relative to ``soft``,
    both with coverage (target ≥ 0.95×);
  * beam-search decoding sentences/s of ``acvi`` with K = 10 Monte-Carlo samples relative to
    K = 1 (target ≥ 0.85×);
  * memory allocated by the copy mixture (forward + backward of
    ``copy_mixture_log_probs``) for source lengths N = 100, 400, 800 at a fixed vocabulary: it must
    stay ~constant in N (the (B, T, S, V) output dominates), far below the B·T·N·V floats of a
    one-hot formulation. Measured with torch's CPU profiler (``profile_memory``): the sum of all
    allocations made during the call, an upper bound of its peak.
Timings are interleaved (order rotates each round) and reported as medians.

    python benchmarks/bench_summarization.py [--rounds 5] [--batch 8] [--src-len 200]
        [--tgt-len 40] [--vocab 20000] [--markers 400] [--beam 5] [--decode-batch 4]
        [--device cuda]
"""
import argparse
import datetime
import statistics
import sys

import torch

import fairseq_acvi  # noqa: F401
from bench_common import device_label, elbo_train_step, timed
from fairseq.data import Dictionary
from fairseq.sequence_generator import SequenceGenerator
from torch.profiler import ProfilerActivity, profile

from fairseq_acvi.models.pointer_generator import (PointerGeneratorModel,
                                                   base_architecture)
from fairseq_acvi.modules.seq2seq.copy_generator import copy_mixture_log_probs


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def make_dict(V, markers):
    d = Dictionary()
    for i in range(V - d.nspecial - markers):
        d.add_symbol(f"w{i}")
    for j in range(markers):
        d.add_symbol(f"<unk-{j}>")
    return d


def build(d, variant, mc=10, device="cpu"):
    args = argparse.Namespace(arch="acvi_pointer_generator", context_inference=variant,
                              coverage=True, mc_samples=mc)
    base_architecture(args)   # the CNN/DM preset: 128-d embeddings, 256-d LSTMs, attention 512
    return PointerGeneratorModel.build_model(args, _Task(d)).to(device)


def batch(d, B, N, T, markers, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    first = d.index("<unk-0>")
    src = torch.randint(d.nspecial, first, (B, N), generator=g)
    oov = torch.rand(B, N, generator=g) < 0.05                 # ~5 % OOV markers
    src = torch.where(oov, first + torch.arange(N).clamp_max(markers - 1).expand(B, N), src)
    src[:, -1] = d.eos()
    tgt = torch.randint(d.nspecial, first, (B, T), generator=g)
    tgt[:, -1] = d.eos()
    prev = torch.cat([torch.full((B, 1), d.eos()), tgt[:, :-1]], 1)
    return tuple(t.to(device) for t in (src, torch.full((B,), N), prev, tgt))


def bench_training(d, args):
    data = batch(d, args.batch, args.src_len, args.tgt_len, args.markers, device=args.device)
    models = {}
    for v in ("soft", "acvi"):
        torch.manual_seed(0)
        m = build(d, v, device=args.device)
        m.train()
        models[v] = (m, torch.optim.Adam(m.parameters(), lr=0.0))   # same weights every step
        elbo_train_step(*models[v], *data)                                    # warm-up
    times = {v: [] for v in models}
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for v in order:
            times[v].append(timed(lambda: elbo_train_step(*models[v], *data)))
    words = args.batch * args.tgt_len
    return {v: words / statistics.median(t) for v, t in times.items()}


def bench_target_scoring(d, args):
    """Training words/s of soft attention, the gold tokens scored alone (what the ``elbo``
    criterion does) against the full (B, T, V) copy mixture gathered afterwards."""
    data = batch(d, args.batch, args.src_len, args.tgt_len, args.markers, device=args.device)
    torch.manual_seed(0)
    m = build(d, "soft", device=args.device)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=0.0)
    for mode in (True, False):
        elbo_train_step(m, opt, *data, score_target=mode)                      # warm-up
    times = {True: [], False: []}
    for r in range(args.rounds):
        for mode in ((True, False) if r % 2 == 0 else (False, True)):
            times[mode].append(timed(lambda: elbo_train_step(m, opt, *data, score_target=mode)))
    words = args.batch * args.tgt_len
    return {mode: words / statistics.median(t) for mode, t in times.items()}


def bench_decoding(d, args):
    torch.manual_seed(0)
    model = build(d, "acvi", device=args.device)
    model.eval()
    src, lengths, _, _ = batch(d, args.decode_batch, args.src_len, 2, args.markers, seed=1,
                               device=args.device)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    gen = SequenceGenerator([model], d, beam_size=args.beam, max_len_a=0,
                            max_len_b=args.decode_len, min_len=args.decode_len)

    def run(k, prob_space=True):
        model.decoder.context.mc_samples = k
        model.decoder.head.averages_in_probability_space = prob_space
        torch.manual_seed(0)
        with torch.no_grad():
            return [h[0]["tokens"].tolist() for h in gen.generate([model], sample)]

    run(1)
    # K = 10 with the samples averaged in log space (every sample's log P, a log-sum-exp over
    # them), as before 2026-11-27: the same hypotheses, slower
    if run(10) != run(10, prob_space=False):
        raise AssertionError("K = 10 decoding differs between the two ways of averaging")
    configs = [(1, True), (10, True), (10, False)]
    times = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in configs[r % 3:] + configs[:r % 3]:
            times[c].append(timed(lambda: run(*c)))
    return {c: args.decode_batch / statistics.median(t) for c, t in times.items()}


def allocated_bytes(fn):
    """Sum of all CPU allocations made by the ops of ``fn`` (≥ its peak memory)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return sum(max(0, e.self_cpu_memory_usage) for e in prof.key_averages())


def bench_memory(args):
    B, T, S, V, n_real = 4, args.tgt_len, 1, args.vocab, args.vocab - args.markers
    rows = []
    for N in (100, 400, 800):
        g = torch.Generator().manual_seed(0)
        logits = torch.randn(B, T, S, n_real, generator=g, requires_grad=True)
        p_gen = torch.rand(B, T, S, 1, generator=g, requires_grad=True)
        attn = torch.softmax(torch.randn(B, T, 1, N, generator=g), -1).requires_grad_()
        src = torch.randint(0, V, (B, 1, 1, N), generator=g)

        def fwd_bwd():
            lp = copy_mixture_log_probs(logits, p_gen, attn, src, V)
            lp[..., :10].sum().backward()

        got = allocated_bytes(fwd_bwd)
        rows.append((N, got, B * T * S * V * 4, B * T * N * V * 4))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--src-len", type=int, default=200)
    p.add_argument("--tgt-len", type=int, default=40)
    p.add_argument("--vocab", type=int, default=20000, help="dictionary size, markers included")
    p.add_argument("--markers", type=int, default=400)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--decode-batch", type=int, default=4)
    p.add_argument("--decode-len", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda (the timings; memory stays on CPU)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    d = make_dict(args.vocab, args.markers)
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, torch "
          f"{torch.__version__}, threads {args.threads}, device {device_label(args.device)}, "
          f"{' '.join(sys.argv[1:]) or 'defaults'}")
    print(f"# preset acvi_pointer_generator with coverage; V={args.vocab} "
          f"({args.markers} markers), batch {args.batch}, N={args.src_len}, T={args.tgt_len}")

    wps = bench_training(d, args)
    print(f"training words/s (median of {args.rounds}): soft {wps['soft']:.0f}, "
          f"acvi {wps['acvi']:.0f}  ->  acvi/soft = {wps['acvi'] / wps['soft']:.3f}  (target ≥ 0.95)")

    tws = bench_target_scoring(d, args)
    print(f"training words/s, soft (median of {args.rounds}): gold tokens scored alone "
          f"{tws[True]:.0f}, full copy mixture {tws[False]:.0f}  ->  {tws[True] / tws[False]:.2f}x")

    sps = bench_decoding(d, args)
    k1, k10, k10_log = sps[(1, True)], sps[(10, True)], sps[(10, False)]
    print(f"decoding sentences/s, beam {args.beam}, {args.decode_len} steps, acvi (median of "
          f"{args.rounds}): K=1 {k1:.2f}, K=10 {k10:.2f}  ->  K10/K1 = "
          f"{k10 / k1:.3f}  (target ≥ 0.85); K=10 averaged in log space {k10_log:.2f}  ->  "
          f"probability space / log space = {k10 / k10_log:.2f}x (same hypotheses)")

    print("copy mixture fwd+bwd, B=4, T=%d, S=1, V=%d: allocated MB vs N" % (args.tgt_len,
                                                                            args.vocab))
    print("  N     allocated   (B·T·S·V float32 output)   (one-hot B·T·N·V float32)")
    for N, got, out_bytes, onehot in bench_memory(args):
        print(f"  {N:<5} {got / 2**20:9.1f}   {out_bytes / 2**20:12.1f}   {onehot / 2**20:22.1f}")


if __name__ == "__main__":
    main()
