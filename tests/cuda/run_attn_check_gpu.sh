#!/bin/bash
# run_attn_check_gpu.sh: what a change of the attention kernels or their
# default needs on a Hopper GPU, in one call: build; lab_attn's checks of
# every version against fp64 and the same under compute-sanitizer memcheck;
# the saturated-step A/B of the default against TP_ENVS (default: v2
# forced) by run_tp_ab_gpu.sh for MODELS (default Qwen3-0.6B; a carried
# build-base-src adds that tree's bench_gpu); e2e_qwen3 (28 layers, causal and
# bidirectional against transformers, graph == eager, batches in flight)
# and e2e_vs_transformers (MiniLM, BERT-base), both with the defaults.
# ATTN_BENCH=1 runs lab_attn in full after the checks (its timing cases);
# WGMMA=1 runs lab_wgmma's checks too (LAB_QUICK); E2E_QWEN3_ENV /
# E2E_ENC_ENV ("VAR=value ...") run the end-to-end checks under switches
# (a candidate default), each logged;
# TP_ENVS / QWEN3_ENVS / ABLATE / MODELS pass to run_tp_ab_gpu.sh.
#   usage: OUT=dir tests/cuda/run_attn_check_gpu.sh
. tests/cuda/gpu_lib.sh
gpu_setup check.log
[ -d build-base-src ] && gpu_bench_only build-base-src build-base &
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build ok"
timeout 150 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/enc_build.log" 2>&1 &
timeout 240 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/qwen3_build.log" 2>&1 &
LAB_QUICK=1 timeout 120 "./$BUILD/lab_attn" > "$OUT/lab_attn.log" 2>&1 || status=1
grep -E "FAIL|^lab_attn" "$OUT/lab_attn.log" | tee -a "$LOG"
gpu_memcheck lab_attn || status=1
if [ -n "$WGMMA" ]; then
  LAB_QUICK=1 timeout 90 "./$BUILD/lab_wgmma" > "$OUT/lab_wgmma_checks.log" 2>&1 || status=1
  grep -E "FAIL|^lab_wgmma" "$OUT/lab_wgmma_checks.log" | tee -a "$LOG"
fi
if [ -n "$ATTN_BENCH" ]; then
  timeout 150 "./$BUILD/lab_attn" > "$OUT/lab_attn_bench.log" 2>&1 || status=1
  grep -E "FAIL|bench" "$OUT/lab_attn_bench.log" | tee -a "$LOG"
fi
wait
say "labs and harnesses done"
MODELS=${MODELS:-qwen3-0.6b} NO_LAB=1 TP_ENVS=${TP_ENVS:-base: a2:POSY_CUDA_ATTN=2} \
  POINTS=${POINTS:-equal128:65536 random16-512:65536} OUT="$OUT" timeout ${TP_TIMEOUT:-300} bash tests/cuda/run_tp_ab_gpu.sh \
  > "$OUT/tp_run.log" 2>&1 || status=1
tail -${TP_TAIL:-4} "$OUT/tp.log" | tee -a "$LOG"
say "e2e_qwen3 with: ${E2E_QWEN3_ENV:-the defaults}"
PYTHONUNBUFFERED=1 POSY_CUDA_TUNE_LOG=1 timeout 240 env $E2E_QWEN3_ENV python3 tests/cuda/e2e_qwen3.py --layers 28 "$BUILD" "$QWORK" > "$OUT/e2e_qwen3.log" 2>&1
rc=$?
grep -E "FAIL|vs transformers|PASS|bit|flight" "$OUT/e2e_qwen3.log" | grep -v "^gemm M=" | tee -a "$LOG"
grep -E "^(qkv \+ q/k|gate\|up \+ swiglu) T=[0-9]+: [a-zA-Z]+.*\(" "$OUT/e2e_qwen3.log" | sed 's/ (.*//' | sort | uniq -c | tee -a "$LOG"
say "e2e_qwen3: rc=$rc"
[ $rc -eq 0 ] || status=1
say "e2e_vs_transformers with: ${E2E_ENC_ENV:-the defaults}"
PYTHONUNBUFFERED=1 timeout 200 env $E2E_ENC_ENV python3 tests/cuda/e2e_vs_transformers.py "$BUILD" "$WORK" 2>&1 |
  grep -v "Writing model shards" > "$OUT/e2e.log"
rc=${PIPESTATUS[0]}
grep -E "FAIL|min cosine|PASS|bit|flight" "$OUT/e2e.log" | grep -v "INFO" | tail -30 | tee -a "$LOG"
say "e2e_vs_transformers: rc=$rc"
[ $rc -eq 0 ] || status=1
say "run_attn_check_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
