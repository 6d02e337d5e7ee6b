"""memn2n / t_memn2n (docs/method.md §4.1-4.2): encodings by hand, MC averaging, learning, CLI round trip."""
import math
import re

import pytest
import torch
import torch.nn.functional as F
from fairseq.data import Dictionary

from conftest import USER_DIR, run_cli
from fairseq_acvi.criterions.qa_cross_entropy import QACrossEntropyCriterion
from fairseq_acvi.criterions.t_divergence import TDivergenceCriterion
from fairseq_acvi.models.memn2n import (MemN2NConfig, MemN2NModel, TMemN2NConfig, TMemN2NModel,
                                        noisy_time_index, position_encoding)


def small_dict():
    d = Dictionary()
    for w in "mary john went to the kitchen garden where is".split():
        d.add_symbol(w)
    return d


def test_position_encoding_by_hand():
    # J = 3, d = 2: l_kj = (1 - j/3) - (k/2)(1 - 2j/3); j = 4 is padding -> 0
    pe = position_encoding(torch.tensor([3]), 4, 2)[0]
    hand = torch.tensor([[0.5, 1 / 3], [0.5, 2 / 3], [0.5, 1.0], [0.0, 0.0]])
    assert torch.allclose(pe, hand, atol=1e-6)
    # J = 1: l_k1 = 0 - (k/d)(1 - 2) = k/d
    assert torch.allclose(position_encoding(torch.tensor([1]), 1, 4)[0, 0],
                          torch.tensor([0.25, 0.5, 0.75, 1.0]))


def test_bag_rewrite_equals_position_weighted_sum():
    torch.manual_seed(0)
    d = small_dict()
    m = MemN2NModel(MemN2NConfig(embed_dim=6), d, 50)
    tok = torch.randint(4, len(d), (2, 3, 5))
    tok[0, 1, 3:] = d.pad()
    tok[1, 2] = d.pad()
    P_a, P_b = m.bag_weights(tok)
    A = torch.randn(len(d), 6)
    A[d.pad()] = 0
    bag = P_a @ A + torch.arange(1, 7).float() * (P_b @ A)
    direct = (F.embedding(tok, A) * position_encoding(tok.ne(d.pad()).sum(-1), 5, 6)).sum(-2)
    assert torch.allclose(bag, direct, atol=1e-5)


def test_noisy_time_index():
    torch.manual_seed(0)
    n = torch.tensor([0, 1, 7, 20, 20])
    for _ in range(50):
        t = noisy_time_index(n, 20, 0.1)
        for b, nb in enumerate(n.tolist()):
            row = t[b, :nb]
            assert (row[1:] > row[:-1]).all()                      # order kept
            assert nb == 0 or row[-1] <= nb - 1 + math.ceil(0.1 * nb)   # at most ⌈0.1 n⌉ blanks
    blanks = (noisy_time_index(n.repeat(200), 20, 0.1)[:, :20].max(1).values - 19)[3::5]
    assert blanks.min() == 0 and blanks.max() == 2               # 0..⌈0.1·20⌉ blanks occur


def batch(d):
    ids = lambda s: [d.index(w) for w in s.split()]
    story = torch.full((2, 3, 4), d.pad())
    for j, s in enumerate(["mary went to kitchen", "john went to garden"]):
        story[0, j, :4] = torch.tensor(ids(s))
    story[1, 0, :3] = torch.tensor(ids("john went garden"))
    query = torch.tensor([ids("where is mary"), ids("where is john")])
    return story, query


@pytest.mark.parametrize("tying", ["layerwise", "adjacent"])
def test_attention_extras_and_nil_padding(tying):
    torch.manual_seed(0)
    d = small_dict()
    m = MemN2NModel(MemN2NConfig(tying=tying), d, 50).eval()
    story, query = batch(d)
    lp, extra = m(story, query)
    assert lp.shape == (2, len(d)) and lp.dtype == torch.float32
    assert torch.allclose(lp.exp().sum(-1), torch.ones(2))
    attn = extra["attn"]
    assert attn.shape == (2, 3, 3)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 3))
    assert attn[1, :, 1:].abs().max() == 0                       # empty slots get no attention
    # extra padding (words and slots) changes nothing: the nil word embeds to zero
    big = torch.full((2, 5, 7), d.pad())
    big[:, :3, :4] = story
    q2 = torch.cat([query, torch.full((2, 2), d.pad())], 1)
    lp2, extra2 = m(big, q2)
    assert torch.allclose(lp, lp2, atol=1e-5)
    names = ["A", "B", "C"] if tying == "layerwise" else ["E0", "E1", "E2", "E3"]
    assert sorted(m.emb.keys()) == names


