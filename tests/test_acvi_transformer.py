"""acvi_transformer (docs/method.md §2.6): fairseq's transformer with per-head context inference
in its encoder-decoder attention. Same weights as a stock fairseq ``transformer`` -> same outputs
(soft; acvi at K = 0 and σ → 0); the per-head KL against a hand computation; the K-sample average
against K separate passes; incremental = full forward; beam reordering; the elbo criterion's
label smoothing; fairseq-train -> fairseq-generate, in float32 and --memory-efficient-fp16."""
import argparse
import math

import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.data import Dictionary
from fairseq.models.transformer import TransformerModel
from fairseq.models.transformer.transformer_legacy import base_architecture as fairseq_base

import fairseq_acvi  # noqa: F401
from conftest import USER_DIR, run_cli
from fairseq_acvi.criterions.elbo import ELBOCriterion
from fairseq_acvi.models.acvi_transformer import ACVITransformerModel
from fairseq_acvi.modules import transformer_context
from test_translation_cli import check_finite_losses, data_bin, logged  # noqa: F401 (fixture)

SIZES = dict(encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_attention_heads=4,
             encoder_layers=2, decoder_embed_dim=16, decoder_ffn_embed_dim=32,
             decoder_attention_heads=4, decoder_layers=2, dropout=0.1,
             max_source_positions=64, max_target_positions=64)


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


@pytest.fixture(scope="module")
def dictionary():
    d = Dictionary()
    for i in range(40):
        d.add_symbol(f"w{i}")
    return d


@pytest.fixture(scope="module")
def stock(dictionary):
    torch.manual_seed(0)
    args = argparse.Namespace(**SIZES)
    fairseq_base(args)
    return TransformerModel.build_model(args, _Task(dictionary)).eval()


def ours(dictionary, stock_model, context, strict=True, **opts):
    args = argparse.Namespace(context_inference=context, **SIZES, **opts)
    model = ACVITransformerModel.build_model(args, _Task(dictionary))
    res = model.load_state_dict(stock_model.state_dict(), strict=strict)
    return model.eval(), res


