#!/usr/bin/env bash
# WMT'16 En<->Ro (joint sentencepiece BPE) with any context-inference variant (docs/method.md §3.3; §5, P Table 4).
# Trains, then decodes valid (newsdev2016) and test (newstest2016) with beam 10 and prints sacrebleu BLEU
# (detokenised: sentencepiece output vs the raw references) next to the paper's figures. Run from the repo root:
#   CONTEXT=acvi bash recipes/mt_wmt16_en_ro.sh [extra fairseq-train args]
# Options (env vars):
#   CONTEXT=acvi        none | soft | acvi | structured | variational | ved
#   SRC=en TGT=ro       direction (or SRC=ro TGT=en)
#   SMOKE=0             1: smoke data (newsdev2016 split 3 ways; NOT the paper's setting)
#   DATA_BIN            default data-bin/wmt16_en_ro_${SRC}_${TGT}[_smoke]; built by data_scripts/ if missing
#   WMT_DIR, VOCAB_SIZE passed to the data script
#   SAVE_DIR            default checkpoints/mt_wmt16_en_ro_${SRC}_${TGT}_${CONTEXT}[_smoke]
#   MAX_EPOCH=12 LR=1.0 ANNEAL_FROM=8 (SGD, lr halved every epoch from this one on) BATCH_SIZE=128 CLIP_NORM=5
#   SEED=1  TRAIN=1 (0: skip training, evaluate SAVE_DIR/checkpoint_best.pt)
#   BEAM=10  MC_SAMPLES (unset: the model's default K=10; 0 = deterministic mean)  GEN_BATCH=64
#   GEN_ARGS            extra fairseq-generate args
#   USER_DIR=fairseq_acvi  PYTHON=python
set -euo pipefail

MT_NAME=wmt16_en_ro
MT_DEFAULT_TGT=ro
MT_PREPARE=data_scripts/prepare_wmt16_en_ro.sh
MT_ARCH=acvi_lstm_wmt_en_ro
MT_REMOVE_BPE=sentencepiece
MT_SCORE_ARGS=(--detok-only)
MT_SMOKE_NOTE="1,599 newsdev2016 pairs for training"
mt_paper_row() {
  case "$1" in
    en-ro) echo "baseline 12.87 / 14.40, ACVI 14.15 / 15.78" ;;
    ro-en) echo "baseline 15.87 / 15.78, ACVI 18.07 / 17.78" ;;
    *) echo "(none)" ;;
  esac
}
source "$(dirname "$0")/lib_mt.sh"
