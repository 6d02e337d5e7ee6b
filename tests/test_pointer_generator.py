"""The pointer-generator (docs/method.md §3.1): copy mixture, coverage, incremental decoding, learning."""
import argparse
import math

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_acvi.models.pointer_generator import PointerGeneratorModel, base_architecture
from fairseq_acvi.modules.context import CONTEXT_REGISTRY
from fairseq_acvi.modules.seq2seq.copy_generator import EPS, copy_mixture_log_probs

VARIANTS = sorted(set(CONTEXT_REGISTRY) - {"none"})   # an attention model
# every variant, plus the non-default modes of variational attention
CONFIGS = [(v, {}) for v in VARIANTS] + [
    ("variational", {"variational_mode": "sample"}),
    ("variational", {"variational_decode": "exact"}),
    ("acvi", {"acvi_sampler": "gumbel"}),
]
CONFIG_IDS = [v + "".join(f"-{x}" for x in o.values()) for v, o in CONFIGS]
N_WORDS, N_MARKERS = 8, 6


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def marker_dictionary(n_words=N_WORDS, n_markers=N_MARKERS):
    """4 specials, words w0.. (ids 4..), markers <unk-0>.. (ids 4 + n_words ..)."""
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    for j in range(n_markers):
        d.add_symbol(f"<unk-{j}>")
    return d


def build_model(variant, coverage=True, d=None, **overrides):
    d = d or marker_dictionary()
    opts = dict(arch="acvi_pointer_generator", context_inference=variant, encoder_embed_dim=8,
                decoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=10,
                attention_dim=7, dropout=0.0, mc_samples=0, coverage=coverage)
    opts.update(overrides)
    args = argparse.Namespace(**opts)
    base_architecture(args)
    return PointerGeneratorModel.build_model(args, _Task(d)), d


def _batch(d, seed=0):
    """Right-padded sources with markers, the first marker id = 4 + N_WORDS."""
    m = d.index("<unk-0>")
    src = torch.tensor([[5, m + 1, 6, m + 1, m + 3, 7, d.eos()],
                        [m, 8, 9, d.eos(), d.pad(), d.pad(), d.pad()],
                        [m + 2, m, d.eos(), d.pad(), d.pad(), d.pad(), d.pad()]])
    lengths = src.ne(d.pad()).sum(1)
    prev = torch.tensor([[d.eos(), 5, m + 1, 9, m + 3],
                         [d.eos(), m, 10, d.pad(), d.pad()],
                         [d.eos(), 4, d.pad(), d.pad(), d.pad()]])
    return src, lengths, prev


# -- the copy mixture on a hand-made case ---------------------------------------------------------
def test_copy_distribution_sums_to_one_and_puts_mass_on_source_markers():
    # ids 0-3 specials, 4-5 words (n_real = 6), 6-8 markers <unk-0..2>; V = 9
    logits = torch.tensor([0.0, 0.0, 1.0, 0.0, 2.0, -1.0])
    p_vocab = torch.softmax(logits, -1)
    p_gen = torch.tensor([0.25])
    src = torch.tensor([5, 7, 7, 1])          # word 5, marker 7 twice, pad
    attn = torch.tensor([0.2, 0.3, 0.5, 0.0])
    lp = copy_mixture_log_probs(logits, p_gen, attn, src, vocab_size=9)
    p = lp.exp()
    assert lp.shape == (9,) and lp.dtype == torch.float32
    assert p.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert p[7].item() == pytest.approx(0.75 * 0.8, abs=1e-6)                 # copied marker
    assert p[5].item() == pytest.approx(0.25 * p_vocab[5].item() + 0.75 * 0.2, abs=1e-6)
    assert p[4].item() == pytest.approx(0.25 * p_vocab[4].item(), abs=1e-6)   # vocabulary only
    assert lp[6].item() == pytest.approx(math.log(EPS))                       # marker not in source
    assert lp[8].item() == pytest.approx(math.log(EPS))
    assert p[1].item() == pytest.approx(0.25 * p_vocab[1].item(), abs=1e-7)   # pad: attn 0 adds 0


