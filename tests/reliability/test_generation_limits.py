"""Decoding at the edges: ``mc_samples`` 0, -1 and 1,000, beam 1 and 50 (more
than the vocabulary), sources longer than the model's or the command's --max-source-positions,
fairseq-interactive with the plugin (unknown words, an empty line, an over-long line), and
t-MEM-NN's mc_samples in fairseq-validate: each works, or fails with an error whose message names
the option or limit at fault (reliability_harness.py: :data:`GEN_CASES`)."""
import pytest

import reliability_harness as H

FAST = ["mc_samples=-1", "mc_samples=1000", "beam=50 (> vocabulary)",
        "source > --max-source-positions 6", "fairseq-interactive"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return H.env(tmp_path_factory.getbasetemp() / "reliability")


def test_generation_limits(env, tmp_path):
    z, data = env
    res = H.generation_limits(z, tmp_path, data, names=FAST)
    assert [r["case"] for r in res] == FAST
    assert all(r["ok"] for r in res), [r for r in res if not r["ok"]]


@pytest.mark.slow
def test_generation_limits_all(env, tmp_path):
    z, data = env
    res = H.generation_limits(z, tmp_path, data)
    assert len(res) == len(H.GEN_CASES)
    assert all(r["ok"] for r in res), [r for r in res if not r["ok"]]
