#!/usr/bin/env bash
# Get one folder of the bAbI QA tasks v1.2 (docs/method.md §4.3) and print its path, the folder to
# pass to --task babi_qa (or BABI_DATA of recipes/babi.sh).
#
# Usage (from the repo root):
#   bash data_scripts/get_babi.sh                      # en: a local copy if one is found, else download
#   VARIANT=hn bash data_scripts/get_babi.sh           # any of the six task folders of the release:
#                                                      # en, en-10k, hn, hn-10k, shuffled, shuffled-10k
#   BABI_SRC=PATH bash data_scripts/get_babi.sh        # use this local copy: a folder that holds
#                                                      # tasks_1-20_v1-2/ (or is it, or is the variant
#                                                      # folder), or the release tarball tasks_1-20_v1-2.tar.gz
# Where it looks, in order: BABI_SRC (if set: only there), BABI_DIR (data/babi: an earlier download
# or extraction, or its tarball), SHARED_BABI (a read-only copy holding tasks_1-20_v1-2/; unset:
# $ACVI_DATA/babi when ACVI_DATA names the data root; this project's copy holds en, en-10k, hn and shuffled, without
# en-10k's qa3 training file), then it downloads BABI_URL (the official tarball, ~15 MB, all folders)
# into BABI_DIR (a failed download: exit 2, naming BABI_SRC and ACVI_DATA). en-10k from SHARED_BABI,
# which lacks qa3's training file: with EN10K_QA3=partial (default) and SHARED_BABI/en-valid-10k-qa3/
# present, BABI_DIR/assembled/en-10k links the shared files and takes as qa3's training file the
# 1,000 questions that exist (the official en-valid-10k qa3 split; ASSEMBLED.txt there says so);
# EN10K_QA3=none: the shared folder as it is, task 3 left out with a warning.
# The en-valid / en-valid-10k folders re-split en's training files (qa{N}_train / qa{N}_valid) and are
# not task folders: babi_qa holds out its own seeded 10 % (--valid-fraction) of each training file.
# Last line of output: the absolute path of the variant folder (e.g. for BABI_DATA=...). A folder
# with fewer than 20 training files is used with a warning that names the missing tasks.
set -euo pipefail

BABI_DIR="${BABI_DIR:-data/babi}"
BABI_SRC="${BABI_SRC:-}"
SHARED_BABI="${SHARED_BABI:-${ACVI_DATA:+$ACVI_DATA/babi}}"
BABI_URL="${BABI_URL:-http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz}"
VARIANT="${VARIANT:-en}"
EN10K_QA3="${EN10K_QA3:-partial}"
RELEASE=tasks_1-20_v1-2

case "$EN10K_QA3" in partial|none) ;; *) echo "error: EN10K_QA3=$EN10K_QA3 (partial or none)" >&2; exit 1 ;; esac
case "$VARIANT" in
    en|en-10k|hn|hn-10k|shuffled|shuffled-10k) ;;
    en-valid|en-valid-10k)
        echo "error: VARIANT=$VARIANT re-splits en's training files into qa{N}_train/qa{N}_valid and is" \
             "not a task folder; use VARIANT=${VARIANT/-valid/} (babi_qa holds out its own 10 %)" >&2
        exit 1 ;;
    *)
        echo "error: VARIANT=$VARIANT is not a folder of the bAbI v1.2 release" \
             "(en, en-10k, hn, hn-10k, shuffled, shuffled-10k)" >&2
        exit 1 ;;
esac

check() {  # $1 = the variant folder: report it and print its absolute path
    local n missing="" t
    n=$(ls "$1"/qa*_*_train.txt 2>/dev/null | wc -l || true)
    if [[ "$n" -lt 1 ]]; then
        echo "error: no qa*_*_train.txt files in $1" >&2
        exit 1
    fi
    for t in $(seq 1 20); do
        ls "$1"/qa"$t"_*_train.txt >/dev/null 2>&1 || missing="$missing $t"
    done
    echo "bAbI $VARIANT: $n training files in $1" >&2
    if [[ -n "$missing" ]]; then
        echo "warning: no training file for task(s)$missing in $1 (pass --babi-tasks / TASKS without them)" >&2
    fi
    (cd "$1" && pwd)
}

