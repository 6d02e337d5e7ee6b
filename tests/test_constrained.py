"""Constrained softmax / sparsemax (fairseq_acvi/modules/context/constrained.py, docs/method.md §3.5):
against per-row reference solvers written from the definitions, the bounds never exceeded, exact
zeros, gradients against finite differences, the unconstrained limits, and the cumulative
attention of the normaliser never passing a word's fertility."""
import pytest
import torch

from fairseq_acvi.modules.context.constrained import csoftmax, csparsemax
from fairseq_acvi.modules.context.normalizers import AttentionNormalizer, last_real_position, sparse_normalize
from fairseq_acvi.modules.context.scorers import Memory

FUNCS = {"csoftmax": csoftmax, "csparsemax": csparsemax}


def ref_csoftmax(z, u):
    """Martins & Kreutzer's iteration on one row (float64): clamp the weights over their
    bound, renormalise the rest with the mass left, until none is over."""
    active = set()
    while True:
        free = [i for i in range(len(z)) if i not in active]
        mass = 1.0 - sum(u[i] for i in active)
        e = torch.tensor([float(torch.exp(z[i])) for i in free], dtype=torch.float64)
        p = e / e.sum() * mass
        over = [i for i, pi in zip(free, p) if pi > u[i]]
        if not over:
            out = torch.zeros(len(z), dtype=torch.float64)
            for i in active:
                out[i] = u[i]
            for i, pi in zip(free, p):
                out[i] = pi
            return out
        active.update(over)


def ref_csparsemax(z, u):
    """clip(z − τ, 0, u) with τ found by 200 bisection steps in float64 on one row."""
    lo, hi = float(z.min()) - 1.0, float(z.max())
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(torch.clamp(z - mid, min=0).minimum(u).sum()) >= 1.0:
            lo = mid
        else:
            hi = mid
    return torch.clamp(z - 0.5 * (lo + hi), min=0).minimum(u)


REFS = {"csoftmax": ref_csoftmax, "csparsemax": ref_csparsemax}


def random_problem(B=40, N=9, seed=0, dtype=torch.float32):
    """Scores, bounds (some 0, some tight, the last real position 1 = the sink) and right
    padding of 0..3 positions."""
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(B, N, generator=g) * 2).to(dtype)
    u = (torch.rand(B, N, generator=g) * 0.6).to(dtype)
    u[torch.rand(B, N, generator=g) < 0.15] = 0.0
    lengths = N - torch.randint(0, 4, (B,), generator=g)
    pad = torch.arange(N)[None] >= lengths[:, None]
    u[last_real_position(pad)] = 1.0
    return z.masked_fill(pad, float("-inf")), u, pad


@pytest.mark.parametrize("name", FUNCS)
def test_matches_the_reference_solver_and_keeps_every_bound(name):
    z, u, pad = random_problem()
    a = FUNCS[name](z, u, pad)
    assert a.dtype == torch.float32
    for b in range(z.size(0)):
        real = ~pad[b]
        ref = REFS[name](z[b, real].double(), u[b, real].double())
        torch.testing.assert_close(a[b, real].double(), ref, atol=2e-6, rtol=0)
    assert torch.all(a <= u) and torch.all(a >= 0)               # exactly, no tolerance
    assert torch.all(a[pad] == 0)
    torch.testing.assert_close(a.sum(-1), torch.ones(z.size(0)), atol=1e-5, rtol=0)
    # a zero bound gives an exact zero; csparsemax also zeros low scores under loose bounds
    assert torch.all(a[(u == 0) & ~pad] == 0)


@pytest.mark.parametrize("name", FUNCS)
def test_ties_many_zero_bounds_and_long_rows(name):
    """Scores and bounds on a coarse grid (ties between scores, between bounds and between a
    score and a bound's end), a third of the bounds 0, rows of 60 positions."""
    g = torch.Generator().manual_seed(11)
    B, N = 30, 60
    z = torch.randint(-4, 5, (B, N), generator=g).float() * 0.5
    u = torch.randint(0, 5, (B, N), generator=g).float() * 0.05
    pad = torch.arange(N)[None] >= (N - torch.randint(0, 20, (B,), generator=g))[:, None]
    u[last_real_position(pad)] = 1.0
    z = z.masked_fill(pad, float("-inf"))
    a = FUNCS[name](z, u, pad)
    assert torch.all(a <= u) and torch.all(a >= 0) and torch.all(a[pad] == 0)
    for b in range(B):
        real = ~pad[b]
        ref = REFS[name](z[b, real].double(), u[b, real].double())
        torch.testing.assert_close(a[b, real].double(), ref, atol=2e-6, rtol=0)


