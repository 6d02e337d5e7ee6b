"""Helpers shared by the benchmark scripts (timing, one ELBO training step, checkpoints and their
test batches, decodes timed side by side)."""
import time

import torch


def sync() -> None:
    """Wait for queued GPU work (no-op without CUDA)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def device_label(device) -> str:
    """``device`` as the benchmarks print it: ``cpu``, or ``cuda (<GPU name>)``."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def timed(fn) -> float:
    """Wall seconds of one call of ``fn()`` (queued GPU work finished before and after)."""
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def elbo_train_step(model, opt, src, lengths, prev, tgt, score_target=None) -> None:
    """One SGD/Adam step on :func:`elbo_loss`."""
    loss = elbo_loss(model, src, lengths, prev, tgt, score_target)
    opt.zero_grad()
    loss.backward()
    opt.step()


def elbo_loss(model, src, lengths, prev, tgt, score_target=None):
    """NLL + Σ weight·term, as the ``elbo`` criterion computes it (the coverage term, weight None,
    counts with weight 1; the gold tokens scored by the decoder itself where it
    ``supports_target_scoring``, as the criterion does, unless ``score_target=False``).
    Works for fairseq's own models too, whose second output is not a dict of losses."""
    if score_target is None:
        score_target = getattr(getattr(model, "decoder", None), "supports_target_scoring", False)
    if score_target:
        out = model(src, lengths, prev, target=tgt, score_target=True)
        loss = -out[1]["target_lprobs"].sum()
    else:
        out = model(src, lengths, prev)
        lprobs = model.get_normalized_probs(out, log_probs=True)
        loss = -lprobs.gather(-1, tgt.unsqueeze(-1)).sum()
    extra = out[1] if isinstance(out[1], dict) else {}
    for value, weight in extra.get("losses", {}).values():
        loss = loss + (1.0 if weight is None else weight) * value
    return loss


def interleaved_times(steps, rounds: int, warmup=None):
    """{name: [seconds, ...]} of each step ``steps[name]()`` (a callable): warm-up calls (one each,
    or ``warmup[name]``), then ``rounds`` rounds with the order rotated every round."""
    for k, step in steps.items():
        for _ in range((warmup or {}).get(k, 1)):
            step()
    keys = list(steps)
    times = {k: [] for k in keys}
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[: r % len(keys)]:
            times[k].append(timed(steps[k]))
    return times


def training_words_per_second(models, opts, b, words: int, rounds: int, warmup=None):
    """Target words/s of :func:`elbo_train_step` for each model on the same batch ``b``, timed by
    :func:`interleaved_times` (``warmup[name]``: a compiled model compiles and records its CUDA
    graphs there); medians. ``models``/``opts``: name -> model / optimizer (put in train mode).

    Every step runs the whole update with the learning rate set to 0 (the optimizers' groups are
    changed here), so each step times the same weights: updates repeated on one batch drive a
    model to where no training goes (it memorises the batch: extreme logits and subnormal floats),
    and on a CPU such steps were up to 6× slower, growing from round to round (measured 2026-11-30,
    the Multi30K shape, SGD at 0.1: 2.2 s to 12.9 s a step within 8 steps; at 0: 1.7-2.4 s)."""
    import statistics

    for m in models.values():
        m.train()
    for opt in opts.values():
        for group in opt.param_groups:
            group["lr"] = 0.0
    steps = {k: (lambda k=k: elbo_train_step(models[k], opts[k], *b)) for k in models}
    return {k: words / statistics.median(v) for k, v in interleaved_times(steps, rounds, warmup).items()}


def load_checkpoints(paths, data, **overrides):
    """fairseq checkpoints ``paths`` of the data-bin folder ``data`` (``overrides``: model
    options, e.g. mc_samples) -> (their models in evaluation mode, the task)."""
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        list(paths), arg_overrides=dict(data=data, **overrides))
    for m in models:
        m.eval()
    return models, task


def subset_batches(task, subset: str, sentences: int, batch: int):
    """The first ``sentences`` sentences of ``subset`` as generation batches of ``batch``."""
    task.load_dataset(subset)
    ds = task.dataset(subset)
    n = min(sentences, len(ds))
    return [ds.collater([ds[i] for i in range(s, min(n, s + batch))]) for s in range(0, n, batch)]


def interleaved_decodes(methods, batches, rounds: int, report=None):
    """Decode ``batches`` with every method {name: (generator, its models)} ``rounds`` times,
    interleaved (the order rotates each round), torch re-seeded before each decode; ``report``
    (default: print) gets one line a round. -> ({method: {"wall": [s, ...], "cpu": [s, ...]}}
    (wall and process CPU seconds), the last round's hypotheses {method: [output per batch]})."""
    report = report or (lambda line: print(line, flush=True))
    names = list(methods)
    times = {m: {"wall": [], "cpu": []} for m in names}
    outputs = {}

    def decode(name):
        generator, models = methods[name]
        torch.manual_seed(1)
        with torch.no_grad():
            outputs[name] = [generator.generate(models, b) for b in batches]

    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            c0 = time.process_time()
            times[name]["wall"].append(timed(lambda: decode(name)))
            times[name]["cpu"].append(time.process_time() - c0)
        report(f"round {r + 1}: " + "  ".join(
            f"{m} {times[m]['wall'][-1]:.1f}s (cpu {times[m]['cpu'][-1]:.1f}s)" for m in names))
    return times, outputs
