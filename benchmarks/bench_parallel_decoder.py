"""Training speed of the parallel teacher-forced path (``--input-feeding 0``, docs/method.md §3.7)
against the step loop, measured side by side in one run.

For each context inference named, on the same synthetic batches and sizes, training target
words/s (one ELBO step: forward, backward, SGD update) of

  * ``<v> loop+feed``: the default decoder, Luong's input feeding, the step loop;
  * ``<v> loop``:      the same without input feeding, forced through the step loop;
  * ``<v> parallel``:  the same model as ``loop``, every step at once (the parallel path);

  * ``<v> loop+feed <mode>``: the default decoder with its step compiled (``--compile MODES``:
    ``inductor``, ``reduce-overhead``; docs/method.md §3.8), warmed up for 3 steps;
  * ``<v> parallel <mode>``: the parallel path with its whole pass compiled the same way;

and fairseq's own ``lstm`` (with its input feeding) at the same sizes. A variant with no parallel
path (``pag``, ``rpag``) gets the ``loop+feed`` rows only. Timings are interleaved
(the order rotates every round) and reported as medians; the ratios compare runs of one process.
The targets: ``parallel`` ≥ 2× ``loop+feed`` at the Multi30K word shape on the CPU; on a GPU
``soft parallel`` ≥ 3× fairseq's ``lstm`` and PAG's compiled step ≥ 0.7× ``soft loop+feed``.

``--count`` adds, per model, the operators one training step dispatches (forward, backward and
update, views not counted: on a GPU about one kernel launch each) and, on CUDA, the host-device
synchronisations it makes (``torch.cuda.set_sync_debug_mode``): what a launch- or sync-bound step
pays, besides its time.

``--model pointer_generator`` times the CNN/DM preset instead (128-d embeddings, 256-d LSTMs, the
copy mixture over ``--markers`` OOV markers; coverage off, as in its first training phases, since
coverage is recurrent), without fairseq's ``lstm``.

    python benchmarks/bench_parallel_decoder.py [--variants soft,acvi] [--rounds 7]
        [--batch 64] [--len 30] [--src-len N] [--vocab 8000] [--layers 2] [--device cuda]
        [--compile inductor,reduce-overhead] [--count]
    python benchmarks/bench_parallel_decoder.py --model pointer_generator --batch 16 --len 100
        --src-len 400 --vocab 50000
"""
import argparse
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import device_label, elbo_train_step, training_words_per_second  # noqa: E402
from count_step_ops import OperatorCount  # noqa: E402
import bench_summarization as summ  # noqa: E402
from bench_seq2seq import batch, fairseq_lstm, make_dict, ours  # noqa: E402

from fairseq_acvi.models.pointer_generator import PointerGeneratorModel  # noqa: E402
from fairseq_acvi.models.pointer_generator import base_architecture as pg_arch  # noqa: E402


def build(a, d, variant, feeding: int, parallel: bool, compile_mode: str = "none"):
    if a.model == "pointer_generator":
        args = argparse.Namespace(arch="acvi_pointer_generator", context_inference=variant,
                                  coverage=False, mc_samples=10, input_feeding=feeding)
        pg_arch(args)
        model = PointerGeneratorModel.build_model(args, summ._Task(d))
    else:
        model = ours(d, variant, a.dim, a.layers, input_feeding=feeding)
    model.decoder.parallel_teacher_forcing = parallel
    model.decoder.compile_step = compile_mode
    return model.to(a.device)


