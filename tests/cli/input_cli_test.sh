#!/usr/bin/env bash
# Inputs that must be refused (issue 18): every case is exit 2 and one stderr line naming the
# input, the value and what would be accepted; nothing is read before its size and type are
# checked, nothing is written over an input.
# Usage: input_cli_test.sh SERF_BINARY PROFILE (a complete serf-profile/1 with cores_per_node 8)
set -uo pipefail
serf="$1"
profile="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# shellcheck source=expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

P=(--profile "$profile")
cfg=(--service 1 --inter 1 --intra 1 --rate 1)

# --- subcommands ------------------------------------------------------------------------------
expect 2 "unknown subcommand 'frobnicate'; expected one of: predict, plan" -- frobnicate
expect 2 "unknown subcommand 'model frobnicate'; expected one of: info" -- model frobnicate x.json

# --- what a file is, checked before reading -----------------------------------------------------
expect 2 "$tmp: is a directory; give a file" -- predict --profile "$tmp" "${cfg[@]}"
expect 2 "/dev/zero: not a regular file" -- predict --profile /dev/zero "${cfg[@]}"
expect 2 "/dev/zero: not a regular file" -- plan --profile /dev/zero --rates 1 --out "$tmp/t.json"
mkfifo "$tmp/fifo"
expect 2 "$tmp/fifo: not a regular file" -- predict --profile "$tmp/fifo" "${cfg[@]}"
expect 2 "$tmp/fifo: not a regular file" -- model info "$tmp/fifo"
expect 2 "missing.json: cannot open file: no such file" -- predict --profile "$tmp/missing.json" "${cfg[@]}"
# Permission denied (root reads everything: the case runs as nobody there).
cp "$profile" "$tmp/secret.json"
chmod 000 "$tmp/secret.json"
chmod 755 "$tmp"
as_user=()
if [[ $(id -u) -eq 0 ]]; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
if "${as_user[@]}" test -x "$serf"; then
  "${as_user[@]}" "$serf" predict --profile "$tmp/secret.json" "${cfg[@]}" >/dev/null 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq 2 ]] && grep -qF "secret.json: cannot open file: permission denied" "$tmp/err"; then
    echo "ok   permission denied -> $(cat "$tmp/err")"
  else
    fail "unreadable profile -> exit $rc: $(cat "$tmp/err")"
  fi
else
  echo "skip permission denied: $serf is not executable as an unprivileged user"
fi
chmod 700 "$tmp"

# --- JSON: duplicate keys and wrong types, in every input file ---------------------------------
/usr/bin/python3 - "$profile" "$tmp" <<'EOF'
import json, sys
src, tmp = sys.argv[1], sys.argv[2]
text = open(src).read()
doc = json.loads(text)
# A duplicated key inside a tuple: the last one (900 ms) would win silently.
t = text.replace('"mean_ms":', '"mean_ms": 900, "mean_ms":', 1)
open(tmp + "/dup_tuple.json", "w").write(t)
open(tmp + "/dup_root.json", "w").write('{"format": "serf-profile/1", "format": "x"}')
for name, value in [("illustrative", "yes"), ("illustrative", 1), ("note", 5), ("incomplete", "no")]:
    d = dict(doc)
    d[name] = value
    open("%s/type_%s_%s.json" % (tmp, name, type(value).__name__), "w").write(json.dumps(d))
# Incomplete profiles: the field, and the note an older serf profile wrote.
d = dict(doc); d["incomplete"] = True; d["note"] = "incomplete: node rank 1 died"
open(tmp + "/incomplete.json", "w").write(json.dumps(d))
d = dict(doc); d.pop("incomplete", None); d["note"] = "incomplete: the job was terminated"
open(tmp + "/incomplete_note.json", "w").write(json.dumps(d))
open(tmp + "/spec_dup.json", "w").write(
    '{"name": "m", "name": "n", "input": [4], "layers": [{"type": "fc", "out": 2}]}')
