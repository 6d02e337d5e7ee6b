#!/usr/bin/env bash
# "Guess the number" (docs/method.md §4.4): generate the games, train MemN2N and t-MEM-NN, play 100
# test games with each and print accuracy / success / rounds beside D Tables 16-17. From the
# repository root: bash recipes/guess_number.sh (main ones: FULL=0, 1 for the published settings;
# SETTINGS OUT=runs/guess_number MODELS T_DIVERGENCE=tied MAX_EPOCH=30). Every variable and why the
# defaults: docs/recipes/guess_number.md
set -euo pipefail
source "$(dirname "$0")/lib_check.sh"
FULL="${FULL:-0}"
check_choice FULL 0 1
if [[ "$FULL" == "1" ]]; then
  SETTINGS="${SETTINGS:-0:10:1000 0:100:10000}"; MAX_EPOCH="${MAX_EPOCH:-100}"; LR_HALVE_EPOCHS="${LR_HALVE_EPOCHS:-25}"
else
  SETTINGS="${SETTINGS:-0:10:1000}"; MAX_EPOCH="${MAX_EPOCH:-30}"; LR_HALVE_EPOCHS="${LR_HALVE_EPOCHS:-10}"
fi
OUT="${OUT:-runs/guess_number}"
MODELS="${MODELS:-memn2n t_memn2n}"
PLAYER="${PLAYER:-random}"
LR="${LR:-0.1}"
BATCH_SIZE="${BATCH_SIZE:-32}"
OPTIMIZER="${OPTIMIZER:-adagrad}"
T_DIVERGENCE="${T_DIVERGENCE:-tied}"
MC_SAMPLES="${MC_SAMPLES:-10}"
GAMES="${GAMES:-100}"
PLAY_SEED="${PLAY_SEED:-1}"
TRANSCRIPTS="${TRANSCRIPTS:-1}"
SEED="${SEED:-1}"
DATA_SEED="${DATA_SEED:-1}"
TRAIN="${TRAIN:-1}"
TRAIN_ARGS="${TRAIN_ARGS:-}"
PYTHON="${PYTHON:-python}"
check_positive_int MAX_EPOCH LR_HALVE_EPOCHS BATCH_SIZE MC_SAMPLES GAMES
check_int PLAY_SEED TRANSCRIPTS SEED DATA_SEED
check_nonneg_number LR
check_choice_list MODELS ' ' memn2n t_memn2n
check_choice T_DIVERGENCE seed exact tied
check_choice PLAYER bisect lower random
check_choice TRAIN 0 1
for setting in $SETTINGS; do   # LOW:HIGH:GAMES, whole numbers
  [[ "$setting" =~ ^[0-9]+:[0-9]+:[1-9][0-9]*$ ]] \
    || _check_fail SETTINGS "a list of LOW:HIGH:GAMES (whole numbers, e.g. '0:10:1000 0:100:10000')" "$SETTINGS"
done
[[ -n "${SETTINGS// /}" ]] || _check_fail SETTINGS "a list of LOW:HIGH:GAMES (e.g. '0:10:1000')" "$SETTINGS"
recipe_settings FULL SETTINGS MAX_EPOCH LR_HALVE_EPOCHS OUT MODELS PLAYER LR BATCH_SIZE OPTIMIZER \
  T_DIVERGENCE MC_SAMPLES GAMES PLAY_SEED TRANSCRIPTS SEED DATA_SEED TRAIN TRAIN_ARGS PYTHON
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

criterion_args() {
  case "$1" in
    memn2n) echo "--criterion qa_cross_entropy" ;;
    t_memn2n) echo "--criterion t_divergence --t-divergence $T_DIVERGENCE" ;;
    *) echo "[recipe] error: unknown model $1 (memn2n | t_memn2n)" >&2; exit 1 ;;
  esac
}

for model in $MODELS; do
  [[ "$model" == "memn2n" || "$model" == "t_memn2n" ]] || { echo "[recipe] error: MODELS: unknown model '$model' (memn2n | t_memn2n)" >&2; exit 1; }
