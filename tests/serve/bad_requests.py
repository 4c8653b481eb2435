#!/usr/bin/env python3
"""The HTTP bad-request corpus (issues 14 and 18), run as an outside client would: `serf serve
--emulate --http` under mpiexec (3 ranks, the tiny model's input shape), attacked over raw sockets
with malformed, truncated, oversized, slow and abandoned requests. Every bad request must get the
right 4xx/5xx with a JSON body {"error": "..."} naming what is wrong (never a 200, never a crash),
a good request must still be answered right after each, and at SIGTERM rank 0's line
"received N = answered + rejected + timed out + failed" must hold with N equal to the requests that
reached the model (the valid infer requests this script sent whole).

Usage: bad_requests.py (SERF, MPIEXEC and ROOT in the environment, as tests/CMakeLists.txt sets
them) [-v]. Prints one line per failure and a count; exit 1 on failures. stdlib only.
"""
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SERF, MPIEXEC, ROOT = os.environ["SERF"], os.environ["MPIEXEC"], os.environ["ROOT"]
VERBOSE = "-v" in sys.argv[1:]
EMU = os.path.join(ROOT, "tests/mpi/emulated_profile.json")
TINY = os.path.join(ROOT, "configs/models/tiny.json")
READ_TIMEOUT_S = 2  # the server's --read-timeout
CONNECTIONS = 8     # the server's --http-connections
TMP = tempfile.mkdtemp(prefix="serf_bad_requests_")
failures = []
cases = 0
reached = 0  # valid infer requests sent whole: rank 0 must count exactly these


def fail(what, why):
    failures.append("%s: %s" % (what, why))


