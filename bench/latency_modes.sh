#!/bin/bash
# latency_modes.sh: batch-1 latency under the GEMM choices the engine can
# make -- default, POSY_CUDA_PDL=1 (programmatic dependent launch), POSY_CUDA_SKINNY=1 (the skinny kernel raced against the
# heuristic for M <= 64), POSY_CUDA_NO_TUNE (no candidate timing at all) --
# to decide the default.  Needs run_gpu_tests.sh's build and models.
# (bench/results/h200-latency-modes-2026-11-29.txt ran it when the default
# raced all candidates and the skinny kernel at every M; "NO_SKINNY" there
# raced cuBLASLt candidates only.)
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-e2e}
for mode in ${MODES:-default POSY_CUDA_PDL POSY_CUDA_SKINNY POSY_CUDA_NO_TUNE}; do
  for m in minilm-l6 bert-base; do
    for rep in 1 2; do
      env BENCH_LATENCY_ONLY=1 POSY_LOG=error ${mode/default/X}=1 POSY_CUDA_TUNE_LOG=$([ $rep = 1 ] && echo 1) \
        "./$BUILD/bench_gpu" "$WORK/$m-harness" "$m" 2>/tmp/tune_${m}_${mode}.log | sed "s/^{/{\"gemm_mode\": \"$mode\", \"rep\": $rep, /"
      [ $rep = 1 ] && grep -E "M=(16|64) " /tmp/tune_${m}_${mode}.log | sort | uniq | sed "s/^/# $mode $m: /"
    done
  done
done