variants_in() {  # $1 = a tasks_1-20_v1-2 folder: the variant folders it holds, space-separated
    local d out=""
    for d in "$1"/*/; do
        [[ -d "$d" ]] && out="$out $(basename "$d")"
    done
    echo "${out:- none}"
}

use_release() {  # $1 = a tasks_1-20_v1-2 folder; $2 = where it came from (for the error)
    if [[ -d "$1/$VARIANT" ]]; then
        check "$1/$VARIANT"; exit 0
    fi
    echo "error: $2 has no $VARIANT folder (it holds:$(variants_in "$1")); unset BABI_SRC to" \
         "download the official release, or point BABI_SRC at a copy with $VARIANT" >&2
    exit 1
}

extract() {  # $1 = tarball -> BABI_DIR/tasks_1-20_v1-2 (the release's own top folder)
    mkdir -p "$BABI_DIR"
    tar -xzf "$1" -C "$BABI_DIR"
    if [[ ! -d "$BABI_DIR/$RELEASE" ]]; then
        echo "error: $1 did not unpack to $RELEASE/" >&2
        exit 1
    fi
}

if [[ -n "$BABI_SRC" ]]; then
    if [[ -d "$BABI_SRC/$RELEASE" ]]; then
        use_release "$BABI_SRC/$RELEASE" "BABI_SRC=$BABI_SRC"
    elif [[ -d "$BABI_SRC" && "$(basename "$BABI_SRC")" == "$VARIANT" ]]; then
        check "$BABI_SRC"; exit 0
    elif [[ -d "$BABI_SRC" ]] && ls "$BABI_SRC"/*/qa*_*_train.txt >/dev/null 2>&1; then
        use_release "$BABI_SRC" "BABI_SRC=$BABI_SRC"
    elif [[ -f "$BABI_SRC" ]]; then
        extract "$BABI_SRC"
        use_release "$BABI_DIR/$RELEASE" "the tarball $BABI_SRC"
    fi
    echo "error: BABI_SRC=$BABI_SRC is neither a bAbI folder nor a tarball" >&2
    exit 1
fi

if [[ -d "$BABI_DIR/$RELEASE/$VARIANT" ]]; then
    check "$BABI_DIR/$RELEASE/$VARIANT"; exit 0
fi
tarball="$BABI_DIR/$RELEASE.tar.gz"
if [[ -f "$tarball" ]]; then
    extract "$tarball"
    use_release "$BABI_DIR/$RELEASE" "the tarball $tarball"
fi
if [[ -n "$SHARED_BABI" && -d "$SHARED_BABI/$RELEASE/$VARIANT" ]]; then
    shared="$SHARED_BABI/$RELEASE/$VARIANT"
    partial="$SHARED_BABI/en-valid-10k-qa3/en-valid-10k_qa3_valid.txt"
    if [[ "$VARIANT" == en-10k && "$EN10K_QA3" == partial && -f "$partial" ]] &&
       ! ls "$shared"/qa3_*_train.txt >/dev/null 2>&1; then
        # the shared copy lacks en-10k's qa3 training file: a folder of links to its files, with
        # qa3's training file the 1,000 questions that exist (the official en-valid-10k qa3 split)
        shared="$(cd "$shared" && pwd)"
        dest="$BABI_DIR/assembled/en-10k"
        mkdir -p "$dest"
        ln -sf "$shared"/qa*.txt "$dest"/
        ln -sf "$(cd "$(dirname "$partial")" && pwd)/$(basename "$partial")" \
            "$dest/qa3_three-supporting-facts_train.txt"
        printf '%s\n' "en-10k assembled by data_scripts/get_babi.sh: every file links to $shared except" \
            "qa3_three-supporting-facts_train.txt, which holds 1,000 of the release's 10,000 qa3 training" \
            "questions (en-valid-10k's qa3_valid.txt, $partial); the shared copy has no qa3 training file." \
            > "$dest/ASSEMBLED.txt"
        echo "warning: en-10k task 3 trains on 1,000 questions (the shared copy lacks its 10,000-question" \
             "training file; $dest/ASSEMBLED.txt); EN10K_QA3=none leaves task 3 out" >&2
        check "$dest"; exit 0
    fi
    check "$shared"; exit 0
fi
mkdir -p "$BABI_DIR"
echo "downloading $BABI_URL" >&2
fetched=0
if command -v curl >/dev/null; then
    curl -fL --retry 3 -o "$tarball.part" "$BABI_URL" && fetched=1
else
    wget -O "$tarball.part" "$BABI_URL" && fetched=1
fi
if [[ "$fetched" != 1 ]]; then
    rm -f "$tarball.part"
    echo "error: could not download $BABI_URL and no local copy has $RELEASE/$VARIANT: set BABI_SRC=<a bAbI" \
         "folder or tarball>, or ACVI_DATA=<data root holding babi/$RELEASE/> (or SHARED_BABI=<folder holding" \
         "$RELEASE/>)" >&2
    exit 2
fi
mv "$tarball.part" "$tarball"
extract "$tarball"
use_release "$BABI_DIR/$RELEASE" "the downloaded $BABI_URL"
