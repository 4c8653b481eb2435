# Checks shared by onnx_import_test.sh and onnx_user_test.sh (sourced). The caller sets $serf and
# $tmp (where the generators wrote the models) and fail=0; a failed check prints FAIL and sets
# fail=1.

# check_good MODEL ARGS...: `serf model import` of $tmp/MODEL.onnx, then `serf infer` of its input
# with each ARGS against PyTorch's output: max relative error <= 1e-4, top-5 equal.
check_good() {
  local model="$1" args
  shift
  if ! "$serf" model import "$tmp/$model.onnx" --out "$tmp/$model.json" \
      --weights "$tmp/$model.safetensors" > "$tmp/$model.import.txt"; then
    echo "FAIL: import $model"; fail=1; return
  fi
  for args in "$@"; do
    # shellcheck disable=SC2086
    "$serf" infer --model "$tmp/$model.json" --weights "$tmp/$model.safetensors" \
      --input "$tmp/$model.input.safetensors" $args --json > "$tmp/out.json" \
      || { echo "FAIL: infer $model $args"; fail=1; continue; }
    /usr/bin/python3 - "$tmp/out.json" "$tmp/$model.ref.json" "$model ($args)" <<'PY' || fail=1
import json, sys
import numpy as np
e, r = (json.load(open(p)) for p in sys.argv[1:3])
a, b = np.array(e["output"], np.float64), np.array(r["output"], np.float64)
floor = max(1e-3 * np.abs(b).max(), 1e-30)
err = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor)))
top5 = e["top5"] == r["top5"][:len(e["top5"])]
print(f"{sys.argv[3]}: max_relative_error {err:.3g}, top-5 {'equal' if top5 else 'DIFFERENT'}")
sys.exit(0 if err <= 1e-4 and top5 and len(a) == len(b) else 1)
PY
  done
}

# check_bad TSV: each "FILE<TAB>text" of TSV is refused with one line holding the text, exit 2,
# and nothing written.
check_bad() {
  local file want rc
  while IFS=$'\t' read -r file want; do
    rm -f "$tmp/bad.json" "$tmp/bad.safetensors"
    "$serf" model import "$tmp/$file" --out "$tmp/bad.json" --weights "$tmp/bad.safetensors" \
      > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ $rc != 2 ] || [ "$(wc -l < "$tmp/err")" != 1 ] || ! grep -qF -- "$want" "$tmp/err" ||
       [ -e "$tmp/bad.json" ] || [ -e "$tmp/bad.safetensors" ]; then
      echo "FAIL: $file: exit $rc, want '$want', got: $(cat "$tmp/err")"; fail=1
    else
      echo "ok: $file: $(cat "$tmp/err")"
    fi
  done < "$1"
}
