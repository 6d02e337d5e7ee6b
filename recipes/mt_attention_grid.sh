#!/usr/bin/env bash
# Seed 003's attention grid on Multi30K En->De: no attention, and 4 scorers x 3
# configurations ((i) encoder, (ii) + the decoder's past, (iii) + self-attention), soft attention,
# one seed each (STAGE=grid); more seeds of the best two cells and of (i) with their scorers
# (STAGE=seeds); ACVI in the best cell's configuration (STAGE=acvi); the tables beside seed 003's
# Table 1 (STAGE=report). Every cell is one run of recipes/mt_multi30k.sh. From the repository
# root (DRY_RUN=1: the settings and the plan only):
#   STAGE=grid bash recipes/mt_attention_grid.sh
# Every variable, the outputs and the cost: docs/recipes/mt_attention_grid.md
set -euo pipefail

STAGE="${STAGE:-grid}"
PAIR="${PAIR:-en_de}"
SCORERS="${SCORERS:-additive multiplicative scaled-dot key-value}"
CONFIGS="${CONFIGS:-i ii iii}"
BASELINE="${BASELINE:-1}"
HEADS="${HEADS:-2}"
INPUT_FEEDING="${INPUT_FEEDING:-0}"
GRID_SEED="${GRID_SEED:-1}"
BEST_SEEDS="${BEST_SEEDS:-1 2 3}"
ACVI_SEEDS="${ACVI_SEEDS:-1 2 3}"
ACVI_VARIANTS="${ACVI_VARIANTS:-acvi}"   # STAGE=acvi: acvi and/or control (the deterministic control)
RUNS="${RUNS:-runs/mt_attention_grid}"
CELL_ABLATE="${CELL_ABLATE:-0}"
DATA_BIN="${DATA_BIN:-data-bin/multi30k_$PAIR}"   # as recipes/mt_multi30k.sh's; STAGE=report reads raw/
REPORT_DIR="${REPORT_DIR:-}"
KEPT="${KEPT:-}"   # earlier reports' kept run folders (REPORT_DIR/outputs/PAIR), space-separated
ATTN_STATS="${ATTN_STATS:-1}"      # 1: each trained cell's attention statistics (sharpness, DROP-attn)
STATS_SPLIT="${STATS_SPLIT:-valid}"
KV_INNER="${KV_INNER:-multiplicative}"   # the key-value cells' --key-value-inner (grid stage only)
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"
mt_process_defaults

check_choice STAGE grid seeds acvi report
mt_split_pair "$PAIR"
check_choice_list SCORERS ' ' additive multiplicative scaled-dot key-value
check_choice_list CONFIGS ' ' i ii iii
check_choice BASELINE 0 1
check_positive_int HEADS
check_choice INPUT_FEEDING 0 1
check_int GRID_SEED
check_int_list BEST_SEEDS ACVI_SEEDS
check_choice_list ACVI_VARIANTS ' ' acvi control
check_choice CELL_ABLATE 0 1
check_choice ATTN_STATS 0 1
check_choice STATS_SPLIT valid test2016 test2017
check_choice KV_INNER additive multiplicative scaled-dot
[[ "$KV_INNER" == "multiplicative" || "$STAGE" == "grid" ]] \
  || _check_fail KV_INNER "multiplicative (the grid's scorer of the keys) outside STAGE=grid" "$KV_INNER"
for kept in $KEPT; do
  [[ -d "$kept" ]] || _check_fail KEPT "folders of kept run folders (an earlier REPORT_DIR/outputs/$PAIR)" "$KEPT"
done
[[ "$STAGE" != "report" || -n "$REPORT_DIR" ]] \
  || _check_fail REPORT_DIR "a folder with STAGE=report" "$REPORT_DIR"
if [[ -n "$REPORT_DIR" ]]; then   # the report keeps run.json copies: inside, they would be read as runs
  case "$(realpath -m -- "$REPORT_DIR")/" in
    "$(realpath -m -- "$RUNS/$PAIR")/"*)
      _check_fail REPORT_DIR "a folder outside RUNS/PAIR ($RUNS/$PAIR)" "$REPORT_DIR" ;;
  esac
fi

