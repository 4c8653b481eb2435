#!/usr/bin/env bash
# CLI contract of batching (--batch): predict/plan/size/capacity/simulate on a profile with
# batched tuples; the table carries b; bad input is one line with exit 2.
# Usage: batch_cli_test.sh SERF_BINARY BATCHED_PROFILE
set -uo pipefail
serf="$1"
profile="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
py=/usr/bin/python3

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE PATTERN -- ARGS...: exit code CODE, exactly one stderr line containing PATTERN.
expect() {
  local code="$1" pattern="$2"
  shift 3
  "$serf" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne $code ]]; then fail "serf $* -> exit $rc, want $code ($(cat "$tmp/err"))"; return; fi
  if [[ $(wc -l <"$tmp/err") -ne 1 ]]; then fail "serf $* -> stderr: $(cat "$tmp/err")"; return; fi
  if ! grep -qF -- "$pattern" "$tmp/err"; then fail "serf $* -> '$(cat "$tmp/err")' lacks '$pattern'"; fi
}

P=(--profile "$profile")
cfg=(--service 2 --inter 1 --intra 4)

# --- bad input ----------------------------------------------------------------------------------
expect 2 "--batch" -- predict "${P[@]}" "${cfg[@]}" --rate 100 --batch 0
expect 2 "--batch" -- plan "${P[@]}" --rates 10 --out "$tmp/t.json" --batch 5000
expect 2 "profile has no tuple (i=1, K=1, T=4, b=3)" -- predict "${P[@]}" "${cfg[@]}" --rate 100 --batch 3
expect 2 "queue model mdc does not model batching" -- plan "${P[@]}" --rates 10 --out "$tmp/t.json" --batch 8 --queue mdc
expect 2 "only the mean latency under Poisson arrivals is modelled" -- plan "${P[@]}" --rates 10 --out "$tmp/t.json" --batch 8 --objective p99
expect 2 "only the mean latency under Poisson arrivals is modelled" -- predict "${P[@]}" "${cfg[@]}" --rate 100 --batch 8 --arrival-scv 4
expect 2 "--max-batch-delay-us needs --batch > 1" -- simulate "${P[@]}" "${cfg[@]}" --rate 100 --max-batch-delay-us 500
expect 2 "start semantics only" -- simulate "${P[@]}" "${cfg[@]}" --rate 100 --batch 8 --semantics shared
expect 2 "profile has no tuple (i=1, K=1, T=4, b=3)" -- simulate "${P[@]}" "${cfg[@]}" --rate 100 --batch 3

# --- predict: b = 1 is today's answer; the batched one carries b and more capacity ---------------
one=$("$serf" predict "${P[@]}" "${cfg[@]}" --rate 200 --json) || fail "predict b=1"
eight=$("$serf" predict "${P[@]}" "${cfg[@]}" --rate 200 --json --batch 8) || fail "predict b=8"
"$py" -c '
import json, sys
one, eight = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert one["batch"] == 1 and eight["batch"] == 8, (one, eight)
assert eight["unit_capacity_per_s"] > 7 * one["unit_capacity_per_s"], (one, eight)
assert one["stable"] and eight["stable"] and eight["latency_ms"] <= one["latency_ms"] * 1.001
' "$one" "$eight" || fail "predict --batch: b in JSON, capacity and latency"
text=$("$serf" predict "${P[@]}" "${cfg[@]}" --rate 200 --batch 8)
grep -q "(c=2, K=1, T=4, b=8)" <<<"$text" || fail "predict prints the configuration with b: $text"
# Beyond the b = 1 capacity, only batches are stable.
over=$("$serf" predict "${P[@]}" "${cfg[@]}" --rate 2000 --json 2>/dev/null)
[[ $? -eq 3 ]] || fail "predict overloaded exits 3"
grep -q '"stable":false' <<<"$over" || fail "b = 1 is unstable at 2000/s: $over"
"$serf" predict "${P[@]}" "${cfg[@]}" --rate 2000 --batch 32 --json | grep -q '"stable":true' ||
  fail "b = 32 carries 2000/s"

# --- plan: the table's entries carry b; --batch 1 never batches ---------------------------------
"$serf" plan "${P[@]}" --rates 100:2400:100 --out "$tmp/t.json" --batch 32 --tail-method model >/dev/null ||
  fail "plan --batch 32"
# b = 1 cannot carry the top levels: the table is written, and the unstable load exits 3.
"$serf" plan "${P[@]}" --rates 100:2400:100 --out "$tmp/one.json" >/dev/null 2>&1
[[ $? -eq 3 ]] || fail "plan b=1 exits 3 (levels beyond its capacity)"
"$py" -c '
import json, sys
t, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
stable = [e for e in t["entries"] if e["stable"]]
assert len(stable) == len(t["entries"]), "batches carry every level"
assert max(e["batch"] for e in stable) > 1, "some level batches"
assert all(e["batch"] == 1 for e in one["entries"] if e["stable"])
assert not one["entries"][-1]["stable"], "b = 1 cannot carry 2400/s"
for a, b in zip(t["entries"], one["entries"]):
    if b["stable"]:
        assert a["latency_ms"] <= b["latency_ms"] * (1 + 1e-9), (a, b)
' "$tmp/t.json" "$tmp/one.json" || fail "plan --batch: entries carry b, never worse than b = 1"
head -1 "$tmp/t.csv" | grep -q "intra,batch,units" || fail "table CSV has a batch column"

# --- capacity and size search b -----------------------------------------------------------------
cap1=$("$serf" capacity "${P[@]}" --slo-ms 20 --json) || fail "capacity b=1"
cap32=$("$serf" capacity "${P[@]}" --slo-ms 20 --json --batch 32 --tail-method model) || fail "capacity b=32"
"$py" -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["batch"] == 1 and b["batch"] > 1 and b["rate_per_s"] > 3 * a["rate_per_s"], (a, b)
' "$cap1" "$cap32" || fail "capacity --batch 32: > 3x the b = 1 capacity within 20 ms"
size=$("$serf" size "${P[@]}" --rate 3000 --slo-ms 20 --batch 32 --tail-method model --json) ||
  fail "size --batch 32"
"$py" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["feasible"] and d["batch"] > 1 and d["latency_ms"] <= 20, d
' "$size" || fail "size --batch: feasible with batches"

# --- simulate --batch: close to the model; the delay holds lone requests -------------------------
sim=$("$serf" simulate "${P[@]}" --service 1 --inter 1 --intra 4 --rate 1200 --batch 8 --requests 200000 --json) ||
  fail "simulate --batch 8"
model=$("$serf" predict "${P[@]}" --service 1 --inter 1 --intra 4 --rate 1200 --batch 8 --json)
"$py" -c '
import json, sys
s, m = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert s["batch"] == 8
assert abs(s["latency_ms"] - m["latency_ms"]) <= 3 * s["latency_ci95_ms"] + 0.01 * m["latency_ms"], (s, m)
' "$sim" "$model" || fail "simulate --batch agrees with the exact c = 1 model"
slow=$("$serf" simulate "${P[@]}" "${cfg[@]}" --rate 4 --batch 8 --max-batch-delay-us 5000 --requests 20000 --json) ||
  fail "simulate --max-batch-delay-us"
"$py" -c '
import json, sys
d = json.loads(sys.argv[1])
assert 4.9 < d["wait_ms"] < 5.1, d
' "$slow" || fail "a lone request waits the max batch delay"

if [[ $failures -gt 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "batch CLI: all checks passed"
