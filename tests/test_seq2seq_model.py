"""The acvi_lstm model: incremental decoding, beam reordering, learning (docs/method.md §2-3)."""
import argparse

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture
from fairseq_acvi.modules.context import CONTEXT_REGISTRY

VARIANTS = sorted(CONTEXT_REGISTRY)


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def _dictionary(n=12):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


def build_model(variant, dictionary=None, **overrides):
    d = dictionary or _dictionary()
    opts = dict(
        arch="acvi_lstm", context_inference=variant, encoder_embed_dim=16, encoder_hidden_size=12,
        encoder_layers=2, decoder_embed_dim=16, decoder_hidden_size=20, decoder_layers=2,
        attention_dim=10, dropout=0.0, mc_samples=0)
    opts.update(overrides)
    args = argparse.Namespace(**opts)
    base_architecture(args)
    return ACVILSTMModel.build_model(args, _Task(d)), d


def _batch(d, B=3, N=6, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([N, N - 2, 2])[:B]
    src = torch.randint(d.nspecial, len(d), (B, N), generator=g)
    src[torch.arange(N)[None] >= lengths[:, None]] = d.pad()
    tgt_len = torch.tensor([T, T - 1, 2])[:B]
    prev = torch.randint(d.nspecial, len(d), (B, T), generator=g)
    prev[:, 0] = d.eos()
    prev[torch.arange(T)[None] >= tgt_len[:, None]] = d.pad()
    return src, lengths, prev



def incremental_and_full(model, src, lengths, prev):
    """(incremental log-probs (B, T, V), teacher-forced log-probs (B, T, V), teacher-forced extra,
    the incremental state after the last step)."""
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        full, extra = model.decoder(prev, enc)
        state, steps = {}, []
        for t in range(prev.size(1)):
            out, _ = model.decoder(prev[:, : t + 1], enc, incremental_state=state)
            steps.append(out)
    return torch.cat(steps, dim=1), full, extra, state


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_equals_teacher_forcing(variant):
    torch.manual_seed(0)
    model, d = build_model(variant)
    model.eval()
    src, lengths, prev = _batch(d)
    inc, full, extra, _ = incremental_and_full(model, src, lengths, prev)
    assert full.shape == (3, prev.size(1), len(d)) and full.dtype == torch.float32
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(full.shape[:2]))
    if variant != "none":
        attn = extra["attn"][0]
        pad = src.eq(d.pad())
        assert torch.all(attn.masked_select(pad[:, None, :].expand_as(attn)) == 0)


def decode_incrementally(model, src, lengths, prev, steps):
    """Encode and run the decoder's incremental path over prev[:, :steps] -> (enc, state)."""
    enc = model.encoder(src, lengths)
    state = {}
    for t in range(steps):
        model.decoder(prev[:, : t + 1], enc, incremental_state=state)
    return enc, state


@pytest.mark.parametrize("variant", VARIANTS)
def test_beam_reordering_keeps_per_hypothesis_state(variant):
    torch.manual_seed(0)
    model, d = build_model(variant)
    model.eval()
    src, lengths, prev = _batch(d)
    order = torch.tensor([2, 0, 1, 0])
    with torch.no_grad():
        enc, state = decode_incrementally(model, src, lengths, prev, 3)
        model.decoder.reorder_incremental_state_scripting(state, order)
        enc_r = model.encoder.reorder_encoder_out(enc, order)
        step, _ = model.decoder(prev[order, :4], enc_r, incremental_state=state)
        ref, _ = model.decoder(prev[order, :4], enc_r)
    torch.testing.assert_close(step[:, 0], ref[:, 3], atol=1e-5, rtol=1e-5)


def test_training_forward_returns_finite_losses_for_every_variant():
    for variant in VARIANTS:
        torch.manual_seed(0)
        model, d = build_model(variant)
        model.train()
        src, lengths, prev = _batch(d)
        lprobs, extra = model(src, lengths, prev)
        assert torch.isfinite(lprobs[prev.ne(d.pad())]).all(), variant
        for name, (value, weight) in extra["losses"].items():
            assert value.dim() == 0 and torch.isfinite(value), (variant, name)
        if variant == "acvi":
            assert extra["losses"]["kl"][0] > 0


def test_mc_averaging_is_batched_and_k_changes_prediction():
    torch.manual_seed(0)
    # σ² ≈ 1: with the initial σ² ≈ e⁻⁶ the default antithetic pairs cancel the noise's first-order
    # effect and K samples predict like the mean to within float tolerance
    model, d = build_model("acvi", mc_samples=0, acvi_logvar_init=0.0)
    model.eval()
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        mean, _ = model.decoder(prev, enc)
        model.decoder.context.mc_samples = 64
        mc, _ = model.decoder(prev, enc)
    assert not torch.allclose(mc, mean)
    torch.testing.assert_close(mc.exp().sum(-1), torch.ones(mc.shape[:2]))
    # the average of K samples is a mixture: its entropy is at least the mean entropy of samples
    assert torch.isfinite(mc).all()


