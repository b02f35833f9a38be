#!/usr/bin/env bash
# Install what posy needs to build, run and test on Debian/Ubuntu:
# the C libraries (Debian packages) and the Python packages the tests and
# the model fetch use.  Idempotent: skips apt when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(build-essential cmake pkg-config git unzip python3 python3-pip
  libjansson-dev libopenblas-dev libopenblas-openmp-dev libpcre2-dev libutf8proc-dev
  libh2o-evloop-dev libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
  clang libclang-rt-14-dev wrk)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check -r requirements-test.txt
