#!/usr/bin/env bash
# Multi30K (task 1) En->De / En->Fr with any context-inference variant, on real data, sized for a CPU.
# Per seed: train (Adam, early stopping on validation likelihood), decode valid / test2016 / test2017
# with beam 10, score tokenised lower-cased BLEU (as published Multi30K baselines) and detokenised
# sacreBLEU (signature printed), and for latent variants the source-use ablation and the
# Monte-Carlo sweep. Collect the runs with `python -m fairseq_acvi.cli.mt_report runs/multi30k`.
# Run from the repo root:
#   CONTEXT=acvi PAIR=en_de SEEDS="1 2 3" bash recipes/mt_multi30k.sh [extra fairseq-train args]
# Options (env vars):
#   CONTEXT=soft       none | soft | acvi | structured | variational | ved, or `lstm` for fairseq's own
#                      --arch lstm (bidirectional encoder, same size): the reference baseline
#   PAIR=en_de         en_de | en_fr (any SRC_TGT the data script supports)
#   SEEDS=1            space-separated seeds, one run each
#   TAG=               names a configuration (e.g. beta0.01 when passing --acvi-beta 0.01); the run
#                      folder is $RUNS/$PAIR/$CONTEXT[-$TAG]_seed$SEED
#   ARCH=acvi_lstm_multi30k  (acvi_lstm_iwslt: the paper's 2-layer size, for a GPU)
#   MAX_EPOCH=12 PATIENCE=3  early stopping: stop after PATIENCE epochs without a better validation
#                      likelihood (nll_loss; it ignores β, which a warm-up changes); 0 = off
#   LR=0.001 CLIP_NORM=1.0 MAX_TOKENS=4000   Adam
#   BEAM=10 GEN_BATCH=128 GEN_ARGS="--max-len-a 2 --max-len-b 10"  (outputs at most 2·|source| + 10 words)
#   EVAL_SPLITS="valid test2016 test2017"  splits decoded (a configuration sweep decodes valid only:
#                      choices are made on validation, never on test)
#   MC_SWEEP=          K values decoded besides the model's default (ACVI: K = 10), e.g. "0 1 5 10 20"
#   DEFAULT_DECODE=1   0: skip the decode at the model's own K (e.g. to add a K sweep to a finished run:
#                      TRAIN=0 DEFAULT_DECODE=0 ABLATE=0 MC_SWEEP="0 1 5 10 20")
#   ABLATE=1           source use: validation BLEU and likelihood with the context replaced by zeros
#                      (ACVI: on its mean context, K = 0; ablate.json names the baseline decode)
#                      and by another sentence's (--context-ablation); 0 = skip
#   TRAIN=1            0: skip training, evaluate the existing checkpoint_best.pt
#   RUNS=runs/multi30k DATA_BIN=data-bin/multi30k_$PAIR (built by data_scripts/prepare_multi30k.sh)
#   THREADS=1          OMP_NUM_THREADS of every process (two one-thread runs use both cores of 2)
#   DEVICE=            cpu (default where no GPU) or cuda; with cpu, --cpu is passed to fairseq
#   PYTHON=python USER_DIR=fairseq_acvi
set -euo pipefail

CONTEXT="${CONTEXT:-soft}"
PAIR="${PAIR:-en_de}"
SEEDS="${SEEDS:-1}"
TAG="${TAG:-}"
ARCH="${ARCH:-acvi_lstm_multi30k}"
MAX_EPOCH="${MAX_EPOCH:-12}"
PATIENCE="${PATIENCE:-3}"
LR="${LR:-0.001}"
CLIP_NORM="${CLIP_NORM:-1.0}"
MAX_TOKENS="${MAX_TOKENS:-4000}"
BEAM="${BEAM:-10}"
GEN_BATCH="${GEN_BATCH:-128}"
GEN_ARGS="${GEN_ARGS:---max-len-a 2 --max-len-b 10}"
MC_SWEEP="${MC_SWEEP:-}"
ABLATE="${ABLATE:-1}"
TRAIN="${TRAIN:-1}"
RUNS="${RUNS:-runs/multi30k}"
DATA_BIN="${DATA_BIN:-data-bin/multi30k_$PAIR}"
THREADS="${THREADS:-1}"
DEVICE="${DEVICE:-cpu}"
PYTHON="${PYTHON:-python}"
USER_DIR="${USER_DIR:-fairseq_acvi}"
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"

