#!/usr/bin/env bash
# Soak (issue 14): N requests over HTTP by `serf load` at F x the configuration's capacity to
# `serf serve --http` on emulated nodes. Checks: no crash, received = answered + rejected + timed
# out + failed (rank 0) and the client's counts equal it; samples rank 0's resident memory
# (/proc/PID/status VmRSS) every S seconds and reports it over time (flat after warm-up?).
#   bench/soak.sh [--requests N] [--factor F] [--config c,K,T] [--nodes N] [--max-queue Q] [--every S]
# Capacity = units x c / the profile's mean_ms for (i = c, K, T), units = nodes / K.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
serf="${SERF_BUILD_DIR:-$root/build}/bin/serf"
profile="$root/tests/mpi/emulated_profile.json"
requests=100000 factor=1.2 config=2,1,1 nodes=4 max_queue=8 every=5
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --max-queue) max_queue=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
out="$root/out/soak"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; true' EXIT

read -r capacity rate <<<"$(/usr/bin/python3 - "$profile" "$config" "$nodes" "$factor" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
c, k, t = (int(x) for x in sys.argv[2].split(","))
nodes, factor = int(sys.argv[3]), float(sys.argv[4])
tup = next((x for x in p["tuples"] if (x["service"], x["inter"], x["intra"]) == (c, k, t)), None)
if tup is None:
    sys.exit(f"soak.sh: --config {sys.argv[2]}: the profile has no tuple (i={c}, K={k}, T={t})")
cap = (nodes // k) * c / (tup["mean_ms"] / 1e3)
print(f"{cap:.1f} {cap * factor:.1f}")
PY
)"
echo "config ($config) on $nodes emulated nodes: capacity $capacity requests/s; sending $requests at $rate/s ($factor x), --max-queue $max_queue"

# The log exists before the server starts: the loop below reads it at once, and under set -e a
# read before mpirun's redirection opened it ended the script (exit 2, a loaded host).
: >"$out/serve.log"
mpirun --oversubscribe -np $((nodes + 1)) "$serf" serve --emulate "$profile" \
  --model "$root/configs/models/tiny.json" --config "$config" --max-queue "$max_queue" \
  --http 127.0.0.1:0 >"$out/serve.log" 2>&1 &
server_pid=$!
url="" rank0=""
for _ in $(seq 1 600); do
  url=$(sed -n 's|^serf: KServe v2 HTTP on \(http://[0-9.:]*\).*|\1|p' "$out/serve.log")
  rank0=$(sed -n 's|.*rank 0 is pid \([0-9]*\).*|\1|p' "$out/serve.log" | head -1)
  [ -n "$url" ] && [ -n "$rank0" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$out/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "soak.sh: serf serve did not start"; exit 1; }

# Rank 0's VmRSS every $every s while the load runs.
echo "t_s,vmrss_kb" >"$out/rss.csv"
(
  begin=$(date +%s.%N)
  while kill -0 "$rank0" 2>/dev/null; do
    kb=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$rank0/status" 2>/dev/null || true)
    [ -n "$kb" ] && echo "$(echo "$(date +%s.%N) - $begin" | bc),$kb" >>"$out/rss.csv"
    sleep "$every"
  done
) &
sampler=$!

"$serf" load --url "$url" --model tiny --rate "$rate" --requests "$requests" --timeout 60 \
  --out "$out/load.json" 2>"$out/load.progress"
kill -TERM "$rank0"
wait "$server_pid"
server_pid=""
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
grep -E "^(received|requests|latency)" "$out/serve.log"
/usr/bin/python3 - "$out" "$requests" <<'PY'
import csv, json, re, sys
out, n = sys.argv[1], int(sys.argv[2])
log = open(f"{out}/serve.log").read()
m = re.search(r"^received (\d+) = answered (\d+) \+ rejected (\d+) \+ timed out (\d+) \+ failed (\d+)$", log, re.M)
if not m:
    sys.exit("soak.sh: FAIL: rank 0 printed no balance line")
r, a, j, t, f = map(int, m.groups())
counts = json.load(open(f"{out}/load.json"))["summary"]["counts"]
ok = r == a + j + t + f and r == n and counts.get("200", 0) == a and counts.get("503", 0) == j
print(f"balance: received {r} = answered {a} + rejected {j} + timed out {t} + failed {f}; "
      f"client: {counts} -> {'OK' if ok else 'FAIL'}")
rows = [(float(x["t_s"]), int(x["vmrss_kb"])) for x in csv.DictReader(open(f"{out}/rss.csv"))]
if len(rows) >= 4:
    warm = rows[len(rows) // 10:]  # after the first tenth (warm-up)
    kb = [k for _, k in warm]
    print(f"rank 0 VmRSS: {len(rows)} samples over {rows[-1][0]:.0f} s; first {rows[0][1] / 1024:.1f} MiB, "
          f"after warm-up ({warm[0][0]:.0f} s) {kb[0] / 1024:.1f} MiB, min {min(kb) / 1024:.1f}, "
          f"max {max(kb) / 1024:.1f}, last {kb[-1] / 1024:.1f} MiB "
          f"(growth after warm-up {(kb[-1] - kb[0]) / 1024:+.1f} MiB)")
    step = max(1, len(rows) // 10)
    print("VmRSS over time (s: MiB): " + ", ".join(f"{t:.0f}: {k / 1024:.1f}" for t, k in rows[::step]))
sys.exit(0 if ok else 1)
PY
