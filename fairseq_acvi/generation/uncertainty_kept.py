"""What the uncertainty study's page keeps beside it (docs/uncertainty.md §8), so that every figure
on it can be computed again from the repository without the checkpoints: the part of each decode
and of each token array that :mod:`fairseq_acvi.generation.uncertainty_measures` reads.

Usage (from the repository root; ``recipes/uncertainty_study.sh`` runs it in ``STAGE=report``)::

    python -m fairseq_acvi.generation.uncertainty_kept --study runs/uncertainty_study \\
        --seeds 1 2 3 --methods acvi soft mcdrop --ensemble ensemble --out-dir REPORT_DIR

From ``STUDY/seed<N>/<method>_{test2016,coco}.txt`` (``fairseq_acvi.cli.generate
--print-sentence-uncertainty`` output) and ``STUDY/seed<N>/calibration/tokens_<method>.npz``
(``cli.calibration --save-tokens``), ``OUT/outputs/`` receives:

* ``seed<N>/<method>_<set>.txt.gz``: the ``H-`` and ``US-`` lines and fairseq's "Translated … in
  Xs" line, in the file's order, gzip-compressed with a zero timestamp (reproducible bytes). The
  per-token ``U-``/``UH-``/``UM-`` lines and the source, target and positional scores are dropped:
  no measure reads them, and they are most of the file;
* ``seed<N>/tokens_<method>.npz``: the arrays the token measures read (``sentence`` as int32,
  ``confidence``, ``correct``, ``entropy``, ``mutual_information``,
  ``members_mutual_information``), an array that is zero everywhere left out (the measures read a
  missing score as zeros: I of one distribution per step), ``gold_logprob`` and
  ``expected_entropy`` left out (no measure reads them);
* the ensemble (``--ensemble NAME``, the same model in every seed): its decodes
  ``STUDY/NAME_<set>.txt`` once, as ``NAME_<set>.txt.gz``, and its token arrays once,
  ``NAME/tokens_NAME.npz``, when every seed's are equal (teacher forcing without dropout or
  samples is deterministic), else one per seed.

``uncertainty_measures`` reads the kept files as they are (a ``.gz`` name is decompressed) and gives
each seed's ``measures.json`` figures again; :func:`measures_args` writes its options for one kept
seed. A missing file raises ``FileNotFoundError`` naming it, before anything is written.
"""
import argparse
import io
import os
import sys
from typing import Dict, List

import numpy as np

from fairseq_acvi.data.text_lines import read_text_lines, write_bytes_whole, write_gzip_text
from fairseq_acvi.generation.uncertainty_measures import TRANSLATED

#: the decodes of every method: in domain (test2016, Flickr) and out of domain (COCO)
SETS = ("test2016", "coco")
#: the token arrays the measures read (uncertainty_measures.token_measures)
TOKEN_KEYS = ("confidence", "correct", "entropy", "mutual_information",
              "members_mutual_information")


def measured_lines(path: str) -> List[str]:
    """The lines of a decode that the measures read: ``H-``, ``US-`` and fairseq's "Translated"."""
    return [line for line in read_text_lines(path, newline="lf")
            if line.startswith(("H-", "US-")) or TRANSLATED.search(line)]


def measured_tokens(path: str) -> Dict[str, np.ndarray]:
    """The arrays of a ``tokens_<method>.npz`` that the measures read (see the module docstring)."""
    with np.load(path) as z:
        missing = [k for k in ("sentence", "confidence", "correct") if k not in z.files]
        if missing:
            raise ValueError(f"{path}: no {', '.join(missing)} array (cli.calibration --save-tokens?)")
        out = {"sentence": z["sentence"].astype(np.int32)}
        for k in TOKEN_KEYS:
            if k in z.files and (k == "correct" or np.any(z[k] != 0)):
                out[k] = z[k]
    return out


