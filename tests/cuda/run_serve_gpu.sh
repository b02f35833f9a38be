#!/usr/bin/env bash
# run_serve_gpu: `posy serve --device cuda` end to end on a GPU machine, from
# the prebuilt bundle of scripts/gpu-bundle.sh (.carry/gpu: posy, api_embed,
# wrk, their libraries, the all-MiniLM-L6-v2 tokenizer and config files).
#
#   OUT=dir bash tests/cuda/run_serve_gpu.sh        (device call: carry [".carry"])
#
# First the models (one python process, tests/cuda/serve_gpu.py make): random
# weights, numpy-seeded, in all-MiniLM-L6-v2's configuration and in BERT-base
# sizes, saved by transformers with the carried tokenizer and
# sentence-transformers files.  Then for each of MODELS (default
# "minilm-l6 bert-base"):
#   1. start posy serve, wait for /health;
#   2. correctness: /v1/embeddings (single inputs and one batch) against
#      transformers fp32 on the same weights, min cosine >= 0.999;
#   3. load with wrk: one-sentence requests at CONNS connections, then
#      32- and 256-sentence requests; requests/s, p50/p99, tokens/s (from
#      posy_tokens_total before and after each run);
#   3b. one query's time by part (bench/serve_parts.py, PARTS requests);
#   4. /metrics read strictly; on the GPU graph captures and replays > 0 and
#      the counters agree with the backend's rules (one eager run per bucket
#      seen, at most one capture per bucket, eager + replays == batches);
#   5. SIGTERM: drains and exits 0.
# Then the public-API path: api_embed on the GPU against the CPU engine and
# transformers on 68 sequences of 1..512 tokens (min cosine >= 0.999).
# Five files land in $OUT (a device call brings back at most 8): serve_gpu.md
# (the summary, also printed at the end), serve.log (the servers' logs),
# wrk.txt (every wrk output), metrics.txt (each /metrics scrape) and api.log;
# the last line is "run_serve_gpu: PASS" or "FAIL".
#
# Knobs: DEVICE=cpu proves everything but the CUDA part on any machine (no
# GPU; captures must then be 0); DUR (seconds per wrk run, default 8);
# CONNS (default "1 8 64 256"); BATCH (batch-heavy runs, SENTENCES:CONNS,
# default "32:16 256:8"; "" skips); MODELS; API_MODELS (default: MODELS;
# "" skips); BUNDLE (default .carry/gpu); WORK (default /tmp/posy-serve-gpu);
# SERVE_FLAGS (more `posy serve` flags; with --warmup the counters are
# checked before any traffic: every bucket run twice, one capture each);
# PARTS (default 500; 0 skips): after the wrk runs, that many sequential
# one-sentence requests through bench/serve_parts.py -- one query's time
# split by the server's timing headers.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
DEVICE=${DEVICE:-cuda}
DUR=${DUR:-8}
CONNS=${CONNS-1 8 64 256}
BATCH=${BATCH-32:16 256:8}
MODELS=${MODELS:-minilm-l6 bert-base}
API_MODELS=${API_MODELS-$MODELS}
BUNDLE=${BUNDLE:-.carry/gpu}
WORK=${WORK:-/tmp/posy-serve-gpu}
SERVE_FLAGS=${SERVE_FLAGS:-}
PARTS=${PARTS:-500}
mkdir -p "$OUT" "$WORK"
export TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=$(cd "$OUT" && pwd)
SUMMARY="$OUT/serve_gpu.md"
rm -f "$OUT/serve.log" "$OUT/wrk.txt" "$OUT/metrics.txt" "$OUT/api.log"
STATUS=0
SRV_PID=""
T0=$(date +%s)

say() { echo "run_serve_gpu: $*"; }
bad() { say "FAIL: $*"; echo "- FAIL: $*" >> "$SUMMARY"; STATUS=1; }
die() { say "FAIL: $*"; echo "run_serve_gpu: FAIL"; exit 1; }   # nothing further can run

stop_server() {   # SIGTERM, up to 30 s to drain, then SIGKILL; sets SRV_RC
  SRV_RC=""
  [ -n "$SRV_PID" ] || return 0
  kill -TERM "$SRV_PID" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SRV_PID" 2>/dev/null; then
    kill -KILL "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; SRV_RC=killed
  else
    wait "$SRV_PID"; SRV_RC=$?
  fi
  SRV_PID=""
}
trap 'stop_server' EXIT
trap 'say "interrupted"; exit 1' INT TERM

