#!/usr/bin/env bash
# `serf simulate` end to end: JSON fields, determinism per seed, exit codes for bad input and
# unstable load. Usage: simulate_cli_test.sh SERF_BINARY PROFILE
# shellcheck source=cli_check.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh" "$1" "$2"
base=(simulate --profile "$profile" --service 4 --inter 1 --intra 2 --requests 100000)
args=("${base[@]}" --rate 100)

out=$("$serf" "${args[@]}" --json); rc=$?
check "stable run exits 0" test "$rc" -eq 0
check "JSON has every field" "$py" -c '
import json, math, sys
d = json.loads(sys.argv[1])
keys = ["latency_ms", "wait_ms", "service_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms",
        "latency_ci95_ms", "requests"]
assert all(k in d and math.isfinite(d[k]) for k in keys), d
assert d["stable"] is True and d["units"] == 4 and d["requests"] == 90000
assert d["p50_ms"] <= d["p90_ms"] <= d["p99_ms"] <= d["p999_ms"]
assert abs(d["latency_ms"] - d["wait_ms"] - d["service_ms"]) < 1e-6
' "$out"
again=$("$serf" "${args[@]}" --json)
check "same seed, same output" test "$out" = "$again"
other=$("$serf" "${args[@]}" --json --seed 2)
check "another seed, another output" test "$out" != "$other"

check "shared semantics and gamma arrivals run" "$serf" "${args[@]}" --semantics shared \
  --arrivals gamma --arrival-scv 4 >/dev/null
out=$("$serf" "${base[@]}" --rate 1000 --json 2>/dev/null); rc=$?
check "unstable load exits 3 (no answer), as in predict, plan and size" test "$rc" -eq 3
check "unstable load says stable: false and no latency" "$py" -c '
import json, sys
d = json.loads(sys.argv[1]); assert d["stable"] is False and "latency_ms" not in d, d' "$out"
err=$("$serf" "${base[@]}" --rate 1000 2>&1 >/dev/null)
check "unstable load is explained" grep -q "unstable load" <<<"$err"
for rate in -1 nan; do
  check_usage_error "bad rate $rate" "${base[@]}" --rate "$rate"
done
for rate in -1 nan; do
  check_usage_error "bad rate $rate" "${base[@]}" --rate "$rate"
done
for bad in "--semantics fast" "--arrivals bursty" "--arrivals gamma" "--arrivals deterministic --arrival-scv 2" "--arrivals poisson --arrival-scv 2" "--seed x" \
           "--requests 10" "--inter 3 --nodes 2" "--service 9"; do
  # shellcheck disable=SC2086
  check_usage_error "bad input '$bad'" "${args[@]}" $bad
done
exit $fail
