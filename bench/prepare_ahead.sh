#!/usr/bin/env bash
# What `serf serve --prepare-ahead` costs and saves (issue 14), real engine on one node:
#   start   `serf serve --model M --table T --http` with --prepare-ahead on and off, alternating,
#           R runs each: seconds from the launch to the HTTP listening line (every node ready),
#           the node's VmRSS and VmHWM then (/proc/PID/status), and its line (what it prepared
#           ahead, in how long)
#   switch  the same table under a generated load that crosses its levels (--load), once per
#           setting: each switch's reconfiguration (ms) and what the node did for its kernels
#   bench/prepare_ahead.sh MODEL "c,K,T[,b];..." [--nodes N] [--runs R] [--cores-per-node F]
#                          [--load "S:RATE;..."] [--requests N]
# The table T names the configurations given, in order, at 5, 10, 20, ... requests/s (an
# illustrative table: its predictions are placeholders; only its configurations and levels act).
# Run it under the lock for figures: flock /work/measure.lock nice -n -20 bench/prepare_ahead.sh ...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
serf="${SERF_BUILD_DIR:-$root/build}/bin/serf"
[ $# -ge 2 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
model=$1 configs=$2; shift 2
runs=3 cores=2 load="" requests=200 nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --cores-per-node) cores=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) echo "prepare_ahead.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$(mktemp -d)"
table="$out/table.json"
/usr/bin/python3 - "$configs" "$nodes" "$cores" "$table" <<'PY'
import json, sys
configs, nodes, cores, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
entries = []
for k, text in enumerate(configs.split(";")):
    c = [int(x) for x in text.split(",")] + [1]
    entries.append({"rate": 5.0 * 2 ** k, "stable": True, "service": c[0], "inter": c[1], "intra": c[2],
                    "batch": c[3], "units": nodes // c[1], "unit_rate_per_s": 5.0 * 2 ** k / (nodes // c[1]),
                    "score_ms": 1.0, "latency_ms": 1.0, "wait_ms": 0.0, "service_ms": 1.0, "utilization": 0.5})
json.dump({"format": "serf-table/1", "model": "any", "queue": "mg-interf", "objective": "mean",
           "nodes": nodes, "cores_per_node": cores, "illustrative": True, "entries": entries},
          open(path, "w"), indent=1)
PY
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$out"; true' EXIT
serve=("$serf" serve --model "$model" --cores-per-node "$cores" --table "$table" --recalibrate off)

kb() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$2/status" 2>/dev/null || echo 0; }

start_once() {  # start_once on|off: one line of figures
  local begin end url="" rank0=""
  begin=$(date +%s.%N)
  : >"$out/o"  # emptied first: the loop below must not read the last run's URL and pid
  mpirun --oversubscribe -np $((nodes + 1)) "${serve[@]}" --prepare-ahead "$1" \
    --http 127.0.0.1:0 >"$out/o" 2>"$out/e" &
  server_pid=$!
  for _ in $(seq 1 3000); do
    url=$(sed -n 's|^serf: KServe v2 HTTP on \(http://[0-9.:]*\).*|\1|p' "$out/o")
    rank0=$(sed -n 's|.*rank 0 is pid \([0-9]*\).*|\1|p' "$out/o" | head -1)
    [ -n "$url" ] && [ -n "$rank0" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/o" "$out/e"; exit 1; }
    sleep 0.02
  done
  end=$(date +%s.%N)
  [ -n "$url" ] || { echo "serf serve did not start"; cat "$out/o" "$out/e"; exit 1; }
  local line="" pid
  for pid in $(pgrep -P "$server_pid"); do
    [ "$pid" = "$rank0" ] && continue
    line+=" node pid $pid VmRSS $(( $(kb VmRSS "$pid") / 1024 )) MiB VmHWM $(( $(kb VmHWM "$pid") / 1024 )) MiB;"
  done
  printf "prepare-ahead %-3s ready %s s;%s rank 0 VmRSS %d MiB\n" "$1" \
    "$(awk -v a="$begin" -v b="$end" 'BEGIN { printf "%.2f", b - a }')" "$line" \
    $(( $(kb VmRSS "$rank0") / 1024 ))
  grep "^rank [0-9]*:" "$out/o" | sed 's/^/    /'
  kill -TERM "$rank0"
  wait "$server_pid" || true
  server_pid=""
}

echo "model $model, table \"$configs\" ($nodes node(s) x $cores cores), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$runs"); do
  for ahead in on off; do start_once "$ahead"; done
done
[ -n "$load" ] || exit 0
for ahead in on off; do
  mpirun --oversubscribe -np $((nodes + 1)) "${serve[@]}" --prepare-ahead "$ahead" \
    --config "$(/usr/bin/python3 -c "import json,sys; e=[x for x in json.load(open(sys.argv[1]))['entries'] if x['stable']][0]; print('%d,%d,%d,%d' % (e['service'], e['inter'], e['intra'], e.get('batch', 1)))" "$table")" \
    --load "$load" --requests "$requests" --rate-window 1 --min-dwell 1 --out "$out/run.json" >"$out/o" 2>"$out/e" \
    || { cat "$out/o" "$out/e"; exit 1; }
  echo "switches with --prepare-ahead $ahead:"
  /usr/bin/python3 - "$out/run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for s in run["switches"]:
    print("    %6.2f s %s -> %s: drain %.1f ms, reconfigure %.1f ms (kernels %s)" % (
        s["at_s"], tuple(s["from"]), tuple(s["to"]), s["drain_ms"], s["configure_ms"], s["preparation"]))
lat = sorted(r["latency_ms"] for r in run["requests"] if r.get("answered"))
if lat:
    print("    %d answered, mean %.1f ms, p99 %.1f ms" % (len(lat), sum(lat) / len(lat), lat[int(0.99 * (len(lat) - 1))]))
PY
done
