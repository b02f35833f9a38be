#!/usr/bin/env bash
# Build the tokenizer's libFuzzer target and run it for a bounded time:
#   tests/fuzz/run_tok_fuzz.sh [SECONDS_PER_MODE]   (default 20)
# Two runs: seeds of small tokenizer.json files (loading) and texts
# (encoding with every fixture).  Exit status non-zero on any crash, leak
# or sanitizer report.  Run from anywhere; works in the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-20}
OUT=${TOK_FUZZ_DIR:-build-fuzz}
mkdir -p "$OUT"
CC=${CC_FUZZ:-clang}
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -std=c11"
# shellcheck disable=SC2046
$CC $FLAGS -Isrc/common -Isrc/tokenizer tests/fuzz/fuzz_tok.c src/tokenizer/*.c src/common/*.c \
  $(pkg-config --cflags --libs jansson libutf8proc libpcre2-8) -lpthread -lm -o "$OUT/fuzz_tok"
# Seeds: mode byte (even = tokenizer.json, odd = text) + payload.
rm -rf "$OUT/seed_load" "$OUT/seed_text"
mkdir -p "$OUT/seed_load" "$OUT/seed_text"
for f in tests/fuzz/tok_seeds/*.json; do
  { printf '\x00'; cat "$f"; } > "$OUT/seed_load/$(basename "$f")"
done
i=0
for t in "Hello, world! It's 3.14" "héllo [SEP] 中文 😀 <s> </s> <|im_start|>" "ǅemal ﬁne Straße İstanbul" \
         "   a  b\t\n" "👩‍💻🏳️‍🌈 e\xcc\x81 \xed\xa0\x80 \xff\xfe" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"; do
  { printf '\x01'; printf '%s' "$t"; } > "$OUT/seed_text/t$i"; i=$((i + 1))
done
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$OUT/fuzz_tok" -max_total_time="$SECS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict=tests/fuzz/tok.dict -print_final_stats=1 "$OUT/seed_load" 2>&1 | tail -5
"$OUT/fuzz_tok" -max_total_time="$SECS" -max_len=2048 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$OUT/seed_text" 2>&1 | tail -5
echo "fuzz_tok: no crash in 2 x ${SECS}s"