SRC="${PAIR%_*}"; TGT="${PAIR#*_}"
if [[ "$SRC" == "$PAIR" || -z "$SRC" || -z "$TGT" ]]; then
  echo "[recipe] error: PAIR must look like en_de, got '$PAIR'" >&2; exit 2
fi
case "$CONTEXT" in none|soft|acvi|structured|variational|ved|lstm) ;;
  *) echo "[recipe] error: CONTEXT must be none|soft|acvi|structured|variational|ved|lstm, got '$CONTEXT'" >&2; exit 2 ;;
esac
read -r -a SPLITS <<< "${EVAL_SPLITS:-valid test2016 test2017}"
for split in "${SPLITS[@]}"; do
  case "$split" in valid|test2016|test2017) ;;
    *) echo "[recipe] error: EVAL_SPLITS may hold valid, test2016, test2017; got '$split'" >&2; exit 2 ;;
  esac
done
if [[ ! -f "$DATA_BIN/dict.$SRC.txt" ]]; then
  echo "[recipe] $DATA_BIN missing: building it with data_scripts/prepare_multi30k.sh"
  SRC="$SRC" TGT="$TGT" DEST="$DATA_BIN" PYTHON="$PYTHON" bash data_scripts/prepare_multi30k.sh
fi
[[ -f "$DATA_BIN/splits.json" ]] || { echo "[recipe] error: $DATA_BIN/splits.json missing (rebuild the data)" >&2; exit 2; }
subset() {  # fairseq subset name of a named split (valid, test2016, test2017)
  "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$DATA_BIN/splits.json" "$1"
}

cpu_flag=(); [[ "$DEVICE" == "cpu" ]] && cpu_flag=(--cpu)
if [[ "$CONTEXT" == "lstm" ]]; then
  # fairseq's own attentional LSTM at the preset's size (its --arch lstm initialises U(-0.1, 0.1))
  model_args=(--arch lstm --encoder-bidirectional --encoder-layers 1 --decoder-layers 1
    --encoder-embed-dim 256 --encoder-hidden-size 256 --decoder-embed-dim 256
    --decoder-hidden-size 256 --decoder-out-embed-dim 256 --dropout 0.3 --criterion cross_entropy
    --best-checkpoint-metric loss)   # cross_entropy's loss is the likelihood (it logs no nll_loss)
  STOCHASTIC=0
else
  model_args=(--arch "$ARCH" --context-inference "$CONTEXT" --criterion elbo --best-checkpoint-metric nll_loss)
  STOCHASTIC=0; [[ "$CONTEXT" == "acvi" ]] && STOCHASTIC=1
fi

for SEED in $SEEDS; do
  RUN="$RUNS/$PAIR/${CONTEXT}${TAG:+-$TAG}_seed$SEED"
  mkdir -p "$RUN"
  if [[ "$TRAIN" == "1" ]]; then
    "$PYTHON" - "$RUN/run.json" "$PAIR" "$CONTEXT" "$TAG" "$SEED" "$ARCH" "$MAX_EPOCH" "$PATIENCE" \
        "$LR" "$MAX_TOKENS" "$DEVICE" "$*" <<'EOF'
import datetime, json, sys
out, pair, context, tag, seed, arch, max_epoch, patience, lr, max_tokens, device, extra = sys.argv[1:]
json.dump({"pair": pair, "context": context, "tag": tag, "seed": int(seed),
           "arch": "lstm" if context == "lstm" else arch, "max_epoch": int(max_epoch),
           "patience": int(patience), "lr": float(lr), "max_tokens": int(max_tokens),
           "device": device, "extra_train_args": extra,
           "date": datetime.date.today().isoformat()}, open(out, "w"), indent=1)
