"""Two gloo ``legacy_ddp`` processes against one process with
``--update-freq 2`` on the same data and seed (reliability_harness.py: :func:`ddp_vs_update_freq`).

Both see the same pairs of batches per update (rank r takes batches r, r + 2, ...; the single
process groups batches 2k, 2k + 1), sum the same two gradients and divide by the same sample
size. Tolerances: for a deterministic model (no dropout, no sampled context) the losses and
parameters agree to 1e-6 relative (measured: bit for bit: gloo's sum of the two float32
gradients is the same single addition as autograd's accumulation). For a sampled context (ACVI)
they cannot agree exactly: fairseq reseeds torch with (seed + update) at each update, so the
single process draws the second batch's noise after the first batch's while rank 1 starts the
stream afresh; that test allows 1 % relative (measured: 2e-4 after 20 updates).
"""
import pytest

import reliability_harness as H


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return H.env(tmp_path_factory.getbasetemp() / "reliability")


def test_two_processes_match_update_freq_2(env, tmp_path):
    z, data = env
    spec = {"kind": "mt", "variant": "soft", "extra": ["--dropout", "0"]}
    res = H.ddp_vs_update_freq(z, tmp_path, spec, data, 20)
    assert res["rc"] == [0, 0, 0], res.get("exc")
    assert res["batches_equal"], "the two set-ups must see the same batches per update"
    assert res["max_rel_loss_diff"] <= 1e-6, res
    assert res["max_abs_param_diff"] <= 1e-6, res


@pytest.mark.slow
@pytest.mark.parametrize("spec,tol", [
    ({"kind": "mt", "variant": "acvi", "extra": ["--dropout", "0"]}, 1e-2),
    ({"kind": "babi", "arch": "memn2n", "extra": ["--random-noise", "0"]}, 1e-6),
    ({"kind": "babi", "arch": "t_memn2n"}, 1e-2),
])
def test_two_processes_full(env, tmp_path, spec, tol):
    z, data = env
    res = H.ddp_vs_update_freq(z, tmp_path, spec, data, H.FULL["ddp_updates"])
    assert res["rc"] == [0, 0, 0], res.get("exc")
    assert res["batches_equal"]
    assert res["final_rel_loss_diff"] <= tol, res
