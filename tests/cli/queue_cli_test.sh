#!/usr/bin/env bash
# CLI contract of predict/plan/size/capacity: bad input is one line on stderr naming the problem
# with exit 2; an SLO no cluster meets is exit 3; the commands agree with each other.
# Usage: queue_cli_test.sh SERF_BINARY EXAMPLE_PROFILE
set -uo pipefail
serf="$1"
profile="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# shellcheck source=expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

P=(--profile "$profile")
cfg=(--service 2 --inter 1 --intra 4)

# --- bad input: exit 2, one line naming the problem -------------------------------------------
expect 2 "--rate: must be a finite number > 0 (got 0)" -- predict "${P[@]}" "${cfg[@]}" --rate 0
expect 2 "--rate: must be a finite number > 0 (got -3)" -- predict "${P[@]}" "${cfg[@]}" --rate -3
expect 2 "--rate: must be a finite number > 0 (got inf)" -- predict "${P[@]}" "${cfg[@]}" --rate inf
expect 2 "--rate: must be a finite number > 0 (got nan)" -- predict "${P[@]}" "${cfg[@]}" --rate nan
expect 2 "--rate" -- predict "${P[@]}" "${cfg[@]}" --rate abc
expect 2 "--service: must be >= 1 (got 0)" -- predict "${P[@]}" --service 0 --inter 1 --intra 1 --rate 1
expect 2 "--inter: must be >= 1 (got 0)" -- predict "${P[@]}" --service 1 --inter 0 --intra 1 --rate 1
expect 2 "--intra: must be an integer in [1, 1024] (got -1)" -- predict "${P[@]}" --service 1 --inter 1 --intra -1 --rate 1
expect 2 "needs K = 4 nodes per request but the cluster has 2" -- predict "${P[@]}" --service 1 --inter 4 --intra 1 --rate 1 --nodes 2
expect 2 "needs c*T = 12 threads per node but a node has 8 cores" -- predict "${P[@]}" --service 3 --inter 1 --intra 4 --rate 1
expect 2 "profile has no tuple (i=1, K=3, T=1)" -- predict "${P[@]}" --service 1 --inter 3 --intra 1 --rate 1
expect 2 "--nodes: must be an integer in [1, 1000000] (got 0)" -- predict "${P[@]}" "${cfg[@]}" --rate 1 --nodes 0
expect 2 "unknown queue model 'mg1'" -- predict "${P[@]}" "${cfg[@]}" --rate 1 --queue mg1
expect 2 "cannot open file" -- predict --profile "$tmp/missing.json" "${cfg[@]}" --rate 1
expect 2 "required" -- predict "${P[@]}" --service 1 --inter 1 --rate 1
echo '{"format":"serf-profile/1",' >"$tmp/broken.json"
expect 2 "malformed JSON" -- predict --profile "$tmp/broken.json" "${cfg[@]}" --rate 1
sed 's/serf-profile\/1/serf-profile\/9/' "$profile" >"$tmp/format.json"
expect 2 "format is 'serf-profile/9'" -- predict --profile "$tmp/format.json" "${cfg[@]}" --rate 1
sed '0,/"mean_ms": [0-9.]*/s//"mean_ms": -4/' "$profile" >"$tmp/neg.json"
expect 2 "tuples[0].mean_ms must lie in [1e-6, 1e9] ms" -- predict --profile "$tmp/neg.json" "${cfg[@]}" --rate 1
sed '0,/"scv": [0-9.]*/s//"scv": -1/' "$profile" >"$tmp/scv.json"
expect 2 "tuples[0].scv" -- plan --profile "$tmp/scv.json" --rates 1 --out "$tmp/t.json"
sed 's/"nodes": 20/"nodes": 0/' "$profile" >"$tmp/nodes.json"
expect 2 "hardware.nodes 0 must lie in [1, 1000000]" -- capacity --profile "$tmp/nodes.json" --slo-ms 500
# A cluster no flag may name: simulate made 2^31 - 1 units of it (an allocation beyond memory).
sed 's/"nodes": 20/"nodes": 2147483647/' "$profile" >"$tmp/huge.json"
expect 2 "hardware.nodes 2147483647 must lie in [1, 1000000]" -- simulate --profile "$tmp/huge.json" \
  --service 1 --inter 1 --intra 1 --rate 5
sed 's/"cores_per_node": 8/"cores_per_node": 1025/' "$profile" >"$tmp/cores.json"
expect 2 "hardware.cores_per_node 1025 must lie in [1, 1024]" -- plan --profile "$tmp/cores.json" \
  --rates 1 --out "$tmp/t.json"
