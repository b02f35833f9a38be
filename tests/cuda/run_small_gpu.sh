#!/bin/bash
# run_small_gpu.sh: the small-batch persistent kernel (eng_cu_mega.cu) on a
# Hopper GPU, in one call: build, the end-to-end checks against
# transformers and against the graph of kernels (gpu_backend_e2e runs both,
# plus graph == eager bit for bit on a <= 64-token batch), then batch-1 GPU
# time with the kernel on (POSY_CUDA_MEGA=1, opt-in) and off, both models.
#   usage: OUT=dir tests/cuda/run_small_gpu.sh       (QWEN3=1: rerun e2e_qwen3 too)
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-e2e}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/small.log"
. tests/cuda/gpu_lib.sh
status=0
gpu_name
git log -1 --format='commit %h %s' 2>/dev/null | tee -a "$LOG"
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
export POSY_CUDA_MEGA=1 # the kernel is opt-in
PYTHONUNBUFFERED=1 timeout 330 python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 |
  grep -v "Writing model shards" > "$OUT/e2e.log"
rc=${PIPESTATUS[0]}
grep -vE "INFO  cuda backend: captured" "$OUT/e2e.log" | tee -a "$LOG"
say "e2e_vs_transformers: rc=$rc"
[ $rc -ne 0 ] && status=1
for m in minilm-l6 bert-base; do
  POSY_CUDA_MEGA_PROFILE=1 timeout 60 "./$BUILD/lab_mega" "$WORK/$m-harness" "$m" > "$OUT/lab_mega_$m.log" 2>&1
  rc=$?
  cat "$OUT/lab_mega_$m.log" | tee -a "$LOG"
  say "lab_mega $m: rc=$rc"
  [ $rc -ne 0 ] && status=1
done
for m in minilm-l6 bert-base; do
  for mode in on off; do
    if [ $mode = off ]; then export POSY_CUDA_MEGA=0; else export POSY_CUDA_MEGA=1; fi
    BENCH_LATENCY_ONLY=1 timeout 60 "./$BUILD/bench_gpu" "$WORK/$m-harness" "$m" 2>>"$OUT/bench_err.log" |
      sed "s/^{/{\"small_kernel\": \"$mode\", /" | tee -a "$OUT/small_latency.jsonl" | tee -a "$LOG"
  done
done
unset POSY_CUDA_MEGA
if [ -n "$QWEN3" ]; then
  STAGES=e2e OUT="$OUT/qwen3" timeout 200 bash tests/cuda/run_qwen3_gpu.sh > /dev/null 2>&1
  say "qwen3 e2e rerun: $(tail -1 "$OUT/qwen3/qwen3.log")"
  grep -E "FAIL|vs transformers|PASS" "$OUT/qwen3/e2e_qwen3.log" | tee -a "$LOG"
fi
say "run_small_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
