#!/usr/bin/env bash
# bench_gateway.sh: requests/s and p50/p99 latency through `posy gateway`
# with 1, 2 and 3 CPU workers, beside `posy serve` (same HTTP front, no RPC
# hop) in the same run, plus the gateway's added latency over calling a
# worker directly over gRPC (bench_gateway_latency.py).
#
#   bench/bench_gateway.sh [--engine model|noop] [--duration 10] [--conns 16] [--worker-cores N]
#
# Load: wrk over loopback posting one-sentence OpenAI requests (and 32-
# sentence ones).  The engine side gets --worker-cores N cores in all
# (default: all cores but 4, which are left to the gateway and wrk): posy
# serve runs with --threads N, and k workers with --threads N/k each, so
# every shape has the same compute and the table shows what the RPC hop and
# chunking cost or gain.  On a small machine the numbers mostly show
# contention.  With
# --engine noop the model math is skipped, so the numbers are the
# gateway + transport ceiling.  Prints a Markdown table for docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
POSY=${POSY_BIN:-build/posy}
MODEL=${POSY_MODEL:-models/all-MiniLM-L6-v2}
ENGINE=model
DURATION=10
CONNS=16
WCORES=
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) ENGINE=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --conns) CONNS=$2; shift 2 ;;
    --worker-cores) WCORES=$2; shift 2 ;;
    *) echo "usage: $0 [--engine model|noop] [--duration S] [--conns N] [--worker-cores N]" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { echo "bench_gateway: wrk not found (scripts/install-deps.sh)" >&2; exit 1; }
CORES=$(nproc)
[ -n "$WCORES" ] || WCORES=$(( CORES > 5 ? CORES - 4 : 1 ))
TMP=$(mktemp -d)
PIDS=()
LOGS=${BENCH_LOG_DIR:-/tmp/posy-bench-logs}
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  mkdir -p "$LOGS" && cp "$TMP"/*.log "$LOGS"/ 2>/dev/null || true   # server logs survive the run
  rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_http() {  # port
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench_gateway: server on port $1 did not come up" >&2; return 1
}

wait_grpc() {  # port: the worker logs its port once it serves
  for _ in $(seq 1 600); do
    grep -q "gRPC on port $1" "$TMP/worker-$1.log" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench_gateway: worker on port $1 did not come up" >&2; cat "$TMP/worker-$1.log" >&2; return 1
}

cat > "$TMP/one.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"input": "The quick brown fox jumps over the lazy dog near the river bank.", "model": "m"}'
LUA
python3 - "$TMP/batch32.lua" <<'PY'
import json, sys
texts = [f"Sentence number {i} about vector search and embeddings in production." for i in range(32)]
body = json.dumps({"input": texts, "model": "m"})
open(sys.argv[1], "w").write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n'
                              % json.dumps(body))
PY

# run_wrk PORT LUA -> "req/s p50 p99"
run_wrk() {
  wrk -t2 -c"$CONNS" -d"${DURATION}s" --timeout 30s --latency -s "$2" "http://127.0.0.1:$1/v1/embeddings" > "$TMP/wrk.out" 2>&1
  python3 - "$TMP/wrk.out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(v, u): return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[u]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
p = {m[0]: ms(m[1], m[2]) for m in re.findall(r"\n\s+(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s)", t)}
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(f"{rps:.1f} {p.get('50', float('nan')):.2f} {p.get('99', float('nan')):.2f} {non2xx.group(1) if non2xx else 0}")
PY
}

row() {  # label port
  read -r r1 p50a p99a bad1 < <(run_wrk "$2" "$TMP/one.lua")
  read -r r32 p50b p99b bad32 < <(run_wrk "$2" "$TMP/batch32.lua")
  echo "| $1 | $r1 | $p50a | $p99a | $r32 | $p50b | $p99b | $((bad1 + bad32)) |"
}

echo "posy gateway benchmark: engine=$ENGINE, $CORES cores ($WCORES for the engine side), wrk -c$CONNS -d${DURATION}s, $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| shape | 1-sentence req/s | p50 ms | p99 ms | 32-sentence req/s | p50 ms | p99 ms | non-2xx |"
echo "|---|---|---|---|---|---|---|---|"

SPORT=$(free_port)
"$POSY" serve --model "$MODEL" --host 127.0.0.1 --port "$SPORT" --device cpu --engine "$ENGINE" --threads "$WCORES" \
  > "$TMP/serve.log" 2>&1 & SPID=$!
wait_http "$SPORT"
row "posy serve x $WCORES thread(s) (no RPC hop)" "$SPORT"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true

WPORTS=()
for n in 1 2 3; do
  T=$(( WCORES / n )); [ "$T" -lt 1 ] && T=1
  for wp in "${WPORTS[@]}"; do kill -TERM "$wp" 2>/dev/null || true; done
  WPORTS=()
  BACKENDS=()
  for i in $(seq 1 "$n"); do
    P=$(free_port)
    "$POSY" worker --model "$MODEL" --listen "127.0.0.1:$P" --device cpu --threads "$T" --engine "$ENGINE" \
      > "$TMP/worker-$P.log" 2>&1 & WPORTS+=($!); PIDS+=($!)
    wait_grpc "$P"
    BACKENDS+=(--backend "127.0.0.1:$P")
  done
  GPORT=$(free_port)
  "$POSY" gateway --model "$MODEL" --host 127.0.0.1 --port "$GPORT" "${BACKENDS[@]}" \
    > "$TMP/gateway-$n.log" 2>&1 & GPID=$!; PIDS+=($GPID)
  wait_http "$GPORT"
  row "gateway + $n worker(s) x $T thread(s)" "$GPORT"
  if [ "$n" = 1 ]; then
    WADDR=${BACKENDS[1]}
    python3 bench/bench_gateway_latency.py --gateway "127.0.0.1:$GPORT" --worker "$WADDR" \
      > "$TMP/lat.md"
  fi
  kill -TERM "$GPID"; wait "$GPID" 2>/dev/null || true
done
echo
cat "$TMP/lat.md"
