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


@pytest.mark.parametrize("block", [1, 2, 5, 1 << 18])
def test_average_members_in_row_blocks_is_one_pass_bit_for_bit(monkeypatch, block):
    """average_members goes a block of rows at a time on a CPU: every block size gives the same
    bits as the formula over the whole tensor, −inf included (a token one member rules out, a
    token all rule out), and M identical members still give their own values back."""
    from fairseq_acvi.mc_prediction import combination

    g = torch.Generator().manual_seed(1)
    lp = torch.log_softmax(8 * torch.randn(3, 4, 5, 13, generator=g), -1)       # (3, 4 rows, M, V)
    lp[0, 1, :, 2] = -math.inf
    lp[2, 3, 0, 7] = -math.inf
    top = lp.max(dim=-2, keepdim=True).values
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    whole = (top + torch.log(torch.exp(lp - top).mean(dim=-2, keepdim=True))).squeeze(-2)
    monkeypatch.setattr(combination, "CACHE_BLOCK_ELEMENTS", block * 5 * 13)     # `block` rows
    got = combination.average_members(lp)
    assert got.shape == (3, 4, 13)
    assert torch.equal(got, whole)
    assert got[0, 1, 2] == -math.inf and torch.isfinite(got[2, 3, 7])
    torch.testing.assert_close(got.exp(), lp.exp().mean(-2))                       # the definition
    same = lp[:, :, :1].expand(3, 4, 6, 13)
    assert torch.equal(combination.average_members(same), lp[:, :, 0])
