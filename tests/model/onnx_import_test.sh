#!/usr/bin/env bash
# serf model import on small ONNX models made at test time (scripts/onnx_test_models.py): every
# supported operator imports and runs like PyTorch (max relative error <= 1e-4, top-5 equal;
# unpartitioned and over K = 2, 3; batch 1 and 3, every row compared), and every bad model is one
# line, exit 2, nothing written.
# onnx_user_test.sh does the same for models a user might export.
# The models: $ONNX_MODELS/import when set (CTest's fixture onnx_models), else made here.
# Exit 77 (CTest skip) without python3-torch / python3-onnx.
set -uo pipefail
serf="$1"; root="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$root/tests/model/onnx_checks.sh"
make_models import "$root/scripts/onnx_test_models.py" || exit $?
fail=0
for model in every_op helper opset10 pads gates gates14 shuffle; do
  check_good "$model" "--threads 1" "--threads 1 --batch 3" "--threads 2 --inter-sim 2" \
    "--threads 2 --inter-sim 2 --batch 3" "--threads 1 --inter-sim 3 --batch 3"
done
compare_all
grep -q "2 batchnorms folded" "$tmp/every_op.import.txt" || { cat "$tmp/every_op.import.txt"; echo "FAIL: folding"; fail=1; }
grep -q "2 pads into the layer after, .* 2 views and no-ops dropped" "$tmp/pads.import.txt" ||
  { cat "$tmp/pads.import.txt"; echo "FAIL: pads not folded"; fail=1; }
grep -q "3 gates fused into silu/hardswish" "$tmp/gates.import.txt" ||
  { cat "$tmp/gates.import.txt"; echo "FAIL: the summary does not count the fused gates"; fail=1; }
grep -q '"type": "batchnorm"' "$tmp/every_op.json" || { echo "FAIL: the batchnorm after the add is not kept"; fail=1; }
# gates: SiLU and hardswish fused (two silu, one hardswish), the Sigmoid read twice and the
# squeeze-and-excitation's HardSigmoid kept, four mul layers (two scales, two of equal shapes;
# the Mul by a constant folded into the Conv); gates14: HardSwish, HardSigmoid 0.2/0.4 kept.
# shuffle: three channel_shuffle layers (groups 2, 2, 3), two Slices and a Split's two outputs as
# four slice layers, three concats. The fused silu layers take the Mul's names.
/usr/bin/python3 - "$tmp/gates.json" "$tmp/gates14.json" "$tmp/shuffle.json" <<'PY' || { echo "FAIL: gates/shuffle layers"; fail=1; }
import collections, json, sys
layers = json.load(open(sys.argv[1]))["layers"]
silu = [l["name"] for l in layers if l["type"] == "silu"]
print(f"silu layers: {silu}")
if not silu or any("sigmoid" in n.lower() or "mul" not in n.lower() for n in silu):
    sys.exit(1)
shuffles = [l["groups"] for l in json.load(open(sys.argv[3]))["layers"]
            if l["type"] == "channel_shuffle"]
print(f"channel_shuffle groups: {shuffles}")
if shuffles != [2, 2, 3]:
    sys.exit(1)
for path, want in zip(sys.argv[1:], [{"silu": 2, "hardswish": 1, "sigmoid": 2, "hardsigmoid": 1,
                                      "mul": 4}, {"hardswish": 1, "hardsigmoid": 1, "mul": 1},
                                     {"channel_shuffle": 3, "slice": 4, "concat": 3}]):
    kinds = collections.Counter(l["type"] for l in json.load(open(path))["layers"])
    got = {k: kinds[k] for k in want}
    print(f"{path.split('/')[-1]}: {got}")
    if got != want:
        sys.exit(1)
PY
# scripts/torch_reference.py builds slice and channel_shuffle from the imported spec alike.
"$serf" infer --model "$tmp/shuffle.json" --weights "$tmp/shuffle.safetensors" \
  --input "$tmp/shuffle.input.safetensors" --json > "$tmp/out.json" &&
  /usr/bin/python3 "$root/scripts/torch_reference.py" "$tmp/shuffle.json" \
    --weights "$tmp/shuffle.safetensors" --input "$tmp/shuffle.input.safetensors" \
    --compare "$tmp/out.json" --tolerance 1e-4 ||
  { echo "FAIL: torch_reference.py on the shuffle spec"; fail=1; }
"$serf" model info "$tmp/every_op.json" > /dev/null || { echo "FAIL: model info on an import"; fail=1; }

# Bad models: one line naming the problem, exit 2, nothing written.
check_bad "$tmp/bad.tsv"
# Bad arguments.
"$serf" model import "$tmp/every_op.onnx" --out "$tmp/x.json" --weights "$tmp/x.json" 2> "$tmp/err"
[ $? = 2 ] && grep -q "is the same file as --out" "$tmp/err" || { echo "FAIL: same --out and --weights"; fail=1; }
# The same file spelled two ways: the weights were written, then the spec over them.
"$serf" model import "$tmp/every_op.onnx" --out "$tmp/y.json" --weights "$tmp/./y.json" 2> "$tmp/err"
[ $? = 2 ] && grep -q "is the same file as --out" "$tmp/err" && [ ! -e "$tmp/y.json" ] ||
  { echo "FAIL: --out and --weights the same file spelled two ways"; fail=1; }
"$serf" model import "$tmp/none.onnx" --out "$tmp/x.json" --weights "$tmp/x.safetensors" 2> "$tmp/err"
[ $? = 2 ] && grep -q "cannot open file" "$tmp/err" || { echo "FAIL: missing file: $(cat "$tmp/err")"; fail=1; }
"$serf" model import "$tmp" --out "$tmp/x.json" --weights "$tmp/x.safetensors" 2> "$tmp/err"
[ $? = 2 ] && grep -q "is a directory" "$tmp/err" || { echo "FAIL: directory: $(cat "$tmp/err")"; fail=1; }
[ $fail = 0 ] && echo "ok"
exit $fail
