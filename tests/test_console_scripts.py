"""The console commands fairseq-acvi-<name>: setup.py declares one per module of fairseq_acvi/cli,
each runs its module's main on the command line's arguments and exits with its status."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fairseq_acvi import cli

REPO = Path(__file__).resolve().parents[1]


def test_setup_declares_one_command_per_cli_module():
    text = (REPO / "setup.py").read_text(encoding="utf-8")
    names = re.search(r'for name in \(([^)]*)\)', text).group(1)
    declared = re.findall(r'"(\w+)"', names)
    assert declared == list(cli.COMMANDS)
    modules = sorted(p.stem for p in (REPO / "fairseq_acvi" / "cli").glob("*.py")
                     if p.stem != "__init__")
    assert sorted(cli.COMMANDS) == modules
    assert cli.console_scripts()[0] == "fairseq-acvi-babi-report = fairseq_acvi.cli:run_babi_report"


def test_runner_passes_arguments_and_turns_results_into_status(monkeypatch):
    from fairseq_acvi.cli import eval_captioning, mt_report
    seen = []
    monkeypatch.setattr(sys, "argv", ["fairseq-acvi-x", "--a", "1"])
    monkeypatch.setattr(eval_captioning, "main", lambda argv: seen.append(argv) or {"CIDEr": 1.0})
    monkeypatch.setattr(mt_report, "main", lambda argv: 1)
    assert cli.run_eval_captioning() == 0 and seen == [["--a", "1"]]    # a dict of results: 0
    assert cli.run_mt_report() == 1                                      # a status passes through


def test_installed_command_runs():
    exe = shutil.which("fairseq-acvi-mt-report")
    assert exe, "fairseq-acvi-mt-report is not on PATH: reinstall the plugin (pip install -e .)"
    res = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage:" in res.stdout
