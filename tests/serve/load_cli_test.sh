#!/usr/bin/env bash
# `serf load` end to end. Usage: load_cli_test.sh CASE, with SERF, MPIEXEC and ROOT set
# (tests/CMakeLists.txt does). Cases:
#   bad_input    bad flags and an unreachable server: one line on stderr, exit 2, no hang
#   http         against `serf serve --emulate --http` under mpiexec: JSON and binary tensors, a
#                load that changes, --out/--plot; the client's counts equal rank 0's accounting
#   overload     a server with no waiting room: the client's 200/503 counts equal rank 0's
#   grpc         the same over KServe v2 gRPC (skipped, exit 77, in a build without gRPC)
#   grpc_overload  four `serf load --protocol grpc` at once far beyond a unit with a tiny queue:
#                every request is answered or refused by SERF (OK or UNAVAILABLE, none refused by
#                gRPC itself), and the clients' counts add up to rank 0's accounting
#   precision    --precision: a point that stops once its mean is precise (VALID), and one that
#                cannot be within its cap (INVALID, with the reason); rank 0 answered every request
source "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
fail() { echo "FAIL: $*"; for f in o e lo le; do [ -f "$out/$f" ] && { echo "--- $f"; tail -20 "$out/$f"; }; done; exit 1; }
profile="$ROOT/tests/mpi/emulated_profile.json"
tiny="$ROOT/configs/models/tiny.json"

# stop: SIGTERM to rank 0 and wait for mpiexec (at most 30 s); sets the accounting R A J T F.
stop() {
  kill -TERM "$RANK0"
  finish
  [ "$RC" -eq 0 ] || fail "the server exited with $RC"
  read -r R A J T F <<<"$(accounting)"
  [ -n "${R:-}" ] || fail "no accounting line"
}

# load ARGS...: serf load, bounded by 120 s; fails on a non-zero exit.
load() {
  timeout 120 "$SERF" load "$@" >"$out/lo" 2>"$out/le" || fail "serf load $* exited $?"
}