def test_attend_empty_memories_is_softmax_over_the_fixed_size_memory():
    """--empty-memories attend: the memory_size − n empty slots join the softmax with score 0
    and no content; batch padding must not matter, and a full memory equals 'mask'."""
    torch.manual_seed(0)
    d = small_dict()
    story, query = batch(d)
    size = 5
    masked = MemN2NModel(MemN2NConfig(hops=1, random_noise=0.0), d, size).eval()
    attend = MemN2NModel(MemN2NConfig(hops=1, random_noise=0.0, empty_memories="attend"),
                         d, size).eval()
    attend.load_state_dict(masked.state_dict())
    p_mask = masked(story, query)[1]["attn"][:, 0]                   # (B, M) over real slots
    lp, extra = attend(story, query)
    p_att = extra["attn"][:, 0]
    # by hand: the raw hop-1 scores s_i = u·m_i (linear-start mode returns them as "attention"),
    # weight exp(s_i) / (Σ_real exp(s_j) + size − n)
    masked.train()
    masked.linear_start = True
    scores = masked(story, query)[1]["attn"][:, 0]
    masked.eval()
    n = story.ne(d.pad()).any(-1).sum(-1)                          # (B,) = [2, 1]
    for b in range(2):
        s_b = scores[b, :n[b]]
        hand = s_b.exp() / (s_b.exp().sum() + (size - n[b]))
        assert torch.allclose(p_att[b, :n[b]], hand, atol=1e-6)
        assert torch.allclose(p_mask[b, :n[b]], torch.softmax(s_b, -1), atol=1e-6)
        assert p_att[b, n[b]:].abs().max() == 0
    # padding the batch with more empty slots changes nothing (the count is size − n)
    big = torch.full((2, 4, 6), d.pad())
    big[:, :3, :4] = story
    assert torch.allclose(attend(big, query)[0], lp, atol=1e-5)
    # a full memory (n = memory_size) is the masked softmax
    masked2 = MemN2NModel(MemN2NConfig(hops=1, random_noise=0.0), d, 2).eval()
    full = MemN2NModel(MemN2NConfig(hops=1, random_noise=0.0, empty_memories="attend"), d, 2).eval()
    full.load_state_dict(masked2.state_dict())
    one = story[:1, :2]
    assert torch.allclose(full(one, query[:1])[1]["attn"], masked2(one, query[:1])[1]["attn"],
                          atol=1e-6)


def test_t_memn2n_mc_average_is_probability_mean_of_draws():
    torch.manual_seed(0)
    d = small_dict()
    m = TMemN2NModel(TMemN2NConfig(sigma_init=0.3, mc_samples=10), d, 50).eval()
    story, query = batch(d)
    torch.manual_seed(1)
    lp = m.answer_log_probs(story, query)
    torch.manual_seed(1)
    draws = m.posterior.sample(10)                               # the same draws, in order
    probs = []
    for s in range(10):
        tables = {n: draws[s, i] for i, n in enumerate(m.names)}
        logits, _, _ = m.memory_hops(story, query, tables, 1)
        probs.append(torch.softmax(logits.float(), -1))
    assert torch.allclose(lp.exp(), torch.stack(probs).mean(0), atol=1e-5)
    assert lp.dtype == torch.float32
    # mean mode is deterministic and uses μ; S = 1 is a single (different) draw
    m.set_mc_samples(0)
    a, b = m.answer_log_probs(story, query), m.answer_log_probs(story, query)
    assert torch.equal(a, b)
    m.set_mc_samples(1)
    assert not torch.allclose(m.answer_log_probs(story, query), a)
    for bad in ("many", "mean", -1, True):                       # one type: an int, 0 = μ
        with pytest.raises(ValueError, match="mc-samples"):
            m.set_mc_samples(bad)
    m.set_mc_samples("10")                     # a checkpoint from before the int type stores "10"
    assert m.mc_samples == 10


class _Task:
    def __init__(self, n):
        self.train_size = n


def _t_memn2n_and_sample():
    """A training-mode t-MEM-NN (seed 0) on the small dictionary and a two-question sample."""
    torch.manual_seed(0)
    d = small_dict()
    m = TMemN2NModel(TMemN2NConfig(), d, 50).train()
    story, query = batch(d)
    sample = {"net_input": {"story": story, "query": query},
              "target": torch.tensor([d.index("kitchen"), d.index("garden")])}
    return d, m, story, query, sample


