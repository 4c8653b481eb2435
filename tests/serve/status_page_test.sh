#!/usr/bin/env bash
# GET / (the status page) of `serf serve --emulate --http` under mpiexec. Usage:
# status_page_test.sh CASE, with SERF, MPIEXEC and ROOT set (tests/CMakeLists.txt does). Cases:
#   values      the page's configuration and request counts equal /metrics' after an overload
#               (answered and rejected requests), self-contained HTML, meta refresh
#   screenshot  headless Chromium renders the page (model name with HTML characters) to a PNG of
#               the size asked that is not blank; exit 77 (skip) without chromium
fail() { echo "FAIL: $*"; [ -f "$out/o" ] && cat "$out/o" "$out/e"; exit 1; }
# shellcheck source=tests/serve/serve_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
profile="$ROOT/tests/mpi/emulated_profile.json"

# stop: SIGTERM to rank 0; the service drains and exits 0.
stop() {
  kill -TERM "$RANK0"
  finish
  [ "$RC" -eq 0 ] || fail "exit $RC after SIGTERM to rank 0"
}

case "$1" in
  values)
    start 3 --http 127.0.0.1:0 --emulate "$profile" --max-queue 0
    counts=$(/usr/bin/python3 "$ROOT/tests/serve/kserve_client.py" overload "$URL" emulated-small 16 5000) \
      || fail "client overload"
    [[ $counts != *reset* ]] || fail "connections reset by the server: $counts"
    curl -sf -D "$out/headers" "$URL/" >"$out/page.html" || fail "GET /"
    curl -sf "$URL/metrics" >"$out/metrics.txt" || fail "GET /metrics"
    stop
    /usr/bin/python3 - "$out/page.html" "$out/metrics.txt" "$out/headers" <<'PY' || fail "the page differs from /metrics"
import re, sys
page, metrics, headers = (open(p).read() for p in sys.argv[1:])
assert re.search(r"(?im)^content-type: text/html", headers), headers
def cell(name):
    m = re.search(r'id="%s">([^<]*)<' % name, page)
    assert m, "no %s on the page" % name
    return m.group(1)
def metric(name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), metrics, re.M)
    assert m, "no %s%s in /metrics" % (name, labels)
    return float(m.group(1))
conf = re.search(r'^serf_configuration\{service="(\d+)",inter="(\d+)",intra="(\d+)",batch="(\d+)"\} 1$',
                 metrics, re.M).groups()
assert (cell("config-c"), cell("config-K"), cell("config-T"), cell("config-b")) == conf, conf
counts = {o: metric("serf_requests_total", '{outcome="%s"}' % o)
          for o in ("answered", "rejected", "timed_out", "failed")}
for o, ident in (("answered", "answered"), ("rejected", "rejected"), ("timed_out", "timed-out"),
                 ("failed", "failed")):
    assert int(cell(ident)) == counts[o], (o, cell(ident), counts[o])
assert int(cell("received")) == sum(counts.values()) == 32, cell("received")
assert counts["answered"] >= 1 and counts["rejected"] >= 1, counts
assert int(cell("switches")) == metric("serf_configuration_switches_total")
assert int(cell("recalibrations")) == metric("serf_recalibrations_total")
assert cell("observed-mean").endswith(" ms") and cell("observed-p99").endswith(" ms")
# The prediction is at the scheduler's observed rate: after a burst of 32 that rate can be
# beyond the configuration's capacity, where the page says n/a (no finite mean exists).
assert re.fullmatch(r"\d+\.\d\d ms|n/a", cell("predicted-mean")), cell("predicted-mean")
# The p99 beside it: predicted by the planner's tail approximation (n/a where the mean is), observed.
assert re.fullmatch(r"\d+\.\d\d ms|n/a", cell("predicted-p99")), cell("predicted-p99")
assert (cell("predicted-p99") == "n/a") == (cell("predicted-mean") == "n/a"), cell("predicted-p99")
if cell("predicted-p99") != "n/a":
    assert float(cell("predicted-p99")[:-3]) >= float(cell("predicted-mean")[:-3]), cell("predicted-p99")
metric("serf_observed_p99_latency_seconds")
metric("serf_predicted_p99_latency_seconds")
assert re.search(r'<meta http-equiv="refresh" content="\d+">', page)
assert not re.search(r"<script|<link|<img|src=|@import|url\(", page, re.I), "not self-contained"
assert "NaN" not in page and "nan" not in page.lower().split("<style>")[0]
print("ok: / shows (c,K,T,b) = (%s) and received %s = answered %s + rejected %s, as /metrics"
      % (",".join(conf), cell("received"), cell("answered"), cell("rejected")))
PY
    ;;
  screenshot)
    chrome=$(command -v chromium || command -v chromium-browser || true)
    if [ -z "$chrome" ]; then
      echo "SKIP: no chromium (scripts/setup installs Debian's chromium)"
      exit 77
    fi
    # A model name with HTML characters: the page must show it escaped.
    sed 's|"name": "tiny"|"name": "tiny<b>\&\\"x"|' "$ROOT/configs/models/tiny.json" >"$out/model.json"
    start 3 --http 127.0.0.1:0 --emulate "$profile" --model "$out/model.json"
    curl -sf "$URL/" >"$out/page.html" || fail "GET /"
    grep -q 'tiny&lt;b&gt;&amp;&quot;x' "$out/page.html" || fail "the model name is not escaped"
    ! grep -q 'tiny<b>' "$out/page.html" || fail "the model name is on the page unescaped"
    timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
      --no-first-run --user-data-dir="$out/chrome" --screenshot="$out/shot.png" \
      --window-size=1000,800 "$URL/" >"$out/chrome.log" 2>&1
    rc=$?
    stop
    [ -s "$out/shot.png" ] || { cat "$out/chrome.log"; fail "chromium wrote no screenshot (exit $rc)"; }
    /usr/bin/python3 - "$out/shot.png" <<'PY' || fail "the screenshot"
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
assert im.size == (1000, 800), im.size
colours = im.getcolors(maxcolors=1 << 20)
assert colours is not None and len(colours) > 16, "blank: %s colours" % (colours and len(colours))
# Not one colour with specks: the most common colour covers less than 98 % of the pixels.
top = max(colours)[0]
assert top < 0.98 * 1000 * 800, "nearly blank: %d of %d pixels one colour" % (top, 1000 * 800)
print("ok: chromium screenshot %dx%d with %d colours" % (im.size + (len(colours),)))
PY
    [ -n "${SERF_STATUS_PNG:-}" ] && cp "$out/shot.png" "$SERF_STATUS_PNG"
    exit 0
    ;;
  *) fail "unknown case $1" ;;
esac
