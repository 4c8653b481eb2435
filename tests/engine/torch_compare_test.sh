#!/usr/bin/env bash
# `serf infer --json` equals PyTorch (scripts/torch_reference.py, which builds the same graph from
# the spec) on the same safetensors weights and input: max relative error <= 1e-4, top-5 equal,
# unpartitioned and with K = 3 in-process partitions, T = 1 and 2.
#   torch_compare_test.sh SERF ROOT [MODEL ...]   (default: tiny cifar10 imagenet1k mobilenet_v2)
# Exit 77 (CTest skip) without torch.
set -euo pipefail
serf="$1"; root="$2"; shift 2
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(tiny cifar10 imagenet1k mobilenet_v2)
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "skipped: /usr/bin/python3 has no torch (install python3-torch)"; exit 77
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for model in "${models[@]}"; do
  spec="$root/configs/models/$model.json"
  "$serf" model init "$spec" --seed 42 --out "$tmp/w.safetensors" --input-out "$tmp/x.safetensors" >/dev/null
  for args in "--threads 1" "--threads 2 --inter-sim 3"; do
    # shellcheck disable=SC2086
    "$serf" infer --model "$spec" --weights "$tmp/w.safetensors" --input "$tmp/x.safetensors" $args \
      --json > "$tmp/engine.json"
    echo -n "$model ($args): "
    /usr/bin/python3 "$root/scripts/torch_reference.py" "$spec" --weights "$tmp/w.safetensors" \
      --input "$tmp/x.safetensors" --compare "$tmp/engine.json" --tolerance 1e-4
  done
done
