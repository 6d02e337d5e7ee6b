#!/usr/bin/env bash
# Multi30K (task 1) En->De / En->Fr with any context-inference variant, on real data, sized for a CPU:
# per seed train, decode valid/test2016/test2017 (beam 10), BLEU and sacreBLEU, source-use ablation
# and Monte-Carlo sweep for latent variants. From the repository root:
#   CONTEXT=acvi PAIR=en_de SEEDS="1 2 3" bash recipes/mt_multi30k.sh [extra fairseq-train args]
# Every variable, the outputs and the cost: docs/recipes/mt_multi30k.md
set -euo pipefail

CONTEXT="${CONTEXT:-soft}"
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1}"
TAG="${TAG:-}"
ARCH="${ARCH:-acvi_lstm_multi30k}"
MAX_EPOCH="${MAX_EPOCH:-12}"
PATIENCE="${PATIENCE:-3}"
LR="${LR:-0.001}"
CLIP_NORM="${CLIP_NORM:-1.0}"
MAX_TOKENS="${MAX_TOKENS:-4000}"
BEAM="${BEAM:-10}"
GEN_BATCH="${GEN_BATCH:-128}"
GEN_ARGS="${GEN_ARGS:---max-len-a 2 --max-len-b 10}"
MC_SWEEP="${MC_SWEEP:-}"
MC_COMBINE="${MC_COMBINE:-}"     # empty: the checkpoint's own rule (its --mc-combine)
MC_SAMPLING="${MC_SAMPLING:-}"   # empty: the checkpoint's own rule (its --mc-sampling)
MC_GEN_SEED="${MC_GEN_SEED:-1}"
ABLATE="${ABLATE:-1}"
TRAIN="${TRAIN:-1}"
SKIP_DONE="${SKIP_DONE:-0}"
RUNS="${RUNS:-runs/multi30k}"
DATA_BIN="${DATA_BIN:-data-bin/multi30k_$PAIR}"
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"
mt_process_defaults

mt_split_pair "$PAIR"
mt_require_choice CONTEXT "$CONTEXT" none soft acvi structured variational ved lstm
[[ -z "$MC_COMBINE" ]] || mt_require_choice MC_COMBINE "$MC_COMBINE" prob geometric
[[ -z "$MC_SAMPLING" ]] || mt_require_choice MC_SAMPLING "$MC_SAMPLING" iid antithetic
check_int MC_GEN_SEED
EVAL_SPLITS="${EVAL_SPLITS:-valid test2016 test2017}"
DEFAULT_DECODE="${DEFAULT_DECODE:-1}"
check_choice_list EVAL_SPLITS ' ' valid test2016 test2017
read -r -a SPLITS <<< "$EVAL_SPLITS"
mt_check_run_settings
check_optional int_list MC_SWEEP
check_choice ABLATE 0 1
check_choice SKIP_DONE 0 1
check_choice DEFAULT_DECODE 0 1
recipe_settings CONTEXT PAIR SRC TGT SEEDS TAG ARCH MAX_EPOCH PATIENCE LR CLIP_NORM MAX_TOKENS BEAM \
  GEN_BATCH GEN_ARGS MC_SWEEP MC_COMBINE MC_SAMPLING MC_GEN_SEED ABLATE TRAIN SKIP_DONE DEFAULT_DECODE \
  EVAL_SPLITS RUNS DATA_BIN THREADS DEVICE PYTHON USER_DIR
mt_ensure_data data_scripts/prepare_multi30k.sh

if [[ "$CONTEXT" == "lstm" ]]; then
  # fairseq's own attentional LSTM at the preset's size (its --arch lstm initialises U(-0.1, 0.1))
  model_args=(--arch lstm --encoder-bidirectional --encoder-layers 1 --decoder-layers 1
    --encoder-embed-dim 256 --encoder-hidden-size 256 --decoder-embed-dim 256
    --decoder-hidden-size 256 --decoder-out-embed-dim 256 --dropout 0.3 --criterion cross_entropy
    --best-checkpoint-metric loss)   # cross_entropy's loss is the likelihood (it logs no nll_loss)
  STOCHASTIC=0
else
  model_args=(--arch "$ARCH" --context-inference "$CONTEXT" --criterion elbo --best-checkpoint-metric nll_loss)
  STOCHASTIC=0; [[ "$CONTEXT" == "acvi" ]] && STOCHASTIC=1
fi

