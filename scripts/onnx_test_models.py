#!/usr/bin/python3
"""Small ONNX models for tests/model/onnx_import_test.sh (made at test time, nothing committed).

  onnx_test_models.py DIR

Good models, each with DIR/NAME.onnx, DIR/NAME.input.safetensors and DIR/NAME.ref.json (the
output PyTorch computes for that input, {"output": [...], "top5": [...], "outputs": [[...]]}),
and the same for a batch of BATCH (3) images as DIR/NAME.bBATCH.input.safetensors and
DIR/NAME.bBATCH.ref.json ("outputs" holds every row; the first image is the batch-1 input):
  every_op   a PyTorch module exported with torch.onnx: Conv (strides, pads, dilation, groups,
             depthwise) + BatchNormalization (folded), a BatchNormalization after an Add (kept),
             Relu, Clip (ReLU6), Sigmoid, Add, MaxPool (ceil_mode), AveragePool (without the
             padding in the divisor), Concat, GlobalAveragePool, the Shape -> Gather ->
             Unsqueeze -> Concat -> Reshape subgraph of x.view(x.size(0), -1) (dynamic batch),
             Gemm, Softmax
  helper     built with onnx.helper: Conv with auto_pad SAME_UPPER, LRN (torch.onnx decomposes
             LocalResponseNorm), MaxPool with auto_pad SAME_LOWER, Clip with min/max inputs,
             Identity, Dropout, Flatten, MatMul + Add of a constant (the bias), Relu, Gemm
             (transB 0, alpha, beta), Reshape to a constant
  opset10    onnx.helper, opset 10: Conv + BatchNormalization, Clip with min/max attributes,
             AveragePool (padding counted), Flatten, Gemm
  pads       onnx.helper: Pad of zeros everywhere (a no-op, as DenseNet's exporter writes before
             its average pools) before an AveragePool; an uneven zero Pad folded into the Conv
             after it, through an Identity; a zero Pad folded into an AveragePool that does not
             count its own padding; ReduceMean over height and width (keepdims 0); Gemm
  gates      a PyTorch module exported with torch.onnx (opset 13), the blocks of EfficientNet and
             MobileNetV3: SiLU (Sigmoid + Mul, fused into silu), hardswish (HardSigmoid + Mul,
             fused), squeeze-and-excitation with a Sigmoid scale (scale * x) and with a
             HardSigmoid one (x * scale), a Sigmoid read twice (kept, with an element-wise Mul),
             a Mul by a per-channel constant (folded into the Conv before), a Mul of two tensors
  gates14    onnx.helper, opset 14: HardSwish, HardSigmoid (alpha 0.2, beta 0.4) times its input
             (not PyTorch's hardswish: kept as hardsigmoid + mul), GlobalAveragePool, Gemm
  shuffle    a PyTorch module exported with torch.onnx (opset 13), ShuffleNetV2's units: the
             channel shuffle (Reshape to 5-D, Transpose, Reshape back: channel_shuffle) of 2 and
             3 groups, x.chunk(2, dim=1) (Slice pairs: slice), an uneven torch.split (Split),
             Concat
Bad models, DIR/bad_*.onnx, and DIR/bad.tsv: one line per file, "FILE<TAB>expected error text".

Needs Debian's python3-torch and python3-onnx (run with /usr/bin/python3); exit 77 without them.
"""

import json
import os
import struct
import sys

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn.functional as F
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"onnx_test_models.py: skipped: {e}", file=sys.stderr)
    sys.exit(77)


def write_input(path, x):
    data = x.detach().numpy().astype("<f4").tobytes()
    header = json.dumps({"input": {"dtype": "F32", "shape": list(x.shape),
                                   "data_offsets": [0, len(data)]}}).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


BATCH = 3  # the batch every good model also runs at (odd: no halves to hide a layout mix-up)


