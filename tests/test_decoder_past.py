"""Seed 003's configuration (ii), ``--attend-decoder-past`` (docs/method.md §3.6): the decoder also
attends over its own earlier outputs. Incremental decoding = the teacher-forced forward with each
scorer and each context inference, beam reordering of the decoder's past, causality, the closed
form of d_t, and the options off change nothing (checkpoints without them load as trained)."""
import argparse

import pytest
import torch

from fairseq_acvi.models.lstm_seq2seq import ACVILSTMModel, base_architecture
from fairseq_acvi.modules.context import CONTEXT_REGISTRY
from fairseq_acvi.modules.seq2seq.decoder_past import DecoderPastAttention
from fairseq_acvi.modules.context.scorers import SCORERS
from test_seq2seq_model import _Task, _batch, _dictionary, decode_incrementally, incremental_and_full  # noqa: F401
from test_seq2seq_model import build_model as _build_model


def build_model(variant, **overrides):
    """The small acvi_lstm of tests/test_seq2seq_model.py with U(−0.5, 0.5) parameters: outputs
    far enough from uniform that a wrong past shows (with ±0.1 they differ by ~1e-4)."""
    return _build_model(variant, **dict(dict(init_scale=0.5), **overrides))

VARIANTS = sorted(CONTEXT_REGISTRY)
#: the seed's configurations as options: (ii) and (ii) + (iii), the row of its Table 1 with both
CONFIGS = {"ii": dict(attend_decoder_past=True),
           "ii+iii": dict(attend_decoder_past=True, self_attention_heads=2)}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("scorer", SCORERS)
def test_incremental_decoding_equals_teacher_forcing_with_each_scorer(scorer, config):
    torch.manual_seed(0)
    model, d = build_model("soft", attention_type=scorer, **CONFIGS[config])
    model.eval()
    src, lengths, prev = _batch(d)
    inc, full, extra, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(full.shape[:2]))
    b = extra["decoder_past_attn"]                                     # (B, T, T-1)
    T = prev.size(1)
    assert b.shape == (3, T, T - 1)
    # step t attends to steps 1..t-1 only, with weights summing to 1 (none at the first step)
    assert torch.all(b[:, 0] == 0)
    torch.testing.assert_close(b[:, 1:].sum(-1), torch.ones(3, T - 1))
    future = torch.ones(T, T - 1, dtype=torch.bool).tril(-1).logical_not()
    assert torch.all(b[:, future] == 0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_equals_teacher_forcing_with_each_context_inference(variant):
    torch.manual_seed(0)
    model, d = build_model(variant, **CONFIGS["ii"])
    model.eval()
    src, lengths, prev = _batch(d)
    inc, full, _, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("scorer", SCORERS)
def test_beam_reordering_reorders_the_decoders_past(scorer, config):
    """After 3 incremental steps the hypotheses are reordered (2, 0, 1, 0): step 4 of each row
    must see the past of the row it now continues, as the teacher-forced forward of that row."""
    torch.manual_seed(0)
    model, d = build_model("soft", attention_type=scorer, **CONFIGS[config])
    model.eval()
    src, lengths, prev = _batch(d)
    order = torch.tensor([2, 0, 1, 0])
    with torch.no_grad():
        enc, state = decode_incrementally(model, src, lengths, prev, 3)
        before = model.decoder.get_incremental_state(state, "cache")
        assert before["past_keys"].shape[:2] == (3, 3)
        model.decoder.reorder_incremental_state_scripting(state, order)
        after = model.decoder.get_incremental_state(state, "cache")
        assert torch.equal(after["past_values"], before["past_values"][order])
        enc_r = model.encoder.reorder_encoder_out(enc, order)
        step, _ = model.decoder(prev[order, :4], enc_r, incremental_state=state)
        ref, _ = model.decoder(prev[order, :4], enc_r)
        # the same without reordering the past: another row's past gives another prediction
        state2 = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], enc, incremental_state=state2)
        cache = model.decoder.get_incremental_state(state2, "cache")
        cache = {k: (v.index_select(1, order) if k in ("h", "c") else v.index_select(0, order))
                 for k, v in cache.items()}
        cache["past_keys"], cache["past_values"] = (cache["past_keys"].flip(0),
                                                    cache["past_values"].flip(0))
        model.decoder.set_incremental_state(state2, "cache", cache)
        wrong, _ = model.decoder(prev[order, :4], enc_r, incremental_state=state2)
    torch.testing.assert_close(step[:, 0], ref[:, 3], atol=1e-5, rtol=1e-5)
    assert (wrong[:, 0] - ref[:, 3]).abs().max() > 1e-4


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_no_step_sees_its_future(config):
    """Teacher-forced: changing the input token of step k changes no output before k and does
    change the outputs from k on."""
    torch.manual_seed(0)
    model, d = build_model("soft", attention_type="scaled-dot", **CONFIGS[config])
    model.eval()
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        base, _ = model(src, lengths, prev)
        for k in (1, 3):
            changed = prev.clone()
            changed[0, k] = d.nspecial + (int(prev[0, k]) - d.nspecial + 1) % (len(d) - d.nspecial)
            out, _ = model(src, lengths, changed)
            assert torch.equal(out[0, :k], base[0, :k]), k
            assert (out[0, k:] - base[0, k:]).abs().amax(-1).min() > 0, k
            assert torch.equal(out[1:], base[1:])


