#!/usr/bin/env bash
# CNN/DailyMail pointer-generator + coverage, any context-inference variant (docs/method.md §3.1; numbers §5).
# Phased training of the ACVI paper (P Table 5), then beam-5 decoding of the test set, OOV restoration
# and ROUGE / METEOR / novelty evaluation. Run from the repo root after data_scripts/prepare_cnndm.sh:
#   CONTEXT=acvi DATA=data-bin/cnndm bash recipes/summarization_cnndm.sh [extra fairseq-train args]
#   (extra args go to every phase; --no-copy: the no-copy baseline, which generate reads from the checkpoint)
#
#   phase  updates (cumulative)  source words  target tokens (</s> counted)  coverage
#     1        0 -  71k              10            10                           off
#     2      71k - 116k              50            50                           off
#     3     116k - 184k             100            50                           off
#     4     184k - 223k             200            50                           off
#     5     223k - 250k             400           100                           off
#     6     250k - 253k             400           100                           on
# Every phase truncates its data explicitly (--truncate-source: the first N words + </s>, so
# --max-source-positions N+1; --truncate-target: the first M tokens, no </s> when cut) and markers
# <unk-j> with j >= N become <unk> (task pointer_summarization).
# Resuming: phase k starts from phase k-1's checkpoint_last.pt (--restore-file) with
# --reset-dataloader (the batches change with the limits). The parameter set never changes (the
# coverage weight w_k exists from phase 1 and is only used from phase 6), so the Adam state and the
# update counter are kept: --max-update is the cumulative end of the phase. A phase whose own
# checkpoint_last.pt exists resumes from it (an interrupted run can simply be restarted; finished
# phases exit at once).
#
# Options (env vars):
#   CONTEXT=acvi      soft | acvi | structured | variational | ved
#   DATA=data-bin/cnndm   output of data_scripts/prepare_cnndm.sh (binarised + test.article/summary)
#   SAVE=checkpoints/cnndm_${CONTEXT}   one sub-folder per phase (phase1 … phaseN)
#   SCHEDULE=paper    paper: the six phases above; cpu: $CPU_PHASES, sized for one CPU core
#                     (default "2000:50:20:0 4000:100:50:0 5500:200:50:0 6000:400:100:0 6400:400:100:1":
#                     the paper's growing lengths over 2.6 epochs of See's 39k-article subset at
#                     batch 16, the coverage phase 400 updates; the 50k-word output layer makes a
#                     step's cost grow mostly with the target length); or an explicit list
#                     "END:SOURCE_WORDS:TARGET_TOKENS:COVERAGE ..."
#                     with cumulative update ends; the last phase's checkpoint is decoded
#   SCALE=1           multiplies every phase's update count (e.g. 0.0001 for a smoke run; each phase
#                     keeps >= 1 update)
#   ARCH=acvi_pointer_generator_cnndm  LR=0.001 (Adam)  BATCH=16  CLIP_NORM=2  SEED=1
#   COVERAGE_WEIGHT=1 (λ)  SAVE_INTERVAL=2000 (updates between checkpoints)  LOG_INTERVAL=100
#   TRAIN=1 (0: skip training)  BEAM=5  MIN_LEN=35  MAX_LEN=100  GEN_BATCH=32  SUBSET=test
#                     (or a fixed subset written by data_scripts/cnndm_subset.py: test_every5, ...)
#   DECODE_PHASE      the phase whose checkpoint_last.pt is decoded (default: the last); outputs of
#                     an earlier phase are named *_SUBSET_phaseN (e.g. before the coverage phase)
#   MC_SAMPLES (unset: the model's K=10; 0 = mean context)  METEOR=exact,full (or none)
#   PYTHON=python  USER_DIR=fairseq_acvi
set -euo pipefail
CONTEXT="${CONTEXT:-acvi}"
DATA="${DATA:-data-bin/cnndm}"
SAVE="${SAVE:-checkpoints/cnndm_${CONTEXT}}"
SCALE="${SCALE:-1}"
SCHEDULE="${SCHEDULE:-paper}"
CPU_PHASES="${CPU_PHASES:-2000:50:20:0 4000:100:50:0 5500:200:50:0 6000:400:100:0 6400:400:100:1}"
ARCH="${ARCH:-acvi_pointer_generator_cnndm}"
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
METEOR="${METEOR:-exact,full}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"

[[ -f "$DATA/dict.src.txt" ]] || { echo "[recipe] error: $DATA/dict.src.txt missing; run data_scripts/prepare_cnndm.sh" >&2; exit 1; }

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

# scaled cumulative ends, strictly increasing (each phase >= 1 update)
scaled=()
prev=0
for end in "${ENDS[@]}"; do
  s=$("$PYTHON" -c "import math,sys; print(max(int(math.ceil($end*float(sys.argv[1]))), $prev + 1))" "$SCALE")
  scaled+=("$s"); prev="$s"
done

if [[ "$TRAIN" == "1" ]]; then
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

DECODE_PHASE="${DECODE_PHASE:-$NPH}"
if ! [[ "$DECODE_PHASE" =~ ^[0-9]+$ ]] || (( DECODE_PHASE < 1 || DECODE_PHASE > NPH )); then
  echo "[recipe] error: DECODE_PHASE=$DECODE_PHASE: the schedule has phases 1..$NPH" >&2; exit 2
fi
[[ -f "$DATA/$SUBSET.article" ]] || { echo "[recipe] error: SUBSET=$SUBSET: $DATA/$SUBSET.article missing (data_scripts/cnndm_subset.py writes subsets)" >&2; exit 1; }
name="$SUBSET"
(( DECODE_PHASE < NPH )) && name="${SUBSET}_phase$DECODE_PHASE"
k=$((DECODE_PHASE - 1))
CKPT="$SAVE/phase$DECODE_PHASE/checkpoint_last.pt"
[[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
overrides=()
if [[ -n "$MC_SAMPLES" ]]; then overrides=(--model-overrides "{'mc_samples': $MC_SAMPLES}"); fi
"$PYTHON" -m fairseq_cli.generate "$DATA" --user-dir "$USER_DIR" --task pointer_summarization \
  --source-lang src --target-lang tgt --path "$CKPT" --gen-subset "$SUBSET" --beam "$BEAM" \
  --truncate-source --max-source-positions "$((ENC[k] + 1))" \
  --truncate-target --max-target-positions "${DEC[$k]}" \
  --min-len "$MIN_LEN" --max-len-a 0 --max-len-b "$MAX_LEN" --batch-size "$GEN_BATCH" \
  "${overrides[@]}" > "$SAVE/gen_$name.out"
"$PYTHON" data_scripts/restore_oov.py --src "$DATA/$SUBSET.article" --hyp "$SAVE/gen_$name.out" \
  --out "$SAVE/hyp_$name.txt"
"$PYTHON" -m fairseq_acvi.cli.eval_summarization --hyp "$SAVE/hyp_$name.txt" \
  --ref "$DATA/$SUBSET.summary" --src "$DATA/$SUBSET.article" --dict "$DATA/dict.src.txt" \
  --meteor "$METEOR" --json "$SAVE/scores_$name.json" | tee "$SAVE/scores_$name.txt"
echo "[recipe] paper (P Table 1, full test set) R-1/R-2/R-L: SA 39.53/17.28/36.38, ACVI 42.71/19.24/39.05"
