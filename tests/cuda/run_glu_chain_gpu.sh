#!/bin/bash
# run_glu_chain_gpu.sh: the two speed-ups of Gemma 3 (EmbeddingGemma) and
# ModernBERT on the CUDA engine (defaults since run 106), and NomicBERT
# (nomic-embed-text-v1.5) on the same forward, checked and timed
# against each one switched off, in one device call:
#   the one-query chain   buckets of <= 64 tokens: the four products as
#                         chain GEMMs, every launch with programmatic
#                         dependent launch (eng_cu_model_glu.cu);
#                         POSY_CUDA_CHAIN=0 turns it off
#   the fused GELU gate   in our GEMM's epilogue (versions 3 / 4, raced per
#                         bucket against cuBLASLt + the gate kernel, as
#                         Qwen3's SwiGLU is); POSY_CUDA_GLU_FUSE=0 turns it
#                         off
# Order: lab_wgmma's checks (the GELU gates against fp64, the versions
# that must refuse them), tests/cuda/e2e_decoders.py gemma3 modernbert
# nomic (against transformers fp32, min cosine >= 0.999, alone and packed;
# each model's transformers bf16 error printed beside it), gpu_backend_e2e
# on the three folders (graph == eager bit for bit, batches in flight),
# then one-query GPU time with the chain at its default / off /
# 32 / a late trigger, and steps of 16k-64k tokens with the race's log
# (fused gate against cuBLASLt + kernel, per bucket) and without the fused
# gate.
#   usage: OUT=dir [GPU_PREBUILT="lab_wgmma api_embed gpu_backend_e2e bench_gpu" BUILD=dir] \
#          tests/cuda/run_glu_chain_gpu.sh
# Writes $OUT/glu_chain.log (the summary), lab_wgmma.log, e2e_glu.log,
# backend_<model>.log, latency.txt (tag, then bench_gpu's latency rows),
# tp_<model>.log (fused gate), tp0_<model>.log (without).
. tests/cuda/gpu_lib.sh
gpu_setup glu_chain.log
GPU_TARGET=${GPU_TARGET:-"lab_wgmma api_embed gpu_backend_e2e bench_gpu"}
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
LAB_QUICK=1 timeout 200 "./$BUILD/lab_wgmma" > "$OUT/lab_wgmma.log" 2>&1 || status=1
say "lab_wgmma: $(tail -1 "$OUT/lab_wgmma.log"); GELU-gate checks: $(grep -c 'epi=[45].* ok' "$OUT/lab_wgmma.log") ok"
D="$WORK/glu"
PYTHONUNBUFFERED=1 timeout 500 python3 tests/cuda/e2e_decoders.py "$BUILD" "$D" gemma3 modernbert nomic 2>&1 |
  grep -v "Writing model shards\|Loading weights" > "$OUT/e2e_glu.log" || status=1
grep -E "vs transformers|single vs|PASS|FAIL|failed" "$OUT/e2e_glu.log" | tee -a "$LOG"
# the bar between two bf16 runs of one sequence (alone, in batches): 0.999,
# NomicBERT's 0.998 -- transformers' own bf16 run of that random model is at
# min cosine 0.999167 from its fp32 (a 1-token sequence; measured on the
# CPU), so two bf16 runs may be ~2x that apart (runs 127 / 129, an H100:
# posy's worst pair 0.998820, each run >= 0.999409 from fp32;
# e2e_decoders.py now prints the bf16 yardstick)
for m in gemma3 modernbert nomic; do
  bar=0.999; [ $m = nomic ] && bar=0.998
  timeout 300 "./$BUILD/gpu_backend_e2e" "$D/dec-$m" "$D/dec-$m-seqs.bin" "$D/be-$m" $bar > "$OUT/backend_$m.log" 2>&1 ||
    status=1
  say "gpu_backend_e2e $m: $(tail -1 "$OUT/backend_$m.log")"
done
for v in "default:" "off:POSY_CUDA_CHAIN=0" "chain32:POSY_CUDA_CHAIN=32" "late:POSY_CUDA_CHAIN_TRIGGER=15"; do
  tag=${v%%:*} ev=${v#*:}
  for m in gemma3 modernbert nomic; do
    env $ev BENCH_LATENCY_ONLY=1 "./$BUILD/bench_gpu" "$D/dec-$m" "$m" 2>/dev/null | grep '"latency"' |
      sed "s/^/$tag /" >> "$OUT/latency.txt"
  done
  say "latency $tag: $(grep "^$tag .*\"seq\": 16,.*posy-cuda-graph\"" "$OUT/latency.txt" | grep -o '"model": "[a-z0-9]*".*"gpu_us": [0-9.]*' | tr '\n' ' ')"
done
for m in gemma3 modernbert nomic; do
  POSY_CUDA_TUNE_LOG=1 BENCH_POINT_TOKENS=1000000 BENCH_POINTS="equal128:16384 equal128:65536 random16-512:65536" \
    timeout 300 "./$BUILD/bench_gpu" "$D/dec-$m" "$m" > "$OUT/tp_$m.log" 2>&1 || status=1
  grep "gate|up" "$OUT/tp_$m.log" | grep -v "version [0-9] [0-9.]* us$" | tee -a "$LOG"
  POSY_CUDA_GLU_FUSE=0 BENCH_POINT_TOKENS=1000000 BENCH_POINTS="equal128:16384 equal128:65536 random16-512:65536" \
    timeout 300 "./$BUILD/bench_gpu" "$D/dec-$m" "$m" > "$OUT/tp0_$m.log" 2>&1 || status=1
  say "tokens/s $m, fused gate / without: $(grep -o '"tok_per_s": [0-9]*' "$OUT/tp_$m.log" | tr '\n' ' ')/ $(grep -o '"tok_per_s": [0-9]*' "$OUT/tp0_$m.log" | tr '\n' ' ')"
done
say "run_glu_chain_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
