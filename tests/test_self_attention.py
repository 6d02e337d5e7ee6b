"""Seed 003's configuration (iii), ``--self-attention-heads H`` (docs/method.md §3.6): multi-head
self-attention over the encoder's annotations (padding-masked) and, causally, over the decoder's
states. The block against torch's nn.MultiheadAttention, the encoder padding mask, the decoder's
causal mask, incremental decoding = the teacher-forced forward with each scorer and each context
inference, beam reordering, and the other models sharing the decoder."""
import pytest
import torch

from fairseq_acvi.modules.context import CONTEXT_REGISTRY
from fairseq_acvi.modules.context.scorers import SCORERS
from fairseq_acvi.modules.seq2seq.self_attention import SelfAttentionBlock
from test_decoder_past import build_model
from test_seq2seq_model import _batch, decode_incrementally, incremental_and_full
from test_seq2seq_model import build_model as _build_model

VARIANTS = sorted(CONTEXT_REGISTRY)
III = dict(self_attention_heads=2)


def reference(block, x, **mha_kwargs):
    """LayerNorm(x + MHA(x, x, x)) computed by torch's nn.MultiheadAttention itself."""
    a, _ = block.attn(x, x, x, need_weights=False, **mha_kwargs)
    return block.norm(x + a)


def _block(dim=8, heads=2):
    torch.manual_seed(0)
    block = SelfAttentionBlock(dim, heads)
    with torch.no_grad():                     # a layer norm that is not the identity map
        block.norm.weight.uniform_(0.5, 1.5)
        block.norm.bias.uniform_(-0.5, 0.5)
    return block.eval()


def test_bidirectional_block_is_torchs_multihead_attention_with_the_padding_mask():
    block = _block()
    x = torch.randn(3, 5, 8)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4])
    y = block(x, pad)
    ref = reference(block, x, key_padding_mask=pad)
    torch.testing.assert_close(y[~pad], ref[~pad])
    assert torch.all(y[pad] == 0)
    torch.testing.assert_close(block(x), reference(block, x))


def test_padding_content_changes_nothing_but_real_positions_do():
    block = _block()
    x = torch.randn(2, 6, 8)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    junk = x.clone()
    junk[pad] = 1e3 * torch.randn(int(pad.sum()), 8)
    assert torch.equal(block(junk, pad), block(x, pad))
    other = x.clone()
    other[1, 0] += 1.0                          # a real position: every real position changes
    diff = (block(other, pad) - block(x, pad))[1].abs().amax(-1)
    assert (diff[:4] > 1e-4).all() and (diff[4:] == 0).all()


def test_stepwise_block_is_torchs_multihead_attention_with_the_causal_mask():
    block = _block()
    x = torch.randn(2, 6, 8)
    keys, values = block.empty_past(x)
    steps = []
    for t in range(6):
        y_t, keys, values = block.step(x[:, t], keys, values)
        steps.append(y_t)
    assert keys.shape == (2, 2, 6, 4)
    stepwise = torch.stack(steps, dim=1)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)               # True: not allowed
    torch.testing.assert_close(stepwise, reference(block, x, attn_mask=causal))
    # without the mask every step would see the future: the comparison can fail
    assert (stepwise[:, :-1] - reference(block, x)[:, :-1]).abs().amax() > 1e-3


