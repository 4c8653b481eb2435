#!/usr/bin/env python3
"""The bad-input corpus (issue 18), run as an outside checker would: every serf command with bad
flags and bad files. Every case must exit 2 within a time limit, with exactly one stderr line
("serf: error: ...") naming the input (the flag or the file), nothing on stdout, and no output
file left behind. Flags are read from each command's --help, so a new flag is attacked too.

Usage: bad_inputs.py SERF ROOT [--full] [-v]. Prints one line per failure and a count; exit 1 on
failures. The default run (CTest's default suite) takes a deterministic sample: every flag with
one of its attacks (a missing value, an empty one, a bad number) in turn, every bad file of a kind
on the first command that reads it and three in turn on the others;
--full (CTest label slow) takes every bad value for every flag and every bad file for every command.
Commands that run under mpirun (serve, profile) are run without it: a flag's own check must come
before the runtime's (which would only say that mpirun is missing).
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

SERF, ROOT = sys.argv[1], sys.argv[2]
VERBOSE = "-v" in sys.argv[3:]
FULL = "--full" in sys.argv[3:]
turn = [0]  # the default run's rotation through the bad values


def sample(values, k):
    """All of `values` with --full, else k of them, the next ones in turn on every call."""
    values = list(values)
    if FULL or len(values) <= k:
        return values
    start = turn[0] % len(values)
    turn[0] += k
    return [values[(start + i) % len(values)] for i in range(k)]
TMP = tempfile.mkdtemp(prefix="serf_bad_inputs_")
TOY = os.path.join(ROOT, "tests/cli/data/toy_profile.json")
EMU = os.path.join(ROOT, "tests/mpi/emulated_profile.json")
TINY = os.path.join(ROOT, "configs/models/tiny.json")
# A case still running after this is a hang (a loaded machine included); a sanitizer build's CTest
# sets SERF_TEST_TIME_SCALE (4) for its slower binaries.
LIMIT_S = 20 * int(os.environ.get("SERF_TEST_TIME_SCALE", "1"))

failures = []
cases = 0


def path(name):
    return os.path.join(TMP, name)


def write(name, text, mode="w"):
    with open(path(name), mode) as f:
        f.write(text)
    return path(name)


def run(args, timeout=LIMIT_S):
    start = time.monotonic()
    try:
        p = subprocess.run([SERF] + args, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"", b"", time.monotonic() - start
    return p.returncode, p.stdout, p.stderr, time.monotonic() - start


queued = []  # (args, names, outputs, what) of every case, run at the end (run_cases)


def check(args, names, outputs=(), what=""):
    """args must be refused: exit 2, one stderr line naming one of `names`, empty stdout, and
    none of `outputs` created (or changed, when it existed before). Queued, run by run_cases."""
    queued.append((list(args), list(names), list(outputs), what))


def own_outputs(args, outputs, index):
    """The case's args and outputs with the shared output files (OUTPUTS) moved to a folder of
    its own, so cases run at once never see each other's files."""
    folder = path("case%d" % index)
    moved = {o: os.path.join(folder, os.path.basename(o)) for o in OUTPUTS}
    if not any(a in moved for a in args) and not any(o in moved for o in outputs):
        return args, outputs
    os.mkdir(folder)
    return [moved.get(a, a) for a in args], [moved.get(o, o) for o in outputs]


def run_cases(workers):
    """Runs the queued cases, `workers` at a time (each is a process start; most of a case's time
    is loading serf), then judges them in their order."""
    global cases
    from concurrent.futures import ThreadPoolExecutor

    def one(item):
        index, (args, names, outputs, what) = item
        args, outputs = own_outputs(args, outputs, index)
        before = {o: open(o, "rb").read() if os.path.isfile(o) else None for o in outputs}
        result = run(args)
        after = {o: open(o, "rb").read() if os.path.isfile(o) else None for o in outputs}
        return args, names, before, after, what, result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for args, names, before, after, what, result in pool.map(one, enumerate(queued)):
            cases += 1
            judge(args, names, before, after, what, *result)


def judge(args, names, before, after, what, rc, out, err, took):
    label = "serf " + " ".join(repr(a) if (a == "" or " " in a) else a for a in args)
    problems = []
    if rc is None:
        problems.append("still running after %d s (hang)" % LIMIT_S)
    else:
        lines = err.decode("utf-8", "replace").splitlines()
        if rc != 2:
            problems.append("exit %d, want 2" % rc)
        if len(lines) != 1:
            problems.append("%d stderr lines, want 1" % len(lines))
        elif not lines[0].startswith("serf: error: "):
            problems.append("stderr line does not start with 'serf: error: '")
        elif not any(n in lines[0] for n in names):
            problems.append("the line names none of %s" % ", ".join(names))
        if out.strip():
            problems.append("stdout not empty: %r" % out[:120])
    for o, old in before.items():
        now = after[o]
        if now != old:
            problems.append("%s %s" % (o, "left behind" if old is None else "changed"))
    if problems:
        failures.append("%s%s: %s | %s" % (label, " (" + what + ")" if what else "",
                                            "; ".join(problems), err.decode("utf-8", "replace")[:300].strip()))
    elif VERBOSE:
        print("ok   %s -> %s (%.1f s)" % (label, err.decode().strip(), took))


# --- fixtures -------------------------------------------------------------------------------------
toy = json.load(open(TOY))
subprocess.run([SERF, "plan", "--profile", TOY, "--rates", "1,2", "--out", path("table.json")],
               capture_output=True, check=False)
