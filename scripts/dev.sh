#!/usr/bin/env bash
# The two set-up commands of the README, in one script:
#   scripts/dev.sh serve   install, build, fetch the default model, start posy
#   scripts/dev.sh test    install, build (release + ASan/UBSan), run every test
# Extra arguments after `serve` go to the server.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
JOBS=$(nproc 2>/dev/null || echo 2)

build() {  # build DIR [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

cmd=${1:-}
shift || true
case "$cmd" in
  serve)
    scripts/install-deps.sh
    build build -DCMAKE_BUILD_TYPE=Release
    scripts/fetch-model.sh
    exec build/posy serve --model models/all-MiniLM-L6-v2 "$@"
    ;;
  test)
    scripts/install-deps.sh
    build build -DCMAKE_BUILD_TYPE=Release
    scripts/fetch-model.sh
    echo "== C unit tests (release)"
    ctest --test-dir build --output-on-failure
    echo "== C unit tests (ASan + UBSan)"
    build build-asan -DCMAKE_BUILD_TYPE=Debug -DPOSY_SANITIZE=ON -DPOSY_CUDA=OFF
    ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure
    echo "== Python end-to-end tests"
    set +e
    # build-asan/posy (built above with every target): the stress test runs it.
    POSY_BIN="$ROOT/build/posy" POSY_MODEL="$ROOT/models/all-MiniLM-L6-v2" \
      POSY_ASAN_BIN="$ROOT/build-asan/posy" \
      python3 -m pytest -q tests/python "$@"
    rc=$?
    set -e
    if [ $rc -eq 5 ]; then echo "pytest collected no tests" >&2; rc=0; fi
    exit $rc
    ;;
  *)
    echo "usage: scripts/dev.sh serve [posy serve flags] | scripts/dev.sh test [pytest args]" >&2
    exit 2
    ;;
esac