# --- the server -----------------------------------------------------------------------------------
def start_server():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out, err = open(os.path.join(TMP, "o"), "w+"), open(os.path.join(TMP, "e"), "w+")
    proc = subprocess.Popen([MPIEXEC, "--oversubscribe", "-np", "3", SERF, "serve", "--emulate", EMU,
                             "--model", TINY, "--http", "127.0.0.1:0", "--read-timeout",
                             str(READ_TIMEOUT_S), "--http-connections", str(CONNECTIONS),
                             "--max-body-mb", "1", "--out", os.path.join(TMP, "run.json")],
                            stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = open(out.name).read()
        m = re.search(r"KServe v2 HTTP on http://([0-9.]+):(\d+).*rank 0 is pid (\d+)", text)
        if m:
            return proc, (m.group(1), int(m.group(2))), int(m.group(3))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("FAIL: the server did not listen within 60 s: %s %s" % (
        open(out.name).read(), open(err.name).read()))


proc, ADDR, RANK0 = start_server()
meta_shape = None


# --- a raw HTTP client ----------------------------------------------------------------------------
pending = {}  # bytes read past an answer, per socket number (pipelined answers)


def connect(timeout=15):
    s = socket.create_connection(ADDR, timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending.pop(s.fileno(), None)  # a closed socket's number is reused: its bytes are not ours
    return s


def read_response(s):
    """(status, headers (lower-case names), body) of one answer; None if the server closed or
    reset without one."""
    data = pending.pop(s.fileno(), b"")
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                return None
            rest += chunk
        pending[s.fileno()] = rest[n:]
        return status, headers, rest[:n]
    except (ConnectionResetError, socket.timeout, OSError):
        return None


def raw(payload, timeout=15):
    """Sends `payload` (bytes) on a new connection and reads one answer."""
    s = connect(timeout)
    try:
        s.sendall(payload)
        return read_response(s)
    finally:
        s.close()


def post(body, path="/v2/models/tiny/infer", headers=None, timeout=15):
    h = {"Host": "x", "Content-Length": str(len(body)), "Content-Type": "application/json"}
    h.update(headers or {})
    head = "POST %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in h.items() if kv[1] is not None)
    return raw(head.encode("latin-1") + b"\r\n" + body, timeout)


def get(path):
    return raw(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode("latin-1"))


def good_body(values=None):
    n = 1
    for d in meta_shape:
        n *= d
    return json.dumps({"inputs": [{"name": "input", "shape": meta_shape, "datatype": "FP32",
                                   "data": values or [0.5] * n}]}).encode()


def binary_body(header, raw_bytes):
    h = json.dumps(header).encode()
    return h + raw_bytes, {"Inference-Header-Content-Length": str(len(h)),
                           "Content-Type": "application/octet-stream"}


def expect_error(what, answer, statuses, words=()):
    """A refusal: one of `statuses`, a JSON {"error": text} whose text holds every one of `words`
    (case-insensitive)."""
    global cases
    cases += 1
    if answer is None:
        return fail(what, "no answer (closed or reset), want %s" % statuses)
    status, _, body = answer
    problems = []
    if status not in statuses:
        problems.append("status %d, want %s" % (status, statuses))
    try:
        error = json.loads(body)["error"]
        if not isinstance(error, str) or not error:
            problems.append("empty error")
        for w in words:
            if w.lower() not in error.lower():
                problems.append("the error does not say %r" % w)
    except (ValueError, KeyError, TypeError):
        problems.append("the body is not {\"error\": ...}")
    if problems:
        fail(what, "; ".join(problems) + " | %r" % body[:300])
    elif VERBOSE:
        print("ok   %s -> %d %s" % (what, status, body[:160].decode("utf-8", "replace")))


def expect_good(what, answer):
    """A valid request's answer: 200 with the model's output."""
    global cases
    cases += 1
    if answer is None:
        return fail(what, "no answer to a good request")
    status, headers, body = answer
    try:
        doc = json.loads(body)
        out = doc["outputs"][0]
        # Emulated nodes compute nothing: an empty output, said so in the answer's parameters.
        ok = (status == 200 and doc["model_name"] == "tiny" and out["name"] == "output"
              and (len(out["data"]) > 0 or doc["parameters"]["emulated"] is True))
    except (ValueError, KeyError, TypeError, IndexError):
        ok = False
    if not ok:
        fail(what, "good request answered %d %r" % (status, body[:300]))


def still_serving(after):
    global reached
    reached += 1
    expect_good("a good request after " + after, post(good_body()))


# --- the cases ------------------------------------------------------------------------------------
answer = get("/v2/models/tiny")
meta_shape = json.loads(answer[2])["inputs"][0]["shape"]
N = 1
for d in meta_shape:
    N *= d
still_serving("start")
GOOD = good_body()
PATH = "/v2/models/tiny/infer"


def infer_doc(**tensor):
    t = {"name": "input", "shape": meta_shape, "datatype": "FP32", "data": [0.5] * N}
    t.update(tensor)
    return {"inputs": [t]}


def body_of(doc):
    return json.dumps(doc).encode()


# Malformed and truncated JSON, bodies of the wrong kind.
for name, body, words in [
        ("malformed JSON", b"{not json", ["malformed JSON"]),
        ("truncated JSON", GOOD[: len(GOOD) // 2], ["malformed JSON"]),
        ("truncated after the data", GOOD[:-3], ["malformed JSON"]),
        ("empty body", b"", ["malformed JSON"]),
        ("a JSON array", b"[1, 2]", ["JSON object"]),
        ("no inputs", b"{}", ["inputs"]),
        ("two inputs", body_of({"inputs": [infer_doc()["inputs"][0]] * 2}), ["inputs"]),
        ("inputs not an array", b'{"inputs": 5}', ["inputs"]),
        ("duplicate key", GOOD.replace(b'"inputs":', b'"inputs": [], "inputs":', 1), ["twice"]),
        ("id not a string", body_of(dict(infer_doc(), id=5)), ["id"]),
        ("non-UTF-8 in a name", GOOD.replace(b'"input"', b'"in\xff\xfeput"', 1), []),
        ("non-UTF-8 outside strings", GOOD.replace(b"{", b"{\xff", 1), ["malformed JSON"]),
        ("NUL bytes", b"\x00" * 64, ["malformed JSON"])]:
    expect_error(name, post(body), [400], words)
still_serving("malformed JSON")

# Wrong shape, datatype, size; bad values.
for name, doc, words in [
        ("wrong shape", infer_doc(shape=meta_shape[:-1] + [meta_shape[-1] + 1]), ["shape", "the model takes"]),
        ("shape of strings", infer_doc(shape=["a"]), ["shape"]),
        ("negative dimension", infer_doc(shape=[-1] + meta_shape[1:]), ["shape"]),
        ("huge shape", infer_doc(shape=[1 << 62, 1 << 62]), ["shape"]),
        ("no shape", {"inputs": [{"name": "input", "datatype": "FP32", "data": [0.5] * N}]}, ["shape"]),
        ("datatype INT32", infer_doc(datatype="INT32"), ["datatype"]),
        ("datatype missing", {"inputs": [{"name": "input", "shape": meta_shape, "data": [0.5] * N}]}, ["datatype"]),
        ("one value too many", infer_doc(data=[0.5] * (N + 1)), ["values", "shape"]),
        ("one value too few", infer_doc(data=[0.5] * (N - 1)), ["values", "shape"]),
        ("no data", {"inputs": [{"name": "input", "shape": meta_shape, "datatype": "FP32"}]}, ["data"]),
        ("data not an array", infer_doc(data=0.5), ["data"]),
        ("data of strings", infer_doc(data=["0.5"] * N), ["number"]),
        ("data with null", infer_doc(data=[None] + [0.5] * (N - 1)), ["number"]),
        ("data with true", infer_doc(data=[True] + [0.5] * (N - 1)), ["number"]),
        ("data 1e39 (over FP32)", infer_doc(data=[1e39] + [0.5] * (N - 1)), ["FP32"]),
        ("nested wrong depth", infer_doc(data=[[[0.5]]] * N), ["data"]),
        ("nested wrong lengths", infer_doc(data=[[0.5] * (N + 1)]), ["data"]),
        ("unknown input", infer_doc(name="image"), ["unknown input", "image"]),
        ("input name not a string", infer_doc(name=7), ["name"]),
        ("parameters not an object", infer_doc(parameters=[1]), ["parameters"]),
        ("timeout negative", dict(infer_doc(), parameters={"timeout": -1}), ["timeout"]),
        ("timeout a string", dict(infer_doc(), parameters={"timeout": "5"}), ["timeout"])]:
    expect_error(name, post(body_of(doc)), [400], words)
# Non-finite numbers are not JSON; nlohmann refuses them, the fast path too.
for literal in [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"0x10", b"01", b"1.", b".5", b"+1"]:
    body = GOOD.replace(b"0.5", literal, 1)
    expect_error("data with %s" % literal.decode(), post(body), [400], [])
still_serving("bad tensors")

# Unknown model, version, output; classification.
for name, path, body, words in [
        ("unknown model", "/v2/models/nope/infer", GOOD, ["unknown model"]),
        ("unknown version", "/v2/models/tiny/versions/99/infer", GOOD, ["version"]),
        ("empty model name", "/v2/models//infer", GOOD, []),
        ("unknown output", PATH, body_of(dict(infer_doc(), outputs=[{"name": "scores"}])), ["unknown output"]),
        ("two outputs", PATH, body_of(dict(infer_doc(), outputs=[{"name": "output"}] * 2)), ["outputs"]),
        ("output not an object", PATH, body_of(dict(infer_doc(), outputs=[5])), ["outputs[0]"]),
        ("binary_data a string", PATH,
         body_of(dict(infer_doc(), outputs=[{"name": "output", "parameters": {"binary_data": "yes"}}])),
         ["binary_data"])]:
    expect_error(name, post(body, path), [400, 404], words)
for k in [0, -1, 1 << 40, 1 << 64, 2.5, "3", None, 1e30]:
    doc = dict(infer_doc(), outputs=[{"name": "output", "parameters": {"classification": k}}])
    expect_error("classification %r" % (k,), post(body_of(doc)), [400], ["classification"])
still_serving("unknown names")

# Triton's binary tensor extension.
RAW = struct.pack("<%df" % N, *([0.5] * N))
HEADER = {"inputs": [{"name": "input", "shape": meta_shape, "datatype": "FP32",
                      "parameters": {"binary_data_size": len(RAW)}}]}
body, headers = binary_body(HEADER, RAW)
reached += 1
expect_good("a good binary request", post(body, headers=headers))
hlen = int(headers["Inference-Header-Content-Length"])
for name, value, words in [("larger than the body", str(len(body) + 1), ["Inference-Header-Content-Length"]),
                           ("negative", "-5", ["Inference-Header-Content-Length"]),
                           ("not a number", "abc", ["Inference-Header-Content-Length"]),
                           ("2^64", str(1 << 64), ["Inference-Header-Content-Length"]),
                           ("empty", "", ["Inference-Header-Content-Length"]),
                           ("cutting the JSON", str(hlen - 2), ["malformed JSON"]),
                           ("zero", "0", ["malformed JSON"])]:
    expect_error("Inference-Header-Content-Length " + name,
                 post(body, headers=dict(headers, **{"Inference-Header-Content-Length": value})), [400], words)
for name, size, data, words in [
        ("binary_data_size one short", len(RAW) - 4, RAW, ["binary_data_size"]),
        ("binary_data_size one float more", len(RAW) + 4, RAW + RAW[:4], ["binary_data_size"]),
        ("binary_data_size past the body", len(RAW), RAW[:-4], ["binary_data_size"]),
        ("bytes after the tensors", len(RAW), RAW + b"\0\0\0\0", ["after"]),
        ("binary_data_size 2^63", 1 << 63, RAW, ["binary_data_size"]),
        ("binary_data_size 2^64-1", (1 << 64) - 1, RAW, ["binary_data_size"]),
        ("binary_data_size negative", -4, RAW, ["binary_data_size"]),
        ("binary_data_size 1.5", 1.5, RAW, ["binary_data_size"]),
        ("binary_data_size a string", str(len(RAW)), RAW, ["binary_data_size"]),
        ("binary NaN", len(RAW), struct.pack("<f", float("nan")) + RAW[4:], ["NaN"]),
        ("binary infinity", len(RAW), struct.pack("<f", float("inf")) + RAW[4:], ["infinity"])]:
    h = json.loads(json.dumps(HEADER))
    h["inputs"][0]["parameters"]["binary_data_size"] = size
    b, hh = binary_body(h, data)
    expect_error(name, post(b, headers=hh), [400], words)
h = json.loads(json.dumps(HEADER))
h["inputs"][0]["data"] = [0.5] * N
b, hh = binary_body(h, RAW)
expect_error("both data and binary_data_size", post(b, headers=hh), [400], ["both"])
expect_error("binary_data_size without the header", post(binary_body(HEADER, RAW)[0]), [400], [])
still_serving("binary tensors")

# Content-Length and transfer encodings.
expect_error("Content-Length over --max-body-mb", post(b"x" * ((1 << 20) + 1)), [413], ["body"])
for name, value in [("2^63", str(1 << 63)), ("2^64", str(1 << 64)), ("negative", "-1"),
                    ("not a number", "abc"), ("with spaces", "1 2")]:
    answer = raw(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n" % (PATH, value)).encode()
                 + GOOD, timeout=READ_TIMEOUT_S + 15)
    expect_error("Content-Length " + name, answer, [400, 413], [])
answer = raw(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n"
              % (PATH, len(GOOD), len(GOOD) + 1)).encode() + GOOD)
expect_error("two different Content-Lengths", answer, [400], [])
# Header lines that are not NAME: VALUE (RFC 9112 sections 2.2 and 5; cpp-httplib drops them and
# served the request): 400 naming the line, the connection closed, the request not served.
for name, line in [("a header line without a colon", "X-Oops"),
                   ("whitespace before the colon", "Accept : */*"),
                   ("a folded header line", " folded"),
                   ("an empty header name", ": v"),
                   ("a header name with a space", "X A: 1")]:
    s = connect()
    s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Length: %d\r\n\r\n"
               % (PATH, line, len(GOOD))).encode() + GOOD)
    expect_error(name, read_response(s), [400], ["header line", line.strip()])
    cases += 1
    if read_response(s) is not None:
        fail(name, "a second answer: the connection was not closed")
    s.close()
start = time.monotonic()
answer = raw(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (PATH, len(GOOD) + 100)).encode()
             + GOOD, timeout=READ_TIMEOUT_S + 15)
