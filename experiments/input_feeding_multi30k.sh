#!/usr/bin/env bash
# Multi30K En->De, soft and ACVI, with and without input feeding, trained for the same time on
# one quiet CPU core: the input-feeding model's 20 epochs.
# Usage (repository root), one context per process (two processes use both cores):
#   ACVI_DATA=../shared/data bash experiments/input_feeding_multi30k.sh soft
#   ACVI_DATA=../shared/data bash experiments/input_feeding_multi30k.sh acvi
# Stage 1 trains the preset (input feeding) for 20 epochs without early stopping, in the recipe's
# own folder ($RUNS/en_de/<context>_seed<N>): the same training as recipes/uncertainty_study.sh's,
# kept when it is there (SKIP_DONE=1 keeps its decodes too). Stage 2 trains the same preset with
# --input-feeding 0 (folder <context>-nofeed_seed<N>) for as many updates as stage 1's 20 epochs
# take in the same time on one quiet core: --max-update = stage 1's updates × the speed ratio of
# the two models timed side by side on real batches (experiments/input_feeding_budget.py, its
# record kept as budget.json in the folder; a wall-clock budget would depend on how busy the
# machine was during each run). Both decode
# valid, test2016 and test2017 with the recipe (beam 10, BLEU and sacreBLEU). Stage 3, the control
# (CONTROL=0 skips it): the stage-1 model trained on from its 20-epoch checkpoint to stage 2's update
# budget (folder <context>-feedsameupd_seed<N>: the same updates as the no-feed run, more time), and
# decoded alike, so that the page can tell a gain of the decoder from one of the extra updates.
# Resumable: the same
# command continues from checkpoint_last.pt. SEEDS (default 1), RUNS (default runs/multi30k).
# About 2.5-3 h per training on a quiet core, two trainings per context and seed.
# The page: python experiments/input_feeding_report.py --runs $RUNS/en_de --refs-dir
#   data-bin/multi30k_en_de/raw --keep-outputs --out-dir docs/results/<experiment>_<date> (BLEU,
#   paired intervals, the runs' hypotheses kept).
set -euo pipefail
CONTEXT="${1:?usage: input_feeding_multi30k.sh soft|acvi}"
[[ "$CONTEXT" == soft || "$CONTEXT" == acvi ]] || { echo "error: context must be soft or acvi" >&2; exit 2; }
export SEEDS="${SEEDS:-1}" RUNS="${RUNS:-runs/multi30k}" THREADS=1 PATIENCE=0 ABLATE=0
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
for SEED in $SEEDS; do
  log="$RUNS/en_de/${CONTEXT}_seed$SEED/train.log"
  SEEDS="$SEED" CONTEXT="$CONTEXT" TAG= MAX_EPOCH=20 SKIP_DONE=1 bash recipes/mt_multi30k.sh
  # the budget: as many updates as stage 1's 20 epochs take in the same time on one quiet core,
  # timed side by side on real batches (experiments/input_feeding_budget.py); kept, so that a
  # resumed run keeps it
  nofeed_dir="$RUNS/en_de/${CONTEXT}-nofeed_seed$SEED"
  if [[ ! -f "$nofeed_dir/budget.json" ]]; then
    python experiments/input_feeding_budget.py --data "${DATA_BIN:-data-bin/multi30k_en_de}" \
      --context "$CONTEXT" --feed-log "$log" --epoch 20 --seed "$SEED" --out "$nofeed_dir/budget.json"
  fi
  budget=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["budget_updates"])' \
    "$nofeed_dir/budget.json")
  echo "[experiment] $CONTEXT seed $SEED: budget $budget updates (the input-feeding model's 20 epochs)"
  SEEDS="$SEED" CONTEXT="$CONTEXT" TAG=nofeed MAX_EPOCH=1000 SKIP_DONE=1 bash recipes/mt_multi30k.sh \
    --input-feeding 0 --max-update "$budget"
  if [[ "${CONTROL:-1}" == "1" ]]; then
    control_dir="$RUNS/en_de/${CONTEXT}-feedsameupd_seed$SEED"
    if [[ ! -f "$control_dir/checkpoint_last.pt" ]]; then      # starts from stage 1's last checkpoint
      mkdir -p "$control_dir"
      cp "$RUNS/en_de/${CONTEXT}_seed$SEED/checkpoint_last.pt" "$RUNS/en_de/${CONTEXT}_seed$SEED/checkpoint_best.pt" \
        "$control_dir/"
    fi
    echo "[experiment] $CONTEXT seed $SEED: the control, input feeding to $budget updates"
    SEEDS="$SEED" CONTEXT="$CONTEXT" TAG=feedsameupd MAX_EPOCH=1000 SKIP_DONE=1 bash recipes/mt_multi30k.sh \
      --max-update "$budget"
  fi
done
