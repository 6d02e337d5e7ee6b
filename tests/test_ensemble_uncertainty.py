"""The uncertainty of a prediction that averages members: fairseq's ensembles (``--path a:b``) and
their combination with ACVI's K context samples (mc_prediction/uncertainty.py ``combine_members``,
generation/uncertainty.py ``UncertaintyEnsemble``; docs/uncertainty.md §6)."""
import copy
import math

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

import test_seq2seq_model as s2s_tests
from fairseq_acvi.generation.uncertainty import enable_uncertainty
from fairseq_acvi.modules.seq2seq.mc_dropout import wrap_mc_dropout
from fairseq_acvi.mc_prediction.combination import average_members, combine_samples
from fairseq_acvi.mc_prediction.uncertainty import (EXPECTED_ENTROPY, MEMBERS_MUTUAL_INFORMATION,
                                              MUTUAL_INFORMATION, combine_members, decompose)
from test_uncertainty_generation import NOISE, SHARP, fix_noise


def _members(variant, n, same=False, **kw):
    torch.manual_seed(0)
    first, d = s2s_tests.build_model(variant, **SHARP, **kw)
    models = [first]
    for i in range(n - 1):
        if same:
            models.append(copy.deepcopy(first))
        else:
            torch.manual_seed(i + 1)
            models.append(s2s_tests.build_model(variant, dictionary=d, **SHARP, **kw)[0])
    for m in models:
        m.eval()
    return models, d


def _sample(d):
    src, lengths, _ = s2s_tests._batch(d)
    return {"id": torch.tensor([4, 5, 6]), "net_input": {"src_tokens": src, "src_lengths": lengths}}


def _generate(models, d, sample, beam=3):
    gen = SequenceGenerator(models, d, beam_size=beam, max_len_a=0, max_len_b=7, min_len=1)
    with torch.no_grad():
        return gen.generate(models, sample)


def test_average_of_members_by_hand():
    p1, p2 = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.9, 0.05, 0.05])
    lp = torch.stack([p1, p2]).log()                                        # (M = 2, V)
    assert torch.allclose(average_members(lp).exp(), torch.tensor([0.7, 0.275, 0.025]))
    same = torch.log_softmax(torch.randn(4, 3, 11), -1)[:, :1].expand(4, 5, 11)
    assert torch.equal(average_members(same), same[:, 0])                   # bit for bit
    assert average_members(torch.full((2, 3), -math.inf)).eq(-math.inf).all()


def test_members_times_samples_is_the_decomposition_of_all_of_them():
    """M members of S samples each: combine_members of the members' own numbers equals decompose
    over the M·S distributions with the average (1/M) Σ_m (1/S) Σ_s p_ms."""
    torch.manual_seed(0)
    M, S, V = 3, 4, 9
    lp = torch.log_softmax(2 * torch.randn(5, M, S, V), -1)
    member = combine_samples(lp.flatten(0, 1), None, "prob").view(5, M, V)   # log p̄_m
    own = decompose(lp, member)                                              # (5, M, 3)
    total = average_members(member)
    flat = lp.view(5, M * S, V)
    torch.testing.assert_close(total, combine_samples(flat, None, "prob"), atol=1e-6, rtol=0)
    u = combine_members(member, total, own)
    ref = decompose(flat, total)
    torch.testing.assert_close(u[..., :3], ref, atol=1e-5, rtol=1e-5)
    between = decompose(member, total)[..., MUTUAL_INFORMATION]
    torch.testing.assert_close(u[..., MEMBERS_MUTUAL_INFORMATION], between)
    assert torch.all(u[..., MUTUAL_INFORMATION] >= u[..., MEMBERS_MUTUAL_INFORMATION])
    # members that average members of their own (MC dropout inside an ensemble): nested the same
    inner = torch.cat([own, torch.full((5, M, 1), 0.25)], -1)
    nested = combine_members(member, total, inner)
    torch.testing.assert_close(nested[..., MEMBERS_MUTUAL_INFORMATION], between + 0.25)


