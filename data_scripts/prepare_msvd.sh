#!/usr/bin/env bash
# Build the data folder the `video_captioning` task reads (docs/method.md §3.2) from the MSVD/Youtube2Text
# caption files (sents_{train,val,test}_lc_nopunc.txt: 1200 / 100 / 670 videos).
#
#   OUT_DIR/train.tsv valid.tsv test.tsv   VIDEO_ID<TAB>caption (validated copies, LF line ends)
#   OUT_DIR/{split}.videos                 distinct video ids in item order of --caption-eval-unique-videos
#   OUT_DIR/dict.txt                       dictionary of train captions (lower-cased NLTK wordpunct tokens)
#   OUT_DIR/features/VIDEO_ID.npy          with --synthetic: deterministic stand-in features for every video;
#                                          otherwise linked from FEATURES_DIR if set, or left for you to fill
#                                          with data_scripts/extract_video_features.py
#
# Usage (from the repo root):  MSVD_DIR=... | ACVI_DATA=... [OUT_DIR=data-bin/msvd] [MIN_COUNT=1] \
#        [FEATURES_DIR=/path/to/npy] bash data_scripts/prepare_msvd.sh [--synthetic] [--min-count N]
# MSVD_DIR: the folder of the caption files; unset: $ACVI_DATA/msvd (ACVI_DATA: the data root holding msvd/).
# MIN_COUNT / --min-count: words seen fewer times in the training captions map to <unk>.
# Note: the paper's App. B says "the last 600 clips" for test; the standard split files here have 670.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MSVD_DIR="${MSVD_DIR:-${ACVI_DATA:+$ACVI_DATA/msvd}}"
OUT_DIR="${OUT_DIR:-data-bin/msvd}"
MIN_COUNT="${MIN_COUNT:-1}"
FEATURES_DIR="${FEATURES_DIR:-}"
MAX_FRAMES="${MAX_FRAMES:-24}"
FEATURE_DIM="${FEATURE_DIM:-1024}"
PYTHON="${PYTHON:-python}"

SYNTHETIC=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --synthetic) SYNTHETIC=1 ;;
    --min-count) [[ $# -ge 2 ]] || { echo "--min-count needs a value" >&2; exit 2; }; MIN_COUNT="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (flags: --synthetic --min-count N; env vars: MSVD_DIR ACVI_DATA OUT_DIR MIN_COUNT" \
            "FEATURES_DIR MAX_FRAMES FEATURE_DIM PYTHON)" >&2; exit 2 ;;
  esac
  shift
done

if [[ -z "$MSVD_DIR" ]]; then
  echo "error: no caption folder: set MSVD_DIR=<folder with sents_{train,val,test}_lc_nopunc.txt>, or" \
       "ACVI_DATA=<data root holding msvd/> (e.g. ACVI_DATA=../shared/data)" >&2
  exit 2
fi
for f in sents_train_lc_nopunc.txt sents_val_lc_nopunc.txt sents_test_lc_nopunc.txt; do
  [[ -f "$MSVD_DIR/$f" ]] || { echo "missing $MSVD_DIR/$f (set MSVD_DIR)" >&2; exit 1; }
done
mkdir -p "$OUT_DIR"

PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$MSVD_DIR" "$OUT_DIR" "$MIN_COUNT" <<'EOF'
import os, sys
from fairseq_acvi.data.video_features import (build_dictionary, read_caption_file, tokenize_caption,
                                              unique_video_ids)
msvd, out, min_count = sys.argv[1], sys.argv[2], int(sys.argv[3])
splits = {"train": "sents_train_lc_nopunc.txt", "valid": "sents_val_lc_nopunc.txt", "test": "sents_test_lc_nopunc.txt"}
seen = {}
for split, name in splits.items():
    records = read_caption_file(os.path.join(msvd, name))  # raises on any malformed line
    videos = unique_video_ids(records)
    for v in videos:
        if v in seen:
            sys.exit(f"video {v} is in both {seen[v]} and {split}")
        seen[v] = split
    with open(os.path.join(out, f"{split}.tsv"), "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(f"{r.video_id}\t{r.caption}\n")
    with open(os.path.join(out, f"{split}.videos"), "w", encoding="utf-8") as fh:
        fh.write("".join(v + "\n" for v in videos))
    print(f"{split}: {len(records)} captions, {len(videos)} videos")
d = build_dictionary([os.path.join(out, "train.tsv")], min_count=min_count)
d.save(os.path.join(out, "dict.txt"))
print(f"dict.txt: {len(d) - d.nspecial} words (min count {min_count})")
EOF

if [[ "$SYNTHETIC" == 1 ]]; then
  PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$REPO_ROOT/data_scripts/extract_video_features.py" \
    --synthetic --num-frames "$MAX_FRAMES" --feature-dim "$FEATURE_DIM" --out-dir "$OUT_DIR/features" \
    --captions "$OUT_DIR/train.tsv" "$OUT_DIR/valid.tsv" "$OUT_DIR/test.tsv"
elif [[ -n "$FEATURES_DIR" ]]; then
  [[ -d "$FEATURES_DIR" ]] || { echo "FEATURES_DIR=$FEATURES_DIR is not a folder" >&2; exit 1; }
  if [[ -e "$OUT_DIR/features" && ! -L "$OUT_DIR/features" ]]; then
    echo "$OUT_DIR/features exists and is not a link; remove it to link FEATURES_DIR" >&2; exit 1
  fi
  rm -f "$OUT_DIR/features"
  ln -s "$(cd "$FEATURES_DIR" && pwd)" "$OUT_DIR/features"
  echo "features: linked $OUT_DIR/features -> $FEATURES_DIR"
else
  echo "no features yet: run data_scripts/extract_video_features.py --out-dir $OUT_DIR/features ..." \
       "or rerun with --synthetic"
fi
echo "done: $OUT_DIR"
