"""Which run a report keeps, and ``--merge``: runs over disjoint seed ranges combined into the
choice one best-of-(N1 + N2 + ...) run would have made (protocol "best of N by validation",
docs/results/babi.md)."""
import os
import shutil
from typing import Dict, List, Optional, Tuple

from fairseq_acvi.babi_eval.checkpoint import ckpt_name
from fairseq_acvi.babi_eval.results import load_json, results_file, write_json


def selection_key(info: dict) -> Tuple[float, float, int]:
    """Order of runs (or epochs) by validation: accuracy first, then the lower validation NLL,
    then the lower seed. Runs recorded before the NLL was (no ``valid_nll``) compare by accuracy
    and seed alone; :func:`merge_results` refuses to mix the two kinds."""
    return (info["valid"], -info.get("valid_nll", 0.0), -info.get("seed", 0))


def merge_results(parts: List[dict]) -> Dict[str, dict]:
    """Combine results of one setup trained over disjoint seed ranges (``--first-seed``).

    parts: results dicts (key "arch|tasks" -> info with "valid", "seed", "test", "runs").
    Returns key -> info of the best run by (validation accuracy, lower seed), the same choice
    :func:`~fairseq_acvi.babi_eval.train.run_setup` makes over all the seeds at once, with "runs"
    the union of the parts' runs and "from_part" the index of the part whose run (and checkpoint)
    was kept. A seed that appears in two parts is an error: its runs would be counted twice; so
    are runs recorded on two different variants (runs recorded before the variant was carry none
    and merge with any).
    """
    merged: Dict[str, dict] = {}
    for i, part in enumerate(parts):
        for key, info in part.items():
            info = dict(info, from_part=i)
            if key not in merged:
                merged[key] = info
                continue
            old = merged[key]
            variant = old.get("variant") or info.get("variant")   # runs from before: none
            if old.get("variant") and info.get("variant") and old["variant"] != info["variant"]:
                raise ValueError(f"--merge: {key} has runs on variant {old['variant']} and "
                                 f"on {info['variant']}; merge runs on the same data")
            seen = {r["seed"] for r in old["runs"]}
            dup = seen & {r["seed"] for r in info["runs"]}
            if dup:
                raise ValueError(f"--merge: {key} seed(s) {sorted(dup)} appear in two result "
                                 "files; merge runs over disjoint seed ranges (--first-seed)")
            if ("valid_nll" in old) != ("valid_nll" in info):
                raise ValueError(f"--merge: {key} mixes runs selected by validation accuracy "
                                 "alone with runs that record the validation NLL (the tie-break "
                                 "since 2026-11-24); their choices are not comparable: rerun one")
            runs = old["runs"] + info["runs"]
            best = max((old, info), key=selection_key)
            merged[key] = dict(best, runs=sorted(runs, key=lambda r: r["seed"]))
            if variant:
                merged[key]["variant"] = variant
    return merged


def merge_sources(entries: List[str]) -> Dict[str, List[Tuple[str, Optional[str]]]]:
    """setup -> [(results JSON, its run's ckpt/ folder or None)] for the ``--merge`` entries.

    An entry is an earlier ``--out-dir`` (its results_single.json / results_joint.json, or their
    gzipped copies, and its ckpt/) or one results file whose name says its setup,
    ``results_single*.json`` or ``results_joint*.json``, plain or ``.gz`` (e.g. the files under
    docs/results/babi_2026-*/; no checkpoints).
    A folder with neither results file is an error, as is any other entry.
    """
    sources: Dict[str, List[Tuple[str, Optional[str]]]] = {"single": [], "joint": []}
    for entry in entries:
        if os.path.isdir(entry):
            found = {s: path for s in sources if (path := results_file(entry, s)) is not None}
            if not found:   # a run that never finished, or a copy that failed: not skipped silently
                raise ValueError(f"--merge: folder {entry!r} holds neither results_single.json "
                                 "nor results_joint.json")
            for setup, path in found.items():
                sources[setup].append((path, os.path.join(entry, "ckpt")))
            continue
        name = os.path.basename(entry)
        setup = next((s for s in sources if name.startswith(f"results_{s}")), None)
        if not os.path.isfile(entry) or setup is None or not name.endswith((".json", ".json.gz")):
            raise ValueError(f"--merge: {entry!r} is neither an --out-dir folder nor a "
                             "results_single*.json / results_joint*.json file (or its .gz)")
        sources[setup].append((entry, None))
    return sources


def merge_dirs(entries: List[str], out_dir: str) -> None:
    """``--merge``: merge_results over each setup's results files (:func:`merge_sources`);
    copies the chosen runs' checkpoints (either format, as they are) where their folder has
    them."""
    os.makedirs(os.path.join(out_dir, "ckpt"), exist_ok=True)
    for setup, sources in merge_sources(entries).items():
        if not sources:
            continue
        merged = merge_results([load_json(path) for path, _ in sources])
        for key, info in merged.items():
            arch, spec = key.split("|")
            name = ckpt_name(setup, arch, spec)
            ckpt_dir = sources[info.pop("from_part")][1]
            if ckpt_dir and os.path.exists(os.path.join(ckpt_dir, name)):
                shutil.copyfile(os.path.join(ckpt_dir, name), os.path.join(out_dir, "ckpt", name))
        write_json(os.path.join(out_dir, f"results_{setup}.json"), merged)
        print(f"merged {len(merged)} {setup} results from {len(sources)} files")
