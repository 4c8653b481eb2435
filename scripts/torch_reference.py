#!/usr/bin/python3
"""PyTorch reference for SERF model specs (configs/models/*.json).

Builds the same network as model/ from the JSON spec (Conv2d, MaxPool2d, AvgPool2d, ReLU,
LocalResponseNorm, Flatten, Linear, Softmax), loads the same safetensors weights and input and runs
one image (batch 1). Modes:

  run (default)    --weights W --input X [--out FILE]: print {"model", "top5", "output"} as JSON
                   ("output": the final layer's values, at most the first 1000, as `serf infer --json`)
  --compare E      also compare with `serf infer --json` output E; exit 1 if the max relative error
                   exceeds --tolerance (default 1e-4). Relative error of element i:
                   |engine_i - torch_i| / max(|torch_i|, 1e-3 * max_j |torch_j|).
  --check-counts I compare parameters and connections, per layer and in total, with
                   `serf model info --json` output I (built on torch's meta device: no memory)
  --bench          batch-1 latency: --threads T (torch.set_num_threads), --repeat n, median of n
                   runs under torch.inference_mode() after --warmup runs; prints one JSON line.
                   Weights from --weights, else random (latency does not depend on the values).

Get weights and input with: serf model init SPEC --seed S --out W.safetensors --input-out X.safetensors
Needs Debian's python3-torch: run with /usr/bin/python3. Exit 77 when torch is missing (CTest skip).
"""

import argparse
import json
import statistics
import struct
import sys
import time

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"torch_reference.py: skipped: {e} (install python3-torch, run /usr/bin/python3)",
          file=sys.stderr)
    sys.exit(77)

SKIP = 77


class SpecError(Exception):
    pass


