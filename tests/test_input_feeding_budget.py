"""experiments/input_feeding_budget.py: the update budget of the model without input feeding is the
input-feeding run's updates times the two models' speed ratio, timed side by side on real batches."""
import json
import subprocess
import sys

import pytest

from conftest import REPO
from test_translation_cli import data_bin  # noqa: F401 (a fixture: the reversal task's data-bin)

SCRIPT = REPO / "experiments" / "input_feeding_budget.py"


def _log(path, updates_by_epoch):
    lines = [f'2026-11-29 07:05:26 | INFO | valid | {{"epoch": {e}, "valid_loss": "2.1", '
             f'"valid_num_updates": "{u}"}}' for e, u in updates_by_epoch.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _run(data_bin, log, out, *extra):
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data_bin), "--context", "acvi", "--feed-log",
         str(log), "--src", "src", "--tgt", "tgt", "--arch", "acvi_lstm", "--batches", "3",
         "--max-tokens", "400", "--out", str(out), *extra],
        capture_output=True, text=True, cwd=REPO, timeout=600)


def test_the_budget_is_the_feed_runs_updates_times_the_timed_speed_ratio(data_bin, tmp_path):
    log = tmp_path / "train.log"
    _log(log, {19: 2223, 20: 2340})
    res = _run(data_bin, log, tmp_path / "budget.json")
    assert res.returncode == 0, res.stderr[-3000:]
    rec = json.loads((tmp_path / "budget.json").read_text())
    assert rec["feed_updates"] == 2340 and rec["batches_timed"] == 3
    assert rec["ratio"] == pytest.approx(rec["seconds_feed"] / rec["seconds_nofeed"])
    assert rec["budget_updates"] == round(2340 * rec["ratio"])
    assert 0.2 < rec["ratio"] < 5 and rec["seconds_feed"] > 0
    assert f"budget {rec['budget_updates']} updates" in res.stdout


def test_a_log_without_the_epoch_is_refused_naming_it(data_bin, tmp_path):
    log = tmp_path / "train.log"
    _log(log, {19: 2223})
    res = _run(data_bin, log, tmp_path / "budget.json")
    assert res.returncode != 0
    assert f"{log} has no validation record of epoch 20" in res.stderr
    assert not (tmp_path / "budget.json").exists()


def test_known_feed_updates_replace_the_log(data_bin, tmp_path):
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data_bin), "--context", "soft",
         "--feed-updates", "2340", "--src", "src", "--tgt", "tgt", "--arch", "acvi_lstm",
         "--batches", "2", "--max-tokens", "400", "--out", str(tmp_path / "b.json")],
        capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rec = json.loads((tmp_path / "b.json").read_text())
    assert rec["feed_log"] is None and rec["feed_updates"] == 2340
    assert rec["budget_updates"] == round(2340 * rec["ratio"])
    res = subprocess.run([sys.executable, str(SCRIPT), "--data", str(data_bin), "--context", "soft",
                          "--feed-updates", "0", "--out", str(tmp_path / "c.json")],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 2 and "--feed-updates must be ≥ 1, got 0" in res.stderr
    assert not (tmp_path / "c.json").exists()
