#!/usr/bin/env bash
# serf profile --refresh (issue 17) on real nodes computing the tiny model: profile, a run whose
# self-calibration recalibrated one tuple, refresh; only that tuple is measured again, the others
# are scaled by its drift (docs/calibration.md, "Refreshing a profile"); bad input is one line and
# exit 2. With SERF, MPIEXEC and ROOT set (tests/CMakeLists.txt does).
set -uo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$(mktemp -d)"
trap '[ -n "${KEEP_OUT:-}" ] || rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
model="$ROOT/configs/models/tiny.json"
serf2() { timeout 120 "$MPIEXEC" --oversubscribe -np 2 "$SERF" "$@"; }
expect_error() {
  local text=$1; shift
  local start=$SECONDS
  serf2 "$@" >"$out/o" 2>"$out/e"
  local rc=$?
  [ $rc -eq 2 ] || { cat "$out/e"; fail "$* -> exit $rc, want 2"; }
  [ "$(grep -c '^serf: error:' "$out/e")" -eq 1 ] || { cat "$out/e"; fail "$*: want exactly one error line"; }
  grep -q -- "$text" "$out/e" || { cat "$out/e"; fail "$*: error does not say '$text'"; }
  [ $((SECONDS - start)) -lt 60 ] || fail "$*: took $((SECONDS - start)) s"
  echo "ok: $* -> $(grep '^serf: error:' "$out/e")"
}

# The old profile: tuples (1,1,1), (2,1,1), (1,1,2) of one node with 2 cores.
serf2 profile --model "$model" --cores-per-node 2 --samples 6 --out "$out/old.json" \
  >"$out/o" 2>"$out/e" || { cat "$out/e"; fail "profile"; }
cat "$out/o"
# A run that recalibrated (2,1,1) twice: what serf serve --out writes (format, model, recalibrations).
/usr/bin/python3 - "$out" <<'PY' || fail "fabricating the runs"
import json, sys
d = sys.argv[1]
old = json.load(open(d + "/old.json"))
m = old["model"]
rec = lambda at, new: {"at_s": at, "tuple": [2, 1, 1], "old_mean_ms": 1.0, "new_mean_ms": new,
                       "samples": 50, "ci95_ms": 0.1, "replan_ms": 0.5}
run = lambda model, recs: {"format": "serf-run/1", "model": model, "requests": [], "switches": [],
                           **({} if recs is None else {"recalibrations": recs})}
json.dump(run(m, [rec(10, 1.2), rec(20, 1.1)]), open(d + "/run.json", "w"))
json.dump(run(m, []), open(d + "/quiet.json", "w"))
json.dump(run(m, None), open(d + "/off.json", "w"))
json.dump(run("cifar10", [rec(10, 1.2)]), open(d + "/other.json", "w"))
bad = run(m, [rec(10, 1.2)]); bad["recalibrations"][0]["tuple"] = [1, 2, 1]
json.dump(bad, open(d + "/absent.json", "w"))
old["model"] = "another"
json.dump(old, open(d + "/another.json", "w"))
PY

serf2 profile --model "$model" --cores-per-node 2 --samples 6 --refresh "$out/old.json" \
  --drift "$out/run.json" --out "$out/new.json" >"$out/o" 2>"$out/e" || { cat "$out/e"; fail "refresh"; }
cat "$out/o"
grep -q "re-measured 1 of 3 tuples" "$out/o" || fail "refresh does not say it re-measured 1 of 3"
/usr/bin/python3 - "$out/old.json" "$out/new.json" <<'PY' || fail "the refreshed profile"
import json, sys
old, new = (json.load(open(f)) for f in sys.argv[1:3])
assert new["format"] == "serf-profile/1" and new["model"] == old["model"]
assert new["hardware"] == old["hardware"]
key = lambda t: (t["service"], t["inter"], t["intra"], t["batch"])
o = {key(t): t for t in old["tuples"]}
n = {key(t): t for t in new["tuples"]}
assert sorted(o) == sorted(n), (sorted(o), sorted(n))
fresh = [k for k in n if "refreshed_at" in n[k]]
assert fresh == [(2, 1, 1, 1)], fresh
f = n[(2, 1, 1, 1)]
assert f["samples"] == 6 and f["mean_ms"] > 0 and "drift_scale" not in f, f
assert f["refreshed_at"].endswith("Z") and "refreshed " + f["refreshed_at"] in new["note"], new["note"]
assert "1 tuple(s) re-measured" in new["note"], new["note"]
# The others: the profiled statistics, the mean scaled by the re-measured tuple's drift (the only
# neighbour: same K and T for (1,1,1), same K for (1,1,2)).
r = f["mean_ms"] / o[(2, 1, 1, 1)]["mean_ms"]
for k in [(1, 1, 1, 1), (1, 1, 2, 1)]:
    a, b = o[k], n[k]
    assert abs(b["mean_ms"] - a["mean_ms"] * r) <= 1e-9 * a["mean_ms"] * r, (k, a, b, r)
    assert b["scv"] == a["scv"] and b["samples"] == a["samples"], (k, a, b)
    assert abs(b["node_ms"] - min(a["node_ms"] * r, b["mean_ms"])) <= 1e-9 * a["mean_ms"], (k, a, b)
    assert abs(b.get("drift_scale", 1) - r) <= 1e-9 * r, (k, b, r)
