#!/usr/bin/env bash
# CNN/DailyMail pointer-generator + coverage (docs/method.md §3.1): the paper's phased training
# (P Table 5), beam-5 decoding, OOV restoration, ROUGE / METEOR / novelty. From the repository root,
# after data_scripts/prepare_cnndm.sh: bash recipes/summarization_cnndm.sh [extra fairseq-train args]
# (main ones: CONTEXT=acvi DATA=data-bin/cnndm SAVE SCHEDULE=paper|cpu SCALE=1 TRAIN=1 SUBSET=test).
# Every variable, the phases and resuming: docs/recipes/summarization_cnndm.md
set -euo pipefail
CONTEXT="${CONTEXT:-acvi}"
DATA="${DATA:-data-bin/cnndm}"
SAVE="${SAVE:-checkpoints/cnndm_${CONTEXT}}"
SCALE="${SCALE:-1}"
SCHEDULE="${SCHEDULE:-paper}"
CPU_PHASES="${CPU_PHASES:-2000:50:20:0 4000:100:50:0 5500:200:50:0 6000:400:100:0 6400:400:100:1}"
ARCH="${ARCH:-acvi_pointer_generator}"
LR="${LR:-0.001}"
BATCH="${BATCH:-16}"
CLIP_NORM="${CLIP_NORM:-2}"
SEED="${SEED:-1}"
COVERAGE_WEIGHT="${COVERAGE_WEIGHT:-1}"
SAVE_INTERVAL="${SAVE_INTERVAL:-2000}"
LOG_INTERVAL="${LOG_INTERVAL:-100}"
TRAIN="${TRAIN:-1}"
BEAM="${BEAM:-5}"
MIN_LEN="${MIN_LEN:-35}"
MAX_LEN="${MAX_LEN:-100}"
GEN_BATCH="${GEN_BATCH:-32}"
SUBSET="${SUBSET:-test}"
MC_SAMPLES="${MC_SAMPLES:-}"
SHARDS="${SHARDS:-1}"
SHARD_IDS="${SHARD_IDS:-}"
METEOR="${METEOR:-exact,full}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"
BRANCH_FROM="${BRANCH_FROM:-}"

source "$(dirname "$0")/lib_check.sh"
check_choice CONTEXT none soft acvi structured variational ved pag rpag
check_nonneg_number SCALE LR CLIP_NORM COVERAGE_WEIGHT
check_positive_int BATCH SAVE_INTERVAL LOG_INTERVAL BEAM MAX_LEN GEN_BATCH SHARDS
check_int SEED MIN_LEN
check_optional int MC_SAMPLES
check_optional int_list SHARD_IDS
check_choice TRAIN 0 1
[[ "$METEOR" == none ]] || check_choice_list METEOR , exact full
case "$SCHEDULE" in
  paper) PHASES="71000:10:10:0 116000:50:50:0 184000:100:50:0 223000:200:50:0 250000:400:100:0 253000:400:100:1" ;;
  cpu)   PHASES="$CPU_PHASES" ;;
  *)     PHASES="$SCHEDULE" ;;
esac
ENDS=(); ENC=(); DEC=(); COV=()
for ph in $PHASES; do
  IFS=: read -r e n m c extra <<< "$ph"
  if ! [[ "$e" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ && "$m" =~ ^[0-9]+$ && "$c" =~ ^[01]$ && -z "$extra" ]]; then
    echo "[recipe] error: SCHEDULE phase '$ph' is not END:SOURCE_WORDS:TARGET_TOKENS:COVERAGE(0|1)" >&2; exit 2
  fi
  ENDS+=("$e"); ENC+=("$n"); DEC+=("$m"); COV+=("$c")
