#!/usr/bin/python3
"""PyTorch reference for SERF model specs (configs/models/*.json).

Builds the same network as model/ from the JSON spec (a graph: each layer reads the tensors its
"inputs" name; Conv2d with groups and dilation, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, ReLU,
Hardtanh, Sigmoid, BatchNorm2d, LocalResponseNorm, Flatten, Linear, add, cat, Softmax), loads the
same safetensors weights and input and runs one image (batch 1). Modes:

  run (default)    --weights W --input X [--out FILE]: print {"model", "top5", "output"} as JSON
                   ("output": the final layer's values, at most the first 1000, as `serf infer --json`)
  --compare E      also compare with `serf infer --json` output E; exit 1 if the max relative error
                   exceeds --tolerance (default 1e-4). Relative error of element i:
                   |engine_i - torch_i| / max(|torch_i|, 1e-3 * max_j |torch_j|).
  --check-counts I compare parameters and connections, per layer and in total, with
                   `serf model info --json` output I (built on torch's meta device: no memory)
  --bench          latency (batch 1, or --batch b rows): --threads T (torch.set_num_threads), --repeat n, median of n
                   runs under torch.inference_mode() after --warmup runs; then n more runs timing
                   the Conv2d layers alone (conv_median_ms: median of their sums); with
                   --torch-mode best (default) also n runs of the traced, frozen and
                   optimize_for_inference'd model (oneDNN for every Conv2d and Linear), and
                   median_ms/min_ms are the faster mode's ("mode"); --torch-mode frozen runs
                   only the frozen model (no eager or Conv2d runs); one JSON line.
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


def pair(value):
    """A spec window field: k or [kh, kw] -> (kh, kw)."""
    return (value, value) if isinstance(value, int) else (value[0], value[1])


def pads(layer):
    """top, left, bottom, right of a spec "pad" (p, [ph, pw] or [t, l, b, r])."""
    p = layer.get("pad", 0)
    if isinstance(p, int):
        return p, p, p, p
    if len(p) == 2:
        return p[0], p[1], p[0], p[1]
    return tuple(p)


def window_out(size, span, stride, before, after, ceil_mode=False):
    room = size + before + after - span
    if not ceil_mode:
        return room // stride + 1
    out = -(-room // stride) + 1
    if (out - 1) * stride >= size + before:
        out -= 1
    return out


class Padded(nn.Module):
    """A window op after explicit padding (for pads that differ between the two sides)."""

    def __init__(self, mod, t, l, b, r, value=0.0):
        super().__init__()
        self.mod, self.pad, self.value = mod, (l, r, t, b), value

    def forward(self, x):
        return self.mod(nn.functional.pad(x, self.pad, value=self.value))


class Flat(nn.Module):
    """fully_connected / flatten on [1, C, H, W] tensors: every tensor stays 4-D."""

    def __init__(self, linear=None):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        if self.linear is not None:
            x = self.linear(x)
        return x.reshape(x.shape[0], -1, 1, 1)


class FlatLayerNorm(nn.LayerNorm):
    """layer_norm over the C features of a flat [N, C, 1, 1] tensor."""

    def forward(self, x):
        return super().forward(x.reshape(x.shape[0], -1)).reshape(x.shape)


class HardSigmoid(nn.Module):
    """min(max(alpha * x + beta, 0), 1) for alpha, beta other than PyTorch's 1/6, 1/2."""

    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x):
        return torch.clamp(self.alpha * x + self.beta, 0.0, 1.0)


class Join(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, *xs):
        if self.kind == "add":
            out = xs[0]
            for x in xs[1:]:
                out = out + x
            return out
        if self.kind == "mul":  # element-wise, or by a per-channel [N, C, 1, 1] scale
            return xs[0] * xs[1]
        return torch.cat(xs, dim=1)


class ChannelSlice(nn.Module):
    """Channels [begin, end) (ShuffleNet's x.chunk(2, dim=1))."""

    def __init__(self, begin, end):
        super().__init__()
        self.begin, self.end = begin, end

    def forward(self, x):
        return x[:, self.begin:self.end]