print("ok: re-measured (2,1,1) x%.4f, the others scaled by it" % r)
PY
# A refreshed profile plans and serves like any other.
"$SERF" predict --profile "$out/new.json" --service 2 --inter 1 --intra 1 --rate 20 --nodes 1 \
  >/dev/null || fail "predict on the refreshed profile"

# Without --drift: the tuples --inter/--batches select (here all of K = 1).
serf2 profile --model "$model" --cores-per-node 2 --samples 4 --refresh "$out/new.json" --inter 1 \
  --out "$out/all.json" >"$out/o" 2>"$out/e" || { cat "$out/e"; fail "refresh --inter 1"; }
grep -q "re-measured 3 of 3 tuples" "$out/o" || { cat "$out/o"; fail "refresh --inter 1: not all 3"; }

# A run that saw no drift: nothing to refresh, exit 0, no file written.
serf2 profile --model "$model" --cores-per-node 2 --refresh "$out/old.json" --drift "$out/quiet.json" \
  --out "$out/none.json" >"$out/o" 2>"$out/e" || { cat "$out/e"; fail "refresh from a quiet run"; }
grep -q "^nothing to refresh: .*quiet.json has no recalibrations" "$out/o" || { cat "$out/o"; fail "no 'nothing to refresh'"; }
[ "$(grep -c 'nothing to refresh' "$out/o")" -eq 1 ] || fail "'nothing to refresh' not said once"
[ ! -e "$out/none.json" ] || fail "a quiet run wrote a profile"
echo "ok: a run with no recalibrations: nothing to refresh, exit 0"

r="$out/old.json"
expect_error "nope.json" profile --model "$model" --cores-per-node 2 --refresh "$r" --drift "$out/nope.json" --out "$out/x.json"
expect_error "/nope/old.json" profile --model "$model" --cores-per-node 2 --refresh /nope/old.json --out "$out/x.json"
expect_error "a run of model \"cifar10\"" profile --model "$model" --cores-per-node 2 --refresh "$r" --drift "$out/other.json" --out "$out/x.json"
expect_error "did not self-calibrate" profile --model "$model" --cores-per-node 2 --refresh "$r" --drift "$out/off.json" --out "$out/x.json"
expect_error "(i=1, K=2, T=1), which the profile does not hold" profile --model "$model" --cores-per-node 2 --refresh "$r" --drift "$out/absent.json" --out "$out/x.json"
expect_error "expected \"serf-run/1\"" profile --model "$model" --cores-per-node 2 --refresh "$r" --drift "$r" --out "$out/x.json"
expect_error "profiled on 1 node(s) x 2 core(s), this run has 1 x 1" profile --model "$model" --cores-per-node 1 --refresh "$r" --drift "$out/run.json" --out "$out/x.json"
expect_error "profiled model \"another\"" profile --model "$model" --cores-per-node 2 --refresh "$out/another.json" --drift "$out/run.json" --out "$out/x.json"
expect_error "--drift: only with --refresh" profile --model "$model" --cores-per-node 2 --drift "$out/run.json" --out "$out/x.json"
expect_error "with --drift the run names the tuples" profile --model "$model" --cores-per-node 2 --refresh "$r" --drift "$out/run.json" --inter 1 --out "$out/x.json"
expect_error "no tuple of" profile --model "$model" --cores-per-node 2 --refresh "$r" --batches 4 --out "$out/x.json"
expect_error "not with --exhaustive" profile --model "$model" --cores-per-node 2 --refresh "$r" --exhaustive --rates 5 --out "$out/x.json"
[ ! -e "$out/x.json" ] || fail "bad input wrote a profile"
echo "PASS"
