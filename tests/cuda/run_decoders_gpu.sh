#!/bin/bash
# run_decoders_gpu.sh: the decoders without Qwen3's q/k norm (Qwen2,
# Mistral, Llama) on the CUDA engine in one device call: lab_qwen3's checks
# (the rotary-alone cases of eng_cu_qk_norm_rope beside Qwen3's), then
# tests/cuda/e2e_decoders.py -- random-weight gte-Qwen2-1.5B, e5-mistral-7b
# and Llama-3.2-1B-shaped models (fewer layers) saved as Hugging Face
# folders, embedded by api_embed on the GPU alone and packed, against
# transformers fp32 (min cosine >= 0.999).
#   usage: OUT=dir [GPU_PREBUILT="lab_qwen3 api_embed" BUILD=dir] tests/cuda/run_decoders_gpu.sh
# Writes $OUT/decoders_gpu.log, lab_qwen3_quick.log, e2e_decoders.log.
. tests/cuda/gpu_lib.sh
gpu_setup decoders_gpu.log
GPU_TARGET=${GPU_TARGET:-"lab_qwen3 api_embed"}
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
LAB_QUICK=1 timeout 200 "./$BUILD/lab_qwen3" > "$OUT/lab_qwen3_quick.log" 2>&1 || status=1
say "lab_qwen3 checks: $(tail -1 "$OUT/lab_qwen3_quick.log"); rotary-alone checks ok: $(grep -c 'rope (no norm).* ok' "$OUT/lab_qwen3_quick.log")"
PYTHONUNBUFFERED=1 timeout 420 python3 tests/cuda/e2e_decoders.py "$BUILD" "$WORK/decoders" 2>&1 |
  grep -v "Writing model shards\|Loading weights" > "$OUT/e2e_decoders.log" || status=1
grep -E "vs transformers|single vs|PASS|FAIL|failed" "$OUT/e2e_decoders.log" | tee -a "$LOG"
say "run_decoders_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
