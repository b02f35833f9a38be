#!/bin/bash
# run_wgmma_check_gpu.sh: what a change of our Hopper GEMM (eng_cu_wgmma.cu)
# or of where the engine uses it needs on an H200, in one call: build;
# lab_wgmma's checks of every version against fp64 and its timing beside
# cuBLASLt; the checks again under compute-sanitizer memcheck; e2e_qwen3
# (28 layers against transformers, graph == eager, batches in flight:
# Qwen3's graph path runs the fused gate|up + SwiGLU) and
# e2e_vs_transformers (MiniLM, BERT-base: the tuning race may pick our
# kernel); then the saturated-step A/B of the defaults against
# POSY_CUDA_WGMMA=0 (TP_ENVS) by run_tp_ab_gpu.sh for MODELS.
#   usage: OUT=dir [MODELS=...] [TP_ENVS=...] [SKIP_E2E=1] tests/cuda/run_wgmma_check_gpu.sh
. tests/cuda/gpu_lib.sh
gpu_setup wgmma.log
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
if [ -z "$SKIP_E2E" ]; then
  timeout 150 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/enc_build.log" 2>&1 &
  timeout 240 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/qwen3_build.log" 2>&1 &
fi
timeout 150 "./$BUILD/lab_wgmma" > "$OUT/lab_wgmma.log" 2>&1 || status=1
grep -E "FAIL|bench|^lab_wgmma" "$OUT/lab_wgmma.log" | tee -a "$LOG"
if command -v compute-sanitizer >/dev/null; then
  LAB_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 "./$BUILD/lab_wgmma" \
    > "$OUT/lab_wgmma.memcheck.log" 2>&1
  rc=$?
  say "compute-sanitizer memcheck lab_wgmma: rc=$rc, $(grep -c "Invalid __" "$OUT/lab_wgmma.memcheck.log") invalid accesses, $(grep -c "Program hit" "$OUT/lab_wgmma.memcheck.log") failed API calls"
  [ $rc -eq 0 ] || status=1
fi
wait
say "labs and harnesses done"
if [ -z "$SKIP_E2E" ]; then
  PYTHONUNBUFFERED=1 timeout 200 python3 tests/cuda/e2e_qwen3.py --layers 28 "$BUILD" "$QWORK" > "$OUT/e2e_qwen3.log" 2>&1
  rc=$?
  grep -E "FAIL|vs transformers|PASS|bit|flight" "$OUT/e2e_qwen3.log" | tee -a "$LOG"
  say "e2e_qwen3: rc=$rc"
  [ $rc -eq 0 ] || status=1
  PYTHONUNBUFFERED=1 POSY_CUDA_TUNE_LOG=1 timeout 150 python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 |
    grep -v "Writing model shards" > "$OUT/e2e.log"
  rc=${PIPESTATUS[0]}
  grep -E "FAIL|min cosine|PASS|bit|flight" "$OUT/e2e.log" | grep -v "INFO" | tail -30 | tee -a "$LOG"
  grep -c "own wgmma" "$OUT/e2e.log" | sed 's/^/GEMM shapes won by our kernel in the e2e runs: /' | tee -a "$LOG"
  say "e2e_vs_transformers: rc=$rc"
  [ $rc -eq 0 ] || status=1
fi
MODELS=${MODELS:-qwen3-0.6b bert-base minilm-l6} NO_LAB=1 TP_ENVS=${TP_ENVS:-base: off:POSY_CUDA_WGMMA=0} \
  POINTS=${POINTS:-equal128:65536 random16-512:65536} OUT="$OUT" timeout ${TP_TIMEOUT:-300} bash tests/cuda/run_tp_ab_gpu.sh \
  > "$OUT/tp_run.log" 2>&1 || status=1
tail -8 "$OUT/tp.log" | tee -a "$LOG"
say "run_wgmma_check_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