def test_copy_mixture_broadcasts_samples_and_has_finite_gradients():
    torch.manual_seed(0)
    B, T, S, N, n_real, V = 2, 3, 4, 5, 6, 9
    logits = torch.randn(B, T, S, n_real, requires_grad=True)
    p_gen = torch.rand(B, T, S, 1)
    p_gen[0, 0, 0] = 1.0                         # nothing copied: source-only markers get 0 mass
    attn = torch.softmax(torch.randn(B, T, 1, N), -1)
    src = torch.randint(0, V, (B, 1, 1, N))
    lp = copy_mixture_log_probs(logits.half(), p_gen.half(), attn, src, V)
    assert lp.shape == (B, T, S, V) and lp.dtype == torch.float32
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(B, T, S), atol=2e-3, rtol=0)
    lp[..., n_real:].sum().backward()            # includes log(ε)-clamped entries
    assert torch.isfinite(logits.grad).all()
    # per-sample copy mass equals the closed form (1 − p_gen) Σ_{i: x_i = w} a_ti
    w = int(src[1, 0, 0, 2])
    expect = (1 - p_gen[1, 2, 3].float()) * attn[1, 2, 0][src[1, 0, 0] == w].sum()
    if w < n_real:
        expect = expect + p_gen[1, 2, 3].float() * torch.softmax(logits[1, 2, 3].float(), -1)[w]
    assert lp[1, 2, 3, w].exp().item() == pytest.approx(expect.item(), rel=2e-3)


# -- the model ---------------------------------------------------------------------------------------
def test_markers_are_embedded_as_unk_and_get_no_vocabulary_mass():
    torch.manual_seed(0)
    model, d = build_model("soft", coverage=False)
    model.eval()
    m = d.index("<unk-0>")
    emb = model.encoder.embed_tokens
    assert emb is model.decoder.embed_tokens                    # shared source/target embedding
    torch.testing.assert_close(emb(torch.tensor([m, m + 5])), emb(torch.tensor([d.unk()] * 2)))
    assert model.decoder.head.fc_out.out_features == m               # softmax over real ids only
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        lp, _ = model(src, lengths, prev)
    p = lp.exp()
    torch.testing.assert_close(p.sum(-1), torch.ones(p.shape[:2]))
    # sentence 0 holds markers m+1 and m+3: they get copy mass; m+2 (absent) gets exactly ε
    assert (p[0, :, m + 1] > 1e-3).all() and (p[0, :, m + 3] > 1e-3).all()
    torch.testing.assert_close(lp[0, :, m + 2], torch.full((5,), math.log(EPS)))


@pytest.mark.parametrize("variant,opts", CONFIGS, ids=CONFIG_IDS)
def test_incremental_decoding_equals_teacher_forcing_with_coverage(variant, opts):
    torch.manual_seed(0)
    model, d = build_model(variant, mc_samples=0, **opts)
    model.eval()
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        full, extra = model.decoder(prev, enc)
        state, steps = {}, []
        for t in range(prev.size(1)):
            out, _ = model.decoder(prev[:, : t + 1], enc, incremental_state=state)
            steps.append(out)
        inc = torch.cat(steps, dim=1)
        cov = model.decoder.get_incremental_state(state, "cache")["coverage"]
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(full.shape[:2]))
    # the incremental coverage after T steps is the sum of all T attention rows
    torch.testing.assert_close(cov, extra["attn"][0].sum(1), atol=1e-5, rtol=1e-5)


def _noisy_acvi_recording_outputs():
    """An ACVI pointer-generator in eval mode with visible noise (K = 0 to start), its batch, and
    the list that every call of its decoder's ``output_log_probs`` appends its inputs and output
    log-probabilities to (one call per chunk of samples)."""
    torch.manual_seed(0)
    model, d = build_model("acvi", mc_samples=0)
    model.eval()
    dec = model.decoder
    dec.context.logvar_net[-1].bias.data.fill_(0.0)              # visible noise
    calls = []
    hook = dec.output_log_probs

    def record(s, ctx, out, x, cache):
        lp = hook(s, ctx, out, x, cache)
        calls.append(dict(s=s, ctx=ctx, x=x, lp=lp))
        return lp

    dec.output_log_probs = record
    return model, d, _batch(d), calls


