#!/bin/bash
# run_ab_gpu.sh: one-query GPU time of this tree against a base tree, in one
# call, so every ratio comes from the same machine and the same run.
#   here:   git archive --prefix=build-base-src/ <rev> | tar x
#   device: OUT=dir [QWEN3=1] [VARIANTS="early ablate"] [GPU_ENVS=...]
#           tests/cuda/run_ab_gpu.sh            (carry build-base-src)
# Builds this tree in full (build-gpu, labs included) and bench_gpu of the
# base tree (build-base) and of each variant of this tree:
#   early   -DENG_CU_PDL_EARLY: every kernel lets its dependents launch
#           before its own wait;
#   ablate  -DENG_CU_ABLATE: the forward without its GEMMs, attention,
#           norms (and Qwen3's q/k norm) in turn, tagged no-gemm etc. --
#           what each kind of kernel costs inside the chain.
# AB_FLAGS="tag:-DFLAG=1 ..." also builds this tree's bench_gpu with those
# CUDA flags (commas join several) and times it tagged tag, e.g.
# "early:-DENG_CU_PDL_EARLY" (an experiment's build-time switch).
# GPU_ENVS="tag:VAR=value ..." also times this tree under each setting
# (tagged gpu-tag), e.g. "l2:POSY_CUDA_CHAIN_L2=2"; commas join several
# settings in one tag: "v3qk:POSY_CUDA_ATTN=3,POSY_CUDA_QK_FUSE=1".
# ABLATE_KINDS (default "gemm attn norm qk") picks the ablations; "wshare"
# gives every layer layer 0's weights (what streaming them from HBM costs).
# Then lab_gemm's few-row checks and timings; LABS (default lab_norm
# lab_pool lab_attn lab_qwen3) with LAB_QUICK; SANITIZE=1 adds
# compute-sanitizer memcheck of lab_gemm and LABS.  Then bench_gpu's
# 16/32/64-token latency, default switches, MiniLM and BERT-base (and
# Qwen3-0.6B, 28 layers, with QWEN3=1), every build REPEAT times (default
# 2) in turn, even repeats in reverse order (ABBA), so drift shows and
# cancels; the GPU_ENVS rows follow the builds in each repeat.  Rows go to
# $OUT/ab_latency.jsonl, tagged with the build; a table (mean of the
# repeats, ratio to base, min-max) to $OUT/ab.log.
set -o pipefail
OUT=${OUT:-out}
BASE_SRC=${BASE_SRC:-build-base-src}
WORK=${WORK:-/tmp/posy-e2e}
QWORK=${QWORK:-/tmp/posy-qwen3}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/ab.log"
. tests/cuda/gpu_lib.sh
status=0
gpu_name
builds="build-gpu"
[ -d "$BASE_SRC" ] && { gpu_bench_only "$BASE_SRC" build-base & builds="build-base $builds"; }
for v in $VARIANTS; do
  case $v in
  early) gpu_bench_only . build-early -DENG_CU_PDL_EARLY & builds="$builds build-early" ;;
  ablate) gpu_bench_only . build-ablate -DENG_CU_ABLATE & ablate=1 ;;
  *) say "unknown variant $v"; exit 2 ;;
  esac
