"""JSON files a report reads (a metric tool's ``--out`` / ``--json``, a measures file), with errors
that name the file: the one reader the reports use for such files."""
import json
from typing import Dict, Sequence


def read_json(path: str, what: str):
    """The JSON value of ``path``. ValueError naming ``path`` when it cannot be read or is not
    valid JSON (``what`` says which file was expected, e.g. "the measures of one seed")."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror}; {what})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def read_numbers(path: str, keys: Sequence[str], what: str) -> Dict[str, float]:
    """{key: float} for every key of ``keys`` in the JSON object of ``path``. ValueError naming
    ``path`` when it is not valid JSON (:func:`read_json`), not an object, or lacks one of the keys
    as a number (``what`` says which kind of file was expected, e.g. "an eval_summarization
    --json file")."""
    obj = read_json(path, what)
    missing = [k for k in keys if not isinstance(obj, dict)
               or isinstance(obj.get(k), bool) or not isinstance(obj.get(k), (int, float))]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)} ({what})")
    return {k: float(obj[k]) for k in keys}