sed '0,/"service": 1/s//"service": "one"/' "$profile" >"$tmp/type.json"
expect 2 "tuples[0].service: expected an integer" -- size --profile "$tmp/type.json" --rate 1 --slo-ms 500
expect 2 "--rates: '5:1:1': stop is below start" -- plan "${P[@]}" --rates 5:1:1 --out "$tmp/t.json"
expect 2 "--rates: '1,x': 'x' is not a number" -- plan "${P[@]}" --rates 1,x --out "$tmp/t.json"
expect 2 "--rates: '0:5:1': rate '0' must be finite and > 0" -- plan "${P[@]}" --rates 0:5:1 --out "$tmp/t.json"
expect 2 "cannot write file" -- plan "${P[@]}" --rates 1:5:1 --out "$tmp/no/such/dir/t.json"
expect 2 "--slo-ms: must be a finite number > 0 (got 0)" -- size "${P[@]}" --rate 1 --slo-ms 0
expect 2 "give exactly one of --rate R or --rates SPEC" -- size "${P[@]}" --slo-ms 500
expect 2 "give exactly one of --rate R or --rates SPEC" -- size "${P[@]}" --slo-ms 500 --rate 1 --rates 1,2
expect 2 "--max-nodes: must be an integer in [1, 1000000] (got 0)" -- size "${P[@]}" --rate 1 --slo-ms 500 --max-nodes 0
expect 2 "--slo-ms: must be a finite number > 0 (got -1)" -- capacity "${P[@]}" --slo-ms -1

# --- infeasible: exit 3 with the best latency reachable ----------------------------------------
expect 3 "the best reachable is" -- size "${P[@]}" --rate 5 --slo-ms 100
expect 3 "no configuration is even stable" -- size "${P[@]}" --rate 1000 --slo-ms 500 --max-nodes 4
expect 3 "even at vanishing load" -- capacity "${P[@]}" --slo-ms 100

# --- one rule in one place (issue 13) -----------------------------------------------------------
# validate() of serf/core answers for every command, in the same words.
expect 2 "needs c*T = 12 threads per node but a node has 8 cores" -- simulate "${P[@]}" --service 3 --inter 1 --intra 4 --rate 1
expect 2 "needs K = 4 nodes per request but the cluster has 2" -- simulate "${P[@]}" --service 1 --inter 4 --intra 1 --rate 1 --nodes 2
expect 2 "c = 5000 requests at once, more than 4096" -- predict "${P[@]}" --service 5000 --inter 1 --intra 1 --rate 1
# An unstable load is exit 3 in every command, its result printed first.
expect 3 "unstable load" -- simulate "${P[@]}" "${cfg[@]}" --rate 1000 --requests 2000 --json
grep -q '"stable": false' "$tmp/out" || fail "simulate unstable: no stable false in its JSON"
expect 3 "load levels (from" -- plan "${P[@]}" --rates 10,1000 --out "$tmp/over.json"
[[ -s "$tmp/over.json" ]] || fail "plan with unstable levels did not write its table"
expect 3 "cannot meet the SLO with up to 4 nodes" -- size "${P[@]}" --rates 1000 --slo-ms 500 --max-nodes 4
grep -q "not even stable" "$tmp/out" || fail "size --rates: the unstable row is not marked"
# predict and simulate name the same things alike.
"$serf" predict "${P[@]}" "${cfg[@]}" --rate 10 --json >"$tmp/pj.json" || fail "predict --json"
"$serf" simulate "${P[@]}" "${cfg[@]}" --rate 10 --requests 2000 --json >"$tmp/sj.json" || fail "simulate --json"
/usr/bin/python3 - "$tmp/pj.json" "$tmp/sj.json" <<'PY' || fail "predict and simulate JSON disagree on field names"
import json, sys
p, s = (json.load(open(f)) for f in sys.argv[1:])
for k in ("service", "inter", "intra", "nodes", "units", "rate_per_s", "unit_rate_per_s",
          "stable", "utilization", "latency_ms", "wait_ms", "service_ms"):
    assert k in p and k in s, k
