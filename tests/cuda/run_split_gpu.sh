#!/usr/bin/env bash
# run_split_gpu: the split launches of Qwen3's one-query chain (the MLP as
# one launch, eng_cu_chain_ffn; attention + O split by head,
# eng_cu_chain_ao) checked and timed in one device call: lab_ffn (fp64
# reference, the two chain GEMMs, same bits over replays, then 28 layers
# fused vs two GEMMs), lab_attn's split checks, both under memcheck,
# lab_red (what adding whole partials with atomics would cost instead),
# e2e_qwen3 at 28 layers with each switch on, and the one-query latency of
# base / ffn / ao / both.
#
#   OUT=dir bash tests/cuda/run_split_gpu.sh
#
# Expects build-gpu/{bench_gpu,gpu_backend_e2e,lab_ffn,lab_red,lab_attn}
# built already (carried; same CUDA).  Files in $OUT/split: logs, summary.
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
R=${OUT:-out}/split; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
(timeout 300 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 build-gpu /tmp/posy-qwen3 > "$R/qbuild.log" 2>&1) &
timeout 100 build-gpu/lab_ffn > "$R/lab_ffn.log" 2>&1; echo "lab_ffn rc=$?" >> "$R/summary"
LAB_ATTN_AO_ONLY=1 timeout 60 build-gpu/lab_attn > "$R/lab_attn_ao.log" 2>&1; echo "lab_attn ao rc=$?" >> "$R/summary"
LAB_QUICK=1 timeout 120 compute-sanitizer --tool memcheck build-gpu/lab_ffn > "$R/mc_ffn.log" 2>&1
echo "memcheck lab_ffn rc=$?" >> "$R/summary"
LAB_ATTN_AO_ONLY=1 timeout 120 compute-sanitizer --tool memcheck build-gpu/lab_attn > "$R/mc_ao.log" 2>&1
echo "memcheck lab_attn ao rc=$?" >> "$R/summary"
timeout 60 build-gpu/lab_red > "$R/lab_red.log" 2>&1; echo "lab_red rc=$?" >> "$R/summary"
wait
for e in FFN AO; do
  env POSY_CUDA_CHAIN_$e=1 timeout 100 python3 tests/cuda/e2e_qwen3.py --layers 28 build-gpu /tmp/posy-qwen3 \
    > "$R/e2e_$e.log" 2>&1
  echo "e2e_qwen3 $e rc=$?" >> "$R/summary"
done
MODELS=qwen3-0.6b GPU_PREBUILT=bench_gpu NO_TRACE=1 REPEAT=${REPEAT:-3} \
  ENVS="base: ffn:POSY_CUDA_CHAIN_FFN=1 ao:POSY_CUDA_CHAIN_AO=1 both:POSY_CUDA_CHAIN_FFN=1,POSY_CUDA_CHAIN_AO=1" \
  OUT="$R/lat" timeout 200 bash tests/cuda/run_latency_trace_gpu.sh > "$R/lat.out" 2>&1
echo "latency rc=$?" >> "$R/summary"
cat "$R/summary"
grep -v ' ok ' "$R/lab_ffn.log" | tail -12
grep -h 'ERROR SUMMARY' "$R/mc_ffn.log" "$R/mc_ao.log"
grep -E 'us/step' "$R/lab_red.log" | tail -36
grep -E 'FAIL|PASS|min cos' "$R"/e2e_*.log | tail -12
grep -iE 'mean' "$R/lat/latency_trace.log" | tail -16
