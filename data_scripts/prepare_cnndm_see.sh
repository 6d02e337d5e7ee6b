#!/usr/bin/env bash
# CNN/DailyMail in See et al.'s exact preprocessing (their chunked tf.train.Example files and their vocab
# file) -> the pointer-generator's marker-encoded, binarised data (docs/method.md §3.1).
#   1. data_scripts/read_see_chunks.py: chunks -> line-aligned article / abstract text (no TensorFlow;
#      empty articles dropped and counted, a malformed record stops naming the chunk and record)
#   2. data_scripts/prepare_cnndm.sh with --see-vocab: See's 50k-word vocabulary, <unk-j> markers,
#      truncation, fairseq-preprocess
# Run from the repo root. Options (env vars):
#   SEE_DIR=path      folder with bin/{train,val,test}_NNN.bin[.xz] and vocab (unset: $ACVI_DATA/cnn_dm_see_chunks,
#                     ACVI_DATA being the data root holding cnn_dm_see_chunks/); neither set, or missing -> a
#                     clear error (exit 2)
#   DEST=data-bin/cnndm_see   binarised output; the text files go to $DEST/text
#   VOCAB_SIZE=50000  MAX_SOURCE_POSITIONS=400  MAX_TARGET_POSITIONS=100
#   MAX_RECORDS=      read at most N records per split (smoke runs; read_stats.json says so)
#   PYTHON=python  WORKERS=1
set -euo pipefail
SEE_DIR="${SEE_DIR:-${ACVI_DATA:+$ACVI_DATA/cnn_dm_see_chunks}}"
DEST="${DEST:-data-bin/cnndm_see}"
PYTHON="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ -z "$SEE_DIR" ]]; then
  echo "[data] error: no chunk folder: set SEE_DIR=<See et al.'s chunk folder holding bin/ and vocab>, or" \
       "ACVI_DATA=<data root holding cnn_dm_see_chunks/> (e.g. ACVI_DATA=../shared/data)" >&2
  exit 2
fi
for need in "$SEE_DIR/bin" "$SEE_DIR/vocab"; do
  if [[ ! -e "$need" ]]; then
    echo "[data] error: $need not found (SEE_DIR=$SEE_DIR: See et al.'s chunk folder holding" \
         "bin/{train,val,test}_NNN.bin[.xz] and vocab)" >&2
    exit 2
  fi
done
max=(); [[ -n "${MAX_RECORDS:-}" ]] && max=(--max-records "$MAX_RECORDS")
mkdir -p "$DEST/text"
"$PYTHON" "$HERE/read_see_chunks.py" --chunks "$SEE_DIR/bin" --out-dir "$DEST/text/raw" "${max[@]}"

OUT_DIR="$DEST/text" BIN_DIR="$DEST" PYTHON="$PYTHON" bash "$HERE/prepare_cnndm.sh" \
  --see-vocab "$SEE_DIR/vocab" \
  --train-source "$DEST/text/raw/train.source" --train-target "$DEST/text/raw/train.target" \
  --valid-source "$DEST/text/raw/valid.source" --valid-target "$DEST/text/raw/valid.target" \
  --test-source "$DEST/text/raw/test.source" --test-target "$DEST/text/raw/test.target"
for split in train valid test; do cp "$DEST/text/raw/$split.ids" "$DEST/$split.ids"; done
cp "$DEST/text/raw/read_stats.json" "$DEST/read_stats.json"
echo "[data] done: $DEST (story ids per line: $DEST/{train,valid,test}.ids)"