done
for fv in $AB_FLAGS; do # tag:-DFLAG[,-DFLAG2]: this tree's bench_gpu built with those CUDA flags
  gpu_bench_only . "build-${fv%%:*}" "$(echo "${fv#*:}" | tr , ' ')" & builds="$builds build-${fv%%:*}"
done
gpu_build "$OUT" || { say "BUILD FAILED"; status=1; }
wait
for b in $builds; do [ -x "$b/bench_gpu" ] || { say "$b: no bench_gpu"; tail -20 "$OUT/$b.log" 2>/dev/null; status=1; }; done
say "builds done: $builds"
[ -d "$WORK/bert-base-harness" ] ||
  timeout 120 python3 tests/cuda/e2e_vs_transformers.py --build-only build-gpu "$WORK" > "$OUT/enc_build.log" 2>&1 &
if [ -n "$QWEN3" ] && [ ! -f "$QWORK/qwen3-causal-harness/dims.txt" ]; then
  timeout 200 python3 tests/cuda/e2e_qwen3.py --build-only --layers 28 build-gpu "$QWORK" > "$OUT/qwen3_build.log" 2>&1 &
fi
if [ -x build-gpu/lab_gemm ]; then
  LAB_SMALL_ONLY=1 timeout 150 ./build-gpu/lab_gemm > "$OUT/lab_gemm.log" 2>&1 || status=1
  grep -E "FAIL|bench|lab_gemm" "$OUT/lab_gemm.log" | tee -a "$LOG"
  for lab in ${LABS-lab_norm lab_pool lab_attn lab_qwen3}; do
    LAB_QUICK=1 timeout 120 "./build-gpu/$lab" > "$OUT/$lab.log" 2>&1 || status=1
    grep -E "FAIL|^lab_" "$OUT/$lab.log" | tee -a "$LOG"
  done
  if [ -n "$SANITIZE" ] && command -v compute-sanitizer >/dev/null; then
    for lab in lab_gemm ${LABS-lab_norm lab_pool lab_attn lab_qwen3}; do
      LAB_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "./build-gpu/$lab" \
        > "$OUT/$lab.memcheck.log" 2>&1
      rc=$?
      say "memcheck $lab: rc=$rc, $(grep -c Invalid "$OUT/$lab.memcheck.log") invalid accesses"
      [ $rc -ne 0 ] && status=1
    done
  fi
fi
wait
say "lab_gemm and harnesses done"
lat() { # BUILD TAG HARNESS NAME [env...]
  local b=$1 tag=$2 h=$3 n=$4
  shift 4
  [ -x "$b/bench_gpu" ] || return 0
  env "$@" BENCH_LATENCY_ONLY=1 timeout 90 "./$b/bench_gpu" "$h" "$n" 2>>"$OUT/bench_err.log" |
    sed "s/^{/{\"build\": \"$tag\", /" >> "$OUT/ab_latency.jsonl" || status=1
}
models="minilm-l6:$WORK/minilm-l6-harness bert-base:$WORK/bert-base-harness"
[ -n "$QWEN3" ] && models="$models qwen3-0.6b:$QWORK/qwen3-causal-harness"
for mh in $models; do
  n=${mh%%:*} h=${mh#*:}
  for r in $(seq "${REPEAT:-2}"); do
    # odd repeats in the listed order, even ones reversed (ABBA), so a
    # drift over the run does not favour the build that always runs first
    order=$builds
    [ $((r % 2)) -eq 0 ] && order=$(echo $builds | tr ' ' '\n' | tac | tr '\n' ' ')
    for b in $order; do lat "$b" "${b#build-}" "$h" "$n"; done
    for te in $GPU_ENVS; do lat build-gpu "gpu-${te%%:*}" "$h" "$n" $(echo "${te#*:}" | tr , ' '); done
    if [ -n "$ablate" ]; then
      for k in ${ABLATE_KINDS:-gemm attn norm $([ "$n" = qwen3-0.6b ] && echo qk)}; do
        [ "$k" = qk ] && [ "$n" != qwen3-0.6b ] && continue
        lat build-ablate "no-$k" "$h" "$n" POSY_CUDA_ABLATE=$k
      done
    fi
  done
  say "latency $n done"
done
python3 - "$OUT/ab_latency.jsonl" <<'EOF' | tee -a "$LOG"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if r.get("mode") == "posy-cuda-graph"]  # not the back-to-back rows
t = {}
for r in rows:
    t.setdefault((r["model"], r["seq"]), {}).setdefault(r["build"], []).append(r["gpu_us"])
builds = sorted({r["build"] for r in rows})
mean = lambda v: sum(v) / len(v)
print("GPU us per query (mean of repeats, ratio to base, min-max)")
print(" " * 17 + "  ".join(f"{b:>26}" for b in builds))
for (m, s), v in sorted(t.items()):
    base = mean(v["base"]) if "base" in v else None
    cells = []
    for b in builds:
        if b not in v:
            cells.append(" " * 26)
            continue
        x = v[b]
        ratio = f" ({mean(x) / base:4.2f})" if base and b != "base" else " " * 7
        cells.append(f"{mean(x):7.1f}{ratio} [{min(x):.0f}-{max(x):.0f}]".rjust(26))
    print(f"{m:>11} {s:3d} tok" + "  ".join(cells))
EOF
say "run_ab_gpu: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
