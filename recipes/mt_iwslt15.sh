#!/usr/bin/env bash
# IWSLT'15 En<->Vi with any context-inference variant at the papers' size (docs/method.md §3.3, P Table 4):
# train (SGD), decode valid and test with beam 10, BLEU next to the paper's figures. From the repo root:
#   CONTEXT=acvi bash recipes/mt_iwslt15.sh [extra fairseq-train args]
# Every variable and the smoke data: docs/recipes/mt_paper_lstm.md
set -euo pipefail

MT_NAME=iwslt15
MT_DEFAULT_TGT=vi
MT_PREPARE=data_scripts/prepare_iwslt15_en_vi.sh
MT_ARCH=acvi_lstm_paper
MT_REMOVE_BPE=space
MT_SCORE_ARGS=(--moses-detok "${TGT:-$MT_DEFAULT_TGT}")
MT_SMOKE_NOTE="trained on tst2012, scored on tst2013"
mt_paper_row() {
  case "$1" in
    en-vi) echo "baseline 23.21 / 25.18, ACVI 24.08 / 26.16" ;;
    vi-en) echo "baseline 20.89 / 23.28, ACVI 21.26 / 24.47" ;;
    *) echo "(none)" ;;
  esac
}
source "$(dirname "$0")/lib_mt.sh"