EOF
expect 2 "dup_tuple.json: key tuples[0].mean_ms appears twice in one object" -- predict --profile "$tmp/dup_tuple.json" "${cfg[@]}"
expect 2 "dup_root.json: key format appears twice in one object" -- plan --profile "$tmp/dup_root.json" --rates 1 --out "$tmp/t.json"
expect 2 "spec_dup.json: key name appears twice in one object" -- model info "$tmp/spec_dup.json"
expect 2 "illustrative: expected true or false, got \"yes\"" -- predict --profile "$tmp/type_illustrative_str.json" "${cfg[@]}"
expect 2 "illustrative: expected true or false, got 1" -- simulate --profile "$tmp/type_illustrative_int.json" "${cfg[@]}" --requests 1000
expect 2 "note: expected a string" -- predict --profile "$tmp/type_note_int.json" "${cfg[@]}"
expect 2 "incomplete: expected true or false" -- predict --profile "$tmp/type_incomplete_str.json" "${cfg[@]}"

# --- a profile a dead node left incomplete: refused unless --allow-incomplete ---------------------
expect 2 "incomplete.json: the profile is incomplete (incomplete: node rank 1 died;" -- plan --profile "$tmp/incomplete.json" --rates 1 --out "$tmp/t.json"
expect 2 "give --allow-incomplete to use it anyway" -- plan --profile "$tmp/incomplete_note.json" --rates 1 --out "$tmp/t.json"
expect 2 "the profile is incomplete" -- predict --profile "$tmp/incomplete.json" "${cfg[@]}"
"$serf" plan --profile "$tmp/incomplete.json" --allow-incomplete --rates 1 --out "$tmp/t.json" >/dev/null 2>"$tmp/err"
rc=$?
[[ $rc -eq 0 ]] && [[ -s "$tmp/t.json" ]] && echo "ok   plan --allow-incomplete -> exit 0" \
  || fail "plan --allow-incomplete -> exit $rc: $(cat "$tmp/err")"

# --- numbers ----------------------------------------------------------------------------------
for seed in 18446744073709551616 1e30 -1 1.5; do
  expect 2 "--seed: must be an integer in [0, 18446744073709551615] (got $seed)" -- simulate "${P[@]}" "${cfg[@]}" --seed "$seed"
done
# The label of a percentile is the number the CLI accepted, never rounded to p100.
"$serf" plan "${P[@]}" --rates 1 --objective p99.999999 --tail-method model --out "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"
if grep -q "p99.999999" "$tmp/out" && ! grep -q "p100" "$tmp/out" "$tmp/t.json"; then
  echo "ok   --objective p99.999999 is labelled p99.999999"
else
  fail "--objective p99.999999 label: $(cat "$tmp/out" "$tmp/err")"
fi

# --- outputs: never empty, never an input ---------------------------------------------------------
expect 2 "--out: the path is empty; give a file name" -- plan "${P[@]}" --rates 1 --out ""
cp "$profile" "$tmp/own.json"
ln -s "$tmp/own.json" "$tmp/link.json"
ln "$tmp/own.json" "$tmp/hard.json"
before=$(md5sum <"$tmp/own.json")
expect 2 "is the same file as --profile" -- plan --profile "$tmp/own.json" --rates 1 --out "$tmp/own.json"
expect 2 "is the same file as --profile" -- plan --profile "$tmp/own.json" --rates 1 --out "$tmp/link.json"
expect 2 "is the same file as --profile" -- plan --profile "$tmp/link.json" --rates 1 --out "$tmp/hard.json"
[[ $(md5sum <"$tmp/own.json") == "$before" ]] && echo "ok   the profile is unchanged" || fail "plan overwrote its --profile"

# --- an allocation that fails is exit 2 and one line (a sparse 900 MB file under ulimit -v) ------
# Not with AddressSanitizer (scripts/test --sanitize): it reserves terabytes of address space for
# its shadow memory at start, so no instrumented binary starts under ulimit -v at all.
# The libraries are read first: `ldd | grep -q` under pipefail fails when grep's early exit
# makes ldd die of SIGPIPE, and the case then ran under ASan (session 34).
libs=$(ldd "$serf" 2>/dev/null || true)
if [[ $libs == *libasan* ]]; then
  echo "skip ulimit -v: $serf is built with AddressSanitizer, which cannot start under ulimit -v"
else
  truncate -s 900M "$tmp/big.json"
  (ulimit -v 600000 && exec "$serf" predict --profile "$tmp/big.json" "${cfg[@]}") >/dev/null 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq 2 ]] && [[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "out of memory: an allocation failed under this process's address-space limit" "$tmp/err"; then
    echo "ok   ulimit -v -> $(cat "$tmp/err")"
  else
    fail "bad_alloc under ulimit -v -> exit $rc: $(cat "$tmp/err")"
  fi
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all input cases passed"