def batch(d, B=3, N=7, T=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(d.nspecial, len(d), (B, N), generator=g)
    src[:, -1] = d.eos()
    src[0, :2] = d.pad()                           # left padding, as fairseq's translation task
    lengths = src.ne(d.pad()).sum(1)
    prev = torch.randint(d.nspecial, len(d), (B, T), generator=g)
    prev[:, 0] = d.eos()
    prev[1, -2:] = d.pad()                          # a shorter target
    return src, lengths, prev


def set_k(model, k):
    for attn in model.decoder.latent_attn:
        attn.acvi.mc_samples = k


def lprobs(model, src, lengths, prev):
    with torch.no_grad():
        out = model(src, lengths, prev)
    return model.get_normalized_probs(out, log_probs=True), out[1]


# -- same weights, same outputs ---------------------------------------------------------------------
def test_soft_is_fairseq_transformer(dictionary, stock):
    model, _ = ours(dictionary, stock, "soft")                   # strict: the same parameters
    b = batch(dictionary)
    ref, _ = lprobs(stock, *b)
    got, extra = lprobs(model, *b)
    assert torch.equal(got, ref)
    assert extra["losses"] == {}
    # training mode too (dropout 0.1): the same random stream gives the same values
    model.train(), stock.train()
    try:
        torch.manual_seed(5)
        ref = stock.get_normalized_probs(stock(*b), log_probs=True)
        torch.manual_seed(5)
        got = model.get_normalized_probs(model(*b), log_probs=True)
        assert torch.equal(got, ref)
    finally:
        stock.eval()


@pytest.mark.parametrize("layers", ["all", "last"])
def test_acvi_k0_is_fairseq_transformer(dictionary, stock, layers):
    model, res = ours(dictionary, stock, "acvi", strict=False, acvi_latent_layers=layers)
    latent = [0, 1] if layers == "all" else [1]
    assert res.unexpected_keys == []
    assert sorted(res.missing_keys) == sorted(
        f"decoder.layers.{i}.encoder_attn.acvi.logvar_net.{j}.{p}"
        for i in latent for j in (0, 2) for p in ("weight", "bias"))
    assert len(model.decoder.latent_attn) == len(latent)
    set_k(model, 0)
    b = batch(dictionary)
    ref, _ = lprobs(stock, *b)
    got, extra = lprobs(model, *b)
    assert torch.equal(got, ref)
    assert float(extra["losses"]["kl"][0]) > 0


def test_acvi_sigma_to_zero_is_fairseq_transformer(dictionary, stock):
    b = batch(dictionary)
    ref, _ = lprobs(stock, *b)
    tiny, _ = ours(dictionary, stock, "acvi", strict=False, acvi_logvar_init=-20.0)
    wide, _ = ours(dictionary, stock, "acvi", strict=False, acvi_logvar_init=0.0)
    for m in (tiny, wide):
        set_k(m, 10)
    torch.manual_seed(0)
    got, _ = lprobs(tiny, *b)
    assert (got - ref).abs().max() < 1e-4
    torch.manual_seed(0)
    noisy, _ = lprobs(wide, *b)                     # σ² ≈ a² e⁰: the samples move the output
    assert (noisy - ref).abs().max() > 1e-2
    assert torch.allclose(noisy.exp().sum(-1), torch.ones(noisy.shape[:2]), atol=1e-5)


# -- the per-head KL --------------------------------------------------------------------------------
def test_per_head_kl_matches_hand_computation(dictionary, stock):
    model, _ = ours(dictionary, stock, "acvi", strict=False, acvi_latent_layers="last",
                    acvi_logvar_init=-1.0, acvi_beta=0.25, acvi_kl_delay_updates=2,
                    acvi_kl_warmup_updates=4)
    set_k(model, 0)
    src, lengths, prev = batch(dictionary)
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        _, extra = model.decoder(prev, encoder_out=enc, features_only=True,
                                 return_all_hiddens=True)
        # the top layer's query: its self-attention block on the previous layer's output
        layer = model.decoder.layers[-1]
        x = extra["inner_states"][-2]                               # (T, B, D)
        T, B, D = x.shape
        mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        pad_t = prev.eq(dictionary.pad())
        y, _ = layer.self_attn(x, x, x, key_padding_mask=pad_t if pad_t.any() else None,
                               attn_mask=mask, need_weights=False)
        query = layer.self_attn_layer_norm(x + y)
        attn_mod = layer.encoder_attn
        H, hd = attn_mod.num_heads, attn_mod.head_dim
        h = enc["encoder_out"][0]                                   # (N, B, D)
        pad = enc["encoder_padding_mask"][0]                        # (B, N)
        q = attn_mod.q_proj(query) * hd ** -0.5                     # (T, B, D)
        k, v = attn_mod.k_proj(h), attn_mod.v_proj(h)               # (N, B, D)
        kl_hand = torch.zeros(B, T)
        for hh in range(H):
            sl = slice(hh * hd, (hh + 1) * hd)
            s = torch.einsum("tbd,nbd->btn", q[..., sl], k[..., sl])
            a = s.masked_fill(pad[:, None, :], float("-inf")).softmax(-1)    # (B, T, N)
            m = torch.einsum("btn,nbd->btd", a, v[..., sl])
            var = attn_mod.acvi.logvar_net(v[..., sl]).clamp(-20, 10).exp()   # (N, B, d_h)
            vv = torch.einsum("btn,nbd->btd", a ** 2, var)
            kl_hand += 0.5 * (m ** 2 + vv - 1 - vv.log()).sum(-1)
    kl_hand = (kl_hand * prev.ne(dictionary.pad())).sum()
    kl, weight = extra["losses"]["kl"]
    assert torch.allclose(kl, kl_hand, rtol=1e-5), (float(kl), float(kl_hand))
    parts = extra["losses"]["kl_mean_part"][0] + extra["losses"]["kl_var_part"][0]
    assert torch.allclose(parts, kl, rtol=1e-5)
    # β and the schedule are ACVI's: 0 during the delay, then the linear warm-up to β
    weights = []
    for n in (0, 1, 2, 4, 6, 50):
        model.set_num_updates(n)
        weights.append(model.decoder.latent_attn[0].acvi.loss_weight("kl"))
    assert weights == [0.0, 0.0, 0.0, 0.125, 0.25, 0.25]
    assert extra["losses"]["kl_mean_part"][1] == 0.0              # diagnostics: weight 0


@pytest.mark.parametrize("mean", ["identity", "mlp"])
def test_training_sample_carries_the_likelihood_gradient(dictionary, stock, mean):
    """In training every latent layer draws c = m + √v ε: the likelihood alone (no KL) reaches
    each layer's log σ² network (and μ's with --acvi-mean mlp) through the sample."""
    model, _ = ours(dictionary, stock, "acvi", strict=False, acvi_mean=mean, acvi_logvar_init=-2.0)
    model.train()
    src, lengths, prev = batch(dictionary)
    out = model(src, lengths, prev)
    lp = model.get_normalized_probs(out, log_probs=True)
    assert lp.dtype == torch.float32
    (-lp[..., 5].sum()).backward()
    for attn in model.decoder.latent_attn:
        nets = [attn.acvi.logvar_net] + ([attn.acvi.mean_net] if mean == "mlp" else [])
        for net in nets:
            assert net[-1].weight.grad is not None and net[-1].weight.grad.abs().sum() > 0
    assert len(model.decoder.latent_attn) == 2


# -- the K-sample average ------------------------------------------------------------------------------
def fixed_noise(eps_rows):
    """A stand-in for ``draw_gaussian`` that uses the given ε rows (K, d_h) at every position."""
    def draw(m, v, k, dtype, antithetic=False):
        eps = eps_rows[:k].to(m)                                   # (K, d_h)
        return (m.unsqueeze(-2) + v.sqrt().unsqueeze(-2) * eps).to(dtype)
    return draw


def test_k_samples_batched_equal_k_separate_passes(dictionary, stock, monkeypatch):
    model, _ = ours(dictionary, stock, "acvi", strict=False, acvi_logvar_init=0.0)
    b = batch(dictionary)
    eps = torch.randn(4, 4, generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(transformer_context, "draw_gaussian", fixed_noise(eps))
    set_k(model, 4)
    got, _ = lprobs(model, *b)
    singles = []
    for k in range(4):
        monkeypatch.setattr(transformer_context, "draw_gaussian", fixed_noise(eps[k:k + 1]))
        set_k(model, 1)
        singles.append(lprobs(model, *b)[0])
    want = torch.logsumexp(torch.stack(singles), 0) - math.log(4)
    assert torch.allclose(got, want, atol=1e-5)
    assert (singles[0] - singles[1]).abs().max() > 1e-3          # the samples differ
    # --mc-combine geometric: the normalised mean of the K log-probabilities
    monkeypatch.setattr(transformer_context, "draw_gaussian", fixed_noise(eps))
    set_k(model, 4)
    for attn in model.decoder.latent_attn:
        attn.acvi.mc_combine = "geometric"
    geo, _ = lprobs(model, *b)
    assert torch.allclose(geo, torch.log_softmax(torch.stack(singles).mean(0), -1), atol=1e-5)
    assert (geo - got).abs().max() > 1e-4


def test_antithetic_sampling_reaches_every_latent_layer(dictionary, stock, monkeypatch):
    """``--mc-sampling antithetic``: each layer's K = 4 evaluation contexts per head are two ± pairs
    around its mean m (their average is m exactly); training still draws one sample."""
    model, _ = ours(dictionary, stock, "acvi", strict=False, acvi_logvar_init=0.0,
                    mc_sampling="antithetic")
    seen, draw = [], transformer_context.draw_gaussian

    def record(m, v, k, dtype, antithetic=False):
        c = draw(m, v, k, dtype, antithetic=antithetic)
        seen.append((k, antithetic, m, c))
        return c
    monkeypatch.setattr(transformer_context, "draw_gaussian", record)
    set_k(model, 4)
    lprobs(model, *batch(dictionary))
    assert len(seen) == 1 and seen[0][:2] == (4, True)         # the sampling (last) layer
    m, c = seen[0][2], seen[0][3]                              # (B·H, T, d_h), (B·H, T, 4, d_h)
    torch.testing.assert_close(c.float().mean(-2), m, atol=1e-6, rtol=0)
    assert (c[..., 0, :] - m).abs().max() > 1e-3                 # not the mean itself
    seen.clear()
    model.train()
    model(*batch(dictionary))
    assert [s[:2] for s in seen] == [(1, False)] * len(model.decoder.latent_attn)


@pytest.mark.parametrize("combine", ["prob", "geometric"])
def test_chunked_sample_average_equals_one_pass(dictionary, stock, monkeypatch, combine):
    """Above MC_CHUNK_ELEMENTS the K samples go through the output layer in chunks: same values."""
    from fairseq_acvi.mc_prediction import averaging
    model, _ = ours(dictionary, stock, "acvi", strict=False, mc_combine=combine)
    x = torch.randn(3, 4, 5, 16)                                   # (B, T, K, D)
    with torch.no_grad():
        one = model.decoder.mc_log_probs(x)
        monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 3 * 4 * len(dictionary) * 2)   # chunks of 2
        chunked = model.decoder.mc_log_probs(x)
    assert torch.allclose(one, chunked, atol=1e-5)
    assert torch.allclose(one.exp().sum(-1), torch.ones(3, 4), atol=1e-5)
    with torch.no_grad():
        lp = torch.log_softmax(model.decoder.output_layer(x), -1)
    want = (torch.log_softmax(lp.mean(2), -1) if combine == "geometric"
            else torch.logsumexp(lp, 2) - math.log(5))
    assert torch.allclose(one, want, atol=1e-5)
    if combine == "prob":
        with pytest.raises(ValueError, match="--mc-combine must be one of prob, geometric"):
            ours(dictionary, stock, "acvi", strict=False, mc_combine="arithmetic")


# -- incremental decoding and beams --------------------------------------------------------------------
@pytest.mark.parametrize("context,k", [("soft", 0), ("acvi", 0), ("acvi", 3)])
def test_incremental_equals_full_forward(dictionary, stock, monkeypatch, context, k):
    model, _ = ours(dictionary, stock, context, strict=False, acvi_logvar_init=0.0)
    if context == "acvi":
        set_k(model, k)
        monkeypatch.setattr(transformer_context, "draw_gaussian",
                            fixed_noise(torch.randn(3, 4, generator=torch.Generator().manual_seed(4))))
    src, lengths, prev = batch(dictionary)
    prev[1, -2:] = 5                                # no padding inside the incremental prefix
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        full = model.decoder(prev, encoder_out=enc)[0]
        inc, steps = {}, []
        for t in range(prev.size(1)):
            out = model.decoder(prev[:, :t + 1], encoder_out=enc, incremental_state=inc)
            steps.append(out[0])
            assert out[1]["losses"] == {}
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)