expect_error("a body shorter than its Content-Length", answer, [400, 408], [])
if time.monotonic() - start > READ_TIMEOUT_S + 10:
    fail("a body shorter than its Content-Length", "answered after %.1f s, read timeout %d s"
         % (time.monotonic() - start, READ_TIMEOUT_S))
answer = raw(("POST %s HTTP/1.1\r\nHost: x\r\n\r\n" % PATH).encode() + GOOD)
expect_error("no Content-Length", answer, [400, 411], [])
# A body longer than its Content-Length: the rest is the next request on the connection, which is
# not HTTP; the first is answered.
s = connect()
s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (PATH, len(GOOD))).encode()
          + GOOD + b"garbage garbage\r\n\r\n")
reached += 1
expect_good("a body longer than its Content-Length (the request)", read_response(s))
expect_error("a body longer than its Content-Length (the rest)", read_response(s), [400], [])
s.close()


def chunked(body, sizes):
    out, at = b"", 0
    for n in sizes:
        out += b"%x\r\n" % n + body[at:at + n] + b"\r\n"
        at += n
    return out + b"%x\r\n" % (len(body) - at) + body[at:] + b"\r\n0\r\n\r\n"


head = ("POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" % PATH).encode()
reached += 1
expect_good("a chunked body", raw(head + chunked(GOOD, [10, 100, 7])))
expect_error("a chunked body with a bad chunk size", raw(head + b"zz\r\n" + GOOD + b"\r\n0\r\n\r\n"), [400], [])
expect_error("a chunked body cut short", raw(head + b"ffff\r\n" + GOOD[:10]), [400, 408], [])
expect_error("a chunked body of malformed JSON", raw(head + chunked(b"{oops", [])), [400], ["malformed JSON"])
expect_error("chunked over --max-body-mb", raw(head + chunked(b"x" * ((1 << 20) + 10), [1 << 19] * 2),
                                                timeout=30), [413], ["body"])