def _write_npz(path: str, arrays: Dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    write_bytes_whole(path, buf.getvalue())


def _same(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def keep_study_outputs(study: str, seeds: List[int], methods: List[str], out_dir: str,
                       ensemble: str = "") -> List[str]:
    """Write ``out_dir/outputs/`` (see the module docstring); the files written."""
    decodes, tokens = [], []   # (source, destination)
    for s in seeds:
        d = os.path.join(study, f"seed{s}")
        for m in methods:
            decodes += [(os.path.join(d, f"{m}_{st}.txt"), os.path.join(f"seed{s}", f"{m}_{st}.txt.gz"))
                        for st in SETS]
            tokens.append((os.path.join(d, "calibration", f"tokens_{m}.npz"),
                           os.path.join(f"seed{s}", f"tokens_{m}.npz")))
    if ensemble:
        decodes += [(os.path.join(study, f"{ensemble}_{st}.txt"), f"{ensemble}_{st}.txt.gz")
                    for st in SETS]
        ens = [os.path.join(study, f"seed{s}", "calibration", f"tokens_{ensemble}.npz") for s in seeds]
    else:
        ens = []
    for src in [p for p, _ in decodes + tokens] + ens:
        if not os.path.isfile(src):
            raise FileNotFoundError(f"{src}: missing (the study's decode and calibrate stages "
                                    f"write it)")
    written = []
    root = os.path.join(out_dir, "outputs")
    for src, dest in decodes:
        path = os.path.join(root, dest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_gzip_text(path, measured_lines(src))
        written.append(path)
    for src, dest in tokens:
        path = os.path.join(root, dest)
        _write_npz(path, measured_tokens(src))
        written.append(path)
    if ens:
        arrays = [measured_tokens(p) for p in ens]
        if all(_same(arrays[0], a) for a in arrays[1:]):
            targets = [(os.path.join(root, ensemble, f"tokens_{ensemble}.npz"), arrays[0])]
        else:
            targets = [(os.path.join(root, f"seed{s}", f"tokens_{ensemble}.npz"), a)
                       for s, a in zip(seeds, arrays)]
        for path, a in targets:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write_npz(path, a)
            written.append(path)
    return written


def measures_args(outputs: str, seed: int, methods: List[str], ensemble: str = "") -> List[str]:
    """The ``uncertainty_measures`` options (``--decoded``, ``--ood``, ``--tokens``) that score seed
    ``seed`` from a kept ``outputs/`` folder, the methods in ``methods`` order then the ensemble;
    ``--references`` and ``--out-dir`` are the caller's."""
    def path(*parts):
        return os.path.join(outputs, *parts)

    sets = [(m, path(f"seed{seed}", f"{m}_{{}}.txt.gz"), path(f"seed{seed}", f"tokens_{m}.npz"))
            for m in methods]
    if ensemble:
        tokens = path(ensemble, f"tokens_{ensemble}.npz")
        if not os.path.isfile(tokens):                       # kept per seed: members differed
            tokens = path(f"seed{seed}", f"tokens_{ensemble}.npz")
        sets.append((ensemble, path(f"{ensemble}_{{}}.txt.gz"), tokens))
    args = []
    for name, decode, tokens in sets:
        args += ["--decoded", f"{name}={decode.format(SETS[0])}", "--ood",
                 f"{name}={decode.format(SETS[1])}", "--tokens", f"{name}={tokens}"]
    return args


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--study", required=True, help="the study's OUT folder (seed<N>/ inside)")
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--methods", nargs="+", default=["acvi", "soft", "mcdrop"])
    p.add_argument("--ensemble", default="", help="the ensemble's name ('' : none)")
    p.add_argument("--out-dir", required=True)
    args = p.parse_args(argv)
    try:
        written = keep_study_outputs(args.study, args.seeds, args.methods, args.out_dir, args.ensemble)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"kept {len(written)} files in {os.path.join(args.out_dir, 'outputs')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