def test_acvi_mc_average_is_over_the_mixed_distribution():
    """P_t = (1/K) Σ_k P_mix(· | c^(k)), each sample with its own p_gen(c^(k)) (docs/method.md §2.2)."""
    model, d, (src, lengths, prev), calls = _noisy_acvi_recording_outputs()
    dec = model.decoder
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        mean, _ = dec(prev, enc)
        assert not calls                                          # K = 0: the mean, no samples
        dec.context.mc_samples = 16
        with torch.enable_grad():        # the log-space path, which has every sample's log P
            mc, _ = dec(prev, enc)
        mc = mc.detach()
        seen, = calls
        p_gen = dec.head.switch(seen["ctx"], seen["s"].unsqueeze(2), seen["x"].unsqueeze(2))
    K = 16
    assert seen["lp"].shape == (3, 5, K, len(d))
    torch.testing.assert_close(mc, torch.logsumexp(seen["lp"], dim=2) - math.log(K))
    assert p_gen.shape == (3, 5, K, 1) and p_gen.std(dim=2).max() > 1e-3   # p_gen per sample
    assert not torch.allclose(mc, mean)
    torch.testing.assert_close(mc.exp().sum(-1), torch.ones(mc.shape[:2]))


@pytest.mark.parametrize("chunked", [False, True], ids=["one-pass", "chunked"])
def test_acvi_geometric_combination_is_the_normalised_mean_log_probability(chunked, monkeypatch):
    """``--mc-combine geometric``: P_t ∝ exp((1/K) Σ_k log P_mix(· | c^(k))), over the same K
    samples as the default average of probabilities, normalised, also when the K samples go
    through the output layer in chunks; in training (one sample) nothing changes."""
    from fairseq_acvi.mc_prediction import averaging
    model, d, (src, lengths, prev), calls = _noisy_acvi_recording_outputs()
    dec = model.decoder

    def recorded_lp():
        lp = torch.cat([c["lp"] for c in calls], dim=2)           # the chunks' samples
        calls.clear()
        return lp

    if chunked:
        monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 3 * 5 * len(d) * 3)   # 3 a chunk
    K = 8
    dec.context.mc_samples = K
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        torch.manual_seed(5)
        with torch.enable_grad():        # the log-space path, which has every sample's log P
            prob, _ = dec(prev, enc)
        prob = prob.detach()
        lp = recorded_lp().detach()                               # (B, T, K, V)
        dec.context.mc_combine = "geometric"
        torch.manual_seed(5)
        geo, _ = dec(prev, enc)
        lp_again = recorded_lp()
    assert lp.shape == (3, 5, K, len(d)) and torch.equal(lp, lp_again)      # the same samples
    torch.testing.assert_close(prob, torch.logsumexp(lp, dim=2) - math.log(K))
    torch.testing.assert_close(geo, torch.log_softmax(lp.mean(dim=2), dim=-1))
    torch.testing.assert_close(geo.exp().sum(-1), torch.ones(3, 5))
    assert (geo - prob).abs().max() > 1e-3
    with pytest.raises(ValueError, match="--mc-combine must be one of prob, geometric, got 'mean'"):
        build_model("acvi", mc_combine="mean")


