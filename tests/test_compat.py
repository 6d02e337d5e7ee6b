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