def test_t_divergence_criterion_scaling_and_logs():
    d, m, story, query, sample = _t_memn2n_and_sample()
    crit = TDivergenceCriterion(_Task(900), "seed")
    torch.manual_seed(3)
    loss, n, log = crit(m, sample)
    torch.manual_seed(3)
    nll = F.nll_loss(m(story, query)[0], sample["target"], reduction="sum")
    div = m.posterior.divergence(10.0, "seed")
    assert n == 2
    assert loss.item() == pytest.approx(nll.item() + 2 / 900 * div.item(), rel=1e-5)
    loss.backward()
    assert m.posterior.log_nu.grad.abs().min() > 0
    assert {"nu_A", "nu_B", "nu_C", "divergence", "ncorrect"} <= set(log)
    # logged per question: the unweighted divergence and ν (from the fused draw's slot)
    assert log["divergence"] / n == pytest.approx(div.item(), rel=1e-5)
    assert log["loss"] == pytest.approx(loss.item(), rel=1e-5)
    for name, nu in m.nu_values().items():
        assert log[f"nu_{name}"] / n == pytest.approx(nu, rel=1e-6)
    with pytest.raises(ValueError, match="Student-t"):
        TDivergenceCriterion(_Task(900))(MemN2NModel(MemN2NConfig(), d, 50), sample)
    # --divergence-weight β scales the divergence term only
    torch.manual_seed(3)
    loss_b, _, _ = TDivergenceCriterion(_Task(900), "seed", divergence_weight=0.1)(m, sample)
    assert loss_b.item() == pytest.approx(nll.item() + 0.1 * 2 / 900 * div.item(), rel=1e-5)
    with pytest.raises(ValueError, match="divergence-weight"):
        TDivergenceCriterion(_Task(900), "seed", divergence_weight=-1.0)


def test_t_divergence_criterion_warns_once_when_seed_collapses_nu(caplog):
    """Under --t-divergence seed a ν below 0.01 in training is the (D 56) collapse: one warning
    naming the matrix and the remedy; none for healthy ν, for tied / exact, or in evaluation."""
    _, m, _, _, sample = _t_memn2n_and_sample()
    crit = TDivergenceCriterion(_Task(900), "seed")
    with caplog.at_level("WARNING", logger="fairseq_acvi.criterions.t_divergence"):
        crit(m, sample)
        assert not caplog.records                         # ν = 100 at initialisation
        with torch.no_grad():
            m.posterior.log_nu[1] = math.log(0.002)
        m.eval()
        crit(m, sample)
        TDivergenceCriterion(_Task(900), "tied")(m.train(), sample)
        assert not caplog.records                         # evaluation, and tied, say nothing
        crit(m, sample)
        crit(m, sample)
    assert len(caplog.records) == 1, caplog.records
    msg = caplog.records[0].getMessage()
    assert "nu_B = 0.00" in msg and "--t-divergence tied or exact" in msg


@pytest.mark.parametrize("arch", ["memn2n", "t_memn2n_polar", "t_memn2n_gamma"])
def test_memn2n_learns_babi_task1(shared_data, arch):
    """Task 1 (en, 900 train) to >= 95% test accuracy: 12 epochs of Adam, about 400 updates.
    t_memn2n_<sampler>: t-MEM-NN with that escort sampler (the criterion's fused draw +
    divergence node), ``tied`` divergence, β = 0.001, evaluated with S = 10 draws."""
    from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    task = BabiQATask.setup_task(BabiQAConfig(data=str(folder), babi_tasks="1"))
    for split in ("train", "test"):
        task.load_dataset(split)
    torch.manual_seed(1)
    if arch == "memn2n":
        model = MemN2NModel.build_model(MemN2NConfig(), task)
        crit = QACrossEntropyCriterion(task)
    else:
        sampler = arch.split("_")[-1]
        model = TMemN2NModel.build_model(TMemN2NConfig(escort_sampler=sampler), task)
        assert model.posterior.sampler == sampler
        crit = TDivergenceCriterion(task, "tied", 0.001)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    tr = task.datasets["train"]
    for epoch in range(12):
        for idx in torch.randperm(len(tr)).tensor_split(32):
            loss, n, _ = crit(model, tr.batch(idx))
            opt.zero_grad()
            (loss / n).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 40.0)
            opt.step()
    model.eval()
    te = task.datasets["test"]
    with torch.no_grad():
        s = te.batch(torch.arange(len(te)))
        acc = (model(**s["net_input"])[0].argmax(-1) == s["target"]).float().mean().item()
    assert acc >= 0.95, acc


def _accuracy(output: str) -> float:
    m = re.findall(r"valid on 'test' subset \| .*?accuracy ([0-9.]+)", output)
    assert m, output[-3000:]
    return float(m[-1])


@pytest.mark.parametrize("arch,criterion", [("memn2n", ["--criterion", "qa_cross_entropy"]),
                                            ("t_memn2n", ["--criterion", "t_divergence",
                                                          "--t-divergence", "exact"])])
