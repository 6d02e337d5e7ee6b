#!/usr/bin/env python
"""Keep only the captions of videos that have features: a data folder for a subset of MSVD's clips.

``data_scripts/prepare_msvd.sh`` writes captions for all 1970 videos; when features were extracted for a
few clips only (e.g. the 5 clips of ``$ACVI_DATA/msvd/mlds_subset/video``), this rewrites
``DATA/{train,valid,test}.tsv`` and ``DATA/{split}.videos`` in place with the lines of the videos that
have ``DATA/features/VIDEO_ID.npy`` (the dictionary is left as it is) and prints how many videos each split
keeps. A split left with no video is an error, except valid with ``--valid-from-test``: then valid is a
copy of the kept test split (only for smoke runs: validation then looks at the test videos).

    python data_scripts/subset_captions.py DATA [--valid-from-test]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DataError, run_main  # noqa: E402
from fairseq_acvi.data.video_features import read_caption_file, unique_video_ids  # noqa: E402

SPLITS = ("train", "valid", "test")


def subset(data: str, valid_from_test: bool = False) -> Dict[str, List[str]]:
    """Rewrite DATA's caption files to the videos with features; returns {split: kept video ids}."""
    feature_dir = os.path.join(data, "features")
    if not os.path.isdir(feature_dir):
        raise DataError(f"{feature_dir}: no feature folder (extract features first)")
    have = {name[:-4] for name in os.listdir(feature_dir)
            if name.endswith(".npy") and not name.endswith(".tmp.npy")}
    kept: Dict[str, List[str]] = {}
    lines: Dict[str, List[str]] = {}
    for split in SPLITS:
        path = os.path.join(data, f"{split}.tsv")
        try:
            records = read_caption_file(path)
        except (OSError, ValueError) as err:
            raise DataError(f"{path}: {err}") from None
        all_videos = unique_video_ids(records)
        kept[split] = [v for v in all_videos if v in have]
        lines[split] = [f"{r.video_id}\t{r.caption}\n" for r in records if r.video_id in have]
        print(f"{split}: {len(kept[split])} of {len(all_videos)} videos have features "
              f"({len(lines[split])} captions kept)")
    if not kept["valid"] and valid_from_test and kept["test"]:
        print("valid: no video with features; using the test videos for validation (--valid-from-test: "
              "a smoke run, not an evaluation)")
        kept["valid"], lines["valid"] = list(kept["test"]), list(lines["test"])
    for split in SPLITS:
        if not kept[split]:
            raise DataError(f"{os.path.join(data, split + '.tsv')}: none of its videos has a feature file in "
                            f"{feature_dir}" + (" (--valid-from-test uses the test videos)" if split == "valid" else ""))
    for split in SPLITS:
        with open(os.path.join(data, f"{split}.tsv"), "w", encoding="utf-8") as fh:
            fh.write("".join(lines[split]))
        with open(os.path.join(data, f"{split}.videos"), "w", encoding="utf-8") as fh:
            fh.write("".join(v + "\n" for v in kept[split]))
    return kept


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="data folder of prepare_msvd.sh with features/")
    p.add_argument("--valid-from-test", action="store_true",
                   help="if no valid video has features, validate on the test videos (smoke runs only)")
    args = p.parse_args(argv)
    subset(args.data, args.valid_from_test)
    return 0


if __name__ == "__main__":
    run_main(main)
