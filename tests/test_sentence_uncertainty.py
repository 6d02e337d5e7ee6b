"""Sentence-level uncertainty scores (generation/sentence_scores.py; docs/uncertainty.md §7) and
the new lines of ``fairseq_acvi.cli.generate`` (``--mc-dropout``, ensembles, ``US-``) through the
real CLIs."""
import math

import pytest
import torch

from conftest import USER_DIR, run_cli
from fairseq_acvi.generation.sentence_scores import SCORES, sentence_scores
from fairseq_acvi.generation.uncertainty_measures import main as measures
from test_translation_cli import data_bin, train  # noqa: F401  (fixture)


def test_scores_of_a_hand_made_hypothesis():
    # three tokens (the last one </s>): rows H[p̄], E H, I in nats, and log p̄(y_l)
    u = torch.tensor([[1.0, 0.9, 0.1],
                      [2.0, 1.4, 0.6],
                      [0.3, 0.3, 0.0]])
    lp = torch.tensor([-0.5, -2.0, -0.1])
    s = sentence_scores(u, lp)
    assert list(s) == list(SCORES)
    assert s["mean_mi"] == pytest.approx(0.7 / 3)
    assert s["max_mi"] == pytest.approx(0.6)
    assert s["entropy"] == pytest.approx(3.3 / 3)
    assert s["logprob"] == pytest.approx(-2.6 / 3)
    # the members' column of an ensemble's rows is ignored
    assert sentence_scores(torch.cat([u, torch.ones(3, 1)], 1), lp) == s
    with pytest.raises(ValueError, match="one score"):
        sentence_scores(u, lp[:2])
    with pytest.raises(ValueError, match="one row"):
        sentence_scores(u[:, :2], lp)


@pytest.fixture(scope="module")
def soft_checkpoint(data_bin, tmp_path_factory):  # noqa: F811
    save = tmp_path_factory.mktemp("soft")
    train(data_bin, save, "--context-inference", "soft", "--dropout", "0.3", updates=8)
    return save / "checkpoint_last.pt"


GEN = ["--beam", "3", "--batch-size", "5", "--gen-subset", "test", "--seed", "3"]


def _values(line):
    return [float(x) for x in line.split("\t")[1].split()]


def _by_prefix(text):
    """{prefix: [lines]} for the per-hypothesis lines, in order."""
    out = {}
    for line in text.splitlines():
        head = line.split("\t", 1)[0]
        if "-" in head and head.split("-", 1)[1].isdigit():
            out.setdefault(head.split("-", 1)[0], []).append(line)
    return out


def test_mc_dropout_ensembles_and_sentence_lines(data_bin, soft_checkpoint, tmp_path):  # noqa: F811
    plain = _by_prefix(run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR,
                               "--path", soft_checkpoint, *GEN).stdout)
    outputs = {}
    # dropout 0: the plain model's hypotheses; no mutual information at all
    outputs["zero"] = run_cli("fairseq_acvi.cli.generate", data_bin, "--path", soft_checkpoint,
                              *GEN, "--mc-dropout", "3", "--mc-dropout-rate", "0",
                              "--print-uncertainty", "all", "--print-sentence-uncertainty")
    zero = _by_prefix(outputs["zero"].stdout)
    assert [h.split("\t")[2] for h in zero["H"]] == [h.split("\t")[2] for h in plain["H"]]
    assert len(zero["U"]) == len(zero["UM"]) == len(zero["US"]) == len(zero["P"]) == 12
    assert all(v == 0 for line in zero["U"] + zero["UM"] for v in _values(line))
    for h, p, uh, us in zip(zero["H"], zero["P"], zero["UH"], zero["US"]):
        sid = h.split("\t")[0][2:]
        assert us.startswith(f"US-{sid}\t")
        s = dict(kv.split("=") for kv in us.split("\t")[1].split())
        assert list(s) == list(SCORES)
        probs, ents = _values(p), _values(uh)
        assert float(s["mean_mi"]) == float(s["max_mi"]) == 0
        assert float(s["logprob"]) == pytest.approx(sum(probs) / len(probs), abs=1e-3)
        assert float(s["logprob"]) == pytest.approx(float(h.split("\t")[1]), abs=1e-3)  # H- score
        assert float(s["entropy"]) == pytest.approx(sum(ents) / len(ents), abs=1e-3)
    # dropout at the training rate: the chains disagree
    outputs["mc"] = run_cli("fairseq_acvi.cli.generate", data_bin, "--path", soft_checkpoint,
                            *GEN, "--mc-dropout", "3", "--print-uncertainty",
                            "--print-sentence-uncertainty")
    mc = _by_prefix(outputs["mc"].stdout)
    assert "UH" not in mc and len(mc["UM"]) == len(mc["U"]) == 12
    um = [v for line in mc["UM"] for v in _values(line)]
    assert min(um) >= 0 and max(um) > 0
    assert [_values(a) for a in mc["U"]] == [_values(b) for b in mc["UM"]]  # soft: all members'
    # an ensemble of one checkpoint twice: identical members, zero mutual information
    outputs["ens"] = run_cli("fairseq_acvi.cli.generate", data_bin, "--path",
                             f"{soft_checkpoint}:{soft_checkpoint}", *GEN,
                             "--print-uncertainty", "--print-sentence-uncertainty")
    ens = _by_prefix(outputs["ens"].stdout)
    assert [h.split("\t")[2] for h in ens["H"]] == [h.split("\t")[2] for h in plain["H"]]
    assert len(ens["UM"]) == 12
    assert all(v == 0 for line in ens["U"] + ens["UM"] for v in _values(line))
    # the study's measures read these outputs as the recipe keeps them (stdout and the log, where
    # fairseq's "Translated ... in Xs" line is), each set against itself as the "out-of-domain"
    # one: every AUROC is exactly 1/2
    files = []
    for name, res in outputs.items():
        (tmp_path / f"{name}.txt").write_text(res.stdout + res.stderr)
        files += ["--decoded", f"{name}={tmp_path / name}.txt",
                  "--ood", f"{name}={tmp_path / name}.txt"]
    rep = measures(files + ["--references", str(data_bin.parent / "test.tgt"), "--bootstrap", "50",
                            "--out-dir", str(tmp_path / "measures")])
    qe = rep["quality_estimation"]
    assert qe["sentences"] == 12 and qe["quality"]["zero"] == qe["quality"]["ens"]
    assert 0 < qe["quality"]["zero"]["chrf"] <= 100
    for k in SCORES:
        for m in outputs:
            value = rep["ood_detection"][k][m]["value"]
            if m != "mc" and k.endswith("_mi"):        # I = 0 for every sentence: no AUROC
                assert math.isnan(value)
            else:
                assert value == 0.5
    assert all(rep["cost"][m]["sentences"] == 12 and rep["cost"][m]["seconds"] >= 0
               for m in outputs)


def test_bad_mc_dropout_options_are_named(data_bin, soft_checkpoint):  # noqa: F811
    from fairseq_acvi.cli.generate import cli_main
    for extra, msg in ((["--mc-dropout", "0"], "--mc-dropout must be"),
                       (["--mc-dropout-rate", "0.1"], "--mc-dropout-rate needs --mc-dropout"),
                       (["--mc-dropout", "2", "--mc-dropout-rate", "1.5"], "--mc-dropout-rate")):
        with pytest.raises(ValueError, match=msg):        # before any model is loaded
            cli_main([str(data_bin), "--path", str(soft_checkpoint), *GEN, *extra])
