#!/usr/bin/env bash
# scripts/torch_reference.py builds every shipped model in PyTorch (meta device) and its parameters,
# connections and shapes equal `serf model info --json`. Exit 77 (CTest skip) without torch.
set -euo pipefail
serf="$1"; root="$2"
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "skipped: /usr/bin/python3 has no torch (install python3-torch)"; exit 77
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
# Every model's counts in one Python process: importing torch takes 2-10 s on this machine (10 s
# at load 13), once per model made this test run past its 300 s timeout under load.
pairs=()
for spec in "$root"/configs/models/*.json; do
  info="$tmp/$(basename "$spec" .json).info.json"
  "$serf" model info "$spec" --json > "$info"
  pairs+=("$spec" "$info")
done
/usr/bin/python3 - "$root/scripts" "${pairs[@]}" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import torch_reference  # noqa: E402
args = sys.argv[2:]
failed = 0
for spec, info in zip(args[0::2], args[1::2]):
    with open(spec) as f:
        failed |= torch_reference.check_counts(json.load(f), info)
assert args, "no model checked"
sys.exit(failed)
PY

# The run and --compare paths: seeded files from serf, a run, a compare with itself (error 0) and
# with one value moved by 0.1 % (must fail the 1e-4 tolerance).
spec="$root/configs/models/tiny.json"
"$serf" model init "$spec" --seed 4 --out "$tmp/w.safetensors" --input-out "$tmp/x.safetensors" > /dev/null
ref=(/usr/bin/python3 "$root/scripts/torch_reference.py" "$spec" --weights "$tmp/w.safetensors"
     --input "$tmp/x.safetensors")
"${ref[@]}" --out "$tmp/ref.json"
"${ref[@]}" --compare "$tmp/ref.json"
/usr/bin/python3 - "$tmp/ref.json" "$tmp/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["output"]) == 10 and abs(sum(d["output"]) - 1) < 1e-5, d
d["output"][0] *= 1.001
json.dump(d, open(sys.argv[2], "w"))
PY
if "${ref[@]}" --compare "$tmp/bad.json"; then echo "FAIL: a 1e-3 error passed --compare"; exit 1; fi
echo "ok"
