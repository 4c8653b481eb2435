#!/usr/bin/env bash
# Tail and bursty flags of predict/plan/size/capacity end to end. Usage: tail_cli_test.sh SERF PROFILE
# shellcheck source=cli_check.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh" "$1" "$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { "$py" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

cfg=(--profile "$profile" --service 2 --inter 2 --intra 4)
out=$("$serf" predict "${cfg[@]}" --rate 10 --percentile 99 --json)
check "predict --percentile 99 gives a p99 above the mean" "$py" -c '
import json, sys
d = json.loads(sys.argv[1]); assert d["score_ms"] > d["latency_ms"] > 0 and d["objective"] == "p99", d
assert d["simulated"] is False' "$out"
poisson=$(field "$("$serf" predict "${cfg[@]}" --rate 10 --json)" wait_ms)
bursty=$(field "$("$serf" predict "${cfg[@]}" --rate 10 --arrival-scv 4 --json)" wait_ms)
# 10 units: the unit SCV is 4/10 + 0.9 = 1.3, the wait factor (1.3 + cs2) / (1 + cs2) > 1.
check "predict --arrival-scv 4 raises the wait" "$py" -c "assert $bursty > $poisson * 1.2"
out=$("$serf" predict "${cfg[@]}" --rate 10 --percentile 99 --arrival-scv 40 --json)
check "predict in the poor region is simulated" test "$(field "$out" simulated)" = True
out=$("$serf" predict "${cfg[@]}" --rate 10 --percentile 99 --arrival-scv 40 --tail-method model --json)
check "--tail-method model never simulates" test "$(field "$out" simulated)" = False

check "plan --objective p99 writes a p99 table" "$serf" plan --profile "$profile" --rates 2:20:2 \
  --objective p99 --tail-method model --out "$tmp/t.json" >/dev/null
check "the table names its objective" "$py" -c '
import json, sys
t = json.load(open(sys.argv[1])); assert t["objective"] == "p99", t["objective"]
assert all(e["score_ms"] > e["latency_ms"] for e in t["entries"] if e["stable"])' "$tmp/t.json"

mean_nodes=$(field "$("$serf" size --profile "$profile" --rate 20 --slo-ms 2500 --json)" nodes)
p99_nodes=$(field "$("$serf" size --profile "$profile" --rate 20 --slo-ms 2500 --percentile 99 --json)" nodes)
check "a p99 SLO needs at least the nodes of a mean SLO ($p99_nodes >= $mean_nodes)" \
  test "$p99_nodes" -ge "$mean_nodes"
mean_cap=$(field "$("$serf" capacity --profile "$profile" --slo-ms 2500 --json)" rate_per_s)
p99_cap=$(field "$("$serf" capacity --profile "$profile" --slo-ms 2500 --percentile 99 --json)" rate_per_s)
check "a p99 SLO sustains less load ($p99_cap < $mean_cap)" "$py" -c "assert $p99_cap < $mean_cap"

# The capacity search stops at the simulations' own precision: bisected to 1e-13 it simulated
# 987 evaluations (155 s at load 17) for this question; 224 at a relative tolerance of 1e-3.
toy="$(dirname "${BASH_SOURCE[0]}")/data/toy_profile.json"
note=$("$serf" capacity --profile "$toy" --slo-ms 1000 --percentile 99 | grep simulated)
check "capacity --percentile 99 simulates at most 300 evaluations ($note)" "$py" -c '
import re, sys
n = int(re.search(r"note: (\d+) evaluation", sys.argv[1]).group(1)); assert 0 < n <= 300, n' "$note"

for bad in "plan --rates 1:4:1 --out $tmp/x.json --objective q99" \
           "plan --rates 1:4:1 --out $tmp/x.json --objective p100" \
           "size --rate 5 --slo-ms 3000 --percentile 100" \
           "capacity --slo-ms 3000 --arrival-scv -1" \
           "capacity --slo-ms 3000 --percentile 99 --tail-method exact"; do
  # shellcheck disable=SC2086
  check_usage_error "bad input '$bad'" $bad --profile "$profile"
done
exit $fail