cell_args() {  # cell_args SCORER CONFIG: the fairseq-train options of a cell. (iii) is seed 003's
  # Table 1 row "attn on encoder and decoder + self-attention": (ii) with self-attention added.
  # INPUT_FEEDING=0: seed 003's decoder reads only the previous word (its l. 115)
  local args="--input-feeding $INPUT_FEEDING --attention-type $1"
  [[ "$1" == "key-value" && "$KV_INNER" != "multiplicative" ]] && args+=" --key-value-inner $KV_INNER"
  [[ "$2" == "ii" || "$2" == "iii" ]] && args+=" --attend-decoder-past"
  [[ "$2" == "iii" ]] && args+=" --self-attention-heads $HEADS"
  echo "$args"
}
cell_tag() {  # cell_tag SCORER CONFIG: the TAG of a grid cell's run (key-value-scaled-dot-i: a
  # key-value cell with another scorer of its keys, KV_INNER, is a control outside seed 003's grid)
  if [[ "$1" == "key-value" && "$KV_INNER" != "multiplicative" ]]; then echo "$1-$KV_INNER-$2"
  else echo "$1-$2"; fi
}
cell_dir() {  # cell_dir CONTEXT TAG SEED: the run folder recipes/mt_multi30k.sh writes
  echo "$RUNS/$PAIR/${1}${2:+-$2}_seed$3"
}
best_cells() {  # best_cells N: the N grid cells (SCORER CONFIG, one per line) of highest validation
  # BLEU (bleu_detok of bleu_valid.json, seed GRID_SEED); exit 2 naming a cell without one
  "$PYTHON" - "$1" "$GRID_SEED" "$SCORERS" "$CONFIGS" "$RUNS/$PAIR" $KEPT <<'EOF_PY'
import json, sys
from pathlib import Path
n, seed, scorers, configs, roots = int(sys.argv[1]), *sys.argv[2:5], [Path(r) for r in sys.argv[5:]]
scores = []
for s in scorers.split():
    for c in configs.split():
        paths = [r / f"soft-{s}-{c}_seed{seed}" / "bleu_valid.json" for r in roots]
        found = [p for p in paths if p.is_file()]
        if not found:
            sys.exit(f"[recipe] error: {paths[0]} missing (and in KEPT): run STAGE=grid first "
                     "(or narrow SCORERS / CONFIGS)")
        scores.append((json.loads(found[0].read_text())["bleu_detok"], s, c))
for bleu, s, c in sorted(scores, reverse=True)[:n]:
    print(s, c)
EOF_PY
}

