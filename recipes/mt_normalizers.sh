#!/usr/bin/env bash
# Sparse and constrained attention (docs/method.md §3.5) on real data, sized for a CPU: Multi30K En->De,
# per normaliser and seed recipes/mt_multi30k.sh (train, BLEU), then attention statistics (exact zeros,
# REP, DROP-attn) and pictures on test2016; optionally CNN/DM pointer-generator runs (ROUGE, repeated
# trigrams) with and without coverage; and the softmax models decoded with sparsemax / 1.5-entmax in
# place of softmax (DECODE_SWAP, no retraining). From the repository root:
#   NORMALIZERS="softmax sparsemax entmax15 csparsemax" SEEDS="1 2 3" bash recipes/mt_normalizers.sh
# Every variable, the outputs and the cost: docs/recipes/mt_normalizers.md
set -euo pipefail

NORMALIZERS="${NORMALIZERS-softmax sparsemax entmax15 csparsemax}"   # may be empty with CNNDM=1
CONTEXT="${CONTEXT:-soft}"
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1 2 3}"
FERTILITY="${FERTILITY:-fixed}"
FERTILITY_VALUE="${FERTILITY_VALUE:-2}"
EXHAUSTION="${EXHAUSTION:-0}"
STATS_SPLIT="${STATS_SPLIT:-test2016}"
STATS_BEAM="${STATS_BEAM:-5}"
PICTURE_IDS="${PICTURE_IDS:-0 1 2 3}"
RUNS="${RUNS:-runs/normalizers}"
DATA_BIN="${DATA_BIN:-data-bin/multi30k_$PAIR}"
CNNDM="${CNNDM:-0}"
CNNDM_RUNS="${CNNDM_RUNS:-softmax:0 softmax:1 csparsemax:0}"
CNNDM_DATA="${CNNDM_DATA:-data-bin/cnndm}"
CNNDM_SUBSET="${CNNDM_SUBSET:-test}"
CNNDM_ARGS="${CNNDM_ARGS:-}"
REPORT_DIR="${REPORT_DIR:-}"
KEEP="${KEEP:-}"
REPORT_ONLY="${REPORT_ONLY:-0}"
SOFTMAX_FROM="${SOFTMAX_FROM:-}"
DECODE_SWAP="${DECODE_SWAP-sparsemax entmax15}"
SKIP_DONE="${SKIP_DONE:-0}"
# the aligner corpus of DROP (files ALIGN_CORPUS.<src>, ALIGN_CORPUS.<tgt>): Multi30K's tokenised
# training pairs where ACVI_DATA holds them; empty: no aligner DROP
_m30k_train="${ACVI_DATA:-}/multi30k/tok/train.lc.norm.tok"
[[ -n "${ACVI_DATA:-}" && -f "$_m30k_train.${PAIR%_*}" ]] || _m30k_train=""
ALIGN_CORPUS="${ALIGN_CORPUS-$_m30k_train}"
PYTHON="${PYTHON:-python}"
source "$(dirname "$0")/lib_check.sh"

if [[ -n "$NORMALIZERS" || ( "$CNNDM" != "1" && "$REPORT_ONLY" != "1" ) ]]; then
  check_choice_list NORMALIZERS ' ' softmax sparsemax entmax15 csoftmax csparsemax
fi
check_choice CONTEXT soft acvi ved
check_choice FERTILITY fixed predicted
check_nonneg_number FERTILITY_VALUE EXHAUSTION
check_choice STATS_SPLIT valid test2016 test2017
check_positive_int STATS_BEAM
check_int_list PICTURE_IDS
check_choice CNNDM 0 1
check_int_list SEEDS
check_choice REPORT_ONLY 0 1
check_choice SKIP_DONE 0 1
[[ -n "$DECODE_SWAP" ]] && check_choice_list DECODE_SWAP ' ' sparsemax entmax15 csoftmax csparsemax
if [[ "$REPORT_ONLY" == "1" && -z "$REPORT_DIR" ]]; then
  echo "[recipe] error: REPORT_DIR must be a folder with REPORT_ONLY=1, got ''" >&2; exit 2