def test_csparsemax_is_sparse_and_csoftmax_dense_below_the_bounds():
    z = torch.tensor([[3.0, 2.9, 0.0, -1.0, 1.0]])
    u = torch.tensor([[0.3, 1.0, 1.0, 1.0, 1.0]])
    pad = torch.zeros_like(z, dtype=torch.bool)
    sp, so = csparsemax(z, u, pad), csoftmax(z, u, pad)
    # the first word is capped at 0.3; sparsemax gives the rest (0.7) to the second alone
    torch.testing.assert_close(sp, torch.tensor([[0.3, 0.7, 0.0, 0.0, 0.0]]))
    assert so[0, 0] == 0.3 and torch.all(so[0, 1:] > 0)
    rest = torch.softmax(z[0, 1:], -1) * 0.7
    torch.testing.assert_close(so[0, 1:], rest)


@pytest.mark.parametrize("name", FUNCS)
def test_loose_bounds_give_the_unconstrained_normaliser(name):
    z, _, pad = random_problem(seed=3)
    u = torch.full_like(z, 1.0)                                    # every bound ≥ any weight
    unconstrained = sparse_normalize("softmax" if name == "csoftmax" else "sparsemax", z, pad)
    torch.testing.assert_close(FUNCS[name](z, u, pad), unconstrained, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", FUNCS)
def test_gradients_match_finite_differences(name):
    """float64 gradcheck in z and u at a point with free, capped and (csparsemax) zero weights."""
    z, u, pad = random_problem(B=6, N=7, seed=5, dtype=torch.float64)
    z = z.masked_fill(pad, 0.0).requires_grad_()
    u = u.clamp_min(0.05).requires_grad_()                         # no bound at 0 (a kink)

    def fn(z, u):
        return FUNCS[name](z.masked_fill(pad, float("-inf")), u, pad)

    with torch.no_grad():
        a = fn(z, u)
    assert bool(((a - u).abs() < 1e-12).any())                      # some bound is active
    assert torch.autograd.gradcheck(fn, (z, u), eps=1e-7, atol=1e-6)


@pytest.mark.parametrize("name", FUNCS)
def test_infeasible_bounds_are_an_error(name):
    z = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="sum to less than 1"):
        FUNCS[name](z, torch.full((1, 3), 0.2), torch.zeros(1, 3, dtype=torch.bool))


@pytest.mark.parametrize("name", ["csoftmax", "csparsemax"])
@pytest.mark.parametrize("fertility", [1.0, 2.0])
def test_cumulative_attention_never_passes_a_fertility(name, fertility):
    """Twelve steps of random scores over 4 words + the sink (</s>, last real position): each
    word's total attention stays ≤ f, exactly; once spent, the rest goes to the sink."""
    torch.manual_seed(0)
    B, N = 5, 6
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, 5:] = True
    pad[2, 3:] = True
    norm = AttentionNormalizer(name, fertility_value=fertility)
    mem = Memory(torch.zeros(B, N, 1), torch.zeros(B, N, 1), pad)
    prepared = norm.prepare(mem)
    state = norm.init_state(prepared, mem)
    sink = prepared["attn_sink"]
    assert sink.tolist()[2] == [False, False, True, False, False, False]
    for t in range(12):
        scores = (torch.randn(B, N) * 3).masked_fill(pad, float("-inf"))
        attn, state = norm(scores, mem, prepared, state)
        assert torch.all(attn[pad] == 0)
        torch.testing.assert_close(attn.sum(-1), torch.ones(B), atol=1e-5, rtol=0)
    cum = state["attn_cum"]
    words = ~pad & ~sink
    assert torch.all(cum[words] <= fertility + 1e-5)
    # 12 steps, 1 unit each: what the words (≤ f each) cannot hold went to the sink
    n_words = words.sum(-1).float()
    assert torch.all(cum[sink] >= 12 - n_words * fertility - 1e-4)
