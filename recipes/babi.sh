#!/usr/bin/env bash
# bAbI (docs/method.md §4-5): MemN2N and t-MEM-NN (S = 1, 10), single-task and joint, and the
# report. Run from the repository root. Every variable, its default and why: docs/recipes/babi.md
# (main ones: VARIANT=en BABI_DATA OUT_DIR TASKS MODELS SETUPS SEEDS=10 EPOCHS=100 BATCH_SIZE). About 2.5 h
# on one idle core.
set -euo pipefail
source "$(dirname "$0")/lib_check.sh"

VARIANT="${VARIANT:-}"
[[ -z "$VARIANT" ]] || check_choice VARIANT en en-10k hn hn-10k shuffled shuffled-10k
TASKS="${TASKS:-all}"
MODELS="${MODELS:-memn2n,t_memn2n}"
SETUPS="${SETUPS:-single,joint}"
SEEDS="${SEEDS:-10}"
T_SEEDS="${T_SEEDS:-10}"
JOINT_SEEDS="${JOINT_SEEDS:-3}"
DIVERGENCE_WEIGHT="${DIVERGENCE_WEIGHT:-0.001}"
JOINT_DIVERGENCE_WEIGHT="${JOINT_DIVERGENCE_WEIGHT:-0.1}"
EPOCHS="${EPOCHS:-100}"
BATCH_SIZE="${BATCH_SIZE:-}"
JOINT_EPOCHS="${JOINT_EPOCHS:-60}"
OPTIMIZER="${OPTIMIZER:-adam}"
LR="${LR:-0.01}"
EMBED_DIM="${EMBED_DIM:-50}"
T_EMBED_DIM="${T_EMBED_DIM:-}"
T_DIVERGENCE="${T_DIVERGENCE:-tied}"
TYING="${TYING:-adjacent}"
EMPTY_MEMORIES="${EMPTY_MEMORIES:-attend}"
RANDOM_NOISE="${RANDOM_NOISE:-0.1}"
LINEAR_START="${LINEAR_START:-20}"
PRIOR_DOF="${PRIOR_DOF:-10}"
ESCORT_SAMPLER="${ESCORT_SAMPLER:-polar}"
ANSWER_CLASSES="${ANSWER_CLASSES:-dictionary}"
EXTRA="${EXTRA:-}"
PYTHON="${PYTHON:-python}"

check_positive_int SEEDS T_SEEDS JOINT_SEEDS EPOCHS JOINT_EPOCHS EMBED_DIM
check_optional positive_int BATCH_SIZE T_EMBED_DIM
check_int LINEAR_START
check_nonneg_number DIVERGENCE_WEIGHT JOINT_DIVERGENCE_WEIGHT LR RANDOM_NOISE PRIOR_DOF
check_choice_list MODELS , memn2n t_memn2n
check_choice_list SETUPS , single joint
check_choice OPTIMIZER adam adagrad sgd
check_choice T_DIVERGENCE seed exact tied
check_choice TYING layerwise adjacent
check_choice EMPTY_MEMORIES mask attend
check_choice ESCORT_SAMPLER polar gamma
check_choice ANSWER_CLASSES dictionary answers
[[ "$TASKS" == all || "$TASKS" =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] \
  || _check_fail TASKS "all, a list like 1,3,5 or a range like 1-20" "$TASKS"

if [[ -z "${BABI_DATA:-}" && "$DRY_RUN" == "1" ]]; then
    BABI_DATA="(get_babi.sh would fetch ${VARIANT:-en})"   # a dry run fetches nothing
elif [[ -z "${BABI_DATA:-}" ]]; then
    BABI_DATA="$(VARIANT="${VARIANT:-en}" bash data_scripts/get_babi.sh | tail -n 1)"
    VARIANT="${VARIANT:-en}"
fi
if [[ -z "${OUT_DIR:-}" ]]; then
    name="${VARIANT:-$(basename "$BABI_DATA")}"   # a release folder given as BABI_DATA names itself
    case "$name" in
        en-10k|hn|hn-10k|shuffled|shuffled-10k) OUT_DIR="runs/babi_$name" ;;
        *) OUT_DIR=runs/babi ;;
    esac
fi
recipe_settings VARIANT BABI_DATA OUT_DIR TASKS MODELS SETUPS SEEDS T_SEEDS JOINT_SEEDS EPOCHS \
  BATCH_SIZE JOINT_EPOCHS OPTIMIZER LR EMBED_DIM T_EMBED_DIM T_DIVERGENCE TYING EMPTY_MEMORIES \
  RANDOM_NOISE LINEAR_START PRIOR_DOF ESCORT_SAMPLER ANSWER_CLASSES DIVERGENCE_WEIGHT \
  JOINT_DIVERGENCE_WEIGHT EXTRA PYTHON

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# shellcheck disable=SC2086
"$PYTHON" -m fairseq_acvi.cli.babi_report --data "$BABI_DATA" ${VARIANT:+--variant "$VARIANT"} --out-dir "$OUT_DIR" \
    --tasks "$TASKS" --models "$MODELS" --setups "$SETUPS" --seeds "$SEEDS" --t-seeds "$T_SEEDS" \
    --joint-seeds "$JOINT_SEEDS" \
    --embed-dim "$EMBED_DIM" ${T_EMBED_DIM:+--t-embed-dim "$T_EMBED_DIM"} \
    --epochs "$EPOCHS" ${BATCH_SIZE:+--batch-size "$BATCH_SIZE"} --joint-epochs "$JOINT_EPOCHS" --optimizer "$OPTIMIZER" --lr "$LR" \
    --tying "$TYING" --empty-memories "$EMPTY_MEMORIES" --random-noise "$RANDOM_NOISE" \
    --linear-start-epochs "$LINEAR_START" \
    --t-divergence "$T_DIVERGENCE" --prior-dof "$PRIOR_DOF" --escort-sampler "$ESCORT_SAMPLER" \
    --answer-classes "$ANSWER_CLASSES" \
    --divergence-weight "$DIVERGENCE_WEIGHT" --joint-divergence-weight "$JOINT_DIVERGENCE_WEIGHT" $EXTRA
echo "report: $OUT_DIR/babi_report.md"
