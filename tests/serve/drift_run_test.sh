#!/usr/bin/env bash
# scripts/drift-run end to end, short (slow label: about 2 minutes on 2 cores): the real engine
# (imagenet1k, 1 node x 2 cores) served through a background load for 1 minute; the run file,
# the per-window CSV with finite observations and both predictions, the PNG and the goal check's
# line. Whether the goal is met is the long run's question (docs/calibration.md), not this test's.
# With SERF, MPIEXEC and ROOT set (tests/CMakeLists.txt does).
set -uo pipefail
out="$(mktemp -d)"
trap '[ -n "${KEEP_OUT:-}" ] || rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ROOT/scripts/drift-run" --minutes 1 --window 10 --fraction 0.4 --model imagenet1k --out "$out" \
  >"$out/log" 2>&1 || { cat "$out/log"; fail "drift-run exited $?"; }
cat "$out/summary.txt"
grep -q "^goal check: \(MET\|NOT MET\): " "$out/summary.txt" || fail "no goal check line"
[ -s "$out/drift.png" ] || fail "no PNG"
/usr/bin/python3 - "$out" <<'PY' || fail "the run's files"
import csv, json, math, sys
d = sys.argv[1]
run = json.load(open(d + "/serve.json"))
assert run["format"] == "serf-run/1" and "recalibrations" in run
for r in run["recalibrations"]:
    assert len(r["model_mean_ms"]) == 3 and all(m[4] > 0 for m in r["model_mean_ms"]), r
rows = list(csv.DictReader(open(d + "/drift.csv")))
assert len(rows) >= 5, len(rows)  # 60 s in windows of 10 s (the last partial one dropped)
for w in rows:
    assert float(w["observed_ms"]) > 0 and float(w["rate_per_s"]) > 0, w
    assert float(w["uncalibrated_ms"]) > 0 and float(w["recalibrated_ms"]) > 0, w
    assert not math.isnan(float(w["recalibrated_err"])), w
print("ok: %d windows, %d recalibrations" % (len(rows), len(run["recalibrations"])))
PY
# Bad flags: one line, exit 2.
"$ROOT/scripts/drift-run" --minutes 0 >"$out/o" 2>&1; [ $? -eq 2 ] || fail "--minutes 0 not exit 2"
grep -q "^drift-run: --minutes 0" "$out/o" || fail "--minutes 0: $(cat "$out/o")"
"$ROOT/scripts/drift-run" --model nope >"$out/o" 2>&1; [ $? -eq 2 ] || fail "--model nope not exit 2"
echo PASS
