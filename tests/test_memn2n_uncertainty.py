"""t-MEM-NN's per-question uncertainty from its S posterior draws, and what the criteria log
(docs/uncertainty.md; docs/method.md §4.2)."""
import math

import pytest
import torch

from fairseq_acvi.criterions.qa_cross_entropy import QACrossEntropyCriterion
from fairseq_acvi.criterions.t_divergence import TDivergenceCriterion
from fairseq_acvi.models.memn2n import MemN2NConfig, MemN2NModel, TMemN2NConfig, TMemN2NModel
from fairseq_acvi.mc_prediction.uncertainty import decompose
from test_memn2n import batch, small_dict


def _model(sigma=0.5, samples=6):
    torch.manual_seed(0)
    d = small_dict()
    m = TMemN2NModel(TMemN2NConfig(init_std=0.5, sigma_init=sigma, mc_samples=samples), d, 50)
    return m.eval(), d


def test_uncertainty_is_the_decomposition_of_the_draws(monkeypatch):
    m, d = _model()
    story, query = batch(d)
    draws = m.posterior.sample(6).detach()                        # (S, n, V, d) fixed
    monkeypatch.setattr(m.posterior, "sample", lambda s=None: draws)
    with torch.no_grad():
        lp, extra = m(story, query)
        tables = dict(zip(m.names, draws.unbind(1)))
        logits, _, _ = m.memory_hops(story, query, tables, 6)
    per_draw = torch.log_softmax(logits, -1).view(6, 2, -1).transpose(0, 1)      # (B, S, V)
    mix = torch.logsumexp(per_draw, 1) - math.log(6)
    torch.testing.assert_close(lp, mix)
    u = extra["uncertainty"]
    assert u.shape == (2, 3)
    torch.testing.assert_close(u, decompose(per_draw, mix), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(u[:, 0], -(lp.exp() * lp).sum(-1), atol=1e-5, rtol=1e-5)
    assert torch.all(u[:, 2] > 1e-3)                               # distinct draws disagree


def test_no_mutual_information_without_posterior_noise():
    m, d = _model()
    story, query = batch(d)
    with torch.no_grad():
        m.set_mc_samples(0)
        mean = m(story, query)[1]["uncertainty"]
        m.set_mc_samples(6)
        m.posterior.rho.fill_(-30.0)                               # σ = softplus(−30) + 1e-6
        quiet = m(story, query)[1]["uncertainty"]
        plain = MemN2NModel(MemN2NConfig(), d, 50).eval()(story, query)[1]["uncertainty"]
    assert torch.all(mean[:, 2] == 0) and torch.equal(mean[:, 0], mean[:, 1])
    assert torch.all(plain[:, 2] == 0)
    assert torch.all(quiet[:, 2] < 1e-6)
    assert torch.all(quiet[:, 0] >= quiet[:, 1])


def test_training_forward_reports_nothing():
    m, d = _model()
    m.train()
    assert "uncertainty" not in m(*batch(d))[1]


@pytest.mark.parametrize("crit", ["qa_cross_entropy", "t_divergence"])
def test_criteria_log_means_over_right_and_wrong_answers(crit, monkeypatch):
    from fairseq import metrics
    m, d = _model()
    story, query = batch(d)
    target = torch.tensor([d.index("kitchen"), d.index("garden")])
    sample = {"net_input": {"story": story, "query": query}, "target": target}
    torch.manual_seed(5)
    with torch.no_grad():
        lp, extra = m(story, query)
    u = extra["uncertainty"]
    # make one answer right and one wrong whatever the untrained model says
    target = torch.stack([lp[0].argmax(), (lp[1].argmax() + 1) % len(d)])
    sample["target"] = target
    right = torch.tensor([True, False])
    task = type("T", (), {"train_size": 900})()
    criterion = (QACrossEntropyCriterion(task) if crit == "qa_cross_entropy"
                 else TDivergenceCriterion(task, "seed"))
    torch.manual_seed(5)
    with torch.no_grad():
        _, _, log = criterion(m, sample)
    for name, col in (("H", 0), ("EH", 1), ("MI", 2)):
        assert log[f"{name}_right"] == pytest.approx(u[right, col].sum().item(), rel=1e-6)
        assert log[f"{name}_wrong"] == pytest.approx(u[~right, col].sum().item(), rel=1e-6)
    # reduced over two logging outputs: means per question over right and wrong answers
    with metrics.aggregate() as agg:
        type(criterion).reduce_metrics([log, log])
        vals = agg.get_smoothed_values()
    assert vals["MI_right"] == pytest.approx(u[0, 2].item(), abs=1e-4)
    assert vals["MI_wrong"] == pytest.approx(u[1, 2].item(), abs=1e-4)
    assert vals["H_wrong"] >= vals["EH_wrong"]
    # training logs no uncertainty
    m.train()
    assert "MI_right" not in criterion(m, sample)[2]