def batch_of(x, n=BATCH):
    """x's rows, then rows made from its first (mirrored, negated) up to n rows: the same range
    of values, each row different."""
    extra = [x[0].flip(-1), -x[0]]
    rows = list(x[:n]) + [extra[k % 2] for k in range(max(0, n - x.shape[0]))]
    return torch.stack(rows)


def save_good(out, name, x, y):
    """The input x (BATCH rows: batch_of) and PyTorch's output y for it: the first row as
    NAME.input.safetensors / NAME.ref.json, every row as NAME.bBATCH.*; a y of one row is
    written for batch 1 only (a model whose reference is not of the whole batch)."""
    rows = y.reshape(y.shape[0], -1).double().numpy()
    batches = [1] if rows.shape[0] == 1 else [1, x.shape[0]]
    for n in batches:
        stem = os.path.join(out, name if n == 1 else f"{name}.b{n}")
        write_input(stem + ".input.safetensors", x[:n])
        with open(stem + ".ref.json", "w") as f:
            json.dump({"output": [float(v) for v in rows[0]],
                       "top5": [int(i) for i in np.argsort(-rows[0], kind="stable")[:5]],
                       "outputs": [[float(v) for v in row] for row in rows[:n]]}, f)


def randomize_batchnorm(bns, g):
    """Random statistics and affine terms (the same draws, in the same order, for every model)."""
    with torch.no_grad():
        for bn in bns:
            c = bn.num_features
            bn.weight.copy_(0.5 + torch.rand(c, generator=g))
            bn.bias.copy_(0.2 * torch.rand(c, generator=g) - 0.1)
            bn.running_mean.copy_(0.2 * torch.rand(c, generator=g) - 0.1)
            bn.running_var.copy_(0.5 + torch.rand(c, generator=g))


class EveryOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.c1 = torch.nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.g = torch.nn.Conv2d(8, 8, (3, 1), stride=1, padding=(1, 0), groups=2)
        self.bn3 = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(3, 2, padding=1, ceil_mode=True)
        self.avg = torch.nn.AvgPool2d(3, 1, padding=1, count_include_pad=False)
        self.fc = torch.nn.Linear(16, 10)
        randomize_batchnorm((self.bn1, self.bn2, self.bn3), g)

    def forward(self, x):
        a = torch.relu(self.bn1(self.c1(x)))
        b = F.relu6(self.bn2(self.dw(a)))
        s = torch.sigmoid(self.g(b))
        t = self.bn3(s + a)  # after an add: not foldable
        m = self.pool(t)
        p = self.avg(m)
        c = torch.cat([m, p], 1)
        v = F.adaptive_avg_pool2d(c, 1)
        v = v.view(v.size(0), -1)
        return torch.softmax(self.fc(v), dim=1)


def export_good(out, name, model, x):
    """NAME.onnx by torch.onnx (opset 13, dynamic batch, batchnorm kept) and its reference."""
    model.eval()
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(model, x, path, opset_version=13, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                      training=torch.onnx.TrainingMode.PRESERVE)
    x = batch_of(x)
    with torch.inference_mode():
        save_good(out, name, x, model(x))


def every_op(out):
    torch.manual_seed(5)
    export_good(out, "every_op", EveryOp(), torch.rand(1, 3, 12, 12) * 2 - 1)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def save_model(path, nodes, inits, input_shape, output_name="y", opset=13, elem=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem, input_shape)],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.save(model, path)


