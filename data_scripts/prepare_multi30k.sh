#!/usr/bin/env bash
# Multi30K (task 1, text only) -> fairseq data-bin, word level on the corpus's own lower-cased Moses-tokenised
# tok/ files (as published text-only baselines; tokenised BLEU against raw/), separate dictionaries from train
# with a frequency threshold. Splits: train, valid (val), test2016 / test2017 (flickr; no test2017 with cs), mapped
# to fairseq subsets in $DEST/splits.json.
# Run from the repo root. Options (env vars):
#   SRC=en TGT=de        direction, any two of en de fr cs
#   MULTI30K_DIR=path    Multi30K task-1 folder holding tok/ (unset: $ACVI_DATA/multi30k if ACVI_DATA names a data
#                        root holding it; otherwise the tok files are downloaded into data-bin/raw/multi30k)
#   DEST=path            output folder (default data-bin/multi30k_${SRC}_${TGT})
#   THRESHOLD=2          words seen fewer times in train become <unk> (fairseq --thresholdsrc/--thresholdtgt)
#   TRAIN_LINES=0        use only the first N training pairs (smoke runs; PROVENANCE.txt says so); 0 = all 29,000
#   WORKERS=1            fairseq-preprocess workers
#   PYTHON=python        interpreter with fairseq installed
set -euo pipefail
SRC="${SRC:-en}"
TGT="${TGT:-de}"
THRESHOLD="${THRESHOLD:-2}"
TRAIN_LINES="${TRAIN_LINES:-0}"
WORKERS="${WORKERS:-1}"
PYTHON="${PYTHON:-python}"
args=(--src "$SRC" --tgt "$TGT" --threshold "$THRESHOLD" --train-lines "$TRAIN_LINES" --workers "$WORKERS")
if [[ -n "${MULTI30K_DIR:-}" ]]; then args+=(--raw-dir "$MULTI30K_DIR"); fi
if [[ -n "${DEST:-}" ]]; then args+=(--dest "$DEST"); fi
exec "$PYTHON" "$(dirname "$0")/prepare_multi30k.py" "${args[@]}"
