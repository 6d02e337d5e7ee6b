#!/usr/bin/env bash
# Why sparsemax attention trains worse than softmax on Multi30K En->De (docs/method.md §3.5, "How
# they train"): three measurements, each a stage (STAGES, default "early posthoc final").
#   early    the first 180 updates of the preset (soft, seed 1) with softmax and with sparsemax, a
#            checkpoint every 30 updates, each read teacher-forced on valid by
#            experiments/attention_score_scale.py (OUT/early_<normaliser>.json). ~25 min per model
#            on one core.
#   posthoc  the finished softmax runs ($SOFTMAX_RUNS/soft_seed<N>, recipes/mt_multi30k.sh, SEEDS)
#            decoded on valid with sparsemax and 1.5-entmax in place of softmax, no retraining
#            (fairseq-generate --model-overrides; beam 10 as the recipe): BLEU
#            (OUT/posthoc/seed<N>_<normaliser>_bleu.json, the H- lines gzipped beside it), and the
#            attention statistics of greedy decodes of seed 1 (metrics/attention_stats.py, also of
#            the runs as trained: OUT/posthoc/stats_*.json).
#   final    the score scale of softmax seed 1 and of the trained sparsemax run ($SPARSEMAX_RUN),
#            with a fresh model and the scorer's gradient at initialisation (OUT/final.json); the
#            two runs' validation perplexity per epoch, from their train.log (OUT/valid_ppl.json).
# Usage (repository root):
#   SOFTMAX_RUNS=runs/multi30k/en_de SPARSEMAX_RUN=runs/normalizers/en_de/soft-sparsemax_seed1 \
#     OUT=docs/results/<experiment>_<date> bash experiments/sparse_attention_training.sh
# Resumable: finished files are kept. DATA_BIN (default data-bin/multi30k_en_de), SEEDS (1 2 3).
set -euo pipefail
DATA_BIN="${DATA_BIN:-data-bin/multi30k_en_de}"
SOFTMAX_RUNS="${SOFTMAX_RUNS:?set SOFTMAX_RUNS (the folder of soft_seed<N>)}"
SPARSEMAX_RUN="${SPARSEMAX_RUN:-}"
OUT="${OUT:?set OUT (the results folder)}"
SEEDS="${SEEDS:-1 2 3}"
STAGES="${STAGES:-early posthoc final}"
WORK="${WORK:-runs/sparse_attention_training}"   # the short runs' checkpoints (not results)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-python}"
mkdir -p "$OUT"
[[ -f "$DATA_BIN/dict.en.txt" ]] || { echo "error: $DATA_BIN: no Multi30K data-bin (recipes/mt_multi30k.sh prepares it)" >&2; exit 2; }
keep_scored() {  # keep_scored GEN BASE LABEL [AGAINST]: GEN's H- lines kept as BASE.txt.gz (what
  # score_mt reads), scored into BASE_bleu.json, with the paired bootstrap against AGAINST if given
  local against=()
  [[ -n "${4:-}" ]] && against=(--against "$4")
  grep '^H-' "$1" | gzip -n > "$2.txt.gz"
  "$PYTHON" data_scripts/score_mt.py --gen "$2.txt.gz" --ref "$DATA_BIN/raw/valid.de" --moses-detok de \
    ${against[@]+"${against[@]}"} --json "$2_bleu.json" --label "[$3] "
}
scale=(experiments/attention_score_scale.py --data "$DATA_BIN" --subset valid --max-sentences 300)

if [[ " $STAGES " == *" early "* ]]; then
  for norm in softmax sparsemax; do
    dir="$WORK/early_$norm"
    if [[ ! -f "$dir/checkpoint_2_180.pt" ]]; then
      mkdir -p "$dir"
      # the preset's training (recipes/mt_multi30k.sh: Adam 1e-3, clip 1, 4000 tokens), cut short
      "$PYTHON" -m fairseq_cli.train "$DATA_BIN" --user-dir fairseq_acvi --task translation -s en -t de \
        --arch acvi_lstm_multi30k --context-inference soft --criterion elbo \
        --optimizer adam --lr 0.001 --clip-norm 1.0 --max-tokens 4000 --max-update 180 --seed 1 \
        --save-dir "$dir" --no-epoch-checkpoints --save-interval-updates 30 --keep-interval-updates 100 \
        --disable-validation --log-format json --log-interval 10 --num-workers 0 --cpu \
        --attention-normalizer "$norm" > "$dir/train.log" 2>&1
    fi
    if [[ ! -f "$OUT/early_$norm.json" ]]; then
      paths=(); for u in 30 60 90 120 150 180; do
        paths+=(--path "$(ls "$dir"/checkpoint_*_"$u".pt)"); done
      "$PYTHON" "${scale[@]}" "${paths[@]}" --out "$OUT/early_$norm.json" > /dev/null
    fi
  done