@pytest.mark.parametrize("context", ["soft", "acvi"])
def test_beam_reordering(dictionary, stock, context):
    """As fairseq's beam search does it: 2 sentences × 2 beams; the beams of a sentence swap and
    fork (new_order within each sentence's rows), then a finished sentence leaves the batch (a
    smaller new_order: the cached static keys, μ and σ² are index-selected)."""
    model, _ = ours(dictionary, stock, context, strict=False, acvi_logvar_init=0.0)
    if context == "acvi":
        set_k(model, 0)
    src, lengths, _ = batch(dictionary, B=2)
    g = torch.Generator().manual_seed(7)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (4, 6), generator=g)
    prev[:, 0] = dictionary.eos()
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        enc = model.encoder.reorder_encoder_out(enc, torch.tensor([0, 0, 1, 1]))
        inc = {}
        for t in range(3):
            model.decoder(prev[:, :t + 1], encoder_out=enc, incremental_state=inc)
        for order in (torch.tensor([1, 0, 3, 3]), torch.tensor([2, 3])):
            t = t + 1
            model.decoder.reorder_incremental_state_scripting(inc, order)
            enc = model.encoder.reorder_encoder_out(enc, order)
            prev = prev[order]
            step = model.decoder(prev[:, :t + 1], encoder_out=enc, incremental_state=inc)[0]
            full = model.decoder(prev[:, :t + 1], encoder_out=enc)[0]
            assert torch.allclose(step[:, 0], full[:, t], atol=1e-5)
    if context == "acvi":
        buf = model.decoder.latent_attn[-1]._get_input_buffer(inc)
        assert buf["acvi_var"].shape[0] == 2 and buf["acvi_var"].dtype == torch.float32
        assert torch.equal(buf["acvi_var"][0], buf["acvi_var"][1])   # both rows: sentence 1