# field FILE.json EXPR: a value of the run's JSON (python expression on `j`).
field() { /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# expect_bad ARGS...: serf load ARGS must exit 2 with one line on stderr, within 15 s.
expect_bad() {
  local begin=$SECONDS rc
  timeout 30 "$SERF" load "$@" >"$out/lo" 2>"$out/le"; rc=$?
  [ $rc -eq 2 ] || fail "serf load $* exited $rc (want 2)"
  [ "$(wc -l <"$out/le")" -eq 1 ] || fail "serf load $*: want one line on stderr, got: $(cat "$out/le")"
  [ $((SECONDS - begin)) -le 15 ] || fail "serf load $*: took $((SECONDS - begin)) s"
  echo "ok: $* -> $(cat "$out/le")"
}

case "$1" in
  bad_input)
    u=(--url http://127.0.0.1:1 --model m)
    expect_bad --model m --rate 10
    expect_bad "${u[@]}"
    expect_bad "${u[@]}" --rate -1
    expect_bad "${u[@]}" --rate nan
    expect_bad "${u[@]}" --rate 10 --load "0:10"
    expect_bad "${u[@]}" --load "5:10"
    expect_bad "${u[@]}" --load "0:10;0:20"
    expect_bad "${u[@]}" --load "0:-3"
    expect_bad "${u[@]}" --rate 10 --arrivals weibull
    expect_bad "${u[@]}" --rate 10 --arrival-scv 4
    expect_bad "${u[@]}" --rate 10 --protocol ftp
    expect_bad "${u[@]}" --rate 10 --connections 0
    expect_bad "${u[@]}" --rate 10 --requests 0
    expect_bad "${u[@]}" --rate 10 --duration 0
    expect_bad "${u[@]}" --rate 10 --timeout -2
    expect_bad "${u[@]}" --rate 10 --seed -1
    expect_bad "${u[@]}" --rate 10 --plot "$out/p.png"
    expect_bad "${u[@]}" --rate 10 --out "$out/r.json" --plot "$out/p.txt"
    expect_bad "${u[@]}" --rate 10 --out "$out/missing/r.json"
    expect_bad --url https://127.0.0.1:8000 --model m --rate 10
    expect_bad --url 127.0.0.1 --model m --rate 10
    # Nothing listens on port 1: refused at once, one line naming --url.
    expect_bad "${u[@]}" --rate 10
    grep -q -- "--url http://127.0.0.1:1: cannot reach the server" "$out/le" || fail "unreachable: $(cat "$out/le")"
    expect_bad "${u[@]}" --rate 10 --protocol grpc
    expect_bad "${u[@]}" --load "0:10;5:20" --precision 0.03
    expect_bad "${u[@]}" --rate 10 --precision 0
    expect_bad "${u[@]}" --rate 10 --precision 2
    expect_bad "${u[@]}" --rate 10 --precision nan
    expect_bad "${u[@]}" --rate 10 --min-duration 5
    expect_bad "${u[@]}" --rate 10 --precision 0.03 --min-requests 0
    expect_bad "${u[@]}" --rate 10 --precision 0.03 --percentile 100
    expect_bad "${u[@]}" --rate 10 --percentile 90
    ;;
  http)
    start 3 --emulate "$profile" --model "$tiny" --config 1,1,1 --http 127.0.0.1:0
    load --url "$URL" --model tiny --rate 100 --requests 200 --out "$out/a.json" --plot "$out/a.png"
    cat "$out/lo"
    grep -q "^status: 200 200, 400 0, 503 0, 504 0, errors 0, timeouts 0$" "$out/lo" || fail "statuses"
    grep -q "^latency ms (from the scheduled time): mean " "$out/lo" || fail "no latency line"
    grep -q "^client lateness ms (sent - scheduled): mean " "$out/lo" || fail "no lateness line"
    [ "$(field "$out/a.json" "j['summary']['answered']")" = 200 ] || fail "JSON answered"
    [ "$(field "$out/a.json" "j['served_model']['input_shape']")" = "[1, 3, 12, 12]" ] || fail "input shape"
    [ "$(wc -l <"$out/a.json.csv")" -eq 201 ] || fail "CSV rows"
    [ -s "$out/a.png" ] || fail "no PNG"
    # Emulated nodes sleep 21 ms a request (c = 1, K = 1): no answer is faster.
    /usr/bin/python3 - "$out/a.json.csv" <<'PY' || fail "latencies"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lat = [float(r["latency_ms"]) for r in rows]