plan=()   # one line per cell: CONTEXT TAG SEEDS (quoted) TRAIN_ARGS...
case "$STAGE" in
  grid)
    [[ "$BASELINE" == "1" ]] && plan+=("none grid-none '$GRID_SEED' --input-feeding $INPUT_FEEDING")
    for s in $SCORERS; do for c in $CONFIGS; do
      plan+=("soft $(cell_tag "$s" "$c") '$GRID_SEED' $(cell_args "$s" "$c")")
    done; done ;;
  seeds|acvi)
    if [[ "$DRY_RUN" == "1" && ! -d "$RUNS/$PAIR" ]]; then
      echo "[recipe] plan: the cells are chosen from $RUNS/$PAIR's grid results when run"
    else
      mapfile -t best < <(best_cells "$([[ "$STAGE" == "seeds" ]] && echo 2 || echo 1)")
      [[ ${#best[@]} -gt 0 ]] || exit 2
      declare -A seen=()
      for cell in "${best[@]}"; do
        read -r s c <<< "$cell"
        if [[ "$STAGE" == "acvi" ]]; then
          # the control: ACVI's networks trained and decoded on the posterior mean, without the
          # latent noise (docs/method.md §2.2, --acvi-train-samples 0), the run tag det-<cell>
          for v in $ACVI_VARIANTS; do
            if [[ "$v" == "acvi" ]]; then plan+=("acvi $s-$c '$ACVI_SEEDS' $(cell_args "$s" "$c")")
            else plan+=("acvi det-$s-$c '$ACVI_SEEDS' $(cell_args "$s" "$c") --acvi-train-samples 0 --mc-samples 0"); fi
          done
          continue
        fi
        for cc in "$c" i; do              # the cell, and configuration (i) with its scorer
          [[ -n "${seen[$s-$cc]:-}" ]] && continue
          seen[$s-$cc]=1
          plan+=("soft $s-$cc '$BEST_SEEDS' $(cell_args "$s" "$cc")")
        done
      done
    fi ;;
  report)
    echo "[recipe] plan: report $RUNS/$PAIR -> $REPORT_DIR (mt_report --keep-outputs; attention_grid_report," \
      "references $DATA_BIN/raw)" ;;
esac
for line in ${plan[@]+"${plan[@]}"}; do echo "[recipe] plan: $line"; done
recipe_settings STAGE PAIR SCORERS CONFIGS BASELINE HEADS INPUT_FEEDING GRID_SEED BEST_SEEDS ACVI_SEEDS ACVI_VARIANTS RUNS \
  CELL_ABLATE DATA_BIN REPORT_DIR KEPT ATTN_STATS STATS_SPLIT KV_INNER THREADS DEVICE PYTHON USER_DIR

if [[ "$STAGE" == "report" ]]; then
  # mt_report's tables with every run's hypotheses kept, then seed 003's Table 1 beside the grid
  # with the kept runs of earlier reports (KEPT), and this machine's runs where there are any
  sources=($KEPT)
  [[ -d "$RUNS/$PAIR" ]] && sources+=("$RUNS/$PAIR")
  "$PYTHON" -m fairseq_acvi.cli.mt_report "${sources[@]}" --out-dir "$REPORT_DIR" --keep-outputs
  "$PYTHON" -m fairseq_acvi.cli.attention_grid_report "${sources[@]}" --refs-dir "$DATA_BIN/raw" \
    --out-dir "$REPORT_DIR" --grid-seed "$GRID_SEED" --pair "$PAIR"
  echo "[recipe] done: STAGE=report, $REPORT_DIR/report.md, $REPORT_DIR/grid.md"
  exit 0
fi

attention_stats() {  # attention_stats RUN_DIR: the attention of the run's best checkpoint, decoded over
  # STATS_SPLIT with the recipe's beam (docs/method.md §3.5; kept by the report beside the hypotheses)
  local out="$1/attention_stats_$STATS_SPLIT.json"
  [[ "$ATTN_STATS" == "1" && -f "$1/checkpoint_best.pt" && ! -f "$out" ]] || return 0
  "$PYTHON" -m fairseq_acvi.metrics.attention_stats --data "$DATA_BIN" --path "$1/checkpoint_best.pt" \
    --subset "$STATS_SPLIT" --beam "${BEAM:-10}" --max-len-a 2 --max-len-b 10 --out "$out.tmp" > /dev/null
  mv "$out.tmp" "$out"
  echo "[recipe] attention statistics: $out"
}

for line in "${plan[@]}"; do
  eval "cell=($line)"                     # CONTEXT TAG SEEDS ARGS...
  context="${cell[0]}" tag="${cell[1]}" seeds="${cell[2]}"
  todo=""
  for seed in $seeds; do                  # a seed already decoded, here or in KEPT, is kept
    done_in=""
    for root in "$RUNS/$PAIR" $KEPT; do
      dir="$root/$(basename "$(cell_dir "$context" "$tag" "$seed")")"
      [[ -z "$done_in" && -f "$dir/bleu_test2017.json" ]] && done_in="$dir"
    done
    [[ -n "$done_in" ]] && echo "[recipe] kept: $done_in" || todo+=" $seed"
  done
  if [[ -n "$todo" ]]; then
    CONTEXT="$context" TAG="$tag" SEEDS="${todo# }" PAIR="$PAIR" RUNS="$RUNS" ABLATE="$CELL_ABLATE" \
      DATA_BIN="$DATA_BIN" bash "$(dirname "$0")/mt_multi30k.sh" "${cell[@]:3}"
  fi
  [[ "$context" == "none" ]] && continue  # no attention to measure
  for seed in $seeds; do attention_stats "$(cell_dir "$context" "$tag" "$seed")"; done
done
echo "[recipe] done: STAGE=$STAGE, $RUNS/$PAIR"
