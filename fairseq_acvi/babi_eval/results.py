"""The results files of a report (``results_<setup>.json``: key "arch|tasks" -> info of the
chosen run, with every run under "runs") and the bAbI variant they record. A report writes them
as plain JSON; the copies kept under docs/results/ are gzipped (``results_<setup>.json.gz``), and
every reader here takes either."""
import gzip
import json
import os
from typing import Optional


def load_json(path: str) -> dict:
    """The results in ``path`` (plain or gzipped JSON, by its ``.gz`` ending); {} when there is
    no such file yet; a ValueError naming the file when it cannot be read as such."""
    if os.path.exists(path):
        try:
            with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz")
                  else open(path, encoding="utf-8")) as f:
                return json.load(f)
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a readable results file ({e})") from e
    return {}


def results_file(folder: str, setup: str) -> Optional[str]:
    """The results file of ``setup`` (single or joint) in a report's ``folder``:
    ``results_<setup>.json``, else its gzipped copy, else None."""
    for name in (f"results_{setup}.json", f"results_{setup}.json.gz"):
        if os.path.exists(path := os.path.join(folder, name)):
            return path
    return None


def load_results(folder: str, setup: str) -> dict:
    """The results of ``setup`` in a report's ``folder`` (:func:`results_file`); {} when it has
    none yet."""
    path = results_file(folder, setup)
    return load_json(path) if path else {}


def write_json(path: str, results: dict) -> None:
    """Write ``results`` to ``path`` atomically (a partial run's file stays readable)."""
    with open(path + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(path + ".tmp", path)


def data_variant(data: str, variant: Optional[str] = None) -> str:
    """The variant a report names: ``variant`` if given, else the data folder's name.

    A ``variant`` that is one release folder's name while ``data`` is another's (``--variant hn``
    with ``--data .../en``) is an error: the report would mislabel its numbers.
    """
    from fairseq_acvi.data.babi import RELEASE_VARIANTS
    folder = os.path.basename(os.path.normpath(data))
    if not variant:
        return folder
    if variant != folder and variant in RELEASE_VARIANTS and folder in RELEASE_VARIANTS:
        raise ValueError(f"--variant {variant} but --data is the release's {folder!r} folder "
                         f"({data}); pass the {variant} folder or drop --variant")
    return variant


def check_variant(results: dict, variant: str, where: str) -> None:
    """Refuse results recorded for another variant (runs from before variants were recorded
    carry none and pass)."""
    other = sorted({i["variant"] for i in results.values() if i.get("variant")} - {variant})
    if other:
        raise ValueError(f"{where} holds results for variant {', '.join(other)}, not {variant}: "
                         f"use another --out-dir")
