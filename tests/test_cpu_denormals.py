"""FAIRSEQ_ACVI_FLUSH_DENORMAL: off unless asked; 1 flushes subnormal floats in every intra-op
thread made after the plugin's import, and a warning names the share kept where the threads were
made before; a bad value is an error naming the variable."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO

from fairseq_acvi import cpu_denormals

PROBE = ("import fairseq_acvi, torch; from fairseq_acvi import cpu_denormals; "
         "print(cpu_denormals.FLUSHED, (torch.tensor([1e-39]) * 1.0).item() == 0.0)")


def _run(value, probe=PROBE, threads=1):
    env = {k: v for k, v in os.environ.items() if k != cpu_denormals.ENV}
    if value is not None:
        env[cpu_denormals.ENV] = value
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)


@pytest.mark.parametrize("value,expected", [(None, "False False"), ("0", "False False"),
                                            ("1", "True True")])
def test_the_plugin_flushes_subnormals_only_when_asked(value, expected):
    if value == "1" and not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal floats")
    res = _run(value)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split("\n")[-2] == expected, res.stdout


def test_a_bad_value_names_the_variable():
    res = _run("fast")
    assert res.returncode != 0
    assert "FAIRSEQ_ACVI_FLUSH_DENORMAL='fast': expected 1" in res.stderr, res.stderr[-2000:]


def test_requested_reads_the_usual_spellings():
    assert [cpu_denormals.requested(v) for v in ("1", "true", "ON", " yes ")] == [True] * 4
    assert [cpu_denormals.requested(v) for v in ("0", "false", "off", "")] == [False] * 4
    with pytest.raises(ValueError, match="FAIRSEQ_ACVI_FLUSH_DENORMAL='2'"):
        cpu_denormals.requested("2")


def _can_flush():
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal floats")


def _probe_two_threads(value, probe):
    """(the probe's last printed line, its stderr) with FAIRSEQ_ACVI_FLUSH_DENORMAL=value, 2 threads."""
    res = _run(value, probe, threads=2)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.split("\n")[-2], res.stderr


def test_every_intra_op_thread_flushes_when_the_plugin_comes_first():
    _can_flush()
    probe = ("import fairseq_acvi, torch; from fairseq_acvi import cpu_denormals; "
             "print(torch.get_num_threads(), cpu_denormals.kept_fraction())")
    line, err = _probe_two_threads("1", probe)
    assert line == "2 0.0" and "are kept" not in err, (line, err[-2000:])
    line, _ = _probe_two_threads("0", probe)        # the probe itself: every subnormal kept when off
    assert line == "2 1.0", line


def test_threads_made_before_the_plugin_keep_theirs_and_a_warning_says_so():
    _can_flush()
    probe = ("import torch; torch.ones(1 << 20) * torch.ones(1 << 20); import fairseq_acvi; "
             "from fairseq_acvi import cpu_denormals; print(cpu_denormals.kept_fraction())")
    line, err = _probe_two_threads("1", probe)
    assert float(line) == 0.5, line
    assert "came after the CPU's 2 intra-op threads were made: 50 % of a parallel product's " \
           "subnormal results are kept" in err, err[-2000:]
