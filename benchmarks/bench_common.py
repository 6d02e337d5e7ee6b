"""Helpers shared by the benchmark scripts (timing, one ELBO training step)."""
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


def training_words_per_second(models, opts, b, words: int, rounds: int, warmup=None):
    """Target words/s of :func:`elbo_train_step` for each model on the same batch ``b``: warm-up
    steps (one each, or ``warmup[name]``: a compiled model compiles and records its CUDA graphs
    there), then ``rounds`` rounds with the models' order rotated every round; medians.
    ``models``/``opts``: name -> model / optimizer (the models are put in train mode)."""
    import statistics

    times = {k: [] for k in models}
    for m in models.values():
        m.train()
    for k in models:  # warm-up
        for _ in range((warmup or {}).get(k, 1)):
            elbo_train_step(models[k], opts[k], *b)
    keys = list(models)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[: r % len(keys)]:
            times[k].append(timed(lambda: elbo_train_step(models[k], opts[k], *b)))
    return {k: words / statistics.median(v) for k, v in times.items()}
