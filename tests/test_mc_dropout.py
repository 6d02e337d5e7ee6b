"""Monte-Carlo dropout at generation (fairseq_acvi/modules/seq2seq/mc_dropout.py; docs/uncertainty.md §6).

K dropout chains per model, averaged in probability space; the masks are drawn per step, shared
by the beam rows of a sentence and different between chains; every dropout probability 0 gives
the plain model.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from fairseq.sequence_generator import SequenceGenerator

import test_pointer_generator as pg_tests
import test_seq2seq_model as s2s_tests
import test_video_captioner as cap_tests
from fairseq_acvi.generation.uncertainty import enable_uncertainty
from fairseq_acvi.modules.seq2seq import mc_dropout
from fairseq_acvi.modules.seq2seq.mc_dropout import SharedDropoutMasks, fold, wrap_mc_dropout
from fairseq_acvi.mc_prediction.uncertainty import (EXPECTED_ENTROPY, MEMBERS_MUTUAL_INFORMATION,
                                              MUTUAL_INFORMATION, decompose)

SHARP = dict(init_scale=1.0, acvi_logvar_init=0.0)


def _soft(dropout=0.3, **kw):
    torch.manual_seed(0)
    model, d = s2s_tests.build_model("soft", dropout=dropout, **SHARP, **kw)
    model.eval()
    return model, d


def _sample(d):
    src, lengths, prev = s2s_tests._batch(d)
    return {"id": torch.tensor([0, 1, 2]), "net_input": {"src_tokens": src, "src_lengths": lengths}}, prev


def _generator(model, d, beam=3):
    return SequenceGenerator([model], d, beam_size=beam, max_len_a=0, max_len_b=7, min_len=1)


def test_fold_lists_the_chains_of_each_row():
    assert fold(torch.tensor([2, 0]), 3).tolist() == [6, 7, 8, 0, 1, 2]


def test_masks_are_shared_by_the_beam_rows_and_differ_between_chains_and_steps():
    n_sent, beam, K, D = 2, 3, 4, 64
    x = torch.ones(n_sent * beam * K, D)
    torch.manual_seed(0)
    with SharedDropoutMasks(K, group=beam) as mode:
        a = F.dropout(x, p=0.5, training=False)             # the model's eval-mode call
        b = torch.nn.Dropout(0.5).eval()(x)                 # a module's, next step
    assert mode.draws == 2
    for m in (a, b):
        assert set(m.unique().tolist()) <= {0.0, 2.0}       # inverted dropout: kept / (1 − p)
        m = m.view(n_sent, beam, K, D)
        assert torch.equal(m, m[:, :1].expand_as(m))        # every beam row of a sentence: same
        for s in range(n_sent):                              # the K chains: different masks
            assert len({tuple(m[s, 0, k].tolist()) for k in range(K)}) == K
        assert not torch.equal(m[0, 0], m[1, 0])            # sentences: different masks
    assert not torch.equal(a, b)                            # a new draw at every call (step)
    with pytest.raises(ValueError, match="beam rows"):
        with SharedDropoutMasks(K, group=beam):
            F.dropout(torch.ones(5, D), p=0.5)
    with SharedDropoutMasks(K, group=beam, rate=0.0) as mode:
        assert F.dropout(x, p=0.5) is x and mode.draws == 0


def test_dropout_zero_is_the_plain_model():
    """Rate 0 (and a model trained without dropout): K identical chains whose average is the plain
    model's distribution (to the rounding of a K-times-larger batch, ~2e-6), the same beam search,
    and no mutual information at all."""
    model, d = _soft(dropout=0.3)
    plain_model, _ = _soft(dropout=0.0)
    sample, prev = _sample(d)
    src, lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    for m, rate in ((model, 0.0), (plain_model, None)):
        mc = wrap_mc_dropout(m, 4, rate=rate)
        mc.decoder.record_uncertainty = True
        with torch.no_grad():
            ref, _ = m.decoder(prev, m.encoder(src, lengths))
            lp, extra = mc(prev, src_tokens=src, src_lengths=lengths)
            plain = _generator(m, d).generate([m], sample)
            ours = enable_uncertainty(_generator(mc, d)).generate([mc], sample)
        torch.testing.assert_close(lp, ref, atol=1e-5, rtol=0)
        u = extra["uncertainty"]
        assert u.shape == prev.shape + (4,)
        assert torch.all(u[..., MUTUAL_INFORMATION] == 0)
        assert torch.all(u[..., MEMBERS_MUTUAL_INFORMATION] == 0)
        for hs, ps in zip(ours, plain):
            for h, p in zip(hs, ps):
                assert torch.equal(h["tokens"], p["tokens"])
                assert abs(float(h["score"]) - float(p["score"])) < 1e-5
                assert torch.all(h["members_mi"] == 0) and torch.all(h["uncertainty"][:, 2] == 0)


def test_masks_are_drawn_once_per_step_for_all_beams_of_a_sentence(monkeypatch):
    """At the first step every beam row of a sentence holds the same prefix: under shared masks
    they get the same K-chain average; with a mask per row (group 1) they would not. At every
    step the same number of masks is drawn (one per dropout of the step), and the chains differ."""
    model, d = _soft(dropout=0.3)
    sample, _ = _sample(d)
    draws, first = [], {}
    real_call = mc_dropout.MCDropoutDecoder.forward

    def forward(self, prev_output_tokens, *args, **kwargs):
        before = _count[0]
        out = real_call(self, prev_output_tokens, *args, **kwargs)
        draws.append(_count[0] - before)
        first.setdefault(self.rows_per_sentence, out[0][:, -1])
        return out

    _count = [0]
    real_mask = SharedDropoutMasks.mask

    def mask(self, *a):
        _count[0] += 1
        return real_mask(self, *a)

    monkeypatch.setattr(mc_dropout.MCDropoutDecoder, "forward", forward)
    monkeypatch.setattr(SharedDropoutMasks, "mask", mask)
    beam = 3
    torch.manual_seed(1)
    mc = wrap_mc_dropout(model, 4)
    with torch.no_grad():
        gen = enable_uncertainty(_generator(mc, d, beam))          # 3 rows per sentence
        hypos = gen.generate([mc], sample)
        shared = first.pop(beam).view(3, beam, -1)
        assert torch.equal(shared, shared[:, :1].expand_as(shared))
        mc.decoder.rows_per_sentence = 1                             # a mask per row instead
        SequenceGenerator([mc], d, beam_size=beam, max_len_a=0, max_len_b=7,
                          min_len=1).generate([mc], sample)
        own = first.pop(1).view(3, beam, -1)
        assert not torch.equal(own, own[:, :1].expand_as(own))
    # 2 decoder layers: dropout on the input embedding, the fed-back state, after each layer and
    # before the output projection: 5 masks a step, each covering every row, all K chains
    assert set(draws) == {5}
    mi = torch.cat([h["members_mi"] for hs in hypos for h in hs])
    assert mi.min() > 0                                  # the K chains' distributions differ


def test_the_average_is_over_the_chains_in_probability_space(monkeypatch):
    """The prediction is log (1/K) Σ_k p_k of the K chains the inner decoder computed, and its
    numbers the decomposition over all K chains × S context samples."""
    for variant in ("soft", "acvi"):
        torch.manual_seed(0)
        extra_opts = dict(mc_samples=3, mc_sampling="iid") if variant == "acvi" else {}
        model, d = s2s_tests.build_model(variant, dropout=0.3, **extra_opts, **SHARP)
        model.eval()
        src, lengths, prev = s2s_tests._batch(d)
        mc = wrap_mc_dropout(model, 5)
        mc.decoder.record_uncertainty = True
        seen = {}
        inner = model.decoder.forward

        def spy(*a, **kw):
            seen["out"] = inner(*a, **kw)
            return seen["out"]

        monkeypatch.setattr(model.decoder, "forward", spy)
        with torch.no_grad():
            lp, extra = mc(prev, src_tokens=src, src_lengths=lengths)
        monkeypatch.undo()
        chains_lp, chains_extra = seen["out"]
        B, T, V = lp.shape
        chains = chains_lp.view(B, 5, T, V).transpose(1, 2)                     # (B, T, K, V)
        torch.testing.assert_close(lp, torch.logsumexp(chains, 2) - math.log(5), atol=1e-5,
                                   rtol=0)
        u, own = extra["uncertainty"], chains_extra["uncertainty"].view(B, 5, T, 3).transpose(1, 2)
        between = decompose(chains, lp)
        torch.testing.assert_close(u[..., MEMBERS_MUTUAL_INFORMATION],
                                   between[..., MUTUAL_INFORMATION], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(u[..., EXPECTED_ENTROPY], own[..., EXPECTED_ENTROPY].mean(-1))
        torch.testing.assert_close(u[..., MUTUAL_INFORMATION], between[..., MUTUAL_INFORMATION]
                                   + own[..., MUTUAL_INFORMATION].mean(-1), atol=1e-5, rtol=1e-5)
        assert u[..., MEMBERS_MUTUAL_INFORMATION].min() > 0
        if variant == "soft":                  # no context samples: all of I is the chains'
            assert torch.equal(u[..., MUTUAL_INFORMATION], u[..., MEMBERS_MUTUAL_INFORMATION])
        else:                                  # ACVI's samples add their own part
            assert torch.all(u[..., MUTUAL_INFORMATION] > u[..., MEMBERS_MUTUAL_INFORMATION])


def test_every_lstm_model_of_the_plugin():
    """The pointer-generator and the video captioner: rate 0 is the plain model; with dropout the
    chains disagree."""
    torch.manual_seed(0)
    pg, d = pg_tests.build_model("soft", dropout=0.3, **SHARP)
    src, lengths, prev = pg_tests._batch(d)
    cap, dc, _ = cap_tests.build("soft", dropout=0.3, **SHARP)
    feats, flen, cprev, _ = cap_tests._batch(dc)
    for model, net, p in ((pg, {"src_tokens": src, "src_lengths": lengths}, prev),
                          (cap, {"src_feats": feats, "src_lengths": flen}, cprev)):
        model.eval()
        with torch.no_grad():
            ref, _ = model(prev_output_tokens=p, **net)
            zero = wrap_mc_dropout(model, 3, rate=0.0)
            torch.testing.assert_close(zero(p, **net)[0], ref, atol=1e-5, rtol=0)
            mc = wrap_mc_dropout(model, 3)
            mc.decoder.record_uncertainty = True
            lp, extra = mc(p, **net)
        finite = torch.isfinite(ref)
        assert not torch.allclose(lp[finite], ref[finite], atol=1e-3)
        assert extra["uncertainty"][..., MEMBERS_MUTUAL_INFORMATION].max() > 0


def test_refusals():
    model, _ = _soft()
    with pytest.raises(ValueError, match="--mc-dropout"):
        wrap_mc_dropout(model, 0)
    with pytest.raises(ValueError, match="--mc-dropout-rate"):
        wrap_mc_dropout(model, 3, rate=1.0)
    with pytest.raises(ValueError, match="LSTM seq2seq"):
        wrap_mc_dropout(torch.nn.Linear(2, 2), 3)
    mc = wrap_mc_dropout(model, 2)
    mc.train()
    src, lengths, prev = s2s_tests._batch(model.decoder.dictionary)
    with pytest.raises(ValueError, match="not training"):
        mc(prev, src_tokens=src, src_lengths=lengths)


def test_with_self_attention_and_the_decoders_past():
    """Seed 003's configurations keep more per-row state (past keys and values, reordered with
    the beam): rate 0 still searches exactly as the plain model, and with dropout the chains of
    the self-attention's dropout disagree too."""
    model, d = _soft(dropout=0.3, self_attention_heads=2, attend_decoder_past=True)
    sample, prev = _sample(d)
    src, lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    with torch.no_grad():
        plain = _generator(model, d).generate([model], sample)
        zero = wrap_mc_dropout(model, 3, rate=0.0)
        ours = _generator(zero, d).generate([zero], sample)
        for hs, ps in zip(ours, plain):
            for h, p in zip(hs, ps):
                assert torch.equal(h["tokens"], p["tokens"])
                assert abs(float(h["score"]) - float(p["score"])) < 1e-5
        mc = wrap_mc_dropout(model, 3)
        hypos = enable_uncertainty(_generator(mc, d)).generate([mc], sample)
    assert min(float(h["members_mi"].min()) for hs in hypos for h in hs) > 0