still_serving("framing")

# Methods and paths.
for name, request, statuses in [
        ("unknown method", "FROB /v2 HTTP/1.1\r\nHost: x\r\n\r\n", [400, 404, 405, 501]),
        ("PUT on infer", "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" % PATH, [404, 405]),
        ("GET on infer", "GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % PATH, [404, 405]),
        ("DELETE a model", "DELETE /v2/models/tiny HTTP/1.1\r\nHost: x\r\n\r\n", [404, 405]),
        ("unknown path", "GET /v3/nothing HTTP/1.1\r\nHost: x\r\n\r\n", [404]),
        ("path traversal", "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", [400, 404]),
        ("HTTP/2.0 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", [400, 404, 405, 505]),
        ("no version", "GET /v2\r\n\r\n", [400]),
        ("garbage request line", "\x16\x03\x01 hello\r\n\r\n", [400]),
        ("a 100 KB header", "GET /v2 HTTP/1.1\r\nX-Big: %s\r\n\r\n" % ("a" * 100000), [400, 431]),
        ("unknown model metadata", "GET /v2/models/nope HTTP/1.1\r\nHost: x\r\n\r\n", [400, 404])]:
    expect_error(name, raw(request.encode("latin-1")), statuses, [])
still_serving("methods and paths")

# A header sent byte by byte, slower than the read timeout allows in total: answered 408 (or closed)
# within the read timeout plus slack, and the server keeps serving.
s = connect(timeout=READ_TIMEOUT_S + 20)
start = time.monotonic()
closed_at = None
request = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (PATH, len(GOOD))).encode()
for byte in request:
    try:
        s.sendall(bytes([byte]))
    except OSError:
        break
    time.sleep(0.2)
    if time.monotonic() - start > READ_TIMEOUT_S + 10:
        break
