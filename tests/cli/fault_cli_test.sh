#!/usr/bin/env bash
# Faults around a command that runs without MPI, as an outside checker makes them (issue 18):
# standard output closed, a pipe whose reader left, a full device; --out on a read-only file system
# or a full disk; SIGINT in the middle of a run. Each: one clear line, the documented exit code
# (docs/queueing.md), and no output file left half-written (each is whole, or absent, or as it was).
# Usage: fault_cli_test.sh SERF_BINARY ROOT
set -uo pipefail
serf="$1"
root="$2"
tmp="$(mktemp -d)"
mounts=()
trap 'for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done; rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
profile="$root/configs/profiles/imagenet22k_paper.json"
tiny="$root/configs/models/tiny.json"
plan=(plan --profile "$profile" --rates 1:20:1 --out "$tmp/t.json")  # every level stable: exit 0

# one_line CODE PATTERN RC: the run's exit code was CODE and its stderr ($tmp/err) one line with
# PATTERN.
one_line() {
  local code=$1 pattern=$2 rc=$3 what=$4
  [[ $rc -eq $code ]] || { fail "$what: exit $rc, want $code: $(cat "$tmp/err")"; return 1; }
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || { fail "$what: want one stderr line: $(cat "$tmp/err")"; return 1; }
  grep -qF -- "$pattern" "$tmp/err" || { fail "$what: '$(cat "$tmp/err")' lacks '$pattern'"; return 1; }
  echo "ok   $what -> exit $rc: $(cat "$tmp/err")"
}
# whole_json FILE...: each parses as JSON.
whole_json() {
  python3 -c 'import json, sys; [json.load(open(f)) for f in sys.argv[1:]]' "$@"
}
# no_temporaries DIR: no file of a write in progress was left there.
no_temporaries() {
  local left
  left=$(find "$1" -name '*.tmp*')
  [[ -z $left ]] || fail "temporaries left behind: $left"
}

# --- standard output ---------------------------------------------------------------------------
# Closed (>&-): the first file serf opened took its number, and what it printed went there.
"$serf" "${plan[@]}" >&- 2>"$tmp/err"
one_line 2 "standard output is closed (>&-)" $? "plan >&-"
[[ ! -e $tmp/t.json ]] || fail "plan >&-: wrote $tmp/t.json"
"$serf" model info "$tiny" >&- 2>"$tmp/err"
one_line 2 "standard output is closed" $? "model info >&-"
# stdin and stderr closed are held on /dev/null: the command runs (exit 0, its file whole).
"$serf" "${plan[@]}" <&- 2>&- >"$tmp/o"
rc=$?
[[ $rc -eq 0 ]] && whole_json "$tmp/t.json" && grep -q "^planned" "$tmp/o" \
  && echo "ok   plan <&- 2>&- -> exit $rc, the table written and printed" \
  || fail "plan <&- 2>&-: exit $rc"
rm -f "$tmp/t.json" "$tmp/t.csv"
# A pipe whose reader left before serf wrote (as `| head -1` ends): SIGPIPE killed serf without a
# word (exit 141); now the write error is reported (exit 4) and the --out file is whole.
python3 - "$serf" "$tmp/err" "${plan[@]}" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
with open(sys.argv[2], "wb") as err:
    rc = subprocess.run(sys.argv[1:2] + sys.argv[3:], stdout=w, stderr=err).returncode
sys.exit(rc if rc >= 0 else 128 - rc)
PY
one_line 4 "cannot write the results to standard output (Broken pipe)" $? "plan | (reader gone)" \
  && { whole_json "$tmp/t.json" || fail "plan | (reader gone): $tmp/t.json not whole"; }
# `| head -1` itself: the reader may leave before or after serf's last line, so exit 0 or 4.
"$serf" plan --profile "$profile" --rates 0.5:20:0.5 --all --out "$tmp/t.json" 2>"$tmp/err" | head -1 >/dev/null
rc=${PIPESTATUS[0]}
if [[ $rc -eq 4 ]]; then one_line 4 "standard output (Broken pipe)" $rc "plan | head -1"
elif [[ $rc -eq 0 ]] && [[ ! -s $tmp/err ]]; then echo "ok   plan | head -1 -> exit $rc (all written first)"
else fail "plan | head -1: exit $rc: $(cat "$tmp/err")"; fi
whole_json "$tmp/t.json" || fail "plan | head -1: $tmp/t.json not whole"
"$serf" model info "$tiny" >/dev/full 2>"$tmp/err"
one_line 4 "cannot write the results to standard output (No space left on device)" $? "model info >/dev/full"
no_temporaries "$tmp"

