"""experiments/acvi_kl_dynamics.py: runs fairseq-train per configuration and tabulates its log.

The real training is exercised by the recipe tests; here a stand-in interpreter prints what
``fairseq-train --log-format json`` prints, so the test checks the command the script builds
(the configuration's own arguments last, so they win), the parsing, the table and the JSON, and
that a failing run or a missing data folder is an error that names it.
"""
import json
import os
import stat
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "experiments"))
import acvi_kl_dynamics  # noqa: E402

FAKE = r'''#!/usr/bin/env bash
echo "$@" >> "$(dirname "$0")/calls.txt"
case "$*" in *--acvi-beta\ 9*) echo "boom" >&2; exit 3 ;; esac
v=0.5; case "$*" in *--acvi-kl-delay-updates\ 5*) v=0.001 ;; esac
for u in 10 20; do
  echo "2026-11-25 12:00:00 | INFO | train_inner | {\"epoch\": 1, \"num_updates\": \"$u\", \"nll_loss\": \"8.5\", \"kl\": \"100\", \"kl_mean_part\": \"10\", \"kl_var_part\": \"90\", \"ctx_norm2\": \"20\", \"ctx_var\": \"$v\", \"gnorm\": \"1.2\", \"clip\": \"50\"}"
done
'''


@pytest.fixture
def fake_python(tmp_path):
    exe = tmp_path / "bin" / "python"
    exe.parent.mkdir()
    exe.write_text(FAKE)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    data = tmp_path / "data"
    data.mkdir()
    (data / "dict.en.txt").write_text("a 1\n")
    return exe, data


def test_table_json_and_command(fake_python, tmp_path, capsys):
    exe, data = fake_python
    out = tmp_path / "dyn.json"
    acvi_kl_dynamics.main([str(data), "--updates", "20", "--python", str(exe), "--out", str(out),
                           "--configs", "b1=--acvi-beta 1", "delay=--acvi-beta 1 --acvi-kl-delay-updates 5"])
    printed = capsys.readouterr().out
    assert "| b1 | 0.5 / 100 / 8.50 | 0.5 / 100 / 8.50 |" in printed
    assert "| delay | 0.001 / 100 / 8.50 |" in printed
    res = json.loads(out.read_text())
    assert [r["update"] for r in res["trajectories"]["b1"]] == [10, 20]
    assert res["trajectories"]["delay"][1]["ctx_var"] == pytest.approx(0.001)
    calls = (exe.parent / "calls.txt").read_text().splitlines()
    assert len(calls) == 2
    for call in calls:
        assert "--context-inference acvi" in call and "--max-update 20" in call
        # schedules off by default, then the configuration's own arguments (last, so they win)
        assert call.split("--save-dir")[1].split()[1:6] == [
            "--acvi-kl-delay-updates", "0", "--acvi-kl-warmup-updates", "0", "--acvi-beta"]


def test_failures_name_the_run_and_the_data(fake_python, tmp_path):
    exe, data = fake_python
    with pytest.raises(RuntimeError, match=r"bad: fairseq-train failed \(rc 3\); its last lines:\nboom"):
        acvi_kl_dynamics.main([str(data), "--python", str(exe), "--configs", "bad=--acvi-beta 9"])
    with pytest.raises(SystemExit):
        acvi_kl_dynamics.main([str(tmp_path / "nowhere"), "--python", str(exe)])
