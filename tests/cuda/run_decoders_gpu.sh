#!/bin/bash
# run_decoders_gpu.sh: the decoders without Qwen3's q/k norm (Qwen2,
# Mistral, Llama), Gemma 3 and ModernBERT on the CUDA engine in one device
# call: lab_qwen3's checks (the rotary-alone cases of eng_cu_qk_norm_rope
# beside Qwen3's, the windowed / head-256 attention, the GELU gates, the
# norm kernel), then tests/cuda/e2e_decoders.py -- random-weight
# gte-Qwen2-1.5B, e5-mistral-7b and Llama-3.2-1B-shaped models (fewer
# layers), EmbeddingGemma-300m and ModernBERT-base (all layers) saved as
# Hugging Face folders, embedded by api_embed on the GPU alone and packed,
# against transformers fp32 (min cosine >= 0.999) -- and
# tests/cuda/e2e_cpu_fallback.py (what the GPU path refuses, served by the
# CPU engine).
#   usage: OUT=dir [GPU_PREBUILT="lab_qwen3 api_embed" BUILD=dir] tests/cuda/run_decoders_gpu.sh
# Writes $OUT/decoders_gpu.log, lab_qwen3_quick.log, e2e_decoders.log,
# e2e_cpu_fallback.log.
. tests/cuda/gpu_lib.sh
gpu_setup decoders_gpu.log
GPU_TARGET=${GPU_TARGET:-"lab_qwen3 api_embed"}
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
LAB_QUICK=1 timeout 200 "./$BUILD/lab_qwen3" > "$OUT/lab_qwen3_quick.log" 2>&1 || status=1
say "lab_qwen3 checks: $(tail -1 "$OUT/lab_qwen3_quick.log"); rotary-alone checks ok: $(grep -c 'rope (no norm).* ok' "$OUT/lab_qwen3_quick.log")"
PYTHONUNBUFFERED=1 timeout 540 python3 tests/cuda/e2e_decoders.py "$BUILD" "$WORK/decoders" 2>&1 |
  grep -v "Writing model shards\|Loading weights" > "$OUT/e2e_decoders.log" || status=1
grep -E "vs transformers|single vs|PASS|FAIL|failed" "$OUT/e2e_decoders.log" | tee -a "$LOG"
timeout 300 python3 tests/cuda/e2e_cpu_fallback.py "$BUILD" "$WORK/fallback" > "$OUT/e2e_cpu_fallback.log" 2>&1 || status=1
tail -1 "$OUT/e2e_cpu_fallback.log" | tee -a "$LOG"
say "run_decoders_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
