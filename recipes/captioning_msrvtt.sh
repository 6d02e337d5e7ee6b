#!/usr/bin/env bash
# Video captioning on 1,000 real MSR-VTT clips (docs/method.md §3.2): data folder -> train (CPU preset)
# -> decode valid and test (beam 5) -> BLEU-4 / METEOR / ROUGE-L / CIDEr against all 20 references.
# From the repository root: ACVI_DATA=../shared/data CONTEXT=acvi bash recipes/captioning_msrvtt.sh
# [extra fairseq-train args]. CONTEXT=none is the no-video baseline (NO_VIDEO=1). Every variable, the
# split, the cost per epoch, decoding-only runs (TRAIN=0 MC_SAMPLES ABLATION TAG): docs/recipes/captioning_msrvtt.md
set -euo pipefail
CONTEXT="${CONTEXT:-acvi}"
MSRVTT_DIR="${MSRVTT_DIR:-${ACVI_DATA:+$ACVI_DATA/msrvtt_1k}}"
MIN_COUNT="${MIN_COUNT:-3}"
SPLIT_SIZES="${SPLIT_SIZES:-800 100 100}"
DATA_DIR="${DATA_DIR:-data-bin/msrvtt_1k_min${MIN_COUNT}}"
NO_VIDEO="${NO_VIDEO:-$([[ "$CONTEXT" == "none" ]] && echo 1 || echo 0)}"
SEED="${SEED:-1}"
SMOKE="${SMOKE:-0}"
name="$CONTEXT"   # the run's name: none = the no-video language model; other mixes are named
[[ "$NO_VIDEO" == "1" && "$CONTEXT" != "none" ]] && name="${CONTEXT}_novideo"
[[ "$NO_VIDEO" == "0" && "$CONTEXT" == "none" ]] && name="none_video"
[[ "$SMOKE" == "1" ]] && name="${name}_smoke"
SAVE_DIR="${SAVE_DIR:-checkpoints/captioning_msrvtt_${name}_seed${SEED}}"
ARCH="${ARCH:-acvi_video_captioner_msrvtt_cpu}"
MODEL_ARGS="${MODEL_ARGS:-}"
MAX_FRAMES="${MAX_FRAMES:-25}"
MAX_EPOCH="${MAX_EPOCH:-8}"
MAX_UPDATE="${MAX_UPDATE:-}"
LR="${LR:-0.001}"
BATCH_SIZE="${BATCH_SIZE:-64}"
CLIP_NORM="${CLIP_NORM:-5}"
TRAIN="${TRAIN:-1}"
CKPT="${CKPT:-checkpoint_best.pt}"
DECODE_SPLITS="${DECODE_SPLITS:-valid test}"
BEAM="${BEAM:-5}"
MC_SAMPLES="${MC_SAMPLES:-10}"
ABLATION="${ABLATION:-none}"
TAG="${TAG:-}"
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
  MAX_UPDATE="${MAX_UPDATE:-20}"
  LOG_INTERVAL="${LOG_INTERVAL:-10}"
  MODEL_ARGS="--encoder-hidden-size 16 --decoder-hidden-size 32 --decoder-embed-dim 16 --attention-dim 16 $MODEL_ARGS"
fi
LOG_INTERVAL="${LOG_INTERVAL:-100}"
source "$(dirname "$0")/lib_check.sh"
check_choice CONTEXT none soft acvi structured variational ved
check_choice SMOKE 0 1
check_choice TRAIN 0 1
check_choice NO_VIDEO 0 1
check_choice ABLATION none zero shuffle
check_positive_int MIN_COUNT MAX_FRAMES MAX_EPOCH BATCH_SIZE BEAM MAX_LEN GEN_BATCH LOG_INTERVAL
check_optional positive_int MAX_UPDATE
check_int SEED MC_SAMPLES
check_nonneg_number LR CLIP_NORM
check_choice_list METRICS ' ' BLEU-4 METEOR ROUGE-L CIDEr
check_choice_list DECODE_SPLITS ' ' valid test
check_int_list SPLIT_SIZES
[[ "$TAG" =~ ^[A-Za-z0-9_.-]*$ ]] || { echo "[recipe] error: TAG must be letters, digits, _ . or -, got '$TAG'" >&2; exit 2; }
recipe_settings CONTEXT SMOKE MSRVTT_DIR MIN_COUNT SPLIT_SIZES DATA_DIR NO_VIDEO SEED SAVE_DIR ARCH MODEL_ARGS \
  MAX_FRAMES MAX_EPOCH MAX_UPDATE LR BATCH_SIZE CLIP_NORM TRAIN CKPT DECODE_SPLITS BEAM MC_SAMPLES ABLATION TAG \
  MAX_LEN GEN_BATCH GEN_ARGS METRICS LOG_INTERVAL PYTHON USER_DIR
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# 1. data: captions split by clip id, dictionary, features linked (+ blank features for NO_VIDEO=1)
if [[ ! -f "$DATA_DIR/dict.txt" || ! -d "$DATA_DIR/features" || ! -d "$DATA_DIR/features_blank" ]]; then
  if [[ -z "$MSRVTT_DIR" ]]; then
    echo "[recipe] error: $DATA_DIR must be built and needs the clips: set MSRVTT_DIR=<the msrvtt_1k folder>," \
         "or ACVI_DATA=<data root holding msrvtt_1k/> (e.g. ACVI_DATA=../shared/data)" >&2
    exit 2
  fi
  # shellcheck disable=SC2086
  "$PYTHON" data_scripts/prepare_msrvtt.py --src "$MSRVTT_DIR" --out-dir "$DATA_DIR" \
    --split-sizes $SPLIT_SIZES --min-count "$MIN_COUNT"