assert min(lat) >= 20.0, min(lat)
assert all(float(r["sent_s"]) >= float(r["scheduled_s"]) for r in rows)
print("ok: 200 answers, every latency >= 20 ms (the emulated service time), none sent early")
PY
    load --url "$URL" --model tiny --load "0:50;1:150" --duration 2 --binary --arrivals gamma --arrival-scv 2 \
      --out "$out/b.json"
    b=$(field "$out/b.json" "j['summary']['scheduled']")
    [ "$(field "$out/b.json" "j['summary']['answered']")" = "$b" ] || fail "binary: not all answered"
    [ "$(field "$out/b.json" "j['binary']")" = True ] || fail "binary flag"
    echo "ok: binary tensors, a load from 50 to 150/s, gamma arrivals: $b requests answered"
    stop
    [ "$R" -eq $((200 + b)) ] && [ "$A" -eq "$R" ] || fail "rank 0: received $R answered $A, the client sent $((200 + b))"
    echo "ok: rank 0 received $R = the client's 200 + $b, all answered"
    ;;
  overload)
    # c = 1, no waiting room, 21 ms a request: at 200/s most find the unit busy (503).
    start 3 --emulate "$profile" --model "$tiny" --config 1,1,1 --max-queue 0 --http 127.0.0.1:0
    load --url "$URL" --model tiny --rate 200 --requests 300 --out "$out/o.json"
    cat "$out/lo"
    ok=$(field "$out/o.json" "j['summary']['counts'].get('200', 0)")
    busy=$(field "$out/o.json" "j['summary']['counts'].get('503', 0)")
    [ "$busy" -ge 50 ] || fail "only $busy rejected"
    grep -q "^first 503: " "$out/lo" || fail "no first 503 message"
    stop
    [ "$R" -eq 300 ] && [ "$A" -eq "$ok" ] && [ "$J" -eq "$busy" ] || fail "rank 0: $R $A $J, client: 300 $ok $busy"
    echo "ok: client 200 $ok / 503 $busy = rank 0 answered $A / rejected $J of $R"
    ;;
  grpc)
    # The help as a whole first: grep -q would close the pipe early and pipefail fail it.
    help=$("$SERF" serve --help)
    grep -q -- "--grpc" <<<"$help" || { echo "skip: no --grpc"; exit 77; }
    start 3 --emulate "$profile" --model "$tiny" --config 1,1,1 --http 127.0.0.1:0 --grpc 127.0.0.1:0
    # 30/s on a unit of 47/s (c = 1, 21 ms): the protocol is under test here, not overload. At
    # 100/s the backlog grew past the server's 64 gRPC threads whenever the machine slowed the
    # emulated service (31 ms at load 17), and gRPC itself refused the rest (RESOURCE_EXHAUSTED).
    timeout 120 "$SERF" load --protocol grpc --url "$GRPC" --model tiny --rate 30 --requests 150 \
      --out "$out/g.json" >"$out/lo" 2>"$out/le"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "built without gRPC" "$out/le"; then echo "skip: no gRPC"; stop; exit 77; fi
    [ $rc -eq 0 ] || fail "serf load --protocol grpc exited $rc"
    cat "$out/lo"
    load --protocol grpc --url "$GRPC" --model tiny --rate 30 --requests 50 --binary
    grep -q "^status: 200 50," "$out/lo" || fail "raw_input_contents"
    [ "$(field "$out/g.json" "j['summary']['answered']")" = 150 ] || fail "gRPC answered"
    stop
    [ "$R" -eq 200 ] && [ "$A" -eq 200 ] || fail "rank 0: received $R answered $A (want 200)"
    echo "ok: gRPC, fp32_contents and raw_input_contents: rank 0 answered $A of $R"
    ;;
  grpc_overload)
    help=$("$SERF" serve --help)
    grep -q -- "--grpc" <<<"$help" || { echo "skip: no --grpc"; exit 77; }
    # Two units of one slot (21 ms a request, about 95/s in all), one request may wait in each:
    # 4 x 150/s offered, most are refused. Before SERF owned gRPC admission, calls past the
    # synchronous server's threads were refused by gRPC (RESOURCE_EXHAUSTED) and never counted.
    start 3 --emulate "$profile" --model "$tiny" --config 1,1,1 --max-queue 1 --http 127.0.0.1:0 \
      --grpc 127.0.0.1:0
    pids=()
    for i in 1 2 3 4; do
      timeout 120 "$SERF" load --protocol grpc --url "$GRPC" --model tiny --rate 150 --requests 300 \
        --binary --connections 2 --seed "$i" --quiet --out "$out/g$i.json" >"$out/lo$i" 2>"$out/le$i" &
      pids+=($!)
    done
    for i in 1 2 3 4; do
      wait "${pids[$((i - 1))]}" || { cat "$out/le$i"; fail "serf load --protocol grpc ($i) failed"; }
    done
    read -r sent ok busy other <<<"$(/usr/bin/python3 - "$out"/g{1,2,3,4}.json <<'PY'
import json, sys
sent = ok = busy = other = 0
for path in sys.argv[1:]:
    s = json.load(open(path))["summary"]
    sent += s["sent"]
    for status, n in s["counts"].items():
        if status == "200": ok += n
        elif status == "503": busy += n
        else: other += n
