#!/usr/bin/env bash
# The uncertainty study on Multi30K En->De: what ACVI's samples know about the model being wrong,
# beside Monte-Carlo dropout and a deep ensemble, on test2016 (Flickr) and test_2017_mscoco (COCO,
# out of domain). Per seed N: soft, ACVI (K context samples), soft with K dropout masks; and the
# soft seeds as one ensemble. Trainings are recipes/mt_multi30k.sh's (current presets). From the
# repository root (DRY_RUN=1: the settings and the plan only):
#   STAGE=all bash recipes/uncertainty_study.sh
# Every variable, the outputs and the cost: docs/recipes/uncertainty_study.md
set -euo pipefail

STAGE="${STAGE:-all}"
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1 2 3}"
MAX_EPOCH="${MAX_EPOCH:-20}"   # the results tables' budget (docs/results/README.md), no early stop
PATIENCE="${PATIENCE:-0}"
MC_SAMPLES="${MC_SAMPLES:-10}"
MC_DROPOUT="${MC_DROPOUT:-10}"
MC_DROPOUT_RATE="${MC_DROPOUT_RATE:-}"   # empty: each model's own dropout, as trained
BEAM="${BEAM:-10}"
GEN_BATCH="${GEN_BATCH:-64}"
GEN_ARGS="${GEN_ARGS:---max-len-a 2 --max-len-b 10}"
GEN_SEED="${GEN_SEED:-1}"
BOOTSTRAP="${BOOTSTRAP:-1000}"
TRAIN="${TRAIN:-1}"
ENSEMBLE="${ENSEMBLE:-1}"   # 0: no ensemble (one seed may then be studied alone, as its trainings end)
RUNS="${RUNS:-runs/multi30k}"
OUT="${OUT:-runs/uncertainty_study}"
REPORT_DIR="${REPORT_DIR:-}"   # STAGE=report (and the end of STAGE=all): the page across seeds
DATA_BIN="${DATA_BIN:-data-bin/multi30k_$PAIR}"
MULTI30K_DIR="${MULTI30K_DIR:-${ACVI_DATA:-data-bin/raw}/multi30k}"
MT_LIB_ONLY=1 source "$(dirname "$0")/lib_mt.sh"
mt_process_defaults

check_choice STAGE all train ood decode calibrate measures report
mt_split_pair "$PAIR"
check_int_list SEEDS
check_positive_int MAX_EPOCH MC_SAMPLES MC_DROPOUT BEAM GEN_BATCH BOOTSTRAP
check_int PATIENCE
check_int GEN_SEED
check_optional nonneg_number MC_DROPOUT_RATE
check_choice TRAIN 0 1
check_choice ENSEMBLE 0 1
[[ "$STAGE" != "report" || -n "$REPORT_DIR" ]] \
  || _check_fail REPORT_DIR "a folder with STAGE=report" "$REPORT_DIR"
# the copies of the measures (REPORT_DIR/seed<N>/) must not land on themselves
[[ -n "$REPORT_DIR" && "$(realpath -m -- "$REPORT_DIR")/" =~ ^"$(realpath -m -- "$OUT")"/seed[0-9]+/ ]] \
  && _check_fail REPORT_DIR "a folder outside OUT's seed<N> folders" "$REPORT_DIR"