@pytest.mark.parametrize("chunked", [False, True], ids=["one-pass", "chunked"])
def test_decoding_averages_the_samples_in_probability_space_to_the_same_value(chunked,
                                                                               monkeypatch):
    """Without autograd the copy mixture's K samples are averaged in probability space (one log
    at the end, output_layers.py): the same log Σ_k P_k / K as the log-space path, also chunk by
    chunk and step by step (incremental decoding)."""
    from fairseq_acvi.mc_prediction import averaging
    model, d, (src, lengths, prev), calls = _noisy_acvi_recording_outputs()
    dec = model.decoder
    if chunked:
        monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 3 * 5 * len(d) * 3)   # 3 a chunk
    dec.context.mc_samples = 8
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        torch.manual_seed(5)
        with torch.enable_grad():
            ref, _ = dec(prev, enc)
        assert calls                                              # the log-space path ran
        calls.clear()
        torch.manual_seed(5)
        fast, _ = dec(prev, enc)
        assert not calls                                          # and this one did not
        state, steps = {}, []
        torch.manual_seed(5)
        for t in range(prev.size(1)):
            lp, _ = dec(prev[:, :t + 1], enc, incremental_state=state)
            steps.append(lp)
    torch.testing.assert_close(fast, ref.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast.exp().sum(-1), torch.ones(3, 5))
    inc = torch.cat(steps, dim=1)            # (fresh samples per step: normalised, not equal)
    assert torch.isfinite(inc).all() and inc.shape == fast.shape
    torch.testing.assert_close(inc.exp().sum(-1), torch.ones(3, 5))


def test_coverage_loss_matches_a_hand_computation():
    torch.manual_seed(0)
    model, d = build_model("soft", coverage=True)
    model.eval()
    with torch.no_grad():
        model.decoder.scorer.w_k.normal_()                    # coverage changes the scores
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        _, extra = model(src, lengths, prev)
    a = extra["attn"][0]                                          # (B, T, N)
    k = torch.cumsum(a, dim=1) - a                                # coverage before step t
    expect = (torch.minimum(a, k).sum(-1) * prev.ne(d.pad())).sum()
    value, weight = extra["losses"]["coverage"]
    assert weight is None                                         # the criterion's --coverage-weight
    assert value.item() == pytest.approx(expect.item(), rel=1e-5)
    assert value.item() > 0.1
    # without w_k the coverage feature changes nothing: scores differ when w_k ≠ 0
    model_off, _ = build_model("soft", coverage=False)
    model_off.load_state_dict(model.state_dict())                  # same parameter set
    model_off.eval()
    with torch.no_grad():
        _, extra_off = model_off(src, lengths, prev)
    assert "coverage" not in extra_off["losses"]
    assert not torch.allclose(extra_off["attn"][0][:, 1:], a[:, 1:])
    torch.testing.assert_close(extra_off["attn"][0][:, 0], a[:, 0])   # k_0 = 0


def test_without_coverage_w_k_gets_no_gradient_and_with_it_does():
    for coverage in (False, True):
        torch.manual_seed(0)
        model, d = build_model("soft", coverage=coverage)
        model.train()
        src, lengths, prev = _batch(d)
        lp, extra = model(src, lengths, prev)
        loss = -lp.gather(-1, prev.clamp_min(4)[..., None]).sum()
        loss = loss + sum(v for v, _ in extra["losses"].values())
        loss.backward()
        grad = model.decoder.scorer.w_k.grad
        assert (grad is not None and grad.abs().sum() > 0) == coverage


@pytest.mark.parametrize("variant", VARIANTS)
def test_beam_reordering_keeps_coverage_per_hypothesis(variant):
    torch.manual_seed(0)
    model, d = build_model(variant)
    model.eval()
    with torch.no_grad():
        model.decoder.scorer.w_k.normal_()
    src, lengths, prev = _batch(d)
    order = torch.tensor([2, 0, 1, 0])
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        state = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], enc, incremental_state=state)
        cov_before = model.decoder.get_incremental_state(state, "cache")["coverage"]
        model.decoder.reorder_incremental_state_scripting(state, order)
        cov_after = model.decoder.get_incremental_state(state, "cache")["coverage"]
        enc_r = model.encoder.reorder_encoder_out(enc, order)
        step, _ = model.decoder(prev[order, :4], enc_r, incremental_state=state)
        ref, _ = model.decoder(prev[order, :4], enc_r)
    torch.testing.assert_close(cov_after, cov_before[order])
    torch.testing.assert_close(step[:, 0], ref[:, 3], atol=1e-5, rtol=1e-5)


