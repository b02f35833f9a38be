#!/usr/bin/env bash
# run_latency_trace_gpu: one query's latency on the three benchmark models
# (all-MiniLM-L6, BERT-base, Qwen3-0.6B at 28 layers) with the shipped
# build, then the same queries in a -DENG_CU_TRACE build (build-trace) whose
# chain kernels stamp every block (eng_cu_trace.h), laid out per node by
# dev/cuda/chain_trace.py.  The question it answers: on the one-query path,
# does each chain node wait on its predecessor or on its weights (HBM)?
#
#   OUT=dir bash tests/cuda/run_latency_trace_gpu.sh      (device call)
#
# Knobs: MODELS (default "minilm-l6 bert-base qwen3-0.6b"), REPEAT (latency
# runs per model and setting with the shipped build, default 3), NO_TRACE=1
# skips the trace build, ENVS (default "base:"): settings to compare, each
# TAG:VAR=VALUE[,VAR=VALUE...] (e.g. "base: ln:POSY_CUDA_CHAIN_LN=64"),
# timed and traced in turn.  Files in $OUT: latency_trace.log (summary),
# latency_trace.tgz holding lat/*.jsonl (bench_gpu rows, tagged),
# trace/*.txt (raw stamps) and trace/*.layout (tables), named
# t-TAG-MODEL-TOKENS (GPU_TARGET=bench_gpu
# builds only what the timing needs).  BUILDS="NAME:FLAGS
# ..." (e.g. "early:-DENG_CU_PDL_EARLY") also builds bench_gpu with those
# CUDA flags in build-NAME and times it under every setting (build NAME).  GATE=FILE: before
# timing, wait (up to 400 s) for FILE to exist -- another GPU job started
# beside the build (e.g. run_serve_gpu.sh) finishes first, off the timings.
# TRACE_PREBUILT=1 uses a carried build-trace/bench_gpu instead of building;
# BUILDS_PREBUILT=1 likewise carried build-NAME/bench_gpu for every BUILDS entry.
set -u
cd "$(dirname "$0")/../.."
. tests/cuda/gpu_lib.sh
gpu_setup latency_trace.log
mkdir -p "$OUT/lat" "$OUT/trace"
MODELS=${MODELS:-minilm-l6 bert-base qwen3-0.6b}
[ -n "${NO_TRACE:-}" ] || [ -n "${TRACE_PREBUILT:-}" ] || gpu_bench_only . build-trace -DENG_CU_TRACE &
[ -n "${BUILDS_PREBUILT:-}" ] || for b in ${BUILDS:-}; do gpu_bench_only . "build-${b%%:*}" "${b#*:}" & done
[ -d "$WORK/bert-base-harness" ] ||
  timeout 150 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/lat/enc_build.log" 2>&1 &
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
say "build-gpu ok"
case " $MODELS " in *" qwen3-0.6b "*)
  [ -f "$QWORK/qwen3-causal-harness/dims.txt" ] ||
    timeout 240 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/lat/qwen3_build.log" 2>&1 &
esac
wait
[ -n "${NO_TRACE:-}" ] || [ -x build-trace/bench_gpu ] || { say "build-trace: no bench_gpu (see build-trace.log)"; NO_TRACE=1; }
say "harnesses ready"
if [ -n "${GATE:-}" ]; then
  for _ in $(seq 1 400); do [ -e "$GATE" ] && break; sleep 1; done
  say "gate $GATE: $([ -e "$GATE" ] && echo open || echo "still closed, timing anyway")"
fi
harness() { case $1 in qwen3-0.6b) echo "$QWORK/qwen3-causal-harness" ;; *) echo "$WORK/$1-harness" ;; esac; }
ENVS=${ENVS:-base:}
envs_of() { local e=${1#*:}; echo "${e//,/ }"; }
for m in $MODELS; do
  for r in $(seq 1 "${REPEAT:-3}"); do
    for ev in $ENVS; do
      for b in shipped ${BUILDS:-}; do
        b=${b%%:*}; bin=build-$b; [ "$b" = shipped ] && bin=$BUILD
        [ -x "$bin/bench_gpu" ] || { say "$bin: no bench_gpu"; status=1; continue; }
        env $(envs_of "$ev") BENCH_LATENCY_ONLY=1 POSY_LOG=error timeout 120 "./$bin/bench_gpu" "$(harness "$m")" "$m" \
          2>> "$OUT/lat/$m.err" | sed "s/^{/{\"rep\": $r, \"build\": \"$b\", \"tag\": \"${ev%%:*}\", /" |
          tee -a "$OUT/lat/$m.jsonl" >> "$LOG" || { say "$m ${ev%%:*} $b: bench_gpu failed"; status=1; }
      done
    done
  done
done
say "latency done"
if [ -z "${NO_TRACE:-}" ]; then
  for m in $MODELS; do
    for ev in $ENVS; do
      env $(envs_of "$ev") BENCH_LATENCY_ONLY=1 POSY_LOG=error BENCH_TRACE="$OUT/trace/t-${ev%%:*}" timeout 120 \
        build-trace/bench_gpu "$(harness "$m")" "$m" 2>> "$OUT/trace/$m.err" |
        sed "s/^{/{\"build\": \"trace\", \"tag\": \"${ev%%:*}\", /" | tee -a "$OUT/lat/$m.jsonl" >> "$LOG" ||
        { say "$m ${ev%%:*}: traced bench_gpu failed"; status=1; }
      for f in "$OUT/trace/t-${ev%%:*}-$m-"*.txt; do
        [ -f "$f" ] && python3 dev/cuda/chain_trace.py "$f" > "${f%.txt}.layout" 2>&1
      done
    done
  done
  say "trace done"
fi
# the mean GPU time per model, tokens, build and setting
cat "$OUT"/lat/*.jsonl 2>/dev/null | python3 -c '
import collections, json, sys
d = collections.defaultdict(list)
for l in sys.stdin:
    r = json.loads(l)
    b2b = "/b2b" if r.get("mode", "").endswith("back-to-back") else ""  # queries submitted back to back
    d[(r["model"], r["seq"], r["build"], r.get("tag", "base") + b2b)].append(r["gpu_us"])
for k in sorted(d):
    print("%-11s %3d %-8s %-10s %8.1f us  (%s)" % (*k, sum(d[k]) / len(d[k]), " ".join("%.1f" % x for x in d[k])))
' | tee -a "$LOG"
say "status $status"
# the device tool brings back at most 8 files: rows, stamps and layouts
# travel as one archive (tar xzf latency_trace.tgz)
tar czf "$OUT/latency_trace.tgz" -C "$OUT" lat trace && rm -rf "$OUT/lat" "$OUT/trace"
exit $status
