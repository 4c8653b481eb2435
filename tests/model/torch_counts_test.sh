#!/usr/bin/env bash
# scripts/torch_reference.py builds every shipped model in PyTorch (meta device) and its parameters,
# connections and shapes equal `serf model info --json`. Exit 77 (CTest skip) without torch.
set -euo pipefail
serf="$1"; root="$2"
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "skipped: /usr/bin/python3 has no torch (install python3-torch)"; exit 77
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for spec in "$root"/configs/models/*.json; do
  "$serf" model info "$spec" --json > "$tmp/info.json"
  /usr/bin/python3 "$root/scripts/torch_reference.py" "$spec" --check-counts "$tmp/info.json"
done