def step_counts(model, opt, b, device: str):
    """(operators, synchronisations or None off CUDA) of one training step of ``model``."""
    with OperatorCount() as ops:
        elbo_train_step(model, opt, *b)
    if not str(device).startswith("cuda"):
        return sum(ops.by_name.values()), None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            elbo_train_step(model, opt, *b)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum(ops.by_name.values()), sum("synchroniz" in str(w.message) for w in caught)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", default="soft,acvi")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--len", type=int, default=30, help="target length (and source, by default)")
    p.add_argument("--src-len", type=int, default=None)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--model", choices=["translation", "pointer_generator"], default="translation")
    p.add_argument("--markers", type=int, default=400, help="pointer_generator: OOV markers")
    p.add_argument("--compile", default="", help="modes of --compile-decoder-step to time too")
    p.add_argument("--count", action="store_true",
                   help="also count each model's operators (and CUDA synchronisations) per step")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    pg = a.model == "pointer_generator"
    d = summ.make_dict(a.vocab, a.markers) if pg else make_dict(a.vocab)
    models, warmup = {}, {}
    modes = [m for m in a.compile.split(",") if m]
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        models[f"{v} loop+feed"] = build(a, d, v, 1, True)
        for mode in modes:
            models[f"{v} loop+feed {mode}"] = build(a, d, v, 1, True, mode)
            warmup[f"{v} loop+feed {mode}"] = 3
        parallel = build(a, d, v, 0, True)
        if parallel.decoder.runs_in_parallel:
            models[f"{v} loop"] = build(a, d, v, 0, False)
            models[f"{v} parallel"] = parallel
            for mode in modes:
                models[f"{v} parallel {mode}"] = build(a, d, v, 0, True, mode)
                warmup[f"{v} parallel {mode}"] = 3
    if not pg:
        models["fairseq-lstm"] = fairseq_lstm(d, a.dim, a.layers).to(a.device)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.0) for k, m in models.items()}
    b = (summ.batch(d, a.batch, a.src_len or a.len, a.len, a.markers, device=a.device) if pg
         else batch(d, a.batch, a.len, 0, a.src_len, a.device))
    wps = training_words_per_second(models, opts, b, a.batch * a.len, a.rounds, warmup)
    shape = ("the CNN/DM pointer-generator preset, " if pg
             else f"dim {a.dim}, layers {a.layers}, ")
    print(f"# training: batch {a.batch}×{a.len} target words (source {a.src_len or a.len}), "
          f"vocab {a.vocab}, {shape}{a.rounds} rounds, "
          f"{a.threads} thread(s), device {device_label(a.device)}; medians")
    ref = "fairseq-lstm" if not pg else next(iter(wps))
    counts = {k: step_counts(models[k], opts[k], b, a.device) for k in models} if a.count else {}
    head = f"{'model':<34} {'words/s':>9} {'vs ' + ref:>18}"
    print(head + (f" {'ops/step':>9} {'syncs/step':>10}" if counts else ""))
    for k, w in wps.items():
        line = f"{k:<34} {w:9.0f} {w / wps[ref]:18.3f}"
        if counts:
            ops, syncs = counts[k]
            line += f" {ops:9d} {'—' if syncs is None else syncs:>10}"
        print(line)
    for v in variants:
        feed = wps[f"{v} loop+feed"]
        if f"{v} parallel" in wps:
            par = wps[f"{v} parallel"]
            print(f"{v}: parallel / loop+feed = {par / feed:.2f}  (target ≥ 2)   "
                  f"parallel / loop (same model) = {par / wps[f'{v} loop']:.2f}")
            if ref == "fairseq-lstm":
                print(f"{v}: parallel / fairseq-lstm = {par / wps[ref]:.2f}  (GPU target ≥ 3)"
                      + "".join(f"   parallel {mode} / fairseq-lstm = "
                                f"{wps[f'{v} parallel {mode}'] / wps[ref]:.2f}" for mode in modes))
        for mode in modes:
            line = f"{v}: loop+feed {mode} / loop+feed = {wps[f'{v} loop+feed {mode}'] / feed:.2f}"
            if v != "soft" and "soft loop+feed" in wps:
                line += (f"   / soft loop+feed = "
                         f"{wps[f'{v} loop+feed {mode}'] / wps['soft loop+feed']:.2f}")
            print(line)


if __name__ == "__main__":
    main()
