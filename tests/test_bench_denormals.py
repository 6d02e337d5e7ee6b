"""benchmarks/bench_denormals.py at toy sizes: both modes timed on the same weights (learning rate
0), the CPU's flag restored afterwards, and flushing really zeroes a subnormal float here."""
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))


def _subnormal_survives() -> bool:
    return (torch.tensor([1e-39]) * 1.0).item() != 0.0


def test_measure_times_both_modes_on_the_same_weights_and_restores_the_flag():
    from bench_denormals import measure
    from bench_seq2seq import batch, make_dict, ours

    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal floats")
    torch.manual_seed(0)
    d = make_dict(40)
    model = ours(d, "soft", 16, 1, mc=0)
    src, lengths, prev, tgt = batch(d, 4, 7, 0, 5)
    b = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
         "target": tgt}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    times = measure(model, b, rounds=3)
    assert {k: len(v) for k, v in times.items()} == {"kept": 3, "flushed": 3}
    assert all(t > 0 for v in times.values() for t in v)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), "the weights moved"
    assert _subnormal_survives(), "the flag was left on"
    torch.set_flush_denormal(True)
    try:
        assert not _subnormal_survives(), "flushing kept a subnormal float"
    finally:
        torch.set_flush_denormal(False)
