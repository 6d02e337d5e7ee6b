"""tests/forkserver.py: a fairseq CLI run through the fork server behaves as a fresh interpreter does
(output, exit status, environment read at import time, timeouts), and the recipes' PYTHON shim passes
everything else to the real interpreter."""
import os
import re
import subprocess
import sys

import pytest

import forkserver
from conftest import REPO, fast_python, run_cli

pytestmark = pytest.mark.skipif(not forkserver.enabled(), reason="ACVI_TEST_FORKSERVER=0")


def _fresh(module, *args, env_extra=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env,
                          cwd=str(REPO), timeout=300)


def _same(text):
    """``text`` without its log timestamps."""
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "T", text)


def test_output_and_exit_status_are_a_fresh_interpreters():
    # fairseq's usage error (argparse: exit 2, stderr) and what the import printed (stdout)
    args = ["--task", "translation", "--arch", "no_such_arch"]
    forked, fresh = run_cli("fairseq_cli.train", *args, check=False), _fresh("fairseq_cli.train", *args)
    assert forked.returncode == fresh.returncode == 2
    assert "invalid choice: 'no_such_arch'" in forked.stderr
    assert (_same(forked.stdout), forked.stderr) == (_same(fresh.stdout), fresh.stderr)
    # an exception: exit 1 and its traceback on stderr, as the interpreter ends
    forked = run_cli("fairseq_cli.generate", REPO / "no-such-data-bin", "--path", "x.pt", check=False)
    assert forked.returncode == 1 and "\nTraceback (most recent call last):\n" in forked.stderr
    assert forked.stderr.splitlines()[-1] == (f"FileNotFoundError: [Errno 2] No such file or directory: "
                                              f"'{REPO / 'no-such-data-bin'}'")


def test_a_variable_read_at_import_time_gets_its_own_template():
    """fairseq_cli.train sets its log level from LOGLEVEL when it is imported: a run with another
    LOGLEVEL must not be forked from a template imported with the default."""
    args = ["--task", "translation", "--arch", "lstm", "--max-epoch", "0", str(REPO / "no-such-data-bin")]
    default = run_cli("fairseq_cli.train", *args, check=False)
    quiet = run_cli("fairseq_cli.train", *args, check=False, env_extra={"LOGLEVEL": "ERROR"})
    assert " | INFO | " in default.stdout
    assert " | INFO | " not in quiet.stdout and quiet.returncode == default.returncode != 0


def test_runs_see_their_own_environment_and_a_timeout_kills_the_run(tmp_path):
    # --user-dir imports the plugin in the run; a plugin-less run of the same template must not
    # find its models (the template imports no plugin)
    args = ["--task", "translation", "--arch", "acvi_lstm", "--max-tokens", "100", str(REPO / "no-such-data-bin")]
    plugin = run_cli("fairseq_cli.train", "--user-dir", "fairseq_acvi", *args, check=False)
    assert plugin.returncode == 1 and "FileNotFoundError" in plugin.stderr   # parsed, then no data
    bare = run_cli("fairseq_cli.train", *args, check=False)
    assert bare.returncode == 2 and "invalid choice: 'acvi_lstm'" in bare.stderr
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("fairseq_cli.interactive", "--help", timeout=0.001)


def test_the_python_shim(tmp_path):
    shim = fast_python()
    # anything but `-m fairseq_cli.<cli>` is the real interpreter, arguments and stdin unchanged
    res = subprocess.run([shim, "-", "a b"], input="import sys; print(sys.argv[1:], sys.prefix)",
                         capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (0, f"['a b'] {sys.prefix}\n")
    assert subprocess.run([shim, "-c", "raise SystemExit(7)"], timeout=60).returncode == 7
    # a CLI through the server: its exit status and streams reach the caller (bash here)
    script = f'"{shim}" -m fairseq_cli.preprocess --no-such-option 2>"{tmp_path}/err"; echo "rc=$?"'
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert res.stdout.splitlines()[-1] == "rc=2"
    assert "unrecognized arguments: --no-such-option" in (tmp_path / "err").read_text()


def test_a_plugin_command_runs_as_python_m_would(tmp_path):
    """``python -m fairseq_acvi.cli.<name>`` through the plugin's template: the module runs afresh as
    ``__main__`` (its error on bad input, exit status and streams as a fresh interpreter gives
    them, and the same again on a second run: no state left by the first), and only the plugin's
    command modules are served."""
    assert forkserver.served("fairseq_acvi.cli.guess_number") and not forkserver.served("fairseq_acvi.cli")
    assert not forkserver.served("fairseq_acvi.cli.x.y") and not forkserver.served("data_scripts.score_mt")
    args = ["--scripted", "random", "--data", str(tmp_path / "none")]
    fresh = _fresh("fairseq_acvi.cli.guess_number", *args)
    assert fresh.returncode != 0 and fresh.stderr
    for _ in range(2):
        forked = run_cli("fairseq_acvi.cli.guess_number", *args, check=False)
        assert forked.returncode == fresh.returncode, (forked.stderr, fresh.stderr)
        assert (_same(forked.stdout), _same(forked.stderr)) == (_same(fresh.stdout), _same(fresh.stderr))
    usage = run_cli("fairseq_acvi.cli.guess_number", "--no-such-option", check=False)
    assert usage.returncode == 2 and "guess_number.py: error: " in usage.stderr   # argparse, prog as -m