table = json.load(open(path("table.json")))
measured = {"format": "serf-exhaustive/1", "model": toy["model"], "hardware": toy["hardware"],
            "total_wall_s": 4.5,
            "points": [{"service": 1, "inter": 1, "intra": 1, "batch": 1, "rate": r, "requests": 100,
                        "mean_latency_ms": 110.0, "p99_latency_ms": 180.0,
                        "mean_latency_ci95_ms": 3.5, "mean_service_ms": 100.0, "arrival_scv": 1.0,
                        "wall_s": 2.0} for r in (1.0, 2.0)]}  # a rate is a number, not an integer
write("measured.json", json.dumps(measured))
subprocess.run([SERF, "model", "init", TINY, "--out", path("w.safetensors"), "--input-out",
                path("x.safetensors")], capture_output=True, check=True)
weights = open(path("w.safetensors"), "rb").read()
os.mkdir(path("dir"))
write("empty.json", "")
os.mkfifo(path("fifo"))
LOOP = path("loop_a")  # a symlink loop: loop_a -> loop_b -> loop_a
os.symlink(path("loop_b"), LOOP)
os.symlink(LOOP, path("loop_b"))
HUGE = path("huge.json")  # 10 GiB, sparse: its size must be refused before it is read
with open(HUGE, "wb") as f:
    f.truncate(10 << 30)
# A serf serve --out run of the emulation profile whose self-calibration moved (1, 1, 1): what
# profile --refresh --drift reads of it (the other fields of a run are not read).
EMU_COPY = write("emu_copy.json", open(EMU).read())
run_doc = {"format": "serf-run/1", "model": json.load(open(EMU))["model"],
           "recalibrations": [{"tuple": [1, 1, 1]}]}
RUN = write("run.json", json.dumps(run_doc))


# --- every field of a JSON input, attacked the same way (session 28's sweep beyond flags) ---------
# Per kind: the fields a reader may go without (a missing one must be refused unless listed), the
# ones that may be null, and the number fields where a huge or negative value is a valid reading.
OPTIONAL = {
    "profile": {"illustrative", "incomplete", "note", "batch", "wall_s", "node_ms", "passes",
                "passes_kept", "refreshed_at", "drift_scale"},
    "table": {"illustrative", "all", "batch"},
    "measured": {"hardware", "total_wall_s", "batch", "p99_latency_ms", "mean_service_ms",
                 "mean_latency_ci95_ms", "arrival_scv", "wall_s", "valid", "verdict", "warmup_cut",
                 "duration_s", "ci95_rel", "trace", "best"},
}
# (A key, or the path of one: a layer may go without a name, the model may not.)
OPTIONAL["spec"] = {"description", "stride", "pad", "dilation", "inputs", "layers/0/name"}
NULLABLE = {"measured": {"mean_latency_ci95_ms", "valid", "ci95_rel"}}
# Values that are no measurement or no plan: negative everywhere, and far too large where a bound
# exists (an integer past 2^31 is refused by every reader).
NEGATIVE_OK = {"spec": {"alpha", "beta", "k"}}


def paths(doc, at=()):
    """The path of every value in `doc`: each object member, and the first element of each array
    (its other elements are read by the same code)."""
    yield at
    if isinstance(doc, dict):
        for k, x in doc.items():
            yield from paths(x, at + (k,))
    elif isinstance(doc, list) and doc:
        yield from paths(doc[0], at + (0,))


def value_at(doc, at):
    for k in at:
        doc = doc[k]
    return doc


def edited(doc, at, value=None, remove=False):
    """A copy of `doc` with the value at `at` replaced by `value` (or removed)."""
    d = json.loads(json.dumps(doc))
    parent = value_at(d, at[:-1])
    if remove:
        del parent[at[-1]]
    else:
        parent[at[-1]] = value
    return d


def with_duplicate_key(doc, at):
    """`doc` as JSON text whose object at `at` gives its first key twice, with two values."""
    def encode(x, here):
        if isinstance(x, dict):
            items = [json.dumps(k) + ": " + encode(v, here + (k,)) for k, v in x.items()]
            if here == at and x:
                first = next(iter(x))
                items.insert(0, json.dumps(first) + ": " + json.dumps([x[first], "other"]))
            return "{" + ", ".join(items) + "}"
        if isinstance(x, list):
            return "[" + ", ".join(encode(v, here + (i,)) for i, v in enumerate(x)) + "]"
        return json.dumps(x)
    return encode(doc, ())


def other_types(x):
    """Values of every other JSON type than x's."""
    if isinstance(x, bool):
        return ["true", 1, None]
    if isinstance(x, (int, float)):
        return [str(x), True, None, [x], {}]
    if isinstance(x, str):
        return [5, True, None, [x]]
    if isinstance(x, list):
        return [{}, "x", 5, None]
    return [[], "x", 5, None]


def field_attacks(kind, doc):
    """Every field of `doc` with another type, missing, negative or out of range, every object
    with a key given twice and with an unknown key: name -> text, each of which must be refused."""
    v = {}
    for at in paths(doc):
        x = value_at(doc, at)
        name = "/".join(str(k) for k in at) or "root"
        key = at[-1] if at else None
        if isinstance(x, dict):
            v["dup_key@" + name] = with_duplicate_key(doc, at)
            if kind != "run":  # a run file is a report: its reader takes the fields it needs
                v["unknown_key@" + name] = json.dumps(edited(doc, at + ("bacth",), 4))
        if not at:
            continue
        for i, y in enumerate(other_types(x)):
            if y is None and key in NULLABLE.get(kind, ()):
                continue
            v["type%d@%s" % (i, name)] = json.dumps(edited(doc, at, y))
        if isinstance(key, str) and not {key, name} & OPTIONAL.get(kind, set()):
            v["missing@" + name] = json.dumps(edited(doc, at, remove=True))
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            if key not in NEGATIVE_OK.get(kind, ()):
                v["negative@" + name] = json.dumps(edited(doc, at, -1 - abs(x)))
            if isinstance(x, int):
                for big in (2 ** 31, 2 ** 63, 10 ** 30):
                    v["huge%d@%s" % (len(str(big)), name)] = json.dumps(edited(doc, at, big))
    return v