# ---- the bundle: binaries, libraries, and where the device's CUDA libraries are
for f in bin/posy bin/api_embed bin/wrk libs.tar.xz model/tokenizer.json model/config.json; do
  [ -e "$BUNDLE/$f" ] || die "$BUNDLE/$f missing: run scripts/gpu-bundle.sh here and carry .carry"
done
LIB="$WORK/lib"
rm -rf "$LIB"; mkdir -p "$LIB"
if command -v xz >/dev/null; then tar -C "$LIB" -xJf "$BUNDLE/libs.tar.xz"
else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
       "$BUNDLE/libs.tar.xz" "$LIB"; fi || die "cannot unpack $BUNDLE/libs.tar.xz"
cuda_dirs() {   # folders holding the CUDA runtime and cuBLASLt (toolkit first, then pip wheels)
  local pydirs
  pydirs=$(python3 -c 'import glob, site
for s in site.getsitepackages(): [print(p) for p in sorted(glob.glob(s + "/nvidia/*/lib"))]' 2>/dev/null)
  for lib in libcudart.so.13 libcublasLt.so.13; do
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
             /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib $pydirs; do
      [ -e "$d/$lib" ] && { echo "$d"; break; }
    done
  done | awk '!seen[$0]++' | paste -sd: -
}
LP="$LIB"
CD=$(cuda_dirs)
[ -n "$CD" ] && LP="$LP:$CD"
[ -d /usr/local/nvidia/lib64 ] && LP="$LP:/usr/local/nvidia/lib64"
# the binaries run from a copy, so a carried tree without execute bits still works
rm -rf "$WORK/bin"; mkdir -p "$WORK/bin"
cp "$BUNDLE"/bin/posy "$BUNDLE"/bin/api_embed "$BUNDLE"/bin/wrk "$WORK/bin/" && chmod +x "$WORK"/bin/* \
  || die "cannot copy the bundle's binaries to $WORK/bin"
POSY="$WORK/bin/posy"; API="$WORK/bin/api_embed"; WRK="$WORK/bin/wrk"
{
  echo "# posy serve on $DEVICE ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null; then
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  fi
  echo "CPU: $(nproc) cores; bundle: $(head -2 "$BUNDLE/MANIFEST.txt" 2>/dev/null | tail -1)"
  echo "LD_LIBRARY_PATH for posy/api_embed/wrk: $LP"
  echo
} > "$SUMMARY"
missing=$(for b in "$POSY" "$API" "$WRK"; do LD_LIBRARY_PATH="$LP" ldd "$b" | grep "not found"; done | sort -u)
if [ -n "$missing" ]; then
  echo "$missing"; echo "- FAIL: libraries not found: $missing" >> "$SUMMARY"
  die "libraries not found with LD_LIBRARY_PATH=$LP"
fi
if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || die "nvidia-smi: no GPU"
fi
say "bundle ok; LD_LIBRARY_PATH=$LP"
run() { LD_LIBRARY_PATH="$LP" "$@"; }   # in the foreground only: "run ... &" would background a subshell

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http_get() {   # http_get URL: the body of a 200 answer, else exit 1 (no curl on every machine)
  python3 -c 'import sys, urllib.request
try:
    sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
except Exception as e:
    sys.exit(1)' "$1"
}
wait_healthy() {   # wait_healthy URL PID SECONDS: 0 once /health answers 200; 1 if PID dies or time runs out
  python3 -c 'import os, sys, time, urllib.request
url, pid, end = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
while time.time() < end:
    try:
        if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            sys.exit(1)
    except OSError:
        sys.exit(1)
    try:
        if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
sys.exit(1)' "$@"
}
scrape() { http_get "$URL/metrics"; }
metric() { scrape | awk -v n="$1" '$1==n {print $2}'; }
body() {   # body N: a /v1/embeddings request of N sentences
  python3 -c 'import json, sys
n = int(sys.argv[1])
s = ["Sentence number %d says something about topic %d in plain English words." % (i, i % 7) for i in range(n)]
print(json.dumps({"input": s[0] if n == 1 else s, "model": "m"}))' "$1"
}

wrk_case() {   # wrk_case MODEL LABEL CONNS SENTENCES
  local model=$1 label=$2 c=$3 n=$4 t f tok0 tok1 out rps p50 p99 reqs secs non2xx errs toks
  t=$(( c < 4 ? c : 4 ))
  f="$WORK/wrk-$model-$label-c$c.txt"
  tok0=$(metric posy_tokens_total)
  POSY_BENCH_BODY=$(body "$n") run timeout $((DUR + 30)) "$WRK" -t"$t" -c"$c" -d"${DUR}s" --timeout 10s \
    --latency -s bench/bench_serve_post.lua "$URL/v1/embeddings" > "$f" 2>&1
  local rc=$?
  tok1=$(metric posy_tokens_total)
  out=$(cat "$f")
  { echo "=== $model $label, $c connections, wrk -t$t -d${DUR}s (exit $rc)"; echo "$out"; echo; } >> "$OUT/wrk.txt"
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  secs=$(echo "$out" | awk '/requests in/ {sub(/s,?$/, "", $4); print $4}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  errs=$(echo "$out" | awk '/Socket errors/ {print $0}')
  toks=$(python3 -c "import sys; a, b, s = sys.argv[1:]; print(f'{(float(b) - float(a)) / max(float(s), 1e-9):,.0f}')" \
         "${tok0:-0}" "${tok1:-0}" "${secs:-$DUR}" 2>/dev/null)
  printf "| %-9s | %-12s | %5s | %10s | %9s | %9s | %12s | %s |\n" "$model" "$label" "$c" "${rps:-?}" \
    "${p50:-?}" "${p99:-?}" "${toks:-?}" "${non2xx:-0}${errs:+; $errs}" | tee -a "$SUMMARY"
  [ $rc -eq 0 ] && [ "${reqs:-0}" -gt 0 ] 2>/dev/null || bad "$model $label c=$c: wrk exit $rc, ${reqs:-no} requests (see wrk.txt)"
  [ -z "$non2xx" ] || bad "$model $label c=$c: $non2xx non-2xx responses (see wrk.txt and serve.log)"
  [ -z "$errs" ] || echo "  ($model $label c=$c: $errs)"
}

serve_model() {   # serve_model NAME: every serving check on one model
  local name=$1 dir port log
  dir="$WORK/models/$name"
  log="$WORK/serve-$name.log"
  [ -f "$dir/model.safetensors" ] || { bad "$name: no model (see above)"; return; }
  port=$(free_port); URL="http://127.0.0.1:$port"
  # exec: SRV_PID is posy itself, so SIGTERM reaches it and its exit status is ours to check
  ( export LD_LIBRARY_PATH="$LP"
    # shellcheck disable=SC2086  # SERVE_FLAGS: words on purpose
    exec "$POSY" serve --model "$dir" --device "$DEVICE" --host 127.0.0.1 --port "$port" --max-concurrent 2048 $SERVE_FLAGS
  ) > "$log" 2>&1 &
  SRV_PID=$!
  local t_start; t_start=$(date +%s.%N)
  if ! wait_healthy "$URL" "$SRV_PID" 120; then
    tail -20 "$log"; bad "$name: posy serve did not become healthy (see serve.log)"; stop_server
    save_log "$name" "$log"; return
  fi
  [ "$(readlink "/proc/$SRV_PID/exe")" = "$(readlink -f "$POSY")" ] || say "warning: pid $SRV_PID is not posy"
  say "$name: serving on $URL after $(python3 -c "import time; print(f'{time.time() - $t_start:.1f}')") s ($(http_get "$URL/info" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["device"], d["model_dtype"], d["dimensions"], "dims")'))"
  echo "## $name" >> "$SUMMARY"; echo >> "$SUMMARY"
  # the batch budget in effect with no --max-batch-tokens (eng_batch_budget.c):
  # on a GPU 65536 for all-MiniLM-L6's sizes, 16384 for BERT-base's; 16384 on the CPU
  local mbt want
  mbt=$(http_get "$URL/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_batch_tokens"])')
  case "$DEVICE:$name" in cuda:minilm-l6) want=65536 ;; *) want=16384 ;; esac
  echo "- batch budget (/info max_batch_tokens, default): $mbt (expected $want); start-up log: $(grep -m1 -o 'max[-_ ]batch[-_ ]tokens[^,;)]*' "$log")" >> "$SUMMARY"
  [ "$mbt" = "$want" ] || bad "$name: /info max_batch_tokens $mbt, expected the default $want"
  case "$DEVICE: $SERVE_FLAGS " in cuda:*" --warmup "*|cuda:*" --warmup=1 "*)   # before any request: every bucket warm
    local wb we wc wn
    wb=$(metric posy_engine_buckets_seen); we=$(metric posy_engine_eager_runs_total)
    wc=$(metric posy_engine_graph_captures_total); wn=$(metric posy_engine_batches_total)
    echo "- warm-up: $(grep -m1 -o 'warm-up: .*' "$log"); before traffic: $wb buckets seen, $we first runs, $wc captures, $wn batches" >> "$SUMMARY"
    [ "${wb:-0}" -gt 0 ] && [ "$we" = "$wb" ] && [ "$wc" = "$wb" ] && [ "$wn" = "$((2 * wb))" ] 2>/dev/null \
      || bad "$name: --warmup: before traffic $wb buckets, $we first runs, $wc captures, $wn batches (want n, n, n, 2n)" ;;
  esac
  local chk
  chk=$(python3 tests/cuda/serve_gpu.py check "$URL" "$dir" 2>&1); local crc=$?
  echo "$chk" | tail -3; echo "- correctness: $(echo "$chk" | tail -1)" >> "$SUMMARY"
  [ $crc -eq 0 ] || bad "$name: /v1/embeddings vs transformers below 0.999 or failed"
  echo >> "$SUMMARY"
  printf "| %-9s | %-12s | %5s | %10s | %9s | %9s | %12s | %s |\n" model request conns "req/s" p50 p99 "tokens/s" "non-2xx" | tee -a "$SUMMARY"
  echo "|-----------|--------------|-------|------------|-----------|-----------|--------------|---------|" | tee -a "$SUMMARY"
  for c in $CONNS; do wrk_case "$name" 1-sentence "$c" 1; done
  for b in $BATCH; do wrk_case "$name" "${b%%:*}-sentence" "${b##*:}" "${b%%:*}"; done
  echo >> "$SUMMARY"
  if [ "$PARTS" -gt 0 ] 2>/dev/null; then   # one query's time by part, from the server's timing headers
    local parts; parts=$(python3 bench/serve_parts.py "$URL" "$PARTS" 2>&1) || bad "$name: serve_parts failed: $parts"
    { echo "$parts"; echo; } | tee -a "$SUMMARY"
  fi
  local mf="$WORK/metrics-$name.txt"
  scrape > "$mf" || bad "$name: GET /metrics failed"
  { echo "=== $name"; cat "$mf"; echo; } >> "$OUT/metrics.txt"
  local mchk; mchk=$(python3 tests/cuda/serve_gpu.py metrics "$mf" "$DEVICE" 2>&1); local mrc=$?
  echo "$mchk"
  { echo '- /metrics:'; echo '```'; grep -E "^posy_engine_" "$mf"; echo '```'; } >> "$SUMMARY"
  [ $mrc -eq 0 ] || bad "$name: /metrics check: $(echo "$mchk" | tail -1)"
  grep -E "captured graph" "$log" | tail -3
  stop_server
  say "$name: SIGTERM -> exit $SRV_RC"
  echo "- SIGTERM: exit $SRV_RC" >> "$SUMMARY"; echo >> "$SUMMARY"
  [ "$SRV_RC" = 0 ] || bad "$name: posy serve exited $SRV_RC after SIGTERM (see serve.log)"
  save_log "$name" "$log"
}

save_log() { { echo "=== $1"; cat "$2"; echo; } >> "$OUT/serve.log"; }

# every model first, in one python process (one torch import)
todo=$(for m in $MODELS $API_MODELS; do echo "$m"; done | awk '!seen[$0]++' | tr '\n' ' ')
rm -rf "$WORK/models"; mkdir -p "$WORK/models"
if [ -n "$todo" ]; then
  python3 tests/cuda/serve_gpu.py make "$BUNDLE" "$WORK/models" $todo 2>&1 | grep -v "Writing model shards"
  [ "${PIPESTATUS[0]}" -eq 0 ] || bad "could not make the models ($todo)"
fi
for m in $MODELS; do serve_model "$m"; done

echo "## public API (api_embed)" >> "$SUMMARY"; echo >> "$SUMMARY"
for m in $API_MODELS; do
  dir="$WORK/models/$m"
  res=$(python3 tests/cuda/serve_gpu.py api "$API" "$dir" "$WORK/api-$m" "$DEVICE" --ld "$LP" 2>&1); rc=$?
  { echo "=== $m"; echo "$res" | grep -v "Writing model shards"; echo; } >> "$OUT/api.log"
  echo "$res" | grep -E "serve_gpu api|failed"
  echo "$res" | grep "serve_gpu api" | sed "s/^serve_gpu api: /- $m: /" >> "$SUMMARY"
  [ $rc -eq 0 ] || bad "$m: api_embed $DEVICE vs cpu / transformers below 0.999 or failed (see api.log)"
done
echo >> "$SUMMARY"
echo "total $(( $(date +%s) - T0 )) s" | tee -a "$SUMMARY"
RESULT=$([ $STATUS -eq 0 ] && echo PASS || echo FAIL)
echo "run_serve_gpu: $RESULT" >> "$SUMMARY"
echo; echo "---- $SUMMARY"; cat "$SUMMARY"
exit $STATUS