def test_training_losses_are_finite_for_every_variant():
    for variant, opts in CONFIGS:
        torch.manual_seed(0)
        model, d = build_model(variant, **opts)
        model.train()
        src, lengths, prev = _batch(d)
        lprobs, extra = model(src, lengths, prev)
        assert torch.isfinite(lprobs[prev.ne(d.pad())]).all(), variant
        assert "coverage" in extra["losses"]
        for name, (value, _) in extra["losses"].items():
            assert torch.isfinite(value), (variant, name)
        if opts.get("variational_mode") == "sample":   # REINFORCE through the copy output layer
            assert {"reinforce", "baseline_nll"} <= set(extra["losses"])


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError, match="context-inference none"):
        build_model("none")
    with pytest.raises(ValueError, match="--coverage needs --attention-type additive"):
        build_model("soft", coverage=True, attention_type="multiplicative")
    d = Dictionary()
    d.add_symbol("w0")
    with pytest.raises(ValueError, match="marker"):
        build_model("soft", d=d)


def toy_copy_batch(d, g, p_marker: float, B: int = 32, L: int = 5):
    """The toy copy task's batch: each source position j holds its own marker <unk-j> (an OOV, with
    probability ``p_marker``) or a real word w0..w3; the target is the source. Returns src (B, L+1),
    lengths (B,), prev_output_tokens (B, L+1), target (B, L+1)."""
    m = d.index("<unk-0>")
    src = torch.where(torch.rand(B, L, generator=g) < p_marker, m + torch.arange(L).expand(B, L),
                      torch.randint(4, 8, (B, L), generator=g))
    src = torch.cat([src, torch.full((B, 1), d.eos())], 1)
    prev = torch.cat([torch.full((B, 1), d.eos()), src[:, :-1]], 1)
    return src, torch.full((B,), L + 1), prev, src


