# Sourced by the CLI tests of this folder: `source cli_check.sh SERF_BINARY PROFILE`.
# shellcheck shell=bash
set -uo pipefail
serf="$1"
profile="$2"
fail=0
py=/usr/bin/python3
check() {  # check DESCRIPTION COMMAND...: run COMMAND, report ok/FAIL
  local what="$1"; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
check_usage_error() {  # check_usage_error DESCRIPTION SERF_ARGS...: exit 2 and one line on stderr
  local what="$1"; shift
  local err rc
  err=$("$serf" "$@" 2>&1 >/dev/null); rc=$?
  check "$what exits 2 with one line" test "$rc" -eq 2 -a "$(wc -l <<<"$err")" -eq 1
}
