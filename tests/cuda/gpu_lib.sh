# gpu_lib.sh: what the GPU scripts (tests/cuda/run_*_gpu.sh) share, sourced
# after they set OUT and LOG.  say MSG: the message with the seconds since
# sourcing, on stdout and appended to $LOG.  gpu_build OUTDIR builds $BUILD
# (default build-gpu; GPU_TARGET: that target alone) with POSY_ENGINE_ONLY
# (no tokenizer or server dependencies) and returns 0, or copies the log to OUTDIR/build.log,
# prints its errors and returns 1; the build may take GPU_BUILD_TIMEOUT
# seconds (default 900: a fresh build of every lab on 16 cores took over
# 300 s on 2026-12-06, run 84 -- under the device tool's 600 s a call,
# carry binaries built elsewhere with GPU_PREBUILT instead).  GPU_PREBUILT="bin ..." (binaries built
# on another machine with the same CUDA and carried; the device then needs
# LD_LIBRARY_PATH=/usr/local/cuda/lib64): only checks that GPU_TARGET's,
# else those, exist.  gpu_name: the GPU and driver, on
# stdout and appended to $LOG.  gpu_setup NAME (for scripts that source
# this first): the defaults of OUT, BUILD, WORK (encoder harnesses) and
# QWORK (Qwen3 harnesses), pipefail, LOG=$OUT/NAME, status=0, gpu_name.
# gpu_bench_only SRC BUILD [cuda flags]: bench_gpu alone from another
# source tree (or this one with other flags), log in $OUT/BUILD.log.
# gpu_memcheck LAB [TIMEOUT]: LAB_QUICK=1 $BUILD/LAB under compute-sanitizer
# memcheck (where installed; else 0), log in $OUT/LAB.memcheck.log, a
# summary line by say; returns the sanitizer's status.
gpu_build() {
  local log=/tmp/posy_build.log t missing=
  if [ -n "$GPU_PREBUILT" ]; then # binaries built elsewhere (same CUDA) and carried: check, do not build
    for t in ${GPU_TARGET:-$GPU_PREBUILT}; do [ -x "${BUILD:-build-gpu}/$t" ] || missing="$missing $t"; done
    [ -z "$missing" ] && return 0
    echo "GPU_PREBUILT: missing in ${BUILD:-build-gpu}:$missing" | tee "$1/build.log"
    return 1
  fi
  cmake -S . -B "${BUILD:-build-gpu}" -DPOSY_ENGINE_ONLY=ON -DPOSY_CUDA=ON -DCMAKE_BUILD_TYPE=Release > "$log" 2>&1 &&
    timeout "${GPU_BUILD_TIMEOUT:-900}" cmake --build "${BUILD:-build-gpu}" -j"$(nproc)" ${GPU_TARGET:+--target $GPU_TARGET} >> "$log" 2>&1 && return 0
  cp "$log" "$1/build.log"
  grep -E "error|Error" "$log" | head -40
  return 1
}

GPU_T0=$(date +%s)
say() { echo "[$(($(date +%s) - GPU_T0)) s] $*" | tee -a "$LOG"; }

gpu_name() { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"; }

gpu_setup() {
  set -o pipefail
  OUT=${OUT:-out} BUILD=${BUILD:-build-gpu} WORK=${WORK:-/tmp/posy-e2e} QWORK=${QWORK:-/tmp/posy-qwen3}
  mkdir -p "$OUT" "$WORK"
  LOG="$OUT/$1"
  status=0
  gpu_name
}

gpu_bench_only() {
  cmake -S "$1" -B "$2" -DPOSY_ENGINE_ONLY=ON -DPOSY_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    ${3:+-DCMAKE_CUDA_FLAGS="$3"} > "${OUT:-out}/$2.log" 2>&1 &&
    timeout 300 cmake --build "$2" -j8 --target bench_gpu >> "${OUT:-out}/$2.log" 2>&1
}

gpu_memcheck() {
  command -v compute-sanitizer >/dev/null || return 0
  local log="$OUT/$1.memcheck.log" rc
  LAB_QUICK=1 timeout "${2:-200}" compute-sanitizer --tool memcheck --error-exitcode 3 "./${BUILD:-build-gpu}/$1" > "$log" 2>&1
  rc=$?
  say "compute-sanitizer memcheck $1: rc=$rc, $(grep -c "Invalid __" "$log") invalid accesses, $(grep -c "Program hit" "$log") failed API calls"
  return $rc
}