def test_learns_to_copy_unseen_words_through_markers():
    """Toy copy task: the target is the source, whose words are mostly markers (OOVs). Only the
    copy path can produce them; after training, greedy decoding reproduces unseen sources."""
    torch.manual_seed(0)
    d = marker_dictionary(n_words=4, n_markers=6)
    m = d.index("<unk-0>")
    # init_scale=0 (PyTorch's defaults): U(-0.1, 0.1) is meant for real widths, see
    # test_video_captioner.test_model_learns_to_caption_from_features
    model, _ = build_model("soft", coverage=False, d=d, encoder_hidden_size=16,
                           decoder_hidden_size=24, attention_dim=16, encoder_embed_dim=12,
                           decoder_embed_dim=12, init_scale=0.0)
    g = torch.Generator().manual_seed(0)

    def batch(B=32):
        return toy_copy_batch(d, g, 0.7, B)

    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    model.train()
    for _ in range(150):
        src, lengths, prev, tgt = batch()
        lp, _ = model(src, lengths, prev)
        loss = -lp.gather(-1, tgt.unsqueeze(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src, lengths, prev, tgt = batch(B=64)
    with torch.no_grad():
        lp, _ = model(src, lengths, prev)
    acc = (lp.argmax(-1) == tgt).float().mean().item()
    assert acc > 0.9, acc


# -- truncated summaries: the variational context sees the real last target ------------------------
def test_variational_terms_use_the_real_target_of_a_cut_summary():
    """--truncate-target leaves summaries without </s>; the variational inference network and its
    per-step terms must see y_T, not the </s> that rebuilding from prev_output_tokens would give.
    The elbo criterion passes sample["target"] to the model for such contexts."""
    from fairseq_acvi.criterions.elbo import ELBOCriterion

    torch.manual_seed(0)
    model, d = build_model("variational")
    model.train()
    src, lengths, prev = _batch(d)
    cut = torch.cat([prev[:, 1:], torch.tensor([[7], [d.pad()], [d.pad()]])], 1)  # row 0 ends in w3
    cut[1, 2], cut[2, 1] = d.eos(), d.eos()                                      # rows 1-2 end in </s>
    assert cut[0, -1] != d.eos()
    rebuilt = model.decoder._targets(prev)
    assert rebuilt[0, -1] == d.eos() and torch.equal(rebuilt[1:], cut[1:])

    def terms(target):
        torch.manual_seed(1)
        out = model(src, lengths, prev, target=target)
        return {k: float(v[0]) for k, v in out[1]["losses"].items()}

    gold, default, explicit = terms(cut), terms(None), terms(rebuilt)
    assert default == explicit                              # no target: rebuilt from prev tokens
    assert gold.keys() == default.keys() and gold != default  # the real y_T changes the terms
    with pytest.raises(ValueError, match="same shape"):
        model(src, lengths, prev, target=cut[:, :-1])

    # the criterion gives the model the sample's target
    class _T:
        target_dictionary = d
    crit = ELBOCriterion(_T())
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": cut, "ntokens": int(cut.ne(d.pad()).sum()), "nsentences": 3}
    torch.manual_seed(1)
    _, _, log = crit(model, sample)
    assert float(log["kl"]) == pytest.approx(gold["kl"], rel=1e-6, abs=0)
    assert float(log["kl"]) != pytest.approx(default["kl"], rel=1e-3, abs=0)


def test_models_say_what_a_forward_needs_from_the_gold_target():
    """ContextSeq2SeqModel.training_inputs: what the elbo criterion calls the model with."""
    import test_seq2seq_model as s2s_tests

    pg, d = build_model("soft")
    src, lengths, prev = _batch(d)
    target = pg.decoder._targets(prev)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target}
    got = pg.training_inputs(sample)
    assert got["score_target"] is True and got["target"] is target      # scores the gold tokens
    assert {k: got[k] for k in sample["net_input"]} == sample["net_input"]
    for variant, extra in (("soft", set()), ("variational", {"target"})):
        model, _ = s2s_tests.build_model(variant)
        assert set(model.training_inputs(sample)) - set(sample["net_input"]) == extra
    assert "target" not in sample["net_input"]                          # the sample is not changed


# -- scoring the gold tokens only (training and validation through the elbo criterion) --------------
def test_target_only_mixture_equals_the_gathered_full_mixture():
    from fairseq_acvi.modules.seq2seq.copy_generator import copy_mixture_target_log_probs
    g = torch.Generator().manual_seed(3)
    B, T, S, N, n_real, V = 2, 4, 3, 5, 9, 14
    logits = torch.randn(B, T, S, n_real, generator=g, dtype=torch.float64).requires_grad_()
    p_gen = torch.rand(B, T, S, 1, generator=g, dtype=torch.float64)
    attn = torch.softmax(torch.randn(B, T, 1, N, generator=g, dtype=torch.float64), -1)
    src = torch.randint(0, V, (B, 1, 1, N), generator=g)
    src[0, 0, 0, :2] = 12                                    # a marker twice in one source
    y = torch.randint(0, V, (B, T, 1), generator=g)
    y[0, 0, 0], y[1, 0, 0] = 12, 13                          # copied marker; a marker not in source
    full = copy_mixture_log_probs(logits, p_gen, attn, src, V).gather(-1, y.unsqueeze(-1).expand(B, T, S, 1))
    fast = copy_mixture_target_log_probs(logits, p_gen, attn, src, y)
    assert fast.shape == (B, T, S) and fast.dtype == torch.float64    # float64 stays float64
    torch.testing.assert_close(fast, full.squeeze(-1), rtol=1e-10, atol=1e-10)
    g_fast, = torch.autograd.grad(fast.sum(), logits)
    g_full, = torch.autograd.grad(full.sum(), logits)
    torch.testing.assert_close(g_fast, g_full, rtol=1e-10, atol=1e-10)


def test_gold_vocab_log_probs_is_the_log_softmax_at_the_gold_id_with_broadcasting():
    """gold_vocab_log_probs(logits, y) = logit_y − logsumexp(logits) (the definition), values and
    gradients, float64 out of float64 and float32 out of float16 logits; logits (B, T, 1, n)
    broadcast against ids (B, T, S) as the K samples of ACVI do, and ids (B, T, 1) against logits
    (B, T, S, n)."""
    from fairseq_acvi.modules.seq2seq.copy_generator import gold_vocab_log_probs
    g = torch.Generator().manual_seed(5)
    B, T, S, n = 2, 3, 4, 11
    for l_shape, y_shape in (((B, T, 1, n), (B, T, S)), ((B, T, S, n), (B, T, 1))):
        logits = (3 * torch.randn(*l_shape, generator=g, dtype=torch.float64)).requires_grad_()
        y = torch.randint(0, n, y_shape, generator=g)
        lead = torch.broadcast_shapes(l_shape[:-1], y_shape)
        got = gold_vocab_log_probs(logits, y)
        assert got.shape == lead and got.dtype == torch.float64
        ref = (logits.expand(*lead, n).gather(-1, y.expand(lead).unsqueeze(-1)).squeeze(-1)
               - torch.logsumexp(logits, -1).expand(lead))
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)
        g_got, = torch.autograd.grad(got.sum(), logits)
        g_ref, = torch.autograd.grad(ref.sum(), logits)
        torch.testing.assert_close(g_got, g_ref, rtol=1e-10, atol=1e-10)
    half = torch.randn(5, n, generator=g).half()
    assert gold_vocab_log_probs(half, torch.zeros(5, dtype=torch.long)).dtype == torch.float32