def test_cli_train_then_validate_on_test(tmp_path, shared_data, arch, criterion):
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    save = tmp_path / "ck"
    run_cli("fairseq_cli.train", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
            "--babi-tasks", "1", "--arch", arch, *criterion, "--optimizer", "adam", "--lr", "0.01",
            "--clip-norm", "40", "--batch-size", "29", "--required-batch-size-multiple", "1",
            "--max-epoch", "2", "--save-dir", save, "--no-epoch-checkpoints", "--num-workers", "0",
            "--seed", "1", "--cpu", "--log-format", "simple")
    ck = save / "checkpoint_last.pt"
    assert ck.exists()
    extra = ["--model-overrides", "{'mc_samples': '0'}"] if arch == "t_memn2n" else []
    res = run_cli("fairseq_cli.validate", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
                  "--babi-tasks", "1", "--path", ck, "--valid-subset", "test", "--batch-size", "250",
                  "--cpu", *extra)
    acc_cli = _accuracy(res.stdout + res.stderr)
    # the same checkpoint evaluated in-process (weights-only load) gives the same accuracy
    from fairseq import checkpoint_utils
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(ck)])
    model = models[0].eval()
    if arch == "t_memn2n":
        model.set_mc_samples(0)
        assert {"nu_A", "nu_B", "nu_C"} <= set(re.findall(r"(nu_[ABC])", res.stdout + res.stderr))
    task.load_dataset("test")
    te = task.datasets["test"]
    with torch.no_grad():
        s = te.batch(torch.arange(len(te)))
        acc = 100 * (model(**s["net_input"])[0].argmax(-1) == s["target"]).float().mean().item()
    assert acc_cli == pytest.approx(acc, abs=0.06)
    assert acc_cli > 20.0          # 2 epochs already beat the 1-in-6 guess on task 1


def test_empty_story_gives_finite_answer(tmp_path):
    """A question with no statement before it (the first round of a game) is valid input."""
    from fairseq_acvi.tasks.babi_qa import BabiQAConfig, BabiQATask
    folder = tmp_path / "g"
    folder.mkdir()
    text = "1 What is your guess?\t5\t\n2 The number is larger.\n3 What is your guess?\t7\t2\n"
    (folder / "qa1_guess_train.txt").write_text(text * 5)
    (folder / "qa1_guess_test.txt").write_text(text)
    task = BabiQATask.setup_task(BabiQAConfig(data=str(folder), babi_tasks="1"))
    for cls, cfg in ((MemN2NModel, MemN2NConfig()), (TMemN2NModel, TMemN2NConfig())):
        model = cls.build_model(cfg, task)
        net = task.build_net_input([[], ["The number is larger."]], ["What is your guess?"] * 2)
        for mode in (model.train, model.eval):
            mode()
            lp = model.answer_log_probs(**net)
            assert lp.shape == (2, len(task.target_dictionary)) and torch.isfinite(lp).all()
        task.load_dataset("train")
        s = task.datasets["train"].collater(list(range(len(task.datasets["train"]))))
        assert torch.isfinite(model(**s["net_input"])[0]).all()
    assert task.target_dictionary[task.target_dictionary.index("7")] == "7"


@pytest.mark.parametrize("arch,criterion", [("memn2n", "qa_cross_entropy"),
                                            ("t_memn2n", "t_divergence")])
def test_cli_trains_with_memory_efficient_fp16(shared_data, arch, criterion):
    """Half-precision parameters (--memory-efficient-fp16, the fp16 path that runs on CPU):
    training runs, fairseq's loss scaler is active, and task 1 validation accuracy rises from
    the first to the third epoch. (Both models failed here before: a float32 position-encoding
    factor turned the half activations into float32, and the Gamma draw has no CPU half kernel;
    t-MEM-NN's draws and divergence are now computed in float32.)"""
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    res = run_cli("fairseq_cli.train", folder, "--user-dir", USER_DIR, "--task", "babi_qa",
                  "--babi-tasks", "1", "--arch", arch, "--criterion", criterion,
                  "--optimizer", "adam", "--lr", "0.01", "--batch-size", "29",
                  "--required-batch-size-multiple", "1", "--max-epoch", "3", "--no-save",
                  "--num-workers", "0", "--seed", "1", "--cpu", "--memory-efficient-fp16",
                  "--log-format", "simple")
    out = res.stdout + res.stderr
    acc = [float(a) for a in re.findall(r"valid on 'valid' subset \| .*?accuracy ([0-9.]+)", out)]
    assert len(acc) == 3, out[-3000:]
    assert re.search(r"loss_scale [0-9.]+", out), out[-3000:]
    assert acc[-1] > acc[0] and acc[-1] >= 40.0, acc
