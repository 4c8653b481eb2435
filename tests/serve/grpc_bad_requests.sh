#!/usr/bin/env bash
# The gRPC bad-request corpus (tests/serve/grpc_bad_requests.cc) against `serf serve --emulate
# --grpc` under mpiexec, then rank 0's accounting at SIGTERM against what the driver sent:
# received = the valid ModelInfer calls, rejected = the UNAVAILABLE ones, and /metrics' invalid
# gRPC requests = the ones SERF refused (a message past gRPC's own limit is not SERF's to count).
# Two servers: the tiny model's shape on one unit of 250 ms a request (--max-queue 3,
# --max-body-mb 1), and emulated nodes without --model (an input of any shape).
# Environment: SERF, MPIEXEC, ROOT, DRIVER (the grpc_bad_requests binary).
source "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
fail() {
  echo "FAIL: $*"
  cat "$out/d" "$out/o" "$out/e" 2>/dev/null | tail -40
  exit 1
}

# check ARGS...: the driver's line "sent V valid, U unavailable, I invalid, X uncounted" against
# rank 0's accounting (and /metrics' invalid count, read before the stop).
check() {
  read -r V U I X <<<"$(sed -n 's/^sent \([0-9]*\) valid, \([0-9]*\) unavailable, \([0-9]*\) invalid, \([0-9]*\) uncounted$/\1 \2 \3 \4/p' "$out/d")"
  [ -n "${V:-}" ] || fail "the driver printed no count"
  local metric
  metric=$(curl -s "$URL/metrics" | sed -n 's/^serf_invalid_requests_total{protocol="grpc"} //p')
  kill -TERM "$RANK0"
  finish
  [ "$RC" -eq 0 ] || fail "serf serve exited $RC"
  read -r R A J T F <<<"$(accounting)"
  [ -n "${R:-}" ] || fail "no accounting line"
  [ "$R" -eq $((A + J + T + F)) ] || fail "received $R != $A + $J + $T + $F"
  [ "$R" -eq "$V" ] || fail "rank 0 received $R, the driver sent $V valid calls"
  [ "$J" -eq "$U" ] || fail "rank 0 rejected $J, the driver saw $U UNAVAILABLE"
  [ "$F" -eq 0 ] || fail "$F failed"
  [ "$metric" = "$I" ] || fail "/metrics counts $metric invalid gRPC requests, the driver sent $I"
  echo "ok ($1): received $R = answered $A + rejected $J + timed out $T + failed $F; $I invalid counted, $X refused by gRPC itself"
}

help=$("$SERF" serve --help)
grep -q -- "--grpc" <<<"$help" || { echo "skip: no --grpc"; exit 77; }
/usr/bin/python3 - "$ROOT/tests/mpi/emulated_profile.json" "$out/slow.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["tuples"] = [dict(t, mean_ms=250.0, scv=0.0) for t in p["tuples"] if (t["service"], t["inter"], t["intra"]) == (1, 1, 1)]
json.dump(p, open(sys.argv[2], "w"))
PY
start 2 --emulate "$out/slow.json" --model "$ROOT/configs/models/tiny.json" --config 1,1,1 \
  --max-queue 3 --max-body-mb 1 --http 127.0.0.1:0 --grpc 127.0.0.1:0
timeout 120 "$DRIVER" "$GRPC" fixed >"$out/d" 2>&1 || fail "the driver (fixed shape) exited $?"
tail -2 "$out/d"
check "the tiny model's shape"

start 2 --emulate "$ROOT/tests/mpi/emulated_profile.json" --config 1,1,1 --http 127.0.0.1:0 \
  --grpc 127.0.0.1:0
timeout 120 "$DRIVER" "$GRPC" any >"$out/d" 2>&1 || fail "the driver (any shape) exited $?"
tail -2 "$out/d"
check "any shape"