fi

if [[ " $STAGES " == *" posthoc "* ]]; then
  mkdir -p "$OUT/posthoc"
  for seed in $SEEDS; do
    ckpt="$SOFTMAX_RUNS/soft_seed$seed/checkpoint_best.pt"
    [[ -f "$ckpt" ]] || { echo "error: $ckpt: missing (a finished softmax run of seed $seed)" >&2; exit 2; }
    [[ -f "$OUT/posthoc/softmax_seed${seed}_bleu.json" ]] ||   # the run's own decode, kept
      keep_scored "$SOFTMAX_RUNS/soft_seed$seed/gen_valid.txt" "$OUT/posthoc/softmax_seed$seed" "softmax seed $seed"
    for norm in sparsemax entmax15; do
      name="$OUT/posthoc/seed${seed}_$norm"
      if [[ ! -f "${name}_bleu.json" ]]; then
        "$PYTHON" -m fairseq_cli.generate "$DATA_BIN" --user-dir fairseq_acvi --task translation -s en -t de \
          --path "$ckpt" --gen-subset valid --beam 10 --nbest 1 --batch-size 128 --cpu \
          --max-len-a 2 --max-len-b 10 --model-overrides "{'attention_normalizer': '$norm'}" > "$name.txt"
        # paired with the run's own decode (softmax) of the same sentences
        keep_scored "$name.txt" "$name" "softmax seed $seed decoded with $norm" \
          "$SOFTMAX_RUNS/soft_seed$seed/gen_valid.txt"
        rm "$name.txt"
      fi
    done
  done
  stats=(-m fairseq_acvi.metrics.attention_stats --data "$DATA_BIN" --subset valid --beam 1 --max-len-a 2 --max-len-b 10)
  s1="$SOFTMAX_RUNS/soft_seed1/checkpoint_best.pt"
  [[ -f "$OUT/posthoc/stats_softmax.json" ]] || "$PYTHON" "${stats[@]}" --path "$s1" --out "$OUT/posthoc/stats_softmax.json" > /dev/null
  for norm in sparsemax entmax15; do
    f="$OUT/posthoc/stats_softmax_decoded_$norm.json"
    [[ -f "$f" ]] || "$PYTHON" "${stats[@]}" --path "$s1" --model-overrides "{'attention_normalizer': '$norm'}" --out "$f" > /dev/null
  done
  if [[ -n "$SPARSEMAX_RUN" && ! -f "$OUT/posthoc/sparsemax_trained_seed1_bleu.json" ]]; then
    # the trained sparsemax run's own decode (the recipe's), against softmax seed 1's
    keep_scored "$SPARSEMAX_RUN/gen_valid.txt" "$OUT/posthoc/sparsemax_trained_seed1" \
      "sparsemax trained, seed 1" "$SOFTMAX_RUNS/soft_seed1/gen_valid.txt"
  fi
  if [[ -n "$SPARSEMAX_RUN" && ! -f "$OUT/posthoc/stats_sparsemax_trained.json" ]]; then
    "$PYTHON" "${stats[@]}" --path "$SPARSEMAX_RUN/checkpoint_best.pt" --out "$OUT/posthoc/stats_sparsemax_trained.json" > /dev/null
  fi
fi

if [[ " $STAGES " == *" final "* && ! -f "$OUT/final.json" ]]; then
  paths=(--path "$SOFTMAX_RUNS/soft_seed1/checkpoint_best.pt")
  [[ -n "$SPARSEMAX_RUN" ]] && paths+=(--path "$SPARSEMAX_RUN/checkpoint_best.pt")
  "$PYTHON" "${scale[@]}" "${paths[@]}" --fresh --grad-at-init --out "$OUT/final.json" > /dev/null
fi
if [[ " $STAGES " == *" final "* && -n "$SPARSEMAX_RUN" ]]; then
  "$PYTHON" - "$SOFTMAX_RUNS/soft_seed1" "$SPARSEMAX_RUN" "$OUT/valid_ppl.json" <<'EOF_PY'
import json, sys
from fairseq_acvi.mt_eval.runs import read_run
out = {}
for name, folder in (("softmax", sys.argv[1]), ("sparsemax", sys.argv[2])):
    run = read_run(folder)
    out[name] = {"run": folder, "valid_ppl": {e["epoch"]: round(e["valid_ppl"], 4) for e in run["epochs"]}}
with open(sys.argv[3], "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
EOF_PY
fi
echo "[sparse_attention_training] done: $OUT"
