"""The results files of a report (``results_<setup>.json``: key "arch|tasks" -> info of the
chosen run, with every run under "runs") and the bAbI variant they record."""
import json
import os
from typing import Optional


def load_json(path: str) -> dict:
    """The results in ``path``; {} when there is no such file yet."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


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
