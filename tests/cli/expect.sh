# Sourced by the CLI tests of this folder after they set `serf`, `tmp` and `fail`.
# shellcheck shell=bash
# expect CODE PATTERN -- ARGS...: `serf ARGS` exits CODE within 10 s times SERF_TEST_TIME_SCALE (1,
# 4 in a sanitizer build: nothing blocks or reads a device to its end), writes exactly one stderr line containing PATTERN, and no NaN/inf on stdout.
expect() {
  local code="$1" pattern="$2"
  shift 3
  local start=$SECONDS
  timeout $((10 * ${SERF_TEST_TIME_SCALE:-1})) "$serf" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -ne $code ]]; then fail "serf $* -> exit $rc, want $code ($(cat "$tmp/err"))"; return; fi
  if [[ $lines -ne 1 ]]; then fail "serf $* -> $lines stderr lines, want 1: $(cat "$tmp/err")"; return; fi
  if ! grep -qF -- "$pattern" "$tmp/err"; then fail "serf $* -> '$(cat "$tmp/err")' lacks '$pattern'"; return; fi
  if grep -qiE '\bnan\b|\binf\b' "$tmp/out"; then fail "serf $* printed NaN/inf"; return; fi
  echo "ok   serf $* -> $(cat "$tmp/err") ($((SECONDS - start)) s)"
}
