#!/usr/bin/env bash
# CTest onnx_models, the fixture of onnx_import, onnx_user_models and onnx_user_models_b3: both
# generators (scripts/onnx_test_models.py into DIR/import, scripts/onnx_user_models.py into
# DIR/user) in one Python process, so torch and onnx are imported once and the user models made
# once, not three times and twice (on a loaded 2-core host the tests' time is their CPU time times
# the load). The three tests link the files into their own directories (onnx_checks.sh,
# use_models). Without python3-torch / python3-onnx: DIR/skipped holds why, exit 77 (CTest skip).
#   onnx_models.sh DIR ROOT
set -uo pipefail
dir="$1"; root="$2"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
/usr/bin/python3 - "$root/scripts" "$dir" 2> "$dir/gen.err" <<'PY'
import runpy, sys
scripts, out = sys.argv[1:]
for script, sub in (("onnx_test_models.py", "import"), ("onnx_user_models.py", "user")):
    sys.argv = [script, f"{out}/{sub}"]
    try:
        runpy.run_path(f"{scripts}/{script}", run_name="__main__")
    except SystemExit as e:
        if e.code:
            sys.exit(e.code)
PY
rc=$?
if [ $rc = 77 ]; then tail -1 "$dir/gen.err" > "$dir/skipped"; echo "skipped: $(cat "$dir/skipped")"; exit 77; fi
[ $rc = 0 ] || { cat "$dir/gen.err"; echo "FAIL: making the ONNX test models"; exit 1; }
echo "ok: $(ls "$dir/import" | wc -l) files in $dir/import, $(ls "$dir/user" | wc -l) in $dir/user"
