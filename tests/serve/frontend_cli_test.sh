#!/usr/bin/env bash
# `serf serve --http` end to end under mpiexec. Usage: frontend_cli_test.sh CASE, with SERF,
# MPIEXEC, ROOT and PROMTOOL set (tests/CMakeLists.txt does). Cases:
#   http_emulated  every endpoint, bad requests, /metrics through promtool, SIGTERM to rank 0
#   http_overload  503 (queue full), 504 (timeout), SIGUSR1 through mpirun, the accounting line
#   infer_equal    the HTTP and gRPC answers equal `serf infer` for the same input (cifar10,
#                  K = 1 and 2); GRPC_CLIENT empty (a build without gRPC): HTTP only
#   table_ahead    a table served on cifar10 with --prepare-ahead on (every switch held) and off
#                  (a first switch cold): the same switches and answers
#   ahead_memory   --ahead-memory-mb below what the whole table needs: the nodes fall back (one
#                  stderr line each), the rest prepared at its first switch; the same switches
#                  and answers as without the budget
source "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
fail() { echo "FAIL: $*"; [ -f "$out/o" ] && cat "$out/o" "$out/e"; exit 1; }
client() { /usr/bin/python3 "$ROOT/tests/serve/kserve_client.py" "$@"; }
profile="$ROOT/tests/mpi/emulated_profile.json"

# start_http NP ARGS...: start (serve_lib.sh) with an HTTP front end on a free port.
start_http() {
  local np=$1; shift
  start "$np" --http 127.0.0.1:0 "$@"
}

case "$1" in
  http_emulated)
    start_http 3 --emulate "$profile" --model "$ROOT/configs/models/tiny.json" --out "$out/run.json"
    client check "$URL" tiny || fail "client check"
    curl -sf "$URL/metrics" >"$out/metrics.txt" || fail "GET /metrics"
    "$PROMTOOL" check metrics <"$out/metrics.txt" || fail "promtool check metrics"
    grep -q '^serf_requests_total{outcome="answered"} 2$' "$out/metrics.txt" || fail "answered counter"
    grep -q '^serf_invalid_requests_total{protocol="http"} 4$' "$out/metrics.txt" || fail "invalid counter"
    grep -q '^serf_configuration{service="1",inter="1",intra="1",batch="1"} 1$' "$out/metrics.txt" || fail "configuration gauge"
    grep -q '^serf_predicted_mean_latency_seconds 0\.0' "$out/metrics.txt" || fail "no prediction"
    # The p99 beside the mean: observed over the window, predicted by the tail approximation (and
    # never below the predicted mean).
    grep -q '^serf_observed_p99_latency_seconds 0\.' "$out/metrics.txt" || fail "no observed p99"
    awk '$1 == "serf_predicted_mean_latency_seconds" { m = $2 } $1 == "serf_predicted_p99_latency_seconds" { p = $2 }
         END { exit !(p > 0 && p >= m) }' "$out/metrics.txt" || fail "predicted p99 missing or below the mean"
    echo "ok: /metrics passes promtool check metrics"
    kill -TERM "$RANK0"
    finish
    [ $RC -eq 0 ] || fail "exit $RC after SIGTERM to rank 0 (want 0)"
    read -r r a j t f <<<"$(accounting)"
    [ "$r" = 2 ] && [ "$a" = 2 ] && [ "$j" = 0 ] || fail "accounting: $(accounting)"
    [ "$(grep -c '"answered": true' "$out/run.json")" -eq 2 ] || fail "--out holds 2 answered requests"
    echo "ok: SIGTERM to rank 0 drained and stopped: $(grep '^received' "$out/o")"
    ;;
  http_overload)
    # c = 1 on 2 emulated nodes (21 ms a request), no waiting room: most of 16 concurrent
    # requests find their unit busy (503); with room, requests waiting past 5 ms end 504.
    start_http 3 --emulate "$profile" --max-queue 0
    counts=$(client overload "$URL" emulated-small 16 5000) || fail "client overload"
    echo "$counts"
    [[ $counts != *reset* ]] || fail "connections reset by the server: $counts"
    kill -USR1 "$server_pid"  # mpirun forwards SIGUSR1 to every rank: rank 0 drains
    finish
    [ $RC -eq 0 ] || fail "exit $RC after SIGUSR1 to mpirun (want 0)"
    read -r r a j t f <<<"$(accounting)"
    [ "$r" -eq 32 ] && [ $((a + j + t + f)) -eq 32 ] || fail "accounting: $(accounting)"
    [ "$j" -ge 1 ] || fail "no request rejected: $(accounting)"
    /usr/bin/python3 -c "import json,sys; c=json.loads(sys.argv[1]); \
      assert c.get('200',0)==$a and c.get('503',0)==$j and c.get('504',0)==$t, c" "$counts" \
      || fail "the client's statuses $counts differ from rank 0's $(accounting)"
    echo "ok: SIGUSR1 through mpirun: $(grep '^received' "$out/o")"
    start_http 3 --emulate "$profile" --max-queue 100
    counts=$(client overload "$URL" emulated-small 16 5000) || fail "client overload"
    echo "$counts"
    [[ $counts != *reset* ]] || fail "connections reset by the server: $counts"
    kill -TERM "$RANK0"
    finish
    read -r r a j t f <<<"$(accounting)"
    [ "$t" -ge 1 ] && [ "$j" -eq 0 ] && [ $((a + t)) -eq 32 ] || fail "accounting: $(accounting)"
    echo "ok: timeouts: $(grep '^received' "$out/o")"
    ;;
  infer_equal)
    model="$ROOT/configs/models/cifar10.json"
    "$SERF" model init "$model" --seed 3 --out "$out/w.safetensors" --input-out "$out/x.safetensors" >/dev/null \
      || fail "model init"
    "$SERF" infer --model "$model" --weights "$out/w.safetensors" --input "$out/x.safetensors" --json \
      >"$out/infer.json" || fail "serf infer"
    grpc=()
    [ -n "${GRPC_CLIENT:-}" ] && grpc=(--grpc 127.0.0.1:0)
    for k in 1 2; do
      start_http $((k + 1)) --model "$model" --weights "$out/w.safetensors" --cores-per-node 1 \
        --config "1,$k,1" "${grpc[@]}"
      client infer "$URL" cifar10 "$out/x.safetensors" "$out/http$k.json" || fail "client infer K=$k"
      if [ -n "${GRPC_CLIENT:-}" ]; then
        "$GRPC_CLIENT" "$GRPC" cifar10 "$out/x.safetensors" "$out/grpc$k.json" || fail "gRPC client K=$k"
        /usr/bin/python3 -c "import json,sys; h=json.load(open(sys.argv[1])); g=json.load(open(sys.argv[2])); \
          h['raw']=g['raw']; h['typed']=g['typed']; json.dump(h, open(sys.argv[1],'w'))" \
          "$out/http$k.json" "$out/grpc$k.json"
      fi
      kill -TERM "$RANK0"
      finish
      [ $RC -eq 0 ] || fail "K=$k: exit $RC"
      /usr/bin/python3 - "$out/infer.json" "$out/http$k.json" <<'PY' || fail "K=$k: the answers differ from serf infer"
