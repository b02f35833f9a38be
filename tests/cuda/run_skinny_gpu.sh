#!/bin/bash
# run_skinny_gpu.sh: the skinny GEMM (eng_cu_skinny.cu) v1 and v2 against
# cuBLASLt for one-query shapes, then the one-query GPU time of whole
# models with each (POSY_CUDA_SKINNY races it against cuBLASLt's heuristic
# per GEMM at the first run; POSY_CUDA_TUNE_LOG prints the picks).
#   usage: OUT=dir tests/cuda/run_skinny_gpu.sh
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
QWORK=${QWORK:-/tmp/posy-qwen3}
WORK=${WORK:-/tmp/posy-e2e}
mkdir -p "$OUT"
LOG="$OUT/skinny.log"
. tests/cuda/gpu_lib.sh
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
status=0
LAB_SMALL_ONLY=1 timeout 120 "./$BUILD/lab_gemm" > "$OUT/lab_gemm.log" 2>&1 || status=1
grep -E "FAIL|bench|lab_gemm" "$OUT/lab_gemm.log"
say "lab_gemm done"
latency() { # model dir name: one line per skinny setting
  for sk in none 1 2; do
    if [ $sk = none ]; then env -u POSY_CUDA_SKINNY BENCH_LATENCY_ONLY=1 timeout 60 "./$BUILD/bench_gpu" "$1" "$2"
    else POSY_CUDA_SKINNY=$sk POSY_CUDA_TUNE_LOG=1 BENCH_LATENCY_ONLY=1 timeout 60 "./$BUILD/bench_gpu" "$1" "$2" \
      2> "$OUT/tune_$2_$sk.log" | sed "s/posy-cuda-graph/posy-cuda-graph skinny=$sk/"; fi
  done | tee -a "$OUT/latency.jsonl"
}
[ -f "$QWORK/qwen3-causal-harness/dims.txt" ] ||
  timeout 150 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/qwen3_build.log" 2>&1
say "qwen3 model ready"
latency "$QWORK/qwen3-causal-harness" qwen3-0.6b || status=1
[ -d "$WORK/bert-base-harness" ] ||
  timeout 90 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/enc_build.log" 2>&1
for m in bert-base minilm-l6; do latency "$WORK/$m-harness" $m || status=1; done
say "run_skinny_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