@pytest.mark.parametrize("variant, opts", [("soft", {}), ("acvi", {"mc_samples": 4}),
                                           ("acvi", {"mc_samples": 4, "mc_combine": "geometric"}),
                                           ("acvi", {"mc_samples": 4, "acvi_sampler": "gumbel"}),
                                           ("structured", {}), ("variational", {}), ("ved", {})],
                         ids=["soft", "acvi-K4", "acvi-K4-geometric", "acvi-gumbel", "structured",
                              "variational", "ved"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_criterion_scores_gold_tokens_exactly_as_the_full_output(variant, opts, training):
    """The elbo criterion asks the pointer-generator for log P(y_t) only; the loss, every logged
    term and the gradients equal those of the full (B, T, V) output gathered at the target."""
    from fairseq_acvi.criterions.elbo import ELBOCriterion

    class _T:
        target_dictionary = None
    torch.manual_seed(0)
    model, d = build_model(variant, **opts)
    _T.target_dictionary = d
    model.train(training)
    src, lengths, prev = _batch(d)
    target = model.decoder._targets(prev)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target, "ntokens": int(target.ne(d.pad()).sum()), "nsentences": 3}
    crit = ELBOCriterion(_T())

    def run(score):
        model.zero_grad()
        model.decoder.head.supports_target_scoring = score
        torch.manual_seed(7)
        loss, _, log = crit(model, sample)
        loss.backward()
        return loss.detach(), log, [p.grad.clone() for p in model.parameters() if p.grad is not None]

    loss_fast, log_fast, grads_fast = run(True)
    loss_full, log_full, grads_full = run(False)
    del model.decoder.head.supports_target_scoring            # back to the class attribute
    assert type(model.decoder.head).supports_target_scoring is True
    torch.testing.assert_close(loss_fast, loss_full, rtol=1e-5, atol=1e-5)
    for k in log_full:
        torch.testing.assert_close(torch.as_tensor(log_fast[k]).float(), torch.as_tensor(log_full[k]).float(),
                                   rtol=1e-5, atol=1e-5)
    assert len(grads_fast) == len(grads_full)
    for a, b in zip(grads_fast, grads_full):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_score_target_is_refused_where_it_cannot_apply():
    model, d = build_model("soft")
    src, lengths, prev = _batch(d)
    with pytest.raises(ValueError, match="score_target needs target"):
        model(src, lengths, prev, score_target=True)
    lp, extra = model(src, lengths, prev, target=model.decoder._targets(prev), score_target=True)
    assert lp is None and extra["target_lprobs"].shape == prev.shape