print(sent, ok, busy, other)
PY
)"
    [ "$sent" -eq 1200 ] || fail "the clients sent $sent of 1200"
    [ "$other" -eq 0 ] || fail "$other requests ended other than OK or UNAVAILABLE: $(cat "$out"/lo*)"
    [ "$busy" -ge 300 ] || fail "only $busy refused: not an overload"
    grep -h "^first 503: " "$out"/lo* | head -1 | grep -q "is full" || fail "the refusal names no full queue"
    stop
    [ "$R" -eq "$sent" ] && [ "$A" -eq "$ok" ] && [ "$J" -eq "$busy" ] && [ "$T" -eq 0 ] && [ "$F" -eq 0 ] ||
      fail "rank 0: received $R answered $A rejected $J timed out $T failed $F; clients: sent $sent, OK $ok, UNAVAILABLE $busy"
    echo "ok: 4 gRPC clients sent $sent: OK $ok + UNAVAILABLE $busy = rank 0's received $R = answered $A + rejected $J"
    ;;
  precision)
    # c = 1, 21 ms a request, 15/s (utilization 0.32): the mean is within 50 % and the p90 bounded
    # (35 answers) soon after the 5 s minimum and 100 answers, far inside the 60 s cap. A loose
    # target on purpose: on a loaded machine the emulated service drifts (28-33 ms), and even 882
    # answers gave a 10.5 % half-width once; the rule, not the machine, is under test.
    start 3 --emulate "$profile" --model "$tiny" --config 1,1,1 --http 127.0.0.1:0
    load --url "$URL" --model tiny --rate 15 --precision 0.5 --percentile 90 --min-duration 5 --duration 60 \
      --out "$out/p.json"
    cat "$out/lo"
    grep -q "^stopped early: precise: mean " "$out/lo" || fail "did not stop on precision"
    grep -q "^precision (target +-50 % of the mean, >= 5 s, >= 100 requests, p90 bounded): VALID; mean " "$out/lo" ||
      fail "no VALID verdict line"
    [ "$(field "$out/p.json" "j['precision']['valid']")" = True ] || fail "JSON: not valid"
    [ "$(field "$out/p.json" "0 < j['precision']['ci95_rel'] <= 0.5")" = True ] || fail "JSON: ci95_rel"
    [ "$(field "$out/p.json" "j['precision']['percentile_bounded']")" = True ] || fail "JSON: p99 not bounded"
    [ "$(field "$out/p.json" "j['precision']['measured'] >= 100")" = True ] || fail "JSON: measured"
    span=$(field "$out/p.json" "j['precision']['duration_s']")
    [ "$(field "$out/p.json" "5 <= j['precision']['duration_s'] < 55")" = True ] || fail "ran $span s"
    n1=$(field "$out/p.json" "j['summary']['answered']")
    [ "$(field "$out/p.json" "j['summary']['sent']")" = "$n1" ] || fail "not every sent request answered"
    echo "ok: VALID after $span s, $n1 answers"
    # 0.01 % cannot be reached in 4 s: INVALID, the reason names the CI; still exit 0 (it ran).
    load --url "$URL" --model tiny --rate 30 --precision 0.0001 --min-duration 2 --duration 4 \
      --out "$out/q.json"
    grep -q "^precision (target +-0.01 % of the mean, >= 2 s, >= 100 requests, p99 bounded): INVALID: " "$out/lo" ||
      fail "no INVALID verdict line: $(cat "$out/lo")"
    [ "$(field "$out/q.json" "j['precision']['valid']")" = False ] || fail "JSON: valid"
    [ "$(field "$out/q.json" "'CI' in j['precision']['verdict']")" = True ] || fail "verdict: $(field "$out/q.json" "j['precision']['verdict']")"
    n2=$(field "$out/q.json" "j['summary']['answered']")
    stop
    [ "$R" -eq $((n1 + n2)) ] && [ "$A" -eq "$R" ] || fail "rank 0: received $R answered $A, the client $((n1 + n2))"
    echo "ok: INVALID at 0.01 % in 4 s; rank 0 received and answered $R = $n1 + $n2"
    ;;
  *) fail "unknown case $1" ;;
esac
