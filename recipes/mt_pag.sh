#!/usr/bin/env bash
# Planning attention (PAG / rPAG, docs/method.md §3.4) on Multi30K, BPE source and character targets,
# sized for a CPU: per seed train, decode valid and test2016, BLEU and chrF on the output turned back
# into words, replan.json (how often the plan was recomputed). From the repository root:
#   CONTEXT=pag SEEDS="1 2 3" bash recipes/mt_pag.sh [extra fairseq-train args]
# KEEP=docs/results/<page>: each run kept there once decoded, and a kept run not made again.
# Every variable and the outputs: docs/recipes/mt_pag.md
set -euo pipefail

CONTEXT="${CONTEXT:-pag}"
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1}"
TAG="${TAG:-}"
ARCH="${ARCH:-pag_lstm_multi30k_char}"
MAX_EPOCH="${MAX_EPOCH:-12}"
PATIENCE="${PATIENCE:-3}"
LR="${LR:-0.001}"
CLIP_NORM="${CLIP_NORM:-1.0}"
MAX_TOKENS="${MAX_TOKENS:-8000}"
BEAM="${BEAM:-5}"
GEN_BATCH="${GEN_BATCH:-32}"
GEN_ARGS="${GEN_ARGS:---max-len-a 8 --max-len-b 20}"
TRAIN="${TRAIN:-1}"
RUNS="${RUNS:-runs/pag}"
KEEP="${KEEP:-}"
DATA_BIN="${DATA_BIN:-data-bin/multi30k_char_$PAIR}"
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"
mt_process_defaults

mt_split_pair "$PAIR"
mt_require_choice CONTEXT "$CONTEXT" soft pag rpag
EVAL_SPLITS="${EVAL_SPLITS:-valid test2016}"
check_choice_list EVAL_SPLITS ' ' valid test2016 test2017
read -r -a SPLITS <<< "$EVAL_SPLITS"
mt_check_run_settings
check_outside_runs KEEP
recipe_settings CONTEXT PAIR SRC TGT SEEDS TAG ARCH MAX_EPOCH PATIENCE LR CLIP_NORM MAX_TOKENS BEAM \
  GEN_BATCH GEN_ARGS TRAIN EVAL_SPLITS RUNS DATA_BIN KEEP THREADS DEVICE PYTHON USER_DIR
mt_ensure_data data_scripts/prepare_multi30k_char.sh

kept() {  # kept NAME: NAME's run kept in KEEP with a score for every split of EVAL_SPLITS
  local split
  [[ -n "$KEEP" ]] || return 1
  for split in "${SPLITS[@]}"; do [[ -f "$KEEP/outputs/$PAIR/$1/bleu_$split.json" ]] || return 1; done
}

for SEED in $SEEDS; do
  NAME="${CONTEXT}${TAG:+-$TAG}_seed$SEED"
  if kept "$NAME"; then echo "[recipe] kept in $KEEP: $NAME" >&2; continue; fi
  RUN="$RUNS/$PAIR/$NAME"
  CKPT="$RUN/checkpoint_best.pt"
  mkdir -p "$RUN"
  if [[ "$TRAIN" == "1" ]]; then
    mt_write_json "$RUN/run.json" pair="$PAIR" context="$CONTEXT" tag="$TAG" seed:="$SEED" arch="$ARCH" \
      target=characters max_epoch:="$MAX_EPOCH" patience:="$PATIENCE" lr:="$LR" max_tokens:="$MAX_TOKENS" \
      beam:="$BEAM" device="$DEVICE" extra_train_args="$*"
    mt_train --arch "$ARCH" --context-inference "$CONTEXT" --criterion elbo --best-checkpoint-metric nll_loss -- "$@"
  fi
  [[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
  for split in "${SPLITS[@]}"; do
    mt_generate "$split" "$RUN/gen_$split.txt"
    "$PYTHON" data_scripts/score_mt.py --gen "$RUN/gen_$split.txt" --ref "$DATA_BIN/raw/$split.$TGT" \
      --char-target --chrf --moses-detok "$TGT" --label "[$PAIR ${CONTEXT}${TAG:+-$TAG} seed $SEED $split] " \
      --json "$RUN/bleu_$split.json"
  done
  [[ -f "$RUN/train.log" ]] && mt_replan_json "$RUN/train.log" "$RUN/replan.json"
  # hypotheses, scores, replan.json and the train.log lines a report reads, into the results page
  [[ -z "$KEEP" ]] || "$PYTHON" -m fairseq_acvi.cli.keep_runs "$RUN" --out-dir "$KEEP"
  echo "[recipe] done: $RUN"
done
