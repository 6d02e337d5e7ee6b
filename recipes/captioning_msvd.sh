#!/usr/bin/env bash
# Video captioning on MSVD (docs/method.md §3.2): features -> train -> decode valid and test (beam 5)
# -> BLEU-4 / METEOR / ROUGE-L / CIDEr beside P Table 3. From the repository root:
# bash recipes/captioning_msvd.sh [extra fairseq-train args] (main ones: CONTEXT=acvi
# FEATURES=synthetic|real VIDEOS SMOKE=0 TRAIN=1 MC_SAMPLES=10). Every variable, the feature modes
# and the smoke run: docs/recipes/captioning_msvd.md
set -euo pipefail
CONTEXT="${CONTEXT:-acvi}"
FEATURES="${FEATURES:-synthetic}"
SMOKE="${SMOKE:-0}"
suffix=""; [[ "$SMOKE" == "1" ]] && suffix="_smoke"
MSVD_DIR="${MSVD_DIR:-${ACVI_DATA:+$ACVI_DATA/msvd}}"   # the caption files (needed to build DATA_DIR)
DATA_DIR="${DATA_DIR:-data-bin/msvd_${FEATURES}}"
SAVE_DIR="${SAVE_DIR:-checkpoints/captioning_msvd_${CONTEXT}${suffix}}"
BACKBONE="${BACKBONE:-efficientnet-lite0}"
BACKBONE_WEIGHTS="${BACKBONE_WEIGHTS:-${WEIGHTS:-}}"
VIDEOS="${VIDEOS:-}"
MAPPING="${MAPPING:-${MSVD_DIR:+$MSVD_DIR/youtube_mapping.txt}}"
ARCH="${ARCH:-acvi_video_captioner}"
MODEL_ARGS="${MODEL_ARGS:-}"
MAX_EPOCH="${MAX_EPOCH:-30}"
MAX_UPDATE="${MAX_UPDATE:-}"
LR="${LR:-0.001}"
BATCH_SIZE="${BATCH_SIZE:-64}"
CLIP_NORM="${CLIP_NORM:-5}"
SEED="${SEED:-1}"
TRAIN="${TRAIN:-1}"
CKPT="${CKPT:-checkpoint_best.pt}"
BEAM="${BEAM:-5}"
MC_SAMPLES="${MC_SAMPLES:-10}"
MAX_LEN="${MAX_LEN:-30}"
GEN_BATCH="${GEN_BATCH:-100}"
GEN_ARGS="${GEN_ARGS:-}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"
if [[ -z "${METRICS:-}" ]]; then
  METRICS="BLEU-4 ROUGE-L CIDEr"
  command -v java > /dev/null && METRICS="BLEU-4 METEOR ROUGE-L CIDEr"
fi
if [[ "$SMOKE" == "1" ]]; then
  MAX_UPDATE="${MAX_UPDATE:-30}"
  LOG_INTERVAL="${LOG_INTERVAL:-10}"
  MODEL_ARGS="--encoder-hidden-size 32 --decoder-hidden-size 32 --decoder-embed-dim 32 --attention-dim 16 $MODEL_ARGS"