done_after_ckpt() {  # done_after_ckpt FILE PATTERN: SKIP_DONE=1 and FILE, complete (it holds PATTERN),
  # is newer than the checkpoint: an evaluation already made (a file cut short is made again)
  [[ "$SKIP_DONE" == "1" && -f "$1" && "$1" -nt "$CKPT" ]] && grep -q -- "$2" "$1" \
    && echo "[recipe] kept (SKIP_DONE=1): $1"
}
decode() {  # decode SPLIT NAME [model overrides] [AGAINST]: writes gen_NAME.txt and bleu_NAME.json
  done_after_ckpt "$RUN/bleu_$2.json" '"bleu_tok"' && return 0
  mt_generate "$1" "$RUN/gen_$2.txt" "${3:-}"
  score "$1" "$2" "${4:-}"
}
score() {  # score SPLIT NAME [AGAINST]: bleu_NAME.json of gen_NAME.txt; with AGAINST (another decode
  # of this model, e.g. the mean context valid_K0, made after the checkpoint) also the paired
  # bootstrap of the difference
  local against=()
  [[ -n "${3:-}" && "$3" != "$2" && "$RUN/gen_$3.txt" -nt "$CKPT" ]] && against=(--against "$RUN/gen_$3.txt")
  "$PYTHON" data_scripts/score_mt.py --gen "$RUN/gen_$2.txt" --ref "$DATA_BIN/raw/$1.$TGT" \
    --moses-detok "$TGT" --label "[$PAIR ${CONTEXT}${TAG:+-$TAG} seed $SEED $2] " --json "$RUN/bleu_$2.json" \
    ${against[@]+"${against[@]}"}
}
validate() {  # validate NAME [model overrides]: validation likelihood into validate_NAME.log
  local name="$1" overrides="${2:-}" extra=()
  done_after_ckpt "$RUN/validate_$name.log" '| valid | {' && return 0
  [[ -n "$overrides" ]] && extra=(--model-overrides "$overrides")
  mt_cpu_flag
  "$PYTHON" -m fairseq_cli.validate "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    --path "$CKPT" --valid-subset "$(mt_subset valid)" --max-tokens "$MAX_TOKENS" --log-format json \
    ${cpu_flag[@]+"${cpu_flag[@]}"} ${extra[@]+"${extra[@]}"} > "$RUN/validate_$name.log" 2>&1
}

for SEED in $SEEDS; do
  RUN="$RUNS/$PAIR/${CONTEXT}${TAG:+-$TAG}_seed$SEED"
  CKPT="$RUN/checkpoint_best.pt"
  mkdir -p "$RUN"
  if [[ "$TRAIN" == "1" ]]; then
    mt_write_json "$RUN/run.json" pair="$PAIR" context="$CONTEXT" tag="$TAG" seed:="$SEED" \
      arch="$([[ "$CONTEXT" == "lstm" ]] && echo lstm || echo "$ARCH")" max_epoch:="$MAX_EPOCH" \
      patience:="$PATIENCE" lr:="$LR" max_tokens:="$MAX_TOKENS" device="$DEVICE" extra_train_args="$*"
    mt_train "${model_args[@]}" -- "$@"
  fi
  [[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }

  if [[ "$DEFAULT_DECODE" == "1" ]]; then
    for split in "${SPLITS[@]}"; do decode "$split" "$split"; done
  fi
  if [[ "$CONTEXT" != "lstm" && "$CONTEXT" != "none" && "$ABLATE" == "1" ]]; then
    # A stochastic context is ablated on its mean (K = 0: deterministic, and K times cheaper than
    # averaging K samples over the full softmax); the baseline is then the K = 0 decode.
    k_over=""; base=valid
    if [[ "$STOCHASTIC" == "1" ]]; then
      k_over="'mc_samples': 0, "; base=valid_K0
      decode valid valid_K0 "{'mc_samples': 0}"
      # the default decode (K samples) against the mean context, now that both exist
      if [[ "$RUN/gen_valid.txt" -nt "$CKPT" ]] && ! done_after_ckpt "$RUN/bleu_valid.json" '"paired"'; then
        score valid valid valid_K0
      fi
    elif [[ " ${SPLITS[*]} " != *" valid "* || "$DEFAULT_DECODE" != "1" ]]; then
      decode valid valid
    fi
    mt_write_json "$RUN/ablate.json" base="$base" mc_samples:="$([[ "$STOCHASTIC" == "1" ]] && echo 0 || echo null)"
    validate valid "{${k_over%, }}"
    for ab in zero shuffle; do
      decode valid "valid_ablate-$ab" "{${k_over}'context_ablation': '$ab'}" "$base"
      validate "valid_ablate-$ab" "{${k_over}'context_ablation': '$ab'}"
    done
  fi
  if [[ "$STOCHASTIC" == "1" && -n "$MC_SWEEP" ]]; then
    # The sweep decodes with the checkpoint's own --mc-combine / --mc-sampling (the presets'
    # choice, or what its training command set) under the names <split>_K<k>. MC_COMBINE=prob|
    # geometric and MC_SAMPLING=iid|antithetic impose a rule on the model and name the decodes
    # <split>_K<k>-<combine>-<sampling> (K = 0, the mean context, is the same under every rule)
    combine="" suffix=""
    [[ -n "$MC_COMBINE" ]] && combine=", 'mc_combine': '$MC_COMBINE'" suffix="-$MC_COMBINE"
    [[ -n "$MC_SAMPLING" ]] && combine+=", 'mc_sampling': '$MC_SAMPLING'" suffix+="-$MC_SAMPLING"
    # MC_GEN_SEED=N (not 1, fairseq-generate's default): the samples of another random seed
    # (--seed N), decodes named ...-seedN — the spread of a K-sample decode over its draws
    [[ "$MC_GEN_SEED" != "1" ]] && suffix+="-seed$MC_GEN_SEED"
    for K in $MC_SWEEP; do
      [[ "$K" == "0" ]] && name_k="K0" || name_k="K$K$suffix"
      for split in "${SPLITS[@]}"; do
        GEN_ARGS="$GEN_ARGS --seed $MC_GEN_SEED" decode "$split" "${split}_$name_k" \
          "{'mc_samples': $K$combine}" "${split}_K0"
      done
    done
  fi
  echo "[recipe] done: $RUN"
done
