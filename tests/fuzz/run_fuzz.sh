#!/bin/sh
# Build the safetensors fuzzer with clang (libFuzzer + ASan + UBSan) and run
# it for N seconds (default 30) from the committed seeds.  Exit status is
# libFuzzer's: non-zero when it found a crash (the input is left in
# $FUZZ_DIR as crash-*).  Usage: tests/fuzz/run_fuzz.sh [seconds]
set -eu
SECS=${1:-30}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FUZZ_DIR=${FUZZ_DIR:-$ROOT/build-fuzz}
CC=${FUZZ_CC:-clang}
mkdir -p "$FUZZ_DIR/corpus"
cd "$ROOT"
$CC -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Isrc -Isrc/common -Isrc/engine $(pkg-config --cflags jansson) \
    tests/fuzz/fuzz_safetensors.c src/engine/eng_safetensors.c src/engine/eng_st_read.c \
    src/engine/eng_bert_weights.c src/common/posy_err.c src/common/posy_file.c \
    $(pkg-config --libs jansson) -o "$FUZZ_DIR/fuzz_safetensors"
cd "$FUZZ_DIR"
exec ./fuzz_safetensors -max_total_time="$SECS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -dict="$ROOT/tests/fuzz/safetensors.dict" corpus "$ROOT/tests/fuzz/seeds"
