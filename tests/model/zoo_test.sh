#!/usr/bin/env bash
# The zoo (slow): scripts/make_zoo rebuilds resnet50, vgg16 and mobilenet_v2 from torchvision with
# seeded weights, the specs it writes equal the committed configs/models/*.json, and `serf infer`
# on the imported weights equals torchvision's own output (max relative error <= 1e-4, top-5
# equal) unpartitioned and over K = 2, 3, 4 in-process ranks. Exit 77 (CTest skip) without
# python3-torchvision.
set -uo pipefail
serf="$1"; root="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$root/scripts/make_zoo" --serf "$serf" --spec-dir "$tmp" --weights-dir "$tmp" \
  --check 1,2,3,4 > "$tmp/log" 2> "$tmp/err"
rc=$?
grep '^{' "$tmp/log"
[ $rc = 77 ] && { echo "skipped: $(tail -1 "$tmp/err")"; exit 77; }
[ $rc = 0 ] || { tail -20 "$tmp/err"; echo "FAIL: make_zoo --check (exit $rc)"; exit 1; }
fail=0
for m in resnet50 vgg16 mobilenet_v2; do
  cmp -s "$tmp/$m.json" "$root/configs/models/$m.json" || { echo "FAIL: $m.json differs from the committed spec"; fail=1; }
done
[ $fail = 0 ] && echo "ok: the committed zoo specs are what scripts/make_zoo makes"
exit $fail
