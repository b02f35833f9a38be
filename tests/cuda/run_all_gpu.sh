#!/bin/bash
# run_all_gpu.sh: the GPU checks and benchmarks in ONE device call, each
# part under its own time limit, skipped when the call's remaining time
# (BUDGET seconds, default 570 of the device tool's 600) cannot hold its
# limit -- so a session's 30 minutes of GPU time go to results, not to
# machine start-ups.  Each part is one of the repository's scripts, run as
# documented (docs/BENCHMARKS.md); their outputs are packed into one
# tarball, because a device call brings back only a few files.
#
#   OUT=dir [PARTS="tests qwen3 small serve"] [BUDGET=570] tests/cuda/run_all_gpu.sh
#
# parts (default order):
#   tests  tests/cuda/run_gpu_tests.sh, SANITIZE=1: kernel labs (incl. pool
#          skips), encoders end to end against transformers (MiniLM,
#          BERT-base, MPNet-base, DistilBERT-base)                   (~4-5 min)
#   qwen3  tests/cuda/run_qwen3_gpu.sh, STAGES="build lab e2e"     (~1.5 min)
#   small  tests/cuda/run_small_gpu.sh: the opt-in small-batch kernel (~1.5 min)
#   chain  tests/cuda/run_chain_gpu.sh, QWEN3=1: the one-query chain --
#          lab_gemm checks + memcheck, latency off / on / norms fused,
#          e2e against transformers with the chain on up to 64    (~4.5 min)
#   serve  tests/cuda/run_serve_gpu.sh with DUR=4 (needs .carry/gpu from
#          scripts/gpu-bundle.sh, carried)                            (~3 min)
#   bench  bench/bench_gpu.sh with the peer from .peer (carried)      (~6 min)
#   qbench tests/cuda/run_qwen3_gpu.sh, STAGES="bench peer"           (~3 min)
#   prof   bench/profile_gpu.sh: per-kernel time of a saturated step (~2 min)
#   mpnet  tests/cuda/run_mpnet_gpu.sh: MPNet's relative bias -- lab_attn
#          checks + memcheck, e2e against transformers, bench_gpu beside
#          BERT-base, lab_attn timing                                (~5 min)
#   labs   the kernel labs named in LABS (default lab_attn), full run and
#          compute-sanitizer memcheck (LAB_QUICK); builds build-gpu when
#          no earlier part did                                       (~1-2 min)
# Writes $OUT/all_gpu.md (a line per part: exit status, seconds, its last
# line) and $OUT/parts.tgz (every part's $OUT and stdout).  DRY=1 prints
# the plan without running anything.
set -o pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PARTS=${PARTS:-tests qwen3 small serve}
BUDGET=${BUDGET:-570}
SUM="$OUT/all_gpu.md"
T0=$(date +%s)
{
  echo "# run_all_gpu $(date -u +%FT%TZ), commit $(git log -1 --format=%h 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  echo
  echo "| part | exit | seconds | last line |"
  echo "|---|---|---|---|"
} > "$SUM"
status=0
skipped=0

# run_part NAME LIMIT_S CMD...: CMD with OUT=$OUT/parts/NAME under timeout
run_part() {
  local name=$1 lim=$2
  shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$lim" -gt "$left" ]; then
    echo "| $name | skipped | - | needs up to $lim s, $left s left in BUDGET |" >> "$SUM"
    skipped=$((skipped + 1))
    return
  fi
  local dir="$OUT/parts/$name" t=$(date +%s)
  mkdir -p "$dir"
  if [ -n "$DRY" ]; then echo "DRY: OUT=$dir timeout $lim $*"; return; fi
  OUT="$dir" timeout --kill-after=10 "$lim" "$@" > "$dir/stdout.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && status=1
  echo "| $name | $rc | $(($(date +%s) - t)) | $(tail -1 "$dir/stdout.log" | tr '|' '/') |" >> "$SUM"
}

for p in $PARTS; do
  case $p in
    tests) run_part tests 400 env SANITIZE=1 bash tests/cuda/run_gpu_tests.sh ;;
    qwen3) run_part qwen3 200 env STAGES="build lab e2e" bash tests/cuda/run_qwen3_gpu.sh ;;
    small) run_part small 200 bash tests/cuda/run_small_gpu.sh ;;
    chain) run_part chain 330 env QWEN3=1 bash tests/cuda/run_chain_gpu.sh ;;
    serve)
      if [ -d .carry/gpu ]; then run_part serve 260 env DUR=4 bash tests/cuda/run_serve_gpu.sh
      else echo "| serve | skipped | - | no .carry/gpu: run scripts/gpu-bundle.sh and carry .carry |" >> "$SUM"
        skipped=$((skipped + 1)); fi ;;
    bench) run_part bench 420 env PEER_DIR=.peer bash bench/bench_gpu.sh ;;
    qbench) run_part qbench 240 env STAGES="bench peer" bash tests/cuda/run_qwen3_gpu.sh ;;
    prof) run_part prof 240 bash bench/profile_gpu.sh ;;
    mpnet) run_part mpnet 330 bash tests/cuda/run_mpnet_gpu.sh ;;
    labs) run_part labs 240 env LABS="${LABS:-lab_attn}" bash -c '[ -x build-gpu/lab_attn ] || {
            cmake -S . -B build-gpu -DPOSY_ENGINE_ONLY=ON -DPOSY_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null &&
            cmake --build build-gpu -j"$(nproc)" > "$OUT/build.log" 2>&1 || { echo BUILD FAILED; exit 1; }; }
          st=0; for l in $LABS; do
            ./build-gpu/$l > "$OUT/$l.log" 2>&1 || st=1
            LAB_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 3 ./build-gpu/$l > "$OUT/$l.memcheck.log" 2>&1 || st=1
            echo "$l: $(tail -1 "$OUT/$l.log"); memcheck: $(tail -1 "$OUT/$l.memcheck.log")"; done
          grep -h -E "bench|FAIL|differ" "$OUT"/lab_*.log; exit $st' ;;
    *) echo "| $p | unknown part | - | - |" >> "$SUM"; status=1 ;;
  esac
done
[ -d "$OUT/parts" ] && tar czf "$OUT/parts.tgz" -C "$OUT" parts && rm -rf "$OUT/parts"
echo >> "$SUM"
echo "total $(($(date +%s) - T0)) s; run_all_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)$([ $skipped -gt 0 ] && echo " ($skipped part(s) skipped)")" >> "$SUM"
cat "$SUM"
exit $status
