"""``--memory-efficient-fp16`` soak: no update is ever applied on a non-finite
loss or gradient, no parameter ever becomes non-finite, every loss-scale overflow is skipped and
training recovers from it (reliability_harness.py: :func:`fp16_soak`).

The loss scale starts at 2^16 and doubles after every few overflow-free updates, so overflows
keep coming back. This test found that on a machine without CUDA the first overflow killed the
run ("Torch not compiled with CUDA enabled" from fairseq's overflow branch; fixed in
fairseq_acvi/fairseq_patches.py: :func:`cpu_fp16_overflow_recovery`).
"""
import pytest

import reliability_harness as H


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return H.env(tmp_path_factory.getbasetemp() / "reliability")


def check(res, updates):
    assert res["rc"] == 0, res["exc"]
    assert res["final_update"] == updates
    assert res["overflow_skips"] >= 1, "the soak must exercise the overflow path"
    assert res["recovered"] == res["overflow_skips"]
    assert res["applied_on_nonfinite"] == 0
    assert res["nonfinite_params"] == 0
    assert res["skipped_but_changed"] == 0, "an overflowed step changed the parameters"
    assert res["applied"] == updates and res["steps"] == updates + res["overflow_skips"]
    assert res["ok"]


@pytest.mark.parametrize("spec", [{"kind": "mt", "variant": "acvi"},
                                  {"kind": "babi", "arch": "t_memn2n"}])
def test_fp16_overflows_are_skipped_and_recovered(env, tmp_path, spec):
    z, data = env
    check(H.fp16_soak(z, tmp_path, spec, data, 30, scale_window=8), 30)


@pytest.mark.slow
@pytest.mark.parametrize("name", H.VARIANTS + ["memn2n", "t_memn2n"])
def test_fp16_soak_full(env, tmp_path, name):
    z, data = env
    spec = ({"kind": "babi", "arch": name} if name in ("memn2n", "t_memn2n")
            else {"kind": "mt", "variant": name})
    n = H.FULL["fp16_updates"]
    check(H.fp16_soak(z, tmp_path, spec, data, n), n)
