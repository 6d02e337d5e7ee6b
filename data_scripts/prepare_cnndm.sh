#!/usr/bin/env bash
# Prepare CNN/DailyMail with OOV position markers, then binarise it for fairseq (docs/method.md §3.1).
#
# Usage (from the repo root), the arguments are passed to prepare_cnndm.py:
#   OUT_DIR=data/cnndm/text BIN_DIR=data-bin/cnndm bash data_scripts/prepare_cnndm.sh \
#       --train-stories RAW/train --valid-stories RAW/valid --test-stories RAW/test --tokenize ptb
#   bash data_scripts/prepare_cnndm.sh --test-source S --test-target T --dict D
# Env vars (defaults): OUT_DIR (data/cnndm/text) text output, BIN_DIR (data-bin/cnndm) binarised
# output, VOCAB_SIZE (50000), MAX_SOURCE_POSITIONS (400), MAX_TARGET_POSITIONS (100),
# WORKERS (1), PYTHON (python).
# fairseq-preprocess gets the joined dictionary (dict.txt holds the <unk-j> markers) as both
# --srcdict and --tgtdict, for every split prepare_cnndm.py wrote.
set -euo pipefail

OUT_DIR="${OUT_DIR:-data/cnndm/text}"
BIN_DIR="${BIN_DIR:-data-bin/cnndm}"
VOCAB_SIZE="${VOCAB_SIZE:-50000}"
MAX_SOURCE_POSITIONS="${MAX_SOURCE_POSITIONS:-400}"
MAX_TARGET_POSITIONS="${MAX_TARGET_POSITIONS:-100}"
WORKERS="${WORKERS:-1}"
PYTHON="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

"$PYTHON" "$HERE/prepare_cnndm.py" --out-dir "$OUT_DIR" --vocab-size "$VOCAB_SIZE" \
    --max-source-positions "$MAX_SOURCE_POSITIONS" \
    --max-target-positions "$MAX_TARGET_POSITIONS" "$@"

prefs=()
for split in train valid test; do
    if [[ -f "$OUT_DIR/$split.src" ]]; then
        prefs+=("--${split}pref" "$OUT_DIR/$split")
    fi
done
if [[ ${#prefs[@]} -eq 0 ]]; then
    echo "error: prepare_cnndm.py wrote no split into $OUT_DIR" >&2
    exit 1
fi

"$PYTHON" -m fairseq_cli.preprocess --source-lang src --target-lang tgt \
    --srcdict "$OUT_DIR/dict.txt" --tgtdict "$OUT_DIR/dict.txt" \
    "${prefs[@]}" --destdir "$BIN_DIR" --workers "$WORKERS"

# the side files used after generation: restore_oov.py --src, eval --src / --ref
for split in train valid test; do
    for ext in article summary; do
        if [[ -f "$OUT_DIR/$split.$ext" ]]; then
            cp "$OUT_DIR/$split.$ext" "$BIN_DIR/$split.$ext"
        fi
    done
done
echo "binarised data in $BIN_DIR (dictionary: $BIN_DIR/dict.src.txt = dict.tgt.txt)"