def test_identical_members_have_zero_mutual_information():
    models, d = _members("soft", 3, same=True)
    sample = _sample(d)
    single = _generate(models[:1], d, sample)
    gen = enable_uncertainty(SequenceGenerator(models, d, beam_size=3, max_len_a=0, max_len_b=7,
                                               min_len=1))
    with torch.no_grad():
        hypos = gen.generate(models, sample)
    for hs, ps in zip(hypos, single):
        for h, p in zip(hs, ps):
            assert torch.equal(h["tokens"], p["tokens"])
            assert torch.all(h["members_mi"] == 0)
            assert torch.all(h["uncertainty"][:, MUTUAL_INFORMATION] == 0)
            assert h["uncertainty"][:, 0].min() > 0                          # entropy is not
    assert not any(m.decoder.record_uncertainty for m in models)
    assert not gen.model.record_uncertainty and gen.model.uncertainty_path is None


def _teacher_forced(model, enc, tokens, d):
    """(log p̄ (T, V), uncertainty (T, 3)) of one member along ``tokens`` (ending in </s>)."""
    prev = torch.cat([torch.tensor([d.eos()]), tokens[:-1]])[None]
    model.decoder.record_uncertainty = True
    try:
        lp, extra = model.decoder(prev, enc)
    finally:
        model.decoder.record_uncertainty = False
    return lp[0], extra["uncertainty"][0]


@pytest.mark.parametrize("variant", ["soft", "acvi"])
def test_each_hypothesis_reports_the_members_along_its_own_path(variant, monkeypatch):
    """Different members: the recorded rows of every hypothesis equal combine_members of the
    members' teacher-forced distributions along its tokens (ACVI: K = 3 samples each, the same ε
    for every row and step), and the members disagree (I_members > 0)."""
    fix_noise(monkeypatch, NOISE)
    kw = dict(mc_samples=3) if variant == "acvi" else {}
    models, d = _members(variant, 2, **kw)
    sample = _sample(d)
    gen = enable_uncertainty(SequenceGenerator(models, d, beam_size=3, max_len_a=0, max_len_b=7,
                                               min_len=1))
    plain = _generate(models, d, sample)
    with torch.no_grad():
        hypos = gen.generate(models, sample)
        src, lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
        n = 0
        for i, (hs, ps) in enumerate(zip(hypos, plain)):
            encs = [m.encoder(src[i:i + 1, :lengths[i]], lengths[i:i + 1]) for m in models]
            for h, p in zip(hs, ps):
                assert torch.equal(h["tokens"], p["tokens"]) and h["score"] == p["score"]
                per = [_teacher_forced(m, e, h["tokens"], d) for m, e in zip(models, encs)]
                lp = torch.stack([a for a, _ in per], dim=-2)                # (T, M, V)
                u = combine_members(lp, average_members(lp), torch.stack([b for _, b in per], -2))
                torch.testing.assert_close(h["uncertainty"], u[:, :3], atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(h["members_mi"], u[:, MEMBERS_MUTUAL_INFORMATION],
                                           atol=1e-5, rtol=1e-5)
                assert h["members_mi"].max() > 1e-3
                if variant == "acvi":                    # the samples add to the members' part
                    assert torch.all(h["uncertainty"][:, MUTUAL_INFORMATION]
                                     > h["members_mi"])
                n += 1
    assert n == 9


def test_an_ensemble_of_mc_dropout_members():
    """Two checkpoints, each with 3 dropout chains: 6 distributions a step; the members' part
    holds both the checkpoints' and the chains' disagreement."""
    models, d = _members("soft", 2, dropout=0.3)
    wrapped = [wrap_mc_dropout(m, 3) for m in models]
    gen = enable_uncertainty(SequenceGenerator(wrapped, d, beam_size=2, max_len_a=0, max_len_b=5,
                                               min_len=1))
    torch.manual_seed(0)
    with torch.no_grad():
        hypos = gen.generate(wrapped, _sample(d))
    for hs in hypos:
        for h in hs:
            torch.testing.assert_close(h["members_mi"], h["uncertainty"][:, MUTUAL_INFORMATION])
            assert h["members_mi"].min() > 0
            assert torch.all(h["uncertainty"][:, 0] >= h["uncertainty"][:, EXPECTED_ENTROPY])
