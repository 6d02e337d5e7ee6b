#!/usr/bin/env bash
# Multi30K En->De with transformers (docs/method.md §2.6): fairseq's `transformer` against
# `acvi_transformer` with soft and ACVI attention at one size; train, beam-10 decode, BLEU, as
# recipes/mt_multi30k.sh does for the LSTMs. From the repository root:
# SYSTEMS="transformer soft acvi" SEEDS="1 2 3" bash recipes/mt_transformer_multi30k.sh [fairseq-train args]
# Every variable, the cost and a smoke run: docs/recipes/mt_transformer_multi30k.md
set -euo pipefail

SYSTEMS="${SYSTEMS:-transformer soft acvi}"
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1}"
ARCH="${ARCH:-acvi_transformer_multi30k}"
MAX_EPOCH="${MAX_EPOCH:-30}"
PATIENCE="${PATIENCE:-5}"
MAX_UPDATE="${MAX_UPDATE:-0}"
LR="${LR:-0.001}"
WARMUP="${WARMUP:-500}"
LABEL_SMOOTHING="${LABEL_SMOOTHING:-0.1}"
CLIP_NORM="${CLIP_NORM:-0}"
MAX_TOKENS="${MAX_TOKENS:-4000}"
BEAM="${BEAM:-10}"
GEN_BATCH="${GEN_BATCH:-128}"
GEN_ARGS="${GEN_ARGS:---max-len-a 2 --max-len-b 10}"
MC_SWEEP="${MC_SWEEP:-}"
TRAIN="${TRAIN:-1}"
RUNS="${RUNS:-runs/multi30k_transformer}"
DATA_BIN="${DATA_BIN:-data-bin/multi30k_$PAIR}"
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"
mt_process_defaults

mt_split_pair "$PAIR"
read -r -a SYSTEM_LIST <<< "$SYSTEMS"
for system in "${SYSTEM_LIST[@]}"; do mt_require_choice SYSTEMS "$system" transformer soft acvi; done
EVAL_SPLITS="${EVAL_SPLITS:-valid test2016 test2017}"
check_choice_list EVAL_SPLITS ' ' valid test2016 test2017
read -r -a SPLITS <<< "$EVAL_SPLITS"
check_choice_list SYSTEMS ' ' transformer soft acvi
check_int_list SEEDS
check_positive_int MAX_EPOCH MAX_TOKENS BEAM GEN_BATCH
check_int PATIENCE MAX_UPDATE WARMUP
check_nonneg_number LR CLIP_NORM LABEL_SMOOTHING
check_optional int_list MC_SWEEP
check_choice TRAIN 0 1
recipe_settings SYSTEMS PAIR SRC TGT SEEDS ARCH MAX_EPOCH PATIENCE MAX_UPDATE LR WARMUP LABEL_SMOOTHING \
  CLIP_NORM MAX_TOKENS BEAM GEN_BATCH GEN_ARGS MC_SWEEP TRAIN EVAL_SPLITS RUNS DATA_BIN THREADS DEVICE \
  PYTHON USER_DIR
mt_ensure_data data_scripts/prepare_multi30k.sh

# the preset's sizes, spelled out for fairseq's transformer (fairseq_acvi.models.acvi_transformer)
FAIRSEQ_SIZES="$("$PYTHON" -c 'from fairseq_acvi.models.acvi_transformer import MULTI30K_FAIRSEQ_ARGS as a; print(a)')"
read -r -a fairseq_sizes <<< "$FAIRSEQ_SIZES"
common=(--criterion elbo --label-smoothing "$LABEL_SMOOTHING" --best-checkpoint-metric nll_loss
  --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --warmup-init-lr 1e-07
  --adam-betas "(0.9, 0.98)" --weight-decay 0.0001)
[[ "$MAX_UPDATE" != "0" ]] && common+=(--max-update "$MAX_UPDATE")

for SYSTEM in "${SYSTEM_LIST[@]}"; do
  if [[ "$SYSTEM" == "transformer" ]]; then
    [[ "$ARCH" == "acvi_transformer_multi30k" ]] || { echo "[recipe] error: SYSTEMS=transformer is sized for ARCH=acvi_transformer_multi30k" >&2; exit 2; }
    model_args=(--arch transformer "${fairseq_sizes[@]}" "${common[@]}")
    CONTEXT=transformer; TAG=""; STOCHASTIC=0
  else
    model_args=(--arch "$ARCH" --context-inference "$SYSTEM" "${common[@]}")
    CONTEXT="$SYSTEM"; TAG=transformer; STOCHASTIC=0; [[ "$SYSTEM" == "acvi" ]] && STOCHASTIC=1
  fi
  for SEED in $SEEDS; do
    RUN="$RUNS/$PAIR/${CONTEXT}${TAG:+-$TAG}_seed$SEED"
    CKPT="$RUN/checkpoint_best.pt"
    mkdir -p "$RUN"
    if [[ "$TRAIN" == "1" ]]; then
      mt_write_json "$RUN/run.json" pair="$PAIR" context="$CONTEXT" tag="$TAG" seed:="$SEED" \
        arch="$([[ "$SYSTEM" == "transformer" ]] && echo transformer || echo "$ARCH")" \
        max_epoch:="$MAX_EPOCH" patience:="$PATIENCE" lr:="$LR" warmup:="$WARMUP" \
        label_smoothing:="$LABEL_SMOOTHING" max_tokens:="$MAX_TOKENS" device="$DEVICE" \
        extra_train_args="$*"
      mt_train "${model_args[@]}" -- "$@"
    fi
    [[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
    decode() {  # decode SPLIT NAME [model overrides]: gen_NAME.txt and bleu_NAME.json
      mt_generate "$1" "$RUN/gen_$2.txt" "${3:-}"
      "$PYTHON" data_scripts/score_mt.py --gen "$RUN/gen_$2.txt" --ref "$DATA_BIN/raw/$1.$TGT" \
        --moses-detok "$TGT" --label "[$PAIR ${CONTEXT}${TAG:+-$TAG} seed $SEED $2] " \
        --json "$RUN/bleu_$2.json"
    }
    for split in "${SPLITS[@]}"; do decode "$split" "$split"; done
    if [[ "$STOCHASTIC" == "1" && -n "$MC_SWEEP" ]]; then
      for K in $MC_SWEEP; do
        for split in "${SPLITS[@]}"; do decode "$split" "${split}_K$K" "{'mc_samples': $K}"; done
      done
    fi
    echo "[recipe] done: $RUN"
  done
done
