#!/usr/bin/env bash
# IWSLT'15 En<->Vi with any context-inference variant (docs/method.md §3.3; published numbers §5, P Table 4).
# Trains, then decodes valid (tst2012) and test (tst2013) with beam 10 and prints sacrebleu BLEU (detokenised)
# and tokenised "multi-bleu style" BLEU, next to the paper's figures. Run from the repo root:
#   CONTEXT=acvi bash recipes/mt_iwslt15.sh [extra fairseq-train args]
# Options (env vars):
#   CONTEXT=acvi        none | soft | acvi | structured | variational | ved
#   SRC=en TGT=vi       direction (or SRC=vi TGT=en)
#   SMOKE=0             1: smoke data (train=tst2012, valid/test=tst2013; NOT the paper's setting)
#   DATA_BIN            default data-bin/iwslt15_${SRC}_${TGT}[_smoke]; built by data_scripts/ if missing
#   IWSLT_DIR           passed to the data script (folder with the Stanford files; unset: download)
#   SAVE_DIR            default checkpoints/mt_iwslt15_${SRC}_${TGT}_${CONTEXT}[_smoke]
#   MAX_EPOCH=12 LR=1.0 ANNEAL_FROM=8 (SGD, lr halved every epoch from this one on) BATCH_SIZE=128 CLIP_NORM=5
#   SEED=1  TRAIN=1 (0: skip training, evaluate SAVE_DIR/checkpoint_best.pt)
#   BEAM=10  MC_SAMPLES (unset: the model's default K=10; 0 = deterministic mean)  GEN_BATCH=64
#   GEN_ARGS            extra fairseq-generate args (e.g. "--max-len-a 1.5 --max-len-b 10")
#   USER_DIR=fairseq_acvi  PYTHON=python
set -euo pipefail

MT_NAME=iwslt15
MT_DEFAULT_TGT=vi
MT_PREPARE=data_scripts/prepare_iwslt15_en_vi.sh
MT_ARCH=acvi_lstm_iwslt
MT_REMOVE_BPE=space
MT_SCORE_ARGS=(--moses-detok "$TGT")
MT_SMOKE_NOTE="trained on tst2012, scored on tst2013"
mt_paper_row() {
  case "$1" in
    en-vi) echo "baseline 23.21 / 25.18, ACVI 24.08 / 26.16" ;;
    vi-en) echo "baseline 20.89 / 23.28, ACVI 21.26 / 24.47" ;;
    *) echo "(none)" ;;
  esac
}
source "$(dirname "$0")/lib_mt.sh"
