#!/bin/bash
# run_mpnet_gpu.sh: MPNet (all-mpnet-base-v2's architecture) on the CUDA
# engine in one device call: lab_attn's checks (the relative-bias cases
# beside every other) and compute-sanitizer memcheck, the end-to-end check
# against transformers on a random-weight MPNet-base, its one-query latency
# and throughput beside BERT-base's in the same call (bench_gpu), and
# lab_attn's timing (the bias's cost at 64 x 512 tokens, d = 64).
#   usage: OUT=dir [GPU_PREBUILT="lab_attn gpu_backend_e2e bench_gpu" BUILD=dir] tests/cuda/run_mpnet_gpu.sh
# Writes $OUT/mpnet_gpu.log, e2e.log, bench.jsonl, lab_attn_*.log, and
# mpnet-base-gpu.single.bin (for tests/cuda/compare_cpu.py ... mpnet-base).
. tests/cuda/gpu_lib.sh
gpu_setup mpnet_gpu.log
GPU_TARGET=${GPU_TARGET:-"lab_attn gpu_backend_e2e bench_gpu"}
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
LAB_QUICK=1 timeout 200 "./$BUILD/lab_attn" > "$OUT/lab_attn_quick.log" 2>&1 || status=1
say "lab_attn checks: $(tail -1 "$OUT/lab_attn_quick.log"); relative-bias checks ok: $(grep -c ' rel .* ok' "$OUT/lab_attn_quick.log")"
gpu_memcheck lab_attn 150 || status=1
PYTHONUNBUFFERED=1 timeout 300 python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" mpnet-base 2>&1 |
  grep -v "Writing model shards" > "$OUT/e2e.log" || status=1
say "e2e: $(tail -1 "$OUT/e2e.log")"
cp "$WORK/mpnet-base-gpu.single.bin" "$OUT/" 2>/dev/null
[ -d "$WORK/bert-base-harness" ] || python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" bert-base > /dev/null 2>&1
for m in mpnet-base bert-base; do
  timeout 120 "./$BUILD/bench_gpu" "$WORK/$m-harness" "$m" >> "$OUT/bench.jsonl" 2> "$OUT/bench_$m.err" || status=1
done
grep -E "saturation|latency" "$OUT/bench.jsonl" | tee -a "$LOG"
timeout 200 "./$BUILD/lab_attn" > "$OUT/lab_attn_full.log" 2>&1
grep -E "bench .*d=64 h=12 kv=12 bidir seqs=64 tokens=32768" "$OUT/lab_attn_full.log" | tee -a "$LOG"
say "run_mpnet_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
