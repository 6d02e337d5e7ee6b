#!/usr/bin/env bash
# Translation on any corpus prepared by fairseq-acvi-prepare-parallel: per seed train (Adam, early
# stopping and the best checkpoint by validation likelihood), decode every split but train (beam
# search), score BLEU against raw/, write run.json for fairseq-acvi-mt-report. From the repository root:
#   DATA_BIN=data-bin/my_corpus [CONTEXT=acvi SEEDS="1 2 3"] bash recipes/mt_parallel.sh [extra fairseq-train args]
# Every variable, the outputs and the cost: docs/recipes/mt_parallel.md
set -euo pipefail

DATA_BIN="${DATA_BIN:-}"
CONTEXT="${CONTEXT:-acvi}"
SEEDS="${SEEDS:-1}"
TAG="${TAG:-}"
ARCH="${ARCH:-acvi_lstm_multi30k}"
MAX_EPOCH="${MAX_EPOCH:-50}"
PATIENCE="${PATIENCE:-5}"
LR="${LR:-0.001}"
CLIP_NORM="${CLIP_NORM:-1.0}"
MAX_TOKENS="${MAX_TOKENS:-4000}"
TRAIN_ARGS="${TRAIN_ARGS:-}"
BEAM="${BEAM:-5}"
GEN_BATCH="${GEN_BATCH:-128}"
GEN_ARGS="${GEN_ARGS:---max-len-a 2 --max-len-b 10}"
EVAL_SPLITS="${EVAL_SPLITS:-}"
MOSES_DETOK="${MOSES_DETOK:-}"
TRAIN="${TRAIN:-1}"
RUNS="${RUNS:-}"
# the repository of this recipe: scoring script and plugin found from any working folder
REPO_ROOT="$(cd "$(dirname "$0")" && pwd -P)/.."
USER_DIR="${USER_DIR:-$REPO_ROOT/fairseq_acvi}"
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"
mt_process_defaults
mt_check_run_settings

[[ -n "$DATA_BIN" ]] || { echo "[recipe] error: set DATA_BIN to a folder written by fairseq-acvi-prepare-parallel" >&2; exit 2; }
[[ -f "$DATA_BIN/corpus.json" && -f "$DATA_BIN/splits.json" ]] || {
  echo "[recipe] error: $DATA_BIN/corpus.json or splits.json missing: DATA_BIN must be written by fairseq-acvi-prepare-parallel" >&2; exit 2; }
mt_require_choice CONTEXT "$CONTEXT" none soft acvi structured variational ved
RUNS="${RUNS:-runs/$(basename "$DATA_BIN")}"

# languages, the --remove-bpe value and the named splits, from the tool's records
corpus="$("$PYTHON" - "$DATA_BIN" <<'EOF_PY'
import json, sys
folder = sys.argv[1]
try:
    rec = json.load(open(f"{folder}/corpus.json", encoding="utf-8"))
    splits = [s for s in json.load(open(f"{folder}/splits.json", encoding="utf-8")) if s != "train"]
    print(rec["src"], rec["tgt"], rec.get("remove_bpe") or "-", " ".join(splits))
except (ValueError, KeyError, TypeError) as e:
    print(f"[recipe] error: {folder}/corpus.json or splits.json is not as fairseq-acvi-prepare-parallel "
          f"writes it ({e!r}); prepare the data again", file=sys.stderr)
    sys.exit(2)
EOF_PY
)"
read -r SRC TGT REMOVE_BPE ALL_SPLITS <<< "$corpus"
read -r -a SPLITS <<< "${EVAL_SPLITS:-$ALL_SPLITS}"
read -r -a all_splits <<< "$ALL_SPLITS"
for split in "${SPLITS[@]}"; do mt_require_choice EVAL_SPLITS "$split" "${all_splits[@]}"; done
[[ "$REMOVE_BPE" == "-" ]] || GEN_ARGS="$GEN_ARGS --remove-bpe $REMOVE_BPE"
PAIR="${SRC}_${TGT}"
EVAL_SPLITS="${SPLITS[*]}"
recipe_settings DATA_BIN SRC TGT CONTEXT SEEDS TAG ARCH MAX_EPOCH PATIENCE LR CLIP_NORM MAX_TOKENS TRAIN_ARGS \
  BEAM GEN_BATCH GEN_ARGS EVAL_SPLITS MOSES_DETOK TRAIN RUNS THREADS DEVICE PYTHON USER_DIR
model_args=(--arch "$ARCH" --context-inference "$CONTEXT" --criterion elbo --best-checkpoint-metric nll_loss)
read -r -a train_args <<< "$TRAIN_ARGS"
splits_json="$(printf '%s\n' "${SPLITS[@]}" | "$PYTHON" -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))')"

for SEED in $SEEDS; do
  RUN="$RUNS/${CONTEXT}${TAG:+-$TAG}_seed$SEED"
  CKPT="$RUN/checkpoint_best.pt"
  mkdir -p "$RUN"
  if [[ "$TRAIN" == "1" ]]; then
    mt_write_json "$RUN/run.json" pair="$PAIR" context="$CONTEXT" tag="$TAG" seed:="$SEED" arch="$ARCH" \
      max_epoch:="$MAX_EPOCH" patience:="$PATIENCE" lr:="$LR" max_tokens:="$MAX_TOKENS" device="$DEVICE" \
      extra_train_args="$TRAIN_ARGS${TRAIN_ARGS:+${*:+ }}$*" data="$DATA_BIN" splits:="$splits_json"
    mt_train "${model_args[@]}" -- ${train_args[@]+"${train_args[@]}"} "$@"
  fi
  [[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
  for split in "${SPLITS[@]}"; do
    mt_generate "$split" "$RUN/gen_$split.txt"
    moses=(); [[ -n "$MOSES_DETOK" ]] && moses=(--moses-detok "$MOSES_DETOK")
    "$PYTHON" "$REPO_ROOT/data_scripts/score_mt.py" --gen "$RUN/gen_$split.txt" --ref "$DATA_BIN/raw/$split.$TGT" \
      ${moses[@]+"${moses[@]}"} --label "[$PAIR ${CONTEXT}${TAG:+-$TAG} seed $SEED $split] " \
      --json "$RUN/bleu_$split.json"
  done
  echo "[recipe] done: $RUN"
done
