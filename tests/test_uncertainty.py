"""The entropy / mutual-information decomposition of a Monte-Carlo average (docs/uncertainty.md)."""
import math

import pytest
import torch

from fairseq_acvi.mc_prediction.uncertainty import (ENTROPY, EXPECTED_ENTROPY, MUTUAL_INFORMATION,
                                              SampleAccumulator, decompose, single)


def _mixture(lp, log_weights=None):
    S = lp.size(-2)
    lw = log_weights if log_weights is not None else lp.new_full(lp.shape[:-1], -math.log(S))
    return torch.logsumexp(lp + lw.unsqueeze(-1), dim=-2)


def test_two_samples_by_hand():
    # p_1 = (0.5, 0.5), p_2 = (0.9, 0.1), w = (1/2, 1/2):  p̄ = (0.7, 0.3)
    # H[p̄]   = −0.7 ln 0.7 − 0.3 ln 0.3                     = 0.24967 + 0.36119 = 0.61086
    # H[p_1] = ln 2 = 0.69315;  H[p_2] = −0.9 ln 0.9 − 0.1 ln 0.1 = 0.09482 + 0.23026 = 0.32508
    # E H    = (0.69315 + 0.32508) / 2 = 0.50912;  I = 0.61086 − 0.50912 = 0.10175
    lp = torch.tensor([[0.5, 0.5], [0.9, 0.1]]).log()
    u = decompose(lp, _mixture(lp))
    assert u.shape == (3,) and u.dtype == torch.float32
    torch.testing.assert_close(u, torch.tensor([0.61086, 0.50912, 0.10175]), atol=1e-5, rtol=0)
    # weights w = (1/4, 3/4): p̄ = (0.8, 0.2), H[p̄] = 0.50040, E H = 0.17329 + 0.24381 = 0.41710
    lw = torch.tensor([0.25, 0.75]).log()
    u = decompose(lp, _mixture(lp, lw), lw)
    torch.testing.assert_close(u, torch.tensor([0.50040, 0.41710, 0.08330]), atol=1e-5, rtol=0)


def test_entropy_matches_the_mixture_and_mi_is_the_mean_kl():
    g = torch.Generator().manual_seed(0)
    lp = torch.log_softmax(3 * torch.randn(4, 5, 6, 50, generator=g), -1)       # (B, T, S, V)
    lw = torch.log_softmax(torch.randn(4, 5, 6, generator=g), -1)
    mix = _mixture(lp, lw)
    u = decompose(lp, mix, lw)
    assert u.shape == (4, 5, 3)
    h_direct = -(mix.exp() * mix).sum(-1)
    torch.testing.assert_close(u[..., ENTROPY], h_direct, atol=2e-5, rtol=1e-5)
    kl = (lp.exp() * (lp - mix.unsqueeze(-2))).sum(-1)                          # (B, T, S)
    torch.testing.assert_close(u[..., MUTUAL_INFORMATION], (lw.exp() * kl).sum(-1),
                               atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(u[..., EXPECTED_ENTROPY],
                               (lw.exp() * -(lp.exp() * lp).sum(-1)).sum(-1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("scale", [0.01, 1.0, 10.0, 100.0])
def test_predictive_entropy_is_never_below_the_expected_entropy(scale):
    g = torch.Generator().manual_seed(1)
    for S in (2, 3, 10):
        lp = torch.log_softmax(scale * torch.randn(200, S, 40, generator=g), -1)
        lw = torch.log_softmax(torch.randn(200, S, generator=g), -1)
        for w in (None, lw):
            u = decompose(lp, _mixture(lp, w), w)
            assert torch.all(u[:, ENTROPY] >= u[:, EXPECTED_ENTROPY])
            assert torch.all(u[:, MUTUAL_INFORMATION] >= 0)
            assert torch.all(u[:, ENTROPY] <= math.log(40) + 1e-5)


def test_identical_samples_have_zero_mutual_information():
    g = torch.Generator().manual_seed(2)
    one = torch.log_softmax(torch.randn(7, 1, 30, generator=g), -1)
    lp = one.expand(7, 5, 30)
    u = decompose(lp, _mixture(lp))
    assert torch.all(u[:, MUTUAL_INFORMATION].abs() < 1e-6)
    torch.testing.assert_close(u[:, ENTROPY], u[:, EXPECTED_ENTROPY], atol=1e-6, rtol=0)
    torch.testing.assert_close(u, single(one.squeeze(1)), atol=1e-6, rtol=0)
    # and distinct samples do not (the check above can fail)
    lp2 = torch.log_softmax(torch.randn(7, 5, 30, generator=g), -1)
    assert torch.all(decompose(lp2, _mixture(lp2))[:, MUTUAL_INFORMATION] > 1e-3)


def test_single_distribution_handles_zero_probabilities():
    lp = torch.tensor([[0.25, 0.25, 0.5, 0.0]]).log()                 # a −inf entry
    u = single(lp)
    h = -(0.5 * math.log(0.25) + 0.5 * math.log(0.5))
    torch.testing.assert_close(u, torch.tensor([[h, h, 0.0]]))


def test_sample_by_sample_accumulation_matches_the_batched_form():
    g = torch.Generator().manual_seed(3)
    lp = torch.log_softmax(2 * torch.randn(3, 4, 6, 20, generator=g), -1)
    lw = torch.log_softmax(torch.randn(3, 4, 6, generator=g), -1)
    for w in (None, lw):
        acc = SampleAccumulator()
        for s in range(6):
            acc.add(lp[:, :, s], -math.log(6) if w is None else w[:, :, s])
        mix = _mixture(lp, w)
        torch.testing.assert_close(acc.result(mix), decompose(lp, mix, w), atol=2e-5, rtol=1e-5)


def test_inputs_that_require_grad_give_values_without_a_graph():
    """Evaluation forwards outside no_grad (fairseq-validate on bAbI) must work: values only."""
    logits = torch.randn(2, 3, 5, requires_grad=True)
    lp = torch.log_softmax(logits, -1)
    u = decompose(lp, _mixture(lp))
    assert not u.requires_grad and torch.all(u[:, MUTUAL_INFORMATION] >= 0)
    assert not single(lp[:, 0]).requires_grad
