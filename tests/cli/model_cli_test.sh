#!/usr/bin/env bash
# serf model info / init: real output, and bad input is one line on stderr with exit 2.
set -uo pipefail
serf="$1"; root="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$serf" model info "$root/configs/models/cifar10.json" > "$tmp/table.txt" || fail "info exit $?"
grep -q "^total .* 711,562 *28,559,232 *2.714$" "$tmp/table.txt" || { cat "$tmp/table.txt"; fail "cifar10 totals"; }
"$serf" model info "$root/configs/models/imagenet22k.json" --json > "$tmp/info.json" || fail "info --json"
grep -q '"connections": 2196663680,' "$tmp/info.json" || fail "imagenet22k connections"
grep -q '"weight_bytes": 682871744,' "$tmp/info.json" || fail "imagenet22k weight_bytes"

# Bad input: one line naming the layer, exit 2.
expect_error() {  # expected-substring, then the serf arguments
  local want="$1"; shift
  "$serf" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  [ "$rc" = 2 ] || fail "exit $rc (want 2) for: $*"
  [ "$(wc -l < "$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "not one line: $*"; }
  grep -qF -- "$want" "$tmp/err" || { cat "$tmp/err"; fail "want '$want' for: $*"; }
}
echo '{"name": "x", "input": {"channels": 3, "height": 8, "width": 8}, "layers": [' > "$tmp/bad.json"
expect_error "malformed JSON" model info "$tmp/bad.json"
echo '{"name": "x", "input": {"channels": 3, "height": 8, "width": 8},
       "layers": [{"name": "c1", "type": "conv2d", "out_channels": 4, "kernel": 11}]}' > "$tmp/bad.json"
expect_error "layers[0] (c1): kernel 11 larger than its input 8x8" model info "$tmp/bad.json"
expect_error "cannot open file" model info "$tmp/none.json"

# init writes weights and input that load back; a weights file of another model is refused.
"$serf" model init "$root/configs/models/tiny.json" --seed 3 --out "$tmp/w.safetensors" \
    --input-out "$tmp/x.safetensors" > "$tmp/init.txt" || fail "init"
grep -q "8 tensors" "$tmp/init.txt" || fail "init output: $(cat "$tmp/init.txt")"
[ -s "$tmp/x.safetensors" ] || fail "no input file"
"$serf" model init "$root/configs/models/tiny.json" --seed 3 --out "$tmp/w2.safetensors" > /dev/null
cmp -s "$tmp/w.safetensors" "$tmp/w2.safetensors" || fail "init not deterministic"
# A seed is an unsigned 64-bit integer: negative, past 2^64 - 1 or in exponent form is refused,
# never wrapped or clamped (issue 18).
for bad in -1 18446744073709551616 1e30 1.5; do
  expect_error "--seed: must be an integer in [0, 18446744073709551615] (got $bad)" model init "$root/configs/models/tiny.json" --seed "$bad" --out "$tmp/w3.safetensors"
done
"$serf" model init "$root/configs/models/tiny.json" --seed 18446744073709551615 --out "$tmp/w4.safetensors" >/dev/null \
  || fail "the largest seed, 2^64 - 1, is refused"
expect_error "--out: cannot write $tmp/no/dir/w.safetensors: directory $tmp/no/dir does not exist" model init "$root/configs/models/tiny.json" --out "$tmp/no/dir/w.safetensors"
"$serf" model check "$root/configs/models/tiny.json" --weights "$tmp/w.safetensors" \
    --input "$tmp/x.safetensors" > "$tmp/check.txt" || fail "check"
grep -q "8 tensors, 0.0 MiB, match model tiny" "$tmp/check.txt" || fail "check output: $(cat "$tmp/check.txt")"
expect_error "tensor 'conv1.weight' has shape [8, 3, 3, 3] but model cifar10 needs [64, 3, 5, 5]" \
    model check "$root/configs/models/cifar10.json" --weights "$tmp/w.safetensors"
expect_error "missing tensor 'input'" \
    model check "$root/configs/models/tiny.json" --weights "$tmp/w.safetensors" --input "$tmp/w.safetensors"
echo "ok"
