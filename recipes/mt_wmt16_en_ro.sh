#!/usr/bin/env bash
# WMT'16 En<->Ro (joint sentencepiece BPE) with any context-inference variant at the papers' size (docs/method.md §3.3, P Table 4):
# train (SGD), decode valid and test with beam 10, BLEU next to the paper's figures. From the repo root:
#   CONTEXT=acvi bash recipes/mt_wmt16_en_ro.sh [extra fairseq-train args]
# Every variable and the smoke data: docs/recipes/mt_paper_lstm.md
set -euo pipefail

MT_NAME=wmt16_en_ro
MT_DEFAULT_TGT=ro
MT_PREPARE=data_scripts/prepare_wmt16_en_ro.sh
MT_ARCH=acvi_lstm_paper
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