fi
features="features"
if [[ "$NO_VIDEO" == "1" ]]; then
  features="features_blank"
  echo "[recipe] NO_VIDEO=1: every clip reads one all-zero frame ($DATA_DIR/features_blank): a caption language model"
fi
mkdir -p "$SAVE_DIR"

# 2. train (Adam); the validation loss picks checkpoint_best.pt; a rerun resumes from checkpoint_last.pt
if [[ "$TRAIN" == "1" ]]; then
  limit=()
  [[ -n "$MAX_UPDATE" ]] && limit=(--max-update "$MAX_UPDATE")
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.train "$DATA_DIR" --user-dir "$USER_DIR" --task video_captioning \
    --features-dir "$features" --max-frames "$MAX_FRAMES" --arch "$ARCH" --context-inference "$CONTEXT" \
    --criterion elbo --optimizer adam --lr "$LR" --clip-norm "$CLIP_NORM" --batch-size "$BATCH_SIZE" \
    --max-epoch "$MAX_EPOCH" ${limit[@]+"${limit[@]}"} --seed "$SEED" --save-dir "$SAVE_DIR" \
    --no-epoch-checkpoints --log-format simple --log-interval "$LOG_INTERVAL" $MODEL_ARGS "$@" 2>&1 \
    | tee -a "$SAVE_DIR/train.log"
fi

# 3. decode: one caption per clip, beam 5, K-sample averaged contexts (MC_SAMPLES), optional ablation
ckpt="$SAVE_DIR/$CKPT"
[[ -f "$ckpt" ]] || { echo "[recipe] error: no checkpoint $ckpt" >&2; exit 1; }
overrides="{'mc_samples': $MC_SAMPLES, 'context_ablation': '$ABLATION'}"
eval_args=()
for split in $DECODE_SPLITS; do
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.generate "$DATA_DIR" --user-dir "$USER_DIR" --task video_captioning \
    --features-dir "$features" --max-frames "$MAX_FRAMES" --path "$ckpt" --gen-subset "$split" \
    --caption-eval-unique-videos --beam "$BEAM" --nbest 1 --max-len-a 0 --max-len-b "$MAX_LEN" \
    --batch-size "$GEN_BATCH" --seed "$SEED" --model-overrides "$overrides" $GEN_ARGS > "$SAVE_DIR/gen_${split}${TAG}.txt"
  echo "[recipe] $split: $(grep -c '^H-' "$SAVE_DIR/gen_${split}${TAG}.txt") captions -> $SAVE_DIR/gen_${split}${TAG}.txt"
  eval_args+=(--split "$split" "$DATA_DIR/$split.tsv" "$SAVE_DIR/gen_${split}${TAG}.txt")
done

# 4. score against all references of each clip (20 per clip)
# shellcheck disable=SC2086
"$PYTHON" -m fairseq_acvi.cli.eval_captioning --name "$CONTEXT" --metrics $METRICS "${eval_args[@]}" \
  --json "$SAVE_DIR/scores${TAG}.json" | sed '/^$/,$d' | tee "$SAVE_DIR/scores${TAG}.txt"
# (the lines up to the first empty one: the command's MSVD Table 3 beside them does not apply here)
echo "[recipe] compressed third-party VGG16 features: comparable with other runs of this recipe only," \
     "never with published MSR-VTT or MSVD tables" | tee -a "$SAVE_DIR/scores${TAG}.txt"
[[ "$SMOKE" == "1" ]] && echo "[recipe] SMOKE model: a pipeline check, not a captioner" | tee -a "$SAVE_DIR/scores${TAG}.txt"
exit 0
