#!/usr/bin/env bash
# The wheels that benchmarks/gpu_session.sh carries to a lent GPU machine (Python 3.12, PyTorch
# there, no package registry): fairseq-fixed and what it needs beyond that machine's own packages.
# From the repository root, with a registry here:
#   bash benchmarks/gpu_wheels.sh        # -> .whl/ (ignored by git: .gitignore)
# then name .whl in the device call's carry and set WHEELS=.whl there.
set -euo pipefail
DEST="${DEST:-.whl}"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$DEST" fairseq-fixed==0.12.3.1 bitarray hydra-core==1.3.2 omegaconf==2.3.0 \
  entmax sacremoses
# antlr4 (hydra's parser runtime) is published as source only: a pure-Python wheel built here
python3 -m pip wheel -q --no-deps -w "$DEST" antlr4-python3-runtime==4.9.3
ls "$DEST"
