#!/usr/bin/env bash
# Multi30K (task 1, text only) -> fairseq data-bin with a BPE source and a character-level target, the set-up
# of planning attention (docs/method.md §3.4: the paper uses BPE on the source and characters on the target,
# after Chung et al. 2016). Text, splits, checks and raw/ references as data_scripts/prepare_multi30k.sh
# (lower-cased Moses-tokenised tok/ files; splits.json).
#   source: sentencepiece BPE trained on the training source only. VOCAB_SIZE=8000: on Multi30K's 29,000
#           English lines (10,210 word types) 8,000 pieces keep the frequent words whole, close to the
#           word-level path's threshold-2 dictionary (5,917 words), and split the rare ones into pieces
#           instead of <unk> (13.8 pieces per validation sentence for 13.1 words); the paper's 24k
#           pieces (Chung et al.'s WMT'15 set-up) would exceed the corpus's vocabulary.
#   target: characters with a visible word boundary: "a bc" -> "a ▁ b c" (▁ = U+2581), lower-cased like the
#           word-level path; character dictionary from train (threshold 0). data_scripts/score_mt.py
#           --char-target turns generated characters back into words for BLEU / chrF.
# Run from the repo root. Options (env vars):
#   SRC=en TGT=de        direction, any two of en de fr cs
#   MULTI30K_DIR=path    Multi30K task-1 folder holding tok/ (unset: $ACVI_DATA/multi30k if it exists, else
#                        downloaded into data-bin/raw/multi30k)
#   DEST=path            output folder (default data-bin/multi30k_char_${SRC}_${TGT})
#   VOCAB_SIZE=8000      source BPE pieces
#   TRAIN_LINES=0        use only the first N training pairs (smoke runs; PROVENANCE.txt says so); 0 = all
#   WORKERS=1            fairseq-preprocess workers (and sentencepiece threads)
#   PYTHON=python        interpreter with fairseq and sentencepiece installed
set -euo pipefail
SRC="${SRC:-en}"
TGT="${TGT:-de}"
VOCAB_SIZE="${VOCAB_SIZE:-8000}"
TRAIN_LINES="${TRAIN_LINES:-0}"
WORKERS="${WORKERS:-1}"
PYTHON="${PYTHON:-python}"
args=(--src "$SRC" --tgt "$TGT" --vocab-size "$VOCAB_SIZE" --train-lines "$TRAIN_LINES" --workers "$WORKERS")
if [[ -n "${MULTI30K_DIR:-}" ]]; then args+=(--raw-dir "$MULTI30K_DIR"); fi
if [[ -n "${DEST:-}" ]]; then args+=(--dest "$DEST"); fi
exec "$PYTHON" "$(dirname "$0")/prepare_multi30k_char.py" "${args[@]}"
