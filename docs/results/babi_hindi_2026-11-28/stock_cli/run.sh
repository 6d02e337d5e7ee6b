#!/bin/bash
# One run of the issue-60 stock-CLI command (fairseq-train, then fairseq-validate on test with
# S = 10 for t-MEM-NN), from the repository root. Variables: D (data folder; default the shared
# hn folder), OUT, EP (epochs, 60), ARCH (t_memn2n or memn2n), EXTRA (more fairseq-train options).
# Each folder beside this script is one run; its name says which (README.md of the page).
set -e
D=${D:-$ACVI_DATA/babi/tasks_1-20_v1-2/hn}
OUT=${OUT:-runs/hn60/repro_hn}
EP=${EP:-60}
ARCH=${ARCH:-t_memn2n}
if [ "$ARCH" = t_memn2n ]; then CRIT="--criterion t_divergence --t-divergence tied --divergence-weight 0.001"; else CRIT="--criterion qa_cross_entropy"; fi
mkdir -p $OUT
fairseq-train $D --user-dir fairseq_acvi --task babi_qa --babi-tasks 1 --arch $ARCH --embed-dim 50 --tying adjacent --empty-memories attend --random-noise 0.1 --linear-start-epochs 20 $CRIT --optimizer adam --lr 0.01 --clip-norm 40 --batch-size 29 --required-batch-size-multiple 1 --max-epoch $EP --seed 1 --save-dir $OUT/ck --cpu --no-epoch-checkpoints --log-format simple $EXTRA > $OUT/train.log 2>&1
MO="{'mc_samples': 10}"; [ "$ARCH" = t_memn2n ] || MO="{}"
fairseq-validate $D --user-dir fairseq_acvi --task babi_qa --babi-tasks 1 --path $OUT/ck/checkpoint_best.pt --valid-subset test --batch-size 32 --model-overrides "$MO" --cpu > $OUT/test.log 2>&1
python -m fairseq_acvi.babi_eval.errors --path $OUT/ck/checkpoint_best.pt --data $D --out $OUT/errors.json > /dev/null
tail -1 $OUT/test.log