def test_past_context_is_the_softmax_average_of_the_earlier_states():
    """The closed form with the multiplicative scorer: d_t = Σ_{j<t} softmax_j(q_jᵀ W q_t) q_j,
    d_1 = 0, and the key-value scorer averages its values, not the states."""
    torch.manual_seed(0)
    past = DecoderPastAttention("multiplicative", 4, 4)
    q = torch.randn(2, 3, 4)                                           # three steps' states
    keys, values = past.empty_past(q)
    ds = []
    for t in range(3):
        d_t, b_t = past(q[:, t], keys, values)
        ds.append(d_t)
        keys, values = past.append(q[:, t], keys, values)
    assert torch.equal(ds[0], torch.zeros(2, 4))
    W = past.scorer.W.weight                                           # keys = W q_j
    for t in (1, 2):
        e = torch.einsum("bjd,bd->bj", q[:, :t] @ W.T, q[:, t])
        expect = torch.einsum("bj,bjd->bd", e.softmax(-1), q[:, :t])
        torch.testing.assert_close(ds[t], expect)
    kv = DecoderPastAttention("key-value", 4, 4)
    keys, values = kv.empty_past(q)
    for t in range(2):
        keys, values = kv.append(q[:, t], keys, values)
    torch.testing.assert_close(values, kv.scorer.T(q[:, :2]).chunk(2, dim=-1)[1])
    d_2, b_2 = kv(q[:, 2], keys, values)
    torch.testing.assert_close(d_2, torch.einsum("bj,bjd->bd", b_2, values))


def test_the_past_context_reaches_the_prediction():
    """d_t feeds W_c: zeroing its columns of W_c changes the output from step 2 on (d_1 = 0
    leaves step 1 as it was), and the past scorer gets gradient in training."""
    torch.manual_seed(0)
    model, d = build_model("soft", **CONFIGS["ii"])
    src, lengths, prev = _batch(d)
    H = model.decoder.hidden_size
    assert model.decoder.W_c.in_features == H + H + model.decoder.context.context_dim
    model.train()
    lp, _ = model(src, lengths, prev)
    lp[prev.ne(d.pad())].sum().backward()
    assert model.decoder.past_attn.scorer.W.weight.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        base, _ = model(src, lengths, prev)
        model.decoder.W_c.weight[:, H:2 * H] = 0
        cut, _ = model(src, lengths, prev)
    torch.testing.assert_close(cut[:, 0], base[:, 0])
    assert (cut[:, 1:] - base[:, 1:]).abs().amax() > 1e-4


def test_options_off_build_nothing_new_and_old_option_sets_load():
    """Off (the default) nothing of (ii) / (iii) is built: the parameters are those of a model
    whose options predate them (a checkpoint's namespace without the two keys), value for value
    from the same seed, and the outputs are equal."""
    d = _dictionary()
    opts = dict(arch="acvi_lstm", context_inference="soft", encoder_embed_dim=16,
                encoder_hidden_size=12, encoder_layers=2, decoder_embed_dim=16,
                decoder_hidden_size=20, decoder_layers=2, attention_dim=10, dropout=0.0,
                mc_samples=0)
    models = []
    for extra in ({}, dict(attend_decoder_past=False, self_attention_heads=0)):
        args = argparse.Namespace(**opts, **extra)
        base_architecture(args)
        assert args.attend_decoder_past is False and args.self_attention_heads == 0
        torch.manual_seed(0)
        models.append(ACVILSTMModel.build_model(args, _Task(d)))
    old, new = models
    assert list(old.state_dict()) == list(new.state_dict())
    assert not any("self_attention" in k or "past_attn" in k or "self_attn" in k
                   for k in new.state_dict())
    for (k, a), b in zip(old.state_dict().items(), new.state_dict().values()):
        assert torch.equal(a, b), k
    new.load_state_dict(old.state_dict())
    src, lengths, prev = _batch(d)
    old.eval(), new.eval()
    with torch.no_grad():
        assert torch.equal(old(src, lengths, prev)[0], new(src, lengths, prev)[0])


@pytest.mark.parametrize("bad,match", [
    (dict(self_attention_heads=3), "--self-attention-heads 3 must divide --decoder-hidden-size"),
    (dict(self_attention_heads=-1), "--self-attention-heads must be a whole number"),
    (dict(self_attention_heads=5), "must divide the annotation size 2 × --encoder-hidden-size"),
    (dict(attend_decoder_past="yes"), "--attend-decoder-past is a switch"),
])
def test_bad_option_values_are_refused_naming_the_option(bad, match):
    with pytest.raises(ValueError, match=match):
        build_model("soft", **bad)