read -r -a SEED_LIST <<< "$SEEDS"
(( ${#SEED_LIST[@]} >= 2 || ENSEMBLE == 0 )) || { echo "[recipe] error: SEEDS must be at least two seeds (the ensemble's members; ENSEMBLE=0 studies one alone), got '$SEEDS'" >&2; exit 2; }

run_dir() { echo "$RUNS/$PAIR/${1}_seed$2"; }          # run_dir CONTEXT SEED (mt_multi30k.sh's)
ckpt() { echo "$(run_dir "$1" "$2")/checkpoint_best.pt"; }
ensemble_path() {  # the soft seeds' checkpoints joined by ':' (fairseq-generate --path)
  local p="" s
  for s in "${SEED_LIST[@]}"; do p+="${p:+:}$(ckpt soft "$s")"; done
  echo "$p"
}
stages() { [[ "$STAGE" == "all" ]] && echo "train ood decode calibrate measures report" || echo "$STAGE"; }
finished() {  # finished CONTEXT SEED: exit 2 unless that training ended (a checkpoint_best.pt of a
  # training still running would be decoded, and its outputs kept, as if final)
  local log; log="$(run_dir "$1" "$2")/train.log"
  grep -q "done training" "$log" 2>/dev/null \
    || { echo "[recipe] error: $log: the training of $1 seed $2 has not finished" >&2; exit 2; }
}

for st in $(stages); do
  case "$st" in
    train) echo "[recipe] plan: train: CONTEXT=soft and CONTEXT=acvi, SEEDS='$SEEDS' with recipes/mt_multi30k.sh, MAX_EPOCH=$MAX_EPOCH PATIENCE=$PATIENCE (kept where checkpoint_best.pt exists)" ;;
    ood) echo "[recipe] plan: ood: binarize $MULTI30K_DIR/tok/test_2017_mscoco.lc.norm.tok.{$SRC,$TGT} with $DATA_BIN's dictionaries into $OUT/coco-bin" ;;
    decode) echo "[recipe] plan: decode: test2016 and coco, per seed: soft, acvi (K=$MC_SAMPLES), mcdrop (soft, $MC_DROPOUT masks)$([[ "$ENSEMBLE" == 1 ]] && echo "; ensemble of the soft seeds")" ;;
    calibrate) echo "[recipe] plan: calibrate: teacher-forced test2016 tokens of the same methods (cli.calibration --save-tokens)" ;;
    measures) echo "[recipe] plan: measures: generation.uncertainty_measures per seed (acvi first: every difference is ACVI's)" ;;
    report) if [[ -n "$REPORT_DIR" ]]; then
        echo "[recipe] plan: report: generation.uncertainty_report of seeds '$SEEDS' -> $REPORT_DIR/uncertainty.{md,json}, with each seed's measures copied beside it and what they were computed from in $REPORT_DIR/outputs (generation.uncertainty_kept)"
      else
        echo "[recipe] plan: report: skipped, REPORT_DIR is empty (STAGE=report REPORT_DIR=<folder> writes the page)"
      fi ;;
  esac
done
recipe_settings STAGE PAIR SRC TGT SEEDS MAX_EPOCH PATIENCE MC_SAMPLES MC_DROPOUT MC_DROPOUT_RATE BEAM GEN_BATCH GEN_ARGS \
  GEN_SEED BOOTSTRAP TRAIN ENSEMBLE RUNS OUT REPORT_DIR DATA_BIN MULTI30K_DIR THREADS DEVICE PYTHON USER_DIR

mkdir -p "$OUT"
mt_cpu_flag
rate_args=(); [[ -n "$MC_DROPOUT_RATE" ]] && rate_args=(--mc-dropout-rate "$MC_DROPOUT_RATE")

decode_one() {  # decode_one DATA SUBSET OUTFILE ARGS...: beam search with every uncertainty line
  local data="$1" subset="$2" out="$3"; shift 3
  [[ -s "$out" ]] && grep -q "Translated" "$out" && { echo "[recipe] kept: $out"; return 0; }
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_acvi.cli.generate "$data" --user-dir "$USER_DIR" --task translation \
    -s "$SRC" -t "$TGT" --gen-subset "$subset" --beam "$BEAM" --nbest 1 --batch-size "$GEN_BATCH" \
    --seed "$GEN_SEED" --print-uncertainty all --print-sentence-uncertainty \
    ${cpu_flag[@]+"${cpu_flag[@]}"} $GEN_ARGS "$@" > "$out.part" 2> "$out.log"
  cat "$out.log" >> "$out.part"           # the log after the lines: fairseq's "Translated ... in Xs"
  mv "$out.part" "$out"
}

