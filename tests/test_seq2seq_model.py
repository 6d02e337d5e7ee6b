"""The acvi_lstm model: incremental decoding, beam reordering, learning (docs/method.md §2-3)."""
import argparse

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture
from fairseq_acvi.modules.context import CONTEXT_REGISTRY

VARIANTS = ["none"] + sorted(CONTEXT_REGISTRY)


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


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_equals_teacher_forcing(variant):
    torch.manual_seed(0)
    model, d = build_model(variant)
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
    model, d = build_model("acvi", mc_samples=0)
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