def test_beamable_attention_equals_plain(dictionary, stock):
    """fairseq's "beamable" encoder-decoder attention (set_beam_size: the keys, μ and σ² are kept
    once per sentence, shared by its beam rows) gives what the plain path gives."""
    model, _ = ours(dictionary, stock, "acvi", strict=False, acvi_logvar_init=0.0)
    set_k(model, 0)
    src, lengths, _ = batch(dictionary, B=2)
    prev = torch.randint(dictionary.nspecial, len(dictionary), (4, 5),
                         generator=torch.Generator().manual_seed(9))
    prev[:, 0] = dictionary.eos()
    outs = []
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        enc = model.encoder.reorder_encoder_out(enc, torch.tensor([0, 0, 1, 1]))
        for beam in (1, 2):
            for layer in model.decoder.layers:
                layer.encoder_attn.set_beam_size(beam)
            inc, steps = {}, []
            for t in range(prev.size(1)):
                steps.append(model.decoder(prev[:, :t + 1], encoder_out=enc, incremental_state=inc)[0])
            outs.append(torch.cat(steps, 1))
        buf = model.decoder.latent_attn[-1]._get_input_buffer(inc)
        assert buf["acvi_mu"].shape[0] == 2                         # once per sentence
        for layer in model.decoder.layers:
            layer.encoder_attn.set_beam_size(1)
    assert torch.allclose(outs[0], outs[1], atol=1e-5)


