"""Where one training step's time goes (``torch.profiler``), for the models of
``bench_parallel_decoder.py`` at one shape: per step the wall time, the device's busy time (the
sum of its kernels' times), the host's time in the runtime's launch, copy and synchronisation
calls, their counts, and the operators that take most device and most host time.

A step whose device is busy for a small part of its wall time is bound by the host (Python,
dispatch, launches, synchronisations), not by the arithmetic; that is what the parallel path
and the compiled step (docs/method.md §3.7-3.8) are for. On a CPU only host times are shown.

    python benchmarks/profile_train_step.py --device cuda [--variants soft] [--compile reduce-overhead]
        [--batch 64] [--len 30] [--vocab 8000] [--layers 2] [--steps 5] [--top 8]
"""
import argparse
import sys
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import device_label, elbo_train_step, sync  # noqa: E402
from bench_parallel_decoder import build  # noqa: E402
from bench_seq2seq import batch, fairseq_lstm, make_dict  # noqa: E402

#: the runtime calls counted as launches, as copies (host-device or on the device; a copy to the
#: host also waits for the device) and as explicit synchronisations
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cudaLaunchKernelExC")
COPIES = ("cudaMemcpy",)
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def models_to_profile(a, d):
    """name -> model: each variant's default step loop and parallel path (and each compile
    mode of the parallel path), and fairseq's ``lstm``."""
    models = {}
    modes = [m for m in a.compile.split(",") if m]
    for v in [v for v in a.variants.split(",") if v]:
        models[f"{v} loop+feed"] = build(a, d, v, 1, True)
        models[f"{v} parallel"] = build(a, d, v, 0, True)
        for mode in modes:
            models[f"{v} parallel {mode}"] = build(a, d, v, 0, True, mode)
    models["fairseq-lstm"] = fairseq_lstm(d, a.dim, a.layers).to(a.device)
    return models


def profile_steps(model, opt, b, steps: int):
    """(wall seconds per step, the profiler's events averaged by name) over ``steps`` steps."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                           if torch.cuda.is_available() else [])
    sync()
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            elbo_train_step(model, opt, *b)
        sync()
        wall = (time.perf_counter() - t0) / steps
    return wall, prof.key_averages()


def _listing(events, time_us, steps: int, top: int) -> str:
    """The ``top`` events by ``time_us(event)``, each with its time and calls per step."""
    rows = sorted(events, key=time_us, reverse=True)[:top]
    return "; ".join(f"{e.key[:48]} {time_us(e) / steps / 1e3:.2f} ms ×{e.count // steps}"
                     for e in rows)


def report(name, wall, events, steps: int, top: int, cuda: bool):
    """Print one model's figures. The device's busy time sums the device's own events (kernels,
    copies, fills) only: an operator's self device time is the time of the kernels it launched,
    which appear as events of their own too. The operators are ranked by that self device time."""
    on_host = [e for e in events if e.device_type == DeviceType.CPU]
    kernels = sum(e.self_device_time_total for e in events
                  if e.device_type == DeviceType.CUDA) / steps
    launches = sum(e.count for e in events if e.key in LAUNCHES) / steps
    launch_us = sum(e.self_cpu_time_total for e in events if e.key in LAUNCHES) / steps
    copies = sum(e.count for e in events if e.key.startswith(COPIES)) / steps
    syncs = sum(e.count for e in events if e.key.startswith(SYNCS)) / steps
    sync_us = sum(e.self_cpu_time_total for e in events if e.key.startswith(COPIES + SYNCS)) / steps
    print(f"\n## {name}: {wall * 1e3:.2f} ms a step (wall)")
    if cuda:
        print(f"device busy {kernels / 1e3:.2f} ms ({kernels / 1e4 / wall:.0f} % of the wall time); "
              f"{launches:.0f} launches ({launch_us / 1e3:.2f} ms host), {copies:.0f} copies "
              f"and {syncs:.0f} synchronisations ({sync_us / 1e3:.2f} ms host)")
        print("most device time: "
              + _listing(on_host, lambda e: e.self_device_time_total, steps, top))
    print("most host time:   " + _listing(on_host, lambda e: e.self_cpu_time_total, steps, top))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", default="soft")
    p.add_argument("--compile", default="", help="compile modes of the parallel path to profile too")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--len", type=int, default=30)
    p.add_argument("--src-len", type=int, default=None)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=5, help="profiled steps per model")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    a.model = "translation"
    torch.manual_seed(0)
    d = make_dict(a.vocab)
    b = batch(d, a.batch, a.len, 0, a.src_len, a.device)
    cuda = str(a.device).startswith("cuda")
    print(f"# one training step (forward, backward, SGD update): batch {a.batch}×{a.len} target "
          f"words (source {a.src_len or a.len}), vocab {a.vocab}, dim {a.dim}, layers {a.layers}, "
          f"{a.steps} steps profiled after 3 unprofiled, device {device_label(a.device)}")
    for name, model in models_to_profile(a, d).items():
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.0)   # the same weights every step (bench_common)
        for _ in range(3):                     # compiles, records CUDA graphs, warms the caches
            elbo_train_step(model, opt, *b)
        wall, events = profile_steps(model, opt, b, a.steps)
        report(name, wall, events, a.steps, a.top, cuda)


if __name__ == "__main__":
    main()