class ChannelShuffle(nn.Module):
    """torchvision's channel_shuffle: view [N, g, C/g, H, W], transpose 1 and 2, flatten back."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        n, c, h, w = x.shape
        x = x.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
        return x.view(n, c, h, w)


class Graph(nn.Module):
    """Runs the layers in spec order; each reads the tensors its spec names ("input" first)."""

    def __init__(self, mods, names, sources):
        super().__init__()
        self.layers = nn.ModuleList(mods)
        self.names, self.sources = names, sources

    def forward(self, x, keep=None, conv_seconds=None):
        tensors = {"input": x}
        for mod, name, srcs in zip(self.layers, self.names, self.sources):
            if conv_seconds is not None and isinstance(weighted(mod), nn.Conv2d):
                start = time.perf_counter()
                tensors[name] = mod(*[tensors[s] for s in srcs])
                conv_seconds[0] += time.perf_counter() - start
            else:
                tensors[name] = mod(*[tensors[s] for s in srcs])
            if keep is not None:
                keep.append(tensors[name])
        return tensors[self.names[-1]]


def window_module(t, layer, c, h, w, device):
    """(module, out_h, out_w, connections) of conv2d / maxpool / avgpool."""
    kh, kw = pair(layer["kernel"])
    default_stride = 1 if t == "conv2d" else None
    sh, sw = pair(layer.get("stride", default_stride or layer["kernel"]))
    dh, dw = pair(layer.get("dilation", 1))
    top, left, bottom, right = pads(layer)
    ceil = layer.get("ceil_mode", False)
    symmetric = top == bottom and left == right
    h_out = window_out(h, dh * (kh - 1) + 1, sh, top, bottom, ceil)
    w_out = window_out(w, dw * (kw - 1) + 1, sw, left, right, ceil)
    padding = (top, left) if symmetric else 0
    conns = 0
    if t == "conv2d":
        o, g = layer["out_channels"], layer.get("groups", 1)
        mod = nn.Conv2d(c, o, (kh, kw), stride=(sh, sw), padding=padding, dilation=(dh, dw),
                        groups=g, device=device)
        conns = o * h_out * w_out * (c // g) * kh * kw
        fill = 0.0
    elif t == "maxpool":
        mod = nn.MaxPool2d((kh, kw), (sh, sw), padding, ceil_mode=ceil)
        fill = float("-inf")
    else:
        include = layer.get("count_include_pad", True)
        if not symmetric and not include:
            raise SpecError("avgpool with unequal pads and count_include_pad false has no "
                            "PyTorch equivalent here")
        mod = nn.AvgPool2d((kh, kw), (sh, sw), padding, ceil_mode=ceil, count_include_pad=include)
        fill = 0.0
    if not symmetric:
        mod = Padded(mod, top, left, bottom, right, fill)
    return mod, h_out, w_out, conns


def conv_transpose_module(layer, c, h, w, device):
    """(nn.ConvTranspose2d, out h, out w, multiply-adds) for a conv_transpose2d layer."""
    (kh, kw), (sh, sw) = pair(layer["kernel"]), pair(layer.get("stride", 1))
    (dh, dw), (oh, ow) = pair(layer.get("dilation", 1)), pair(layer.get("output_padding", 0))
    t, l, b, r = pads(layer)
    if t != b or l != r:
        raise SpecError(f"{layer.get('name')}: PyTorch's ConvTranspose2d pads both sides alike")
    o, g = layer["out_channels"], layer.get("groups", 1)
    mod = nn.ConvTranspose2d(c, o, (kh, kw), (sh, sw), (t, l), (oh, ow), g, True, (dh, dw),
                             device=device)
    out_h = (h - 1) * sh - 2 * t + dh * (kh - 1) + 1 + oh
    out_w = (w - 1) * sw - 2 * l + dw * (kw - 1) + 1 + ow
    return mod, out_h, out_w, c * h * w * (o // g) * kh * kw


def build(spec, device="cpu"):
    """(model, layer_names, counts) for a spec dict; counts per layer: (parameters, connections)."""
    shape = {"input": (spec["input"]["channels"], spec["input"]["height"],
                       spec["input"]["width"])}
    mods, names, sources, counts = [], [], [], []
    for i, layer in enumerate(spec["layers"]):
        t = layer["type"]
        name = layer.get("name", f"{t}{i}")
        srcs = layer.get("inputs", [names[-1] if names else "input"])
        c, h, w = shape[srcs[0]]
        conns = 0
        if t == "conv_transpose2d":
            mod, h, w, conns = conv_transpose_module(layer, c, h, w, device)
            c = layer["out_channels"]
        elif t in ("conv2d", "maxpool", "avgpool"):
            mod, h, w, conns = window_module(t, layer, c, h, w, device)
            if t == "conv2d":
                c = layer["out_channels"]
        elif t == "global_avgpool":
            mod, h, w = nn.AdaptiveAvgPool2d(1), 1, 1
        elif t == "relu":
            mod = nn.ReLU()
        elif t == "clip":
            mod = nn.Hardtanh(layer.get("min", 0.0), layer.get("max", 6.0))
        elif t == "sigmoid":
            mod = nn.Sigmoid()
        elif t == "hardsigmoid":
            alpha, beta = layer.get("alpha", 1.0 / 6.0), layer.get("beta", 0.5)
            if abs(alpha - 1.0 / 6.0) < 1e-7 and abs(beta - 0.5) < 1e-7:
                mod = nn.Hardsigmoid()
            else:
                mod = HardSigmoid(alpha, beta)
        elif t == "hardswish":
            mod = nn.Hardswish()
        elif t == "silu":
            mod = nn.SiLU()
        elif t == "leaky_relu":
            mod = nn.LeakyReLU(layer.get("alpha", 0.01))
        elif t == "tanh":
            mod = nn.Tanh()
        elif t == "elu":
            mod = nn.ELU(layer.get("alpha", 1.0))
        elif t == "pad":
            pt, pl, pb, pr = pads(layer)
            if layer.get("mode", "reflect") == "edge":
                mod = nn.ReplicationPad2d((pl, pr, pt, pb))
            else:
                mod = nn.ReflectionPad2d((pl, pr, pt, pb))
            h, w = h + pt + pb, w + pl + pr
        elif t == "gelu":
            mod = nn.GELU()
        elif t == "prelu":
            mod = nn.PReLU(c, device=device)
        elif t == "upsample":
            sh, sw = pair(layer["scale"])
            if layer.get("mode", "nearest") == "bilinear":
                mod = nn.Upsample(scale_factor=(sh, sw), mode="bilinear", align_corners=False)
            else:
                mod = nn.Upsample(scale_factor=(sh, sw), mode="nearest")
            h, w = h * sh, w * sw
        elif t == "batchnorm":
            mod = nn.BatchNorm2d(c, eps=layer.get("epsilon", 1e-5), device=device)
        elif t == "layer_norm":
            if h != 1 or w != 1:
                raise SpecError(f"layers[{i}] ({name}): layer_norm needs a flat input")
            mod = FlatLayerNorm(c, eps=layer.get("epsilon", 1e-5), device=device)
        elif t == "lrn":
            mod = nn.LocalResponseNorm(layer.get("size", 5), layer.get("alpha", 1e-4),
                                       layer.get("beta", 0.75), layer.get("k", 1.0))
        elif t == "flatten":
            mod = Flat()
            c, h, w = c * h * w, 1, 1
        elif t == "fully_connected":
            if h != 1 or w != 1:
                raise SpecError(f"layers[{i}] ({name}): fully_connected needs a flat input")
            mod = Flat(nn.Linear(c, layer["out"], device=device))
            conns = c * layer["out"]
            c = layer["out"]
        elif t == "add":
            mod = Join("add")
        elif t == "mul":
            mod = Join("mul")
            other = shape[srcs[1]]
            if other != (c, h, w) and other != (c, 1, 1):
                raise SpecError(f"layers[{i}] ({name}): mul needs equal shapes or a per-channel "
                                f"scale ({c}, 1, 1), got {other}")
        elif t == "concat":
            mod = Join("concat")
            c = sum(shape[s][0] for s in srcs)
        elif t == "slice":
            begin, end = layer["begin"], layer["end"]
            if not 0 <= begin < end <= c:
                raise SpecError(f"layers[{i}] ({name}): slice [{begin}, {end}) of {c} channels")
            mod, c = ChannelSlice(begin, end), end - begin
        elif t == "channel_shuffle":
            g = layer["groups"]
            if g < 1 or c % g:
                raise SpecError(f"layers[{i}] ({name}): channel_shuffle groups {g} of {c} channels")
            mod = ChannelShuffle(g)
        elif t == "softmax":
            mod = nn.LogSoftmax(dim=1) if layer.get("log", False) else nn.Softmax(dim=1)
        else:
            raise SpecError(f"layers[{i}] ({name}): unknown layer type '{t}'")
        # Parameters: every float of the layer's weight tensors (batchnorm's running statistics
        # included), as `serf model info` counts them.
        params = sum(p.numel() for p in mod.parameters()) + sum(
            b.numel() for n, b in mod.named_buffers() if n.startswith("running_"))
        mods.append(mod)
        names.append(name)
        sources.append(srcs)
        counts.append((params, conns))
        shape[name] = (c, h, w)
    return Graph(mods, names, sources).eval(), names, counts


def weighted(mod):
    """The PyTorch module holding a layer's weights (or None)."""
    if isinstance(mod, Padded):
        mod = mod.mod
    if isinstance(mod, Flat):
        mod = mod.linear
    kinds = (nn.Conv2d, nn.ConvTranspose2d, nn.Linear, nn.BatchNorm2d, nn.LayerNorm, nn.PReLU)
    return mod if isinstance(mod, kinds) else None


