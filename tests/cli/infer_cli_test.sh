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
expect_error "threads 0 (the alias of --intra)" "--intra: must be an integer in .1, 1024. (got 0)" infer --model "$tiny" --threads 0
expect_error "inter-sim 0" "--inter-sim: must be >= 1 (got 0)" infer --model "$tiny" --inter-sim 0
expect_error "inter-sim too large" "exceeds the widest layer 'fc1'" infer --model "$tiny" --inter-sim 17
echo '{"name": "pools", "input": {"channels": 4, "height": 8, "width": 8},
       "layers": [{"type": "maxpool", "kernel": 2}, {"type": "relu"}]}' >"$tmp/pools.json"
expect_error "inter-sim on a model without conv2d or fully_connected" \
  "--inter-sim 2: inter-node parallelism K = 2: model pools has no conv2d or fully_connected layer to split" \
  infer --model "$tmp/pools.json" --inter-sim 2
# A last layer smaller than K (one score) runs whole on every rank: K = 2 equals K = 1.
echo '{"name": "score", "input": {"channels": 64, "height": 1, "width": 1},
       "layers": [{"name": "h", "type": "fully_connected", "out": 32}, {"type": "relu"},
                  {"name": "s", "type": "fully_connected", "out": 1}]}' >"$tmp/score.json"
"$serf" infer --model "$tmp/score.json" --json >"$tmp/s1.json" || { echo "FAIL: score K=1"; fail=1; }
"$serf" infer --model "$tmp/score.json" --inter-sim 2 --json >"$tmp/s2.json" || { echo "FAIL: score K=2"; fail=1; }
/usr/bin/python3 - "$tmp/s1.json" "$tmp/s2.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p))["output"] for p in sys.argv[1:3])
assert len(a) == 1 and abs(a[0] - b[0]) <= 1e-6 * max(1.0, abs(a[0])), (a, b)
print("ok: one-score model over K = 2 equals K = 1")
PY
# --output-out: the whole output (imagenet22k's 22000 values; --json shows 1000).
"$serf" infer --model "$root/configs/models/cifar10.json" --json --output-out "$tmp/out.safetensors" >"$tmp/c.json" \
  || { echo "FAIL: --output-out run"; fail=1; }
/usr/bin/python3 - "$tmp/c.json" "$tmp/out.safetensors" <<'PY' || fail=1
import json, struct, sys
d = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
head = json.loads(raw[8:8 + n])
t = head["output"]
assert t["dtype"] == "F32" and t["shape"] == [1, 10], t
b, e = t["data_offsets"]
vals = struct.unpack("<10f", raw[8 + n + b:8 + n + e])
assert all(abs(x - y) <= 1e-6 for x, y in zip(vals, d["output"])), (vals, d["output"])
print("ok: --output-out holds the output")
PY
expect_error "--output-out into a missing directory" "--output-out" infer --model "$tiny" --output-out "$tmp/no/dir/o.safetensors"
# --batch b: "outputs" has b rows; row 0 is the batch-1 answer, row 1 the input --seed S + 1 gives
# (the file serf model init --seed 6 --input-out writes) with the weights of --seed 5.
"$serf" infer --model "$tiny" --seed 5 --batch 3 --inter-sim 2 --json >"$tmp/b3.json" || { echo "FAIL: --batch 3 run"; fail=1; }
"$serf" model init "$tiny" --seed 6 --out "$tmp/w6.safetensors" --input-out "$tmp/x6.safetensors" >/dev/null
"$serf" infer --model "$tiny" --weights "$tmp/w5.safetensors" --input "$tmp/x6.safetensors" --json >"$tmp/x6.json"
/usr/bin/python3 - "$tmp/b3.json" "$tmp/seeded.json" "$tmp/x6.json" <<'PY' || fail=1
import json, sys
b, one, six = (json.load(open(p)) for p in sys.argv[1:4])
assert b["batch"] == 3 and len(b["outputs"]) == 3 and b["output"] == b["outputs"][0], b
close = lambda x, y: all(abs(p - q) <= 1e-5 * max(abs(q), 1e-3) for p, q in zip(x, y))
assert close(b["outputs"][0], one["output"]) and close(b["outputs"][1], six["output"]), b
assert b["outputs"][1] != b["outputs"][2]
print("ok: --batch 3 rows equal the rows run alone")
PY
expect_error "batch 0" "--batch: must be an integer in .1, 1024. (got 0)" infer --model "$tiny" --batch 0
expect_error "batch over MPI without mpirun" "run mpirun -np N+1" infer --model "$tiny" --batch 2 --inter 2
expect_error "batch input of 1 row" "tensor 'input' has shape .1, 3, 12, 12. but the model needs .2, 3, 12, 12." infer --model "$tiny" --batch 2 --input "$tmp/x5.safetensors"
expect_error "repeat 0" "--repeat: must be an integer in .1, 1000000. (got 0)" infer --model "$tiny" --repeat 0
expect_error "missing model" "$tmp/none.json" infer --model "$tmp/none.json"
"$serf" model init "$root/configs/models/cifar10.json" --seed 1 --out "$tmp/cifar.safetensors" >/dev/null
expect_error "weights of another model" "conv1.weight" infer --model "$tiny" --weights "$tmp/cifar.safetensors"
if ! "$serf" infer --model "$tiny" --backend cuda >/dev/null 2>"$tmp/err"; then
  grep -q "cuda" "$tmp/err" && [[ $(wc -l <"$tmp/err") -eq 1 ]] || { echo "FAIL: cuda error: $(cat "$tmp/err")"; fail=1; }
  echo "ok: --backend cuda: $(cat "$tmp/err")"
fi
exit $fail
