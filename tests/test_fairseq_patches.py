"""The plugin's patches to fairseq (fairseq_acvi/fairseq_patches.py) and its checkpoint allow-list
(fairseq_acvi/checkpoint_allowlist.py)."""
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
    from fairseq_acvi import fairseq_patches as patches

    assert getattr(utils.set_torch_seed, "_acvi_cheap_cpu_reseeding", False)
    monkeypatch.setattr(patches, "_NO_ACCELERATOR", None)
    if not patches._no_accelerator():
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
    from fairseq_acvi import fairseq_patches as patches

    seen = []
    monkeypatch.setattr(patches, "_NO_ACCELERATOR", False)
    monkeypatch.setattr(torch, "manual_seed", lambda s: seen.append(s))
    utils.set_torch_seed(11)
    assert seen == [11]


def test_checkpoint_copies_are_atomic(tmp_path, monkeypatch):
    """A copy that dies halfway (here: an exception after half the bytes) leaves the destination
    as it was, never truncated; a completed copy replaces it whole."""
    import shutil

    from fairseq.file_io import PathManager

    src, dst = tmp_path / "checkpoint_1_4.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"new" * 1000)
    dst.write_bytes(b"old checkpoint")
    real = shutil.copyfile

    def dies_halfway(a, b, *args, **kwargs):
        with open(a, "rb") as f, open(b, "wb") as g:
            g.write(f.read()[:1500])
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(shutil, "copyfile", dies_halfway)
    try:
        PathManager.copy(str(src), str(dst), overwrite=True)
    except KeyboardInterrupt:
        pass
    assert dst.read_bytes() == b"old checkpoint"
    monkeypatch.setattr(shutil, "copyfile", real)
    assert PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == b"new" * 1000
    assert not (tmp_path / "checkpoint_last.pt.tmp").exists()  # renamed into place


def test_cpu_fp16_overflow_skips_the_update_instead_of_calling_cuda(monkeypatch):
    """fairseq's overflow branch calls ``torch.tensor(0.0).cuda()``; without an accelerator the
    wrapped train_step makes that the identity for the duration of the step, and restores
    ``Tensor.cuda`` afterwards (also when the step raises)."""
    import pytest
    from fairseq.trainer import Trainer

    from fairseq_acvi import fairseq_patches as patches

    assert getattr(Trainer.train_step, "_acvi_cpu_overflow", False)
    monkeypatch.setattr(patches, "_NO_ACCELERATOR", True)
    seen = []

    def fake_step(self, samples, raise_oom=False):
        seen.append(torch.tensor(0.0).cuda())  # what fairseq's overflow branch does
        raise OverflowError("after the cuda call")

    wrapped = Trainer.train_step
    monkeypatch.setattr(patches, "_no_accelerator", lambda: True)
    # re-wrap a stand-in for fairseq's method with the same wrapper
    monkeypatch.setattr(Trainer, "train_step", fake_step)
    patches.cpu_fp16_overflow_recovery()
    with pytest.raises(OverflowError):
        Trainer.train_step(object(), [])
    assert seen and seen[0].device.type == "cpu"
    assert "cuda" not in torch.Tensor.__dict__  # restored
    monkeypatch.setattr(Trainer, "train_step", wrapped)
