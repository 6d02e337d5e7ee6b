#!/usr/bin/env bash
# Get the bAbI QA tasks v1.2 (docs/method.md §4.3) and print the folder to pass to --task babi_qa.
#
# Usage (from the repo root):
#   bash data_scripts/get_babi.sh                      # download the official release (online)
#   BABI_SRC=PATH bash data_scripts/get_babi.sh        # use a local copy instead: a folder that
#                                                      # holds tasks_1-20_v1-2/ (or is it), or the
#                                                      # release tarball tasks_1-20_v1-2.tar.gz
# Env vars (defaults): BABI_DIR (data/babi) where a download/extraction goes, BABI_SRC (unset),
# BABI_URL (the official tarball), VARIANT (en) the sub-folder printed at the end
# (en, en-10k, hn, hn-10k, shuffled, shuffled-10k).
# Last line of output: the absolute path of the variant folder (e.g. for BABI_DATA=...).
set -euo pipefail

BABI_DIR="${BABI_DIR:-data/babi}"
BABI_SRC="${BABI_SRC:-}"
BABI_URL="${BABI_URL:-http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz}"
VARIANT="${VARIANT:-en}"

check() {  # $1 = tasks_1-20_v1-2 folder
    local n
    n=$(ls "$1/$VARIANT"/qa*_*_train.txt 2>/dev/null | wc -l)
    if [[ "$n" -lt 1 ]]; then
        echo "error: no qa*_*_train.txt files in $1/$VARIANT" >&2
        exit 1
    fi
    echo "bAbI $VARIANT: $n training files in $1/$VARIANT" >&2
    (cd "$1/$VARIANT" && pwd)
}

if [[ -n "$BABI_SRC" ]]; then
    if [[ -d "$BABI_SRC/tasks_1-20_v1-2" ]]; then
        check "$BABI_SRC/tasks_1-20_v1-2"; exit 0
    elif [[ -d "$BABI_SRC/$VARIANT" ]]; then
        check "$BABI_SRC"; exit 0
    elif [[ -f "$BABI_SRC" ]]; then
        mkdir -p "$BABI_DIR"
        tar -xzf "$BABI_SRC" -C "$BABI_DIR"
        check "$BABI_DIR/tasks_1-20_v1-2"; exit 0
    fi
    echo "error: BABI_SRC=$BABI_SRC is neither a bAbI folder nor a tarball" >&2
    exit 1
fi

if [[ -d "$BABI_DIR/tasks_1-20_v1-2/$VARIANT" ]]; then
    check "$BABI_DIR/tasks_1-20_v1-2"; exit 0
fi
mkdir -p "$BABI_DIR"
tarball="$BABI_DIR/tasks_1-20_v1-2.tar.gz"
echo "downloading $BABI_URL" >&2
if command -v curl >/dev/null; then
    curl -fL --retry 3 -o "$tarball.part" "$BABI_URL"
else
    wget -O "$tarball.part" "$BABI_URL"
fi
mv "$tarball.part" "$tarball"
tar -xzf "$tarball" -C "$BABI_DIR"
check "$BABI_DIR/tasks_1-20_v1-2"
