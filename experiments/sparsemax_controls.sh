#!/usr/bin/env bash
# Two controls of why sparsemax attention trains worse than softmax on Multi30K En->De
# (docs/results/sparse_attention_training_2026-11-29), on one seed, with the recipe's decodes and BLEU:
#   e40   the 20-epoch softmax and sparsemax runs continued from their checkpoint_last.pt to 40 epochs
#         (folders <context>-e40_seed<N>, <context>-sparsemax-e40_seed<N>): a slower learner closes the
#         gap with more epochs, a worse one does not.
#   warm  softmax for WARM_EPOCHS epochs (default 5), then sparsemax to MAX_EPOCH (20, the comparison's
#         budget) from that checkpoint (folder <context>-sparsemax-warm<W>_seed<N>): does a model that
#         learned to align under softmax keep learning under sparsemax? The normaliser has no
#         parameters, so the checkpoint loads unchanged; only the option differs.
# Usage (repository root), one control per process (two processes use both cores):
#   SOFTMAX_RUN=runs/multi30k/en_de/soft_seed1 SPARSEMAX_RUN=runs/normalizers/en_de/soft-sparsemax_seed1 \
#     bash experiments/sparsemax_controls.sh e40
#   bash experiments/sparsemax_controls.sh warm
# Arguments after the first go to every fairseq-train call (e.g. a smaller model for a smoke test).
# Resumable: the same command continues from checkpoint_last.pt (finished decodes kept: SKIP_DONE=1).
# SEED (1), CONTEXT (soft), RUNS (runs/normalizers), WARM_EPOCHS (5), MAX_EPOCH (20). The 20-epoch runs
# come from recipes/mt_multi30k.sh (MAX_EPOCH=20 PATIENCE=0) and recipes/mt_normalizers.sh. Cost on one
# core: e40 about 2 × 2.5 h, warm about 2.5 h.
set -euo pipefail
WHICH="${1:?usage: sparsemax_controls.sh e40|warm [fairseq-train args]}"
shift
SEED="${SEED:-1}"
CONTEXT="${CONTEXT:-soft}"
RUNS="${RUNS:-runs/normalizers}"
WARM_EPOCHS="${WARM_EPOCHS:-5}"
MAX_EPOCH="${MAX_EPOCH:-20}"
source "$(dirname "$0")/../recipes/lib_check.sh"
check_choice WHICH e40 warm
check_positive_int SEED WARM_EPOCHS MAX_EPOCH
(( WARM_EPOCHS < MAX_EPOCH )) || { echo "error: WARM_EPOCHS ($WARM_EPOCHS) must be below MAX_EPOCH ($MAX_EPOCH)" >&2; exit 2; }
export RUNS CONTEXT SEEDS="$SEED" PATIENCE=0 ABLATE=0 SKIP_DONE=1 PYTHONUNBUFFERED=1
recipe="$(dirname "$0")/../recipes/mt_multi30k.sh"

continue_to_40() {  # continue_to_40 FROM TAG [fairseq-train args]: FROM's last checkpoint and log copied
  # into the run folder TAG (not its decodes), then trained on to 40 epochs and decoded
  local from="$1" tag="$2"; shift 2
  local to="$RUNS/en_de/${CONTEXT}-${tag}_seed$SEED"
  [[ -f "$from/checkpoint_last.pt" ]] || { echo "error: $from: no checkpoint_last.pt (a finished 20-epoch run)" >&2; exit 2; }
  if [[ ! -f "$to/checkpoint_last.pt" ]]; then
    mkdir -p "$to"
    cp "$from/checkpoint_last.pt" "$from/checkpoint_best.pt" "$from/train.log" "$to/"
  fi
  TAG="$tag" MAX_EPOCH=40 bash "$recipe" "$@"
}

case "$WHICH" in
  e40)
    continue_to_40 "${SOFTMAX_RUN:?set SOFTMAX_RUN (a 20-epoch softmax run folder)}" e40 "$@"
    continue_to_40 "${SPARSEMAX_RUN:?set SPARSEMAX_RUN (a 20-epoch sparsemax run folder)}" sparsemax-e40 \
      --attention-normalizer sparsemax "$@" ;;
  warm)
    to="$RUNS/en_de/${CONTEXT}-sparsemax-warm${WARM_EPOCHS}_seed$SEED"
    # stage 1: softmax for WARM_EPOCHS epochs, decoded on valid only (what the model had learned)
    TAG="softmax-e$WARM_EPOCHS" MAX_EPOCH="$WARM_EPOCHS" EVAL_SPLITS=valid bash "$recipe" "$@"
    if [[ ! -f "$to/checkpoint_last.pt" ]]; then
      mkdir -p "$to"
      cp "$RUNS/en_de/${CONTEXT}-softmax-e${WARM_EPOCHS}_seed$SEED/checkpoint_last.pt" \
        "$RUNS/en_de/${CONTEXT}-softmax-e${WARM_EPOCHS}_seed$SEED/train.log" "$to/"
    fi
    # stage 2: sparsemax from that checkpoint to MAX_EPOCH, the comparison's budget
    TAG="sparsemax-warm$WARM_EPOCHS" MAX_EPOCH="$MAX_EPOCH" bash "$recipe" --attention-normalizer sparsemax "$@" ;;
esac
