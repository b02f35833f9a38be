#!/bin/bash
# bench_gpu.sh: posy's CUDA engine beside the Hugging Face peer, in one run
# on one GPU (random weights with the real configurations; speed does not
# depend on weight values).  Needs the build and models of
# tests/cuda/run_gpu_tests.sh (or builds them), and hf_peer.py in $PEER_DIR.
#   usage: OUT=dir PEER_DIR=../shared/bench bench/bench_gpu.sh
set -o pipefail
OUT=${OUT:-out}
BUILD=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/posy-e2e}
PEER_DIR=${PEER_DIR:-../shared/bench}
mkdir -p "$OUT"
if [ ! -x "$BUILD/bench_gpu" ]; then
  cmake -S . -B "$BUILD" -DPOSY_ENGINE_ONLY=ON -DPOSY_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$BUILD" -j"$(nproc)" >/dev/null || exit 1
fi
[ -d "$WORK/bert-base-harness" ] || python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" >/dev/null 2>&1
for m in minilm-l6 bert-base; do
  "./$BUILD/bench_gpu" "$WORK/$m-harness" "$m" | tee -a "$OUT/bench_posy.jsonl" || exit 1
done
# per-kernel GPU time of one 16-token query (eager run, GEMM tuning off so
# only the forward's own launches are profiled), where ncu can read counters
if command -v ncu >/dev/null && [ -z "$NO_NCU" ]; then
  for m in minilm-l6 bert-base; do
    POSY_CUDA_NO_TUNE=1 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
      "./$BUILD/bench_gpu" "$WORK/$m-harness" "$m" --once 16 > /tmp/ncu_$m.csv 2>/tmp/ncu_$m.err
    python3 bench/ncu_summary.py /tmp/ncu_$m.csv "$m" | tee -a "$OUT/bench_report.md.ncu"
  done
fi
if [ -f "$PEER_DIR/hf_peer.py" ] && [ -z "$NO_PEER" ]; then
  PYTHONUNBUFFERED=1 PYTHONPATH="$PEER_DIR" python3 bench/peer_subset.py 2>&1 | tee "$OUT/bench_peer.jsonl"
fi
python3 bench/bench_gpu_report.py "$OUT/bench_posy.jsonl" "$OUT/bench_peer.jsonl" > "$OUT/bench_report.md"
[ -f "$OUT/bench_report.md.ncu" ] && cat "$OUT/bench_report.md.ncu" >> "$OUT/bench_report.md" && rm "$OUT/bench_report.md.ncu"
cat "$OUT/bench_report.md"
