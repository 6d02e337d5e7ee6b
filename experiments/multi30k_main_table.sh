#!/usr/bin/env bash
# The Multi30K tables of the results overview (En->De, or En->Fr with PAIR=en_fr): `soft`, ACVI and
# ACVI's deterministic control (the same normalised model trained and decoded on the mean context:
# `--acvi-train-samples 0 --mc-samples 0`, variant `acvi-det`); on request also fairseq's own `lstm`
# at the same size and the other context inferences (`none`, `structured`, `variational`, `ved`).
# The presets as they are, 20 epochs without early stopping, decoded by recipes/mt_multi30k.sh
# (valid, test2016, test2017; beam 10), then the report with every run's hypotheses kept beside it,
# so that each BLEU of the table can be scored again.
# Usage (repository root); one process per variant list, two processes use both cores:
#   VARIANTS="soft acvi-det" bash experiments/multi30k_main_table.sh
#   VARIANTS="acvi" bash experiments/multi30k_main_table.sh
#   STAGE=report OUT=docs/results/multi30k_<date> bash experiments/multi30k_main_table.sh
#   PAIR=en_fr VARIANTS="lstm soft acvi acvi-det" bash experiments/multi30k_main_table.sh
# Each run trains in $RUNS/$PAIR/<variant>_seed<N> and resumes from its checkpoint_last.pt.
# KEPT: folders that hold runs kept by earlier reports (a results page's outputs/<pair>/): a run
# found there (KEPT/<variant>_seed<N>), decoded on all three splits, is not trained again, and the
# report reads it from there (a kept run is a run folder for the report: its hypotheses, scores
# and train.log lines).
# KEEP: a results page where each run is kept (keep_runs: hypotheses, scores, run.json, the lines of
# train.log a report reads) the moment it is decoded, so that a table trained over several machines
# loses no finished run; KEEP/outputs/<pair> is then also read as a KEPT folder.
# The report pairs the variants seed by seed, for the pairs VARIANTS holds: the paired bootstrap
# interval of ACVI minus `soft`, the control minus `soft`, ACVI minus the control, `soft` minus
# fairseq's `lstm` and each of `structured`, `variational`, `ved` minus `soft`, on every split
# (mt_report --intervals, from the hypotheses and the references in REFS_DIR).
# Options: VARIANTS (soft acvi acvi-det; also lstm none structured variational ved), SEEDS (1 2 3),
# PAIR (en_de | en_fr), STAGE (train | report | all), RUNS (runs/multi30k), KEPT (space-separated
# folders), KEEP (a results page), OUT (the report's folder; STAGE=report and all), REFS_DIR (data-bin/multi30k_$PAIR/raw:
# the references of the intervals).
# About 1.5-2.5 h per run on one core.
set -euo pipefail
VARIANTS="${VARIANTS:-soft acvi acvi-det}"
SEEDS="${SEEDS:-1 2 3}"
PAIR="${PAIR:-en_de}"
STAGE="${STAGE:-train}"
RUNS="${RUNS:-runs/multi30k}"
KEPT="${KEPT:-}"
KEEP="${KEEP:-}"
OUT="${OUT:-}"
REFS_DIR="${REFS_DIR:-data-bin/multi30k_$PAIR/raw}"
PYTHON="${PYTHON:-python}"
case "$STAGE" in train|report|all) ;; *) echo "error: STAGE=$STAGE: train, report or all" >&2; exit 2 ;; esac
case "$PAIR" in en_de|en_fr) ;; *) echo "error: PAIR=$PAIR: en_de or en_fr" >&2; exit 2 ;; esac
KNOWN="soft acvi acvi-det lstm none structured variational ved"
for v in $VARIANTS; do
  [[ " $KNOWN " == *" $v "* ]] || { echo "error: VARIANTS: '$v' is not one of $KNOWN" >&2; exit 2; }
done
[[ "$STAGE" == train || -n "$OUT" ]] || { echo "error: OUT: the report's folder is needed with STAGE=$STAGE" >&2; exit 2; }
for k in $KEPT; do [[ -d "$k" ]] || { echo "error: KEPT: $k: no such folder" >&2; exit 2; }; done
source "$(dirname "$0")/../recipes/lib_check.sh"
check_outside_runs KEEP
[[ -z "$KEEP" ]] || KEPT="$KEEP/outputs/$PAIR $KEPT"

finished() { [[ -f "$1/bleu_valid.json" && -f "$1/bleu_test2016.json" && -f "$1/bleu_test2017.json" ]]; }
kept_run() {  # kept_run VARIANT SEED: the first kept copy of that run, decoded on every split
  local k
  for k in $KEPT; do
    if finished "$k/${1}_seed$2"; then echo "$k/${1}_seed$2"; return 0; fi
  done
  return 1
}

if [[ "$STAGE" != report ]]; then
  for v in $VARIANTS; do
    for seed in $SEEDS; do
      if kept=$(kept_run "$v" "$seed"); then echo "[experiment] $v seed $seed: kept in $kept"; continue; fi
      extra=()
      if [[ "$v" == acvi-det ]]; then context=acvi tag=det extra=(--acvi-train-samples 0 --mc-samples 0)
      else context="$v" tag=; fi
      CONTEXT="$context" TAG="$tag" SEEDS="$seed" PAIR="$PAIR" RUNS="$RUNS" MAX_EPOCH=20 PATIENCE=0 ABLATE=0 \
        SKIP_DONE=1 bash recipes/mt_multi30k.sh ${extra[@]+"${extra[@]}"}
      if [[ -n "$KEEP" ]]; then
        finished "$RUNS/$PAIR/${v}_seed$seed" || { echo "error: $v seed $seed: not decoded on every split" >&2; exit 1; }
        "$PYTHON" -m fairseq_acvi.cli.keep_runs "$RUNS/$PAIR/${v}_seed$seed" --out-dir "$KEEP"
      fi
    done
  done
fi

if [[ "$STAGE" != train ]]; then
  folders=()
  for v in $VARIANTS; do
    for seed in $SEEDS; do
      run="$RUNS/$PAIR/${v}_seed$seed"
      if finished "$run"; then folders+=("$run")
      elif kept=$(kept_run "$v" "$seed"); then folders+=("$kept")
      else echo "error: $v seed $seed: neither $run nor a KEPT folder holds its three decodes" >&2; exit 2; fi
    done
  done
  base=(); [[ " $VARIANTS " == *" soft "* ]] && base=(--paired-base soft)
  pairs=()
  for p in soft:acvi soft:acvi-det acvi-det:acvi lstm:soft soft:structured soft:variational soft:ved; do
    [[ " $VARIANTS " == *" ${p%%:*} "* && " $VARIANTS " == *" ${p##*:} "* ]] && pairs+=("$p")
  done
  intervals=(); [[ ${#pairs[@]} -gt 0 ]] && intervals=(--intervals "${pairs[@]}" --refs-dir "$REFS_DIR")
  "$PYTHON" -m fairseq_acvi.cli.mt_report "${folders[@]}" --out-dir "$OUT" --keep-outputs \
    ${base[@]+"${base[@]}"} ${intervals[@]+"${intervals[@]}"}
fi