done
NPH=${#ENDS[@]}
[[ $NPH -ge 1 ]] || { echo "[recipe] error: SCHEDULE has no phase" >&2; exit 2; }
DECODE_PHASE="${DECODE_PHASE:-$NPH}"
if ! [[ "$DECODE_PHASE" =~ ^[0-9]+$ ]] || (( DECODE_PHASE < 1 || DECODE_PHASE > NPH )); then
  echo "[recipe] error: DECODE_PHASE must be a phase of the schedule, 1..$NPH, got '$DECODE_PHASE'" >&2; exit 2
fi
recipe_settings CONTEXT DATA SAVE SCALE SCHEDULE CPU_PHASES PHASES ARCH LR BATCH CLIP_NORM SEED COVERAGE_WEIGHT \
  SAVE_INTERVAL LOG_INTERVAL TRAIN BEAM MIN_LEN MAX_LEN GEN_BATCH SUBSET DECODE_PHASE MC_SAMPLES SHARDS \
  SHARD_IDS METEOR PYTHON USER_DIR BRANCH_FROM

[[ -f "$DATA/dict.src.txt" ]] || { echo "[recipe] error: $DATA/dict.src.txt missing; run data_scripts/prepare_cnndm.sh" >&2; exit 1; }

# scaled cumulative ends, strictly increasing (each phase >= 1 update)
scaled=()
prev=0
for end in "${ENDS[@]}"; do
  s=$("$PYTHON" -c "import math,sys; print(max(int(math.ceil($end*float(sys.argv[1]))), $prev + 1))" "$SCALE")
  scaled+=("$s"); prev="$s"
done

if [[ "$TRAIN" == "1" ]]; then
  # what the run is trained with, one line for the settings and one per phase (phases.txt): a
  # resumed run must match it, and BRANCH_FROM compares against it
  record=("settings context=$CONTEXT arch=$ARCH lr=$LR batch=$BATCH clip=$CLIP_NORM seed=$SEED coverage_weight=$COVERAGE_WEIGHT args=$*")
  for ((k = 0; k < NPH; k++)); do
    record+=("phase $((k + 1)) end=${scaled[$k]} source=${ENC[$k]} target=${DEC[$k]} coverage=${COV[$k]}")
  done
  mkdir -p "$SAVE"
  if [[ -f "$SAVE/phases.txt" ]]; then
    if [[ "$(cat "$SAVE/phases.txt")" != "$(printf '%s\n' "${record[@]}")" ]]; then
      echo "[recipe] error: $SAVE/phases.txt: the run was trained with other settings or phases;" \
        "use another SAVE (now: $(printf '%s; ' "${record[@]}"))" >&2
      exit 2
    fi
  else
    printf '%s\n' "${record[@]}" > "$SAVE/phases.txt"
  fi
  if [[ -n "$BRANCH_FROM" ]]; then
    # phases 1..N-1 are BRANCH_FROM's when its settings and those phases are ours: the same
    # training, so its checkpoints are copied, not trained again (e.g. a run with coverage in its
    # last phase beside the same run without)
    src_rec="$BRANCH_FROM/phases.txt"
    [[ -f "$src_rec" ]] || { echo "[recipe] error: BRANCH_FROM: $src_rec missing (a run of this recipe records its phases there)" >&2; exit 2; }
    if [[ "$(head -n "$NPH" "$src_rec")" != "$(printf '%s\n' "${record[@]:0:$NPH}")" ]]; then
      echo "[recipe] error: BRANCH_FROM: $src_rec differs from this run before its last phase;" \
        "only a run with the same settings and phases 1..$((NPH - 1)) can be branched" >&2
      exit 2
    fi
    for ((k = 1; k < NPH; k++)); do
      [[ -f "$SAVE/phase$k/checkpoint_last.pt" ]] && continue
      [[ -f "$BRANCH_FROM/phase$k/checkpoint_last.pt" ]] || {
        echo "[recipe] error: BRANCH_FROM: $BRANCH_FROM/phase$k/checkpoint_last.pt missing (train that run first)" >&2; exit 2; }
      mkdir -p "$SAVE/phase$k"
      cp "$BRANCH_FROM/phase$k/checkpoint_last.pt" "$SAVE/phase$k/checkpoint_last.pt.tmp"
      mv "$SAVE/phase$k/checkpoint_last.pt.tmp" "$SAVE/phase$k/checkpoint_last.pt"
      echo "[recipe] phase $k: the same training as $BRANCH_FROM/phase$k (checkpoint copied)"
    done
  fi
  for ((k = 0; k < NPH; k++)); do
    dir="$SAVE/phase$((k + 1))"
    mkdir -p "$dir"
    resume=()
    if [[ -f "$dir/checkpoint_last.pt" ]]; then
      echo "[recipe] phase $((k + 1)): resuming from $dir/checkpoint_last.pt"
    elif [[ $k -gt 0 ]]; then
      resume=(--restore-file "$SAVE/phase$k/checkpoint_last.pt" --reset-dataloader)
    fi
    cov=()
    [[ "${COV[$k]}" == "1" ]] && cov=(--coverage)
    echo "[recipe] phase $((k + 1)): updates -> ${scaled[$k]}, source ${ENC[$k]} words, target ${DEC[$k]} tokens, coverage ${COV[$k]}"
    "$PYTHON" -m fairseq_cli.train "$DATA" --user-dir "$USER_DIR" --task pointer_summarization \
      --source-lang src --target-lang tgt --arch "$ARCH" --context-inference "$CONTEXT" \
      --criterion elbo --coverage-weight "$COVERAGE_WEIGHT" "${cov[@]}" \
      --truncate-source --truncate-target --max-source-positions "$((ENC[k] + 1))" \
      --max-target-positions "${DEC[$k]}" \
      --optimizer adam --lr "$LR" --clip-norm "$CLIP_NORM" --batch-size "$BATCH" \
      --max-update "${scaled[$k]}" --seed "$SEED" --save-dir "$dir" "${resume[@]}" \
      --save-interval-updates "$SAVE_INTERVAL" --keep-interval-updates 1 --no-epoch-checkpoints \
      --log-format simple --log-interval "$LOG_INTERVAL" "$@" 2>&1 | tee -a "$dir/train.log"
  done
fi

[[ -f "$DATA/$SUBSET.article" ]] || { echo "[recipe] error: SUBSET=$SUBSET: $DATA/$SUBSET.article missing (data_scripts/cnndm_subset.py writes subsets)" >&2; exit 1; }
name="$SUBSET"
(( DECODE_PHASE < NPH )) && name="${SUBSET}_phase$DECODE_PHASE"
k=$((DECODE_PHASE - 1))
CKPT="$SAVE/phase$DECODE_PHASE/checkpoint_last.pt"
[[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
overrides=()
if [[ -n "$MC_SAMPLES" ]]; then overrides=(--model-overrides "{'mc_samples': $MC_SAMPLES}"); fi
gen=("$PYTHON" -m fairseq_cli.generate "$DATA" --user-dir "$USER_DIR" --task pointer_summarization
  --source-lang src --target-lang tgt --path "$CKPT" --gen-subset "$SUBSET" --beam "$BEAM"
  --truncate-source --max-source-positions "$((ENC[k] + 1))"
  --truncate-target --max-target-positions "${DEC[$k]}"
  --min-len "$MIN_LEN" --max-len-a 0 --max-len-b "$MAX_LEN" --batch-size "$GEN_BATCH"
  "${overrides[@]}")
# shards are whole batches (fairseq-generate's --distributed-world-size/--distributed-rank): at most one per batch
n_batches=$(( ($(wc -l < "$DATA/$SUBSET.article") + GEN_BATCH - 1) / GEN_BATCH ))
if (( SHARDS > n_batches )); then
  echo "[recipe] SHARDS=$SHARDS: $SUBSET has $n_batches batches of $GEN_BATCH; decoding in $n_batches shards"
  SHARDS=$n_batches
fi
if (( SHARDS == 1 )); then
  "${gen[@]}" > "$SAVE/gen_$name.out"
else
  for s in ${SHARD_IDS:-$(seq 0 $((SHARDS - 1)))}; do
    [[ "$s" =~ ^[0-9]+$ ]] && (( s < SHARDS )) || { echo "[recipe] error: SHARD_IDS: '$s' is not a shard of 0..$((SHARDS - 1))" >&2; exit 2; }
    part="$SAVE/gen_$name.shard$s-of$SHARDS.out"
    if [[ -f "$part" ]]; then echo "[recipe] $part exists, not decoded again"; continue; fi
    echo "[recipe] decoding shard $s of $SHARDS"
    "${gen[@]}" --distributed-world-size "$SHARDS" --distributed-rank "$s" > "$part.tmp"
    mv "$part.tmp" "$part"
  done
  parts=(); for ((s = 0; s < SHARDS; s++)); do
    [[ -f "$SAVE/gen_$name.shard$s-of$SHARDS.out" ]] && parts+=("$SAVE/gen_$name.shard$s-of$SHARDS.out")
  done
  if (( ${#parts[@]} < SHARDS )); then
    echo "[recipe] $name: ${#parts[@]} of $SHARDS shards decoded; the same command with the other SHARD_IDS finishes it"
    exit 0
  fi
  # two processes may finish their last shards together: one merges and scores (mkdir is atomic)
  lock="$SAVE/.merging_$name"
  mkdir "$lock" 2>/dev/null || { echo "[recipe] $name: another process is merging the shards (if none is, remove $lock)"; exit 0; }
  trap 'rmdir "$lock" 2>/dev/null || true' EXIT
  cat "${parts[@]}" > "$SAVE/gen_$name.out"
fi
"$PYTHON" data_scripts/restore_oov.py --src "$DATA/$SUBSET.article" --hyp "$SAVE/gen_$name.out" \
  --out "$SAVE/hyp_$name.txt"
"$PYTHON" -m fairseq_acvi.cli.eval_summarization --hyp "$SAVE/hyp_$name.txt" \
  --ref "$DATA/$SUBSET.summary" --src "$DATA/$SUBSET.article" --dict "$DATA/dict.src.txt" \
  --meteor "$METEOR" --json "$SAVE/scores_$name.json" | tee "$SAVE/scores_$name.txt"
echo "[recipe] paper (P Table 1, full test set) R-1/R-2/R-L: SA 39.53/17.28/36.38, ACVI 42.71/19.24/39.05"
