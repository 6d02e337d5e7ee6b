"""Shared test helpers: the real-data root ($ACVI_DATA) and a runner for the real fairseq CLIs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# The root of the real-data layout (babi/, multi30k/, cnn_dm_sample/, cnn_dm_see_chunks/, msvd/, ...), named
# only by the environment variable ACVI_DATA (e.g. ACVI_DATA=../shared/data, as the README's test command
# and .ci/run set it); no default path. Unset, SHARED_DATA is a path that does not exist, so tests that
# check SHARED_DATA / "..." skip, and the ``shared_data`` fixture skips naming ACVI_DATA.
ACVI_DATA_SET = bool(os.environ.get("ACVI_DATA"))
SHARED_DATA = Path(os.environ["ACVI_DATA"]).resolve() if ACVI_DATA_SET else REPO / ".no-ACVI_DATA-set"
SHARED_DATA_MISSING = (
    "ACVI_DATA is not set: set ACVI_DATA to the real-data root (the folder holding babi/, multi30k/, "
    "cnn_dm_sample/, msvd/, ...; e.g. ACVI_DATA=../shared/data)" if not ACVI_DATA_SET else
    f"ACVI_DATA={os.environ['ACVI_DATA']} is not a folder (it must name the real-data root holding babi/, "
    f"multi30k/, cnn_dm_sample/, msvd/, ...)")
USER_DIR = str(REPO / "fairseq_acvi")

torch.set_num_threads(1)


@pytest.fixture
def shared_data():
    """Path of the real-data root $ACVI_DATA; the test is skipped, naming ACVI_DATA, when it is unset
    or not a folder."""
    if not ACVI_DATA_SET or not SHARED_DATA.is_dir():
        pytest.skip(SHARED_DATA_MISSING)
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
