#!/usr/bin/env bash
# WMT'16 En<->Ro -> fairseq data-bin with a joint sentencepiece BPE vocabulary (docs/method.md §3.3).
# Run from the repo root. Options (env vars):
#   SRC=en TGT=ro        direction (or SRC=ro TGT=en)
#   WMT_DIR=path         folder with the WMT'16 files (europarl-v8.ro-en.*, SETIMES.en-ro.*, newsdev2016/newstest2016
#                        as plain text or .sgm); unset: download them from statmt.org / OPUS
#   SMOKE=1              newsdev2016 only, split into train/valid/test (NOT the paper's setting)
#                        (SMOKE=1 with WMT_DIR unset: $ACVI_DATA/wmt16_en_ro if ACVI_DATA names a data root holding it)
#   VOCAB_SIZE=32000     sentencepiece BPE pieces (default 32000, 4000 with SMOKE=1; in SMOKE mode an upper bound
#                        that the small corpus may not reach)
#   DEST=path            output folder (default data-bin/wmt16_en_ro_${SRC}_${TGT}, _smoke appended for SMOKE=1)
#   WORKERS=1            fairseq-preprocess workers / sentencepiece threads
#   PYTHON=python        interpreter with fairseq and sentencepiece installed
set -euo pipefail
SRC="${SRC:-en}"
TGT="${TGT:-ro}"
SMOKE="${SMOKE:-0}"
VOCAB_SIZE="${VOCAB_SIZE:-}"
WORKERS="${WORKERS:-1}"
PYTHON="${PYTHON:-python}"
args=(--src "$SRC" --tgt "$TGT" --workers "$WORKERS")
if [[ -n "$VOCAB_SIZE" ]]; then args+=(--vocab-size "$VOCAB_SIZE"); fi
if [[ -n "${WMT_DIR:-}" ]]; then args+=(--raw-dir "$WMT_DIR"); fi
if [[ -n "${DEST:-}" ]]; then args+=(--dest "$DEST"); fi
if [[ "$SMOKE" == "1" ]]; then args+=(--smoke); fi
exec "$PYTHON" "$(dirname "$0")/prepare_wmt16_en_ro.py" "${args[@]}"
