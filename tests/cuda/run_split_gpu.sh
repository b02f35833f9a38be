#!/usr/bin/env bash
# run_split_gpu: the split launches of the one-query chain (the MLP as one
# launch, eng_cu_chain_ffn -- Qwen3's and the encoders' forms; attention +
# O split by head, eng_cu_chain_ao, Qwen3) checked and timed in one device
# call: lab_ffn (fp64 reference, the two chain GEMMs, same bits over
# replays, then a model's layers fused vs two GEMMs), lab_attn's split
# checks, both under memcheck, e2e_qwen3 at 28 layers with each switch on,
# e2e_vs_transformers (all-MiniLM-L6, BERT-base) with the MLP split on,
# the one-query latency (Qwen3: base / ffn / ao / both; encoders: base /
# ffn), and last lab_red (what adding whole partials with atomics would
# cost instead).
#
#   OUT=dir bash tests/cuda/run_split_gpu.sh
#
# Expects build-gpu/{bench_gpu,gpu_backend_e2e,lab_ffn,lab_red,lab_attn}
# built already (carried; same CUDA).  Files in $OUT/split: logs, summary.
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
R=${OUT:-out}/split; mkdir -p "$R"
T0=$(date +%s)
stamp() { echo "$1 rc=$2 t=$(($(date +%s) - T0))s" >> "$R/summary"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
(timeout 300 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 build-gpu /tmp/posy-qwen3 > "$R/qbuild.log" 2>&1) &
(timeout 300 python3 tests/cuda/e2e_vs_transformers.py --build-only build-gpu /tmp/posy-e2e > "$R/ebuild.log" 2>&1) &
timeout 120 build-gpu/lab_ffn > "$R/lab_ffn.log" 2>&1; stamp lab_ffn $?
LAB_ATTN_AO_ONLY=1 timeout 60 build-gpu/lab_attn > "$R/lab_attn_ao.log" 2>&1; stamp "lab_attn ao" $?
LAB_QUICK=1 timeout 120 compute-sanitizer --tool memcheck build-gpu/lab_ffn > "$R/mc_ffn.log" 2>&1
stamp "memcheck lab_ffn" $?
LAB_ATTN_AO_ONLY=1 timeout 90 compute-sanitizer --tool memcheck build-gpu/lab_attn > "$R/mc_ao.log" 2>&1
stamp "memcheck lab_attn ao" $?
wait
for e in FFN AO; do
  env POSY_CUDA_CHAIN_$e=1 timeout 100 python3 tests/cuda/e2e_qwen3.py --layers 28 build-gpu /tmp/posy-qwen3 \
    > "$R/e2e_$e.log" 2>&1
  stamp "e2e_qwen3 $e" $?
done
POSY_CUDA_CHAIN_FFN=1 timeout 150 python3 tests/cuda/e2e_vs_transformers.py build-gpu /tmp/posy-e2e \
  > "$R/e2e_enc_FFN.log" 2>&1
stamp "e2e_vs_transformers FFN" $?
MODELS=qwen3-0.6b GPU_PREBUILT=bench_gpu NO_TRACE=1 REPEAT=${REPEAT:-3} \
  ENVS="base: ffn:POSY_CUDA_CHAIN_FFN=1 ao:POSY_CUDA_CHAIN_AO=1 both:POSY_CUDA_CHAIN_FFN=1,POSY_CUDA_CHAIN_AO=1" \
  OUT="$R/lat" timeout 150 bash tests/cuda/run_latency_trace_gpu.sh > "$R/lat.out" 2>&1
stamp "latency qwen3" $?
MODELS="minilm-l6 bert-base" GPU_PREBUILT=bench_gpu NO_TRACE=1 REPEAT=${REPEAT:-3} \
  ENVS="base: ffn:POSY_CUDA_CHAIN_FFN=1" \
  OUT="$R/latenc" timeout 100 bash tests/cuda/run_latency_trace_gpu.sh > "$R/latenc.out" 2>&1
stamp "latency encoders" $?
timeout 60 build-gpu/lab_red > "$R/lab_red.log" 2>&1; stamp lab_red $?
cat "$R/summary"
grep -v ' ok ' "$R/lab_ffn.log" | tail -20
grep -h 'ERROR SUMMARY' "$R/mc_ffn.log" "$R/mc_ao.log"
grep -E 'FAIL|PASS|min cos' "$R"/e2e_*.log | tail -16
grep -iE ' us  \(' "$R/lat/latency_trace.log" "$R/latenc/latency_trace.log" | tail -24
grep -E 'us/step' "$R/lab_red.log" | tail -12