def same_pads(size, k, s):
    out = -(-size // s)
    total = max(0, (out - 1) * s + k - size)
    return total // 2, total - total // 2  # (small, big)


def helper_model(out):
    rng = np.random.default_rng(7)
    w1 = rng.uniform(-0.3, 0.3, (6, 3, 3, 3))
    b1 = rng.uniform(-0.1, 0.1, 6)
    m1 = rng.uniform(-0.2, 0.2, (6 * 4 * 4, 12))
    a1 = rng.uniform(-0.1, 0.1, 12)
    g1 = rng.uniform(-0.3, 0.3, (12, 5))  # Gemm B [F, O] (transB 0)
    c1 = rng.uniform(-0.1, 0.1, 5)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv_same",
                         kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("LRN", ["c"], ["cl"], name="lrn", size=3, alpha=0.02, beta=0.75,
                         bias=1.5),
        helper.make_node("Identity", ["cl"], ["ci"], name="id"),
        helper.make_node("Clip", ["ci", "lo", "hi"], ["k"], name="clip"),
        helper.make_node("MaxPool", ["k"], ["p"], name="pool_same", kernel_shape=[2, 2],
                         strides=[2, 2], auto_pad="SAME_LOWER"),
        helper.make_node("Dropout", ["p"], ["d"], name="drop"),
        helper.make_node("Flatten", ["d"], ["f"], name="flat", axis=1),
        helper.make_node("MatMul", ["f", "m1"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "a1"], ["ma"], name="bias"),
        helper.make_node("Relu", ["ma"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["rr"], name="reshape"),
        helper.make_node("Gemm", ["rr", "g1", "c1"], ["y"], name="gemm", alpha=0.5, beta=2.0),
    ]
    inits = [init("w1", w1), init("b1", b1), init("lo", -0.5), init("hi", 0.8),
             init("m1", m1), init("a1", a1), init("g1", g1), init("c1", c1),
             numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")]
    save_model(os.path.join(out, "helper.onnx"), nodes, inits, [1, 3, 13, 13])
    x = batch_of(torch.rand(1, 3, 13, 13, generator=torch.Generator().manual_seed(2)) * 2 - 1)
    t = torch.from_numpy
    ph = same_pads(13, 3, 2)
    c = F.conv2d(F.pad(x, (ph[0], ph[1], ph[0], ph[1])), t(w1).float(), t(b1).float(), stride=2)
    k = torch.clamp(F.local_response_norm(c, 3, alpha=0.02, beta=0.75, k=1.5), -0.5, 0.8)
    pp = same_pads(k.shape[2], 2, 2)  # SAME_LOWER: the odd padding before
    p = F.max_pool2d(F.pad(k, (pp[1], pp[0], pp[1], pp[0]), value=float("-inf")), 2, 2)
    r = torch.relu(p.flatten(1) @ t(m1).float() + t(a1).float())
    y = 0.5 * (r @ t(g1).float()) + 2.0 * t(c1).float()
    save_good(out, "helper", x, y)


def opset10_model(out):
    rng = np.random.default_rng(9)
    w = rng.uniform(-0.3, 0.3, (4, 2, 3, 3))
    gamma, beta = rng.uniform(0.5, 1.5, 4), rng.uniform(-0.1, 0.1, 4)
    mean, var = rng.uniform(-0.1, 0.1, 4), rng.uniform(0.5, 1.5, 4)
    fw, fb = rng.uniform(-0.3, 0.3, (3, 4 * 3 * 3)), rng.uniform(-0.1, 0.1, 3)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"],
                         name="bn", epsilon=1e-3),
        helper.make_node("Clip", ["b"], ["k"], name="relu6", min=0.0, max=6.0),
        helper.make_node("AveragePool", ["k"], ["p"], name="avg", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    inits = [init(n, v) for n, v in [("w", w), ("gamma", gamma), ("beta", beta), ("mean", mean),
                                      ("var", var), ("fw", fw), ("fb", fb)]]
    save_model(os.path.join(out, "opset10.onnx"), nodes, inits, [1, 2, 6, 6], opset=10)
    x = batch_of(torch.rand(1, 2, 6, 6, generator=torch.Generator().manual_seed(4)) * 2 - 1)
    t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))
    c = F.conv2d(x, t(w), padding=1)
    b = F.batch_norm(c, t(mean), t(var), t(gamma), t(beta), eps=1e-3)
    p = F.avg_pool2d(torch.clamp(b, 0, 6), 3, 2, padding=1, count_include_pad=True)
    save_good(out, "opset10", x, p.flatten(1) @ t(fw).T + t(fb))


