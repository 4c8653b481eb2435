# Sourced by the end-to-end tests of this folder that run `serf serve` under mpiexec (SERF and
# MPIEXEC set): a temporary folder $out removed at exit with the server, start, finish and the
# accounting line. The test defines `fail MESSAGE` (print what it needs, exit 1).
# shellcheck shell=bash
set -uo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

# start NP ARGS...: `serf serve ARGS` under mpiexec (stdout $out/o, stderr $out/e); waits for rank
# 0's pid and the listening line of each front end ARGS asks for (--http, --grpc); sets URL, GRPC,
# RANK0 and server_pid (mpiexec's).
start() {
  local np=$1; shift
  # Emptied first: the loop below reads them at once, and a second start in one test would read
  # the first server's lines (its URL and pid) before mpiexec's redirection truncates them.
  : >"$out/o"
  : >"$out/e"
  "$MPIEXEC" --oversubscribe -np "$np" "$SERF" serve "$@" >"$out/o" 2>"$out/e" &
  server_pid=$!
  local want_http=0 want_grpc=0
  case " $* " in *" --http "*) want_http=1 ;; esac
  case " $* " in *" --grpc "*) want_grpc=1 ;; esac
  for _ in $(seq 1 600); do
    URL=$(sed -n 's|^serf: KServe v2 HTTP on \(http://[0-9.:]*\).*|\1|p' "$out/o")
    GRPC=$(sed -n 's|^serf: KServe v2 gRPC on \([0-9.:]*\).*|\1|p' "$out/o")
    RANK0=$(sed -n 's|.*rank 0 is pid \([0-9]*\).*|\1|p' "$out/o" | head -1)
    if [ -n "$RANK0" ] && { [ $want_http = 0 ] || [ -n "$URL" ]; } &&
      { [ $want_grpc = 0 ] || [ -n "$GRPC" ]; }; then
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited before listening"
    sleep 0.1
  done
  fail "the server did not listen within 60 s"
}

# finish: waits for mpiexec (at most 30 s); RC is its exit code.
finish() {
  local begin=$SECONDS
  while kill -0 "$server_pid" 2>/dev/null; do
    [ $((SECONDS - begin)) -lt 30 ] || fail "the server did not stop within 30 s"
    sleep 0.1
  done
  wait "$server_pid"; RC=$?
  server_pid=""
}

# accounting: "received R = answered A + rejected J + timed out T + failed F" -> R A J T F
accounting() {
  sed -n 's/^received \([0-9]*\) = answered \([0-9]*\) + rejected \([0-9]*\) + timed out \([0-9]*\) + failed \([0-9]*\)$/\1 \2 \3 \4 \5/p' "$out/o"
}
