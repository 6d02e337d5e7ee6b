"""Structured (segmentation) attention, docs/method.md §2.3: the binary chain CRF against brute-force
enumeration, exact handling of padding, gradients, and the context formula."""
import argparse
import itertools

import pytest
import torch

from fairseq_acvi.modules.context import build_context
from fairseq_acvi.modules.context.structured import StructuredContext
from fairseq_acvi.modules.context.crf import binary_crf
from fairseq_acvi.modules.context.scorers import Memory, masked_fill_scores


def brute_force(unary, pad, trans, start, end):
    """Enumerate all 2^L assignments of the real positions of every row: (marginals, log Z)."""
    B, N = unary.shape
    marg = torch.zeros(B, N, dtype=torch.float64)
    log_z = torch.zeros(B, dtype=torch.float64)
    for b in range(B):
        idx = [i for i in range(N) if not pad[b, i]]
        scores, assigns = [], []
        for z in itertools.product([0, 1], repeat=len(idx)):
            s = start[z[0]] + end[z[-1]]
            s = s + sum(unary[b, i] * z[k] for k, i in enumerate(idx))
            s = s + sum(trans[z[k - 1], z[k]] for k in range(1, len(z)))
            scores.append(s)
            assigns.append(z)
        scores = torch.stack(scores)
        log_z[b] = torch.logsumexp(scores, 0)
        probs = torch.softmax(scores, 0)
        for p, z in zip(probs, assigns):
            for k, i in enumerate(idx):
                marg[b, i] += p * z[k]
    return marg, log_z


def random_case(seed, B=5, N=8, scale=2.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    unary = torch.randn(B, N, generator=g, dtype=dtype) * scale
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, :3] = True          # left padding (fairseq's default for sources)
    pad[2, 5:] = True          # right padding
    pad[3, [1, 4, 6]] = True   # scattered padding
    pad[4, :7] = True          # a single real position
    trans = torch.randn(2, 2, generator=g, dtype=dtype)
    start = torch.randn(2, generator=g, dtype=dtype)
    end = torch.randn(2, generator=g, dtype=dtype)
    return unary, pad, trans, start, end


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_marginals_and_log_partition_match_brute_force(seed):
    unary, pad, trans, start, end = random_case(seed)
    log_p1, log_z = binary_crf(unary, pad, trans, start, end)
    marg, ref_z = brute_force(unary, pad, trans, start, end)
    assert torch.allclose(log_z, ref_z, atol=1e-10)
    assert torch.allclose(log_p1.exp(), marg, atol=1e-10)
    assert torch.isneginf(log_p1[pad]).all()


def test_float32_path_agrees_with_float64_on_long_sharp_inputs():
    """N = 400 with large scores: no overflow/NaN in float32, marginals match float64 to 5e-4
    (measured 1.6e-4; without the per-position rescaling in binary_crf it is 1e-3)."""
    g = torch.Generator().manual_seed(3)
    unary = torch.randn(3, 400, generator=g, dtype=torch.float64) * 30
    pad = torch.zeros(3, 400, dtype=torch.bool)
    pad[0, :57] = True
    pad[2, 300:] = True
    trans = torch.tensor([[1.0, -2.0], [-3.0, 4.0]], dtype=torch.float64)
    start = torch.tensor([0.5, -0.5], dtype=torch.float64)
    end = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    lp64, lz64 = binary_crf(unary, pad, trans, start, end)
    lp32, lz32 = binary_crf(unary.float(), pad, trans.float(), start.float(), end.float())
    assert lp32.dtype == torch.float32
    assert torch.isfinite(lz32).all() and torch.isfinite(lp32[~pad]).all()
    assert torch.allclose(lz32.double(), lz64, rtol=1e-5)
    assert (lp32.exp().double() - lp64.exp()).abs().max() < 5e-4


def test_zero_pairwise_potentials_factorise_to_sigmoids():
    unary, pad, _, _, _ = random_case(4)
    zeros2 = torch.zeros(2, dtype=torch.float64)
    log_p1, log_z = binary_crf(unary, pad, torch.zeros(2, 2, dtype=torch.float64), zeros2, zeros2)
    assert torch.allclose(log_p1.exp()[~pad], torch.sigmoid(unary)[~pad], atol=1e-12)
    ref = torch.nn.functional.softplus(unary).masked_fill(pad, 0).sum(1)
    assert torch.allclose(log_z, ref, atol=1e-12)


def test_padding_does_not_change_real_positions():
    """The same sequence padded left, right or in between gives the same log Z and marginals."""
    g = torch.Generator().manual_seed(5)
    core = torch.randn(6, generator=g, dtype=torch.float64)
    trans, start, end = (torch.randn(2, 2, generator=g, dtype=torch.float64),
                         torch.randn(2, generator=g, dtype=torch.float64),
                         torch.randn(2, generator=g, dtype=torch.float64))
    layouts = [[0, 1, 2, 3, 4, 5, None, None, None], [None, None, None, 0, 1, 2, 3, 4, 5],
               [0, None, 1, 2, None, 3, 4, None, 5]]
    unary = torch.randn(3, 9, generator=g, dtype=torch.float64) * 100   # garbage at padding
    pad = torch.ones(3, 9, dtype=torch.bool)
    for b, lay in enumerate(layouts):
        for j, k in enumerate(lay):
            if k is not None:
                unary[b, j], pad[b, j] = core[k], False
    log_p1, log_z = binary_crf(unary, pad, trans, start, end)
    ref_p, ref_z = binary_crf(core.unsqueeze(0), torch.zeros(1, 6, dtype=torch.bool), trans,
                              start, end)
    for b in range(3):
        assert torch.allclose(log_z[b], ref_z[0], atol=1e-12)
        assert torch.allclose(log_p1[b][~pad[b]], ref_p[0], atol=1e-12)
        assert (log_p1[b][pad[b]].exp() == 0).all()


