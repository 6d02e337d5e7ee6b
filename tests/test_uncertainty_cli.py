"""``python -m fairseq_acvi.cli.generate --print-uncertainty``: fairseq-generate's output plus the
``U-`` / ``UH-`` lines, through the real CLIs; and the calibration command (docs/uncertainty.md)."""
import json
import math

import pytest

from conftest import USER_DIR, run_cli
from test_translation_cli import data_bin, train  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def acvi_checkpoint(data_bin, tmp_path_factory):  # noqa: F811
    save = tmp_path_factory.mktemp("acvi")
    train(data_bin, save, "--context-inference", "acvi", "--acvi-logvar-init", "0", updates=8)
    return save / "checkpoint_last.pt"


GEN = ["--beam", "3", "--nbest", "2", "--batch-size", "5", "--gen-subset", "test",
       "--model-overrides", "{'mc_samples': 4}"]


@pytest.fixture(scope="module")
def plain(data_bin, acvi_checkpoint):  # noqa: F811
    """fairseq-generate's own output."""
    return run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR, "--path",
                   acvi_checkpoint, *GEN).stdout


def _lines(text, prefix):
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_u_lines_follow_every_hypothesis(data_bin, acvi_checkpoint, plain):  # noqa: F811
    res = run_cli("fairseq_acvi.cli.generate", data_bin, "--user-dir", USER_DIR, "--path",
                  acvi_checkpoint, *GEN, "--print-uncertainty", "all").stdout
    # everything fairseq-generate prints is there, unchanged and in order (same seed, same search)
    assert [ln for ln in res.splitlines() if not ln.startswith("U")] == plain.splitlines()
    lines = res.splitlines()
    p_lines = [i for i, ln in enumerate(lines) if ln.startswith("P-")]
    assert len(p_lines) == 12 * 2                                  # 12 sentences, nbest 2
    for i in p_lines:
        sid = lines[i].split("\t")[0][2:]
        h = lines[i - 2]                                           # H-<id> score text
        assert h.startswith(f"H-{sid}\t")
        n_tokens = len(h.split("\t")[2].split()) + 1               # + </s>
        p_vals = lines[i].split("\t")[1].split()
        u, uh = lines[i + 1], lines[i + 2]
        assert u.startswith(f"U-{sid}\t") and uh.startswith(f"UH-{sid}\t")
        mi = [float(x) for x in u.split("\t")[1].split()]
        ent = [float(x) for x in uh.split("\t")[1].split()]
        assert len(mi) == len(ent) == len(p_vals) == n_tokens
        assert all(0 <= a <= b + 1e-4 for a, b in zip(mi, ent))
        assert all(b <= math.log2(20) + 1e-3 for b in ent)        # ≤ log2 of the vocabulary
    assert any(float(x) > 0 for i in p_lines for x in lines[i + 1].split("\t")[1].split())


def test_without_the_option_the_output_is_fairseq_generates(data_bin, acvi_checkpoint, plain):  # noqa: F811
    ours = run_cli("fairseq_acvi.cli.generate", data_bin, "--user-dir", USER_DIR, "--path",
                   acvi_checkpoint, *GEN).stdout
    assert ours == plain and not _lines(ours, "U")


def test_results_path_gets_the_lines_too(data_bin, acvi_checkpoint, tmp_path):  # noqa: F811
    run_cli("fairseq_acvi.cli.generate", data_bin, "--user-dir", USER_DIR, "--path",
            acvi_checkpoint, *GEN, "--print-uncertainty", "--results-path", tmp_path)
    text = (tmp_path / "generate-test.txt").read_text()
    assert len(_lines(text, "U-")) == len(_lines(text, "P-")) == 24
    assert not _lines(text, "UH-")


def test_calibration_command_reports_ece_and_auroc(data_bin, acvi_checkpoint, tmp_path):  # noqa: F811
    out = tmp_path / "cal"
    run_cli("fairseq_acvi.cli.calibration", "--data", data_bin, "--subset", "valid",
            "--model", f"acvi={acvi_checkpoint}", "--model", f"again={acvi_checkpoint}",
            "--mc-samples", "4", "--batch-size", "7", "--bootstrap", "50", "--out-dir", out)
    rep = json.loads((out / "calibration.json").read_text())
    acvi = rep["models"]["acvi"]
    assert acvi["tokens"] == sum(b["count"] for b in acvi["bins"]) > 30 * 4
    assert 0 <= acvi["ece"] <= 1 and 0 <= acvi["auroc_wrong"]["mutual_information"] <= 1
    assert acvi["averages_samples"] and acvi["samples"] == 4
    again = rep["models"]["again"]
    assert again["ece"] == acvi["ece"]                            # each model starts from --seed
    assert again["ece_minus_first"] == {"value": 0.0, "interval_95": [0.0, 0.0]}
    assert 0 <= acvi["auroc_wrong"]["mutual_information_within_entropy_deciles"] <= 1
    assert (out / "reliability.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "mutual_information.png").read_bytes()[:4] == b"\x89PNG"
    md = (out / "calibration.md").read_text()
    assert "| acvi | 4 |" in md and f"{acvi['ece']:.4f}" in md


def test_calibration_of_ensembles_and_mc_dropout(data_bin, acvi_checkpoint, tmp_path):  # noqa: F811
    """``--model NAME=a:b`` is an ensemble, ``--mc-dropout NAME=K`` K dropout chains (K = 0
    context samples here: ACVI's mean context, one distribution per member)."""
    out = tmp_path / "cal"
    ckpt = str(acvi_checkpoint)
    run_cli("fairseq_acvi.cli.calibration", "--data", data_bin, "--subset", "valid",
            "--model", f"one={ckpt}", "--model", f"twice={ckpt}:{ckpt}", "--model", f"mc={ckpt}",
            "--mc-dropout", "mc=3", "--mc-samples", "0", "--batch-size", "7", "--bootstrap", "20",
            "--out-dir", out, "--save-tokens")
    rep = json.loads((out / "calibration.json").read_text())["models"]
    one, twice, mc = rep["one"], rep["twice"], rep["mc"]
    assert (one["samples"], twice["samples"], mc["samples"]) == (1, 2, 3)
    # identical members: the same predictions, bit for bit, and no mutual information
    assert twice["ece"] == one["ece"] and twice["accuracy"] == one["accuracy"]
    assert not twice["averages_samples"] and twice["auroc_wrong"]["mutual_information"] is None
    # the dropout chains disagree: all of I is theirs (one distribution per chain)
    assert mc["averages_samples"] and mc["ece"] != one["ece"]
    assert mc["auroc_wrong"]["members_mutual_information"] == mc["auroc_wrong"]["mutual_information"]
    import numpy as np
    with np.load(out / "tokens_mc.npz") as z:
        assert np.array_equal(z["members_mutual_information"], z["mutual_information"])
        assert z["mutual_information"].max() > 0
    with np.load(out / "tokens_twice.npz") as z:
        assert not z["members_mutual_information"].any()
