#!/usr/bin/env bash
# serf serve -> serf profile --refresh end to end (issue 17): a service whose node really runs
# slower than its profile says, the run file its self-calibration writes, and the refresh from that
# run. The node is emulated (it sleeps the service time of --emulate SLOW, the K = 1 tuples of
# tests/mpi/emulated_profile.json times 1.5: the machine slowed by half since it was profiled);
# the model starts from OLD (the same tuples as profiled). The run must recalibrate the tuple it
# serves upwards, and the refresh must re-measure exactly that tuple, find it slower than OLD
# (near SLOW's time) and scale the others up by its drift. With SERF, MPIEXEC and DATA set
# (tests/CMakeLists.txt does).
set -uo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$(mktemp -d)"
trap '[ -n "${KEEP_OUT:-}" ] || rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
serf2() { timeout 120 "$MPIEXEC" --oversubscribe -np 2 "$SERF" "$@"; }

/usr/bin/python3 - "$DATA/emulated_profile.json" "$out" <<'PY' || fail "writing the profiles"
import json, sys
p = json.load(open(sys.argv[1]))
p["hardware"] = {"nodes": 1, "cores_per_node": 2}
p["tuples"] = [t for t in p["tuples"] if t["inter"] == 1]
json.dump(p, open(sys.argv[2] + "/old.json", "w"))
# The served tuple (1,1,2) slowed by half. The others are never emulated (the run serves
# (1,1,2) alone and the refresh re-measures it alone): 10x, so a measurement of the wrong tuple
# stands out whatever the machine's load adds to a sleep.
for t in p["tuples"]:
    t["mean_ms"] *= 1.5 if (t["service"], t["intra"]) == (1, 2) else 10
json.dump(p, open(sys.argv[2] + "/slow.json", "w"))
PY

# (1,1,2): 12.5 ms profiled, 18.7 ms served; 30 requests/s keep it near half load. 750 requests
# (25 s): the drift rule's minimum 100 answers, an alarm within a few batches, then its
# confirmation of 10-15 s (docs/calibration.md).
serf2 serve --emulate "$out/slow.json" --profile "$out/old.json" --config 1,1,2 --rate 30 \
  --requests 750 --recalibrate on --out "$out/run.json" >"$out/o" 2>"$out/e" ||
  { cat "$out/o" "$out/e"; fail "serve"; }
grep -E "^(self-calibration|recalibrated|received)" "$out/o"
/usr/bin/python3 - "$out/run.json" <<'PY' || fail "the run's recalibrations"
import csv, json, statistics, sys
run = json.load(open(sys.argv[1]))
recs = run["recalibrations"]
assert recs, "the run saw no drift"
assert {tuple(r["tuple"]) for r in recs} == {(1, 1, 2)}, [r["tuple"] for r in recs]
first = recs[0]
assert first["old_mean_ms"] == 12.487, first
# Upwards: at least most of the slowdown (1.5x); a loaded machine only adds to a sleep.
assert first["new_mean_ms"] / first["old_mean_ms"] >= 1.3, first
# And what this run measured, not the machine's speed: near the run's own dispatch-to-answer
# median (the service time self-calibration observes). A fixed 2.5x of the profile failed at
# load 11-18 (a sleep of 18.7 ms took 31.7 ms); the latency (queueing included) or another
# tuple (10x) would fall outside this band.
rows = list(csv.DictReader(open(sys.argv[1] + ".csv")))
served = [(float(r["done_s"]) - float(r["dispatch_s"])) * 1e3 for r in rows if r["answered"] == "1"]
median = statistics.median(served)
assert 0.7 <= first["new_mean_ms"] / median <= 1.4, (first, median)
model = {tuple(m[:4]): m[4] for m in first["model_mean_ms"]}
assert model[(1, 1, 2, 1)] == first["new_mean_ms"], (model, first)
assert len(model) == 3 and model[(1, 1, 1, 1)] > 21.0, model  # scaled by its drift
print("ok: recalibrated (1,1,2) %.3f -> %.3f ms" % (first["old_mean_ms"], first["new_mean_ms"]))
PY

serf2 profile --emulate "$out/slow.json" --samples 20 --refresh "$out/old.json" \
  --drift "$out/run.json" --out "$out/new.json" >"$out/o" 2>"$out/e" ||
  { cat "$out/o" "$out/e"; fail "refresh"; }
cat "$out/o"
grep -q "re-measured 1 of 3 tuples" "$out/o" || fail "refresh does not say it re-measured 1 of 3"
/usr/bin/python3 - "$out/old.json" "$out/new.json" "$out/run.json" <<'PY' || fail "the refreshed profile"
import json, sys
old, new, run = (json.load(open(f)) for f in sys.argv[1:4])
key = lambda t: (t["service"], t["inter"], t["intra"], t.get("batch", 1))
o = {key(t): t for t in old["tuples"]}
n = {key(t): t for t in new["tuples"]}
fresh = [k for k in n if "refreshed_at" in n[k]]
assert fresh == [(1, 1, 2, 1)], fresh
f = n[(1, 1, 2, 1)]
r = f["mean_ms"] / o[(1, 1, 2, 1)]["mean_ms"]
# Moved with the drift: up, near the slowed node's 18.73 ms (1.5x), not back to the profile's,
# and near what the serve run measured of the same tuple minutes before (the wrong tuple would
# be 10x): a band relative to this machine's own measurement, not a fixed multiple of 12.5 ms.
served = run["recalibrations"][-1]["new_mean_ms"]
assert r >= 1.3 and 0.6 <= f["mean_ms"] / served <= 1.6 and f["samples"] == 20, (r, f, served)
for k in [(1, 1, 1, 1), (2, 1, 1, 1)]:
    assert abs(n[k]["mean_ms"] / o[k]["mean_ms"] - r) <= 1e-9 * r, (k, n[k], o[k], r)
    assert abs(n[k]["drift_scale"] - r) <= 1e-9 * r, (k, n[k])
print("ok: refreshed (1,1,2) %.3f -> %.3f ms (x%.3f; served at %.3f), the others x%.3f"
      % (o[(1, 1, 2, 1)]["mean_ms"], f["mean_ms"], r, run["recalibrations"][-1]["new_mean_ms"], r))
PY
echo "PASS"
