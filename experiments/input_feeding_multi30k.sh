#!/usr/bin/env bash
# Multi30K En->De, soft and ACVI, with and without input feeding, trained
# for the same wall-clock time on one CPU core: the input-feeding model's 20 epochs.
# Usage (repository root), one context per process (two processes use both cores):
#   ACVI_DATA=../shared/data bash experiments/input_feeding_multi30k.sh soft
#   ACVI_DATA=../shared/data bash experiments/input_feeding_multi30k.sh acvi
# Stage 1 trains the preset (input feeding) for 20 epochs without early stopping, in the recipe's
# own folder ($RUNS/en_de/<context>_seed<N>): the same training as recipes/uncertainty_study.sh's,
# kept when it is there (SKIP_DONE=1 keeps its decodes too). Stage 2 trains the same preset with
# --input-feeding 0 (folder <context>-nofeed_seed<N>) under --stop-time-hours = stage 1's wall time
# at epoch 20 (fairseq's cumulative training time, so a resumed run keeps its budget). Both decode
# valid, test2016 and test2017 with the recipe (beam 10, BLEU and sacreBLEU). Resumable: the same
# command continues from checkpoint_last.pt. SEEDS (default 1), RUNS (default runs/multi30k).
# About 2.5-3 h per training on a quiet core, two trainings per context and seed.
set -euo pipefail
CONTEXT="${1:?usage: input_feeding_multi30k.sh soft|acvi}"
[[ "$CONTEXT" == soft || "$CONTEXT" == acvi ]] || { echo "error: context must be soft or acvi" >&2; exit 2; }
export SEEDS="${SEEDS:-1}" RUNS="${RUNS:-runs/multi30k}" THREADS=1 PATIENCE=0 ABLATE=0
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
for SEED in $SEEDS; do
  log="$RUNS/en_de/${CONTEXT}_seed$SEED/train.log"
  SEEDS="$SEED" CONTEXT="$CONTEXT" TAG= MAX_EPOCH=20 SKIP_DONE=1 bash recipes/mt_multi30k.sh
  budget=$(python3 - "$log" <<'EOF_PY'
import json, sys
wall = None
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        rec = json.loads(line[line.index("{"):])
    except ValueError:
        continue
    if rec.get("epoch") == 20 and "train_wall" in rec and "wall" in rec:
        wall = float(rec["wall"])
if wall is None:
    sys.exit(f"error: {sys.argv[1]} has no end-of-epoch-20 record")
print(f"{wall / 3600:.4f}")
EOF_PY
)
  echo "[experiment] $CONTEXT seed $SEED: budget $budget h (the input-feeding model's 20 epochs)"
  SEEDS="$SEED" CONTEXT="$CONTEXT" TAG=nofeed MAX_EPOCH=1000 bash recipes/mt_multi30k.sh \
    --input-feeding 0 --stop-time-hours "$budget"
done
