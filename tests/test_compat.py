"""The plugin's fixes to its environment (fairseq_acvi/compat.py)."""
import argparse

import numpy as np
import torch

import fairseq_acvi  # noqa: F401
from fairseq.data import data_utils


def test_namespace_is_allow_listed_but_code_is_not(tmp_path):
    path = tmp_path / "ck.pt"
    torch.save({"args": argparse.Namespace(lr=[0.1]), "w": torch.ones(2)}, path)
    state = torch.load(path)  # weights_only=True is torch's default
    assert state["args"].lr == [0.1]
    torch.save({"f": print}, tmp_path / "bad.pt")
    try:
        torch.load(tmp_path / "bad.pt")
    except Exception as e:  # torch raises UnpicklingError naming the global
        assert "print" in str(e)
    else:
        raise AssertionError("a non-allow-listed global was loaded")


def test_batching_keeps_every_example():
    rng = np.random.RandomState(0)
    sizes = rng.randint(3, 10, size=1003)
    order = np.argsort(sizes, kind="mergesort")
    for max_tokens, max_sentences in ((200, None), (None, 64)):
        batches = data_utils.batch_by_size(order, num_tokens_fn=lambda i: sizes[i],
                                           num_tokens_vec=sizes, max_tokens=max_tokens,
                                           max_sentences=max_sentences,
                                           required_batch_size_multiple=8)
        flat = np.concatenate(batches)
        assert sorted(flat.tolist()) == list(range(1003))
        assert all(len(b) % 8 == 0 for b in batches[:-1])


def test_cpu_reseeding_gives_torch_manual_seed_stream_without_stack_captures(monkeypatch):
    """fairseq's per-update ``utils.set_torch_seed`` (wrapped by the plugin): the same random
    stream as ``torch.manual_seed``, the previous state restored on exit, and no
    ``traceback.format_stack`` call (what made it cost 0.3-0.7 ms per update on CPU)."""
    import traceback

    from fairseq import utils
    from fairseq_acvi import compat

    assert getattr(utils.set_torch_seed, "_acvi_cheap_cpu_reseeding", False)
    monkeypatch.setattr(compat, "_NO_ACCELERATOR", None)
    if not compat._no_accelerator():
        import pytest
        pytest.skip("an accelerator is present: fairseq's own seeding runs")
    torch.manual_seed(123)
    want = torch.rand(5)
    torch.manual_seed(7)
    torch.rand(3)
    want_after = torch.rand(3)
    calls = []
    real = traceback.format_stack
    monkeypatch.setattr(traceback, "format_stack", lambda *a, **k: calls.append(1) or real(*a, **k))
    torch.manual_seed(7)
    torch.rand(3)
    calls.clear()
    with utils.set_torch_seed(123):
        got = torch.rand(5)
    assert calls == []
    assert torch.equal(got, want)
    assert torch.equal(torch.rand(3), want_after)   # the stream resumes where it was
    torch.manual_seed(5)              # control: torch's own seeding does capture stacks here
    assert calls != []

def test_reseeding_defers_to_fairseq_when_an_accelerator_is_present(monkeypatch):
    from fairseq import utils
    from fairseq_acvi import compat

    seen = []
    monkeypatch.setattr(compat, "_NO_ACCELERATOR", False)
    monkeypatch.setattr(torch, "manual_seed", lambda s: seen.append(s))
    utils.set_torch_seed(11)
    assert seen == [11]