import json, struct, sys
f32 = lambda xs: [struct.unpack("f", struct.pack("f", x))[0] for x in xs]
want = f32(json.load(open(sys.argv[1]))["output"])
got = json.load(open(sys.argv[2]))
assert len(want) == 10, want
kinds = [k for k in ("binary", "json", "raw", "typed") if k in got]
for kind in kinds:
    assert f32(got[kind]) == want, (kind, got[kind], want)
print("ok: the %s answers equal serf infer's 10 outputs exactly" % ", ".join(kinds))
PY
    done
    ;;
  table_ahead)
    # The nodes prepare every configuration of the table at the start (--prepare-ahead on, the
    # default) and hold it: every switch the table makes finds its kernels held. Off: a (K, T, b)
    # is prepared at its first switch (cold). The same switches and answers either way (cifar10
    # on 2 nodes; the table is planned from the emulated profile, whose levels the load crosses).
    "$SERF" plan --profile "$profile" --nodes 2 --rates 5:150:5 --out "$out/table.json" >/dev/null \
      || fail "serf plan"
    for ahead in on off; do
      timeout 150 "$MPIEXEC" --oversubscribe -np 3 "$SERF" serve --model "$ROOT/configs/models/cifar10.json" \
        --cores-per-node 2 --config 1,1,1 --table "$out/table.json" --prepare-ahead "$ahead" \
        --recalibrate off --load "0:10;2:120;4:10" --requests 300 --rate-window 1 --min-dwell 1 \
        --out "$out/$ahead.json" >"$out/o" 2>"$out/e" || fail "serve --prepare-ahead $ahead"
      cat "$out/o"
      grep -q "requests: 300 answered of 300" "$out/o" || fail "$ahead: not every request answered"
      if [ "$ahead" = on ]; then
        grep -q "rank 1: .*; prepared ahead \([0-9]*\) of \1 (K, T, b)" "$out/o" \
          || fail "rank 1 did not prepare the whole table ahead"
      else
        ! grep -q "prepared ahead" "$out/o" || fail "--prepare-ahead off prepared ahead"
      fi
    done
    /usr/bin/python3 - "$out/on.json" "$out/off.json" <<'PY' || fail "the runs with and without differ"
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
path = lambda run: [(tuple(s["from"]), tuple(s["to"])) for s in run["switches"]]
kinds = lambda run: [s["preparation"] for s in run["switches"]]
answered = lambda run: sum(1 for r in run["requests"] if r.get("answered"))
assert len(on["switches"]) >= 2, ("the table switched less than twice: the case is void", path(on))
assert path(on) == path(off), (path(on), path(off))
assert set(kinds(on)) == {"held"}, kinds(on)
assert "cold" in kinds(off), kinds(off)
assert answered(on) == answered(off) == 300, (answered(on), answered(off))
print("ok: %d switches %s; prepared ahead: %s; at each switch: %s" % (
    len(path(on)), path(on), kinds(on), kinds(off)))
