"""benchmarks/bench_uncertainty_methods.py times the methods fairly: each round visits every
method once, the order rotates (no method always runs first, on a cold cache), every decode starts
from the same random state, and the ratios are of medians to the K = 1 pass."""
import os
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import bench_uncertainty_methods as bench  # noqa: E402


class _Recorder:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def generate(self, models, batch):
        self.log.append(self.name)
        return [[{"draw": torch.rand(()).item(), "batch": batch}]]


def test_rounds_rotate_and_reseed():
    log = []
    methods = {m: (_Recorder(m, log), []) for m in ("soft", "acvi", "mcdrop")}
    times, outputs = bench.measure(methods, ["b0", "b1"], rounds=3, report=lambda _: None)
    per_round = [log[i:i + 6:2] for i in range(0, 18, 6)]
    assert per_round == [["soft", "acvi", "mcdrop"], ["acvi", "mcdrop", "soft"],
                         ["mcdrop", "soft", "acvi"]]
    assert [len(t["wall"]) for t in times.values()] == [3, 3, 3]
    draws = {m: [b[0][0]["draw"] for b in out] for m, out in outputs.items()}
    assert draws["soft"] == draws["acvi"] == draws["mcdrop"]      # same random state each decode
    assert [out[1][0][0]["batch"] for out in outputs.values()] == ["b1"] * 3


def test_summary_is_medians_over_the_base():
    times = {"soft": {"wall": [1.0, 9.0, 2.0], "cpu": [1.0, 1.0, 1.0]},
             "acvi": {"wall": [10.0, 8.0, 30.0], "cpu": [4.0, 5.0, 6.0]}}
    s = bench.summary(times, n_sent=20)
    assert s["soft"]["wall_x"] == s["soft"]["cpu_x"] == 1.0
    assert s["acvi"]["wall_x"] == pytest.approx(10.0 / 2.0)
    assert s["acvi"]["cpu_x"] == pytest.approx(5.0)
    assert s["acvi"]["cpu_sps"] == pytest.approx(4.0)
