#!/usr/bin/env bash
# The prepared checks for a lent GPU (one call of the device tool, well inside its 10 minutes), in
# the order that matters: the parallel decoder's and the compiled step's speed against the step
# loop and fairseq's lstm at the shapes of docs/results/parallel_decoder_2026-11-29/ (the CPU
# figures there), then every CUDA test (the parallel path, the compiled step, every family's mixed
# precision). Each step has its own time limit and writes its own file under $OUT, so a step
# that fails or runs out of time loses only itself. From the repository root, on the device:
#   OUT=$OUT WHEELS=.whl ACVI_DATA=data bash benchmarks/gpu_session.sh speed    # ≈ 7-8 minutes
#   OUT=$OUT WHEELS=.whl ACVI_DATA=data bash benchmarks/gpu_session.sh checks   # ≈ 5 minutes
#   OUT=$OUT WHEELS=.whl bash benchmarks/gpu_session.sh runs   # ≤ 9 minutes: trainings, docs/recipes/side_by_side.md
# (one call each: each fits the device tool's 10-minute limit with time to spare for the install).
# Several parts may be named in one call (speed checks); ONLY (step names, space-separated) runs
# those steps alone, CUDA_TESTS_K narrows the tests: a short lease spent on what is new.
# The device has Python 3.12 and no package registry: WHEELS (optional) is a folder of wheels
# carried with the tree (fairseq-fixed's cp312 wheel, bitarray, hydra-core, omegaconf,
# antlr4-python3-runtime, entmax, sacremoses), installed without resolution into /tmp/site; the
# plugin is read from the tree (PYTHONPATH).
set -uo pipefail
(( $# )) || { echo "usage: gpu_session.sh speed|checks|runs [...]" >&2; exit 2; }
for PART in "$@"; do
  [[ "$PART" == speed || "$PART" == checks || "$PART" == runs ]] \
    || { echo "error: PART must be speed, checks or runs, got '$PART'" >&2; exit 2; }
done
OUT="${OUT:-gpu_out}"
mkdir -p "$OUT"
if [[ -n "${WHEELS:-}" ]]; then  # no dependency resolution there: every missing package is carried
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl \
    > "$OUT/install.txt" 2>&1
  export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 - > "$OUT/env.txt" 2>&1 <<'PY'
import platform, torch
print(platform.python_version(), torch.__version__, torch.version.cuda,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")
PY
step() {  # step NAME SECONDS COMMAND...: run with a limit, output to $OUT/NAME.txt, status noted
  local name="$1" limit="$2"; shift 2
  [[ -z "${ONLY:-}" || " $ONLY " == *" $name "* ]] || return 0
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/steps.txt"
}
B=benchmarks/bench_parallel_decoder.py
for PART in "$@"; do
if [[ "$PART" == speed ]]; then
# where a training step's time goes at the 2-layer word shape (device busy against wall time)
step profile_word2 150 python3 benchmarks/profile_train_step.py --device cuda --len 30 --vocab 8000 --layers 2 --compile reduce-overhead
# the step loop compiled (docs/method.md §3.8) beside the step loop, the parallel path and fairseq's
# lstm at the character shape, where PAG trained at 0.30× soft on the H200 (2026-11-28)
step compiled_char 190 python3 "$B" --device cuda --rounds 5 --batch 32 --len 72 --src-len 16 --vocab 120 --layers 1 --variants soft,acvi,pag,rpag --compile reduce-overhead,inductor
step parallel_multi30k 120 python3 "$B" --device cuda --rounds 5 --batch 256 --len 14 --src-len 15 --vocab 7860 --layers 1 --compile reduce-overhead
step parallel_word2 120 python3 "$B" --device cuda --rounds 5 --len 30 --vocab 8000 --layers 2 --count --compile reduce-overhead
step parallel_cnndm 150 python3 "$B" --device cuda --model pointer_generator --rounds 3 --batch 16 --len 100 --src-len 400 --vocab 50000 --compile reduce-overhead
elif [[ "$PART" == runs ]]; then
# recipe runs side by side (recipes/side_by_side.sh): PLAN (default the Multi30K plan), DEADLINE
# (seconds, default 520: inside the device call's 600 with the install and the pack); float32
# matrix products as on the CPU; the runs' logs, hypotheses and scores come back as runs.tar.gz
NVIDIA_TF32_OVERRIDE=0 PLAN="${PLAN:-experiments/gpu_plan_multi30k.txt}" DEADLINE="${DEADLINE:-520}" \
  DEVICE="${DEVICE:-cuda}" PYTHON=python3 PACK="$OUT/runs.tar.gz" bash recipes/side_by_side.sh \
  > "$OUT/side_by_side.txt" 2>&1
echo "runs: exit $?" | tee -a "$OUT/steps.txt"
else
# every CUDA test: the parallel path, the compiled step, every family's mixed precision
# (CUDA_TESTS_K narrows them to a pytest -k expression, CUDA_TESTS_LIMIT bounds the time)
step cuda_tests "${CUDA_TESTS_LIMIT:-480}" python3 -m pytest -m cuda tests/test_cuda.py -q -n 14 \
  ${CUDA_TESTS_K:+-k "$CUDA_TESTS_K"}
fi
done