fi
LOG_INTERVAL="${LOG_INTERVAL:-50}"
source "$(dirname "$0")/lib_check.sh"
check_choice CONTEXT none soft acvi structured variational ved pag rpag
check_choice FEATURES synthetic real
check_choice SMOKE 0 1
check_choice TRAIN 0 1
check_positive_int MAX_EPOCH BATCH_SIZE BEAM MAX_LEN GEN_BATCH LOG_INTERVAL
check_optional positive_int MAX_UPDATE
check_int SEED MC_SAMPLES
check_nonneg_number LR CLIP_NORM
check_choice_list METRICS ' ' BLEU-4 METEOR ROUGE-L CIDEr
recipe_settings CONTEXT FEATURES SMOKE MSVD_DIR DATA_DIR SAVE_DIR BACKBONE BACKBONE_WEIGHTS VIDEOS MAPPING \
  ARCH MODEL_ARGS MAX_EPOCH MAX_UPDATE LR BATCH_SIZE CLIP_NORM SEED TRAIN CKPT BEAM MC_SAMPLES MAX_LEN \
  GEN_BATCH GEN_ARGS METRICS LOG_INTERVAL PYTHON USER_DIR
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# 1. data: captions, dictionary and features (24 frames x D per video)
# (real features: until an extraction has finished without a failed clip, marked by .features_complete)
if [[ ! -f "$DATA_DIR/dict.txt" || ! -d "$DATA_DIR/features" \
      || ( "$FEATURES" == "real" && ! -f "$DATA_DIR/.features_complete" ) ]]; then
  if [[ -z "$MSVD_DIR" ]]; then
    echo "[recipe] error: $DATA_DIR must be built and needs the MSVD caption files: set MSVD_DIR=<folder" \
         "with sents_{train,val,test}_lc_nopunc.txt>, or ACVI_DATA=<data root holding msvd/>" \
         "(e.g. ACVI_DATA=../shared/data)" >&2
    exit 2
  fi
  case "$FEATURES" in
    synthetic)
      echo "[recipe] $DATA_DIR missing: captions + synthetic features with data_scripts/prepare_msvd.sh"
      MSVD_DIR="$MSVD_DIR" OUT_DIR="$DATA_DIR" PYTHON="$PYTHON" bash data_scripts/prepare_msvd.sh --synthetic ;;
    real)
      [[ -n "$VIDEOS" ]] || { echo "[recipe] FEATURES=real needs VIDEOS=<folder of the .avi clips>" >&2; exit 1; }
      MSVD_DIR="$MSVD_DIR" OUT_DIR="$DATA_DIR" PYTHON="$PYTHON" bash data_scripts/prepare_msvd.sh
      weights=()
      [[ -n "$BACKBONE_WEIGHTS" ]] && weights=(--backbone-weights "$BACKBONE_WEIGHTS")
      "$PYTHON" data_scripts/extract_video_features.py --videos "$VIDEOS" --mapping "$MAPPING" \
        --backbone "$BACKBONE" ${weights[@]+"${weights[@]}"} --out-dir "$DATA_DIR/features" --skip-existing
      n_feat=$(find "$DATA_DIR/features" -maxdepth 1 -name '*.npy' | wc -l)
      n_vid=$(cat "$DATA_DIR"/{train,valid,test}.videos | wc -l)
      if [[ "$n_feat" -lt "$n_vid" ]]; then
        echo "[recipe] features for $n_feat of $n_vid videos: captions cut to those videos"
        "$PYTHON" data_scripts/subset_captions.py "$DATA_DIR" --valid-from-test
        if [[ "$n_feat" -lt 100 ]]; then
          echo "[recipe] $n_feat videos: a SMOKE TEST of the pipeline on real features, not a captioner"
        fi
      fi
      touch "$DATA_DIR/.features_complete" ;;
    *) echo "[recipe] FEATURES must be synthetic or real, got '$FEATURES'" >&2; exit 1 ;;
  esac
fi
[[ "$FEATURES" == "synthetic" ]] && echo "[recipe] SYNTHETIC features: the scores below only check the pipeline"
mkdir -p "$SAVE_DIR"

# 2. train (Adam, P §3); validation loss picks checkpoint_best.pt
if [[ "$TRAIN" == "1" ]]; then
  limit=()
  [[ -n "$MAX_UPDATE" ]] && limit=(--max-update "$MAX_UPDATE")
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.train "$DATA_DIR" --user-dir "$USER_DIR" --task video_captioning \
    --max-frames 24 --arch "$ARCH" --context-inference "$CONTEXT" --criterion elbo \
    --optimizer adam --lr "$LR" --clip-norm "$CLIP_NORM" --batch-size "$BATCH_SIZE" \
    --max-epoch "$MAX_EPOCH" ${limit[@]+"${limit[@]}"} --seed "$SEED" --save-dir "$SAVE_DIR" \
    --no-epoch-checkpoints --log-format simple --log-interval "$LOG_INTERVAL" $MODEL_ARGS "$@" 2>&1 \
    | tee "$SAVE_DIR/train.log"
fi

# 3. decode valid and test: one caption per video, beam 5, K-sample averaged ACVI contexts
ckpt="$SAVE_DIR/$CKPT"
[[ -f "$ckpt" ]] || { echo "[recipe] error: no checkpoint $ckpt" >&2; exit 1; }
for split in valid test; do
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.generate "$DATA_DIR" --user-dir "$USER_DIR" --task video_captioning \
    --max-frames 24 --path "$ckpt" --gen-subset "$split" \
    --caption-eval-unique-videos --beam "$BEAM" --nbest 1 --max-len-a 0 --max-len-b "$MAX_LEN" --batch-size "$GEN_BATCH" \
    --model-overrides "{'mc_samples': $MC_SAMPLES}" $GEN_ARGS > "$SAVE_DIR/gen_$split.txt"
  echo "[recipe] $split: $(grep -c '^H-' "$SAVE_DIR/gen_$split.txt") captions -> $SAVE_DIR/gen_$split.txt"
done

# 4. score against all references of each video and print the Table 3 comparison
# shellcheck disable=SC2086
"$PYTHON" -m fairseq_acvi.cli.eval_captioning --name "$CONTEXT (ours)" --metrics $METRICS \
  --split valid "$DATA_DIR/valid.tsv" "$SAVE_DIR/gen_valid.txt" \
  --split test "$DATA_DIR/test.tsv" "$SAVE_DIR/gen_test.txt" \
  --json "$SAVE_DIR/scores.json" | tee "$SAVE_DIR/scores.txt"
if [[ "$FEATURES" == "synthetic" || "$SMOKE" == "1" ]]; then
  echo "[recipe] synthetic features and/or SMOKE model: NOT comparable with the paper" | tee -a "$SAVE_DIR/scores.txt"
fi