def pads_model(out):
    rng = np.random.default_rng(11)
    w1 = rng.uniform(-0.3, 0.3, (5, 3, 3, 3))
    b1 = rng.uniform(-0.1, 0.1, 5)
    g = rng.uniform(-0.3, 0.3, (4, 5))
    gb = rng.uniform(-0.1, 0.1, 4)
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    nodes = [
        helper.make_node("Pad", ["x", "nopad"], ["x0"], name="pad_none"),
        helper.make_node("AveragePool", ["x0"], ["a0"], name="avg_plain", kernel_shape=[2, 2],
                         strides=[1, 1]),
        # top 1, left 2, bottom 2, right 1 (ONNX: begins of N, C, H, W, then ends)
        helper.make_node("Pad", ["a0", "pads1", "zero"], ["p1"], name="pad_conv"),
        helper.make_node("Identity", ["p1"], ["p1i"], name="id"),
        helper.make_node("Conv", ["p1i", "w1", "b1"], ["c1"], name="conv", kernel_shape=[3, 3],
                         pads=[1, 0, 0, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Pad", ["r1", "pads2"], ["p2"], name="pad_avg"),
        helper.make_node("AveragePool", ["p2"], ["a2"], name="avg_padded", kernel_shape=[3, 3],
                         strides=[2, 2]),
        helper.make_node("ReduceMean", ["a2"], ["m"], name="mean", axes=[-1, 2], keepdims=0),
        helper.make_node("Gemm", ["m", "g", "gb"], ["y"], name="fc", transB=1),
    ]
    inits = [i64("nopad", [0] * 8), i64("pads1", [0, 0, 1, 2, 0, 0, 2, 1]),
             init("zero", 0.0), init("w1", w1), init("b1", b1),
             i64("pads2", [0, 0, 1, 1, 0, 0, 1, 1]), init("g", g), init("gb", gb)]
    save_model(os.path.join(out, "pads.onnx"), nodes, inits, [1, 3, 9, 9])
    x = batch_of(torch.rand(1, 3, 9, 9, generator=torch.Generator().manual_seed(6)) * 2 - 1)
    t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))
    a0 = F.avg_pool2d(x, 2, 1)
    c1 = F.conv2d(F.pad(F.pad(a0, (2, 1, 1, 2)), (0, 1, 1, 0)), t(w1), t(b1))
    a2 = F.avg_pool2d(F.pad(torch.relu(c1), (1, 1, 1, 1)), 3, 2)
    save_good(out, "pads", x, a2.mean(dim=(2, 3)) @ t(g).T + t(gb))


