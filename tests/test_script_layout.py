"""The script folders put on ``sys.path`` (``benchmarks/``, ``data_scripts/``, ``experiments/``) share one
module namespace.

Scripts in both folders import their helpers by bare module name (``from bench_common import …``,
``from common import …``). Within one pytest process both folders end up on ``sys.path``, so two
files of the same name would make whichever is imported first shadow the other: a test of a data
script then fails with an ImportError only when a benchmark test happened to run before it.
"""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT_DIRS = ("benchmarks", "data_scripts", "experiments")


def test_script_module_names_are_unique():
    seen = {}
    for folder in SCRIPT_DIRS:
        for path in sorted((REPO / folder).glob("*.py")):
            assert path.stem not in seen, f"{folder}/{path.name} shadows {seen[path.stem]}/{path.name}"
            seen[path.stem] = folder
    assert "bench_common" in seen and "common" in seen


def test_data_scripts_import_after_benchmarks():
    """Import order of the failing CI run: a benchmark first, then data scripts, in one process."""
    code = (
        "import sys, importlib.util\n"
        f"sys.path.insert(0, {str(REPO / 'benchmarks')!r})\n"
        "import bench_babi\n"
        f"spec = importlib.util.spec_from_file_location('score_mt', {str(REPO / 'data_scripts' / 'score_mt.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "print(sys.modules['common'].__file__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == REPO / "data_scripts" / "common.py"


def test_scripts_import_no_commands():
    """Data scripts and benchmarks build on the package's libraries, never on its commands
    (``fairseq_acvi/cli/``): a command's module is its argument parsing and output, and changing it
    must not break a script. Checked on the scripts' import lines."""
    import re
    pattern = re.compile(r"^\s*(from|import)\s+fairseq_acvi\.cli\b", re.M)
    offenders = [f"{folder}/{path.name}" for folder in SCRIPT_DIRS
                 for path in sorted((REPO / folder).glob("*.py"))
                 if pattern.search(path.read_text(encoding="utf-8"))]
    assert not offenders, offenders
