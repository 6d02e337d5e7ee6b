"""The sample combinations (mc_prediction/combination.py, docs/method.md §2.2): one pass and
chunk by chunk, against their definitions."""
import math

import pytest
import torch

from fairseq_acvi.mc_prediction.combination import RunningCombination, combine_samples


def _inputs(S=7, V=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.log_softmax(3 * torch.randn(2, 3, S, V, generator=g), -1)
    lw = torch.log_softmax(torch.randn(2, 3, S, generator=g), -1)
    return lp, lw


def _definition(lp, lw, mode):
    w = lw.exp()[..., None]
    if mode == "prob":
        return ((w * lp.exp()).sum(-2)).log()
    if mode == "logprob":
        return (w * lp).sum(-2)
    return torch.log_softmax((w * lp).sum(-2), -1)


@pytest.mark.parametrize("mode", ["prob", "logprob", "geometric"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_chunks_equal_one_pass_and_the_definition(mode, chunk):
    lp, lw = _inputs()
    want = _definition(lp, lw, mode)
    torch.testing.assert_close(combine_samples(lp, lw, mode), want)
    comb = RunningCombination(mode)
    for i in range(0, lp.size(-2), chunk):
        comb.add(lp[..., i:i + chunk, :], lw[..., i:i + chunk])
    torch.testing.assert_close(comb.result(), want)
    if mode != "logprob":                                  # a distribution over V
        torch.testing.assert_close(comb.result().exp().sum(-1), torch.ones(2, 3))


def test_uniform_weights_one_sample_and_bad_input():
    lp, _ = _inputs(S=4)
    torch.testing.assert_close(combine_samples(lp, None, "prob"), torch.logsumexp(lp, -2) - math.log(4))
    torch.testing.assert_close(combine_samples(lp[..., :1, :], None, "geometric"), lp[..., 0, :])
    # the geometric mean differs from the average of probabilities (Jensen), and both are proper
    assert (combine_samples(lp, None, "geometric") - combine_samples(lp, None, "prob")).abs().max() > 1e-2
    with pytest.raises(ValueError, match="unknown sample combination 'mean'"):
        RunningCombination("mean")
    with pytest.raises(ValueError, match="no samples were combined"):
        RunningCombination("prob").result()
