#!/bin/bash
# run_gpu_tests.sh: every GPU test of the CUDA engine, on a machine with a
# Hopper GPU.  Builds the engine alone (POSY_ENGINE_ONLY: no tokenizer or
# server dependencies needed), runs the kernel labs (each checks its kernels
# against CPU references and exits non-zero on a mismatch), then the
# end-to-end checks against transformers and sentence-transformers (the
# encoders, the rerank / classifier heads, SPLADE).  Logs go to $OUT (default ./out).
#   usage: OUT=dir [QUICK=1] [SANITIZE=1] [GPU_PREBUILT="..."] tests/cuda/run_gpu_tests.sh
# QUICK=1: every lab's checks without its timing; SANITIZE=1: four labs
# under compute-sanitizer memcheck too; GPU_PREBUILT: gpu_lib.sh.
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-e2e}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee "$OUT/labs.log"
. tests/cuda/gpu_lib.sh
gpu_build "$OUT" || { echo "BUILD FAILED"; exit 1; }
echo "build ok"
status=0
for lab in lab_norm lab_pool lab_gemm lab_attn lab_qwen3 lab_chain lab_wgmma lab_qstream lab_splade lab_deberta; do
  # lab_wgmma: its checks only (our Hopper GEMM and the GEMM + whole-row
  # LayerNorm); its timing is run_wgmma_check_gpu.sh's.  lab_qstream: the
  # opt-in persistent decoder kernel's checks (its timing: run it alone)
  if [ $lab = lab_wgmma ] || [ $lab = lab_qstream ] || [ -n "$QUICK" ]; then LAB_QUICK=1 "./$BUILD/$lab"; else "./$BUILD/$lab"; fi >> "$OUT/labs.log" 2>&1
  rc=$?
  echo "$lab: rc=$rc" | tee -a "$OUT/labs.log"
  [ $rc -ne 0 ] && status=1
done
grep -E "FAIL|bench" "$OUT/labs.log" | head -80
PYTHONUNBUFFERED=1 python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 \
  | grep -v "Writing model shards" | tee "$OUT/e2e.log"
[ ${PIPESTATUS[0]} -ne 0 ] && status=1
# the heads after the encoder: rerankers and classifiers, SPLADE's sparse vectors
for t in e2e_rerank e2e_splade; do
  PYTHONUNBUFFERED=1 python3 tests/cuda/$t.py "$BUILD" "$WORK/$t" 2>&1 | grep -v "Writing model shards\|Loading weights" \
    > "$OUT/$t.log"
  rc=${PIPESTATUS[0]}
  echo "$t: rc=$rc, $(tail -1 "$OUT/$t.log")" | tee -a "$OUT/labs.log"
  [ $rc -ne 0 ] && status=1
done
# single-sequence GPU embeddings, for tests/cuda/compare_cpu.py (CPU engine) elsewhere
cp "$WORK"/*-gpu.single.bin "$OUT"/ 2>/dev/null
if [ -n "$SANITIZE" ] && command -v compute-sanitizer >/dev/null; then
  for lab in lab_norm lab_pool lab_attn lab_qwen3; do
    LAB_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 3 "./$BUILD/$lab" > /tmp/sanitize_$lab.log 2>&1
    rc=$?
    echo "compute-sanitizer memcheck $lab: rc=$rc $(grep -c Invalid /tmp/sanitize_$lab.log) invalid accesses; $(tail -1 /tmp/sanitize_$lab.log)" | tee -a "$OUT/labs.log"
    [ $rc -ne 0 ] && status=1
  done
fi
echo "run_gpu_tests: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