def load_weights(model, names, path):
    tensors = read_safetensors(path)
    expected = set()
    for mod, name in zip(model.layers, names):
        target = weighted(mod)
        if target is None:
            continue
        fields = ("weight",) if isinstance(target, nn.PReLU) else ("weight", "bias")
        if isinstance(target, nn.BatchNorm2d):
            fields += ("running_mean", "running_var")
        for pname in fields:
            param = getattr(target, pname)
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
    total_params = sum(p for p, _ in counts)
    total_conns = sum(c for _, c in counts)
    if info["parameters"] != total_params or info["connections"] != total_conns:
        problems.append(f"totals: torch {total_params} parameters {total_conns} connections; "
                        f"serf {info['parameters']} {info['connections']}")
    if info["weight_bytes"] != 4 * total_params:
        problems.append(f"weight_bytes {info['weight_bytes']} != 4 * {total_params}")
    # The shapes must also agree: run the meta model.
    x = torch.empty(1, spec["input"]["channels"], spec["input"]["height"],
                    spec["input"]["width"], device="meta")
    outputs = []
    model(x, keep=outputs)
    for y, layer in zip(outputs, info["layers"]):
        got = list(y.shape[1:])
        if got != layer["output"]:
            problems.append(f"{layer['name']}: torch output {got}, serf {layer['output']}")
    for p in problems:
        print(f"torch_reference.py: mismatch: {p}", file=sys.stderr)
    print(json.dumps({"model": spec["name"], "parameters": total_params,
                      "connections": total_conns, "layers": len(names), "ok": not problems}))
    return 1 if problems else 0


