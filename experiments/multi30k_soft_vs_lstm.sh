#!/usr/bin/env bash
# Baseline check on real data: the plugin's `soft` attention LSTM against fairseq's own `lstm`
# (--arch lstm --encoder-bidirectional) at the same size, data and budget, trained side by side
# (one thread each, started together, so words/s compare under equal load), then compared by
# the translation report: validation perplexity ratio, test2016/test2017 BLEU difference and the
# training words/s ratio (soft / lstm).
# Run from the repo root (about 2 × 50 min of CPU; the two runs use both cores of 2):
#   SEEDS="1" PAIR=en_de bash experiments/multi30k_soft_vs_lstm.sh
# Existing runs with a checkpoint_best.pt are reused (TRAIN=0) unless RETRAIN=1; an interrupted
# run resumes from its checkpoint_last.pt. Options: PAIR, SEEDS, RUNS (runs/multi30k),
# OUT (report folder, default $RUNS/report_soft_vs_lstm) and any env option of recipes/mt_multi30k.sh.
set -euo pipefail
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1}"
RUNS="${RUNS:-runs/multi30k}"
OUT="${OUT:-$RUNS/report_soft_vs_lstm}"
RETRAIN="${RETRAIN:-0}"
PYTHON="${PYTHON:-python}"
export PAIR RUNS PYTHON
pids=()
for context in lstm soft; do
  for seed in $SEEDS; do
    run="$RUNS/$PAIR/${context}_seed$seed"
    if [[ "$RETRAIN" != "1" && -f "$run/checkpoint_best.pt" && -f "$run/bleu_test2017.json" ]]; then
      echo "[bench] reusing $run"; continue
    fi
    mkdir -p "$RUNS/logs"
    CONTEXT="$context" SEEDS="$seed" MC_SWEEP="" \
      bash recipes/mt_multi30k.sh > "$RUNS/logs/${PAIR}_${context}_seed$seed.log" 2>&1 &
    pids+=($!)
  done
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[[ "$status" == 0 ]] || { echo "[bench] a run failed: see $RUNS/logs/" >&2; exit 1; }
runs=()
for context in lstm soft; do for seed in $SEEDS; do runs+=("$RUNS/$PAIR/${context}_seed$seed"); done; done
"$PYTHON" -m fairseq_acvi.cli.mt_report "${runs[@]}" --out-dir "$OUT" \
  --title "Multi30K $PAIR: soft attention (plugin) vs fairseq lstm" --compare lstm soft
