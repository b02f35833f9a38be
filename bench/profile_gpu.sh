#!/bin/bash
# profile_gpu.sh: where a saturated throughput step's GPU time goes, per
# kernel kind (ncu, gpu__time_duration only: one replay per kernel).  Each
# model runs `bench_gpu --step TOKENS SEQLEN`: three steps of equal-length
# sequences, only the third (a graph replay after tuning and capture)
# inside the profiled range.  Needs the build and harness folders of
# tests/cuda/run_gpu_tests.sh (and run_qwen3_gpu.sh for qwen3).
# ATTN="2 4" profiles each model once per attention version (POSY_CUDA_ATTN);
# empty (the default) profiles the shipped one.  Missing encoder folders are
# made as bench_gpu.sh makes them.
# KERNEL=regex instead profiles COUNT (default 4) launches of the kernels
# whose names match, with ncu's full set of sections and source-level
# stall sampling, into $OUT/ncu_kernel_<model>.txt -- e.g. KERNEL=skinny3
# STEP="16 16": the one-query chain's GEMM, where its time goes inside
# (ncu serializes kernels, so the overlap PDL gives is not in these times).
#   usage: OUT=dir [STEP="65536 128"] [MODELS="minilm-l6 bert-base qwen3-0.6b"] [ATTN=".."]
#          [KERNEL=regex [COUNT=n]] bench/profile_gpu.sh
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-e2e}
STEP=${STEP:-65536 128}
MODELS=${MODELS:-minilm-l6 bert-base qwen3-0.6b}
mkdir -p "$OUT"
command -v ncu >/dev/null || { echo "profile_gpu: no ncu on this machine"; exit 1; }
[ -x "$BUILD/bench_gpu" ] || { echo "profile_gpu: build $BUILD first (tests/cuda/run_gpu_tests.sh)"; exit 1; }
[ -d "$WORK/bert-base-harness" ] || python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" >/dev/null 2>&1
status=0
for v in ${ATTN:-shipped}; do
[ "$v" = shipped ] && unset POSY_CUDA_ATTN || export POSY_CUDA_ATTN=$v
for m in $MODELS; do
  dir="$WORK/$m-harness"
  [ "$m" = qwen3-0.6b ] && dir="${QWORK:-/tmp/posy-qwen3}/qwen3-causal-harness"
  [ -d "$dir" ] || { echo "profile_gpu: no $dir, skipped"; continue; }
  set -- $STEP
  if [ -n "$KERNEL" ]; then
    timeout 300 ncu --profile-from-start off --clock-control none --set full --import-source yes \
      -k "regex:$KERNEL" --launch-count "${COUNT:-4}" \
      "./$BUILD/bench_gpu" "$dir" "$m" --step "$1" "$2" > "$OUT/ncu_kernel_$m.txt" 2>&1 || status=1
    grep -E "Duration|Warp Cycles Per Issued|Stall|Memory Throughput|Registers Per" "$OUT/ncu_kernel_$m.txt" | head -40
    continue
  fi
  timeout 300 ncu --profile-from-start off --clock-control none --csv --metrics gpu__time_duration.sum \
    "./$BUILD/bench_gpu" "$dir" "$m" --step "$1" "$2" > "$OUT/ncu_step_$m.$v.csv" 2> "$OUT/ncu_step_$m.$v.err" || status=1
  python3 bench/ncu_summary.py "$OUT/ncu_step_$m.$v.csv" "$m" \
    "one step of $1 tokens in sequences of $2 (ncu, graph replay after tuning, each kernel timed alone; attention: $v)" |
    tee -a "$OUT/profile_report.md"
done
done
exit $status