def test_gradcheck_forward_backward():
    unary, pad, trans, start, end = random_case(6)
    unary, pad = unary[:4, :5], pad[:4, :5]      # includes left and scattered padding
    inputs = [x.clone().requires_grad_(True) for x in (unary, trans, start, end)]

    def fn(u, tr, st, en):
        log_p1, log_z = binary_crf(u, pad, tr, st, en)
        return log_p1.exp(), log_z

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)
    # the gradient of log Z with respect to the unaries is the marginal p(z_i = 1)
    log_p1, log_z = binary_crf(inputs[0], pad, *inputs[1:])
    (grad,) = torch.autograd.grad(log_z.sum(), inputs[0])
    assert torch.allclose(grad, log_p1.exp().detach(), atol=1e-10)


def make_module(lam="learned", d=6):
    args = argparse.Namespace(context_inference="structured", structured_lambda=lam)
    return build_context(args, value_dim=d, query_dim=4, enc_final_dim=8)


def make_memory(B=3, N=7, d=6, seed=7):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(B, N, d, generator=g)
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, :2] = True
    pad[2, 5:] = True
    scores = masked_fill_scores(torch.randn(B, N, generator=g) * 2, pad)
    return Memory(values, values, pad), scores


def test_step_context_formula_and_zero_weight_at_padding():
    ctx = make_module()
    assert isinstance(ctx, StructuredContext) and ctx.context_dim == 6
    with torch.no_grad():
        ctx.transition.copy_(torch.tensor([[0.3, -1.0], [-0.5, 2.0]]))
        ctx.start.copy_(torch.tensor([0.2, -0.2]))
        ctx.lam.fill_(1.7)
    mem, scores = make_memory()
    out = ctx.step(scores, torch.randn(3, 4), mem, {}, 0)
    log_p1, _ = binary_crf(scores.double(), mem.pad_mask, ctx.transition.double(),
                           ctx.start.double(), ctx.end.double())
    p = log_p1.exp()
    ref_attn = p / p.sum(1, keepdim=True)
    ref_ctx = 1.7 * (p.unsqueeze(-1) * mem.values.double()).sum(1) / p.sum(1, keepdim=True)
    assert out.attn.dtype == torch.float32 and out.attn.shape == (3, 7)
    assert torch.allclose(out.attn.double(), ref_attn, atol=1e-6)
    assert torch.allclose(out.mean.double(), ref_ctx, atol=1e-5)
    assert (out.attn[mem.pad_mask] == 0).all()
    # garbage in padded values does not reach the context
    vals = mem.values.clone()
    vals[mem.pad_mask] = 1e4
    out2 = ctx.step(scores, torch.randn(3, 4), Memory(vals, vals, mem.pad_mask), {}, 0)
    assert torch.allclose(out2.mean, out.mean)
    assert out.samples is None and out.losses == {}


def test_step_is_differentiable_and_lambda_option():
    ctx = make_module()
    mem, scores = make_memory()
    scores = scores.clone().requires_grad_(True)
    out = ctx.step(scores, None, mem, {}, 0)
    out.mean.sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[mem.pad_mask] == 0).all()
    assert scores.grad[~mem.pad_mask].abs().sum() > 0
    for name in ("transition", "start", "end", "lam"):
        assert getattr(ctx, name).grad is not None, name
    fixed = make_module("fixed")
    assert "lam" not in dict(fixed.named_parameters())
    assert torch.allclose(fixed.step(scores.detach(), None, mem, {}, 0).mean,
                          ctx.step(scores.detach(), None, mem, {}, 0).mean)


def test_options_parse():
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    StructuredContext.add_args(parser)
    args = parser.parse_args(["--structured-lambda", "fixed"])
    assert args.structured_lambda == "fixed"
    with pytest.raises(ValueError, match="--structured-lambda"):
        make_module("sometimes")


def test_low_precision_inputs_run_the_crf_in_float32_and_decode_deterministically():
    ctx = make_module().eval()
    mem, scores = make_memory()
    ref = ctx.step(scores, None, mem, {}, 0)
    half_mem = Memory(mem.keys.bfloat16(), mem.values.bfloat16(), mem.pad_mask)
    o1 = ctx.step(scores.bfloat16(), None, half_mem, {}, 0)
    o2 = ctx.step(scores.bfloat16(), None, half_mem, {}, 0)
    assert o1.attn.dtype == torch.float32 and o1.mean.dtype == torch.bfloat16
    assert torch.equal(o1.mean, o2.mean) and torch.equal(o1.attn, o2.attn)
    assert torch.allclose(o1.attn, ref.attn, atol=2e-2)      # bf16 scores carry ~3 digits
    assert (o1.attn[mem.pad_mask] == 0).all()
