"""The decoded outputs a translation report keeps beside its tables (``mt_report --keep-outputs``),
so that every BLEU of the report can be scored again from the repository without the run folders
or the checkpoints.

For each run read from a folder, ``OUT/outputs/<pair>/<variant>_seed<N>/`` receives:

* ``gen_<decode>.txt.gz``: the ``H-<id>`` lines of the run's ``gen_<decode>.txt`` (fairseq-generate's
  hypotheses, BPE removed, in the file's order), gzip-compressed with a zero timestamp so that the
  same outputs always give the same bytes; the other lines (source, target, positional scores)
  are dropped, they can be rebuilt from the data and the hypothesis;
* ``bleu_<decode>.json``, ``run.json``, any ``attention_stats_<split>.json`` (the attention's
  sharpness and DROP-attn, :mod:`fairseq_acvi.metrics.attention_stats`), any
  ``aligned_drop_<split>.json`` with its links (DROP from an aligner,
  :mod:`fairseq_acvi.cli.aligned_drop`) and the other small files
  a report reads (:data:`SMALL_FILES`: planning attention's ``replan.json``, the ablations'
  ``ablate.json``), as the recipe wrote them;
* ``train.log.gz``: the lines of the run's ``train.log`` that a report reads (the epochs'
  training and validation records, the parameter count, the end of training), gzip-compressed,
  so that the kept folder is itself a run folder: a later report given it (with runs trained
  elsewhere) finds the same validation perplexity, best epoch and scores.

``data_scripts/score_mt.py --gen outputs/en_de/acvi_seed1/gen_test2016.txt.gz --ref REF`` reads the
kept file as it is (the package's text readers decompress a ``.gz`` name:
:func:`fairseq_acvi.data.text_lines.read_bytes`) and gives the ``bleu_*.json`` figures again.
Runs taken from ``--merge`` have no folder, and keep what their own report kept.

A recipe keeps a run the moment it is finished, so that it outlives the machine it was trained on
(``KEEP`` of recipes/mt_normalizers.sh and recipes/mt_pag.sh, through
:mod:`fairseq_acvi.cli.keep_runs`); the normalisers' runs with their ``pictures/``, which their
table links.
"""
import glob
import os
import shutil
from typing import List

from fairseq_acvi.data.text_lines import read_text_lines, write_gzip_text
from fairseq_acvi.mt_eval.logs import ReportError, report_lines

#: the run files besides scores and statistics that a report reads (fairseq_acvi/mt_eval/runs.py)
SMALL_FILES = ("replan.json", "ablate.json")


def hypothesis_lines(gen_path: str) -> List[str]:
    """The ``H-`` lines of a fairseq-generate output, in the file's order, without their newline
    (read by :func:`~fairseq_acvi.data.text_lines.read_text_lines`: errors name the file and line)."""
    return [line for line in read_text_lines(gen_path, newline="lf") if line.startswith("H-")]


def run_output_dir(out_dir: str, run: dict) -> str:
    """``OUT/outputs/<pair>/<variant>_seed<N>``."""
    return os.path.join(out_dir, "outputs", run["pair"], f"{run['variant']}_seed{run['seed']}")


def keep_outputs(runs: List[dict], out_dir: str, pictures: bool = False) -> List[str]:
    """Copy the hypotheses and scores of every run that has a folder (see the module docstring),
    and with ``pictures`` its ``pictures/`` folder when it has one; the folders written. A run read from an earlier report's kept folder is copied as it was kept
    (and left alone when it is the folder being written). A run whose folder holds a
    ``bleu_<decode>.json`` but not the ``gen_<decode>.txt`` (or kept ``.txt.gz``) it was computed
    from raises :class:`ReportError` naming both: a report that keeps outputs keeps all of them."""
    written = []
    for run in runs:
        run_dir = run.get("dir")
        if not run_dir:
            continue
        dest = run_output_dir(out_dir, run)
        written.append(dest)
        if os.path.realpath(dest) == os.path.realpath(run_dir):
            continue
        os.makedirs(dest, exist_ok=True)
        shutil.copyfile(os.path.join(run_dir, "run.json"), os.path.join(dest, "run.json"))
        small = sorted(glob.glob(os.path.join(run_dir, "attention_stats_*.json")))
        small += sorted(glob.glob(os.path.join(run_dir, "aligned_drop_*")))
        small += [p for p in (os.path.join(run_dir, n) for n in SMALL_FILES) if os.path.isfile(p)]
        for path in small:
            shutil.copyfile(path, os.path.join(dest, os.path.basename(path)))
        log = os.path.join(run_dir, "train.log")
        if os.path.isfile(log):
            write_gzip_text(os.path.join(dest, "train.log.gz"), report_lines(log))
        elif os.path.isfile(log + ".gz"):
            shutil.copyfile(log + ".gz", os.path.join(dest, "train.log.gz"))
        for bleu in sorted(glob.glob(os.path.join(run_dir, "bleu_*.json"))):
            name = os.path.basename(bleu)[len("bleu_"):-len(".json")]
            gen = os.path.join(run_dir, f"gen_{name}.txt")
            kept = os.path.join(dest, f"gen_{name}.txt.gz")
            if os.path.isfile(gen):
                write_gzip_text(kept, hypothesis_lines(gen))
            elif os.path.isfile(gen + ".gz"):
                shutil.copyfile(gen + ".gz", kept)
            else:
                raise ReportError(f"{bleu}: its hypotheses {gen} are missing (--keep-outputs "
                                  f"keeps what every BLEU was computed from)")
            shutil.copyfile(bleu, os.path.join(dest, os.path.basename(bleu)))
        if pictures and os.path.isdir(os.path.join(run_dir, "pictures")):
            shutil.copytree(os.path.join(run_dir, "pictures"), os.path.join(dest, "pictures"),
                            dirs_exist_ok=True)
    return written