done
results=()
for setting in $SETTINGS; do
  IFS=: read -r low high games <<<"$setting"
  [[ -n "$low" && -n "$high" && -n "$games" ]] || { echo "[recipe] error: SETTINGS entry '$setting' is not LOW:HIGH:GAMES" >&2; exit 1; }
  dir="$OUT/${low}-${high}_${games}"
  data="$dir/data"
  mkdir -p "$dir/results"
  if [[ ! -f "$data/guess_number.json" ]]; then
    "$PYTHON" data_scripts/make_guess_number.py --out "$data" --low "$low" --high "$high" \
      --train-games "$games" --test-games 100 --player "$PLAYER" --seed "$DATA_SEED"
  fi
  # lr halved every LR_HALVE_EPOCHS epochs: the step scheduler counts updates, so convert
  # (train = training file minus babi_qa's default --valid-fraction 0.1)
  updates_per_epoch=$("$PYTHON" -c "import json,math,sys; q=json.load(open(sys.argv[1]))['splits']['train']['questions']; print(math.ceil((q - round(q * 0.1)) / int(sys.argv[2])))" "$data/guess_number.json" "$BATCH_SIZE")
  period=$(( updates_per_epoch * LR_HALVE_EPOCHS ))
  "$PYTHON" -m fairseq_acvi.cli.guess_number --scripted "$PLAYER" --data "$data" --games "$GAMES" \
    --seed "$PLAY_SEED" --label "scripted $PLAYER" --results-json "$dir/results/scripted.json" >/dev/null
  results+=("$dir/results/scripted.json")
  for model in $MODELS; do
    save="$dir/ckpt_$model"
    if [[ "$TRAIN" == "1" ]]; then
      mkdir -p "$save"
      echo "[recipe] training $model on [$low,$high] with $games games ($MAX_EPOCH epochs)"
      # shellcheck disable=SC2046,SC2086
      "$PYTHON" -m fairseq_cli.train "$data" --user-dir fairseq_acvi --task babi_qa --babi-tasks 1 \
        --arch "$model" $(criterion_args "$model") --optimizer "$OPTIMIZER" --lr "$LR" \
        --lr-scheduler step --lr-deacy-period "$period" --lr-decay 0.5 --warmup-init-lr "$LR" \
        --batch-size "$BATCH_SIZE" --max-epoch "$MAX_EPOCH" --seed "$SEED" --num-workers 0 \
        --save-dir "$save" --no-epoch-checkpoints --no-last-checkpoints --log-format simple \
        --log-interval 1000 $TRAIN_ARGS > "$save/train.log" 2>&1 \
        || { tail -30 "$save/train.log" >&2; echo "[recipe] error: training $model failed ($save/train.log)" >&2; exit 1; }
      grep "valid on 'valid' subset" "$save/train.log" | tail -1 | sed "s/^/[recipe] $model last valid: /" || true
    fi
    ckpt="$save/checkpoint_best.pt"
    [[ -f "$ckpt" ]] || { echo "[recipe] error: no checkpoint $ckpt" >&2; exit 1; }
    if [[ "$model" == "t_memn2n" ]]; then plays="1 $MC_SAMPLES"; else plays="-"; fi
    for s in $plays; do
      tag="$model"; extra=()
      if [[ "$s" != "-" ]]; then tag="${model}_S$s"; extra=(--mc-samples "$s"); fi
      "$PYTHON" -m fairseq_acvi.cli.guess_number --path "$ckpt" --data "$data" --games "$GAMES" \
        --seed "$PLAY_SEED" --transcripts "$TRANSCRIPTS" --label "$tag" "${extra[@]}" \
        --results-json "$dir/results/$tag.json" | tee "$dir/results/$tag.log"
      results+=("$dir/results/$tag.json")
    done
  done
done

"$PYTHON" - "${results[@]}" <<'EOF'
"""Side-by-side table: ours vs D Tables 16-17 (accuracy %, success %, rounds)."""
import json, sys
from fairseq_acvi.published import GUESS_NUMBER as PUB  # (low, high, games) -> player -> (acc, succ, rounds)
print("\naccuracy = share of all guesses inside the implied bounds; acc/game = mean of the per-game "
      "shares (the seed's transcripts report accuracy per game)")
print(f"{'setting':<20} {'player':<14} {'acc %':>6} {'acc/game':>8} {'succ %':>7} {'rounds':>7} "
      f"{'invalid':>7}  | published acc succ rounds")
for path in sys.argv[1:]:
    r = json.load(open(path))
    games = json.load(open(path.rsplit("/results/", 1)[0] + "/data/guess_number.json"))
    games = games["splits"]["train"]["games"]
    pub = PUB.get((r["low"], r["high"], games), {}).get(r["label"])
    pub_s = f"{pub[0]:>3} {pub[1]:>4} {pub[2]:>6}" if pub else "  -"
    rounds = "n/a" if r["rounds"] != r["rounds"] else f"{r['rounds']:.2f}"
    setting = f"[{r['low']},{r['high']}] {games} games"
    print(f"{setting:<20} {r['label']:<14} {100 * r['accuracy']:>6.1f} "
          f"{100 * r['accuracy_per_game']:>8.1f} {100 * r['success']:>7.1f} {rounds:>7} "
          f"{r['invalid']:>7}  | {pub_s}")
EOF
