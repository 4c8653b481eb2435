"""A small KServe v2 client on Python's standard library, for the front-end tests.

Usage: kserve_client.py COMMAND URL [ARGS...]
  check URL MODEL                 health, metadata, infer (JSON flat/nested, binary), bad requests,
                                  statistics; prints "ok: ..." lines, exits 1 on a mismatch
  overload URL MODEL N TIMEOUT_US N concurrent requests, then N with a timeout: prints the counts
                                  of each status as JSON ("reset": connections reset by the server)
  infer URL MODEL INPUT.safetensors OUT.json   one binary and one JSON request of the input;
                                  writes both answers' outputs (float32 values) to OUT.json
"""
import concurrent.futures
import http.client
import json
import struct
import sys
import urllib.parse


def connect(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def request(url, method, path, body=None, headers=None):
    c = connect(url)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    out = (r.status, dict(r.getheaders()), data)
    c.close()
    return out


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def infer_json(values, shape, outputs=None, parameters=None):
    doc = {"inputs": [{"name": "input", "shape": shape, "datatype": "FP32", "data": values}]}
    if outputs is not None:
        doc["outputs"] = outputs
    if parameters is not None:
        doc["parameters"] = parameters
    return json.dumps(doc).encode()


def infer_binary(values, shape, binary_output=True):
    raw = struct.pack("<%df" % len(values), *values)
    header = {"inputs": [{"name": "input", "shape": shape, "datatype": "FP32",
                          "parameters": {"binary_data_size": len(raw)}}],
              "outputs": [{"name": "output", "parameters": {"binary_data": binary_output}}]}
    h = json.dumps(header).encode()
    return h + raw, {"Inference-Header-Content-Length": str(len(h)),
                     "Content-Type": "application/octet-stream"}


def decode_binary(headers, data):
    n = int(headers["Inference-Header-Content-Length"])
    header = json.loads(data[:n])
    raw = data[n:]
    out = header["outputs"][0]
    size = out["parameters"]["binary_data_size"]
    assert size == len(raw), (size, len(raw))
    return list(struct.unpack("<%df" % (size // 4), raw))


def check(url, model):
    expect(request(url, "GET", "/v2/health/live")[0] == 200, "live")
    expect(request(url, "GET", "/v2/health/ready")[0] == 200, "ready")
    status, _, body = request(url, "GET", "/v2/models/" + model)
    meta = json.loads(body)
    expect(status == 200 and meta["name"] == model, "metadata: %s" % body)
    shape = meta["inputs"][0]["shape"]
    n = 1
    for d in shape:
        n *= d
    print("ok: metadata, input shape %s" % shape)
    path = "/v2/models/%s/infer" % model
    status, _, body = request(url, "POST", path, infer_json([0.5] * n, shape))
    expect(status == 200, "infer: %d %s" % (status, body))
    status, headers, data = request(url, "POST", path, *infer_binary([0.5] * n, shape))
    expect(status == 200 and "Inference-Header-Content-Length" in headers, "binary infer")
    print("ok: infer with JSON and with binary tensors")
    bad = [(infer_json([0.5] * (n + 1), shape), "values, but shape"),
           (b"{not json", "malformed JSON"),
           (infer_json([0.5] * n, shape[:-1] + [shape[-1] + 1]), "the model takes")]
    for payload, text in bad:
        status, _, body = request(url, "POST", path, payload)
        expect(status == 400 and text in json.loads(body)["error"], "bad request: %d %s" % (status, body))
    status, _, body = request(url, "POST", "/v2/models/nope/infer", infer_json([0.5] * n, shape))
    expect(status == 400 and "unknown model" in json.loads(body)["error"], "unknown model")
    print("ok: %d bad requests answered 400 with the reason" % (len(bad) + 1))
    status, _, body = request(url, "GET", "/v2/models/%s/stats" % model)
    stats = json.loads(body)["model_stats"][0]
    expect(status == 200 and stats["inference_count"] == 2, "stats: %s" % body)
    print("ok: statistics count 2 inferences")


def overload(url, model, count, timeout_us):
    status, _, body = request(url, "GET", "/v2/models/" + model)
    shape = json.loads(body)["inputs"][0]["shape"]
    if any(d < 0 for d in shape):
        shape = [1, 4]  # an emulated model without a spec takes any shape
    n = 1
    for d in shape:
        n *= d
    path = "/v2/models/%s/infer" % model

    def send(params):
        # A reset is counted, not a crash: the caller says which statuses it accepts.
        try:
            return request(url, "POST", path, infer_json([0.25] * n, shape, parameters=params))[0]
        except (ConnectionResetError, BrokenPipeError):
            return "reset"

    counts = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        plain = list(pool.map(send, [None] * count))
        timed = list(pool.map(send, [{"timeout": timeout_us}] * count))
    for s in plain + timed:
        counts[str(s)] = counts.get(str(s), 0) + 1
    print(json.dumps(counts, sort_keys=True))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    t = header["input"]
    begin, end = t["data_offsets"]
    return t["shape"], list(struct.unpack("<%df" % ((end - begin) // 4), data[begin:end]))


def infer(url, model, input_path, out_path):
    shape, values = read_safetensors(input_path)
    path = "/v2/models/%s/infer" % model
    status, headers, data = request(url, "POST", path, *infer_binary(values, shape))
    expect(status == 200, "binary infer: %d %s" % (status, data[:200]))
    binary = decode_binary(headers, data)
    status, _, body = request(url, "POST", path, infer_json(values, shape))
    expect(status == 200, "JSON infer: %d %s" % (status, body[:200]))
    as_json = json.loads(body)["outputs"][0]["data"]
    json.dump({"binary": binary, "json": as_json}, open(out_path, "w"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "check":
        check(sys.argv[2], sys.argv[3])
    elif cmd == "overload":
        overload(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    elif cmd == "infer":
        infer(*sys.argv[2:6])
    else:
        fail("unknown command " + cmd)