def test_acvi_train_samples_zero_is_the_deterministic_control():
    """``--acvi-train-samples 0`` trains on the mean context m_t: the training forward is then
    deterministic and equals evaluation at K = 0, with the KL still returned; 1 (the method) draws
    a fresh sample each pass. Any other value is refused by name."""
    torch.manual_seed(0)
    model, d = build_model("acvi", mc_samples=0, acvi_logvar_init=0.0)
    src, lengths, prev = _batch(d)
    model.eval()
    with torch.no_grad():
        ref, _ = model(src, lengths, prev)
    model.train()
    with torch.no_grad():
        noisy = [model(src, lengths, prev)[0] for _ in range(2)]
        assert not torch.allclose(noisy[0], noisy[1])          # σ² ≈ 1: one sample per pass
        model.decoder.context.train_samples = 0
        runs = [model(src, lengths, prev) for _ in range(2)]
    torch.testing.assert_close(runs[0][0], runs[1][0])
    torch.testing.assert_close(runs[0][0], ref)
    kl = runs[0][1]["losses"]["kl"][0]
    assert torch.isfinite(kl) and kl > 0
    with pytest.raises(ValueError, match="--acvi-train-samples"):
        build_model("acvi", acvi_train_samples=2)


def test_none_is_the_same_decoder_with_an_empty_context():
    """--context-inference none (modules/context/none.py): no scorer parameters, no attention
    weights, a 0-d context; the output depends on the source only through the encoder's final
    states (the initial decoder state), never through the annotations."""
    torch.manual_seed(0)
    model, d = build_model("none")
    soft, _ = build_model("soft")
    model.eval()
    dec = model.decoder
    assert dec.context.name == "none" and dec.context.context_dim == 0
    assert not any(n.startswith("decoder.scorer.") for n, _ in model.named_parameters())
    assert any(n.startswith("decoder.scorer.") for n, _ in soft.named_parameters())
    assert dec.W_c.in_features == dec.hidden_size                     # [s_t ; c_t], c_t ∈ ℝ⁰
    assert dec.layers[0].input_size == 16 + dec.out_dim              # input feeding kept
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        lp, extra = dec(prev, enc)
        other = dict(enc, encoder_out=[torch.randn_like(enc["encoder_out"][0])])
        lp_other, _ = dec(prev, other)
        final = dict(enc, encoder_final=[torch.randn_like(enc["encoder_final"][0])])
        lp_final, _ = dec(prev, final)
    assert extra["attn"] == [None] and extra["losses"] == {}
    torch.testing.assert_close(lp_other, lp)                          # annotations unread
    assert (lp_final - lp).abs().max() > 1e-3                         # final states read
    with pytest.raises(ValueError, match="coverage"):
        CONTEXT_REGISTRY["none"].build_scorer(argparse.Namespace(), 20, 24, coverage=True)


def test_checkpoints_with_the_old_output_layer_names_load_unchanged():
    """Checkpoints saved before the output layer was a part name it decoder.fc_out.*;
    ContextLSTMDecoder.upgrade_state_dict_named renames it (fairseq's load_state_dict calls it)
    and the loaded model computes the same distribution."""
    torch.manual_seed(0)
    model, d = build_model("soft")
    old = {k.replace("decoder.head.", "decoder."): v for k, v in model.state_dict().items()}
    assert "decoder.fc_out.weight" in old and not any(".head." in k for k in old)
    torch.manual_seed(1)
    fresh, _ = build_model("soft", dictionary=d)
    fresh.load_state_dict(old)
    src, lengths, prev = _batch(d)
    model.eval(), fresh.eval()
    with torch.no_grad():
        torch.testing.assert_close(fresh(src, lengths, prev)[0], model(src, lengths, prev)[0],
                                   rtol=0, atol=0)


def test_dropped_presets_still_name_their_base_architecture():
    """The second names that repeated a base architecture (models/legacy_names.py) still build
    the base model, so checkpoints saved under them load."""
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    from fairseq_acvi.models.legacy_names import LEGACY_ARCHITECTURES

    assert set(LEGACY_ARCHITECTURES) == {"acvi_lstm_iwslt", "acvi_lstm_wmt_en_ro",
                                         "acvi_pointer_generator_cnndm", "acvi_video_captioner_msvd"}
    for old, (model_name, base) in LEGACY_ARCHITECTURES.items():
        assert ARCH_CONFIG_REGISTRY[old] is base is ARCH_CONFIG_REGISTRY[model_name]
        assert ARCH_MODEL_REGISTRY[old] is ARCH_MODEL_REGISTRY[model_name]


@pytest.mark.parametrize("layers", [1, 2])
def test_decoder_draws_fairseqs_dropout_masks(monkeypatch, layers):
    """Per training step, as fairseq's LSTMDecoder: the feed's mask and one per layer output,
    the last layer's included though unused (so seeded runs keep their random stream)."""
    torch.manual_seed(0)
    model, d = build_model("soft", dropout=0.3, decoder_layers=layers)
    model.train()
    src, lengths, prev = _batch(d)
    enc = model.encoder(src, lengths)
    shapes = []
    real = torch.nn.functional.dropout

    def counting(x, p=0.5, training=True, inplace=False):
        if training and p > 0:
            shapes.append(tuple(x.shape))
        return real(x, p, training, inplace)

    monkeypatch.setattr(torch.nn.functional, "dropout", counting)
    model.decoder(prev, enc)
    B, T = prev.shape
    H = model.decoder.hidden_size
    feed = model.decoder.feed_dim
    embed = model.decoder.embed_tokens.embedding_dim
    per_step = [(B, feed)] + [(B, H)] * layers
    assert shapes == [(B, T, embed)] + per_step * T + [(B, T, 1, feed)]   # last: the output layer's