class Gates(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(13)
        self.c1 = torch.nn.Conv2d(3, 12, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(12)
        self.dw = torch.nn.Conv2d(12, 12, 3, padding=1, groups=12)
        self.bn2 = torch.nn.BatchNorm2d(12)
        self.se1_fc1 = torch.nn.Conv2d(12, 4, 1)
        self.se1_fc2 = torch.nn.Conv2d(4, 12, 1)
        self.pw = torch.nn.Conv2d(12, 16, 1)
        self.se2_fc1 = torch.nn.Conv2d(16, 6, 1)
        self.se2_fc2 = torch.nn.Conv2d(6, 16, 1)
        self.c3 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.register_buffer("factor", 0.5 + torch.rand(1, 16, 1, 1, generator=g))
        self.fc = torch.nn.Linear(16, 10)
        randomize_batchnorm((self.bn1, self.bn2), g)

    def forward(self, x):
        a = F.silu(self.bn1(self.c1(x)))
        b = F.hardswish(self.bn2(self.dw(a)))
        pooled = F.adaptive_avg_pool2d(b, 1)
        s = torch.sigmoid(self.se1_fc2(F.silu(self.se1_fc1(pooled))))
        p = self.pw(s * b)  # EfficientNet's squeeze-and-excitation: the scale first
        pooled = F.adaptive_avg_pool2d(p, 1)
        q = p * F.hardsigmoid(self.se2_fc2(torch.relu(self.se2_fc1(pooled))))  # MobileNetV3's
        g = torch.sigmoid(q)
        r = q * g + g  # the Sigmoid has two readers: not a SiLU
        t = self.c3(r) * self.factor
        v = F.adaptive_avg_pool2d(t * r, 1)
        return self.fc(v.flatten(1))


def gates_model(out):
    torch.manual_seed(15)
    export_good(out, "gates", Gates(), torch.rand(1, 3, 10, 10) * 2 - 1)


def channel_shuffle(x, groups):
    """torchvision's ShuffleNetV2 channel_shuffle, as written there."""
    n, c, h, w = x.size()
    x = x.view(n, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(n, -1, h, w)


class Shuffle(torch.nn.Module):
    """ShuffleNetV2's units in small: a stride-2 unit (two branches, concat, shuffle), a stride-1
    unit (x.chunk(2, dim=1): Slice pairs; one half through a branch, concat, shuffle), an uneven
    torch.split (a Split node) and a shuffle of 3 groups."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(19)
        bn = lambda c: torch.nn.BatchNorm2d(c)
        self.c1 = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 3, padding=1), bn(12),
                                      torch.nn.ReLU())
        self.b1 = torch.nn.Sequential(torch.nn.Conv2d(12, 12, 3, 2, 1, groups=12), bn(12),
                                      torch.nn.Conv2d(12, 12, 1), torch.nn.ReLU())
        self.b2 = torch.nn.Sequential(torch.nn.Conv2d(12, 12, 1), torch.nn.ReLU(),
                                      torch.nn.Conv2d(12, 12, 3, 2, 1, groups=12),
                                      torch.nn.Conv2d(12, 12, 1), bn(12), torch.nn.ReLU())
        self.b3 = torch.nn.Sequential(torch.nn.Conv2d(12, 12, 1), torch.nn.ReLU(),
                                      torch.nn.Conv2d(12, 12, 3, 1, 1, groups=12),
                                      torch.nn.Conv2d(12, 12, 1), torch.nn.ReLU())
        self.b4 = torch.nn.Conv2d(15, 15, 3, padding=1)
        self.fc = torch.nn.Linear(24, 10)
        randomize_batchnorm([m for m in self.modules() if isinstance(m, torch.nn.BatchNorm2d)], g)

    def forward(self, x):
        x = self.c1(x)
        x = channel_shuffle(torch.cat((self.b1(x), self.b2(x)), dim=1), 2)  # 24 channels
        x1, x2 = x.chunk(2, dim=1)
        x = channel_shuffle(torch.cat((x1, self.b3(x2)), dim=1), 2)
        a, b = torch.split(x, [9, 15], dim=1)
        x = channel_shuffle(torch.cat((self.b4(b), a), dim=1), 3)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def shuffle_model(out):
    torch.manual_seed(21)
    export_good(out, "shuffle", Shuffle(), torch.rand(1, 3, 12, 12) * 2 - 1)


def gates14_model(out):
    rng = np.random.default_rng(17)
    w = rng.uniform(-0.5, 0.5, (6, 3, 3, 3))
    b = rng.uniform(-0.2, 0.2, 6)
    fw, fb = rng.uniform(-0.5, 0.5, (4, 6)), rng.uniform(-0.1, 0.1, 4)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c"], ["h"], name="hswish"),
        helper.make_node("HardSigmoid", ["h"], ["g"], name="hsig", alpha=0.2, beta=0.4),
        helper.make_node("Mul", ["h", "g"], ["m"], name="gate"),
        helper.make_node("GlobalAveragePool", ["m"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    inits = [init(n, v) for n, v in [("w", w), ("b", b), ("fw", fw), ("fb", fb)]]
    save_model(os.path.join(out, "gates14.onnx"), nodes, inits, [1, 3, 7, 7], opset=14)
    x = batch_of(torch.rand(1, 3, 7, 7, generator=torch.Generator().manual_seed(8)) * 4 - 2)
    t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))
    h = F.hardswish(F.conv2d(x, t(w), t(b), padding=1))
    m = h * torch.clamp(0.2 * h + 0.4, 0.0, 1.0)
    save_good(out, "gates14", x, m.mean(dim=(2, 3)) @ t(fw).T + t(fb))


def bad_models(out):
    lines = []

    def bad(name, expect, nodes=None, inits=(), shape=(1, 3, 8, 8), opset=13,
            elem=TensorProto.FLOAT, raw=None):
        path = os.path.join(out, f"bad_{name}.onnx")
        if raw is not None:
            with open(path, "wb") as f:
                f.write(raw)
        else:
            save_model(path, nodes, list(inits), list(shape), opset=opset, elem=elem)
        lines.append(f"bad_{name}.onnx\t{expect}")

    relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    w3 = init("w", np.zeros((4, 3, 3, 3)))
    bad("not_onnx", "not an ONNX model, or a truncated one", raw=b"hello, this is not a model\n")
    good = open(os.path.join(out, "every_op.onnx"), "rb").read()
    bad("truncated", "not an ONNX model, or a truncated one", raw=good[:len(good) - 7])
    bad("opset", "opset 18 is newer than the newest supported, 17", relu, opset=18)
    bad("op", "node 't' (Erf): operator Erf is not supported",
        [helper.make_node("Erf", ["x"], ["y"], name="t")])
    bad("attribute", "node 'p' (MaxPool): dilations [2, 2] are not supported for pooling",
        [helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2],
                          dilations=[2, 2])])
    bad("unknown_attribute", "node 'c' (Conv): attribute 'bogus' is not supported",
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c", bogus=1)], [w3])
    bad("dynamic", "input 'x': dimension 2 is dynamic ('height'); only the batch dimension may be",
        relu, shape=("N", 3, "height", 8))
    bad("batch", "input 'x' has batch dimension 4", relu, shape=(4, 3, 8, 8))
    bad("fp16_input", "input 'x' has type FLOAT16 (only FLOAT, float32, is supported)", relu,
        elem=TensorProto.FLOAT16)
    bad("fp64_weight", "node 'c' (Conv): weight 'w' has type DOUBLE (only FLOAT",
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c")],
        [numpy_helper.from_array(np.zeros((4, 3, 3, 3)), "w")])
    bad("cycle", "node 'a' (Relu): the graph has a cycle through this node",
        [helper.make_node("Relu", ["x2"], ["x1"], name="a"),
         helper.make_node("Add", ["x", "x1"], ["x2"], name="b"),
         helper.make_node("Relu", ["x2"], ["y"], name="c")])
    bad("dangling", "node 'r' (Relu): input 'ghost' is produced by no node, initializer or "
        "graph input", [helper.make_node("Relu", ["ghost"], ["y"], name="r")])
    bad("weight_shape", "node 'c' (Conv): weight 'w' has shape [4, 5, 3, 3] but the input has 3 "
        "channels", [helper.make_node("Conv", ["x", "w"], ["y"], name="c")],
        [init("w", np.zeros((4, 5, 3, 3)))])
    bad("reshape", "node 'r' (Reshape): reshape of [1, 3, 8, 8] to [1, 3, 64] (only the flatten "
        "kind", [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
        [numpy_helper.from_array(np.array([1, 3, 64], dtype=np.int64), "s")])
    bad("bias_shape", "node 'c' (Conv): bias 'b' has shape [3], the weight needs [4]",
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c")], [w3, init("b", [0, 0, 0])])
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64), "pads")
    pad = helper.make_node("Pad", ["x", "pads"], ["xp"], name="pd")
    bad("pad_maxpool", "node 'p' (MaxPool): input 'xp' is padded by Pad 'pd', which is supported "
        "only where a Conv or an AveragePool reads it",
        [pad, helper.make_node("MaxPool", ["xp"], ["y"], name="p", kernel_shape=[2, 2])], [pads])
    bad("pad_output", "output 'y' is padded by Pad 'pd'",
        [helper.make_node("Pad", ["x", "pads"], ["y"], name="pd")], [pads])
    bad("pad_wrap", "node 'pd' (Pad): mode 'wrap' (supported: constant zeros, reflect, edge)",
        [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pd", mode="wrap"),
         helper.make_node("Conv", ["xp", "w"], ["y"], name="c")], [pads, w3])
    bad("pad_value", "node 'pd' (Pad): constant_value 1.000000 (only zero padding",
        [helper.make_node("Pad", ["x", "pads", "one"], ["xp"], name="pd"),
         helper.make_node("Conv", ["xp", "w"], ["y"], name="c")], [pads, init("one", 1.0), w3])
    bad("pad_channels", "node 'pd' (Pad): pads [0, 1, 0, 0, 0, 0, 0, 0] (only padding of the "
        "height and width", [helper.make_node("Pad", ["x", "cpads"], ["y"], name="pd")],
        [numpy_helper.from_array(np.array([0, 1, 0, 0, 0, 0, 0, 0], dtype=np.int64), "cpads")])
    bad("pad_avg_ceil", "node 'a' (AveragePool): input padded by Pad 'pd' with ceil_mode 1",
        [pad, helper.make_node("AveragePool", ["xp"], ["y"], name="a", kernel_shape=[3, 3],
                               strides=[2, 2], ceil_mode=1)], [pads])
    bad("reduce_axes", "node 'm' (ReduceMean): axes [1] (only the mean over height and width",
        [helper.make_node("ReduceMean", ["x"], ["y"], name="m", axes=[1])])
    bad("pad_attribute", "node 'pd' (Pad): attribute 'pads' at opset 13 (from opset 11 pads and "
        "the constant value are inputs 1 and 2",
        [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pd", pads=[0, 0, 1, 1, 0, 0, 1, 1]),
         helper.make_node("Conv", ["xp", "w"], ["y"], name="c")], [pads, w3])
    bad("pad_value_attribute", "node 'pd' (Pad): attribute 'value' at opset 11",
        [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pd", value=1.0),
         helper.make_node("Conv", ["xp", "w"], ["y"], name="c")], [pads, w3], opset=11)
    rows = helper.make_node("AveragePool", ["x"], ["rows"], name="rows", kernel_shape=[1, 8])
    bad("mul_width", "node 'm' (Mul): broadcast of [1, 3, 8, 8] by [1, 3, 8, 1] (supported: "
        "equal shapes, or an [N, C, H, W] tensor by a per-channel [N, C, 1, 1] scale)",
        [rows, helper.make_node("Mul", ["x", "rows"], ["y"], name="m")])
    one = init("w1", np.full((1, 3, 8, 8), 0.01))
    bad("mul_scalar", "node 'm' (Mul): broadcast of [1, 3, 8, 8] by [1, 1, 1, 1]",
        [helper.make_node("Conv", ["x", "w1"], ["s"], name="c"),
         helper.make_node("Mul", ["x", "s"], ["y"], name="m")], [one])
    # A per-channel Mul of the input runs since session 31 (a batchnorm layer: onnx_user_models'
    # user_blocks); a constant divided by a tensor, or two tensors subtracted, are no scale.
    bad("div_by_tensor", "node 'd' (Div): dividing a constant by a tensor (supported: a tensor by "
        "a constant)", [helper.make_node("Div", ["k", "x"], ["y"], name="d")],
        [init("k", np.ones((1, 3, 1, 1)))])
    bad("sub_tensors", "node 's' (Sub): subtracting two tensors [1, 3, 8, 8] and [1, 3, 8, 8]",
        [helper.make_node("Relu", ["x"], ["r"], name="r"),
         helper.make_node("Sub", ["x", "r"], ["y"], name="s")])
    bad("mul_const_height", "node 'm' (Mul): multiplying [1, 4, 6, 6] by a constant of shape "
        "[1, 1, 6, 1]", [helper.make_node("Conv", ["x", "w"], ["c"], name="c"),
                         helper.make_node("Mul", ["c", "k"], ["y"], name="m")],
        [w3, init("k", np.ones((1, 1, 6, 1)))])
    ints = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.int64), n)
    shape = ints("s5", [1, 2, 2, 8, 8])
    view = helper.make_node("Reshape", ["x", "s5"], ["v"], name="rs")
    back = ints("s4", [1, 4, 8, 8])
    bad("transpose_perm", "node 't' (Transpose): transpose of [1, 2, 2, 8, 8] with perm "
        "[0, 1, 2, 4, 3] (only a channel shuffle is supported: Reshape [N, C, H, W] to "
        "[N, g, C/g, H, W], Transpose perm (0, 2, 1, 3, 4), Reshape back to [N, C, H, W])",
        [view, helper.make_node("Transpose", ["v"], ["w"], name="t", perm=[0, 1, 2, 4, 3]),
         helper.make_node("Reshape", ["w", "s4"], ["y"], name="rb")], [shape, back],
        shape=(1, 4, 8, 8))
    bad("transpose_4d", "node 't' (Transpose): transpose of [1, 3, 8, 8] with perm [0, 1, 3, 2] "
        "(only a channel shuffle", [helper.make_node("Transpose", ["x"], ["y"], name="t",
                                                     perm=[0, 1, 3, 2])])
    bad("reshape_5d_relu", "node 'r' (Relu): input 'v' is the 5-D view [1, 2, 2, 8, 8] of "
        "Reshape 'rs', supported only as a channel shuffle",
        [view, helper.make_node("Relu", ["v"], ["y"], name="r")], [shape], shape=(1, 4, 8, 8))
    bad("reshape_5d_back", "node 'rb' (Reshape): reshape of the 5-D view [1, 2, 2, 8, 8] of 'rs' "
        "to [1, 4, 8, 8] (only a channel shuffle",  # back without the Transpose
        [view, helper.make_node("Reshape", ["v", "s4"], ["y"], name="rb")], [shape, back],
        shape=(1, 4, 8, 8))
    bad("reshape_5d_output", "output 'y' is the 5-D view of Reshape 'rs'",
        [helper.make_node("Reshape", ["x", "s5"], ["y"], name="rs")], [shape], shape=(1, 4, 8, 8))
    ints = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.int64), n)
    bad("slice_height", "node 's' (Slice): slice of [1, 3, 8, 8] with starts [0], ends [4], axes "
        "[2], steps [] (only a step-1 slice of the channels, axis 1)",
        [helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"], name="s")],
        [ints("st", [0]), ints("en", [4]), ints("ax", [2])])
    bad("slice_step", "node 's' (Slice): slice of [1, 3, 8, 8] with starts [0], ends [3], axes "
        "[1], steps [2]", [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"],
                                            name="s")],
        [ints("st", [0]), ints("en", [3]), ints("ax", [1]), ints("sp", [2])])
    with open(os.path.join(out, "bad.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) != 2:
        print("usage: onnx_test_models.py DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    every_op(out)
    helper_model(out)
    opset10_model(out)
    pads_model(out)
    gates_model(out)
    gates14_model(out)
    shuffle_model(out)
    bad_models(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
