#!/bin/sh
# Build one libFuzzer target with clang (libFuzzer + ASan + UBSan, leaks
# detected) and run it for N seconds (default 30) from its seeds.  Exit
# status is libFuzzer's: non-zero when it found a crash, leak or sanitizer
# report (the input is left in $FUZZ_DIR as crash-*, leak-* or timeout-*).
#   Usage: tests/fuzz/run_fuzz.sh [TARGET] [seconds]
#   TARGET: safetensors (default)  eng_st_parse + the BERT weights loader
#           gw_parse               JSON bodies of the HTTP routes
#           rpc                    gRPC message decoders (rpc_codec.h)
#           config                 model-directory JSON files (eng_config_load)
# The older form `run_fuzz.sh [seconds]` runs safetensors.  The corpus grows
# in $FUZZ_DIR/corpus (safetensors) or $FUZZ_DIR/corpus_TARGET; committed
# seeds are read from tests/fuzz and never written (make_json_seeds.py writes
# the JSON ones; crash-* there are reproducers of fixed bugs).  The
# tokenizer's fuzzer has its own script, run_tok_fuzz.sh.
# Flag lists ($CFLAGS, pkg-config output, $SEEDS) are split into words on purpose.
# shellcheck disable=SC2046,SC2086
set -eu
case "${1:-}" in
  ''|*[!0-9]*) TARGET=${1:-safetensors}; SECS=${2:-30} ;;
  *) TARGET=safetensors; SECS=$1 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FUZZ_DIR=${FUZZ_DIR:-$ROOT/build-fuzz}
CC=${FUZZ_CC:-clang}
mkdir -p "$FUZZ_DIR"
cd "$ROOT"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter -Werror"
SAN="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
BIN="$FUZZ_DIR/fuzz_$TARGET"
CORPUS="$FUZZ_DIR/corpus_$TARGET"
SEEDS=""
DICT=""
MAXLEN=4096

case "$TARGET" in
safetensors)
  $CC $CFLAGS $SAN -Isrc -Isrc/common -Isrc/engine $(pkg-config --cflags jansson) \
      tests/fuzz/fuzz_safetensors.c src/engine/eng_safetensors.c src/engine/eng_st_read.c \
      src/engine/eng_bert_weights.c src/common/posy_err.c src/common/posy_file.c \
      $(pkg-config --libs jansson) -o "$BIN"
  CORPUS="$FUZZ_DIR/corpus"
  SEEDS="$ROOT/tests/fuzz/seeds"
  DICT="$ROOT/tests/fuzz/safetensors.dict"
  MAXLEN=8192
  ;;
gw_parse)
  $CC $CFLAGS $SAN -Isrc -Isrc/common -Isrc/tokenizer -Isrc/gateway $(pkg-config --cflags jansson) \
      tests/fuzz/fuzz_gw_parse.c src/gateway/gw_parse.c src/common/posy_vecenc.c \
      $(pkg-config --libs jansson) -lm -o "$BIN"
  SEEDS="$ROOT/tests/fuzz/gw_seeds"
  DICT="$ROOT/tests/fuzz/gw_parse.dict"
  ;;
rpc)
  # The protobuf-c code is generated from proto/ as the CMake build does,
  # and compiled without warnings (not ours); seeds come from the encoders.
  GEN="$FUZZ_DIR/gen"
  mkdir -p "$GEN"
  protoc-c --c_out="$GEN" -Iproto proto/posy.proto proto/health.proto
  PB="$(pkg-config --cflags grpc libprotobuf-c)"
  LIBS="$(pkg-config --libs grpc libprotobuf-c)"
  for p in posy health; do
    $CC -std=c11 -g -O1 -w $SAN -I"$GEN" $PB -c "$GEN/$p.pb-c.c" -o "$GEN/$p.pb-c.o"
    $CC -std=c11 -g -O1 -w -I"$GEN" $PB -c "$GEN/$p.pb-c.c" -o "$GEN/$p.plain.o"
  done
  $CC $CFLAGS $SAN -Isrc -Isrc/common -Isrc/rpc -I"$GEN" $PB tests/fuzz/fuzz_rpc.c src/rpc/rpc_codec.c \
      src/common/posy_err.c "$GEN/posy.pb-c.o" "$GEN/health.pb-c.o" $LIBS -o "$BIN"
  $CC $CFLAGS -Isrc -Isrc/common -Isrc/rpc -I"$GEN" $PB tests/fuzz/make_rpc_seeds.c src/rpc/rpc_codec.c \
      src/common/posy_err.c "$GEN/posy.plain.o" "$GEN/health.plain.o" $LIBS -o "$FUZZ_DIR/make_rpc_seeds"
  rm -rf "$FUZZ_DIR/seed_rpc"
  mkdir -p "$FUZZ_DIR/seed_rpc"
  "$FUZZ_DIR/make_rpc_seeds" "$FUZZ_DIR/seed_rpc"
  SEEDS="$FUZZ_DIR/seed_rpc"
  # reproducers of fixed bugs, if any were found
  [ -d "$ROOT/tests/fuzz/rpc_seeds" ] && SEEDS="$SEEDS $ROOT/tests/fuzz/rpc_seeds"
  ;;
config)
  $CC $CFLAGS $SAN -Isrc -Isrc/common -Isrc/engine $(pkg-config --cflags jansson) \
      tests/fuzz/fuzz_config.c src/engine/eng_config.c src/engine/eng_config_st.c src/engine/eng_cfgjson.c \
      src/engine/eng_config_static.c src/engine/eng_config_rerank.c src/engine/eng_config_splade.c src/engine/eng_config_deberta.c src/engine/eng_config_router.c src/engine/eng_safetensors.c src/engine/eng_st_read.c \
      src/common/posy_err.c src/common/posy_file.c $(pkg-config --libs jansson) -o "$BIN"
  SEEDS="$ROOT/tests/fuzz/cfg_seeds"
  DICT="$ROOT/tests/fuzz/config.dict"
  MAXLEN=8192
  ;;
*)
  echo "run_fuzz.sh: unknown target '$TARGET' (safetensors, gw_parse, rpc, config)" >&2
  exit 2
  ;;
esac

mkdir -p "$CORPUS"
cd "$FUZZ_DIR"
exec "$BIN" -max_total_time="$SECS" -max_len="$MAXLEN" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 ${DICT:+-dict="$DICT"} "$CORPUS" $SEEDS
