"""Source-use diagnostics (--context-ablation): a model that needs its source must lose it.

A soft-attention model learns sequence reversal; evaluated with every context replaced by zeros
or by another sentence's annotations, it can no longer reverse, and its likelihood collapses.
"""
import random

import pytest
import torch

from test_learnability import reversal_batch
from test_seq2seq_model import _dictionary, build_model


def _nll(model, batch, d):
    src, lengths, prev, tgt, _ = batch
    with torch.no_grad():
        lprobs, _ = model(src, lengths, prev)
    mask = tgt.ne(d.pad())
    return -(lprobs.gather(-1, tgt.unsqueeze(-1)).squeeze(-1) * mask).sum().item() / mask.sum().item()


def _accuracy(model, batch, d):
    src, lengths, prev, tgt, _ = batch
    with torch.no_grad():
        lprobs, _ = model(src, lengths, prev)
    mask = tgt.ne(d.pad())
    return ((lprobs.argmax(-1) == tgt) & mask).sum().item() / mask.sum().item()


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    rng = random.Random(0)
    d = _dictionary(10)
    model, _ = build_model("soft", d, encoder_hidden_size=32, decoder_hidden_size=64,
                           encoder_embed_dim=32, decoder_embed_dim=32, encoder_layers=1,
                           decoder_layers=1, mc_samples=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(300):
        src, lengths, prev, tgt, _ = reversal_batch(d, rng, 64)
        lprobs, _ = model(src, lengths, prev)
        mask = tgt.ne(d.pad())
        loss = -(lprobs.gather(-1, tgt.unsqueeze(-1)).squeeze(-1) * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model, d


def _set_ablation(model, mode):
    model.encoder.context_ablation = model.decoder.context_ablation = mode


def test_replacing_the_context_destroys_a_source_dependent_model(trained):
    model, d = trained
    batch = reversal_batch(d, random.Random(7), 200)
    _set_ablation(model, "none")
    base_acc, base_nll = _accuracy(model, batch, d), _nll(model, batch, d)
    assert base_acc > 0.9, base_acc
    for mode in ("zero", "shuffle"):
        _set_ablation(model, mode)
        acc, nll = _accuracy(model, batch, d), _nll(model, batch, d)
        # 10 word types + </s>: without the source the model is near chance on the words
        assert acc < 0.5, (mode, acc)
        assert nll > base_nll + 1.0, (mode, nll, base_nll)
    _set_ablation(model, "none")


def test_shuffle_reads_another_sentence_and_handles_a_batch_of_one(trained):
    model, d = trained
    _set_ablation(model, "shuffle")
    model.encoder._last_annotations = None
    src, lengths, *_ = reversal_batch(d, random.Random(3), 4)
    _set_ablation(model, "none")
    own = model.encoder(src, lengths)["encoder_out"][0]
    _set_ablation(model, "shuffle")
    out = model.encoder(src, lengths)
    torch.testing.assert_close(out["encoder_out"][0], own.roll(1, 0))
    torch.testing.assert_close(out["encoder_final"][0], model.encoder.encode(
        model.encoder.embed_tokens(src), lengths, src.eq(d.pad()))["encoder_final"][0])
    one = model.encoder(src[:1], lengths[:1])        # takes the previous batch's first sentence
    n = min(own.size(1), one["encoder_out"][0].size(1))
    torch.testing.assert_close(one["encoder_out"][0][0, :n], own[0, :n])
    model.encoder._last_annotations = None
    with pytest.raises(ValueError, match="batch of ≥ 2"):
        model.encoder(src[:1], lengths[:1])
    _set_ablation(model, "none")


def test_ablation_refused_in_training():
    model, d = build_model("soft", context_ablation="zero")
    model.train()
    src, lengths, prev, _, _ = reversal_batch(d, random.Random(0), 4)
    with pytest.raises(ValueError, match="evaluation only"):
        model(src, lengths, prev)
    with pytest.raises(ValueError, match="context-ablation"):
        build_model("soft", context_ablation="bogus")
