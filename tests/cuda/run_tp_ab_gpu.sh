#!/bin/bash
# run_tp_ab_gpu.sh: saturated-step throughput of kernel switches against the
# shipped defaults, in one call, so every ratio comes from one machine and
# one run.  Builds this tree (build-gpu, labs included); runs lab_attn in
# full (every version against fp64, then the timing cases, which include
# the 65536-token step of 128-token sequences); makes the MiniLM, BERT-base
# and Qwen3-0.6B (28 layers) harnesses; then bench_gpu's BENCH_POINTS under
# each TP_ENVS setting, REPEAT times (default 2) in turn so drift shows.
#   usage: OUT=dir [MODELS="minilm-l6 bert-base qwen3-0.6b"]
#          [TP_ENVS="base: a6:POSY_CUDA_ATTN=6 ..."] [POINTS=...]
#          [LAB_TIMEOUT=200] tests/cuda/run_tp_ab_gpu.sh
# TP_ENVS entries are tag:VAR=value[,VAR=value]; "base:" is the defaults.
# QWEN3_ENVS adds settings for Qwen3 only.  With BASE_SRC (default
# build-base-src: `git archive --prefix=build-base-src/ REV | tar x` here,
# carried) the base tree's bench_gpu runs too, tagged tree-base.  Rows go
# to $OUT/tp/tp.jsonl (tagged), GEMM tuning choices to $OUT/tp/tune-*.log, a table (mean
# tokens/s of the repeats, ratio to base, min-max) to $OUT/tp.log; the
# folder is packed as $OUT/tp.tgz (the device tool returns few files).
# ABLATE="gemm attn norm" also builds bench_gpu with -DENG_CU_ABLATE
# (build-ablate) and times the step without that kind of kernel (tagged
# no-gemm, ...; timing only, outputs wrong): what each kind costs inside a
# saturated step.
. tests/cuda/gpu_lib.sh
gpu_setup tp.log
mkdir -p "$OUT/tp"
BASE_SRC=${BASE_SRC:-build-base-src}
[ -d "$BASE_SRC" ] && gpu_bench_only "$BASE_SRC" build-base &
[ -n "$ABLATE" ] && gpu_bench_only . build-ablate -DENG_CU_ABLATE &
gpu_build "$OUT" || { say "BUILD FAILED"; exit 1; }
wait
[ -z "$ABLATE" ] || [ -x build-ablate/bench_gpu ] || { say "build-ablate: no bench_gpu"; ABLATE=; }
say "build ok$([ -x build-base/bench_gpu ] && echo ", and build-base from $BASE_SRC")"
[ -d "$WORK/bert-base-harness" ] ||
  timeout 150 python3 tests/cuda/e2e_vs_transformers.py --build-only "$BUILD" "$WORK" > "$OUT/tp/enc_build.log" 2>&1 &
MODELS=${MODELS:-minilm-l6 bert-base qwen3-0.6b}
case " $MODELS " in *" qwen3-0.6b "*)
  [ -f "$QWORK/qwen3-causal-harness/dims.txt" ] ||
    timeout 240 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 "$BUILD" "$QWORK" > "$OUT/tp/qwen3_build.log" 2>&1 &
esac
if [ -z "$NO_LAB" ]; then
  timeout "${LAB_TIMEOUT:-200}" "./$BUILD/lab_attn" > "$OUT/tp/lab_attn.log" 2>&1 || status=1
  grep -E "FAIL|bench|lab_attn" "$OUT/tp/lab_attn.log" | tee -a "$LOG"
  say "lab_attn done"
fi
wait
say "harnesses ready"
TP_ENVS=${TP_ENVS:-base: a6:POSY_CUDA_ATTN=6 a7:POSY_CUDA_ATTN=7 c32:POSY_CUDA_GEMM_CANDIDATES=32}
POINTS=${POINTS:-equal128:16384 equal128:65536 random16-512:65536}
point() { # tag harness name env...   (BIN: the bench_gpu to run)
  local tag=$1 h=$2 n=$3
  shift 3
  env "$@" POSY_CUDA_TUNE_LOG=1 BENCH_POINTS="$POINTS" timeout 120 "./${BIN:-$BUILD/bench_gpu}" "$h" "$n" \
    2>>"$OUT/tp/tune-$n-$tag.log" | sed "s/^{/{\"tag\": \"$tag\", /" >> "$OUT/tp/tp.jsonl" || status=1
}
for n in $MODELS; do
  case $n in
  qwen3-0.6b) h=$QWORK/qwen3-causal-harness envs="$TP_ENVS $QWEN3_ENVS" pt=1500000 ;;
  *) h=$WORK/$n-harness envs=$TP_ENVS pt=3000000 ;;
  esac
  for r in $(seq "${REPEAT:-2}"); do
    for te in $envs; do
      BENCH_POINT_TOKENS=$pt point "${te%%:*}" "$h" "$n" $(echo "${te#*:}" | tr , ' ')
    done
    [ -x build-base/bench_gpu ] && BIN=build-base/bench_gpu BENCH_POINT_TOKENS=$pt point tree-base "$h" "$n"
    for k in $ABLATE; do
      [ "$r" = 1 ] && BIN=build-ablate/bench_gpu BENCH_POINT_TOKENS=$pt point "no-$k" "$h" "$n" POSY_CUDA_ABLATE=$k
    done
  done
  say "throughput $n done"
done
python3 - "$OUT/tp/tp.jsonl" <<'EOF' | tee -a "$LOG"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
t, tags = {}, []
for r in rows:
    if r["tag"] not in tags:
        tags.append(r["tag"])
    t.setdefault((r["model"], r["pattern"], r["tokens"]), {}).setdefault(r["tag"], []).append(r["tok_per_s"])
mean = lambda v: sum(v) / len(v)
print("M tokens/s per step (mean of repeats, ratio to base, min-max)")
print(" " * 36 + "".join(f"{b:>26}" for b in tags))
for (m, p, n), v in sorted(t.items()):
    base = mean(v["base"]) if "base" in v else None
    cells = []
    for b in tags:
        if b not in v:
            cells.append(" " * 26)
            continue
        x = [e / 1e6 for e in v[b]]
        ratio = f" ({mean(x) * 1e6 / base:5.3f})" if base and b != "base" else " " * 8
        cells.append(f"{mean(x):7.3f}{ratio} [{min(x):.3f}-{max(x):.3f}]".rjust(26))
    print(f"{m:>11} {p:>13} {n:6d} tok " + "".join(cells))
EOF
tar czf "$OUT/tp.tgz" -C "$OUT" tp
say "run_tp_ab_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
