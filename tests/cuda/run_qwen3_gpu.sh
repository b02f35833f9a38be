#!/bin/bash
# run_qwen3_gpu.sh: the first GPU run of the CUDA backend's Qwen3 path, in
# one call on a machine with a Hopper GPU (dev/cuda/NOTES.md, "Qwen3: first
# GPU run", says how to call it and how to read what it prints).
#
# Stages (STAGES, default all, in this order):
#   build   engine-only CMake build (POSY_ENGINE_ONLY, CUDA on)
#   lab     build/lab_qwen3: each new kernel against the CPU reference
#           (+ compute-sanitizer memcheck of its checks unless NO_SANITIZE)
#   e2e     tests/cuda/e2e_qwen3.py: random Qwen3-0.6B-config model
#           (LAYERS, default 28), causal + bidirectional, posy CUDA vs
#           transformers fp32 (min cosine >= 0.999), graph == eager bits,
#           mixed batches, batches in flight, error messages
#   bench   build/bench_gpu on the causal model: batch-1 16/64-token GPU
#           time, throughput against tokens per step, saturation
#   ncu     (not in the default) per-kernel GPU time of one eager 16-token
#           query under Nsight Compute, summed by kernel name
#   peer    the Hugging Face peer on the same configuration in the same
#           call (hf_peer.py from PEER_DIR, default .peer: copy
#           /work/shared/bench/*.py there and carry it); COMPILED_PEER=1
#           adds the torch.compile peer (minutes of compiling)
# Every stage has a time limit so that one slow stage still leaves the
# others' output; logs go to $OUT (at most 8 files come back).
#   usage: OUT=dir tests/cuda/run_qwen3_gpu.sh
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-qwen3}
PEER_DIR=${PEER_DIR:-.peer}
LAYERS=${LAYERS:-28}
STAGES=${STAGES:-"build lab e2e bench peer"}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
LOG="$OUT/qwen3.log"
. tests/cuda/gpu_lib.sh
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
git log -1 --format='commit %h %s' 2>/dev/null | tee -a "$LOG"

if has build; then
  gpu_build "$OUT" || { say "BUILD FAILED (see build.log)"; exit 1; }
  say "build ok"
fi

if has lab; then
  timeout 120 "./$BUILD/lab_qwen3" > "$OUT/lab_qwen3.log" 2>&1
  rc=$?
  say "lab_qwen3: rc=$rc ($(grep -c ' ok ' "$OUT/lab_qwen3.log") ok, $(grep -c FAIL "$OUT/lab_qwen3.log") FAIL lines)"
  grep -E "FAIL|bench" "$OUT/lab_qwen3.log" | tee -a "$LOG"
  [ $rc -ne 0 ] && status=1
  if [ -z "$NO_SANITIZE" ] && command -v compute-sanitizer >/dev/null; then
    LAB_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "./$BUILD/lab_qwen3" \
      > /tmp/sanitize_lab_qwen3.log 2>&1
    rc=$?
    say "compute-sanitizer memcheck lab_qwen3: rc=$rc, $(grep -c Invalid /tmp/sanitize_lab_qwen3.log) invalid accesses"
    grep -m 20 -A 6 "Invalid" /tmp/sanitize_lab_qwen3.log >> "$OUT/lab_qwen3.log"
    [ $rc -ne 0 ] && status=1
  fi
fi

if has e2e; then
  timeout 330 python3 tests/cuda/e2e_qwen3.py --layers "$LAYERS" "$BUILD" "$WORK" 2>&1 | tee "$OUT/e2e_qwen3.log"
  rc=${PIPESTATUS[0]}
  say "e2e_qwen3: rc=$rc"
  [ $rc -ne 0 ] && status=1
fi

if has bench; then
  [ -f "$WORK/qwen3-causal-harness/dims.txt" ] ||
    timeout 120 python3 tests/cuda/e2e_qwen3.py --build-only --layers "$LAYERS" "$BUILD" "$WORK" >> "$LOG" 2>&1
  BENCH_POINT_TOKENS=${BENCH_POINT_TOKENS:-1000000} timeout 240 \
    "./$BUILD/bench_gpu" "$WORK/qwen3-causal-harness" qwen3-0.6b | tee "$OUT/bench_qwen3_posy.jsonl"
  rc=$?
  say "bench_gpu qwen3: rc=$rc"
  [ $rc -ne 0 ] && status=1
fi

if has ncu && command -v ncu >/dev/null; then
  POSY_CUDA_NO_TUNE=1 timeout 240 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    "./$BUILD/bench_gpu" "$WORK/qwen3-causal-harness" qwen3-0.6b --once 16 > /tmp/ncu_qwen3.csv 2>/tmp/ncu_qwen3-0.6b.err
  say "ncu: rc=$?"
  python3 bench/ncu_summary.py /tmp/ncu_qwen3.csv qwen3-0.6b | tee -a "$LOG"
fi

if has peer && [ -f "$PEER_DIR/hf_peer.py" ]; then
  PYTHONPATH="$PEER_DIR" timeout 240 python3 bench/peer_subset.py qwen3-0.6b 2>&1 |
    grep '^{' | tee "$OUT/bench_qwen3_peer.jsonl"
  say "hf peer qwen3: rc=${PIPESTATUS[0]}"
  if [ -n "$COMPILED_PEER" ]; then
    PEER_SHAPES=${PEER_SHAPES:-1x16,256x128} timeout 400 python3 "$PEER_DIR/compiled_peer.py" qwen3-0.6b 2>&1 |
      grep '^{' | tee -a "$OUT/bench_qwen3_peer.jsonl"
  fi
elif has peer; then
  say "peer skipped: no $PEER_DIR/hf_peer.py (copy /work/shared/bench/*.py to .peer and carry it)"
fi

if [ -f "$OUT/bench_qwen3_posy.jsonl" ]; then
  python3 bench/bench_gpu_report.py "$OUT/bench_qwen3_posy.jsonl" "$OUT/bench_qwen3_peer.jsonl" \
    > "$OUT/bench_qwen3_report.md"
  cat "$OUT/bench_qwen3_report.md"
fi
say "run_qwen3_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
