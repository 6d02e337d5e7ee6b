"""Shared test helpers: paths to ../shared/data and a runner for the real fairseq CLIs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout; ACVI_SHARED_DATA points elsewhere (e.g. a copy on a GPU machine)
SHARED_DATA = Path(os.environ.get("ACVI_SHARED_DATA") or REPO.parent / "shared" / "data")
USER_DIR = str(REPO / "fairseq_acvi")

torch.set_num_threads(1)


@pytest.fixture
def shared_data():
    """Path of ../shared/data; the test is skipped cleanly when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


def run_cli(module: str, *args, check: bool = True, env_extra=None, timeout: int = 900):
    """Run ``python -m <module> <args>`` (e.g. ``fairseq_cli.train``) and return the result.

    Output is captured; on failure (with ``check``) the test fails showing stdout and stderr.
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if env_extra:
        env.update(env_extra)
    cmd = [sys.executable, "-m", module, *[str(a) for a in args]]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)
    if check and res.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {res.returncode}\n--- stdout\n{res.stdout[-6000:]}"
                    f"\n--- stderr\n{res.stderr[-6000:]}")
    return res
