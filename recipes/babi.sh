#!/usr/bin/env bash
# bAbI (METHOD §4-5): train and test MemN2N and t-MEM-NN (S = 1, 10), single-task and joint,
# and write the report (markdown table next to the published one, bar chart, fitted ν,
# per-hop attention). Run from the repo root.
#
# Env vars (defaults): BABI_DATA (from data_scripts/get_babi.sh) the variant folder, OUT_DIR
# (runs/babi), TASKS (all), MODELS (memn2n,t_memn2n), SETUPS (single,joint), SEEDS (1; best of N
# by validation), EPOCHS (100), JOINT_EPOCHS (60), OPTIMIZER (adam), LR (0.01),
# T_DIVERGENCE (seed), PRIOR_DOF (10), EXTRA ("") more babi_report options.
#
# One model through the stock CLIs instead (what tests/test_memn2n.py does):
#   fairseq-train $BABI_DATA --user-dir fairseq_acvi --task babi_qa --babi-tasks 1 \
#     --arch t_memn2n --criterion t_divergence --t-divergence seed --optimizer adam --lr 0.01 \
#     --clip-norm 40 --batch-size 29 --required-batch-size-multiple 1 --max-epoch 100 \
#     --lr-scheduler step --lr-deacy-period 800 --lr-decay 0.5 --save-dir ck --cpu
#   fairseq-validate $BABI_DATA --user-dir fairseq_acvi --task babi_qa --babi-tasks 1 \
#     --path ck/checkpoint_best.pt --valid-subset test --model-overrides "{'mc_samples': '10'}" --cpu
set -euo pipefail

if [[ -z "${BABI_DATA:-}" ]]; then
    BABI_DATA="$(bash data_scripts/get_babi.sh | tail -n 1)"
fi
OUT_DIR="${OUT_DIR:-runs/babi}"
TASKS="${TASKS:-all}"
MODELS="${MODELS:-memn2n,t_memn2n}"
SETUPS="${SETUPS:-single,joint}"
SEEDS="${SEEDS:-1}"
EPOCHS="${EPOCHS:-100}"
JOINT_EPOCHS="${JOINT_EPOCHS:-60}"
OPTIMIZER="${OPTIMIZER:-adam}"
LR="${LR:-0.01}"
T_DIVERGENCE="${T_DIVERGENCE:-seed}"
PRIOR_DOF="${PRIOR_DOF:-10}"
EXTRA="${EXTRA:-}"

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# shellcheck disable=SC2086
python -m fairseq_acvi.cli.babi_report --data "$BABI_DATA" --out-dir "$OUT_DIR" \
    --tasks "$TASKS" --models "$MODELS" --setups "$SETUPS" --seeds "$SEEDS" \
    --epochs "$EPOCHS" --joint-epochs "$JOINT_EPOCHS" --optimizer "$OPTIMIZER" --lr "$LR" \
    --t-divergence "$T_DIVERGENCE" --prior-dof "$PRIOR_DOF" $EXTRA
echo "report: $OUT_DIR/babi_report.md"
