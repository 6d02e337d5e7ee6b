#!/usr/bin/env bash
# WMT'16 En<->Ro (joint sentencepiece BPE) with any context-inference variant (METHOD.md §3.3; §5, P Table 4).
# Trains, then decodes valid (newsdev2016) and test (newstest2016) with beam 10 and prints sacrebleu BLEU
# (detokenised: sentencepiece output vs the raw references) next to the paper's figures. Run from the repo root:
#   CONTEXT=acvi bash recipes/mt_wmt16_en_ro.sh [extra fairseq-train args]
# Options (env vars):
#   CONTEXT=acvi        none | soft | acvi | structured | variational | ved
#   SRC=en TGT=ro       direction (or SRC=ro TGT=en)
#   SMOKE=0             1: smoke data (newsdev2016 split 3 ways; NOT the paper's setting)
#   DATA_BIN            default data-bin/wmt16_en_ro_${SRC}_${TGT}[_smoke]; built by data_scripts/ if missing
#   WMT_DIR, VOCAB_SIZE passed to the data script
#   SAVE_DIR            default checkpoints/mt_wmt16_en_ro_${SRC}_${TGT}_${CONTEXT}[_smoke]
#   MAX_EPOCH=12 LR=1.0 ANNEAL_FROM=8 (SGD, lr halved every epoch from this one on) BATCH_SIZE=128 CLIP_NORM=5
#   SEED=1  TRAIN=1 (0: skip training, evaluate SAVE_DIR/checkpoint_best.pt)
#   BEAM=10  MC_SAMPLES (unset: the model's default K=10; 0 = deterministic mean)  GEN_BATCH=64
#   GEN_ARGS            extra fairseq-generate args
#   USER_DIR=fairseq_acvi  PYTHON=python
set -euo pipefail
CONTEXT="${CONTEXT:-acvi}"
SRC="${SRC:-en}"
TGT="${TGT:-ro}"
SMOKE="${SMOKE:-0}"
suffix=""; [[ "$SMOKE" == "1" ]] && suffix="_smoke"
DATA_BIN="${DATA_BIN:-data-bin/wmt16_en_ro_${SRC}_${TGT}${suffix}}"
SAVE_DIR="${SAVE_DIR:-checkpoints/mt_wmt16_en_ro_${SRC}_${TGT}_${CONTEXT}${suffix}}"
MAX_EPOCH="${MAX_EPOCH:-12}"
LR="${LR:-1.0}"
ANNEAL_FROM="${ANNEAL_FROM:-8}"
BATCH_SIZE="${BATCH_SIZE:-128}"
CLIP_NORM="${CLIP_NORM:-5}"
SEED="${SEED:-1}"
TRAIN="${TRAIN:-1}"
BEAM="${BEAM:-10}"
MC_SAMPLES="${MC_SAMPLES:-}"
GEN_BATCH="${GEN_BATCH:-64}"
GEN_ARGS="${GEN_ARGS:-}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"

if [[ ! -f "$DATA_BIN/dict.$SRC.txt" ]]; then
  echo "[recipe] $DATA_BIN missing: building it with data_scripts/prepare_wmt16_en_ro.sh"
  SRC="$SRC" TGT="$TGT" SMOKE="$SMOKE" DEST="$DATA_BIN" PYTHON="$PYTHON" bash data_scripts/prepare_wmt16_en_ro.sh
fi
grep -h "^mode:" "$DATA_BIN/PROVENANCE.txt" 2>/dev/null | sed 's/^/[recipe] data /' || true
mkdir -p "$SAVE_DIR"

if [[ "$TRAIN" == "1" ]]; then
  "$PYTHON" -m fairseq_cli.train "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    --arch acvi_lstm_wmt_en_ro --context-inference "$CONTEXT" --criterion elbo \
    --optimizer sgd --lr "$LR" --lr-scheduler fixed --force-anneal "$ANNEAL_FROM" --lr-shrink 0.5 \
    --clip-norm "$CLIP_NORM" --batch-size "$BATCH_SIZE" --max-epoch "$MAX_EPOCH" --seed "$SEED" \
    --save-dir "$SAVE_DIR" --no-epoch-checkpoints --log-format simple --log-interval 100 \
    "$@" 2>&1 | tee "$SAVE_DIR/train.log"
fi

CKPT="$SAVE_DIR/checkpoint_best.pt"
[[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
overrides=()
if [[ -n "$MC_SAMPLES" ]]; then overrides=(--model-overrides "{'mc_samples': $MC_SAMPLES}"); fi
for split in valid test; do
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.generate "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    --path "$CKPT" --gen-subset "$split" --beam "$BEAM" --nbest 1 --remove-bpe sentencepiece \
    --batch-size "$GEN_BATCH" ${overrides[@]+"${overrides[@]}"} $GEN_ARGS > "$SAVE_DIR/gen_$split.txt"
  "$PYTHON" data_scripts/score_mt.py --gen "$SAVE_DIR/gen_$split.txt" --ref "$DATA_BIN/raw/$split.$TGT" \
    --detok-only --label "[$CONTEXT $SRC->$TGT $split] " --json "$SAVE_DIR/bleu_$split.json" \
    | tee -a "$SAVE_DIR/bleu.txt"
done

# Published BLEU dev/test (P Table 4; METHOD.md §5), soft-attention baseline vs ACVI.
case "$SRC-$TGT" in
  en-ro) paper="baseline 12.87 / 14.40, ACVI 14.15 / 15.78" ;;
  ro-en) paper="baseline 15.87 / 15.78, ACVI 18.07 / 17.78" ;;
  *) paper="(none)" ;;
esac
echo "[paper, P Table 4] $SRC->$TGT BLEU dev/test: $paper" | tee -a "$SAVE_DIR/bleu.txt"
if [[ "$SMOKE" == "1" ]]; then
  echo "[recipe] SMOKE data: 1,599 newsdev2016 pairs for training -- NOT comparable with the paper" | tee -a "$SAVE_DIR/bleu.txt"
fi