for st in $(stages); do
  case "$st" in
    train)
      for context in soft acvi; do
        todo=""
        for s in "${SEED_LIST[@]}"; do [[ -f "$(ckpt "$context" "$s")" ]] || todo+=" $s"; done
        if [[ -n "$todo" ]]; then
          [[ "$TRAIN" == "1" ]] || { echo "[recipe] error: $context seeds${todo} have no checkpoint and TRAIN=0" >&2; exit 2; }
          CONTEXT="$context" SEEDS="${todo# }" PAIR="$PAIR" RUNS="$RUNS" DATA_BIN="$DATA_BIN" \
            MAX_EPOCH="$MAX_EPOCH" PATIENCE="$PATIENCE" ABLATE=0 bash "$(dirname "$0")/mt_multi30k.sh"
        fi
      done ;;
    ood)
      mt_ensure_data data_scripts/prepare_multi30k.sh
      if [[ ! -f "$OUT/coco-bin/test.$SRC-$TGT.$SRC.bin" ]]; then
        "$PYTHON" -m fairseq_cli.preprocess --source-lang "$SRC" --target-lang "$TGT" \
          --testpref "$MULTI30K_DIR/tok/test_2017_mscoco.lc.norm.tok" --srcdict "$DATA_BIN/dict.$SRC.txt" \
          --tgtdict "$DATA_BIN/dict.$TGT.txt" --destdir "$OUT/coco-bin" --workers 1
      fi ;;
    decode)
      test_subset="$(mt_subset test2016)"
      for s in "${SEED_LIST[@]}"; do finished soft "$s"; finished acvi "$s"; done
      for s in "${SEED_LIST[@]}"; do
        mkdir -p "$OUT/seed$s"
        for set in test2016 coco; do
          data="$DATA_BIN" subset="$test_subset"
          [[ "$set" == "coco" ]] && data="$OUT/coco-bin" subset=test
          decode_one "$data" "$subset" "$OUT/seed$s/soft_$set.txt" --path "$(ckpt soft "$s")"
          decode_one "$data" "$subset" "$OUT/seed$s/acvi_$set.txt" --path "$(ckpt acvi "$s")" \
            --model-overrides "{'mc_samples': $MC_SAMPLES}"
          decode_one "$data" "$subset" "$OUT/seed$s/mcdrop_$set.txt" --path "$(ckpt soft "$s")" \
            --mc-dropout "$MC_DROPOUT" ${rate_args[@]+"${rate_args[@]}"}
        done
      done
      [[ "$ENSEMBLE" == 1 ]] && for set in test2016 coco; do
        data="$DATA_BIN" subset="$test_subset"
        [[ "$set" == "coco" ]] && data="$OUT/coco-bin" subset=test
        decode_one "$data" "$subset" "$OUT/ensemble_$set.txt" --path "$(ensemble_path)"
      done ;;
    calibrate)
      ens=(); [[ "$ENSEMBLE" == 1 ]] && ens=(--model "ensemble=$(ensemble_path)")
      for s in "${SEED_LIST[@]}"; do
        [[ -f "$OUT/seed$s/calibration/calibration.json" ]] && { echo "[recipe] kept: $OUT/seed$s/calibration"; continue; }
        finished soft "$s"; finished acvi "$s"
        "$PYTHON" -m fairseq_acvi.cli.calibration --data "$DATA_BIN" --subset "$(mt_subset test2016)" \
          --model "acvi=$(ckpt acvi "$s")" --model "soft=$(ckpt soft "$s")" \
          --model "mcdrop=$(ckpt soft "$s")" --mc-dropout "mcdrop=$MC_DROPOUT" \
          "${ens[@]}" --mc-samples "$MC_SAMPLES" --seed "$GEN_SEED" \
          ${rate_args[@]+"${rate_args[@]}"} --bootstrap "$BOOTSTRAP" --threads "$THREADS" \
          --save-tokens --out-dir "$OUT/seed$s/calibration"
      done ;;
    measures)
      for s in "${SEED_LIST[@]}"; do
        d="$OUT/seed$s" args=()
        for m in acvi soft mcdrop; do
          args+=(--decoded "$m=$d/${m}_test2016.txt" --ood "$m=$d/${m}_coco.txt"
                 --tokens "$m=$d/calibration/tokens_$m.npz")
        done
        [[ "$ENSEMBLE" == 1 ]] && args+=(--decoded "ensemble=$OUT/ensemble_test2016.txt"
          --ood "ensemble=$OUT/ensemble_coco.txt" --tokens "ensemble=$d/calibration/tokens_ensemble.npz")
        "$PYTHON" -m fairseq_acvi.generation.uncertainty_measures "${args[@]}" \
          --references "$DATA_BIN/raw/test2016.$TGT" --bootstrap "$BOOTSTRAP" --out-dir "$d/measures"
      done ;;
    report)
      [[ -n "$REPORT_DIR" ]] || { echo "[recipe] note: REPORT_DIR is empty: no report page (STAGE=report REPORT_DIR=<folder> writes it)"; continue; }
      files=()
      for s in "${SEED_LIST[@]}"; do files+=("$OUT/seed$s/measures/measures.json"); done
      "$PYTHON" -m fairseq_acvi.generation.uncertainty_report --measures "${files[@]}" \
        --runs "$RUNS/$PAIR" --mc-samples "$MC_SAMPLES" --mc-dropout "$MC_DROPOUT" --out-dir "$REPORT_DIR"
      for s in "${SEED_LIST[@]}"; do   # what the figures were computed from, to re-check the page
        mkdir -p "$REPORT_DIR/seed$s"
        cp "$OUT/seed$s/measures/measures.json" "$OUT/seed$s/measures/measures.md" "$REPORT_DIR/seed$s/"
      done
      # and what the measures were computed from: the decodes' H-/US- lines and the token arrays
      ens_name=(); [[ "$ENSEMBLE" == 1 ]] && ens_name=(--ensemble ensemble)
      "$PYTHON" -m fairseq_acvi.generation.uncertainty_kept --study "$OUT" --seeds "${SEED_LIST[@]}" \
        ${ens_name[@]+"${ens_name[@]}"} --out-dir "$REPORT_DIR" ;;
  esac
done
echo "[recipe] done: STAGE=$STAGE, $OUT"
