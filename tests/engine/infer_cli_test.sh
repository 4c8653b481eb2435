#!/usr/bin/env bash
# serf infer: a working run (text and --json) and bad input as one line on stderr with exit 2.
set -uo pipefail
serf="$1"; root="$2"
tiny="$root/configs/models/tiny.json"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail=0
expect_error() {  # expect_error "what" "substring" args...
  local what="$1" want="$2"; shift 2
  "$serf" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -q -- "$want" "$tmp/err"; then
    echo "FAIL: $what: rc=$rc, $lines stderr lines: $(cat "$tmp/err")"; fail=1
  else
    echo "ok: $what: $(cat "$tmp/err")"
  fi
}
"$serf" infer --model "$tiny" --repeat 3 >"$tmp/out" || { echo "FAIL: plain run"; fail=1; }
grep -q "^top-5:" "$tmp/out" && grep -q "^conv1 " "$tmp/out" || { echo "FAIL: text output"; cat "$tmp/out"; fail=1; }
"$serf" infer --model "$tiny" --inter-sim 4 --threads 2 --json >"$tmp/json" || { echo "FAIL: json run"; fail=1; }
/usr/bin/python3 - "$tmp/json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["top5"]) == 5 and len(d["output"]) == 10, d
assert [l["name"] for l in d["layers"]][:2] == ["conv1", "relu1"], d["layers"]
assert all(l["ms"] >= 0 for l in d["layers"]) and d["inter"] == 4
print("ok: --json has top5, output, layers")
PY
# --seed S without files is the same request as the files `serf model init --seed S` writes.
"$serf" model init "$tiny" --seed 5 --out "$tmp/w5.safetensors" --input-out "$tmp/x5.safetensors" >/dev/null
"$serf" infer --model "$tiny" --seed 5 --json >"$tmp/seeded.json"
"$serf" infer --model "$tiny" --weights "$tmp/w5.safetensors" --input "$tmp/x5.safetensors" --json >"$tmp/files.json"
/usr/bin/python3 - "$tmp/seeded.json" "$tmp/files.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["output"] == b["output"] and a["top5"] == b["top5"], (a["output"], b["output"])
print("ok: --seed 5 equals the files of serf model init --seed 5")
PY
expect_error "unknown backend" "unknown backend 'tpu'" infer --model "$tiny" --backend tpu
expect_error "threads 0" "--threads 0" infer --model "$tiny" --threads 0
expect_error "inter-sim 0" "--inter-sim 0" infer --model "$tiny" --inter-sim 0
expect_error "inter-sim too large" "exceeds layer 'conv1'" infer --model "$tiny" --inter-sim 9
expect_error "repeat 0" "--repeat 0" infer --model "$tiny" --repeat 0
expect_error "missing model" "$tmp/none.json" infer --model "$tmp/none.json"
"$serf" model init "$root/configs/models/cifar10.json" --seed 1 --out "$tmp/cifar.safetensors" >/dev/null
expect_error "weights of another model" "conv1.weight" infer --model "$tiny" --weights "$tmp/cifar.safetensors"
if ! "$serf" infer --model "$tiny" --backend cuda >/dev/null 2>"$tmp/err"; then
  grep -q "cuda" "$tmp/err" && [[ $(wc -l <"$tmp/err") -eq 1 ]] || { echo "FAIL: cuda error: $(cat "$tmp/err")"; fail=1; }
  echo "ok: --backend cuda: $(cat "$tmp/err")"
fi
exit $fail
