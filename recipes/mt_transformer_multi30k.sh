#!/usr/bin/env bash
# Multi30K (task 1) En->De with transformers (issue 24): fairseq's own `transformer` against
# `acvi_transformer` with soft and with ACVI encoder-decoder attention (docs/method.md §2.6), all at
# the size of the `acvi_transformer_multi30k` preset (3+3 layers, 256-d, FFN 1024, 4 heads, shared
# decoder input/output embeddings, dropout 0.3), the same optimiser (Adam β = (0.9, 0.98),
# inverse-sqrt schedule with a linear warm-up, weight decay 1e-4), the same `elbo` criterion with
# label smoothing 0.1 (on fairseq's transformer it is its cross-entropy: no loss terms). Per system
# and seed: train (early stopping on validation likelihood), decode valid / test2016 / test2017 with
# beam 10, score tokenised lower-cased BLEU and detokenised sacreBLEU, as recipes/mt_multi30k.sh
# does for the LSTMs (the same data, decoding and scoring: its results are the LSTM rows to put
# beside these). Collect with
#   python -m fairseq_acvi.cli.mt_report runs/multi30k_transformer --compare transformer soft-transformer
# (run.json: fairseq's model is context `transformer`; ours are `soft` / `acvi` with tag `transformer`).
#
# Run from the repo root:
#   SYSTEMS="transformer soft acvi" SEEDS="1 2 3" bash recipes/mt_transformer_multi30k.sh [extra fairseq-train args]
#
# Cost (measured 2026-11-26 with the smoke run below, one thread each, on a 2-core machine shared
# with two other training jobs (load ≈ 4-5): pessimistic): after the first update, training ran at
# 550-690 target words/s for fairseq's transformer, 600-630 for the soft model and 630-810 for ACVI
# (the load varied; benchmarks/bench_transformer.py, interleaved: ACVI 0.97-1.00× fairseq's
# transformer). An epoch of Multi30K is 29,000 pairs, 389,706 German target tokens (</s> included):
# 8-12 minutes; MAX_EPOCH=30 is then 4-6 hours of training per run, plus the beam-10 decoding of
# three 1,000-sentence splits (ACVI averages K = 10 samples: 0.26-0.32× the speed of K = 1 on a
# CPU, benchmarks/bench_transformer.py). The full 3 systems × 3 seeds is about two days of one core
# (one day on two); on a GPU, an hour or two.
# In the smoke run fairseq's transformer and the soft model (same seed) logged identical losses
# (13.565, 13.676, 13.592; valid 13.594): the soft model is fairseq's transformer.
# The hyper-parameters (LR, WARMUP, MAX_EPOCH) are fairseq's IWSLT transformer recipe scaled down to
# Multi30K's ~117 updates an epoch; they are not tuned (no full run of this recipe has been made).
#
# Smoke test of the whole pipeline (a few updates, cheap decoding; writes under /tmp):
#   RUNS=/tmp/mt_tx_smoke SEEDS=1 MAX_UPDATE=3 BEAM=2 GEN_ARGS="--max-len-a 0 --max-len-b 5" \
#     EVAL_SPLITS=test2016 bash recipes/mt_transformer_multi30k.sh
#
# Options (env vars):
#   SYSTEMS="transformer soft acvi"   transformer = fairseq's --arch transformer at the same size;
#                      soft / acvi = --arch $ARCH --context-inference soft / acvi
#   PAIR=en_de SEEDS=1 ARCH=acvi_transformer_multi30k (acvi_transformer_iwslt_de_en: the IWSLT size)
#   MAX_EPOCH=30 PATIENCE=5 MAX_UPDATE=0 (0 = no limit)   early stopping on validation nll_loss
#   LR=0.001 WARMUP=500 LABEL_SMOOTHING=0.1 MAX_TOKENS=4000 CLIP_NORM=0
#   BEAM=10 GEN_BATCH=128 GEN_ARGS="--max-len-a 2 --max-len-b 10"
#   EVAL_SPLITS="valid test2016 test2017"   MC_SWEEP=  (ACVI: extra K values decoded, e.g. "0 1 5 20")
#   TRAIN=1 (0: evaluate the existing checkpoint_best.pt)
#   RUNS=runs/multi30k_transformer DATA_BIN=data-bin/multi30k_$PAIR (data_scripts/prepare_multi30k.sh)
#   THREADS=1 DEVICE=cpu|cuda PYTHON=python USER_DIR=fairseq_acvi
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
THREADS="${THREADS:-1}"
DEVICE="${DEVICE:-cpu}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"

mt_split_pair "$PAIR"
read -r -a SYSTEM_LIST <<< "$SYSTEMS"
for system in "${SYSTEM_LIST[@]}"; do mt_require_choice SYSTEMS "$system" transformer soft acvi; done
read -r -a SPLITS <<< "${EVAL_SPLITS:-valid test2016 test2017}"
for split in "${SPLITS[@]}"; do mt_require_choice EVAL_SPLITS "$split" valid test2016 test2017; done
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
