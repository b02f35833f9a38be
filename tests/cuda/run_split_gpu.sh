#!/usr/bin/env bash
# run_split_gpu: the split launches of the one-query chain checked and
# timed: the MLP as one launch (eng_cu_chain_ffn: Qwen3's and the
# encoders' forms), attention + O split by head (eng_cu_chain_ao, Qwen3)
# and an encoder's attention block as one launch (eng_cu_chain_ab,
# all-MiniLM-L6).  PART=checks: lab_ffn (fp64 reference, the two chain
# GEMMs, same bits over replays, a model's layers fused vs two GEMMs),
# lab_ab, lab_attn's split checks, the three under memcheck, e2e_qwen3 at
# 28 layers with each Qwen3 switch on, e2e_vs_transformers (all-MiniLM-L6,
# BERT-base) with the encoders' switches on.  PART=timing: the one-query
# latency (Qwen3: base / ffn / ao / both; encoders: base / ffn / ab /
# both), then lab_red (what adding whole partials with atomics would cost
# instead).  Default: both parts.
#
#   OUT=dir [PART=checks|timing] bash tests/cuda/run_split_gpu.sh
#
# Expects build-gpu/{bench_gpu,gpu_backend_e2e,lab_ffn,lab_ab,lab_red,
# lab_attn} built already (carried; same CUDA).  Files in $OUT/split:
# logs, summary.
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
R=${OUT:-out}/split; mkdir -p "$R"
T0=$(date +%s)
stamp() { echo "$1 rc=$2 t=$(($(date +%s) - T0))s" >> "$R/summary"; }
PART=${PART:-all}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
[ -f /tmp/posy-qwen3/qwen3-causal-harness/dims.txt ] ||
  (timeout 300 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 build-gpu /tmp/posy-qwen3 > "$R/qbuild.log" 2>&1) &
[ -f /tmp/posy-e2e/bert-base-harness/dims.txt ] ||
  (timeout 300 python3 tests/cuda/e2e_vs_transformers.py --build-only build-gpu /tmp/posy-e2e > "$R/ebuild.log" 2>&1) &
if [ "$PART" != timing ]; then
  timeout 120 build-gpu/lab_ffn > "$R/lab_ffn.log" 2>&1; stamp lab_ffn $?
  timeout 60 build-gpu/lab_ab > "$R/lab_ab.log" 2>&1; stamp lab_ab $?
  LAB_ATTN_AO_ONLY=1 timeout 60 build-gpu/lab_attn > "$R/lab_attn_ao.log" 2>&1; stamp "lab_attn ao" $?
  for l in lab_ffn lab_ab; do
    LAB_QUICK=1 timeout 120 compute-sanitizer --tool memcheck build-gpu/$l > "$R/mc_$l.log" 2>&1
    stamp "memcheck $l" $?
  done
  LAB_ATTN_AO_ONLY=1 timeout 90 compute-sanitizer --tool memcheck build-gpu/lab_attn > "$R/mc_ao.log" 2>&1
  stamp "memcheck lab_attn ao" $?
  wait
  for e in FFN AO; do
    env POSY_CUDA_CHAIN_$e=1 timeout 100 python3 tests/cuda/e2e_qwen3.py --layers 28 build-gpu /tmp/posy-qwen3 \
      > "$R/e2e_$e.log" 2>&1
    stamp "e2e_qwen3 $e" $?
  done
  POSY_CUDA_CHAIN_FFN=1 POSY_CUDA_CHAIN_AB=1 timeout 180 python3 tests/cuda/e2e_vs_transformers.py build-gpu \
    /tmp/posy-e2e > "$R/e2e_enc.log" 2>&1
  stamp "e2e_vs_transformers FFN+AB" $?
  grep -v ' ok ' "$R/lab_ffn.log" "$R/lab_ab.log" | tail -24
  grep -h 'ERROR SUMMARY' "$R"/mc_*.log
  grep -E 'FAIL|PASS|min cos' "$R"/e2e_*.log | tail -16
fi
wait
if [ "$PART" != checks ]; then
  MODELS=qwen3-0.6b GPU_PREBUILT=bench_gpu NO_TRACE=1 REPEAT=${REPEAT:-3} \
    ENVS="base: ffn:POSY_CUDA_CHAIN_FFN=1 ao:POSY_CUDA_CHAIN_AO=1 both:POSY_CUDA_CHAIN_FFN=1,POSY_CUDA_CHAIN_AO=1" \
    OUT="$R/lat" timeout 200 bash tests/cuda/run_latency_trace_gpu.sh > "$R/lat.out" 2>&1
  stamp "latency qwen3" $?
  MODELS="minilm-l6 bert-base" GPU_PREBUILT=bench_gpu NO_TRACE=1 REPEAT=${REPEAT:-3} \
    ENVS="base: ffn:POSY_CUDA_CHAIN_FFN=1 ab:POSY_CUDA_CHAIN_AB=1 both:POSY_CUDA_CHAIN_FFN=1,POSY_CUDA_CHAIN_AB=1" \
    OUT="$R/latenc" timeout 200 bash tests/cuda/run_latency_trace_gpu.sh > "$R/latenc.out" 2>&1
  stamp "latency encoders" $?
  timeout 60 build-gpu/lab_red > "$R/lab_red.log" 2>&1; stamp lab_red $?
  grep -hE ' us  \(' "$R/lat/latency_trace.log" "$R/latenc/latency_trace.log" | tail -30
  grep -E 'us/step' "$R/lab_red.log" | tail -12
fi
cat "$R/summary"
