"""Shared test helpers: the real-data root ($ACVI_DATA) and a runner for the real fairseq CLIs."""
import atexit
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import forkserver

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
# one thread in every process the tests start (CLIs, recipes): the same setting everywhere, so that
# their fork-server templates (keyed by these variables) are shared; an explicit setting wins
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONUNBUFFERED"):
    os.environ.setdefault(_var, "1")

#: the files that take longest (``--durations``, 2026-11-29), run first: with ``--dist loadfile``
#: a long file started last would leave the other worker idle at the end
HEAVY_FIRST = ("test_multi30k_data.py", "test_translation_cli.py", "test_normalizers.py",
               "test_learnability.py", "test_quickstart.py", "test_guess_number.py",
               "test_babi_report.py", "test_context_pag.py", "test_pointer_generator_nocopy.py",
               "test_video_captioner.py", "test_summarization_cli.py", "test_video_features_extract.py",
               "test_pag_char_data.py", "test_prepare_parallel.py", "test_acvi_transformer.py",
               "test_babi_hindi.py", "test_plugin_commands.py", "test_memn2n.py")


def pytest_collection_modifyitems(config, items):
    """The heaviest files first (:data:`HEAVY_FIRST`), every other test in its collection order."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
# the fork servers (tests/forkserver.py) this process starts, and those its recipes' shims start,
# belong to it: they exit when it has gone
os.environ.setdefault(forkserver.OWNER, str(os.getpid()))
if os.environ[forkserver.OWNER] == str(os.getpid()):
    atexit.register(forkserver.cleanup, os.environ[forkserver.OWNER])


def fast_python() -> str:
    """What to pass to a recipe as ``PYTHON``: an executable through which ``$PYTHON -m
    fairseq_cli.<cli>`` runs in the fork server (tests/forkserver.py), anything else in the real
    interpreter unchanged; ``sys.executable`` itself with ``ACVI_TEST_FORKSERVER=0``."""
    return forkserver.python_shim() if forkserver.enabled() else sys.executable


# the data scripts' fairseq-preprocess (fairseq_acvi/data/corpus_checks.py) through the fork server too
if forkserver.enabled():
    os.environ.setdefault("FAIRSEQ_ACVI_PYTHON", fast_python())


def recording_python(folder: Path):
    """A ``PYTHON`` for a recipe run without work: it only appends its arguments, one line per
    start, to ``folder/STARTED``. -> (the executable, that file)."""
    marker = folder / "STARTED"
    fake = folder / "fake_python"
    fake.write_text(f"#!/usr/bin/env bash\necho \"$@\" >> {marker}\n")
    fake.chmod(0o755)
    return fake, marker


def _run_forked(cmd, env, timeout):
    """``subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)``
    for ``cmd = [python, "-m", <fairseq CLI>, *args]``, through the fork server."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin = 0
        try:
            os.fstat(0)
        except OSError:
            stdin = os.open(os.devnull, os.O_RDONLY)
        try:
            rc = forkserver.run(cmd[2], cmd[3:], env, str(REPO), (stdin, out.fileno(), err.fileno()),
                                timeout=timeout)
        finally:
            if stdin:
                os.close(stdin)
        text = []
        for f in (out, err):
            f.seek(0)
            text.append(io.TextIOWrapper(io.BytesIO(f.read())).read())  # as subprocess's text=True
    return subprocess.CompletedProcess(cmd, rc, text[0], text[1])


@pytest.fixture
def shared_data():
    """Path of the real-data root $ACVI_DATA; the test is skipped, naming ACVI_DATA, when it is unset
    or not a folder."""
    if not ACVI_DATA_SET or not SHARED_DATA.is_dir():
        pytest.skip(SHARED_DATA_MISSING)
    return SHARED_DATA


@pytest.fixture
def multi30k_refs(shared_data, tmp_path):
    """The Multi30K En→De references of valid, test2016 and test2017 (the ``tok/`` files the
    recipes score against) as a data-bin's ``raw/`` folder, ``tmp_path/raw/<split>.de``; the test is
    skipped, naming the file, when one is missing."""
    tok = shared_data / "multi30k" / "tok"
    refs = tmp_path / "raw"
    refs.mkdir()
    for split, name in (("valid", "val"), ("test2016", "test_2016_flickr"), ("test2017", "test_2017_flickr")):
        src = tok / f"{name}.lc.norm.tok.de"
        if not src.is_file():
            pytest.skip(f"{src} is missing")
        (refs / f"{split}.de").symlink_to(src)
    return refs


def run_cli(module: str, *args, check: bool = True, env_extra=None, timeout: int = 900):
    """Run ``python -m <module> <args>`` (e.g. ``fairseq_cli.train``) and return the result.

    Output is captured; on failure (with ``check``) the test fails showing stdout and stderr.
    fairseq's own CLIs and the plugin's commands (``forkserver.served``) run in a process forked
    from one that has imported torch and fairseq already (``tests/forkserver.py``: the same process
    a fresh interpreter would be, without the ~4 s of imports); every other module runs in a fresh
    interpreter.
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if env_extra:
        env.update(env_extra)
    cmd = [sys.executable, "-m", module, *[str(a) for a in args]]
    if forkserver.served(module) and forkserver.enabled():
        res = _run_forked(cmd, env, timeout)
    else:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)
    if check and res.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {res.returncode}\n--- stdout\n{res.stdout[-6000:]}"
                    f"\n--- stderr\n{res.stderr[-6000:]}")
    return res