PY
    ;;
  ahead_memory)
    # The memory rule of --prepare-ahead made to bind without a test hook: --ahead-memory-mb, the
    # budget an operator gives the nodes on a machine shared with other jobs. cifar10 on 2 nodes,
    # a table of (1,1,1,1) up to 20 requests/s and (1,1,2,2) above, a load of 4 -> 60 -> 4
    # requests/s (far from the level: no switch on noise); the budget 2.5 W (W: the
    # model's weights). The first (K, T, b) may add W (2 W <= 2.5 W): prepared ahead. The second
    # may add 2 W (b = 2; 4 W > 2.5 W less what is held): each node says so once on stderr, and
    # prepares it at its first switch (cold). Without the budget every switch is held; the
    # switches and the answers are the same.
    model="$ROOT/configs/models/cifar10.json"
    "$SERF" serve --model "$model" --cores-per-node 2 --table "$out/none.json" --prepare-ahead off --ahead-memory-mb 5 \
      --rate 1 >"$out/o" 2>"$out/e"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$out/e")" -eq 1 ] && grep -q -- "--ahead-memory-mb: only with --prepare-ahead on" "$out/e" \
      || fail "--ahead-memory-mb with --prepare-ahead off: exit $rc (want 2 and one line)"
    w=$("$SERF" model info "$model" --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['weight_bytes'])") \
      || fail "serf model info"
    budget=$(/usr/bin/python3 -c "print('%.6f' % (2.5 * $w / 2**20))")
    /usr/bin/python3 - "$out/table.json" <<'PY'
import json, sys
entries = [{"rate": rate, "stable": True, "service": 1, "inter": 1, "intra": t, "batch": b, "units": 2,
            "unit_rate_per_s": rate / 2, "score_ms": 1.0, "latency_ms": 1.0, "wait_ms": 0.0,
            "service_ms": 1.0, "utilization": 0.5} for rate, t, b in ((20.0, 1, 1), (1000.0, 2, 2))]
json.dump({"format": "serf-table/1", "model": "cifar10", "queue": "mg-interf", "objective": "mean",
           "nodes": 2, "cores_per_node": 2, "illustrative": True, "entries": entries}, open(sys.argv[1], "w"))
PY
    for run in budget whole; do
      limit=()
      [ "$run" = budget ] && limit=(--ahead-memory-mb "$budget")
      timeout 150 "$MPIEXEC" --oversubscribe -np 3 "$SERF" serve --model "$model" --cores-per-node 2 \
        --config 1,1,1 --table "$out/table.json" "${limit[@]}" --recalibrate off \
        --load "0:4;2:60;4:4" --requests 152 --rate-window 1 --min-dwell 1 \
        --out "$out/$run.json" >"$out/o" 2>"$out/e" || fail "serve ($run)"
      cat "$out/o" "$out/e"
      grep -q "requests: 152 answered of 152" "$out/o" || fail "$run: not every request answered"
      if [ "$run" = budget ]; then
        for rank in 1 2; do
          [ "$(grep -c "^serf: rank $rank: prepared ahead 1 of 2 (K, T, b).*; the rest at their first switch: --ahead-memory-mb [0-9.]* less .* MiB held = .* MiB < 2 x .* MiB (K = 1, T = 2, b = 2 may add)$" "$out/e")" -eq 1 ] \
            || fail "rank $rank did not say once on stderr that it fell back at (K, T, b) = (1, 2, 2)"
        done
      else
        grep -q "rank 1: .*; prepared ahead 2 of 2 (K, T, b)" "$out/o" || fail "without a budget: not the whole table"
        ! grep -q "the rest at their first switch" "$out/e" || fail "without a budget: a fallback"
      fi
    done
    /usr/bin/python3 - "$out/budget.json" "$out/whole.json" <<'PY' || fail "the runs with and without the budget differ"
import json, sys
budget, whole = (json.load(open(p)) for p in sys.argv[1:3])
path = lambda run: [(tuple(s["from"]), tuple(s["to"])) for s in run["switches"]]
kinds = lambda run: [s["preparation"] for s in run["switches"]]
answered = lambda run: sum(1 for r in run["requests"] if r.get("answered"))
high = (1, 1, 2, 2)
assert high in [to for _, to in path(budget)], ("never switched to %s: the case is void" % (high,), path(budget))
assert path(budget) == path(whole), (path(budget), path(whole))
assert set(kinds(whole)) == {"held"}, kinds(whole)
first_high = [to for _, to in path(budget)].index(high)
for i, ((_, to), kind) in enumerate(zip(path(budget), kinds(budget))):
    want = "cold" if i == first_high else "held" if to != high else kind
    assert kind == want, (i, to, kind, kinds(budget))
assert answered(budget) == answered(whole) == 152, (answered(budget), answered(whole))
print("ok: %d switches %s; with the budget: %s; without: %s" % (
    len(path(budget)), path(budget), kinds(budget), kinds(whole)))
PY
    ;;
  *) fail "unknown case $1" ;;
esac