EOF
    patience=(); [[ "$PATIENCE" != "0" ]] && patience=(--patience "$PATIENCE")
    # `tee -a`: a resumed run (same command; fairseq restarts from checkpoint_last.pt) keeps its log
    "$PYTHON" -m fairseq_cli.train "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
      "${model_args[@]}" --optimizer adam --lr "$LR" --clip-norm "$CLIP_NORM" \
      --max-tokens "$MAX_TOKENS" --max-epoch "$MAX_EPOCH" "${patience[@]}" --seed "$SEED" \
      --save-dir "$RUN" --no-epoch-checkpoints \
      --log-format json --log-interval 50 --num-workers 0 "${cpu_flag[@]}" "$@" 2>&1 | tee -a "$RUN/train.log"
  fi
  CKPT="$RUN/checkpoint_best.pt"
  [[ -f "$CKPT" ]] || { echo "[recipe] error: no checkpoint $CKPT" >&2; exit 1; }

  decode() {  # decode SPLIT NAME [model overrides]: writes gen_NAME.txt and bleu_NAME.json
    local split="$1" name="$2" overrides="${3:-}"
    local extra=(); [[ -n "$overrides" ]] && extra=(--model-overrides "$overrides")
    "$PYTHON" -m fairseq_cli.generate "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
      --path "$CKPT" --gen-subset "$(subset "$split")" --beam "$BEAM" --nbest 1 --batch-size "$GEN_BATCH" \
      --scoring sacrebleu "${cpu_flag[@]}" "${extra[@]}" $GEN_ARGS > "$RUN/gen_$name.txt"
    "$PYTHON" data_scripts/score_mt.py --gen "$RUN/gen_$name.txt" --ref "$DATA_BIN/raw/$split.$TGT" \
      --moses-detok "$TGT" --label "[$PAIR ${CONTEXT}${TAG:+-$TAG} seed $SEED $name] " --json "$RUN/bleu_$name.json"
  }
  validate() {  # validate NAME [model overrides]: validation likelihood into validate_NAME.log
    local name="$1" overrides="${2:-}"
    local extra=(); [[ -n "$overrides" ]] && extra=(--model-overrides "$overrides")
    "$PYTHON" -m fairseq_cli.validate "$DATA_BIN" --user-dir "$USER_DIR" --task translation -s "$SRC" -t "$TGT" \
      --path "$CKPT" --valid-subset "$(subset valid)" --max-tokens "$MAX_TOKENS" --log-format json \
      "${cpu_flag[@]}" "${extra[@]}" > "$RUN/validate_$name.log" 2>&1
  }

  if [[ "${DEFAULT_DECODE:-1}" == "1" ]]; then
    for split in "${SPLITS[@]}"; do decode "$split" "$split"; done
  fi
  if [[ "$CONTEXT" != "lstm" && "$CONTEXT" != "none" && "$ABLATE" == "1" ]]; then
    # A stochastic context is ablated on its mean (K = 0: deterministic, and K times cheaper than
    # averaging K samples over the full softmax); the baseline is then the K = 0 decode.
    k_over=""; base=valid
    if [[ "$STOCHASTIC" == "1" ]]; then
      k_over="'mc_samples': 0, "; base=valid_K0
      decode valid valid_K0 "{'mc_samples': 0}"
    elif [[ " ${SPLITS[*]} " != *" valid "* || "${DEFAULT_DECODE:-1}" != "1" ]]; then
      decode valid valid
    fi
    "$PYTHON" -c "import json,sys; json.dump({'base': sys.argv[2], 'mc_samples': 0 if sys.argv[3] == '1' else None}, open(sys.argv[1], 'w'))" \
      "$RUN/ablate.json" "$base" "$STOCHASTIC"
    validate valid "{${k_over%, }}"
    for ab in zero shuffle; do
      decode valid "valid_ablate-$ab" "{${k_over}'context_ablation': '$ab'}"
      validate "valid_ablate-$ab" "{${k_over}'context_ablation': '$ab'}"
    done
  fi
  if [[ "$STOCHASTIC" == "1" && -n "$MC_SWEEP" ]]; then
    for K in $MC_SWEEP; do
      for split in "${SPLITS[@]}"; do decode "$split" "${split}_K$K" "{'mc_samples': $K}"; done
    done
  fi
  echo "[recipe] done: $RUN"
done
