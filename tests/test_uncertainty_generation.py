"""Per-token uncertainty in the seq2seq decoder and beam search (docs/uncertainty.md).

The uncertainty a finished hypothesis reports must be that of its own beam path: it is compared with
a teacher-forced recomputation of the same tokens, for the translation model, the pointer-generator
and the video captioner. ACVI's context noise is made deterministic for these comparisons (the same
ε for every row and step), so that beam decoding and teacher forcing see the same samples.
"""
import math

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

import test_pointer_generator as pg_tests
import test_seq2seq_model as s2s_tests
import test_video_captioner as cap_tests
from fairseq_acvi.generation.uncertainty import enable_uncertainty
from fairseq_acvi.mc_prediction import averaging
from fairseq_acvi.modules.context import acvi as acvi_module
from fairseq_acvi.mc_prediction.uncertainty import ENTROPY, MUTUAL_INFORMATION, decompose
from fairseq_acvi.tasks.video_captioning import FeatureSequenceGenerator


NOISE = torch.randn(64, 64, generator=torch.Generator().manual_seed(7))


def fix_noise(monkeypatch, table):
    """ACVI's ε (B, T, K, d) becomes ``table[:K, :d]`` for every row and step."""
    real = torch.randn

    def randn(*shape, **kwargs):
        if len(shape) == 4 and kwargs.keys() <= {"device", "dtype"}:
            K, d = shape[-2:]
            return table[:K, :d].expand(*shape).clone()
        return real(*shape, **kwargs)

    monkeypatch.setattr(acvi_module.torch, "randn", randn)


@pytest.fixture
def fixed_noise(monkeypatch):
    fix_noise(monkeypatch, NOISE)


#: larger weights and ACVI noise than the defaults: peaked distributions whose entropy and mutual
#: information change from one prefix to the next (an untrained model at U(-0.1, 0.1) is uniform)
SHARP = dict(init_scale=1.0, acvi_logvar_init=0.0)


def _models():
    """(name, model, dictionary, net_input of 3 sources, encode(i) -> encoder_out of source i)."""
    torch.manual_seed(0)
    out = []
    for variant in ("soft", "acvi"):
        model, d = s2s_tests.build_model(variant, mc_samples=4 if variant == "acvi" else 0, **SHARP)
        src, lengths, _ = s2s_tests._batch(d)
        out.append((f"translation-{variant}", model, d, {"src_tokens": src, "src_lengths": lengths},
                    lambda i, m=model, s=src, n=lengths: m.encoder(s[i:i + 1, :n[i]], n[i:i + 1])))
    model, d = pg_tests.build_model("acvi", mc_samples=3, **SHARP)
    src, lengths, _ = pg_tests._batch(d)
    out.append(("pointer-generator-acvi", model, d, {"src_tokens": src, "src_lengths": lengths},
                lambda i, m=model, s=src, n=lengths: m.encoder(s[i:i + 1, :n[i]], n[i:i + 1])))
    model, d, _ = cap_tests.build("acvi", mc_samples=3, **SHARP)
    feats, lengths, _, _ = cap_tests._batch(d)
    out.append(("captioner-acvi", model, d, {"src_feats": feats, "src_lengths": lengths},
                lambda i, m=model, f=feats, n=lengths: m.encoder(src_feats=f[i:i + 1, :n[i]],
                                                                 src_lengths=n[i:i + 1])))
    return out


MODELS = ["translation-soft", "translation-acvi", "pointer-generator-acvi", "captioner-acvi"]


def _generator(name, model, d, beam):
    cls = FeatureSequenceGenerator if name.startswith("captioner") else SequenceGenerator
    return cls([model], d, beam_size=beam, max_len_a=0, max_len_b=7, min_len=1)


def _teacher_forced(model, enc, tokens, d):
    """(T, 3) uncertainties of the distributions the tokens (ending in </s>) were chosen from."""
    prev = torch.cat([torch.tensor([d.eos()]), tokens[:-1]])[None]
    model.decoder.record_uncertainty = True
    try:
        _, extra = model.decoder(prev, enc)
    finally:
        model.decoder.record_uncertainty = False
    return extra["uncertainty"][0]


@pytest.mark.parametrize("name", MODELS)
def test_each_hypothesis_reports_its_own_beam_path(name, fixed_noise):
    _, model, d, net_input, encode = next(m for m in _models() if m[0] == name)
    model.eval()
    beam = 4
    sample = {"id": torch.tensor([10, 11, 12]), "net_input": net_input}
    with torch.no_grad():
        plain = _generator(name, model, d, beam).generate([model], sample)
        gen = enable_uncertainty(_generator(name, model, d, beam))
        hypos = gen.generate([model], sample)
        assert not model.decoder.record_uncertainty          # switched off again after the call
        n_checked, differs = 0, False
        for i, (hs, ps) in enumerate(zip(hypos, plain)):
            assert len(hs) == beam
            # the same search: the same hypotheses and scores with and without the recording
            for h, p in zip(hs, ps):
                assert torch.equal(h["tokens"], p["tokens"])
                assert h["score"] == p["score"]
            enc = encode(i)
            refs = [_teacher_forced(model, enc, h["tokens"], d) for h in hs]
            for h, ref in zip(hs, refs):
                u = h["uncertainty"]
                assert u.shape == (len(h["tokens"]), 3) and u.dtype == torch.float32
                torch.testing.assert_close(u, ref, atol=1e-5, rtol=1e-5)
                n_checked += 1
            # a hypothesis given another beam's path would be caught: the paths differ
            differs |= any(r.shape != refs[0].shape or not torch.allclose(r, refs[0], atol=1e-4)
                           for r in refs[1:])
            assert gen.last_batch[int(sample["id"][i])] == [h["uncertainty"] for h in hs]
    assert n_checked == 3 * beam and differs