# -- the elbo criterion ------------------------------------------------------------------------------
def _sample(dictionary, src, lengths, prev):
    target = torch.cat([prev[:, 1:], torch.full((prev.size(0), 1), dictionary.eos())], 1)
    target = target.masked_fill(prev.eq(dictionary.pad()), dictionary.pad())
    return {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
            "target": target, "ntokens": int(target.ne(dictionary.pad()).sum())}


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_elbo_label_smoothing(dictionary, stock, eps):
    model, _ = ours(dictionary, stock, "acvi", strict=False, acvi_beta=0.5,
                    acvi_kl_delay_updates=0, acvi_kl_warmup_updates=0)   # β from the first update
    set_k(model, 0)
    sample = _sample(dictionary, *batch(dictionary))
    crit = ELBOCriterion(_Task(dictionary), label_smoothing=eps)
    with torch.no_grad():
        loss, size, log = crit(model, sample)
        lp, extra = lprobs(model, *batch(dictionary))
    kl = extra["losses"]["kl"][0]
    target, pad = sample["target"], dictionary.pad()
    nll = -(lp.gather(-1, target.unsqueeze(-1)).squeeze(-1) * target.ne(pad)).sum()
    if eps == 0:
        assert torch.allclose(loss, nll + 0.5 * kl, rtol=1e-6)
    else:
        smoothed, fs_nll = label_smoothed_nll_loss(lp, target.unsqueeze(-1), eps, ignore_index=pad)
        assert torch.allclose(loss, smoothed + 0.5 * kl, rtol=1e-5)
        assert not torch.allclose(loss - 0.5 * kl, nll, rtol=1e-4)   # the smoothing counts
        assert torch.allclose(fs_nll, nll)
    assert torch.allclose(log["nll_loss"], nll)
    assert size == int(target.ne(pad).sum())