assert (p["service"], p["inter"], p["intra"], p["rate_per_s"]) == (s["service"], s["inter"], s["intra"], s["rate_per_s"])
assert abs(p["utilization"] - s["utilization"]) < 1e-9, (p["utilization"], s["utilization"])
PY
# --intra everywhere; --threads stays an alias in infer.
"$serf" infer --model "$(dirname "$profile")/../models/tiny.json" --intra 2 --json >"$tmp/i1.json" || fail "infer --intra"
"$serf" infer --model "$(dirname "$profile")/../models/tiny.json" --threads 2 --json >"$tmp/i2.json" || fail "infer --threads"
[[ $(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['intra'])" "$tmp/i2.json") == 2 ]] || fail "infer --threads 2 is not T = 2"

# --- consistency on the example profile ---------------------------------------------------------
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

"$serf" predict "${P[@]}" "${cfg[@]}" --rate 10 --json >"$tmp/p.json" || fail "predict --json"
[[ $(json_field '["units"]' <"$tmp/p.json") == 20 ]] || fail "predict: 20 units of K=1"
[[ $(json_field '["unit_rate_per_s"]' <"$tmp/p.json") == 0.5 ]] || fail "predict: unit rate 10/20"
# An unstable load: the result (stable false, no latency) on stdout, one line on stderr, exit 3,
# the same in predict, simulate, plan, size (docs/queueing.md, exit codes).
expect 3 "unstable load: (c=2, K=1, T=4) at 1000 requests/s" -- predict "${P[@]}" "${cfg[@]}" --rate 1000 --json
cp "$tmp/out" "$tmp/u.json"
[[ $(json_field '["stable"]' <"$tmp/u.json") == False ]] || fail "predict: overload is unstable"
[[ $(json_field '["latency_ms"]' <"$tmp/u.json") == None ]] || fail "predict: unstable has null latency"

"$serf" plan "${P[@]}" --rates 1:40:1 --all --out "$tmp/table.json" >"$tmp/plan.txt" || fail "plan"
[[ -f "$tmp/table.csv" && -f "$tmp/table.all.csv" ]] || fail "plan: CSVs beside the table"
[[ $(wc -l <"$tmp/table.csv") == 41 ]] || fail "plan: one CSV row per level"
# The planner's choice at 12/s is what predict says for that configuration.
read -r c k t w < <(json_field '["entries"][11]' <"$tmp/table.json" | /usr/bin/python3 -c \
  "import ast,sys; e=ast.literal_eval(sys.stdin.read()); print(e['service'],e['inter'],e['intra'],e['latency_ms'])")
"$serf" predict "${P[@]}" --service "$c" --inter "$k" --intra "$t" --rate 12 --json >"$tmp/p12.json"
/usr/bin/python3 - "$tmp/p12.json" "$w" <<'PY' || fail "plan and predict disagree at 12/s"
import json, sys
p = json.load(open(sys.argv[1]))
assert abs(p["latency_ms"] - float(sys.argv[2])) < 1e-9 * p["latency_ms"], (p, sys.argv[2])
PY

# Capacity of 20 nodes at a 600 ms SLO; sizing just below it needs <= 20 nodes, just above > 20.
"$serf" capacity "${P[@]}" --slo-ms 600 --json >"$tmp/cap.json" || fail "capacity"
cap=$(json_field '["rate_per_s"]' <"$tmp/cap.json")
[[ $(json_field '["latency_ms"] <= 600' <"$tmp/cap.json") == True ]] || fail "capacity above the SLO"
below=$(/usr/bin/python3 -c "print($cap * 0.999)")
above=$(/usr/bin/python3 -c "print($cap * 1.001)")
"$serf" size "${P[@]}" --rate "$below" --slo-ms 600 --json >"$tmp/s1.json" || fail "size below capacity"
[[ $(json_field '["nodes"] <= 20' <"$tmp/s1.json") == True ]] || fail "size below capacity needs > 20 nodes"
"$serf" size "${P[@]}" --rate "$above" --slo-ms 600 --json >"$tmp/s2.json" || fail "size above capacity"
[[ $(json_field '["nodes"] > 20' <"$tmp/s2.json") == True ]] || fail "size above capacity fits in 20 nodes"
"$serf" size "${P[@]}" --rates 5:40:5 --slo-ms 800 --json >"$tmp/rows.json" || fail "size --rates"
/usr/bin/python3 - "$tmp/rows.json" <<'PY' || fail "size --rates: nodes must not fall as load grows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
nodes = [r["nodes"] for r in rows]
assert len(rows) == 8 and all(r["feasible"] for r in rows), rows
assert nodes == sorted(nodes), nodes
PY
for q in md-interf mm-interf mdc mmc allen-cunneen mdc-exact; do
  "$serf" predict "${P[@]}" "${cfg[@]}" --rate 10 --queue "$q" --json >"$tmp/q.json" || fail "predict --queue $q"
done

# --- inputs found by fuzzing (each once crashed, hung, printed NaN or clobbered a file) ---------
tiny="$(dirname "$profile")/../models/tiny.json"
printf '{"format": "serf-profile/1", "x": 1e999}' >"$tmp/overflow.json"
expect 2 "unreadable JSON" -- predict --profile "$tmp/overflow.json" --service 1 --inter 1 --intra 1 --rate 1
/usr/bin/python3 - "$profile" "$tmp" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for name, field, value in (("scv", "scv", 1e300), ("tiny_mean", "mean_ms", 1e-300), ("huge_mean", "mean_ms", 1e300)):
    q = json.loads(json.dumps(p))
    for t in q["tuples"]:
        t[field] = value
        t.pop("node_ms", None)
    json.dump(q, open("%s/%s.json" % (sys.argv[2], name), "w"))
PY
expect 2 ".scv must lie in" -- predict --profile "$tmp/scv.json" "${cfg[@]}" --rate 1 --percentile 99
expect 2 ".mean_ms must lie in" -- capacity --profile "$tmp/tiny_mean.json" --slo-ms 500 --percentile 99
expect 2 ".mean_ms must lie in" -- simulate --profile "$tmp/huge_mean.json" --service 1 --inter 1 --intra 1 --rate 1
expect 2 "--nodes: must be an integer in [1, 1000000] (got 2147483647)" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 5 --nodes 2147483647
expect 2 "--nodes: must be an integer in [1, 1000000] (got -1)" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 5 --nodes -1
expect 2 "--requests" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 1 --requests 99999999999
expect 2 "--rate: must be a finite number of at least 2.22507e-308 (got 4.9e-324)" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 4.9e-324 --requests 2000
expect 2 "--intra: must be an integer in [1, 1024] (got 100000)" -- infer --model "$tiny" --threads 100000
expect 2 "--repeat: must be an integer in [1, 1000000] (got 2147483647)" -- infer --model "$tiny" --repeat 2147483647
# Flags that used to be taken silently: a negative seed wrapped to 2^64 - 1, a sentinel value given
# on purpose (--nodes 0, --arrival-scv -1, --inter -1) or NaN passing CLI11's range checks.
expect 2 "--seed" -- infer --model "$tiny" --seed -1
# A pad near 2^31 wrapped the output size (UB: the compiler dropped the check); a 1e10-parameter
# layer hung allocating; init writing the input over the weights.
cat >"$tmp/pad.json" <<'JSON'
{"name": "pad", "input": {"channels": 1, "height": 8, "width": 8},
 "layers": [{"name": "conv", "type": "conv2d", "out_channels": 1, "kernel": 3, "stride": 1, "pad": 2147483647}]}
JSON
cat >"$tmp/big.json" <<'JSON'
{"name": "big", "input": {"channels": 1, "height": 1, "width": 100000},
 "layers": [{"name": "flatten", "type": "flatten"}, {"name": "fc", "type": "fully_connected", "out": 100000}]}
JSON
expect 2 "exceeds 1048576 per side" -- model info "$tmp/pad.json"
if [ "$(awk '/MemTotal/ {print $2}' /proc/meminfo)" -lt $((36 * 1024 * 1024)) ]; then  # < 36 GiB
  expect 2 "more than this machine's" -- infer --model "$tmp/big.json"
  expect 2 "more than this machine's" -- model init "$tmp/big.json" --out "$tmp/big.safetensors"
else
  echo "skipped: the 37 GiB model fits in this machine's memory"
fi
expect 2 "the same file as --out" -- model init "$tiny" --out "$tmp/w.safetensors" --input-out "$tmp/w.safetensors"
expect 2 "--inter" -- infer --model "$tiny" --inter -1
expect 2 "--seed" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 5 --seed -1
expect 2 "--nodes" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 5 --nodes 0
expect 2 "--arrival-scv" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 5 --arrivals gamma --arrival-scv -1
expect 2 "--arrival-scv" -- simulate "${P[@]}" --service 1 --inter 1 --intra 1 --rate 5 --arrivals gamma --arrival-scv nan
expect 2 "must name a .png file" -- validate "${P[@]}" --measured "$tmp/none.json" --out "$tmp/v.json" --plot "$tmp/p.txt"
expect 2 "is a directory" -- plan "${P[@]}" --rates 1,5 --out "$tmp"
# Output onto a device writes through it; onto a symlink replaces the link's target, not the link.
mkfifo "$tmp/fifo" && { cat "$tmp/fifo" >"$tmp/fifo.out" & }
"$serf" plan "${P[@]}" --rates 1,5 --out "$tmp/fifo" >/dev/null 2>"$tmp/err" || fail "plan --out FIFO: $(cat "$tmp/err")"
wait
[[ -p "$tmp/fifo" ]] || fail "plan --out FIFO replaced the FIFO with a file"
grep -q '"format"' "$tmp/fifo.out" || fail "plan --out FIFO: nothing came through the FIFO"
: >"$tmp/real.json" && ln -s "$tmp/real.json" "$tmp/link.json"
"$serf" plan "${P[@]}" --rates 1,5 --out "$tmp/link.json" >/dev/null 2>"$tmp/err" || fail "plan --out symlink: $(cat "$tmp/err")"
[[ -L "$tmp/link.json" ]] || fail "plan --out symlink replaced the link"
grep -q '"format"' "$tmp/real.json" || fail "plan --out symlink did not write the link's target"

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all CLI checks passed"