answer = read_response(s)
took = time.monotonic() - start
s.close()
cases += 1
if answer is not None and answer[0] not in (400, 408):
    fail("a slow header", "answered %d" % answer[0])
if took > READ_TIMEOUT_S + 10:
    fail("a slow header", "the connection stayed open %.1f s, read timeout %d s" % (took, READ_TIMEOUT_S))
still_serving("a slow header")

# Slow clients (issue 14). A head sent a byte a second, and a body sent a byte a second after a
# whole head, on two connections at once: each is answered 408 naming the late part and the read
# timeout, within it plus slack, and counted in serf_http_read_timeouts_total{part}; good requests
# on other connections are answered meanwhile. A third connection sends nothing: it is closed
# without an answer after the keep-alive time (5 s) and counted in
# serf_http_silent_connections_total.
def metric(name):
    answer = get("/metrics")
    m = re.search(r"^%s (\S+)$" % re.escape(name), answer[2].decode(), re.M) if answer else None
    return float(m.group(1)) if m else None


def trickle(first, rest, result):
    """Sends `first`, then `rest` a byte a second until the server answers or closes; stores the
    answer (None: closed without one) and the seconds it took."""
    s = connect(timeout=READ_TIMEOUT_S + 20)
    start = time.monotonic()
    answer = None
    try:
        s.sendall(first)
        for byte in rest:
            if select.select([s], [], [], 1.0)[0] or time.monotonic() - start > READ_TIMEOUT_S + 10:
                break  # answered or closed: stop sending
            s.sendall(bytes([byte]))
        answer = read_response(s)
    except OSError:
        pass
    finally:
        s.close()
    result.extend([answer, time.monotonic() - start])


