"""The README's "Your data in four commands", run end to end exactly as written.

The commands are read from README.md's ``bash`` block between ``<!-- quickstart:begin -->`` and
``<!-- quickstart:end -->`` and run one by one with bash, in a temporary folder standing for the
repository root (``recipes`` links to the repository's; ``my_corpus/`` holds a toy corpus, the
README's file names). Only environment variables shrink the run: two epochs of a 16-d model, beam
2 in the recipe's own decodes. Each command must succeed and leave what the README says it
writes: the data folder, the checkpoint, ``U-`` lines with one number per token, ``report.md``
with the run's BLEU.
"""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fast_python
from toy_parallel import write_toy_corpus

REPO = Path(__file__).resolve().parents[1]
TINY = ("--encoder-embed-dim 16 --encoder-hidden-size 16 --decoder-embed-dim 16 "
        "--decoder-hidden-size 16 --decoder-out-embed-dim 16")


def quickstart_commands():
    """The shell commands of the README's quick start (continuation lines joined)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- quickstart:begin -->(.*?)<!-- quickstart:end -->", text, flags=re.S)
    assert m, "README.md has no quick start between <!-- quickstart:begin --> and <!-- quickstart:end -->"
    blocks = re.findall(r"```bash\n(.*?)```", m.group(1), flags=re.S)
    assert len(blocks) == 1, f"the quick start should have one bash block, found {len(blocks)}"
    joined = blocks[0].replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_the_quick_start_has_the_four_commands():
    cmds = quickstart_commands()
    assert [shlex.split(c)[0] for c in cmds] == [
        "fairseq-acvi-prepare-parallel", "DATA_BIN=data-bin/my_corpus", "fairseq-acvi-generate",
        "fairseq-acvi-mt-report"]
    assert "bash recipes/mt_parallel.sh" in cmds[1] and "--print-uncertainty" in cmds[2]


def test_the_quick_start_runs_end_to_end(tmp_path):
    cmds = quickstart_commands()
    write_toy_corpus(tmp_path / "my_corpus")
    (tmp_path / "recipes").symlink_to(REPO / "recipes")
    # the commands as an activated environment finds them (pip puts them beside the interpreter)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    # PYTHON: the recipe's fairseq CLIs run through the tests' fork server (the same runs without
    # ~4 s of imports each; tests/forkserver.py); the commands the README types run as typed
    env = dict(os.environ, PATH=path, OMP_NUM_THREADS="1", MAX_EPOCH="2", BEAM="2", TRAIN_ARGS=TINY,
               PYTHON=fast_python())
    for var in ("DATA_BIN", "CONTEXT", "SEEDS", "TAG", "RUNS", "EVAL_SPLITS", "TRAIN", "ARCH", "DEVICE"):
        env.pop(var, None)
    for cmd in cmds:
        res = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"

    # 1. the data folder
    data = tmp_path / "data-bin" / "my_corpus"
    assert json.loads((data / "splits.json").read_text()) == {"train": "train", "valid": "valid", "test": "test"}
    assert (data / "raw" / "test.de").read_text() == (tmp_path / "my_corpus" / "test.de").read_text()
    # 2. the run: checkpoint, run.json naming its splits, BLEU of both splits
    run = tmp_path / "runs" / "my_corpus" / "acvi_seed1"
    assert (run / "checkpoint_best.pt").is_file()
    meta = json.loads((run / "run.json").read_text())
    assert meta["splits"] == ["valid", "test"] and meta["context"] == "acvi" and meta["max_epoch"] == 2
    assert '"valid_nll_loss"' in (run / "train.log").read_text()
    bleu = json.loads((run / "bleu_test.json").read_text())
    assert bleu["n"] == 40 and 0 <= bleu["bleu_tok"] <= 100
    # 3. U- lines: one per hypothesis, one number per token of it (</s> included, like P-)
    out = (tmp_path / "runs" / "my_corpus" / "test_uncertainty.txt").read_text().splitlines()
    by_kind = {}
    for line in out:
        m = re.match(r"([A-Z]+)-(\d+)\t", line)
        if m:
            by_kind.setdefault(m.group(1), {})[int(m.group(2))] = line.split("\t")
    assert sorted(by_kind["U"]) == sorted(by_kind["H"]) == list(range(40))
    for sid, fields in by_kind["U"].items():
        values = [float(v) for v in fields[1].split()]
        hyp_tokens = by_kind["H"][sid][2].split()
        assert len(values) == len(hyp_tokens) + 1 == len(by_kind["P"][sid][1].split())
        assert all(v >= -1e-4 for v in values)               # a mutual information is not negative
    # 4. the report: the run's BLEU row
    md = (tmp_path / "runs" / "my_corpus" / "report" / "report.md").read_text()
    assert "| variant | seeds | valid ppl | valid BLEU | test BLEU | test detok | train words/s |" in md
    valid = json.loads((run / "bleu_valid.json").read_text())
    row = re.search(r"^\| acvi \| 1 \| [\d.]+ \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", md, flags=re.M)
    assert row, md
    assert [float(x) for x in row.groups()] == pytest.approx(
        [valid["bleu_tok"], bleu["bleu_tok"], bleu["bleu_detok"]], abs=0.006)


def _recipe(cwd, **env):
    full = dict(os.environ, OMP_NUM_THREADS="1", **env)
    for var in ("CONTEXT", "EVAL_SPLITS", "RUNS"):
        if var not in env:
            full.pop(var, None)
    return subprocess.run(["bash", str(REPO / "recipes" / "mt_parallel.sh")], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120)


def test_the_recipe_refuses_bad_settings_before_training(tmp_path):
    """Exit 2 naming the variable or the file, and no run folder."""
    res = _recipe(tmp_path, DATA_BIN="")
    assert res.returncode == 2 and "set DATA_BIN" in res.stderr
    (tmp_path / "other").mkdir()
    res = _recipe(tmp_path, DATA_BIN="other")
    assert res.returncode == 2 and "other/corpus.json or splits.json missing" in res.stderr
    data = tmp_path / "data"
    data.mkdir()
    (data / "splits.json").write_text('{"train": "train", "valid": "valid", "test": "test"}')
    (data / "corpus.json").write_text('{"src": "en"}')
    res = _recipe(tmp_path, DATA_BIN="data")
    assert res.returncode == 2 and "data/corpus.json or splits.json is not as" in res.stderr
    (data / "corpus.json").write_text('{"src": "en", "tgt": "de", "remove_bpe": null}')
    res = _recipe(tmp_path, DATA_BIN="data", EVAL_SPLITS="valid test2016")
    assert res.returncode == 2 and "EVAL_SPLITS must be valid|test, got 'test2016'" in res.stderr
    res = _recipe(tmp_path, DATA_BIN="data", CONTEXT="transformer")
    assert res.returncode == 2 and "CONTEXT must be" in res.stderr
    assert not (tmp_path / "runs").exists()
