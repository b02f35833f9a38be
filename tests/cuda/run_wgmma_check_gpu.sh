#!/bin/bash
# run_wgmma_check_gpu.sh: what a change of our Hopper GEMM (eng_cu_wgmma.cu)
# or of where the engine uses it needs on an H200, in one call: build;
# lab_wgmma's checks of every version (and the fused QKV epilogue) against
# fp64, its timing beside cuBLASLt and versions 3 and 4's stall counters; the checks again under
# compute-sanitizer memcheck; e2e_qwen3
# (28 layers against transformers, graph == eager, batches in flight:
# Qwen3's graph path runs the fused gate|up + SwiGLU) and
# e2e_vs_transformers (MiniLM, BERT-base: the tuning race may pick our
# kernel); then the saturated-step A/B of the defaults (base; our kernel on
# where the device has it) against it off (POSY_CUDA_WGMMA=0; TP_ENVS), and
# for Qwen3 the opt-in fused QKV + q/k norm + rotary and the norms as row
# statistics (QWEN3_ENVS), by run_tp_ab_gpu.sh for MODELS; e2e_qwen3 runs a
# second time with E2E_QWEN3_ALT (default POSY_CUDA_RMS_SELF=1: the
# experiment that has the fused GEMMs compute their row statistics).
# The e2e checks run with POSY_CUDA_WGMMA=1 POSY_CUDA_QKV_FUSE=1 (so the
# opt-in path is covered too); E2E_VERSIONS="1 3" runs them once per
# POSY_CUDA_WG_VERSION (default: once, the engine's own race of 3 and 4).
# SKIP_E2E=1 / SKIP_TP=1 leave out the end-to-end checks / the A/B;
# E2E_ENC=0 the encoders' end-to-end check (a change to Qwen3's path only).
#   usage: OUT=dir [MODELS=...] [TP_ENVS=...] [REPEAT=n] [SKIP_E2E=1] [SKIP_TP=1] [E2E_VERSIONS="1 3"]
#          tests/cuda/run_wgmma_check_gpu.sh
. tests/cuda/gpu_lib.sh
gpu_setup wgmma.log
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
if [ -z "$SKIP_E2E" ]; then
  timeout 150 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/enc_build.log" 2>&1 &
  timeout 240 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/qwen3_build.log" 2>&1 &
fi
# the checks alone first, under a short timeout: a version that hangs (a
# barrier never completing) must not eat the call
LAB_QUICK=1 timeout 90 "./$BUILD/lab_wgmma" > "$OUT/lab_wgmma_checks.log" 2>&1
rc=$?
grep -E "FAIL|^lab_wgmma" "$OUT/lab_wgmma_checks.log" | tee -a "$LOG"
say "lab_wgmma checks: rc=$rc"
[ $rc -eq 0 ] || { status=1; NO_BENCH=1; }
# a version the checks did not pass is not raced in the A/B below (it may hang)
if [ $rc -ne 0 ]; then
  TP_ENVS=$(echo ${TP_ENVS:-base: off:POSY_CUDA_WGMMA=0} | tr ' ' '\n' | grep -v WG_VERSION | tr '\n' ' ')
  say "checks failed: A/B settings naming a version left out: $TP_ENVS"
fi
[ -z "$NO_BENCH" ] && { timeout 150 "./$BUILD/lab_wgmma" > "$OUT/lab_wgmma.log" 2>&1 || status=1; }
grep -E "bench" "$OUT/lab_wgmma.log" 2>/dev/null | tee -a "$LOG"
# where version 3's time goes (clock64 counters; with and without its epilogue) at Qwen3's QKV, MiniLM's
# QKV and Qwen3's gate|up + SwiGLU shapes (WG_PROF overrides)
[ -z "$NO_BENCH" ] && LAB_WG_PROF=${WG_PROF:-"4096 1024 0 1152 384 1 6144 1024 3"} timeout 90 "./$BUILD/lab_wgmma" \
  > "$OUT/lab_wgmma_prof.log" 2>&1
