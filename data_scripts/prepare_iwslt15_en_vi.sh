#!/usr/bin/env bash
# IWSLT'15 En<->Vi -> fairseq data-bin, word level with the official Stanford vocabularies (docs/method.md §3.3).
# Run from the repo root. Options (env vars):
#   SRC=en TGT=vi        direction (or SRC=vi TGT=en)
#   IWSLT_DIR=path       folder with train/tst2012/tst2013.{en,vi} and vocab.{en,vi}; unset: download them
#   SMOKE=1              no train set available: train on tst2012, valid/test on tst2013 (NOT the paper's setting)
#                        (SMOKE=1, IWSLT_DIR unset: $ACVI_DATA/iwslt15_en_vi if ACVI_DATA names a data root holding it)
#   DEST=path            output folder (default data-bin/iwslt15_${SRC}_${TGT}, with _smoke appended for SMOKE=1)
#   WORKERS=1            fairseq-preprocess workers
#   PYTHON=python        interpreter with fairseq installed
set -euo pipefail
SRC="${SRC:-en}"
TGT="${TGT:-vi}"
SMOKE="${SMOKE:-0}"
WORKERS="${WORKERS:-1}"
PYTHON="${PYTHON:-python}"
args=(--src "$SRC" --tgt "$TGT" --workers "$WORKERS")
if [[ -n "${IWSLT_DIR:-}" ]]; then args+=(--raw-dir "$IWSLT_DIR"); fi
if [[ -n "${DEST:-}" ]]; then args+=(--dest "$DEST"); fi
if [[ "$SMOKE" == "1" ]]; then args+=(--smoke); fi
exec "$PYTHON" "$(dirname "$0")/prepare_iwslt15_en_vi.py" "${args[@]}"
