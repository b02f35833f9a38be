#!/bin/bash
# run_ln_rows_gpu.sh: what the encoders' LayerNorm-by-row-statistics path
# (POSY_CUDA_LN_ROWS=1: eng_cu_gemm_wg_ln's epilogues and eng_cu_ln_stats)
# needs on a Hopper GPU, in one call: build; lab_wgmma's ln checks against
# fp64 and their timing beside cuBLASLt + add_ln (LAB_WG_LN), the checks
# again under compute-sanitizer memcheck; e2e_vs_transformers (MiniLM,
# BERT-base against transformers, graph == eager, batches in flight) with
# it on; then the saturated-step A/B of the defaults against it
# (run_tp_ab_gpu.sh, MODELS default "minilm-l6 bert-base").  LN=value
# sets POSY_CUDA_LN_ROWS for the end-to-end check (default 1);
# SKIP_LAB=1 leaves out lab_wgmma.
#   usage: OUT=dir [MODELS=...] [TP_ENVS=...] [LN=1] [SKIP_LAB=1] tests/cuda/run_ln_rows_gpu.sh
. tests/cuda/gpu_lib.sh
gpu_setup ln.log
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
timeout 150 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/enc_build.log" 2>&1 &
rc=0
[ -n "$SKIP_LAB" ] || { LAB_WG_LN=1 timeout 120 "./$BUILD/lab_wgmma" > "$OUT/lab_wgmma_ln.log" 2>&1; rc=$?; }
grep -E "FAIL|bench|^lab_wgmma" "$OUT/lab_wgmma_ln.log" | tee -a "$LOG"
say "lab_wgmma ln checks + timing: rc=$rc"
if [ $rc -ne 0 ]; then
  status=1
elif [ -z "$SKIP_LAB" ]; then
  LAB_WG_LN=1 gpu_memcheck lab_wgmma || status=1
fi
wait
say "harnesses done"
if [ $rc -eq 0 ]; then
  PYTHONUNBUFFERED=1 POSY_CUDA_LN_ROWS=${LN:-1} timeout 200 python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 |
    grep -v "Writing model shards" > "$OUT/e2e-ln.log"
  rc=${PIPESTATUS[0]}
  grep -E "FAIL|min cosine|PASS|bit|flight" "$OUT/e2e-ln.log" | grep -v "INFO" | tail -30 | tee -a "$LOG"
  say "e2e_vs_transformers (POSY_CUDA_LN_ROWS=${LN:-1}): rc=$rc"
  [ $rc -eq 0 ] || status=1
fi
if [ $rc -eq 0 ]; then
  MODELS=${MODELS:-minilm-l6 bert-base} NO_LAB=1 TP_ENVS=${TP_ENVS:-base: lnrows:POSY_CUDA_LN_ROWS=1} QWEN3_ENVS= \
    POINTS=${POINTS:-equal128:65536 random16-512:65536} OUT="$OUT" timeout ${TP_TIMEOUT:-240} bash tests/cuda/run_tp_ab_gpu.sh \
    > "$OUT/tp_run.log" 2>&1 || status=1
  tail -6 "$OUT/tp.log" | tee -a "$LOG"
fi
say "run_ln_rows_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
