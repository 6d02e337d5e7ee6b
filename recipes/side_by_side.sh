#!/usr/bin/env bash
# Many recipe runs side by side on one machine (a GPU is best used by many small runs at once),
# within a deadline, with their results packed without checkpoints. From the repository root:
#   PLAN=plan.txt JOBS=8 DEADLINE=540 PACK=out/runs.tar.gz bash recipes/side_by_side.sh
# PLAN: one command per line, e.g. `CONTEXT=soft SEEDS=1 bash recipes/mt_multi30k.sh`.
# Every variable, the status file and the exit status: docs/recipes/side_by_side.md
set -uo pipefail
source "$(dirname "$0")/lib_check.sh"

PLAN="${PLAN:-}"
JOBS="${JOBS:-8}"
DEADLINE="${DEADLINE:-0}"
LOGS="${LOGS:-runs/side_by_side}"
RUNS_ROOT="${RUNS_ROOT:-runs}"
PACK="${PACK:-}"
DEVICE="${DEVICE:-cuda}"
PYTHON="${PYTHON:-python3}"
THREADS="${THREADS:-1}"
check_positive_int JOBS THREADS
check_int DEADLINE
check_choice DEVICE cpu cuda
[[ -f "$PLAN" ]] || _check_fail PLAN "a file with one command per line" "$PLAN"
mapfile -t commands < <(grep -v -E '^[[:space:]]*(#|$)' "$PLAN")
[[ ${#commands[@]} -gt 0 ]] || _check_fail PLAN "a file with at least one command" "$PLAN"
recipe_settings PLAN JOBS DEADLINE LOGS RUNS_ROOT PACK DEVICE PYTHON THREADS
export DEVICE PYTHON THREADS OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" PYTHONUNBUFFERED=1

mkdir -p "$LOGS"
status="$LOGS/status.tsv"
printf 'line\texit\tseconds\tcommand\n' > "$status"
start=$SECONDS

status_line() {  # status_line N EXIT SECONDS COMMAND: one line of status.tsv
  printf '%s\t%s\t%s\t%s\n' "$@" >> "$status"
}

run_one() {  # run_one N COMMAND: the command under the time left, its exit status in status.tsv
  local n="$1" cmd="$2" t0=$SECONDS rc
  if [[ "$DEADLINE" -gt 0 ]]; then
    local left=$(( DEADLINE - (SECONDS - start) ))
    # timeout signals the command's whole process group: the recipe and the Python it started
    timeout -k 20 "$left" bash -c "$cmd" > "$LOGS/$n.log" 2>&1
  else
    bash -c "$cmd" > "$LOGS/$n.log" 2>&1
  fi
  rc=$?
  status_line "$n" "$rc" "$(( SECONDS - t0 ))" "$cmd"
}

n=0
for cmd in "${commands[@]}"; do
  n=$((n + 1))
  while [[ $(jobs -rp | wc -l) -ge "$JOBS" ]]; do wait -n; done
  if [[ "$DEADLINE" -gt 0 && $(( SECONDS - start )) -ge "$DEADLINE" ]]; then
    status_line "$n" "not started" 0 "$cmd"
    continue
  fi
  echo "[recipe] $n: $cmd"
  run_one "$n" "$cmd" &
done
wait
echo "[recipe] all ended in $(( SECONDS - start )) s; $status:"
cat "$status"
if [[ -n "$PACK" ]]; then
  mkdir -p "$(dirname "$PACK")"
  tar --exclude="*.pt" -czf "$PACK" -C "$(dirname "$RUNS_ROOT")" "$(basename "$RUNS_ROOT")" && echo "[recipe] packed $RUNS_ROOT -> $PACK ($(du -h "$PACK" | cut -f1))"
fi
# success only when every command ran and exited 0
awk -F'\t' 'NR > 1 && $2 != "0" { bad = 1 } END { exit bad }' "$status"
