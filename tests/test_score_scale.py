"""fairseq_acvi.metrics.score_scale: closed-form cases, pooling, and the two Jacobian regimes its
docstring states."""
import math

import pytest
import torch

from fairseq_acvi.metrics.score_scale import flatten_rows, row_statistics, summarize

entmax = pytest.importorskip("entmax")


def test_closed_forms():
    scores = torch.tensor([[0.0, 0.0, 0.0, 9.0],     # uniform over 3 real words, 1 padding
                           [3.0, 0.0, -1.0, 0.0]])   # gap 3 > 1: sparsemax puts all on word 0
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    s = row_statistics(scores, pad)
    assert s["score_std"].tolist() == pytest.approx([0.0, 1.5])   # mean 0.5, squares 9 / 4
    assert s["top_gap"].tolist() == pytest.approx([0.0, 3.0])
    assert s["sparsemax_support"].tolist() == [3.0, 1.0]
    assert s["sparsemax_zero_fraction"].tolist() == pytest.approx([0.0, 0.75])
    assert s["softmax_entropy"][0].item() == pytest.approx(math.log(3))
    assert s["softmax_max"][0].item() == pytest.approx(1 / 3)
    e = torch.tensor([3.0, 0.0, -1.0, 0.0]).exp()
    assert s["softmax_max"][1].item() == pytest.approx((e[0] / e.sum()).item())
    left = torch.tensor([[True, False, False, False]])      # left padding: the last real is 3
    assert row_statistics(torch.tensor([[0.0, 0.0, 0.0, 2.0]]), left)["top_is_last"].tolist() == [1.0]
    assert s["top_is_last"].tolist() == [0.0, 0.0]


def test_summary_pools_three_dimensional_scores():
    scores = torch.tensor([[[0.0, 0.0, 5.0], [4.0, 0.0, 0.0]]])    # (B=1, T=2, N=3), last pads
    pad = torch.tensor([[False, False, True]])
    rows, mask = flatten_rows(scores, pad)
    assert rows.shape == (2, 3) and mask.tolist() == [[False, False, True]] * 2
    out = summarize([(scores, pad)])
    assert out["rows"] == 2
    assert out["support1_fraction"] == 0.5                      # row 2: gap 4 -> one word
    assert out["sparsemax_support_mean"] == pytest.approx(1.5)


def test_the_jacobian_claims():
    """Support of one word: sparsemax passes no gradient to the scores; uniform scores: its
    gradient is N times softmax's (the docstring's two regimes)."""
    from entmax import entmax15, sparsemax
    N = 5
    g = torch.randn(N, dtype=torch.float64)
    for fn, top in ((sparsemax, 4.0), (entmax15, 9.0)):   # 1.5-entmax: one word when the gap ≥ 2
        hard = torch.tensor([top, 0.0, 0.5, -1.0, 0.0], dtype=torch.float64, requires_grad=True)
        a = fn(hard, dim=-1)
        assert a[0] == 1
        (a * g).sum().backward()
        assert torch.count_nonzero(hard.grad) == 0
    flat_sp = torch.zeros(N, dtype=torch.float64, requires_grad=True)
    flat_sm = torch.zeros(N, dtype=torch.float64, requires_grad=True)
    (sparsemax(flat_sp, dim=-1) * g).sum().backward()
    (torch.softmax(flat_sm, dim=-1) * g).sum().backward()
    assert torch.allclose(flat_sp.grad, N * flat_sm.grad)
    assert flat_sm.grad.abs().sum() > 0


def test_errors():
    with pytest.raises(ValueError, match="no real source position"):
        row_statistics(torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="differ"):
        flatten_rows(torch.zeros(2, 3), torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="no scores"):
        summarize([])


def test_experiment_script_on_a_trained_checkpoint(tmp_path):
    """experiments/attention_score_scale.py on a sparsemax model trained through fairseq-train:
    the pooled rows are the subset's target tokens; at initialisation the scorer's gradient is
    larger under sparsemax than softmax on the same weights and batches."""
    import importlib.util
    import json
    from pathlib import Path
    from test_translation_cli import reversal_bin, train
    (tmp_path / "raw").mkdir()
    data = reversal_bin(tmp_path / "raw")
    train(data, tmp_path, "--attention-normalizer", "sparsemax", updates=4)
    script = Path(__file__).resolve().parents[1] / "experiments" / "attention_score_scale.py"
    spec = importlib.util.spec_from_file_location("attention_score_scale", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "scale.json"
    ckpt = str(tmp_path / "checkpoint_best.pt")
    assert mod.main(["--data", str(data), "--path", ckpt, "--subset", "test", "--fresh",
                     "--grad-at-init", "--batches", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    trained = res["checkpoints"][ckpt]
    assert trained["sentences"] == 12
    lines = (tmp_path / "raw" / "test.tgt").read_text().splitlines()
    assert trained["rows"] == sum(len(line.split()) + 1 for line in lines)    # words and </s>
    assert 0 <= trained["support1_fraction"] <= 1
    assert res["fresh"]["rows"] == trained["rows"]
    g = res["grad_at_init"]
    assert g["batches"] >= 1
    assert g["sparsemax"]["scorer_ratio_to_softmax"] > 1.5
    assert g["softmax"]["total_grad_norm"] > 0


def test_sparse_attention_training_script_refuses_bad_settings(tmp_path):
    """experiments/sparse_attention_training.sh: unset folders and a missing data-bin are errors
    naming the setting, before anything runs."""
    import os
    import subprocess
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    script = str(repo / "experiments" / "sparse_attention_training.sh")

    def run(**env):
        return subprocess.run(["bash", script], cwd=repo, capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=60)

    r = run(OUT=str(tmp_path / "out"))
    assert r.returncode != 0 and "SOFTMAX_RUNS" in r.stderr
    r = run(SOFTMAX_RUNS=str(tmp_path), OUT=str(tmp_path / "out"), DATA_BIN=str(tmp_path / "nope"))
    assert r.returncode == 2 and "no Multi30K data-bin" in r.stderr and str(tmp_path / "nope") in r.stderr
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "dict.en.txt").write_text("a 1\n")
    r = run(SOFTMAX_RUNS=str(tmp_path / "runs"), OUT=str(tmp_path / "out"), DATA_BIN=str(tmp_path / "bin"),
            STAGES="posthoc", SEEDS="1")
    assert r.returncode == 2 and "soft_seed1/checkpoint_best.pt: missing" in r.stderr