def test_half_precision_block_attends_in_float32():
    block = _block()
    x = torch.randn(2, 5, 8)
    pad = torch.tensor([[False] * 5, [False] * 2 + [True] * 3])
    y16 = block.half()(x.half(), pad)
    assert y16.dtype == torch.float16 and torch.isfinite(y16).all()
    torch.testing.assert_close(y16.float(), block.float()(x, pad), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("scorer", SCORERS)
def test_incremental_decoding_equals_teacher_forcing_with_each_scorer(scorer):
    torch.manual_seed(0)
    model, d = build_model("soft", attention_type=scorer, **III)
    model.eval()
    src, lengths, prev = _batch(d)
    inc, full, extra, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    attn = extra["attn"][0]
    pad = src.eq(d.pad())
    assert torch.all(attn.masked_select(pad[:, None, :].expand_as(attn)) == 0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_decoding_equals_teacher_forcing_with_each_context_inference(variant):
    torch.manual_seed(0)
    model, d = build_model(variant, **III)
    model.eval()
    src, lengths, prev = _batch(d)
    inc, full, _, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scorer", SCORERS)
def test_beam_reordering_reorders_the_self_attention_past(scorer):
    torch.manual_seed(0)
    model, d = build_model("soft", attention_type=scorer, **III)
    model.eval()
    src, lengths, prev = _batch(d)
    order = torch.tensor([2, 0, 1, 0])
    with torch.no_grad():
        enc, state = decode_incrementally(model, src, lengths, prev, 3)
        before = model.decoder.get_incremental_state(state, "cache")
        assert before["sa_keys"].shape == (3, 2, 3, 10)             # (B, heads, t, d_h)
        model.decoder.reorder_incremental_state_scripting(state, order)
        after = model.decoder.get_incremental_state(state, "cache")
        assert torch.equal(after["sa_values"], before["sa_values"][order])
        enc_r = model.encoder.reorder_encoder_out(enc, order)
        step, _ = model.decoder(prev[order, :4], enc_r, incremental_state=state)
        ref, _ = model.decoder(prev[order, :4], enc_r)
    torch.testing.assert_close(step[:, 0], ref[:, 3], atol=1e-5, rtol=1e-5)


def test_no_decoder_step_sees_its_future():
    """Teacher-forced: a changed input token at step k changes no output before k, and changes
    the outputs from k on."""
    torch.manual_seed(0)
    model, d = build_model("soft", **III)
    model.eval()
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        base, _ = model(src, lengths, prev)
        for k in (1, 2, 4):
            changed = prev.clone()
            changed[0, k] = d.nspecial + (int(prev[0, k]) - d.nspecial + 1) % (len(d) - d.nspecial)
            out, _ = model(src, lengths, changed)
            assert torch.equal(out[0, :k], base[0, :k]), k
            assert (out[0, k:] - base[0, k:]).abs().amax(-1).min() > 0, k


def test_encoder_padding_content_changes_nothing_end_to_end():
    """Whatever the padded source positions hold (their embeddings replaced by large noise), the
    self-attended annotations at real positions and every output are the same; the annotations
    are self-attended (not the LSTM's), and the decoder's initial state is the LSTM's."""
    torch.manual_seed(0)
    model, d = build_model("acvi", **III)
    plain, _ = build_model("acvi")
    model.eval()
    src, lengths, prev = _batch(d)
    pad = src.eq(d.pad())
    with torch.no_grad():
        x = model.encoder.embed_tokens(src)
        junk = x.clone()
        junk[pad] = 100.0 * torch.randn(int(pad.sum()), x.size(-1))
        enc = model.encoder.encode(x, lengths, pad)
        enc_junk = model.encoder.encode(junk, lengths, pad)
        h = enc["encoder_out"][0]
        assert torch.equal(h, enc_junk["encoder_out"][0])
        assert torch.all(h[pad] == 0)
        out, _ = model.decoder(prev, enc)
        out_junk, _ = model.decoder(prev, enc_junk)
        assert torch.equal(out, out_junk)
        # the annotations the decoder reads are the block's output over the LSTM's
        model.encoder.self_attention, block = None, model.encoder.self_attention
        lstm_only = model.encoder.encode(x, lengths, pad)
        model.encoder.self_attention = block
        torch.testing.assert_close(h, block(lstm_only["encoder_out"][0], pad))
        assert torch.equal(enc["encoder_final"][0], lstm_only["encoder_final"][0])
    assert sum(p.numel() for p in model.parameters()) > sum(p.numel() for p in plain.parameters())


def test_training_forward_is_finite_and_every_new_parameter_learns():
    torch.manual_seed(0)
    model, d = build_model("acvi", attend_decoder_past=True, **III)
    model.train()
    src, lengths, prev = _batch(d)
    lp, extra = model(src, lengths, prev)
    assert torch.isfinite(lp[prev.ne(d.pad())]).all()
    loss = -lp[prev.ne(d.pad())].sum() + extra["losses"]["kl"][0]
    loss.backward()
    for name, p in model.named_parameters():
        if "self_attention" in name or "self_attn" in name or "past_attn" in name:
            assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.slow
def test_learns_reversal_with_both_options():
    """(ii) + (iii), soft attention, the set-up of tests/test_learnability.py (reversal of 3-7
    words, 700 Adam updates of 64): ≥ 95 % exact match decoding with fairseq's beam search
    (beam 3, through the incremental state and its reordering). 60-80 s on one core: slow."""
    import random

    from fairseq.sequence_generator import SequenceGenerator

    from test_learnability import reversal_batch, train_reversal
    from test_seq2seq_model import _dictionary
    torch.manual_seed(0)
    rng = random.Random(0)
    d = _dictionary(10)
    model, _ = _build_model("soft", d, encoder_hidden_size=32, decoder_hidden_size=64,
                            encoder_embed_dim=32, decoder_embed_dim=32, attention_dim=32,
                            encoder_layers=1, decoder_layers=1, mc_samples=0,
                            attend_decoder_past=True, **III)
    train_reversal(model, d, rng, updates=700, batch_size=64)
    model.eval()
    gen = SequenceGenerator([model], d, beam_size=3, max_len_b=10)
    src, lengths, _, _, srcs = reversal_batch(d, random.Random(123), 200)
    with torch.no_grad():
        hyps = gen.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})
    exact = sum(h[0]["tokens"][:-1].tolist() == s[::-1] for h, s in zip(hyps, srcs))
    assert exact / len(srcs) >= 0.95, f"exact match {exact}/{len(srcs)}"


def test_pointer_generator_and_captioner_get_both_options_through_the_shared_decoder():
    """The options are the shared seq2seq options: the pointer-generator (copy switch reading
    q_t) and the video captioner (frame features) build them and decode incrementally as their
    teacher-forced forward."""
    import test_pointer_generator as pg
    import test_video_captioner as vc
    torch.manual_seed(0)
    model, d = pg.build_model("soft", attend_decoder_past=True, self_attention_heads=2)
    assert model.encoder.self_attention is not None and model.decoder.past_attn is not None
    model.eval()
    src, lengths, prev = pg._batch(d)
    inc, full, _, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    # the gold-token path of training (the copy switch reads q_t of u_t = [q_t ; d_t]) gives the
    # same log-probabilities as the full distribution
    tgt = torch.cat([prev[:, 1:], torch.full((3, 1), d.pad())], 1)
    with torch.no_grad():
        _, extra = model(src, lengths, prev, target=tgt, score_target=True)
    gathered = full.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(extra["target_lprobs"][nonpad], gathered[nonpad])
    torch.manual_seed(0)
    model, d, _ = vc.build("acvi", decoder_hidden_size=8, attend_decoder_past=True,
                           self_attention_heads=2)
    model.eval()
    feats, lengths, prev, pad = vc._batch(d)
    with torch.no_grad():
        full, _ = model(feats, lengths, prev)
        junk, _ = model(vc._batch(d, garbage=1e3)[0], lengths, prev)
        enc = model.encoder(src_feats=feats, src_lengths=lengths)
        state, steps = {}, []
        for t in range(prev.size(1)):
            steps.append(model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0])
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(torch.cat(steps, 1)[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)
    assert torch.equal(junk, full)