def read_safetensors(path):
    """name -> float32 numpy array (F32 only), checking offsets against the file. The data is
    memory-mapped, so a 683 MB imagenet22k file is not held twice."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SpecError(f"{path}: truncated safetensors file")
        (n,) = struct.unpack("<Q", head)
        header_bytes = f.read(n) if n <= 100 << 20 else b""
    if len(header_bytes) != n:
        raise SpecError(f"{path}: header length {n} exceeds the file")
    header = json.loads(header_bytes.decode("utf-8"))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry.get("dtype") != "F32":
            raise SpecError(f"{path}: tensor '{name}': dtype {entry.get('dtype')} is not F32")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end > len(data) or end - begin != 4 * count:
            raise SpecError(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] out of range")
        out[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(shape)
    return out


def window_out(size, kernel, stride, pad):
    return (size + 2 * pad - kernel) // stride + 1


def build(spec, device="cpu"):
    """(model, layer_names, counts) for a spec dict; counts per layer: (parameters, connections)."""
    c, h, w = (spec["input"][k] for k in ("channels", "height", "width"))
    layers, names, counts = [], [], []
    for i, layer in enumerate(spec["layers"]):
        t = layer["type"]
        name = layer.get("name", f"{t}{i}")
        params = conns = 0
        if t == "conv2d":
            k, s, p = layer["kernel"], layer.get("stride", 1), layer.get("pad", 0)
            o = layer["out_channels"]
            mod = nn.Conv2d(c, o, k, stride=s, padding=p, device=device)
            h, w = window_out(h, k, s, p), window_out(w, k, s, p)
            conns = o * h * w * c * k * k
            c = o
        elif t in ("maxpool", "avgpool"):
            k = layer["kernel"]
            s, p = layer.get("stride", k), layer.get("pad", 0)
            mod = (nn.MaxPool2d(k, s, p) if t == "maxpool"
                   else nn.AvgPool2d(k, s, p, count_include_pad=True))
            h, w = window_out(h, k, s, p), window_out(w, k, s, p)
        elif t == "relu":
            mod = nn.ReLU()
        elif t == "lrn":
            mod = nn.LocalResponseNorm(layer.get("size", 5), layer.get("alpha", 1e-4),
                                       layer.get("beta", 0.75), layer.get("k", 1.0))
        elif t == "flatten":
            mod = nn.Flatten()
            c, h, w = c * h * w, 1, 1
        elif t == "fully_connected":
            if h != 1 or w != 1:
                raise SpecError(f"layers[{i}] ({name}): fully_connected needs a flat input")
            mod = nn.Linear(c, layer["out"], device=device)
            conns = c * layer["out"]
            c = layer["out"]
        elif t == "softmax":
            mod = nn.Softmax(dim=1)
        else:
            raise SpecError(f"layers[{i}] ({name}): unknown layer type '{t}'")
        params = sum(p.numel() for p in mod.parameters())
        layers.append(mod)
        names.append(name)
        counts.append((params, conns))
    return nn.Sequential(*layers).eval(), names, counts


def load_weights(model, names, path):
    tensors = read_safetensors(path)
    expected = set()
    for mod, name in zip(model, names):
        for pname in ("weight", "bias"):
            param = getattr(mod, pname, None) if isinstance(mod, (nn.Conv2d, nn.Linear)) else None
            if param is None:
                continue
            key = f"{name}.{pname}"
            expected.add(key)
            if key not in tensors:
                raise SpecError(f"{path}: missing tensor '{key}'")
            if tuple(tensors[key].shape) != tuple(param.shape):
                raise SpecError(f"{path}: tensor '{key}' has shape {list(tensors[key].shape)}, "
                                f"expected {list(param.shape)}")
            with torch.no_grad():
                param.copy_(torch.from_numpy(tensors[key].copy()))
    extra = set(tensors) - expected
    if extra:
        raise SpecError(f"{path}: unexpected tensor '{sorted(extra)[0]}'")


def load_input(spec, path):
    tensors = read_safetensors(path)
    want = (1, spec["input"]["channels"], spec["input"]["height"], spec["input"]["width"])
    if "input" not in tensors:
        raise SpecError(f"{path}: missing tensor 'input'")
    if tuple(tensors["input"].shape) != want:
        raise SpecError(f"{path}: tensor 'input' has shape {list(tensors['input'].shape)}, "
                        f"expected {list(want)}")
    return torch.from_numpy(tensors["input"].copy())


def max_relative_error(engine, ref):
    ref = np.asarray(ref, dtype=np.float64)
    engine = np.asarray(engine, dtype=np.float64)
    floor = max(1e-3 * float(np.max(np.abs(ref))), 1e-30)
    return float(np.max(np.abs(engine - ref) / np.maximum(np.abs(ref), floor)))


def check_counts(spec, info_path):
    model, names, counts = build(spec, device="meta")
    with open(info_path) as f:
        info = json.load(f)
    problems = []
    if len(info["layers"]) != len(names):
        problems.append(f"{len(info['layers'])} layers in serf, {len(names)} in torch")
    for (params, conns), name, layer in zip(counts, names, info["layers"]):
        if layer["name"] != name or layer["parameters"] != params or layer["connections"] != conns:
            problems.append(f"{name}: torch parameters {params} connections {conns}; serf "
                            f"{layer['name']} {layer['parameters']} {layer['connections']}")
    total_params = sum(p.numel() for p in model.parameters())
    total_conns = sum(c for _, c in counts)
    if info["parameters"] != total_params or info["connections"] != total_conns:
        problems.append(f"totals: torch {total_params} parameters {total_conns} connections; "
                        f"serf {info['parameters']} {info['connections']}")
    if info["weight_bytes"] != 4 * total_params:
        problems.append(f"weight_bytes {info['weight_bytes']} != 4 * {total_params}")
    # The shapes must also agree: run the meta model.
    x = torch.empty(1, spec["input"]["channels"], spec["input"]["height"],
                    spec["input"]["width"], device="meta")
    for mod, layer in zip(model, info["layers"]):
        x = mod(x)
        got = list(x.shape[1:]) + [1] * (4 - x.dim())
        if got != layer["output"]:
            problems.append(f"{layer['name']}: torch output {got}, serf {layer['output']}")
    for p in problems:
        print(f"torch_reference.py: mismatch: {p}", file=sys.stderr)
    print(json.dumps({"model": spec["name"], "parameters": total_params,
                      "connections": total_conns, "layers": len(names), "ok": not problems}))
    return 1 if problems else 0


def bench(spec, args):
    torch.set_num_threads(args.threads)
    model, names, _ = build(spec)
    if args.weights:
        load_weights(model, names, args.weights)
    shape = (1, spec["input"]["channels"], spec["input"]["height"], spec["input"]["width"])
    x = load_input(spec, args.input) if args.input else torch.rand(shape) * 2 - 1
    times_ms = []
    with torch.inference_mode():
        for _ in range(args.warmup):
            model(x)
        for _ in range(args.repeat):
            start = time.perf_counter()
            model(x)
            times_ms.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"model": spec["name"], "framework": f"torch {torch.__version__}",
                      "threads": args.threads, "repeat": args.repeat,
                      "median_ms": statistics.median(times_ms), "min_ms": min(times_ms),
                      "mean_ms": statistics.fmean(times_ms)}))
    return 0


def run(spec, args):
    if not args.weights or not args.input:
        raise SpecError("--weights and --input are required to run (write them with "
                        "`serf model init SPEC --seed S --out W --input-out X`)")
    torch.set_num_threads(args.threads)
    model, names, _ = build(spec)
    load_weights(model, names, args.weights)
    x = load_input(spec, args.input)
    with torch.inference_mode():
        y = model(x).reshape(-1).double().numpy()
    result = {"model": spec["name"], "top5": [int(i) for i in np.argsort(-y, kind="stable")[:5]],
              "output": [float(v) for v in y[:1000]], "output_size": int(y.size)}
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    status = 0
    if args.compare:
        with open(args.compare) as f:
            engine = json.load(f)
        out = engine.get("output")
        if not isinstance(out, list) or len(out) != len(result["output"]):
            raise SpecError(f"{args.compare}: 'output' must hold {len(result['output'])} values "
                            f"(got {len(out) if isinstance(out, list) else 'none'})")
        err = max_relative_error(out, result["output"])
        ok = err <= args.tolerance and np.all(np.isfinite(out))
        print(json.dumps({"model": spec["name"], "compared": len(out),
                          "max_relative_error": err, "tolerance": args.tolerance,
                          "top5_torch": result["top5"], "top5_engine": engine.get("top5"),
                          "ok": bool(ok)}))
        status = 0 if ok else 1
    elif not args.out:
        print(text)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", help="model spec JSON (configs/models/*.json)")
    ap.add_argument("--weights", help="weights .safetensors (serf model init --out)")
    ap.add_argument("--input", help="input .safetensors with tensor 'input' [1,C,H,W] "
                                    "(serf model init --input-out)")
    ap.add_argument("--out", help="write the run's JSON here instead of stdout")
    ap.add_argument("--compare", help="`serf infer --json` output to compare with")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="max relative error for --compare (default 1e-4)")
    ap.add_argument("--check-counts", metavar="INFO_JSON",
                    help="`serf model info --json` output to check parameters/connections against")
    ap.add_argument("--bench", action="store_true", help="time batch-1 inference")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (threads)")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs for --bench (count)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before --bench (count)")
    args = ap.parse_args()
    if args.threads < 1 or args.repeat < 1 or args.warmup < 0:
        ap.error("--threads and --repeat must be >= 1, --warmup >= 0")
    try:
        with open(args.spec) as f:
            spec = json.load(f)
        if args.check_counts:
            return check_counts(spec, args.check_counts)
        if args.bench:
            return bench(spec, args)
        return run(spec, args)
    except KeyError as e:
        print(f"torch_reference.py: error: {args.spec}: missing field {e} (check it with "
              f"`serf model info`)", file=sys.stderr)
        return 2
    except (SpecError, OSError, ValueError) as e:
        print(f"torch_reference.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