def non_numbers(doc):
    """NaN and infinities as text in every number field (JSON has none of them; 1e999 overflows)."""
    v = {}
    for at in paths(doc):
        x = value_at(doc, at) if at else None
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            text = json.dumps(edited(doc, at, "@@"))
            name = "/".join(str(k) for k in at)
            for label, token in [("NaN", "NaN"), ("inf", "Infinity"), ("minus_inf", "-Infinity"),
                                 ("1e999", "1e999"), ("NaN_string", '"NaN"')]:
                v["%s@%s" % (label, name)] = text.replace('"@@"', token)
    return v


def variants(kind, doc):
    """Bad variants of a good JSON document: name -> text."""
    text = json.dumps(doc, indent=1)
    v = {"empty": "", "truncated": text[: len(text) // 2], "not_json": "hello",
         "array": "[1, 2]", "null": "null", "binary": "\x00\x01\x02\xff"}
    # Cut at its first byte, a quarter, three quarters, and short of its last brace.
    for at in (1, len(text) // 4, 3 * len(text) // 4, len(text) - 1):
        v["cut_at_%d" % at] = text[:at]
    if kind != "spec":  # the spec's fields: attacked below without the format it lacks
        v.update(field_attacks(kind, doc))
        v.update(non_numbers(doc))
    d = dict(doc)
    d["format"] = doc["format"].rsplit("/", 1)[0] + "/99"
    v["version"] = json.dumps(d)
    d["format"] = doc["format"].rsplit("/", 1)[0] + "/2"
    v["version_next"] = json.dumps(d)
    d = dict(doc)
    d["format"] = 7
    v["format_type"] = json.dumps(d)
    v["no_format"] = json.dumps({k: x for k, x in doc.items() if k != "format"})
    v["dup_key"] = text.replace('"format":', '"format": "x", "format":', 1)
    if kind == "profile":
        for field, value in [("mean_ms", "NaN"), ("mean_ms", "-5"), ("mean_ms", "0"),
                             ("mean_ms", "1e400"), ("mean_ms", '"20"'), ("scv", "-1"),
                             ("service", "0"), ("service", "2.5"),
                             ("samples", "-3")]:
            v["tuple_%s_%s" % (field, value.strip('"'))] = re.sub(
                r'"%s": [^,\n}]+' % field, '"%s": %s' % (field, value), text, count=1)
        d = json.loads(text)
        d["tuples"].append(dict(d["tuples"][0]))
        v["tuple_twice"] = json.dumps(d)
        d = json.loads(text)
        d["tuples"] = []
        v["no_tuples"] = json.dumps(d)
        d = json.loads(text)
        d["hardware"]["nodes"] = 0
        v["nodes_0"] = json.dumps(d)
        d = json.loads(text)
        d["hardware"]["cores_per_node"] = "8"
        v["cores_str"] = json.dumps(d)
        # A cluster no flag may name (simulate made 2^31 - 1 serving units of it).
        for field, value in [("nodes", 2 ** 31 - 1), ("nodes", 1000001), ("cores_per_node", 1025)]:
            d = json.loads(text)
            d["hardware"][field] = value
            v["hardware_%s_%d" % (field, value)] = json.dumps(d)
        # A misspelt field would be ignored and its default used: refused (session 26).
        for name, where in [("unknown_top", None), ("unknown_hardware", "hardware"),
                            ("unknown_tuple", "tuple")]:
            d = json.loads(text)
            {None: d, "hardware": d["hardware"], "tuple": d["tuples"][0]}[where]["bacth"] = 4
            v["profile_" + name] = json.dumps(d)
        # Tuples the profile's own hardware cannot run: T > F, i*T > F (T <= F), K > N.
        hw = doc["hardware"]
        for name, pick, field, value in [
                ("T_over_cores", lambda t: t["service"] == 1, "intra", hw["cores_per_node"] + 1),
                ("iT_over_cores", lambda t: t["service"] == 2, "intra", hw["cores_per_node"] // 2 + 1),
                ("K_over_nodes", lambda t: t["service"] == 1, "inter", hw["nodes"] + 1)]:
            d = json.loads(text)
            next(t for t in d["tuples"] if pick(t))[field] = value
            v["tuple_" + name] = json.dumps(d)

    if kind == "measured":
        for field, value in [("rate", "NaN"), ("rate", "-1"), ("mean_latency_ms", "0"),
                             ("requests", '"100"'), ("service", "0")]:
            v["point_%s_%s" % (field, value.strip('"'))] = re.sub(
                r'"%s": [^,\n}]+' % field, '"%s": %s' % (field, value), text, count=1)
        d = json.loads(text)
        d["points"] = []
        v["no_points"] = json.dumps(d)
        d = json.loads(text)
        d["points"][1] = dict(d["points"][0])
        v["point_twice"] = json.dumps(d)
        d = json.loads(text)
        d["points"][0]["inter"] = 64
        v["point_too_many_nodes"] = json.dumps(d)
    if kind == "table":
        d = json.loads(text)
        for key in ("entries", "levels", "rows"):
            if key in d and isinstance(d[key], list) and d[key]:
                d[key] = []
                v["no_entries"] = json.dumps(d)
                break
        v["rate_nan"] = re.sub(r'"(rate[a-z_]*)": [0-9.e+-]+', r'"\1": NaN', text, count=1)
    return v


def file_name(kind, name):
    return "%s_%s.json" % (kind, re.sub(r"[^A-Za-z0-9_.-]", ".", name))


# Valid files of each kind: given where another kind is read, each must be refused.
GOOD = {"profile": TOY, "table": path("table.json"), "measured": path("measured.json"), "spec": TINY,
        "run": RUN, "weights": path("w.safetensors")}


def files(kind, doc):
    out = {}
    for name, text in variants(kind, doc).items():
        out[name] = write(file_name(kind, name), text)
    out["missing"] = path("missing_%s.json" % kind)
    out["directory"] = path("dir")
    out["dev_zero"] = "/dev/zero"
    out["fifo"] = path("fifo")
    out["symlink_loop"] = LOOP
    out["huge_sparse"] = HUGE
    for other, good in GOOD.items():
        if other != kind:
            out["a_%s_file" % other] = good
    return out


bad_profiles = files("profile", toy)
bad_measured = files("measured", measured)
bad_tables = files("table", table)
bad_runs = files("run", run_doc)

# Model specs, safetensors and ONNX with inconsistent contents.
spec = json.load(open(TINY))
bad_specs = {k: v for k, v in files("spec", dict(spec, format=spec.get("format", "serf-model/1"))).items()
             if k not in ("version", "version_next", "format_type", "no_format", "dup_key")}
for name, text in field_attacks("spec", spec).items():
    bad_specs[name] = write(file_name("spec", name), text)
spec_text = json.dumps(spec)
bad_specs["no_layers"] = write("spec_no_layers.json", json.dumps(dict(spec, layers=[])))
bad_specs["layer_kind"] = write("spec_layer_kind.json",
                                re.sub(r'"type": "[a-z_]+"', '"type": "frobnicate"', spec_text, count=1))
bad_specs["negative_input"] = write("spec_negative_input.json",
                                    json.dumps(dict(spec, input=[-1] + list(spec["input"])[1:]
                                                    if isinstance(spec.get("input"), list) else -1)))
bad_specs["nan"] = write("spec_nan.json", re.sub(r'"channels": \d+', '"channels": NaN', spec_text, count=1))
n = struct.unpack("<Q", weights[:8])[0]
header = json.loads(weights[8:8 + n])
bad_weights = {
    "empty": write("w_empty.safetensors", b"", "wb"),
    "truncated": write("w_truncated.safetensors", weights[: len(weights) // 2], "wb"),
    "header_size_huge": write("w_huge.safetensors", struct.pack("<Q", 1 << 60) + weights[8:], "wb"),
    "header_size_past_end": write("w_past.safetensors", struct.pack("<Q", len(weights)) + weights[8:], "wb"),
    "header_not_json": write("w_notjson.safetensors", struct.pack("<Q", 5) + b"hello", "wb"),
    "directory": path("dir"),
    "missing": path("missing.safetensors"),
    "spec_instead": TINY,
}
first = next(k for k in header if k != "__metadata__")
for name, change in [("dtype", {"dtype": "F64"}), ("shape", {"shape": [3, 3]}),
                     ("offsets_reversed", {"data_offsets": list(reversed(header[first]["data_offsets"]))}),
                     ("offsets_past_end", {"data_offsets": [0, 1 << 40]})]:
    h = dict(header)
    h[first] = dict(header[first], **change)
    body = json.dumps(h).encode()
    bad_weights[name] = write("w_%s.safetensors" % name,
                              struct.pack("<Q", len(body)) + body + weights[8 + n:], "wb")
f32 = weights[8 + n:]
nan_body = struct.pack("<f", float("nan")) + f32[4:]
bad_weights["nan_weight"] = write("w_nan.safetensors", weights[:8 + n] + nan_body, "wb")
bad_onnx = {"empty": write("m_empty.onnx", b"", "wb"),
            "garbage": write("m_garbage.onnx", b"\x08\x07\x12\x04junk" * 50, "wb"),
            "json": TINY, "directory": path("dir"), "missing": path("missing.onnx"),
            "fifo": path("fifo")}
try:  # a small valid model (conv, relu), cut at several points: a protobuf cut between two
    # fields parses, and what is missing then is named
    import numpy
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(numpy.ones((2, 3, 3, 3), numpy.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    good_onnx = model.SerializeToString()
    for at in (1, len(good_onnx) // 4, len(good_onnx) // 2, 3 * len(good_onnx) // 4, len(good_onnx) - 1):
        bad_onnx["cut_at_%d" % at] = write("m_cut_%d.onnx" % at, good_onnx[:at], "wb")
except ImportError:
    print("no python3-onnx: the cut ONNX cases are left out")

# --- every command: a base that would run, and which flags hold a file of which kind ------------------
out_json = path("out.json")
COMMANDS = {
    "predict": ["--profile", TOY, "--service", "1", "--inter", "1", "--intra", "1", "--rate", "1"],
    "plan": ["--profile", TOY, "--rates", "1,2", "--out", out_json],
    "size": ["--profile", TOY, "--rate", "1", "--slo-ms", "1000"],
    "capacity": ["--profile", TOY, "--slo-ms", "1000"],
    "simulate": ["--profile", TOY, "--service", "1", "--inter", "1", "--intra", "1", "--rate", "1",
                 "--requests", "200"],
    "validate": ["--profile", TOY, "--measured", path("measured.json"), "--out", out_json],
    "infer": ["--model", TINY],
    "model info": [TINY],
    "model init": [TINY, "--out", path("out.safetensors")],
    "model check": [TINY, "--weights", path("w.safetensors")],
    "load": ["--url", "http://127.0.0.1:9", "--model", "tiny", "--rate", "5", "--duration", "1"],
    "serve": ["--emulate", EMU, "--rate", "5", "--requests", "10"],
    "profile": ["--emulate", EMU, "--out", out_json],
}
OUTPUTS = [out_json, path("out.safetensors"), path("out.json.csv")]


def flags_of(command):
    """(flag, type) of every option that takes a value, from --help."""
    rc, out, _, _ = run(command.split() + ["--help"])
    found = []
    for m in re.finditer(r"^\s+(--[a-z][a-z0-9-]*)(?:,--[a-z-]+)?\s+(TEXT|INT|UINT|FLOAT)\b", out.decode(),
                         re.M):
        found.append((m.group(1), m.group(2)))
    return found


def with_flag(base, flag, value):
    """base with `flag value` replacing the flag's value when base has it."""
    args = list(base)
    if flag in args:
        i = args.index(flag)
        args[i + 1] = value
    else:
        args += [flag, value]
    return args


ALWAYS_BAD_NUMBERS = ["", "nan", "inf", "-inf", "abc", "1e400", "1,2", "0x", "--"]
for command, base in COMMANDS.items():
    words = command.split()
    flags = flags_of(command)
    for flag, kind in flags:
        # The flag given with no value at all (last on the line), an empty value, bad numbers.
        missing = [a for a in base]
        if flag in missing:
            i = missing.index(flag)
            del missing[i:i + 2]
        attacks = [("missing value", words + missing + [flag], [flag])]
        if flag not in ("--out", "--plot", "--output-out", "--input-out", "--url"):
            attacks.append(("empty value", words + with_flag(base, flag, ""), [flag]))
        if kind in ("INT", "UINT", "FLOAT"):
            for value in ALWAYS_BAD_NUMBERS + (["1.5", "1e30", "99999999999999999999999"]
                                               if kind != "FLOAT" else ["1e30000"]):
                attacks.append(("", words + with_flag(base, flag, value), [flag]))
        for what, args, names in sample(attacks, 1):
            check(args, names, OUTPUTS, what)
    check(words + base + ["--frobnicate", "1"], ["--frobnicate"], OUTPUTS, "unknown flag")
    check(words + base + ["stray"], ["stray"], OUTPUTS, "stray argument")
    # A flag given twice with different values: refused, never the last one silently.
    for flag, kind in flags:
        if flag in base and kind in ("INT", "FLOAT"):
            check(words + base + [flag, base[base.index(flag) + 1]], [flag], OUTPUTS, "duplicate")
            break

# --- files ------------------------------------------------------------------------------------------
for command, base in COMMANDS.items():
    words = command.split()
    for flag, bad in [("--profile", bad_profiles), ("--emulate", bad_profiles),
                      ("--measured", bad_measured), ("--model", bad_specs), ("--weights", bad_weights)]:
        if flag not in base:
            continue
        if command == "load":
            continue  # load's --model is the served model's name, not a file
        # Every variant on the first command that reads the kind, three in turn on the others.
        first_reader = {"--profile": "predict", "--emulate": "serve", "--measured": "validate",
                        "--model": "infer", "--weights": "model check"}[flag] == command
        for name in (list(bad) if first_reader else sample(bad, 3)):
            f = bad[name]
            check(words + with_flag(base, flag, f), [flag, f], OUTPUTS, name)
    if words[0] == "model" and words[1] in ("info", "init", "check"):
        for name in (list(bad_specs) if words[1] == "info" else sample(bad_specs, 3)):
            check(words[:2] + [bad_specs[name]] + base[1:], [bad_specs[name]], OUTPUTS, name)
# Files serve and profile read before they need node ranks (a bad one was named only under
# mpirun; without it the line said that mpirun was missing): --table, serve's --profile, and
# profile's --refresh, --drift and --capacity-profile. The good ones pass as far as the nodes.
def files_pass(args):
    rc, out, err, _ = run(args)
    if rc != 2 or b"at least one node rank" not in err:
        failures.append("serf %s: the good files are refused: exit %s | %s"
                        % (" ".join(args), rc, err.decode("utf-8", "replace").strip()[:300]))


SERVE_BASE = ["serve"] + COMMANDS["serve"]
REFRESH = ["profile", "--emulate", EMU, "--out", out_json, "--refresh", EMU_COPY]
UTILIZATIONS = ["profile", "--emulate", EMU, "--out", out_json, "--exhaustive", "--utilizations", "0.5"]
files_pass(SERVE_BASE + ["--table", path("table.json")])
files_pass(SERVE_BASE + ["--table", path("table.json"), "--rate-band", "0"])
for value in ("-1", "11", "nan", "inf", "2x"):
    check(SERVE_BASE + ["--table", path("table.json"), "--rate-band", value], ["--rate-band"],
          OUTPUTS, "rate band out of range")
files_pass(SERVE_BASE + ["--profile", TOY])
files_pass(REFRESH + ["--drift", RUN])
files_pass(UTILIZATIONS + ["--capacity-profile", EMU])
for args, flag, bad, pick in [(SERVE_BASE, "--table", bad_tables, list),
                              (REFRESH, "--drift", bad_runs, list),
                              (SERVE_BASE, "--profile", bad_profiles, lambda b: sample(b, 3)),
                              (REFRESH[:-2], "--refresh", bad_profiles, lambda b: sample(b, 3)),
                              (UTILIZATIONS, "--capacity-profile", bad_profiles, lambda b: sample(b, 3))]:
    for name in pick(bad):
        check(args + [flag, bad[name]], [flag, bad[name]], OUTPUTS, name)
# Valid files that do not fit together: a profile of another model to refresh, a run of another
# model, a run that recalibrated a tuple the profile lacks.
check(REFRESH[:-2] + ["--refresh", TOY], ["--refresh", TOY], OUTPUTS, "another model's profile")
check(REFRESH[:-2] + ["--drift", RUN], ["--drift", "--refresh"], OUTPUTS, "a run to refresh nothing from")
for what, doc in [("a run of another model", dict(run_doc, model="toy")),
                  ("a run naming a tuple the profile lacks", dict(run_doc, recalibrations=[{"tuple": [64, 1, 1]}]))]:
    f = write(file_name("run", what), json.dumps(doc))
    check(REFRESH + ["--drift", f], ["--drift", f], OUTPUTS, what)
check(["predict", "--profile", TOY, "--profile", TOY, "--service", "1", "--inter", "1", "--intra", "1",
       "--rate", "1"], ["--profile"], OUTPUTS, "duplicate file flag")
check(["plan", "--profile", TOY, "--rates", "1", "--out", out_json, "--table", path("table.json")],
      ["--table"], OUTPUTS, "plan takes no table")
for flag, value in (("--min-requests", "500"), ("--percentile", "95"), ("--switch-s", "1")):
    check(["plan", "--profile", TOY, "--rates", "1", "--out", out_json, flag, value], [flag], OUTPUTS,
          "a projection flag without --cost-of-exhaustive")
# serve --table's file is read by the runtime under mpirun (its cases: tests/mpi/cli_test.sh).
imported = [path("imported.json"), path("imported.safetensors")]
for name, f in bad_onnx.items():
    check(["model", "import", f, "--out", imported[0], "--weights", imported[1]], [f], imported, name)
check(["infer", "--model", TINY, "--input", path("w.safetensors")], ["--input", "w.safetensors"],
      OUTPUTS, "weights as input")

# --- outputs: a missing directory, an input, a directory, empty -------------------------------------
# Outputs never name a file of the repository: copies in TMP.
shared = write("shared.json", json.dumps(toy))
spec_copy = write("spec_copy.json", open(TINY).read())
link = path("link.json")
os.symlink(shared, link)
for out in [path("nodir/out.json"), path("dir"), "", shared, link]:
    check(["plan", "--profile", shared, "--rates", "1", "--out", out], ["--out", out or "empty"], [shared],
          "output " + out)
    check(["validate", "--profile", shared, "--measured", path("measured.json"), "--out", out],
          ["--out", out or "empty"], [shared], "output " + out)
for out in [path("nodir/out.json"), path("dir"), "", spec_copy]:
    check(["model", "init", spec_copy, "--out", out], ["--out", out or "empty"], [spec_copy], "output " + out)
check(["model", "init", spec_copy, "--out", path("w2.safetensors"), "--input-out", spec_copy],
      ["--input-out"], [spec_copy, path("w2.safetensors")], "input over its spec")
check(["infer", "--model", spec_copy, "--output-out", spec_copy], ["--output-out"], [spec_copy], "over its model")
check(["serve", "--emulate", EMU, "--rate", "5", "--profile", shared, "--out", shared], ["--out", "--profile"],
      [shared], "over its --profile")
# Two outputs that are one file spelled two ways (string comparison let them through).
check(["model", "init", spec_copy, "--out", path("w3.safetensors"), "--input-out",
       os.path.join(TMP, ".", "w3.safetensors")], ["--input-out"], [path("w3.safetensors")],
      "input over the weights")

# --- conflicting flags ------------------------------------------------------------------------------
check(["serve", "--emulate", EMU, "--rate", "5", "--load", "0:5", "--requests", "10"],
      ["--rate", "--load"], OUTPUTS, "rate and load")
check(["serve", "--emulate", EMU, "--rate", "5", "--schedule", "0:1,1,1", "--table", path("table.json")],
      ["--schedule", "--table"], OUTPUTS, "schedule and table")
check(["load", "--url", "http://127.0.0.1:9", "--model", "tiny", "--rate", "5", "--load", "0:5",
       "--duration", "1"], ["--rate", "--load"], OUTPUTS, "rate and load")
check(["size", "--profile", TOY, "--rate", "1", "--rates", "1,2", "--slo-ms", "1000"],
      ["--rate", "--rates"], OUTPUTS, "rate and rates")
# The precision flags (cli/flags.h PrecisionFlags): one rule in load and profile --exhaustive.
# A companion without --precision would be ignored; out of range is refused with it.
LOAD = COMMANDS["load"]
PROFILE = COMMANDS["profile"] + ["--exhaustive", "--rates", "5"]
for base in (["load"] + LOAD, ["profile"] + PROFILE):
    for flag, value in [("--min-duration", "5"), ("--min-requests", "50"), ("--percentile", "90")]:
        check(base + [flag, value], [flag], OUTPUTS, "without --precision")
    for flag, value in [("--precision", "0"), ("--precision", "0.9"), ("--min-duration", "0"),
                        ("--min-duration", "-1"), ("--min-requests", "0"), ("--percentile", "100"),
                        ("--percentile", "10")]:
        args = base + (["--precision", "0.03"] if flag != "--precision" else []) + [flag, value]
        check(args, [flag], OUTPUTS, "precision flag out of range")
for flag, value in [("--max-requests", "500"), ("--max-duration", "5")]:
    check(["profile"] + PROFILE + [flag, value], [flag], OUTPUTS, "without --precision")
for value in ("0", "-3", "1e9", "2.5", "x"):
    check(["profile"] + PROFILE + ["--fresh-tuples", value], ["--fresh-tuples"], OUTPUTS,
          "fresh tuples out of range")

# A flag that has an effect only together with another one: alone it was silently ignored
# (serve --min-dwell without --table ran with no hysteresis to speak of). Refused, naming both.
SERVE = ["serve"] + COMMANDS["serve"]
CLIENTS = ["serve", "--emulate", EMU, "--http", "127.0.0.1:0"]  # no generated requests
PROFILE_TUPLES = ["profile"] + COMMANDS["profile"]
for args, names in [
        (SERVE + ["--min-dwell", "5"], ["--min-dwell", "--table"]),
        (SERVE + ["--switch-cost", "on"], ["--switch-cost", "--table"]),
        (SERVE + ["--rate-band", "1"], ["--rate-band", "--table"]),
        (CLIENTS + ["--requests", "10"], ["--requests", "--rate or --load"]),
        (CLIENTS + ["--arrivals", "deterministic"], ["--arrivals", "--rate or --load"]),
        (CLIENTS + ["--arrival-scv", "1"], ["--arrival-scv", "--rate or --load"]),
        (SERVE + ["--weights", path("w.safetensors")], ["--weights", "--model"]),
        (SERVE + ["--backend", "cpu"], ["--backend", "--model"]),
        (["serve", "--model", TINY, "--rate", "5", "--emulate-random"], ["--emulate-random", "--emulate"]),
        (["infer", "--model", TINY, "--node-timeout", "5"], ["--node-timeout", "--inter"]),
        (["infer", "--model", TINY, "--weights", path("w.safetensors"), "--input", path("x.safetensors"),
          "--seed", "5"], ["--seed"]),
        (PROFILE_TUPLES + ["--rates", "5"], ["--rates", "--exhaustive"]),
        (PROFILE_TUPLES + ["--utilizations", "0.5"], ["--utilizations", "--exhaustive"]),
        (PROFILE_TUPLES + ["--requests", "50"], ["--requests", "--exhaustive"]),
        (PROFILE_TUPLES + ["--arrivals", "deterministic"], ["--arrivals", "--exhaustive"]),
        (PROFILE_TUPLES + ["--arrival-scv", "1"], ["--arrival-scv", "--exhaustive"]),
        (PROFILE_TUPLES + ["--fresh-tuples", "20"], ["--fresh-tuples", "--exhaustive"]),
        (["profile"] + PROFILE + ["--samples", "5"], ["--samples", "--exhaustive"]),
        (["profile"] + PROFILE + ["--side-by-side"], ["--side-by-side", "--exhaustive"]),
        (["profile"] + PROFILE + ["--passes", "2"], ["--passes", "--exhaustive"]),
        (["profile"] + COMMANDS["profile"] + ["--exhaustive", "--rates", "5", "--capacity-profile", TOY],
         ["--capacity-profile", "--utilizations"])]:
    check(args, names, OUTPUTS, "only with another flag")
# The plot over the report it is drawn from: the report was lost.
check(["validate", "--profile", TOY, "--measured", path("measured.json"), "--out", path("v.png"),
       "--plot", path("v.png")], ["--plot"], [path("v.png")], "plot over the report")
check(["load"] + COMMANDS["load"] + ["--out", path("l.png"), "--plot", path("l.png")], ["--plot"],
      [path("l.png")], "plot over the report")
# --tail-method chooses how a percentile, bursty arrivals or batches are approximated: the mean
# under Poisson arrivals without a batch is exact, so there it was silently ignored.
for command in ("predict", "plan", "size", "capacity"):
    check(command.split() + COMMANDS[command] + ["--tail-method", "model"], ["--tail-method model"],
          OUTPUTS, "tail method of the mean")

# --- session 26 sweep: numbers read two ways, outputs that cannot take the file, no subcommand ----
PREDICT = ["predict", "--profile", TOY, "--service", "1", "--inter", "1", "--intra", "1"]
# A decimal check passed "010" as 10 and CLI11 then ran it as octal 8 ("0x10" as hex for floats,
# " 1" with a space): refused, not read two ways.
for flag, value in [("--requests", "0200"), ("--seed", "010"), ("--rate", "0x10"), ("--rate", " 1"),
                    ("--service", "01")]:
    base = COMMANDS["simulate"] if flag != "--service" else COMMANDS["predict"]
    # The flag's own check names the value (simulate's later "too few requests: 128" named only
    # the flag, after running with the octal value).
    check(["simulate" if flag != "--service" else "predict"] + with_flag(base, flag, value),
          ["%s: must be" % flag], OUTPUTS, "number read two ways")
# serve's front-end integer flags by the same strict check (CLI::Range ran "010" as octal 8).
for flag, value in [("--max-queue", "010"), ("--max-queue", "-1"), ("--http-connections", "0x10"),
                    ("--http-connections", "0")]:
    check(["serve"] + COMMANDS["serve"] + [flag, value], ["%s: must be" % flag], OUTPUTS,
          "serve integer flag")
check(PREDICT + ["--rate", "1", "--slo-ms", "10ms"], ["--slo-ms"], OUTPUTS, "a unit")
check(["size", "--profile", TOY, "--rate", "1", "--slo-ms", "10ms"], ["--slo-ms"], OUTPUTS, "a unit")
check(["size", "--profile", TOY, "--rate", "1e3x", "--slo-ms", "100"], ["--rate"], OUTPUTS, "trailing junk")
for rates in ["40:1:1", " 1,2", "1,,2", "0x10", "1:2:3:4", "1:40:0"]:
    check(["plan", "--profile", TOY, "--rates", rates, "--out", out_json], ["--rates"], OUTPUTS,
          "rates " + rates)
for objective in ["p 99", "p0x10", "P99", "p100", "p99x"]:
    check(["plan", "--profile", TOY, "--rates", "1", "--out", out_json, "--objective", objective],
          ["--objective"], OUTPUTS, "objective")
# An output that cannot take the file: a full device (the stream's buffer hid the error until the
# close: exit 0), a pipe no process reads (the open blocked for good).
check(["plan", "--profile", TOY, "--rates", "1", "--out", "/dev/full"], ["/dev/full"], [], "full device")
check(["plan", "--profile", TOY, "--rates", "1", "--out", path("fifo")], [path("fifo")], [],
      "pipe without a reader")
for flag, bad in [("--profile", path("fifo")), ("--profile", "/proc/self/status")]:
    check(with_flag(PREDICT + ["--rate", "1"], flag, bad), [bad], OUTPUTS, "input " + bad)
check(["model", "info", path("fifo")], [path("fifo")], OUTPUTS, "a pipe as spec")
check(["infer", "--model", TINY, "--weights", path("fifo")], [path("fifo")], OUTPUTS, "a pipe as weights")
# No subcommand, or not one: the line names what is wrong and what would be accepted.
check([""], ["unknown subcommand ''", "predict"], OUTPUTS, "empty subcommand")
check(["--frob"], ["--frob"], OUTPUTS, "an option before the subcommand")
check(["model"], ["serf model needs a subcommand", "info"], OUTPUTS, "model without a subcommand")
check(["model", ""], ["unknown subcommand 'model '"], OUTPUTS, "empty model subcommand")
check(["load", "--url", "http://127.0.0.1:9", "--model", "tiny", "--load", "0:0", "--duration", "1"],
      ["--load"], OUTPUTS, "every rate 0")
check(["load", "--url", "http://127.0.0.1:9", "--model", "tiny", "--load", "0:5;1x:2",
       "--duration", "1"], ["--load"], OUTPUTS, "trailing junk in a step")

# --- session 32 sweep: control characters in names and values, subnormal rates, strict percentiles --
# A name or value holding a line feed or another control character: the error line names it
# escaped (\n, \x01), so it stays one line.
for name in ["new\nline.json", "tab\tand\x01.json"]:
    escaped = name.replace("\n", "\\n").replace("\t", "\\t").replace("\x01", "\\x01")
    check(with_flag(PREDICT + ["--rate", "1"], "--profile", path(name)), [escaped], OUTPUTS,
          "a control character in a file name")
check(PREDICT + ["--rate", "1\n"], ["--rate", "1\\n"], OUTPUTS, "a line feed in a number")
check(["predict\n"], ["predict\\n"], OUTPUTS, "a line feed in the subcommand")
# Rates so small that a unit's share is 0 (subnormal): predict and plan called them unstable.
check(PREDICT + ["--rate", "5e-324"], ["--rate"], OUTPUTS, "subnormal rate")
check(["simulate"] + with_flag(COMMANDS["simulate"], "--rate", "5e-324"), ["--rate"], OUTPUTS,
      "subnormal rate")
check(["size", "--profile", TOY, "--rate", "4.9e-324", "--slo-ms", "100"], ["--rate"], OUTPUTS,
      "subnormal rate")
check(["plan", "--profile", TOY, "--rates", "5e-324,1", "--out", out_json], ["--rates"], OUTPUTS,
      "subnormal rate")
check(["serve"] + with_flag(COMMANDS["serve"][:2], "--load", "0:5e-324;1:5") + ["--requests", "10"],
      ["--load"], OUTPUTS, "subnormal rate")
# --percentile read by the strict decimal check (CLI11 took "+5" and "0x1p3", 8), from 0.001
# (5e-324 / 100 is 0: a NaN score, printed as null).
for command in ("predict", "size", "capacity"):
    for value in ("+5", "0x1p3", "4.9e-324", "0.0001", "100"):
        check(command.split() + COMMANDS[command] + ["--percentile", value], ["--percentile"],
              OUTPUTS, "percentile " + value)
for objective in ("p4.9e-324", "p0.0001"):
    check(["plan", "--profile", TOY, "--rates", "1", "--out", out_json, "--objective", objective],
          ["--objective"], OUTPUTS, "objective")
# model check with good weights and a bad --input: one error line, no line of results before it.
for bad in ("/dev/zero", path("dir"), path("w.safetensors"), LOOP):
    check(["model", "check"] + COMMANDS["model check"] + ["--input", bad], ["--input", bad], OUTPUTS,
          "a bad input after good weights")

# Four at once: a case is mostly the loading of serf's libraries, which waits for a core on a
# loaded machine (the serial run took 290-445 s at load 11-18). Measured back to back, 379 cases:
# serial 154 s at load 9.4-11.5, four at once 84 s at load 11.5-15.6 (beside a ctest -j2 run).
run_cases(4)
print("%d bad-input cases, %d failures" % (cases, len(failures)))
for f in failures:
    print("FAIL " + f)
subprocess.run(["rm", "-rf", TMP], check=False)
sys.exit(1 if failures else 0)