grep -E "profile|consumer|producer|FAIL" "$OUT/lab_wgmma_prof.log" | tee -a "$LOG"
[ -z "$NO_BENCH" ] && { gpu_memcheck lab_wgmma || status=1; }
wait
say "labs and harnesses done"
# the end-to-end checks once per version in E2E_VERSIONS (default: the
# engine's own default), POSY_CUDA_WG_VERSION set accordingly
for v in ${E2E_VERSIONS:-default}; do
  [ -n "$SKIP_E2E" ] && break
  ve="POSY_CUDA_WGMMA=1 POSY_CUDA_QKV_FUSE=1 $([ "$v" = default ] || echo "POSY_CUDA_WG_VERSION=$v")"
  PYTHONUNBUFFERED=1 POSY_CUDA_TUNE_LOG=1 timeout 200 env $ve python3 tests/cuda/e2e_qwen3.py --layers 28 "$BUILD" "$QWORK" \
    > "$OUT/e2e_qwen3-$v.log" 2>&1
  rc=$?
  grep -E "FAIL|vs transformers|PASS|bit|flight" "$OUT/e2e_qwen3-$v.log" | grep -v "^gemm M=" | tee -a "$LOG"
  # which fused paths the races picked (bucket sizes), so the checks above are known to cover them
  grep -E "^(qkv \+ q/k|gate\|up \+ swiglu) T=[0-9]+: [a-zA-Z]+.*\(" "$OUT/e2e_qwen3-$v.log" | sort | uniq -c | tee -a "$LOG"
  say "e2e_qwen3 (version $v): rc=$rc"
  [ $rc -eq 0 ] || status=1
  [ "$E2E_ENC" = 0 ] && continue
  PYTHONUNBUFFERED=1 POSY_CUDA_TUNE_LOG=1 timeout 150 env $ve python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 |
    grep -v "Writing model shards" > "$OUT/e2e-$v.log"
  rc=${PIPESTATUS[0]}
  grep -E "FAIL|min cosine|PASS|bit|flight" "$OUT/e2e-$v.log" | grep -v "INFO" | tail -30 | tee -a "$LOG"
  grep -c "own wgmma" "$OUT/e2e-$v.log" | sed 's/^/GEMM shapes won by our kernel in the e2e runs: /' | tee -a "$LOG"
  say "e2e_vs_transformers (version $v): rc=$rc"
  [ $rc -eq 0 ] || status=1
done
# Qwen3 once more with E2E_QWEN3_ALT, apart, so a failure of one path does
# not hide how the other did
if [ -z "$SKIP_E2E" ]; then
  PYTHONUNBUFFERED=1 POSY_CUDA_TUNE_LOG=1 timeout 200 env ${E2E_QWEN3_ALT:-POSY_CUDA_RMS_SELF=1} \
    python3 tests/cuda/e2e_qwen3.py --layers 28 "$BUILD" "$QWORK" > "$OUT/e2e_qwen3-alt.log" 2>&1
  rc=$?
  grep -E "FAIL|vs transformers|PASS|bit|flight" "$OUT/e2e_qwen3-alt.log" | grep -v "^gemm M=" | tee -a "$LOG"
  say "e2e_qwen3 (${E2E_QWEN3_ALT:-POSY_CUDA_RMS_SELF=1}): rc=$rc"
  [ $rc -eq 0 ] || status=1
fi
[ -n "$SKIP_TP" ] || MODELS=${MODELS:-qwen3-0.6b bert-base minilm-l6} NO_LAB=1 TP_ENVS=${TP_ENVS:-base: off:POSY_CUDA_WGMMA=0} \
  QWEN3_ENVS=${QWEN3_ENVS-qkv1:POSY_CUDA_QKV_FUSE=1 rows:POSY_CUDA_QKV_FUSE=1,POSY_CUDA_RMS_ROWS=1} \
  POINTS=${POINTS:-equal128:65536 random16-512:65536} OUT="$OUT" timeout ${TP_TIMEOUT:-300} bash tests/cuda/run_tp_ab_gpu.sh \
  > "$OUT/tp_run.log" 2>&1 || status=1
[ -n "$SKIP_TP" ] || tail -8 "$OUT/tp.log" | tee -a "$LOG"
say "run_wgmma_check_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
