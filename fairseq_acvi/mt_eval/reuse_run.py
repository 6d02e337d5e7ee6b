"""One finished Multi30K run (recipes/mt_multi30k.sh) counted again under another tag, e.g. the
default ``soft`` runs of the results tables as the ``softmax`` rows of the normalisers' comparison
(recipes/mt_normalizers.sh, ``SOFTMAX_FROM``): softmax is the default normaliser, so the same
training would be run twice.

The source is checked first: a finished training (``checkpoint_best.pt`` and a decode with its
BLEU for every split), of the expected context, with no option that changes the model the tag
names (``--attention-normalizer`` other than the tag's), trained under the same epoch budget
and patience as the runs it is compared with. Then the destination folder gets copies of the
small files (``run.json`` with the new tag and ``reused_from``, ``train.log``, ``gen_*.txt``,
``bleu_*.json``) and a relative link to the checkpoint. Running it again on the same pair does
nothing; a destination that holds another run is refused.

``--decode-normalizer N`` makes instead the softmax-trained model *decoded with* normaliser N in
place of softmax (recipes/mt_normalizers.sh, ``DECODE_SWAP``): ``run.json`` records
``decode_normalizer``, only ``train.log`` and the checkpoint link are carried over, and the
recipe decodes the folder again with ``--model-overrides``. Its source may be a softmax run
itself counted under the tag ``softmax``.

    python -m fairseq_acvi.mt_eval.reuse_run runs/multi30k/en_de/soft_seed1 \\
        runs/normalizers/en_de/soft-softmax_seed1 --tag softmax --max-epoch 20 --patience 0
"""
import argparse
import json
import os
import shutil
import sys
from typing import List, Optional

from fairseq_acvi.data.json_numbers import read_json
from fairseq_acvi.modules.context.normalizers import NORMALIZERS
from fairseq_acvi.mt_eval.normalizer_table import trained_normalizer
from fairseq_acvi.mt_eval.runs import SPLITS



class ReuseError(ValueError):
    """A source that cannot stand for the tagged run, or a destination that holds another."""


def _meta(path: str) -> dict:
    try:
        meta = read_json(path, "a run of recipes/mt_multi30k.sh records itself there")
    except ValueError as e:
        raise ReuseError(str(e)) from None
    if not isinstance(meta, dict):
        raise ReuseError(f"{path}: not a run record (a JSON object)")
    return meta


def check_source(src: str, tag: str, context: str, max_epoch: int, patience: int,
                 splits=SPLITS, decode_normalizer: Optional[str] = None) -> dict:
    """The source's run.json after every check of the module docstring; ReuseError naming the
    file and what is wrong otherwise."""
    meta_path = os.path.join(src, "run.json")
    meta = _meta(meta_path)
    wrong = []
    if meta.get("context") != context:
        wrong.append(f"context {meta.get('context')!r}, not {context!r}")
    if meta.get("tag") and not (decode_normalizer and meta["tag"] == "softmax"):
        wrong.append(f"tag {meta['tag']!r} (a variant, not the default model)")
    named = trained_normalizer(meta.get("extra_train_args"))
    if decode_normalizer and named not in (None, "softmax"):
        wrong.append(f"trained with --attention-normalizer {named}, not softmax")
    elif not decode_normalizer and named and named != tag:
        wrong.append(f"trained with --attention-normalizer {named}")
    for key, want in (("max_epoch", max_epoch), ("patience", patience)):
        if meta.get(key) != want:
            wrong.append(f"{key} {meta.get(key)!r}, not {want} (another budget)")
    if wrong:
        raise ReuseError(f"{meta_path}: cannot stand for the {tag} run: " + "; ".join(wrong))
    needed = ["checkpoint_best.pt", "train.log"] + [f for s in splits
                                                    for f in (f"gen_{s}.txt", f"bleu_{s}.json")]
    missing = [f for f in needed if not os.path.isfile(os.path.join(src, f))]
    if missing:
        raise ReuseError(f"{src}: not a finished run (missing {', '.join(missing)})")
    return meta


def reuse(src: str, dst: str, tag: str, context: str, max_epoch: int, patience: int,
          splits=SPLITS, decode_normalizer: Optional[str] = None) -> bool:
    """Make ``dst`` the run ``src`` under ``tag`` (module docstring), or with
    ``decode_normalizer`` the folder of its decodes with that normaliser. -> True if made, False
    if ``dst`` already was it."""
    if decode_normalizer is not None and decode_normalizer not in NORMALIZERS:
        raise ReuseError(f"--decode-normalizer: unknown value {decode_normalizer!r}; choose from "
                         f"{', '.join(NORMALIZERS)}")
    meta = check_source(src, tag, context, max_epoch, patience, splits, decode_normalizer)
    origin = os.path.relpath(os.path.abspath(src), os.path.abspath(dst))
    dst_meta_path = os.path.join(dst, "run.json")
    if os.path.exists(dst_meta_path):
        have = _meta(dst_meta_path)
        if have.get("reused_from") == origin and have.get("tag") == tag:
            return False
        raise ReuseError(f"{dst}: holds another run ({dst_meta_path}: reused_from "
                         f"{have.get('reused_from')!r}, tag {have.get('tag')!r}); remove it first")
    os.makedirs(dst, exist_ok=True)
    carried = ["train.log"]
    if decode_normalizer is None:
        carried += [f for s in splits for f in (f"gen_{s}.txt", f"bleu_{s}.json")]
    for name in carried:
        shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
    link = os.path.join(dst, "checkpoint_best.pt")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join(origin, "checkpoint_best.pt"), link)
    trained_as = os.path.basename(os.path.normpath(src))
    if decode_normalizer is None:
        new = dict(meta, tag=tag, reused_from=origin,
                   reuse_note=f"trained as {trained_as}: the same model and budget ({tag} is its default)")
    else:
        new = dict(meta, tag=tag, reused_from=origin, decode_normalizer=decode_normalizer,
                   reuse_note=f"trained as {trained_as} with softmax; decoded with "
                              f"{decode_normalizer} in its place (--model-overrides)")
    tmp = dst_meta_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:            # run.json last: a finished copy
        json.dump(new, f, indent=1)
        f.write("\n")
    os.replace(tmp, dst_meta_path)
    return True


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("src", help="the finished run folder")
    p.add_argument("dst", help="the run folder to make")
    p.add_argument("--tag", required=True, help="the tag it stands for (e.g. softmax)")
    p.add_argument("--context", default="soft")
    p.add_argument("--max-epoch", type=int, required=True, help="the compared runs' epoch budget")
    p.add_argument("--patience", type=int, required=True, help="their early-stopping patience")
    p.add_argument("--splits", default=",".join(SPLITS))
    p.add_argument("--decode-normalizer", default=None, metavar="N",
                   help="make the folder of the softmax model decoded with normaliser N instead")
    a = p.parse_args(argv)
    try:
        made = reuse(a.src, a.dst, a.tag, a.context, a.max_epoch, a.patience,
                     tuple(s for s in a.splits.split(",") if s), a.decode_normalizer)
    except ReuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    how = f"{a.tag}, decoded with {a.decode_normalizer}" if a.decode_normalizer else a.tag
    print(f"{a.dst}: {'made from' if made else 'already'} {a.src} as {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