def silent(result):
    """Connects and sends nothing: the answer (None: closed without one) and the seconds it took."""
    s = connect(timeout=READ_TIMEOUT_S + 20)
    start = time.monotonic()
    answer = read_response(s)
    s.close()
    result.extend([answer, time.monotonic() - start])


HEAD_TIMEOUTS = 'serf_http_read_timeouts_total{part="head"}'
BODY_TIMEOUTS = 'serf_http_read_timeouts_total{part="body"}'
SILENT = "serf_http_silent_connections_total"
before = {m: metric(m) for m in (HEAD_TIMEOUTS, BODY_TIMEOUTS, SILENT)}
slow = {"a head sent a byte a second": ("head", (request[:1], request[1:] + GOOD, [])),
        "a body sent a byte a second": ("body", (request + GOOD[:1], GOOD[1:], [])),
        "a connection that sends nothing": (None, ([],))}
threads = [threading.Thread(target=trickle if part else silent, args=args)
           for part, args in slow.values()]
for t in threads:
    t.start()
served = 0
while any(t.is_alive() for t in threads[:2]):
    reached += 1
    expect_good("a good request beside slow clients", post(GOOD))
    served += 1
    time.sleep(0.2)
for t in threads:
    t.join()
cases += 1
if served < 2:
    fail("slow clients", "only %d good requests answered while they held on" % served)
for name, (part, args) in slow.items():
    answer, took = args[-1]
    cases += 1
    if part is None:
        if answer is not None or not 3 <= took <= 15:
            fail(name, "answered %r after %.1f s; want closed without an answer after the "
                 "keep-alive time (5 s)" % (answer and answer[0], took))
        continue
    expect_error(name, answer, [408], [part, "read timeout", "--read-timeout %d s" % READ_TIMEOUT_S])
    if took > READ_TIMEOUT_S + 5:
        fail(name, "answered after %.1f s, read timeout %d s" % (took, READ_TIMEOUT_S))
after = {m: metric(m) for m in before}
for m, want in ((HEAD_TIMEOUTS, 1), (BODY_TIMEOUTS, 1), (SILENT, 1)):
    cases += 1
    if before[m] is None or after[m] != before[m] + want:
        fail("slow clients", "%s %s -> %s, want %d more" % (m, before[m], after[m], want))
