#!/usr/bin/env bash
# gpu-bundle: build `posy` (Release, CUDA) here and pack what a GPU machine
# without posy's build dependencies needs to serve with it, into .carry/gpu/
# (git-ignored; name `.carry` in the device call's carry).
#
# The GPU machine (Ubuntu 24.04, glibc 2.39, CUDA 13 driver, cudart and
# cuBLAS) has no h2o, gRPC, protobuf-c, utf8proc, OpenBLAS, jansson or wrk
# that we can count on, and no internet.  Binaries built here (Debian 12,
# glibc 2.36, CUDA 13.0) run there when the shared libraries they need
# travel with them, except those the machine provides itself: glibc,
# libstdc++, libgcc_s and the CUDA driver, runtime and cuBLAS(Lt).
#
# .carry/gpu/
#   bin/posy bin/api_embed bin/wrk   stripped, no RUNPATH
#   libs.tar.xz                      every other shared library they load
#                                    (xz: OpenBLAS alone is 36 MB unpacked)
#   model/                           all-MiniLM-L6-v2's tokenizer and
#                                    config files (not the weights)
#   MANIFEST.txt                     what was built from which commit
# tests/cuda/run_serve_gpu.sh unpacks libs.tar.xz to /tmp and runs the
# binaries with LD_LIBRARY_PATH=<that>:<the CUDA library folders>.
#
#   scripts/gpu-bundle.sh            (BUILD=build-bundle JOBS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD:-build-bundle}
JOBS=${JOBS:-2}
MODEL=${POSY_MODEL:-models/all-MiniLM-L6-v2}
DEST=.carry/gpu
LIMIT_MIB=60

command -v wrk >/dev/null || { echo "gpu-bundle: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -f "$MODEL/tokenizer.json" ] || { echo "gpu-bundle: $MODEL/tokenizer.json missing (scripts/fetch-model.sh)" >&2; exit 1; }

echo "gpu-bundle: building posy and api_embed in $BUILD (Release, CUDA) ..."
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPOSY_CUDA=ON -DCMAKE_SKIP_RPATH=ON >"$BUILD/gpu-bundle.cmake.log" 2>&1 \
  || { tail -30 "$BUILD/gpu-bundle.cmake.log"; echo "gpu-bundle: cmake failed" >&2; exit 1; }
cmake --build "$BUILD" -j"$JOBS" --target posy api_embed >"$BUILD/gpu-bundle.build.log" 2>&1 \
  || { grep -E "error|Error" "$BUILD/gpu-bundle.build.log" | head -30; echo "gpu-bundle: build failed" >&2; exit 1; }

# Libraries the GPU machine has itself (or must have: the CUDA ones).
device_provided() {
  case "$1" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libutil.so*|libresolv.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*) return 0 ;;
  esac
  return 1
}

rm -rf "$DEST" "$BUILD/bundle-lib"
mkdir -p "$DEST/bin" "$DEST/model/1_Pooling" "$BUILD/bundle-lib"
for b in "$BUILD/posy" "$BUILD/api_embed" "$(command -v wrk)"; do
  cp "$b" "$DEST/bin/"
  strip --strip-unneeded "$DEST/bin/$(basename "$b")"
done
needs=""
for b in "$DEST"/bin/*; do
  # "name => /path (addr)"; "not found" here means the build machine itself lacks it
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if device_provided "$name"; then needs="$needs $name"; continue; fi
    [ "$path" = "not" ] && { echo "gpu-bundle: $b needs $name, not found here" >&2; exit 1; }
    [ -f "$BUILD/bundle-lib/$name" ] || cp -L "$path" "$BUILD/bundle-lib/$name"
  done < <(ldd "$b")
done
strip --strip-unneeded "$BUILD"/bundle-lib/* 2>/dev/null || true
XZ_OPT="-6 -T$JOBS" tar -C "$BUILD/bundle-lib" -cJf "$DEST/libs.tar.xz" .

for f in tokenizer.json tokenizer_config.json config.json modules.json sentence_bert_config.json \
         config_sentence_transformers.json 1_Pooling/config.json; do
  [ -f "$MODEL/$f" ] && cp "$MODEL/$f" "$DEST/model/$f"
done

# Self-contained apart from what the device provides: unpack as the device
# will, and require every other library to resolve inside the bundle.
check="$BUILD/bundle-check"
rm -rf "$check"; mkdir -p "$check"
tar -C "$check" -xJf "$DEST/libs.tar.xz"
bad=0
for b in "$DEST"/bin/*; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    device_provided "$name" && continue
    case "$path" in
      "$PWD/$check"/*|"$check"/*) ;;
      *) echo "gpu-bundle: $(basename "$b"): $name resolves to $path, outside the bundle" >&2; bad=1 ;;
    esac
  done < <(LD_LIBRARY_PATH="$PWD/$check" ldd "$b")
  if LD_LIBRARY_PATH="$PWD/$check" ldd "$b" | grep -q "not found"; then
    LD_LIBRARY_PATH="$PWD/$check" ldd "$b" | grep "not found" >&2; bad=1
  fi
done
[ $bad -eq 0 ] || { echo "gpu-bundle: FAILED: the bundle is not self-contained" >&2; exit 1; }

dev_needs=$(echo $needs | tr ' ' '\n' | grep -v -E '^(linux-vdso|ld-linux)' | sort -u | tr '\n' ' ')
{
  echo "posy GPU bundle"
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- src CMakeLists.txt || echo ' (+ uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "nvcc: $(nvcc --version | tail -2 | head -1)"
  echo "the device must provide: $dev_needs"
  echo "bundled libraries: $(ls "$BUILD/bundle-lib" | tr '\n' ' ')"
  echo "files:"
  (cd "$DEST" && find . -type f ! -name MANIFEST.txt -printf '  %p %s\n' | sort)
} > "$DEST/MANIFEST.txt"

size=$(du -sb "$DEST" | cut -f1)
unpacked=$(du -sb "$check" | cut -f1)
printf "gpu-bundle: %s is %.1f MiB (libraries unpack to %.1f MiB); the device must provide: %s\n" \
  "$DEST" "$(echo "$size / 1048576" | bc -l)" "$(echo "$unpacked / 1048576" | bc -l)" "$dev_needs"
if [ "$size" -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "gpu-bundle: FAILED: over ${LIMIT_MIB} MiB" >&2
  exit 1
fi
echo "gpu-bundle: ok (device call: carry [\".carry\"], command 'OUT=\$OUT bash tests/cuda/run_serve_gpu.sh')"
