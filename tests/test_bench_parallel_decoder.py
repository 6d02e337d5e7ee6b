"""benchmarks/bench_parallel_decoder.py at toy sizes: every model timed, the ratios printed, and
with ``--count`` the operators of one training step (the parallel path dispatches far fewer than
the step loop: it does not grow with the target length)."""
import re
import subprocess
import sys

from conftest import REPO


def test_the_benchmark_times_and_counts_each_model():
    res = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_parallel_decoder.py"), "--rounds", "1",
         "--batch", "4", "--len", "12", "--vocab", "50", "--dim", "16", "--layers", "1",
         "--count"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {m.group(1): (float(m.group(2)), int(m.group(3)), m.group(4)) for m in re.finditer(
        r"^(\S+(?: \S+)*?)\s{2,}(\d+)\s+\d+\.\d+\s+(\d+)\s+(\S+)$", res.stdout, re.M)}
    assert set(rows) == {"soft loop+feed", "soft loop", "soft parallel", "acvi loop+feed",
                         "acvi loop", "acvi parallel", "fairseq-lstm"}, res.stdout
    assert all(w > 0 and syncs == "—" for w, _, syncs in rows.values())
    for v in ("soft", "acvi"):
        assert rows[f"{v} parallel"][1] * 3 < rows[f"{v} loop"][1], rows
    assert "soft: parallel / loop+feed = " in res.stdout
    assert re.search(r"soft: parallel / fairseq-lstm = \d+\.\d\d", res.stdout), res.stdout


def test_the_profile_reports_each_model_on_the_host():
    """benchmarks/profile_train_step.py at toy sizes on the CPU: one section per model (the step
    loop, the parallel path, fairseq's lstm) with its wall time and the operators that take most
    host time, the LSTM's among them (no device figures without CUDA)."""
    res = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "profile_train_step.py"), "--steps", "1",
         "--batch", "4", "--len", "8", "--vocab", "50", "--dim", "16", "--layers", "1",
         "--top", "40"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    names = re.findall(r"^## (.+): (\d+\.\d\d) ms a step \(wall\)$", res.stdout, re.M)
    assert [n for n, _ in names] == ["soft loop+feed", "soft parallel", "fairseq-lstm"], res.stdout
    assert all(float(ms) > 0 for _, ms in names)
    host = re.findall(r"^most host time: (.+)$", res.stdout, re.M)
    assert len(host) == 3 and all("rnn" in line or "lstm" in line for line in host), res.stdout
    assert "device busy" not in res.stdout