def test_elbo_with_fairseq_transformer(dictionary, stock):
    """The criterion needs nothing from the model but log-probabilities: fairseq's own
    transformer trains under it (no loss terms), with the value of its cross-entropy."""
    sample = _sample(dictionary, *batch(dictionary))
    with torch.no_grad():
        loss, _, log = ELBOCriterion(_Task(dictionary))(stock, sample)
        lp = stock.get_normalized_probs(stock(**sample["net_input"]), log_probs=True)
    t = sample["target"]
    assert torch.allclose(loss, -(lp.gather(-1, t.unsqueeze(-1)).squeeze(-1) * t.ne(1)).sum())
    assert set(log) == {"loss", "nll_loss", "ntokens", "nsentences", "sample_size"}


def test_unsupported_options_are_refused(dictionary):
    args = argparse.Namespace(context_inference="structured", **SIZES)
    with pytest.raises(ValueError, match="soft, acvi"):
        ACVITransformerModel.build_model(args, _Task(dictionary))
    args = argparse.Namespace(context_inference="acvi", context_ablation="zero", **SIZES)
    with pytest.raises(ValueError, match="context-ablation"):
        ACVITransformerModel.build_model(args, _Task(dictionary))


# -- through the CLIs --------------------------------------------------------------------------------
TINY = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
        "--decoder-ffn-embed-dim", "32", "--encoder-layers", "1", "--decoder-layers", "2",
        "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"]


def train_cli(data, save_dir, *extra, updates=6):
    return run_cli("fairseq_cli.train", data, "--user-dir", USER_DIR, "--task", "translation",
                   "--arch", "acvi_transformer_multi30k", "--criterion", "elbo",
                   "--optimizer", "adam", "--lr", "0.002", "--max-tokens", "1500",
                   "--max-update", updates, "--save-dir", save_dir, "--no-progress-bar",
                   "--log-interval", "1", "--log-format", "simple", "--seed", "1",
                   "--no-epoch-checkpoints", "--acvi-kl-delay-updates", "0", *TINY, *extra)


@pytest.mark.parametrize("context", ["soft", "acvi"])
def test_cli_train_generate_round_trip(data_bin, tmp_path, context):  # noqa: F811
    res = train_cli(data_bin, tmp_path, "--context-inference", context, "--label-smoothing", "0.1")
    check_finite_losses(res)
    text = res.stdout + res.stderr
    if context == "acvi":
        kls = logged(text, "kl")
        assert kls and all(v > 0 for v in kls), kls
    else:
        assert not logged(text, "kl")
    ckpt = tmp_path / "checkpoint_last.pt"
    state = torch.load(ckpt, weights_only=True)
    assert state["cfg"]["model"].arch == "acvi_transformer_multi30k"
    assert state["cfg"]["model"].context_inference == context
    for k in ("0", "3"):
        gen = run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR, "--path", ckpt,
                      "--beam", "3", "--batch-size", "8", "--gen-subset", "test",
                      "--model-overrides", f"{{'mc_samples': {k}}}")
        hyps = [line for line in gen.stdout.splitlines() if line.startswith("H-")]
        assert len(hyps) == 12, gen.stdout[-2000:]
        scores = [float(line.split("\t")[1]) for line in hyps]
        assert all(s <= 0 and s == s for s in scores)


def test_cli_memory_efficient_fp16(data_bin, tmp_path):  # noqa: F811
    res = train_cli(data_bin, tmp_path, "--context-inference", "acvi", "--memory-efficient-fp16",
                    "--fp16-init-scale", "16", updates=4)
    check_finite_losses(res)
    kls = logged(res.stdout + res.stderr, "kl")
    assert kls and all(v > 0 and v == v for v in kls), kls
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=True)
    # the ACVI parameters trained in half precision are stored, finite
    names = [n for n in state["model"] if ".acvi.logvar_net." in n]
    assert names and all(torch.isfinite(state["model"][n].float()).all() for n in names)
    gen = run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR, "--path",
                  tmp_path / "checkpoint_last.pt", "--beam", "2", "--batch-size", "8",
                  "--gen-subset", "test", "--fp16", "--model-overrides", "{'mc_samples': 2}")
    assert len([line for line in gen.stdout.splitlines() if line.startswith("H-")]) == 12
