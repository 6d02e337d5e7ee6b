"""Named figures read from a JSON object file (a metric tool's ``--out`` / ``--json``), with errors
that name the file: the one reader the reports use for such files."""
import json
from typing import Dict, Sequence


def read_numbers(path: str, keys: Sequence[str], what: str) -> Dict[str, float]:
    """{key: float} for every key of ``keys`` in the JSON object of ``path``. ValueError naming
    ``path`` when it is not valid JSON, not an object, or lacks one of the keys as a number
    (``what`` says which kind of file was expected, e.g. "an eval_summarization --json file")."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    missing = [k for k in keys if not isinstance(obj, dict)
               or isinstance(obj.get(k), bool) or not isinstance(obj.get(k), (int, float))]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)} ({what})")
    return {k: float(obj[k]) for k in keys}
