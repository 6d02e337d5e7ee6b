# Shared body of the translation recipes (sourced by recipes/mt_*.sh, which set):
#   MT_NAME MT_DEFAULT_TGT MT_PREPARE MT_ARCH MT_REMOVE_BPE MT_SCORE_ARGS (array) MT_SMOKE_NOTE
#   and a function mt_paper_row "SRC-TGT" printing the published dev/test BLEU.
# The options (env vars) are documented in the recipes.
CONTEXT="${CONTEXT:-acvi}"
SRC="${SRC:-en}"
TGT="${TGT:-$MT_DEFAULT_TGT}"
SMOKE="${SMOKE:-0}"
suffix=""; [[ "$SMOKE" == "1" ]] && suffix="_smoke"
DATA_BIN="${DATA_BIN:-data-bin/${MT_NAME}_${SRC}_${TGT}${suffix}}"
SAVE_DIR="${SAVE_DIR:-checkpoints/mt_${MT_NAME}_${SRC}_${TGT}_${CONTEXT}${suffix}}"
MAX_EPOCH="${MAX_EPOCH:-12}"
LR="${LR:-1.0}"
ANNEAL_FROM="${ANNEAL_FROM:-8}"
BATCH_SIZE="${BATCH_SIZE:-128}"
CLIP_NORM="${CLIP_NORM:-5}"
SEED="${SEED:-1}"
TRAIN="${TRAIN:-1}"
BEAM="${BEAM:-10}"
MC_SAMPLES="${MC_SAMPLES:-}"
GEN_BATCH="${GEN_BATCH:-64}"
GEN_ARGS="${GEN_ARGS:-}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"

if [[ ! -f "$DATA_BIN/dict.$SRC.txt" ]]; then
  echo "[recipe] $DATA_BIN missing: building it with $MT_PREPARE"
  SRC="$SRC" TGT="$TGT" SMOKE="$SMOKE" DEST="$DATA_BIN" PYTHON="$PYTHON" bash "$MT_PREPARE"
fi
grep -h "^mode:" "$DATA_BIN/PROVENANCE.txt" 2>/dev/null | sed 's/^/[recipe] data /' || true
mkdir -p "$SAVE_DIR"

if [[ "$TRAIN" == "1" ]]; then
  "$PYTHON" -m fairseq_cli.train "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    --arch "$MT_ARCH" --context-inference "$CONTEXT" --criterion elbo \
    --optimizer sgd --lr "$LR" --lr-scheduler fixed --force-anneal "$ANNEAL_FROM" --lr-shrink 0.5 \
    --clip-norm "$CLIP_NORM" --batch-size "$BATCH_SIZE" --max-epoch "$MAX_EPOCH" --seed "$SEED" \
    --save-dir "$SAVE_DIR" --no-epoch-checkpoints --log-format simple --log-interval 100 \
    "$@" 2>&1 | tee "$SAVE_DIR/train.log"
fi

CKPT="$SAVE_DIR/checkpoint_best.pt"
[[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }
overrides=()
if [[ -n "$MC_SAMPLES" ]]; then overrides=(--model-overrides "{'mc_samples': $MC_SAMPLES}"); fi
for split in valid test; do
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.generate "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    --path "$CKPT" --gen-subset "$split" --beam "$BEAM" --nbest 1 --remove-bpe "$MT_REMOVE_BPE" --batch-size "$GEN_BATCH" \
    ${overrides[@]+"${overrides[@]}"} $GEN_ARGS > "$SAVE_DIR/gen_$split.txt"
  "$PYTHON" data_scripts/score_mt.py --gen "$SAVE_DIR/gen_$split.txt" --ref "$DATA_BIN/raw/$split.$TGT" \
    "${MT_SCORE_ARGS[@]}" --label "[$CONTEXT $SRC->$TGT $split] " --json "$SAVE_DIR/bleu_$split.json" \
    | tee -a "$SAVE_DIR/bleu.txt"
done

# Published BLEU dev/test (P Table 4; docs/method.md §5), soft-attention baseline vs ACVI.
echo "[paper, P Table 4] $SRC->$TGT BLEU dev/test: $(mt_paper_row "$SRC-$TGT")" | tee -a "$SAVE_DIR/bleu.txt"
if [[ "$SMOKE" == "1" ]]; then
  echo "[recipe] SMOKE data: $MT_SMOKE_NOTE -- NOT comparable with the paper" | tee -a "$SAVE_DIR/bleu.txt"
fi
