#!/bin/bash
# run_chain_gpu.sh: the one-query chain (every kernel ours, launched with
# programmatic dependent launch, GEMMs through eng_cu_gemm_chain) on a
# Hopper GPU, in one call: build; lab_gemm's checks of the chain kernel and
# its back-to-back time against cuBLASLt; lab_attn's quick checks (which
# include the chain's attention + O projection kernel), both also under
# compute-sanitizer memcheck; the end-to-end checks against
# transformers with the chain on for every bucket of <= 64 tokens (which
# includes gpu_backend_e2e: graph == eager bit for bit, batches in flight);
# then batch-1 GPU time with the chain off and on (CHAIN_VARIANTS), MiniLM and BERT-base
# (and Qwen3-0.6B, 28 layers, with QWEN3=1: its latency and e2e_qwen3).
#   usage: OUT=dir tests/cuda/run_chain_gpu.sh
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-e2e}
QWORK=${QWORK:-/tmp/posy-qwen3}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/chain.log"
. tests/cuda/gpu_lib.sh
status=0
gpu_name
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
LAB_SMALL_ONLY=1 timeout 120 "./$BUILD/lab_gemm" > "$OUT/lab_gemm.log" 2>&1 || status=1
grep -E "FAIL|bench|lab_gemm" "$OUT/lab_gemm.log" | tee -a "$LOG"
say "lab_gemm done"
memcheck() { # lab timeout_s: its quick checks under compute-sanitizer memcheck
  command -v compute-sanitizer >/dev/null || return 0
  LAB_QUICK=1 timeout "$2" compute-sanitizer --tool memcheck --error-exitcode 3 "./$BUILD/$1" > "$OUT/$1.memcheck.log" 2>&1
  local rc=$?
  say "compute-sanitizer memcheck $1: rc=$rc, $(grep -c Invalid "$OUT/$1.memcheck.log") invalid accesses"
  [ $rc -eq 0 ] || status=1
}
memcheck lab_gemm 150
LAB_QUICK=1 timeout 120 "./$BUILD/lab_attn" > "$OUT/lab_attn.log" 2>&1 || status=1
grep -E "FAIL|attn\+O|lab_attn" "$OUT/lab_attn.log" | tee -a "$LOG"
memcheck lab_attn 200
# chain variants (CHAIN_VARIANTS): 0 off, 64 on for every bucket <= 64 (the
# default), a suffix n: with the norms fused (POSY_CUDA_CHAIN_NORM=1), a:
# with attention always its own node (POSY_CUDA_CHAIN_ATTN=0), f: attention
# inside the O projection for every head size (POSY_CUDA_CHAIN_ATTN=1), l:
# the encoders' LayerNorms folded into the next GEMMs for buckets of <= 16
# tokens (POSY_CUDA_CHAIN_LN=16, an experiment; off by default)
latency() { # harness name
  for c in ${CHAIN_VARIANTS:-0 64 64a}; do
    n=${c%%[nafl]*}
    POSY_CUDA_CHAIN=$n POSY_CUDA_CHAIN_NORM=$(case $c in *n*) echo 1;; *) echo 0;; esac) \
    POSY_CUDA_CHAIN_LN=$(case $c in *l*) echo 16;; *) echo 0;; esac) \
    POSY_CUDA_CHAIN_ATTN=$(case $c in *a*) echo 0;; *f*) echo 1;; *) echo auto;; esac) BENCH_LATENCY_ONLY=1 \
      timeout 60 "./$BUILD/bench_gpu" "$1" "$2" 2>>"$OUT/bench_err.log" |
      sed "s/^{/{\"chain\": \"$c\", /" | tee -a "$OUT/chain_latency.jsonl" | tee -a "$LOG"
  done
}
[ -d "$WORK/bert-base-harness" ] ||
  timeout 120 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/enc_build.log" 2>&1
for m in minilm-l6 bert-base; do latency "$WORK/$m-harness" $m || status=1; done
say "latency done"
if [ -n "$QWEN3" ]; then
  [ -f "$QWORK/qwen3-causal-harness/dims.txt" ] ||
    timeout 150 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/qwen3_build.log" 2>&1
  latency "$QWORK/qwen3-causal-harness" qwen3-0.6b || status=1
fi
POSY_CUDA_CHAIN=64 PYTHONUNBUFFERED=1 timeout ${E2E_S:-330} python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 |
  grep -v "Writing model shards" > "$OUT/e2e.log"
rc=${PIPESTATUS[0]}
grep -vE "INFO  cuda backend: captured" "$OUT/e2e.log" | tail -30 | tee -a "$LOG"
say "e2e_vs_transformers (chain on): rc=$rc"
[ $rc -ne 0 ] && status=1
if [ -n "$QWEN3" ]; then
  POSY_CUDA_CHAIN=64 STAGES=e2e OUT="$OUT/qwen3" timeout 240 bash tests/cuda/run_qwen3_gpu.sh > /dev/null 2>&1
  rc=$?
  grep -E "FAIL|vs transformers|PASS|bit" "$OUT/qwen3/e2e_qwen3.log" | tee -a "$LOG"
  say "e2e_qwen3 (chain on): rc=$rc"
  [ $rc -ne 0 ] && status=1
fi
say "run_chain_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
