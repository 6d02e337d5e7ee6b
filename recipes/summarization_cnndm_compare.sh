#!/usr/bin/env bash
# CNN/DailyMail: several finished runs of recipes/summarization_cnndm.sh in one table. Decodes each
# run before its coverage phase and at its end on fixed test subsets (decodes already done are kept),
# then scores them beside lead-3 and See et al.'s outputs, with paired bootstraps against the first run.
# From the repository root: RUNS="soft=DIR acvi=DIR ..." OUT=docs/results/cnndm_DATE \
#   bash recipes/summarization_cnndm_compare.sh   (variables: docs/recipes/summarization_cnndm.md)
set -euo pipefail
RUNS="${RUNS:-}"
OUT="${OUT:-}"
DATA="${DATA:-data-bin/cnndm_see}"
SUBSETS="${SUBSETS:-test_every5 test_realsumm test_summeval}"
SCHEDULE="${SCHEDULE:-cpu}"
BEFORE_PHASE="${BEFORE_PHASE:-}"
EARLIER="${EARLIER:-}"
REPORT_METEOR="${REPORT_METEOR:-none}"
PYTHON="${PYTHON:-python}"

die() { echo "[compare] error: $*" >&2; exit 2; }
[[ -n "$RUNS" ]] || die "RUNS is empty: give NAME=SAVE_DIR pairs, the first one the base of the paired tests"
[[ -n "$OUT" ]] || die "OUT is empty: the report folder, e.g. docs/results/cnndm_$(date +%F)"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib_check.sh"
check_optional positive_int BEFORE_PHASE
[[ "$REPORT_METEOR" == none ]] || check_choice_list REPORT_METEOR , exact full
[[ -n "${SUBSETS// /}" ]] || _check_fail SUBSETS "a list of test subsets of DATA" "$SUBSETS"
recipe_settings RUNS OUT DATA SUBSETS SCHEDULE BEFORE_PHASE EARLIER REPORT_METEOR PYTHON

names=(); saves=()
for run in $RUNS; do
  name="${run%%=*}"; save="${run#*=}"
  [[ "$run" == *=* && -n "$name" && -n "$save" ]] || die "RUNS entry '$run' is not NAME=SAVE_DIR"
  [[ -d "$save" ]] || die "RUNS entry '$run': no folder $save"
  names+=("$name"); saves+=("$save")
done

# the phases a run has (phase1 .. phaseN folders); all runs must have the same number
nph=""
for save in "${saves[@]}"; do
  n=$(find "$save" -maxdepth 1 -type d -name 'phase[0-9]*' | wc -l)
  [[ -z "$nph" || "$n" == "$nph" ]] || die "$save has $n phase folders, ${saves[0]} has $nph: runs of other schedules"
  nph="$n"
done
(( nph >= 2 )) || die "${saves[0]} has $nph phase folder(s): a finished run has the phase before coverage and the coverage phase"
BEFORE_PHASE="${BEFORE_PHASE:-$((nph - 1))}"

# decode what is not decoded yet (the recipe writes SAVE/hyp_SUBSET[_phaseP].txt)
for i in "${!names[@]}"; do
  for sub in $SUBSETS; do
    for phase in "$BEFORE_PHASE" "$nph"; do
      hyp="${saves[$i]}/hyp_${sub}.txt"
      (( phase < nph )) && hyp="${saves[$i]}/hyp_${sub}_phase${phase}.txt"
      if [[ -f "$hyp" ]]; then
        echo "[compare] ${names[$i]}: $hyp exists, not decoded again"
        continue
      fi
      echo "[compare] ${names[$i]}: decoding $sub from phase $phase"
      TRAIN=0 DATA="$DATA" SAVE="${saves[$i]}" SCHEDULE="$SCHEDULE" SUBSET="$sub" DECODE_PHASE="$phase" \
        PYTHON="$PYTHON" bash "$here/summarization_cnndm.sh"
      [[ -f "$hyp" ]] || die "the recipe wrote no $hyp: does SCHEDULE=$SCHEDULE have the $nph phases of ${saves[$i]}?"
    done
  done
done

# one table: before / after coverage for every run, coverage's effect, paired tests against run 1
args=()
for sub in $SUBSETS; do args+=(--subset "$sub"); done
for i in "${!names[@]}"; do
  before="${names[$i]} (ours, phase $BEFORE_PHASE)"; after="${names[$i]} + coverage (ours)"
  args+=(--system "$before=${saves[$i]}/hyp_{subset}_phase${BEFORE_PHASE}.txt"
         --system "$after=${saves[$i]}/hyp_{subset}.txt"
         --coverage-pair "$before:$after" --paired "$before:$after")
  if (( i > 0 )); then
    args+=(--paired "${names[0]} (ours, phase $BEFORE_PHASE):$before"
           --paired "${names[0]} + coverage (ours):$after")
  fi
done
for e in $EARLIER; do args+=(--earlier "$e"); done
"$PYTHON" -m fairseq_acvi.cli.summ_report --data "$DATA" "${args[@]}" --meteor "$REPORT_METEOR" \
  --keep-outputs --out-dir "$OUT"
