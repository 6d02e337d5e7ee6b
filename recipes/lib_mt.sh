# Shared body of the translation recipes (sourced by recipes/mt_*.sh, which set):
#   MT_NAME MT_DEFAULT_TGT MT_PREPARE MT_ARCH MT_REMOVE_BPE MT_SCORE_ARGS (array) MT_SMOKE_NOTE
#   and a function mt_paper_row "SRC-TGT" printing the published dev/test BLEU.
# The options (env vars) are documented in the recipes.
#
# MT_LIB_ONLY=1 sources only the functions below (recipes/mt_multi30k.sh, recipes/mt_pag.sh): the
# per-run logic they share (pair, choices, data, subsets, run.json, train, decode).
# They read the recipe's variables: PYTHON USER_DIR DATA_BIN SRC TGT RUN CKPT BEAM GEN_BATCH GEN_ARGS
# MAX_TOKENS LR CLIP_NORM MAX_EPOCH PATIENCE SEED DEVICE.
# Sourcing it also sources recipes/lib_check.sh (check_* and recipe_settings).
source "$(dirname "${BASH_SOURCE[0]}")/lib_check.sh"
mt_process_defaults() {  # the process settings of every translation recipe (env vars): THREADS=1
  # (OMP_NUM_THREADS of every process; two one-thread runs use both cores of 2), DEVICE=cpu (cuda: no
  # --cpu), PYTHON=python, USER_DIR=fairseq_acvi
  THREADS="${THREADS:-1}"; DEVICE="${DEVICE:-cpu}"; PYTHON="${PYTHON:-python}"
  USER_DIR="${USER_DIR:-fairseq_acvi}"
  check_positive_int THREADS
  check_choice DEVICE cpu cuda
  export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
}
mt_check_run_settings() {  # the per-seed training and decoding variables every per-seed translation
  # recipe reads (exit 2 naming a bad one): SEEDS, MAX_EPOCH, MAX_TOKENS, BEAM, GEN_BATCH, PATIENCE,
  # LR, CLIP_NORM, TRAIN
  check_int_list SEEDS
  check_positive_int MAX_EPOCH MAX_TOKENS BEAM GEN_BATCH
  check_int PATIENCE
  check_nonneg_number LR CLIP_NORM
  check_choice TRAIN 0 1
}
mt_split_pair() {  # mt_split_pair PAIR: sets SRC and TGT from e.g. en_de (exit 2 if malformed)
  SRC="${1%_*}"; TGT="${1#*_}"
  if [[ "$SRC" == "$1" || -z "$SRC" || -z "$TGT" ]]; then
    echo "[recipe] error: PAIR must look like en_de, got '$1'" >&2; exit 2
  fi
}
mt_require_choice() {  # mt_require_choice NAME VALUE ALLOWED...: exit 2 unless VALUE is one of ALLOWED
  local name="$1" value="$2" allowed; shift 2
  for allowed in "$@"; do [[ "$value" == "$allowed" ]] && return 0; done
  echo "[recipe] error: $name must be $(IFS='|'; echo "$*"), got '$value'" >&2; exit 2
}
mt_ensure_data() {  # mt_ensure_data PREPARE_SH: build $DATA_BIN for $SRC-$TGT with it when missing
  if [[ ! -f "$DATA_BIN/dict.$SRC.txt" ]]; then
    echo "[recipe] $DATA_BIN missing: building it with $1"
    SRC="$SRC" TGT="$TGT" DEST="$DATA_BIN" PYTHON="$PYTHON" bash "$1"
  fi
  [[ -f "$DATA_BIN/splits.json" ]] || { echo "[recipe] error: $DATA_BIN/splits.json missing (rebuild the data)" >&2; exit 2; }
}
mt_subset() {  # mt_subset SPLIT: fairseq subset name of a named split (valid, test2016, test2017)
  "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$DATA_BIN/splits.json" "$1"
}
mt_cpu_flag() {  # mt_cpu_flag: sets the array cpu_flag (--cpu when DEVICE=cpu)
  cpu_flag=(); [[ "$DEVICE" == "cpu" ]] && cpu_flag=(--cpu)
  return 0
}
mt_write_json() {  # mt_write_json OUT KEY=TEXT|KEY:=JSON ...: one JSON object, plus today's "date"
  "$PYTHON" - "$@" <<'EOF_PY'
import datetime, json, sys
rec = {}
for item in sys.argv[2:]:
    key, sep, value = item.partition("=")
    if key.endswith(":"):
        rec[key[:-1]] = json.loads(value)
    else:
        rec[key] = value
rec["date"] = datetime.date.today().isoformat()
json.dump(rec, open(sys.argv[1], "w"), indent=1)
EOF_PY
}
mt_train() {  # mt_train MODEL_ARGS... [-- EXTRA_ARGS...]: fairseq-train into $RUN (Adam, early stopping)
  local model=() patience=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do model+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  [[ "$PATIENCE" != "0" ]] && patience=(--patience "$PATIENCE")
  mt_cpu_flag
  # `tee -a`: a resumed run (same command; fairseq restarts from checkpoint_last.pt) keeps its log
  "$PYTHON" -m fairseq_cli.train "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    "${model[@]}" --optimizer adam --lr "$LR" --clip-norm "$CLIP_NORM" \
    --max-tokens "$MAX_TOKENS" --max-epoch "$MAX_EPOCH" ${patience[@]+"${patience[@]}"} --seed "$SEED" \
    --save-dir "$RUN" --no-epoch-checkpoints \
    --log-format json --log-interval 50 --num-workers 0 ${cpu_flag[@]+"${cpu_flag[@]}"} "$@" 2>&1 | tee -a "$RUN/train.log"
}
mt_generate() {  # mt_generate SPLIT OUT [MODEL_OVERRIDES]: beam search on a named split of $CKPT into OUT
  local split="$1" out="$2" overrides="${3:-}" extra=()
  [[ -n "$overrides" ]] && extra=(--model-overrides "$overrides")
  mt_cpu_flag
  # shellcheck disable=SC2086
  "$PYTHON" -m fairseq_cli.generate "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
    --path "$CKPT" --gen-subset "$(mt_subset "$split")" --beam "$BEAM" --nbest 1 --batch-size "$GEN_BATCH" \
    ${cpu_flag[@]+"${cpu_flag[@]}"} ${extra[@]+"${extra[@]}"} $GEN_ARGS > "$out"
}
mt_replan_json() {  # mt_replan_json TRAIN_LOG OUT: the validation 'replan' fraction (pag/rpag) of the
  # best and of the last epoch of a fairseq json train log (null where the model logs none)
  "$PYTHON" - "$1" "$2" <<'EOF_PY'
import json, sys
from fairseq_acvi.mt_eval import parse_train_log
valid = parse_train_log(sys.argv[1])["valid"]
if not valid:
    sys.exit(f"[recipe] error: no validation record in {sys.argv[1]}")
def row(ep):
    rec = valid[ep]
    return {"epoch": ep, "replan": rec.get("replan"), "nll_loss": rec.get("nll_loss")}
scored = [ep for ep in valid if valid[ep].get("nll_loss") is not None]
best = min(scored, key=lambda ep: (valid[ep]["nll_loss"], ep)) if scored else max(valid)
out = {"source": "elbo criterion, validation (teacher-forced, switch by argmax)",
       "best": row(best), "last": row(max(valid))}
json.dump(out, open(sys.argv[2], "w"), indent=1)
r = out["best"]["replan"]
print(f"[recipe] plan recomputed at {'n/a' if r is None else f'{100 * r:.1f}%'} of validation steps "
      f"(best epoch {best}); {sys.argv[2]}")
EOF_PY
}
[[ "${MT_LIB_ONLY:-0}" == "1" ]] && return 0
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
mt_require_choice CONTEXT "$CONTEXT" none soft acvi structured variational ved pag rpag
check_choice SMOKE 0 1
check_choice TRAIN 0 1
check_positive_int MAX_EPOCH BATCH_SIZE BEAM GEN_BATCH
check_int ANNEAL_FROM SEED
check_nonneg_number LR CLIP_NORM
check_optional int MC_SAMPLES
recipe_settings CONTEXT SRC TGT SMOKE DATA_BIN SAVE_DIR TRAIN MAX_EPOCH LR ANNEAL_FROM BATCH_SIZE \
  CLIP_NORM SEED BEAM MC_SAMPLES GEN_BATCH GEN_ARGS PYTHON USER_DIR

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
