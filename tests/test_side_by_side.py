"""recipes/side_by_side.sh: the plan's commands at most JOBS at once, a deadline that stops a
command with everything it started, a status line per command, the runs packed without
checkpoints, and bad settings refused naming the variable."""
import os
import subprocess
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "recipes" / "side_by_side.sh"


def run(tmp_path, plan_text, **env):
    plan = tmp_path / "plan.txt"
    plan.write_text(plan_text)
    full = {**os.environ, "PLAN": str(plan), "DEVICE": "cpu", "LOGS": str(tmp_path / "logs"),
            "RUNS_ROOT": "runs", **env}
    t0 = time.monotonic()
    res = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=full, capture_output=True,
                         text=True, timeout=120)
    return res, time.monotonic() - t0


def running(pid):
    """A process that exists and is not a zombie (a container's init may not reap the dead)."""
    try:
        fields = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return False
    return not any(f.startswith("State:") and "Z" in f.split()[1] for f in fields)


def status(tmp_path):
    lines = (tmp_path / "logs" / "status.tsv").read_text().splitlines()[1:]
    return {int(f[0]): f[1] for f in (line.split("\t") for line in lines)}


def test_commands_run_side_by_side_and_the_deadline_stops_the_whole_command(tmp_path):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    plan = "\n".join([
        "# a comment, then a blank line",
        "",
        "echo $DEVICE $OMP_NUM_THREADS > runs/a/gen_test.txt; echo w > runs/a/checkpoint_last.pt",
        # a grandchild that would outlive its shell if only the shell were stopped
        "python3 -c 'import os, time; open(\"child.pid\", \"w\").write(str(os.getpid())); "
        "time.sleep(100)' & wait",
        "exit 3",
        "sleep 100",
        "echo never > never.txt",
    ])
    res, took = run(tmp_path, plan, JOBS="2", DEADLINE="4", PACK=str(tmp_path / "out" / "r.tar.gz"))
    assert res.returncode == 1, res.stdout + res.stderr
    assert took < 60
    st = status(tmp_path)
    # lines 1-2 start at once, 3 takes 1's place, 4 takes 3's; 2 and 4 hold both places until
    # the deadline, so line 5 is never started
    assert st == {1: "0", 2: "124", 3: "3", 4: "124", 5: "not started"}, st
    assert not (tmp_path / "never.txt").exists()
    pid = int((tmp_path / "child.pid").read_text())
    time.sleep(0.5)
    assert not running(pid), "the deadline left the command's Python running"
    with tarfile.open(tmp_path / "out" / "r.tar.gz") as tar:
        names = tar.getnames()
        assert "runs/a/gen_test.txt" in names and not any(n.endswith(".pt") for n in names)
        assert tar.extractfile("runs/a/gen_test.txt").read().decode().split() == ["cpu", "1"]


def test_every_command_succeeding_exits_0(tmp_path):
    res, _ = run(tmp_path, "true\ntrue\n", JOBS="1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert status(tmp_path) == {1: "0", 2: "0"}


def test_bad_settings_are_refused_naming_the_variable(tmp_path):
    res, _ = run(tmp_path, "true\n", JOBS="0")
    assert res.returncode == 2 and "JOBS" in res.stderr
    res, _ = run(tmp_path, "# only a comment\n")
    assert res.returncode == 2 and "PLAN" in res.stderr
    res, _ = run(tmp_path, "true\n", DEADLINE="soon")
    assert res.returncode == 2 and "DEADLINE" in res.stderr