@pytest.mark.parametrize("variant", ["soft", "acvi"])
def test_recording_does_not_change_the_distribution(variant):
    torch.manual_seed(0)
    model, d = s2s_tests.build_model(variant, mc_samples=5, **SHARP)
    model.eval()
    src, lengths, prev = s2s_tests._batch(d)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        torch.manual_seed(1)
        off, extra_off = model.decoder(prev, enc)
        model.decoder.record_uncertainty = True
        torch.manual_seed(1)
        on, extra_on = model.decoder(prev, enc)
    assert "uncertainty" not in extra_off
    assert torch.equal(off, on)
    u = extra_on["uncertainty"]
    assert u.shape == prev.shape + (3,)
    torch.testing.assert_close(u[..., ENTROPY], -(on.exp() * on).sum(-1), atol=2e-5, rtol=1e-5)
    if variant == "soft":                                   # one distribution per step
        assert torch.all(u[..., MUTUAL_INFORMATION] == 0)
    else:
        assert torch.all(u[..., MUTUAL_INFORMATION] > 0)


def _recording_acvi(mc_samples):
    """A small ACVI translation model in eval mode that records its uncertainty, the encoder
    output of the test batch and the decoder's input tokens."""
    torch.manual_seed(0)
    # iid draws: the test replays the same ε rows one sample at a time (antithetic pairs would
    # tie sample k to sample k + ⌈K/2⌉)
    model, d = s2s_tests.build_model("acvi", mc_samples=mc_samples, mc_sampling="iid", **SHARP)
    model.eval()
    src, lengths, prev = s2s_tests._batch(d)
    model.decoder.record_uncertainty = True
    with torch.no_grad():
        enc = model.encoder(src, lengths)
    return model, enc, prev


def test_mutual_information_vanishes_without_sampling_noise():
    """K = 0 (the mean context) gives exactly 0; σ → 0 gives K equal samples and I → 0."""
    model, enc, prev = _recording_acvi(6)
    with torch.no_grad():
        noisy = model.decoder(prev, enc)[1]["uncertainty"][..., MUTUAL_INFORMATION]
        model.decoder.context.mc_samples = 0
        mean = model.decoder(prev, enc)[1]["uncertainty"][..., MUTUAL_INFORMATION]
        model.decoder.context.mc_samples = 6
        model.decoder.context.logvar_net[-1].bias.fill_(-20.0)      # σ² = e^-20 everywhere
        model.decoder.context.logvar_net[-1].weight.zero_()
        quiet = model.decoder(prev, enc)[1]["uncertainty"][..., MUTUAL_INFORMATION]
    assert torch.all(mean == 0)
    assert noisy.max() > 1e-3
    assert quiet.max() < 1e-6


def test_chunked_sample_average_gives_the_same_uncertainty(monkeypatch):
    model, enc, prev = _recording_acvi(5)
    with torch.no_grad():
        torch.manual_seed(3)
        lp, extra = model.decoder(prev, enc)
        monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 1)      # sample by sample
        torch.manual_seed(3)
        lp_c, extra_c = model.decoder(prev, enc)
    torch.testing.assert_close(lp_c, lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(extra_c["uncertainty"], extra["uncertainty"], atol=5e-5, rtol=1e-4)


def test_decoder_uncertainty_is_the_decomposition_of_its_samples(monkeypatch):
    """The decoder's numbers are decompose() of the per-sample distributions it forms."""
    model, enc, prev = _recording_acvi(3)
    with torch.no_grad():
        fix_noise(monkeypatch, NOISE)
        lp_mean, extra = model.decoder(prev, enc)
        # the three samples one at a time: K = 1 with the k-th row of the same ε
        model.decoder.context.mc_samples = 1
        per_sample = []
        for k in range(3):
            fix_noise(monkeypatch, NOISE[k:k + 1])
            per_sample.append(model.decoder(prev, enc)[0])
        lp = torch.stack(per_sample, dim=2)                   # (B, T, 3, V)
    mix = torch.logsumexp(lp, dim=2) - math.log(3)
    torch.testing.assert_close(lp_mean, mix, atol=1e-5, rtol=1e-5)
    u = extra["uncertainty"]
    torch.testing.assert_close(u, decompose(lp, mix), atol=1e-5, rtol=1e-5)
    assert u[..., MUTUAL_INFORMATION].min() > 1e-3


def test_refuses_what_it_cannot_report():
    torch.manual_seed(0)
    model, d = s2s_tests.build_model("soft")
    # ensembles are reported (tests/test_ensemble_uncertainty.py), but only of the plugin's models
    other = torch.nn.Module()
    other.decoder = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="fairseq_acvi seq2seq models"):
        enable_uncertainty(SequenceGenerator([model, other], d, beam_size=2))
    from fairseq.sequence_scorer import SequenceScorer
    with pytest.raises(ValueError, match="score-reference"):
        enable_uncertainty(SequenceScorer(d))
