# Checks shared by onnx_import_test.sh and onnx_user_test.sh (sourced). The caller sets $serf and
# $tmp (where the generators wrote the models) and fail=0; a failed check prints FAIL and sets
# fail=1.

# make_models SUB GENERATOR [ARGS...]: the test models in $tmp. Under CTest the fixture
# onnx_models (onnx_models.sh) made them in $ONNX_MODELS/SUB once for every ONNX test: link them;
# without ONNX_MODELS run GENERATOR (ARGS) into $tmp. Returns 77 (skip) without torch / onnx.
make_models() {
  local sub="$1" generator="$2" rc
  shift 2
  if [ -n "${ONNX_MODELS:-}" ]; then
    [ -e "$ONNX_MODELS/skipped" ] && { echo "skipped: $(cat "$ONNX_MODELS/skipped")"; return 77; }
    [ -d "$ONNX_MODELS/$sub" ] || { echo "FAIL: no models in $ONNX_MODELS/$sub (run onnx_models)"; return 1; }
    ln -s "$ONNX_MODELS/$sub"/* "$tmp"/ || return 1
    return 0
  fi
  /usr/bin/python3 "$generator" "$tmp" "$@" 2> "$tmp/gen.err"
  rc=$?
  [ $rc = 77 ] && { echo "skipped: $(tail -1 "$tmp/gen.err")"; return 77; }
  [ $rc = 0 ] || { cat "$tmp/gen.err"; echo "FAIL: making the test models"; return 1; }
}

# check_good MODEL ARGS...: `serf model import` of $tmp/MODEL.onnx, then `serf infer` of its input
# with each ARGS; the outputs are compared with PyTorch's by compare_all, in one Python process for
# every case (one numpy import: a Python per case cost seconds each under load). ARGS with
# `--batch B`, B > 1, read MODEL.bB.input.safetensors and compare with MODEL.bB.ref.json.
check_good() {
  local model="$1" args n=0 stem
  shift
  if ! "$serf" model import "$tmp/$model.onnx" --out "$tmp/$model.json" \
      --weights "$tmp/$model.safetensors" > "$tmp/$model.import.txt"; then
    echo "FAIL: import $model"; fail=1; return
  fi
  for args in "$@"; do
    n=$((n + 1))
    stem="$tmp/$model"
    [[ " $args " =~ \ --batch\ ([0-9]+)\  ]] && [ "${BASH_REMATCH[1]}" != 1 ] &&
      stem="$tmp/$model.b${BASH_REMATCH[1]}"
    # Passive OpenMP threads: idle ones sleep instead of spinning, which at T = 2 with K = 2
    # partitions on 2 cores cost 3-8x the run's own CPU time (the outputs do not depend on it).
    # shellcheck disable=SC2086
    if OMP_WAIT_POLICY=passive "$serf" infer --model "$tmp/$model.json" --weights "$tmp/$model.safetensors" \
        --input "$stem.input.safetensors" $args --json > "$tmp/$model.out$n.json"; then
      printf '%s\t%s\t%s\n' "$tmp/$model.out$n.json" "$stem.ref.json" "$model ($args)" \
        >> "$tmp/compare.tsv"
    else
      echo "FAIL: infer $model $args"; fail=1
    fi
  done
}

# compare_all: every output check_good recorded against PyTorch's: max relative error <= 1e-4 and
# top-5 equal, for each row of a batch (the reference's "outputs").
compare_all() {
  [ -s "$tmp/compare.tsv" ] || { echo "FAIL: no outputs to compare"; fail=1; return; }
  /usr/bin/python3 - "$tmp/compare.tsv" <<'PY' || fail=1
import json, sys
import numpy as np

def top5(y):
    return [int(i) for i in np.argsort(-y, kind="stable")[:5]]

bad = 0
for line in open(sys.argv[1]):
    out, ref, label = line.rstrip("\n").split("\t")
    e, r = json.load(open(out)), json.load(open(ref))
    rows = r.get("outputs", [r["output"]])
    got = e.get("outputs", [e["output"]])
    ok, worst = len(got) == len(rows), 0.0
    for k, (a, b) in enumerate(zip(got, rows)):
        a, b = np.array(a, np.float64), np.array(b, np.float64)
        if len(a) != len(b):
            ok = False
            continue
        floor = max(1e-3 * np.abs(b).max(), 1e-30)
        worst = max(worst, float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor))))
        same = (e["top5"] == r["top5"][:len(e["top5"])]) if k == 0 else top5(a) == top5(b)
        ok = ok and same
    ok = ok and worst <= 1e-4
    print(f"{label}: max_relative_error {worst:.3g} over {len(rows)} row(s), "
          f"top-5 {'equal' if ok else 'DIFFERENT or error too large'}")
    bad += not ok
sys.exit(1 if bad else 0)
PY
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