def timed_ms(fn, x, warmup, repeat):
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def frozen(model, x):
    """PyTorch's own inference path: traced, frozen and optimize_for_inference'd (every Conv2d
    and Linear converted to oneDNN with prepacked weights, batchnorm folded). Eager mode on this
    Debian build runs an unstrided 1x1 Conv2d with one thread through slow_conv2d, i.e. the
    reference BLAS (libblas3, no MKL), and Linear through that BLAS too."""
    traced = torch.jit.trace(model, x, check_trace=False)
    return torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))


def bench(spec, args):
    torch.set_num_threads(args.threads)
    model, names, _ = build(spec)
    if args.weights:
        load_weights(model, names, args.weights)
    shape = (args.batch, spec["input"]["channels"], spec["input"]["height"],
             spec["input"]["width"])
    x = load_input(spec, args.input) if args.input else torch.rand(shape) * 2 - 1
    if args.input and args.batch > 1:
        x = x.repeat(args.batch, 1, 1, 1)
    result = {"model": spec["name"], "framework": f"torch {torch.__version__}",
              "threads": args.threads, "repeat": args.repeat, "batch": args.batch,
              "mkldnn": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
              "num_threads": torch.get_num_threads()}
    best = None
    if args.torch_mode != "frozen":  # frozen alone skips the eager runs (seconds per resnet50 run)
        with torch.inference_mode():
            times_ms = timed_ms(model, x, args.warmup, args.repeat)
            # The convolutions alone, in separate runs (timing each layer costs a little).
            conv_ms = []
            for _ in range(args.repeat):
                seconds = [0.0]
                model(x, conv_seconds=seconds)
                conv_ms.append(seconds[0] * 1e3)
        result.update({"eager_median_ms": statistics.median(times_ms),
                       "eager_min_ms": min(times_ms), "conv_median_ms": statistics.median(conv_ms)})
        best = times_ms
        result["mode"] = "eager"
    if args.torch_mode in ("best", "frozen"):
        with torch.inference_mode():
            fast = frozen(model, x)
            frozen_ms = timed_ms(fast, x, args.warmup, args.repeat)
        result.update({"frozen_median_ms": statistics.median(frozen_ms),
                       "frozen_min_ms": min(frozen_ms)})
        if best is None or statistics.median(frozen_ms) < statistics.median(best):
            best, result["mode"] = frozen_ms, "frozen"
    # median_ms / min_ms: the faster mode's (what the engine is compared with).
    result.update({"median_ms": statistics.median(best), "min_ms": min(best),
                   "mean_ms": statistics.fmean(best)})
    print(json.dumps(result))
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
    ap.add_argument("--batch", type=int, default=1,
                    help="rows per --bench run (batch size, default 1)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before --bench (count)")
    ap.add_argument("--torch-mode", choices=("best", "eager", "frozen"), default="best",
                    help="--bench: eager modules, the frozen optimize_for_inference graph, or "
                         "both and report the faster as median_ms (default best)")
    args = ap.parse_args()
    if args.threads < 1 or args.repeat < 1 or args.warmup < 0 or args.batch < 1:
        ap.error("--threads, --repeat and --batch must be >= 1, --warmup >= 0")
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