fi
if [[ -n "$SOFTMAX_FROM" && ! -d "$SOFTMAX_FROM" ]]; then
  echo "[recipe] error: SOFTMAX_FROM must be a folder of finished ${CONTEXT}_seed<N> runs, got '$SOFTMAX_FROM'" >&2
  exit 2
fi
if [[ -n "$SOFTMAX_FROM" && $# -gt 0 ]]; then   # they would train the other normalisers otherwise
  echo "[recipe] error: SOFTMAX_FROM reuses runs trained without extra arguments; set the budget" \
    "with MAX_EPOCH / PATIENCE, got extra arguments: $*" >&2
  exit 2
fi
check_outside_runs REPORT_DIR KEEP
if [[ -n "$ALIGN_CORPUS" ]]; then
  for f in "$ALIGN_CORPUS.${PAIR%_*}" "$ALIGN_CORPUS.${PAIR#*_}"; do
    [[ -f "$f" ]] || { echo "[recipe] error: ALIGN_CORPUS must name a corpus prefix with $f, got '$ALIGN_CORPUS'" >&2; exit 2; }
  done
fi
prev_cov0=""
for item in $CNNDM_RUNS; do
  [[ "$item" == *:1 && " $prev_cov0 " != *" ${item%%:*}:0 "* && " $CNNDM_RUNS " == *" ${item%%:*}:0 "* ]] && {
    echo "[recipe] error: CNNDM_RUNS must be in an order where ${item%%:*}:0 comes before ${item%%:*}:1 (the run with coverage" \
      "branches from the one without), got '$CNNDM_RUNS'" >&2; exit 2; }
  [[ "$item" == *:0 ]] && prev_cov0+=" $item"
  [[ "$item" =~ ^(softmax|sparsemax|entmax15|csoftmax|csparsemax):[01]$ ]] || {
    echo "[recipe] error: CNNDM_RUNS must be a ' '-separated list of NORMALIZER:COVERAGE (coverage 0" \
      "or 1), got '$CNNDM_RUNS'" >&2; exit 2; }
done
recipe_settings NORMALIZERS CONTEXT PAIR SEEDS FERTILITY FERTILITY_VALUE EXHAUSTION STATS_SPLIT \
  STATS_BEAM PICTURE_IDS RUNS DATA_BIN CNNDM CNNDM_RUNS CNNDM_DATA REPORT_DIR REPORT_ONLY SOFTMAX_FROM \
  CNNDM_SUBSET CNNDM_ARGS DECODE_SWAP SKIP_DONE KEEP ALIGN_CORPUS PYTHON

attention_measures() {  # attention_measures RUN [OVERRIDES]: attention statistics and pictures of
  # RUN's checkpoint on STATS_SPLIT, decoded with the model overrides OVERRIDES when given
  local run="$1" over=() made
  [[ -n "${2:-}" ]] && over=(--model-overrides "$2")
  if [[ "$SKIP_DONE" == "1" ]]; then   # both made after the checkpoint: kept
    made=1
    for f in "$run/attention_stats_$STATS_SPLIT.json" "$run/pictures/attention.json"; do
      [[ -f "$f" && "$f" -nt "$run/checkpoint_best.pt" ]] || made=0
    done
    (( made )) && { echo "[recipe] kept (SKIP_DONE=1): $run/attention_stats_$STATS_SPLIT.json"; return 0; }
  fi
  "$PYTHON" -m fairseq_acvi.metrics.attention_stats --data "$DATA_BIN" --path "$run/checkpoint_best.pt" \
    --subset "$STATS_SPLIT" --beam "$STATS_BEAM" --max-len-a 2 --max-len-b 10 ${over[@]+"${over[@]}"} \
    --records-out "$run/attention_$STATS_SPLIT.json" --out "$run/attention_stats_$STATS_SPLIT.json"
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_acvi.cli.attention_pictures "$DATA_BIN" --path "$run/checkpoint_best.pt" \
    --subset "$STATS_SPLIT" --ids $PICTURE_IDS --beam "$STATS_BEAM" --max-len-a 2 --max-len-b 10 \
    ${over[@]+"${over[@]}"} --out-dir "$run/pictures"
  echo "[recipe] attention statistics: $run/attention_stats_$STATS_SPLIT.json"
}
aligned_drop() {  # aligned_drop RUN: the aligner's DROP of RUN's STATS_SPLIT hypotheses (its BLEU decode)
  [[ -n "$ALIGN_CORPUS" ]] || return 0
  local skip=()
  [[ "$SKIP_DONE" == "1" ]] && skip=(--skip-done)
  "$PYTHON" -m fairseq_acvi.cli.aligned_drop "$1" --split "$STATS_SPLIT" \
    --src "$DATA_BIN/raw/$STATS_SPLIT.${PAIR%_*}" --ref "$DATA_BIN/raw/$STATS_SPLIT.${PAIR#*_}" \
    --corpus-src "$ALIGN_CORPUS.${PAIR%_*}" --corpus-tgt "$ALIGN_CORPUS.${PAIR#*_}" ${skip[@]+"${skip[@]}"}
}
kept() {  # kept NAME: NAME's run kept in KEEP, decoded on every split and measured
  local k="$KEEP/outputs/$PAIR/$1" f
  [[ -n "$KEEP" ]] || return 1
  for f in bleu_valid.json bleu_test2016.json bleu_test2017.json "attention_stats_$STATS_SPLIT.json"; do
    [[ -f "$k/$f" ]] || return 1
  done
}
not_kept() {  # not_kept TAG: the seeds of SEEDS whose ${CONTEXT}-TAG run KEEP does not hold
  local seed todo=""
  for seed in $SEEDS; do
    if kept "${CONTEXT}-$1_seed$seed"; then echo "[recipe] kept in $KEEP: ${CONTEXT}-$1_seed$seed" >&2
    else todo+=" $seed"; fi
  done
  echo "${todo# }"
}
keep() {  # keep RUN: RUN's hypotheses, scores, statistics and pictures into KEEP (when set)
  [[ -z "$KEEP" ]] || "$PYTHON" -m fairseq_acvi.cli.keep_runs "$1" --out-dir "$KEEP" --pictures
}
cnndm_kept() {  # cnndm_kept NAME: the CNN/DM run NAME kept in KEEP, scored on CNNDM_SUBSET
  [[ -n "$KEEP" && -f "$KEEP/outputs/cnndm/$1/scores_$CNNDM_SUBSET.json" ]]
}
cnndm_keep() {  # cnndm_keep SAVE: a scored CNN/DM run's summaries (gzipped), scores and phases into KEEP
  local dest="$KEEP/outputs/cnndm/${1##*/}"
  [[ -n "$KEEP" && -f "$1/scores_$CNNDM_SUBSET.json" ]] || return 0   # not scored yet: shards to go
  mkdir -p "$dest"
  gzip -n -c "$1/hyp_$CNNDM_SUBSET.txt" > "$dest/hyp_$CNNDM_SUBSET.txt.gz"
  cp "$1/scores_$CNNDM_SUBSET.json" "$1/phases.txt" "$dest/"
  echo "[recipe] kept: $dest"
}
norm_args() {  # norm_args NORMALIZER: the fairseq-train options of one normaliser (array `args`)
  args=(--attention-normalizer "$1")
  if [[ "$1" == csoftmax || "$1" == csparsemax ]]; then
    args+=(--attention-fertility "$FERTILITY" --attention-fertility-value "$FERTILITY_VALUE"
      --attention-exhaustion "$EXHAUSTION")
  fi
}

for NORM in $NORMALIZERS; do
  [[ "$REPORT_ONLY" == "1" ]] && break
  norm_args "$NORM"
  todo=$(not_kept "$NORM")
  [[ -z "$todo" ]] && continue
  if [[ "$NORM" == softmax && -n "$SOFTMAX_FROM" ]]; then
    # softmax is the default normaliser: the finished runs of the results tables, checked to have
    # the budget of the others (MAX_EPOCH, PATIENCE: recipes/mt_multi30k.sh's defaults 12 and 3)
    for SEED in $todo; do
      "$PYTHON" -m fairseq_acvi.mt_eval.reuse_run "$SOFTMAX_FROM/${CONTEXT}_seed$SEED" \
        "$RUNS/$PAIR/${CONTEXT}-softmax_seed$SEED" --tag softmax --context "$CONTEXT" \
        --max-epoch "${MAX_EPOCH:-12}" --patience "${PATIENCE:-3}"
    done
  else
    CONTEXT="$CONTEXT" PAIR="$PAIR" SEEDS="$todo" TAG="$NORM" RUNS="$RUNS" DATA_BIN="$DATA_BIN" \
      PYTHON="$PYTHON" ABLATE=0 SKIP_DONE="$SKIP_DONE" bash "$(dirname "$0")/mt_multi30k.sh" "${args[@]}" "$@"
  fi
  for SEED in $todo; do
    attention_measures "$RUNS/$PAIR/${CONTEXT}-${NORM}_seed$SEED"
    aligned_drop "$RUNS/$PAIR/${CONTEXT}-${NORM}_seed$SEED"
    keep "$RUNS/$PAIR/${CONTEXT}-${NORM}_seed$SEED"
  done
done

# the softmax models decoded with each DECODE_SWAP normaliser in place of softmax, no retraining
# (folders <context>-softmax-decoded-<N>_seed<S>; the report's "decoding only" rows)
for N in $DECODE_SWAP; do
  [[ "$REPORT_ONLY" == "1" ]] && break
  TAGN="softmax-decoded-$N"
  swap_seeds=""
  for SEED in $(not_kept "$TAGN"); do   # the seeds with a softmax run (NORMALIZERS may have left softmax out)
    if [[ -f "$RUNS/$PAIR/${CONTEXT}-softmax_seed$SEED/run.json" ]]; then swap_seeds+=" $SEED"
    else echo "[recipe] DECODE_SWAP $N: no softmax run of seed $SEED in $RUNS/$PAIR: skipped"; fi
  done
  [[ -z "$swap_seeds" ]] && continue
  for SEED in $swap_seeds; do
    RUN="$RUNS/$PAIR/${CONTEXT}-${TAGN}_seed$SEED"
    "$PYTHON" -m fairseq_acvi.mt_eval.reuse_run "$RUNS/$PAIR/${CONTEXT}-softmax_seed$SEED" "$RUN" \
      --tag "$TAGN" --decode-normalizer "$N" --context "$CONTEXT" \
      --max-epoch "${MAX_EPOCH:-12}" --patience "${PATIENCE:-3}"
  done
  # no spaces in the dict: GEN_ARGS is split on spaces
  CONTEXT="$CONTEXT" PAIR="$PAIR" SEEDS="${swap_seeds# }" TAG="$TAGN" RUNS="$RUNS" DATA_BIN="$DATA_BIN" \
    PYTHON="$PYTHON" ABLATE=0 TRAIN=0 SKIP_DONE=1 \
    GEN_ARGS="${GEN_ARGS:---max-len-a 2 --max-len-b 10} --model-overrides {'attention_normalizer':'$N'}" \
    bash "$(dirname "$0")/mt_multi30k.sh"
  for SEED in $swap_seeds; do
    attention_measures "$RUNS/$PAIR/${CONTEXT}-${TAGN}_seed$SEED" "{'attention_normalizer': '$N'}"
    aligned_drop "$RUNS/$PAIR/${CONTEXT}-${TAGN}_seed$SEED"
    keep "$RUNS/$PAIR/${CONTEXT}-${TAGN}_seed$SEED"
  done
done

if [[ "$CNNDM" == "1" && "$REPORT_ONLY" == "0" ]]; then
  for item in $CNNDM_RUNS; do
    NORM="${item%%:*}" COV="${item##*:}"
    if cnndm_kept "${CONTEXT}-${NORM}-cov$COV"; then
      echo "[recipe] kept in $KEEP: ${CONTEXT}-${NORM}-cov$COV" >&2; continue
    fi
    norm_args "$NORM"
    # the recipe's CPU schedule; coverage 0 turns the last (coverage) phase into a plain one. The
    # runs with and without coverage share phases 1-4: the one with coverage branches from the
    # other when both are listed, the other first (and trained here: a kept one has no checkpoints)
    phases="2000:50:20:0 4000:100:50:0 5500:200:50:0 6000:400:100:0 6400:400:100:$COV"
    branch=""
    [[ "$COV" == "1" && " $CNNDM_RUNS " == *" $NORM:0 "* && -d "$RUNS/cnndm/${CONTEXT}-${NORM}-cov0" ]] \
      && branch="$RUNS/cnndm/${CONTEXT}-${NORM}-cov0"
    # shellcheck disable=SC2086
    CONTEXT="$CONTEXT" DATA="$CNNDM_DATA" SAVE="$RUNS/cnndm/${CONTEXT}-${NORM}-cov$COV" \
      SCHEDULE=cpu CPU_PHASES="$phases" SUBSET="$CNNDM_SUBSET" BRANCH_FROM="$branch" PYTHON="$PYTHON" \
      bash "$(dirname "$0")/summarization_cnndm.sh" "${args[@]}" $CNNDM_ARGS "$@"
    cnndm_keep "$RUNS/cnndm/${CONTEXT}-${NORM}-cov$COV"
  done
fi

if [[ -n "$REPORT_DIR" ]]; then
  # the runs: RUNS/PAIR's, and those kept in KEEP that RUNS/PAIR does not hold (a new machine)
  report_runs=()
  [[ -d "$RUNS/$PAIR" || -z "$KEEP" ]] && report_runs=("$RUNS/$PAIR")
  if [[ -n "$KEEP" ]]; then
    for k in "$KEEP/outputs/$PAIR"/*/; do
      k="${k%/}"
      [[ -f "$k/run.json" && ! -f "$RUNS/$PAIR/${k##*/}/run.json" ]] && report_runs+=("$k")
    done
  fi
  # the BLEU tables with the hypotheses kept, then the normalisers' table beside them
  "$PYTHON" -m fairseq_acvi.cli.mt_report "${report_runs[@]}" --out-dir "$REPORT_DIR" --keep-outputs
  cnndm=()
  cnndm_root="$RUNS/cnndm"   # with KEEP, every CNN/DM run is kept there once scored
  [[ -n "$KEEP" && -d "$KEEP/outputs/cnndm" ]] && cnndm_root="$KEEP/outputs/cnndm"
  [[ "$CNNDM" == "1" ]] && cnndm=(--cnndm "$cnndm_root" --cnndm-subset "$CNNDM_SUBSET")
  "$PYTHON" -m fairseq_acvi.cli.normalizers_report "${report_runs[@]}" --refs-dir "$DATA_BIN/raw" \
    --out-dir "$REPORT_DIR" --split "$STATS_SPLIT" ${cnndm[@]+"${cnndm[@]}"}
  echo "[recipe] report: $REPORT_DIR/report.md, $REPORT_DIR/normalizers.md"
fi
echo "[recipe] done: $RUNS"