# --- --out on a read-only file system and on a full disk -----------------------------------------
if mkdir -p "$tmp/ro" "$tmp/full" && mount -t tmpfs -o ro,size=8k tmpfs "$tmp/ro" 2>/dev/null; then
  mounts+=("$tmp/ro")
  mount -t tmpfs -o size=8k tmpfs "$tmp/full" && mounts+=("$tmp/full")
  # Root may write anywhere else: the line said "does not exist or is not writable".
  "$serf" plan --profile "$profile" --rates 1:40:1 --out "$tmp/ro/t.json" >"$tmp/o" 2>"$tmp/err"
  one_line 2 "Read-only file system" $? "plan --out (read-only)"
  "$serf" model init "$tiny" --out "$tmp/ro/w.safetensors" >"$tmp/o" 2>"$tmp/err"
  one_line 2 "$tmp/ro" $? "model init --out (read-only)"
  grep -qi "read-only file system" "$tmp/err" || fail "model init --out (read-only): $(cat "$tmp/err")"
  # A full disk: each file is whole or left as it was (an old one stays), nothing half-written.
  echo '{"old": true}' >"$tmp/full/t.json"
  "$serf" plan --profile "$profile" --rates 0.5:48:0.5 --all --out "$tmp/full/t.json" >"$tmp/o" 2>"$tmp/err"
  one_line 2 "t.json: write error (No space left on device); the file was left as it was" $? "plan --out (full disk)"
  [[ $(cat "$tmp/full/t.json") == '{"old": true}' ]] || fail "plan --out (full disk): the old file changed"
  rm -f "$tmp/full/t.json"
  "$serf" model init "$tiny" --out "$tmp/full/w.safetensors" >"$tmp/o" 2>"$tmp/err"
  one_line 2 "w.safetensors: write error (No space left on device)" $? "model init --out (full disk)"
  [[ -z $(ls -A "$tmp/full") ]] || fail "model init --out (full disk): left $(ls -A "$tmp/full")"
else
  echo "skipped the read-only and full-disk cases: this user may not mount a tmpfs"
fi

# --- SIGINT in the middle of a run ---------------------------------------------------------------
# serf validate on many measured points (a second or more): SIGINT after 0.3 s. It says so in one
# line and ends by the signal (130 in the shell); its outputs are whole or absent.
python3 - "$root/tests/cli/data/toy_profile.json" "$tmp/measured.json" <<'PY'
import json, sys
toy = json.load(open(sys.argv[1]))
points = [{"service": 1, "inter": 1, "intra": 1, "batch": 1, "rate": 0.01 * (i + 1), "requests": 100,
           "mean_latency_ms": 110.0} for i in range(4000)]
json.dump({"format": "serf-exhaustive/1", "model": toy["model"], "hardware": toy["hardware"],
           "points": points}, open(sys.argv[2], "w"))
PY
mkdir -p "$tmp/v"
"$serf" validate --profile "$root/tests/cli/data/toy_profile.json" --measured "$tmp/measured.json" \
  --queue all --out "$tmp/v/r.json" >"$tmp/o" 2>"$tmp/err" &
pid=$!
sleep 0.3
kill -INT $pid
wait $pid
rc=$?
if [[ $rc -eq 0 ]]; then
  echo "note: validate finished within 0.3 s; the SIGINT came after it"
else
  one_line 130 "serf: error: stopped by SIGINT before the end; no output file is left half-written" $rc "validate, SIGINT"
fi
for f in "$tmp"/v/*; do
  [[ -e $f ]] || continue
  [[ $f != *.json ]] || whole_json "$f" || fail "validate, SIGINT: $f is half-written"
done
no_temporaries "$tmp/v"

if [[ $failures -gt 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all fault cases passed"