still_serving("slow clients")

# Framing that httplib would wait on until the read timeout is refused from the head at once:
# the request's connection stays open, its body never comes, and the answer is not a 408.
for name, head, statuses, words in [
        ("a Content-Length over --max-body-mb, no body sent", "Content-Length: %d" % (1 << 63), [413], ["body"]),
        ("Content-Length -1, no body sent", "Content-Length: -1", [400], ["Content-Length"]),
        ("Content-Length 2^64, no body sent", "Content-Length: %d" % (1 << 64), [413], ["body"]),
        ("a POST without Content-Length, its connection open", "Content-Type: application/json", [411],
         ["Content-Length"]),
        ("a transfer coding other than chunked", "Transfer-Encoding: gzip", [501], ["chunked"])]:
    expect_error(name, raw(("POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n" % (PATH, head)).encode(),
                           timeout=READ_TIMEOUT_S + 15), statuses, words)
still_serving("framing refused from the head")

# A client that disconnects mid-request: the request never reaches the model.
for cut in (10, len(request) + len(GOOD) // 2):
    s = connect()
    s.sendall((request + GOOD)[:cut])
    s.close()
still_serving("clients that disconnected mid-request")

# Clients that never read their answers: the requests reach the model and are answered (the
# answers sit in the sockets); the server is not held up. Each socket is closed once its answer is
# there, unread: closed before, on a loaded machine a request could still be queued, and it was
# dropped as its client went away (counted timed out, not answered). They stay open through the
# next case: closed just before it, the server could free their slots while it runs, and a
# request meant to find every connection held was served.
unread = []
for _ in range(3):
    s = connect()
    s.sendall(request + GOOD)
    reached += 1
    unread.append(s)
still_serving("clients that do not read")
for s in unread:
    cases += 1
    if not select.select([s], [], [], 30)[0]:
        fail("clients that do not read", "no answer within 30 s")

# Many idle connections: more than --http-connections; the ones over the limit are answered 503
# with a reason at once, the server closes the idle ones after its keep-alive time, and serves again.
idle = [connect(timeout=30) for _ in range(CONNECTIONS + 4)]
expect_error("a request while every connection is held", get("/v2/models/tiny/nope"), [503], ["too many"])
start = time.monotonic()
over = 0
for s in idle:  # each is either refused at once (503) or closed by the server once idle too long
    answer = read_response(s)
    cases += 1
    if answer is not None:
        over += 1
        expect_error("a connection over --http-connections", answer, [503], ["too many connections"])
took = time.monotonic() - start
cases += 1
if over < 1 or took > 20:
    fail("many idle connections", "%d of %d answered 503, the rest closed after %.1f s" % (over, len(idle), took))
for s in idle + unread:
    s.close()
still_serving("many idle connections")

# --- the accounting at SIGTERM ----------------------------------------------------------------------
os.kill(RANK0, signal.SIGTERM)
try:
    rc = proc.wait(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = None
out = open(os.path.join(TMP, "o")).read()
err = open(os.path.join(TMP, "e")).read()
cases += 1
m = re.search(r"^received (\d+) = answered (\d+) \+ rejected (\d+) \+ timed out (\d+) \+ failed (\d+)$", out, re.M)
if rc != 0:
    fail("SIGTERM to rank 0", "exit %s | %s" % (rc, err[-500:]))
if not m:
    fail("SIGTERM to rank 0", "no accounting line | %s" % out[-500:])
else:
    r, a, j, t, f = (int(x) for x in m.groups())
    if r != a + j + t + f:
        fail("accounting", m.group(0) + " does not add up")
    if r != reached or a != reached:
        fail("accounting", "%s, but %d valid requests reached the model" % (m.group(0), reached))
    elif VERBOSE:
        print("ok   " + m.group(0))
print("%d bad-request cases, %d valid requests reached the model, %d failures" % (cases, reached, len(failures)))
for f in failures:
    print("FAIL " + f)
subprocess.run(["rm", "-rf", TMP], check=False)
sys.exit(1 if failures else 0)
