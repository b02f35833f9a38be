#!/usr/bin/env bash
# bench_serve: the HTTP front's cost, measured over loopback with wrk.
#
#   bench/bench_serve.sh [seconds-per-run]      (default 5)
#
# Starts `posy serve` twice on free ports -- once with the real engine (CPU)
# and once with `--engine noop` (no model math, everything else the same) --
# and drives POST /v1/embeddings with one-sentence and 32-sentence bodies.
# Prints requests/s and p50/p99 latency for each, and for the no-op engine
# the server's CPU time per request (from /proc: user+system time of the
# server process divided by requests answered), which is the gateway +
# scheduler overhead per request.  The server is pinned to core 0 and wrk to
# core 1 when there are two cores or more.  Then the JSON micro-benchmark:
# one 1024-float vector through posy's serializer beside printf("%.9g").
# POSY_BENCH_ENGINES=noop skips the real-engine runs (a machine without weights).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-5}
BIN=${POSY_BIN:-build/posy}
MODEL=${POSY_MODEL:-models/all-MiniLM-L6-v2}
command -v wrk >/dev/null || { echo "bench_serve: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench_serve: $BIN not found; build first" >&2; exit 1; }
NCPU=$(nproc)
PIN_SRV=""; PIN_WRK=""
if [ "$NCPU" -ge 2 ]; then PIN_SRV="taskset -c 0"; PIN_WRK="taskset -c 1"; fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

ONE='{"input":"The quick brown fox jumps over the lazy dog near the river bank.","model":"m"}'
THIRTY_TWO=$(python3 -c '
import json
s=["Sentence number %d says something about topic %d in plain English words." % (i, i % 5) for i in range(32)]
print(json.dumps({"input": s, "model": "m"}))')

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run_case() {  # run_case ENGINE_LABEL BODY_LABEL PID PORT BODY CONNS
  local label=$1 blabel=$2 pid=$3 port=$4 body=$5 conns=$6
  local t0 t1 out rps p50 p99 reqs
  t0=$(cpu_ticks "$pid")
  out=$(POSY_BENCH_BODY="$body" $PIN_WRK wrk -t1 -c"$conns" -d"${DUR}s" --latency -s bench/bench_serve_post.lua \
        "http://127.0.0.1:$port/v1/embeddings" 2>&1)
  t1=$(cpu_ticks "$pid")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  local hz; hz=$(getconf CLK_TCK)
  local us_per_req
  us_per_req=$(python3 -c "print(f'{($t1-$t0)/$hz*1e6/max(1,$reqs):.1f}')")
  if echo "$out" | grep -q "Non-2xx"; then echo "warning: non-2xx responses in $label/$blabel" >&2; fi
  printf "| %-6s | %-12s | %5s | %10s | %9s | %9s | %16s |\n" "$label" "$blabel" "$conns" "$rps" "$p50" "$p99" "$us_per_req"
}

stop_server() {  # the server is not a child of this shell (started in $(...)): poll
  kill "$1" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
}

start_server() {  # start_server PORT ARGS... ; echoes the pid
  local port=$1; shift
  $PIN_SRV "$BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$port" --http-threads 1 \
      --tokenization-workers 1 "$@" >/tmp/bench_serve_$port.log 2>&1 &
  local pid=$!
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { echo $pid; return; }
    sleep 0.05
  done
  echo "bench_serve: server on $port did not start:" >&2; cat /tmp/bench_serve_$port.log >&2; exit 1
}

echo "posy serve over loopback, ${DUR}s per run, server: 1 http thread + 1 tokenization worker$([ -n "$PIN_SRV" ] && echo ', pinned to core 0; wrk on core 1')"
echo "(engine threads: the CPU engine uses its own OpenMP/BLAS threads; server CPU/request includes them)"
echo
printf "| %-6s | %-12s | %5s | %10s | %9s | %9s | %16s |\n" engine request conns "req/s" p50 p99 "server CPU us/req"
echo "|--------|--------------|-------|------------|-----------|-----------|------------------|"
P1=$(free_port); PID1=$(start_server "$P1" --engine noop)
run_case noop 1-sentence "$PID1" "$P1" "$ONE" 32
run_case noop 32-sentence "$PID1" "$P1" "$THIRTY_TWO" 32
stop_server "$PID1"
if [ "${POSY_BENCH_ENGINES:-noop,model}" != noop ]; then
P2=$(free_port); PID2=$(start_server "$P2" --device cpu $([ -n "$PIN_SRV" ] && echo --threads 1))
run_case model 1-sentence "$PID2" "$P2" "$ONE" 8
run_case model 32-sentence "$PID2" "$P2" "$THIRTY_TWO" 8
stop_server "$PID2"
fi
echo
echo "JSON serialisation of one 1024-float embedding (bench/bench_serve_json.c):"
cc -O2 -Isrc/gateway bench/bench_serve_json.c src/gateway/gw_float.c src/gateway/gw_buf.c -lm -lpthread -o /tmp/bench_serve_json
$PIN_SRV /tmp/bench_serve_json 20000
