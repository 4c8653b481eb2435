#!/usr/bin/python3
"""Models a user might export, for tests/model/onnx_import_test.sh (made at test time).

  onnx_user_models.py DIR [--each]

--each writes instead each building block of HandBlocks alone at opsets 11, 13 and 17 (the
survey of docs/models.md; CTest onnx_user_blocks_each, labelled slow), good models only.

Each is built to hit a variant the zoo does not: opsets 9, 11, 13, 17 and torch 1.13's default,
dynamic and fixed batch, torch.jit.script control flow, pooling corner cases (ceil_mode,
count_include_pad, dilation), asymmetric pads and auto_pad, grouped convs whose groups do not fill
oneDNN's channel blocks, Gemm's transA/transB/alpha/beta, MatMul alone, Flatten and Reshape forms,
Softmax and LogSoftmax axes (and pytorch/examples' MNIST network), Clip forms, activations, Upsample/Resize, ConvTranspose, Pad modes,
Constant and Identity chains, initializers listed as inputs, dynamic spatial dims, FP16 and INT64
tensors, several outputs, unused initializers and unnamed nodes.

Writes, like scripts/onnx_test_models.py (whose helpers it uses):
  DIR/user_good.txt   one NAME a line: DIR/NAME.onnx imports, and `serf infer` of
                      DIR/NAME.input.safetensors (one image) must match DIR/NAME.ref.json
                      (PyTorch's output), and of DIR/NAME.b3.input.safetensors (a batch of 3)
                      DIR/NAME.b3.ref.json ("outputs" holds every row)
  DIR/user_bad.tsv    "FILE<TAB>expected error text": refused with one line, exit 2, nothing written

Needs Debian's python3-torch and python3-onnx (run with /usr/bin/python3); exit 77 without them.
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_test_models as base  # noqa: E402  (exits 77 without torch / onnx)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

nn = torch.nn


class Book:
    """The good and bad models written so far."""

    def __init__(self, out):
        self.out = out
        self.good = []
        self.bad = []

    def path(self, name):
        return os.path.join(self.out, name + ".onnx")

    def export(self, name, model, x, expect=None, opset=13, dynamic=True, outputs=("y",),
               **kwargs):
        """torch.onnx.export of `model` (eval mode); good when `expect` is None."""
        model.eval()
        axes = {"x": {0: "batch"}, **{o: {0: "batch"} for o in outputs}} if dynamic else None
        if isinstance(dynamic, dict):
            axes = dynamic
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, x, self.path(name), opset_version=opset, input_names=["x"],
                              output_names=list(outputs), dynamic_axes=axes, **kwargs)
        if expect is not None:
            self.bad.append(f"{name}.onnx\t{expect}")
            return
        x = base.batch_of(x)
        with torch.inference_mode():
            y = model(x)
        base.save_good(self.out, name, x, y)
        self.good.append(name)

    def helper(self, name, nodes, inits, x, y=None, expect=None, opset=13,
               elem=TensorProto.FLOAT, outputs=("y",), inputs_extra=()):
        """A graph made with onnx.helper; good (its reference `y` for the rows of `x`, made by
        base.batch_of) when `expect` is None. The graph's input has a batch of 1."""
        shape = [1] + list(x.shape[1:]) if hasattr(x, "shape") else list(x)
        ins = [helper.make_tensor_value_info("x", elem, shape)] + list(inputs_extra)
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        graph = helper.make_graph(nodes, "g", ins, outs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 7
        onnx.save(model, self.path(name))
        if expect is not None:
            self.bad.append(f"{name}.onnx\t{expect}")
            return
        # serf's input file is [N, C, H, W]: a vector input [N, F] is held as [N, F, 1, 1].
        base.save_good(self.out, name, x if x.dim() == 4 else x.reshape(*x.shape, 1, 1), y)
        self.good.append(name)

    def write(self):
        with open(os.path.join(self.out, "user_good.txt"), "w") as f:
            f.write("\n".join(self.good) + "\n")
        with open(os.path.join(self.out, "user_bad.tsv"), "w") as f:
            f.write("\n".join(self.bad) + "\n")


def image(shape, seed):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float32))


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def bn_all(model, seed):
    g = torch.Generator().manual_seed(seed)
    base.randomize_batchnorm([m for m in model.modules()
                              if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d))], g)
    return model


class SmallNet(nn.Module):
    """What a user writes first: conv-bn-relu, pooling, a conv without bias, ReLU6, dropout,
    x.view(x.size(0), -1), a Linear and a BatchNorm1d."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(0.3)
        self.fc1 = nn.Linear(16, 12)
        self.bn3 = nn.BatchNorm1d(12)
        self.fc2 = nn.Linear(12, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn1(self.c1(x))), 2)
        x = F.relu6(self.bn2(self.c2(x)))
        x = F.adaptive_avg_pool2d(self.drop(x), 1)
        x = x.view(x.size(0), -1)
        return self.fc2(torch.relu(self.bn3(self.fc1(x))))


def opsets(book):
    for opset in (9, 11, 13, 17, None):
        torch.manual_seed(31)
        name = f"user_opset{opset or '_default'}"
        book.export(name, bn_all(SmallNet(), 32), image((1, 3, 16, 16), 33), opset=opset)
    torch.manual_seed(31)
    book.export("user_fixed_batch", bn_all(SmallNet(), 32), image((1, 3, 16, 16), 34),
                opset=None, dynamic=False)
    # Old exporters: every initializer also a graph input, no constant folding.
    torch.manual_seed(35)
    book.export("user_init_inputs", bn_all(SmallNet(), 36), image((1, 3, 16, 16), 37), opset=9,
                keep_initializers_as_inputs=True, do_constant_folding=False)
    torch.manual_seed(31)
    book.export("user_dynamic_hw", SmallNet(), image((1, 3, 16, 16), 33),
                dynamic={"x": {0: "batch", 2: "height", 3: "width"}},
                expect="input 'x': dimension 2 is dynamic ('height'); only the batch dimension")


class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.c(x)
        if bool(y.mean() > 0):
            y = torch.relu(y)
        else:
            y = torch.sigmoid(y)
        return y


class Repeat(nn.Module):
    """A scripted loop: with a constant trip count torch.onnx unrolls it; with a condition on the
    data it stays a Loop."""

    def __init__(self, data_dependent):
        super().__init__()
        self.c = nn.Conv2d(3, 3, 3, padding=1)
        self.data_dependent = data_dependent

    def forward(self, x):
        if self.data_dependent:
            i = 0
            while i < 3 and bool(x.mean() < 10.0):
                x = torch.relu(self.c(x))
                i += 1
        else:
            for _ in range(3):
                x = torch.relu(self.c(x))
        return x


def control_flow(book):
    torch.manual_seed(41)
    book.export("user_script_if", torch.jit.script(Branch()), image((1, 3, 8, 8), 42),
                expect="(If): control flow (the subgraph in attribute 'then_branch') is not "
                       "supported; export a traced module")
    book.export("user_script_loop", torch.jit.script(Repeat(True)), image((1, 3, 8, 8), 43),
                expect="(Loop): control flow (the subgraph in attribute 'body') is not supported")
    torch.manual_seed(44)
    book.export("user_script_unrolled", torch.jit.script(Repeat(False)), image((1, 3, 8, 8), 45))


class Pools(nn.Module):
    """15 -> 8 -> 5 -> 5 -> 3 -> 2: each pooling's ceil_mode adds a partial window."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3, padding=1)
        self.avg_down = nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)  # ResNet-D
        self.max_ceil = nn.MaxPool2d(3, 2, padding=1, ceil_mode=True)
        self.avg_in = nn.AvgPool2d(3, 1, padding=1, count_include_pad=True)  # Pad + AveragePool
        self.avg_ex = nn.AvgPool2d(3, 1, padding=1, count_include_pad=False)
        self.max2 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.c2 = nn.Conv2d(6, 6, 1)
        self.avg_ceil = nn.AvgPool2d(2, 2, ceil_mode=True)  # count_include_pad, no padding
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        x = self.max_ceil(self.avg_down(torch.relu(self.c(x))))
        x = self.max2(self.avg_in(x) + self.avg_ex(x))
        x = self.avg_ceil(self.c2(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class OnePool(nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = pool

    def forward(self, x):
        return self.pool(self.c(x))


def pools(book):
    torch.manual_seed(51)
    book.export("user_pools", Pools(), image((1, 3, 15, 15), 52))
    book.export("user_avgpool_ceil_pad", OnePool(nn.AvgPool2d(3, 2, padding=1, ceil_mode=True)),
                image((1, 3, 8, 8), 53),
                expect="(AveragePool): input padded by Pad '/pool/Pad' with ceil_mode 1 adding a "
                       "partial window")
    book.export("user_maxpool_dilation",
                OnePool(nn.MaxPool2d(3, 2, dilation=2, ceil_mode=True)), image((1, 3, 12, 12), 54),
                expect="node '/pool/MaxPool' (MaxPool): dilations [2, 2] are not supported for "
                       "pooling")


def same_pads(size, k, s):
    out = -(-size // s)
    total = max(0, (out - 1) * s + k - size)
    return total // 2, total - total // 2


def padding(book):
    """onnx.helper: Conv with asymmetric pads and no bias, auto_pad SAME_LOWER / SAME_UPPER,
    AveragePool with asymmetric pads counted and not, MaxPool SAME_UPPER, Flatten axis -3."""
    rng = np.random.default_rng(61)
    w1 = rng.uniform(-0.3, 0.3, (4, 3, 3, 3))
    w2, b2 = rng.uniform(-0.3, 0.3, (4, 4, 3, 3)), rng.uniform(-0.1, 0.1, 4)
    w3 = rng.uniform(-0.3, 0.3, (4, 4, 2, 2))
    g, gb = rng.uniform(-0.3, 0.3, (3, 16)), rng.uniform(-0.1, 0.1, 3)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv_asym", pads=[0, 1, 2, 1]),
        helper.make_node("Conv", ["c1", "w2", "b2"], ["c2"], name="conv_lower", strides=[2, 2],
                         auto_pad="SAME_LOWER"),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], name="conv_upper", auto_pad="SAME_UPPER"),
        helper.make_node("AveragePool", ["c3"], ["a1"], name="avg_in", kernel_shape=[3, 3],
                         pads=[1, 0, 0, 1], count_include_pad=1),
        helper.make_node("AveragePool", ["a1"], ["a2"], name="avg_ex", kernel_shape=[2, 2],
                         pads=[0, 1, 1, 0]),
        helper.make_node("MaxPool", ["a2"], ["m"], name="max_upper", kernel_shape=[3, 3],
                         strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("Flatten", ["m"], ["f"], name="flat", axis=-3),
        helper.make_node("Gemm", ["f", "g", "gb"], ["y"], name="fc", transB=1),
    ]
    inits = [base.init(n, v) for n, v in
             [("w1", w1), ("w2", w2), ("b2", b2), ("w3", w3), ("g", g), ("gb", gb)]]
    x = base.batch_of(image((1, 3, 10, 10), 62))
    c1 = F.conv2d(F.pad(x, (1, 1, 0, 2)), t(w1))  # F.pad: (left, right, top, bottom)
    lo = same_pads(10, 3, 2)
    c2 = F.conv2d(F.pad(c1, (lo[1], lo[0], lo[1], lo[0])), t(w2), t(b2), stride=2)
    up = same_pads(5, 2, 1)
    c3 = F.conv2d(F.pad(c2, (up[0], up[1], up[0], up[1])), t(w3))
    a1 = F.avg_pool2d(F.pad(c3, (0, 1, 1, 0)), 3, 1)  # the padding counted: kernel divisor
    pad_a2 = (1, 0, 0, 1)
    a2 = (F.avg_pool2d(F.pad(a1, pad_a2), 2, 1) /
          F.avg_pool2d(F.pad(torch.ones_like(a1), pad_a2), 2, 1))  # over the input part only
    mp = same_pads(a2.shape[2], 3, 2)
    m = F.max_pool2d(F.pad(a2, (mp[0], mp[1], mp[0], mp[1]), value=float("-inf")), 3, 2)
    book.helper("user_pads", nodes, inits, x, m.flatten(1) @ t(g).T + t(gb))


class Groups(nn.Module):
    """Grouped convs whose groups do not fill 16-channel blocks, and depthwise."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 24, 3, padding=1)
        self.g1 = nn.Conv2d(24, 24, 3, padding=1, groups=3)  # 8 a group
        self.dm = nn.Conv2d(24, 48, 3, padding=1, groups=24)  # depthwise, multiplier 2
        self.g2 = nn.Conv2d(48, 36, 1, groups=6)  # 8 in, 6 out
        self.g3 = nn.Conv2d(36, 48, 3, padding=1, groups=12, bias=False)  # 3 in, 4 out
        self.bn = nn.BatchNorm2d(48)
        self.dw = nn.Conv2d(48, 48, 3, stride=2, groups=48)
        self.g5 = nn.Conv2d(48, 40, 1, groups=8)  # 6 in, 5 out
        self.fc = nn.Linear(40, 7)

    def forward(self, x):
        x = torch.relu(self.dm(self.g1(torch.relu(self.c1(x)))))
        x = torch.relu(self.bn(self.g3(torch.relu(self.g2(x)))))
        x = self.g5(torch.relu(self.dw(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def groups(book):
    torch.manual_seed(71)
    book.export("user_groups", bn_all(Groups(), 72), image((1, 3, 10, 10), 73))


def gemm(book):
    """[N, F] input: Gemm with alpha, beta and a [1, O] bias; Gemm transB 1 without bias; MatMul
    without Add; Softmax axis -1."""
    rng = np.random.default_rng(81)
    b1, c1 = rng.uniform(-0.5, 0.5, (6, 5)), rng.uniform(-0.2, 0.2, (1, 5))
    b2 = rng.uniform(-0.5, 0.5, (4, 5))
    w3 = rng.uniform(-0.5, 0.5, (4, 3))
    nodes = [
        helper.make_node("Gemm", ["x", "b1", "c1"], ["g1"], name="gemm_ab", alpha=0.7, beta=0.3),
        helper.make_node("Relu", ["g1"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "b2"], ["g2"], name="gemm_tb", transB=1),
        helper.make_node("MatMul", ["g2", "w3"], ["m"], name="matmul"),
        helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1),
    ]
    inits = [base.init(n, v) for n, v in [("b1", b1), ("c1", c1), ("b2", b2), ("w3", w3)]]
    x = base.batch_of(image((1, 6), 82))
    r = torch.relu(0.7 * (x @ t(b1)) + 0.3 * t(c1))
    book.helper("user_gemm", nodes, inits, x, torch.softmax((r @ t(b2).T) @ t(w3), -1))
    book.helper("user_gemm_transa",
                [helper.make_node("Gemm", ["x", "bt"], ["y"], name="gemm_ta", transA=1)],
                [base.init("bt", rng.uniform(-0.5, 0.5, (1, 5)))], x,
                expect="node 'gemm_ta' (Gemm): transA 1")


def shapes(book):
    """Reshape with 0 and -1, to [N, F, 1, 1] and back; Unsqueeze / Squeeze of axes [2, 3];
    Flatten axis 0 and 2 (refused)."""
    rng = np.random.default_rng(91)
    w, b = rng.uniform(-0.5, 0.5, (5, 4, 1, 1)), rng.uniform(-0.1, 0.1, 5)
    g = rng.uniform(-0.5, 0.5, (45, 6))
    w2 = rng.uniform(-0.5, 0.5, (6, 6, 1, 1))
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
        helper.make_node("Reshape", ["c", "keep_rest"], ["f"], name="reshape_0_m1"),
        helper.make_node("MatMul", ["f", "g"], ["m"], name="matmul"),
        helper.make_node("Reshape", ["m", "m1_6"], ["m2"], name="reshape_m1_6"),
        helper.make_node("Unsqueeze", ["m2", "hw"], ["u"], name="unsqueeze"),
        helper.make_node("Conv", ["u", "w2"], ["c2"], name="conv_1x1"),
        helper.make_node("Squeeze", ["c2", "hw"], ["s"], name="squeeze"),
        helper.make_node("Reshape", ["s", "to4"], ["s4"], name="reshape_4d"),
        helper.make_node("Sigmoid", ["s4"], ["sg"], name="sigmoid"),
        helper.make_node("Flatten", ["sg"], ["y"], name="flat"),
    ]
    inits = [base.init("w", w), base.init("b", b), base.init("g", g), base.init("w2", w2),
             ints("keep_rest", [0, -1]), ints("m1_6", [-1, 6]), ints("hw", [2, 3]),
             ints("to4", [0, -1, 1, 1])]
    x = base.batch_of(image((1, 4, 3, 3), 92))
    m = F.conv2d(x, t(w), t(b)).flatten(1) @ t(g)
    c2 = F.conv2d(m.reshape(-1, 6, 1, 1), t(w2))
    book.helper("user_reshape", nodes, inits, x, torch.sigmoid(c2).flatten(1))
    for axis in (0, 2):
        book.helper(f"user_flatten_axis{axis}",
                    [helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=axis)], [],
                    (1, 3, 4, 4),
                    expect=f"node 'flat' (Flatten): axis {axis} (only axis 1")
    book.helper("user_squeeze_one", [helper.make_node("GlobalAveragePool", ["x"], ["p"], name="gap"),
                                     helper.make_node("Squeeze", ["p", "ax"], ["y"], name="sq")],
                [ints("ax", [0])], (1, 3, 4, 4),
                expect="node 'sq' (Squeeze): squeeze of [1, 3, 1, 1] over axes [0]")


class Heads(nn.Module):
    """A classifier head: softmax or log_softmax over dim 1 or -1, or two softmaxes added."""

    def __init__(self, dim=1, log=False, two=False):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3)
        self.a = nn.Linear(6, 5)
        self.b = nn.Linear(6, 5)
        self.dim, self.log, self.two = dim, log, two

    def forward(self, x):
        v = torch.flatten(F.adaptive_avg_pool2d(torch.relu(self.c(x)), 1), 1)
        if self.two:
            return torch.softmax(self.a(v), dim=1) + torch.softmax(self.b(v), dim=-1)
        return (F.log_softmax if self.log else torch.softmax)(self.a(v), dim=self.dim)


class Mnist(nn.Module):
    """pytorch/examples' MNIST network, as users copy it: it ends in log_softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.flatten(self.dropout1(F.max_pool2d(x, 2)), 1)
        x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
        return F.log_softmax(x, dim=1)


class ChannelSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.softmax(self.c(x), dim=1)


def softmax(book):
    for name, opset, kwargs in [("softmax11", 11, {}), ("softmax13_last", 13, {"dim": -1}),
                                ("logsoftmax11", 11, {"log": True}),
                                ("logsoftmax13_last", 13, {"log": True, "dim": -1})]:
        torch.manual_seed(101)
        book.export(f"user_{name}", Heads(**kwargs), image((1, 3, 8, 8), 102), opset=opset)
    torch.manual_seed(103)
    book.export("user_mnist", Mnist(), image((1, 1, 28, 28), 104), opset=None)
    torch.manual_seed(101)
    book.export("user_softmax_mid", Heads(two=True), image((1, 3, 8, 8), 105),
                expect="(Softmax): a softmax read by other layers (only the model's last layer")
    book.export("user_softmax_channels", ChannelSoftmax(), image((1, 3, 8, 8), 106),
                expect="(Softmax): softmax over axis 1 of a rank-4 tensor")


class Clips(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.c(x)
        a, b = torch.clamp(x, -0.5, 0.5), F.hardtanh(x)
        c, d = torch.clamp(x, min=-0.2), torch.clamp(x, max=0.3)
        v = F.adaptive_avg_pool2d(a + b + c + d + F.relu6(x), 1)
        return self.fc(torch.flatten(v, 1))


def clips(book):
    for opset in (10, 13):
        torch.manual_seed(111)
        book.export(f"user_clip{opset}", Clips(), image((1, 3, 6, 6), 112), opset=opset)


class Act(nn.Module):
    def __init__(self, act, channels=4):
        super().__init__()
        self.c = nn.Conv2d(3, channels, 3, padding=1)
        self.act = act
        self.fc = nn.Linear(channels, 3)

    def forward(self, x):
        x = self.act(self.c(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class LeNet(nn.Module):
    """LeNet-5 as textbooks write it: tanh and average pooling; and a LeakyReLU / ELU block."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.c3 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2)
        x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        x = F.elu(self.c3(x), 0.7) + F.leaky_relu(x, 0.1)  # on the conv's output and the pool's
        x = F.leaky_relu(self.fc1(torch.flatten(x, 1)))  # ONNX's default slope, 0.01
        return self.fc3(F.elu(torch.tanh(self.fc2(x))))


class Mlp(nn.Module):
    """A conv stem, then a transformer-style MLP head: Linear, an activation on [N, F], Linear."""

    def __init__(self, act):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 3 * 3, 12)
        self.act = act
        self.fc2 = nn.Linear(12, 5)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.c(x)), 2)
        return self.fc2(self.act(self.fc1(torch.flatten(x, 1))))


def randomize_prelu(model, seed):
    """Slopes spread around PyTorch's 0.25, one per channel (so they differ)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.PReLU):
                m.weight.copy_(0.5 * torch.rand(m.weight.shape, generator=g) - 0.1)
    return model


def activations(book):
    """LeakyRelu, Tanh, Elu; PRelu (one slope, one per channel, on [N, C, H, W] and [N, F]) and
    GELU (torch.onnx's Div-Erf-Add-Mul-Mul), from two images (batch_of adds a third); GELU's near
    misses and its tanh approximation refused."""
    for opset in (9, 13):
        torch.manual_seed(121)
        book.export(f"user_lenet{opset}", LeNet(), image((1, 1, 28, 28), 122), opset=opset)
    x = image((2, 3, 6, 6), 124)
    for name, model, opset in [
            ("prelu", Act(nn.PReLU(4)), 13), ("prelu9", Act(nn.PReLU(4)), 9),
            ("prelu_one", Act(nn.PReLU()), 13), ("prelu_mlp", Mlp(nn.PReLU(12)), 13),
            ("gelu", Act(nn.GELU()), 13), ("gelu17", Act(nn.GELU(), 16), 17),
            ("gelu_mlp", Mlp(nn.GELU()), 13)]:
        torch.manual_seed(123)
        book.export(f"user_{name}", randomize_prelu(model, 125), x, opset=opset)
    torch.manual_seed(123)
    # GELU's tanh approximation is no gelu layer: its Muls, Add and Tanh import one by one
    # (refused at its first Mul by a constant before session 31).
    book.export("user_gelu_tanh", Act(nn.GELU(approximate="tanh")), x)
    gelu_near_misses(book)


def gelu_near_misses(book):
    """onnx.helper: GELU's subgraph with one thing changed is refused at the node that changes it
    (never imported as GELU); a Div that is no GELU's is refused where it is read."""
    rng = np.random.default_rng(127)
    w = rng.uniform(-0.5, 0.5, (4, 3, 3, 3))

    def gelu(name, div=1.4142135, one=1.0, half=0.5, times="c", expect=""):
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["r"], name="relu"),
                 helper.make_node("Div", ["c", "k_div"], ["d"], name="div"),
                 helper.make_node("Erf", ["d"], ["e"], name="erf"),
                 helper.make_node("Add", ["e", "k_one"], ["a"], name="add"),
                 helper.make_node("Mul", [times, "a"], ["m"], name="mul"),
                 helper.make_node("Mul", ["m", "k_half"], ["y"], name="half")]
        inits = [base.init("w", w), base.init("k_div", div), base.init("k_one", one),
                 base.init("k_half", half)]
        book.helper(f"user_gelu_{name}", nodes, inits, (1, 3, 6, 6), expect=expect)

    pattern = "departs from GELU's x * (1 + Erf(x / sqrt(2))) * 0.5"
    gelu("divisor", div=1.5, expect=f"node 'erf' (Erf): Erf of x / 1.5 (Div 'div') {pattern}")
    gelu("add", one=2.0,
         expect=f"node 'add' (Add): adding 2 to Erf(x / sqrt(2)) (Div 'div') {pattern} (+ 1)")
    gelu("half", half=0.25, expect="node 'half' (Mul): multiplying x * (1 + Erf(x / sqrt(2))) "
                                   f"(Div 'div') by 0.25 {pattern} (* 0.5)")
    gelu("other_x", times="r", expect="node 'mul' (Mul): multiplying 1 + Erf(x / sqrt(2)) "
                                      f"(Div 'div') by tensor 'r' {pattern} (by x")
    book.helper("user_div_tensors",
                [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                 helper.make_node("Div", ["x", "r"], ["y"], name="div")], [], (1, 3, 4, 4),
                expect="node 'div' (Div): operator Div is supported only as a tensor by a "
                       "constant, or as x / sqrt(2) in GELU's")
    # A Div by a constant that no Erf reads is a scale (a batchnorm layer since session 31; it
    # was refused at its reader before); one an Erf reads stays GELU's and departs from it here.
    x = base.batch_of(image((1, 3, 6, 6), 128))
    w2 = rng.uniform(-0.5, 0.5, (4, 4, 3, 3))
    book.helper("user_div_scale",
                [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["r"], name="relu"),
                 helper.make_node("Div", ["r", "k"], ["d"], name="div"),
                 helper.make_node("Conv", ["d", "w2"], ["y"], name="conv2")],
                [base.init("w", w), base.init("w2", w2), base.init("k", 2.0)], x,
                F.conv2d(torch.relu(F.conv2d(x, t(w), padding=1)) / 2.0, t(w2)))
    book.helper("user_div_erf_and_relu",
                [helper.make_node("Div", ["x", "k"], ["d"], name="div"),
                 helper.make_node("Erf", ["d"], ["e"], name="erf"),
                 helper.make_node("Relu", ["d"], ["r"], name="relu"),
                 helper.make_node("Add", ["e", "r"], ["y"], name="add")],
                [base.init("k", 1.4142135)], (1, 3, 4, 4),
                expect="node 'relu' (Relu): reads x / c (Div 'div'), which GELU's x * (1 + "
                       "Erf(x / sqrt(2))) * 0.5 gives only to an Erf")


class Resized(nn.Module):
    """F.interpolate to a size (torch.onnx computes Resize's sizes from the input's shape)."""

    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, x):
        return F.interpolate(x, size=self.size, mode="nearest")


class Upsampled(nn.Module):
    """conv, upsample to out_hw, a 3x3 conv and a Linear over every position: each output
    pixel counts (a global pooling would average a nearest upsampling's errors away)."""

    def __init__(self, up, out_hw):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up = up
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * out_hw[0] * out_hw[1], 5)

    def forward(self, x):
        x = self.c2(self.up(torch.relu(self.c1(x))))
        return self.fc(torch.flatten(x, 1))


def unsupported_layers(book):
    """Upsample and Resize by integer scales (nearest at opsets 9, 11, 13; bilinear at 11, 13;
    to a size) and ConvTranspose (with output_padding, grouped) run from two images; a fractional
    scale, align_corners, opset 9's linear, cubic, an output_padding beyond the pad and the
    non-zero pads are refused."""
    torch.manual_seed(131)
    x = image((1, 3, 6, 6), 132)
    x2 = image((2, 3, 6, 6), 133)
    for name, mod, hw, opset in [
            ("upsample9", nn.Upsample(scale_factor=2, mode="nearest"), (12, 12), 9),
            ("upsample11", nn.Upsample(scale_factor=(2, 3), mode="nearest"), (12, 18), 11),
            ("upsample13", nn.Upsample(scale_factor=3, mode="nearest"), (18, 18), 13),
            ("resize", nn.Upsample(scale_factor=2, mode="bilinear"), (12, 12), 13),
            ("resize11", nn.Upsample(scale_factor=(3, 2), mode="bilinear"), (18, 12), 11),
            ("interpolate_size", Resized((12, 18)), (12, 18), 13),
            ("convtranspose", nn.ConvTranspose2d(4, 4, 2, stride=2), (12, 12), 13),
            ("convtranspose_pad", nn.ConvTranspose2d(4, 4, 3, 2, 1, output_padding=1), (12, 12),
             11),
            ("convtranspose_dcgan", nn.ConvTranspose2d(4, 4, 4, 2, 1, groups=2), (12, 12), 13)]:
        torch.manual_seed(134)
        book.export(f"user_{name}", Upsampled(mod, hw), x2, opset=opset)
    for name, mod, opset, expect in [
            ("resize_fraction", nn.Upsample(scale_factor=1.5, mode="nearest"), 13,
             "(Resize): scales [1.000000, 1.000000, 1.500000, 1.500000] (supported: [1, 1, sh, "
             "sw] with integers"),
            ("resize_corners", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
             13, "(Resize): linear with coordinate_transformation_mode 'align_corners'"),
            ("upsample9_linear", nn.Upsample(scale_factor=2, mode="bilinear"), 9,
             "(Upsample): linear with coordinate_transformation_mode 'asymmetric'"),
            ("resize_cubic", nn.Upsample(scale_factor=2, mode="bicubic"), 13,
             "(Resize): mode 'cubic' (supported: nearest, linear)")]:
        torch.manual_seed(136)
        book.export(f"user_{name}", Act(mod), x, opset=opset, expect=expect)
    book.export("user_convtranspose_extra", Act(nn.ConvTranspose2d(4, 4, 3, 2, output_padding=1)),
                x, expect="(ConvTranspose): needs pads >= 0 and 0 <= output_padding <= the "
                          "bottom / right pad (got output_padding 1x1, pad bottom 0, right 0)")
    # F.pad's pads go through a Slice (step -1) and a Transpose of constants: folded.
    book.export("user_pad_zero", Act(nn.Sequential(nn.ZeroPad2d((1, 2, 0, 1)), nn.Conv2d(4, 4, 3))),
                x)
    # Reflect and edge pads before a conv (style transfer, super-resolution): pad layers.
    for name, pad, opset in [("reflect", nn.ReflectionPad2d(1), 13),
                             ("reflect_uneven", nn.ReflectionPad2d((2, 0, 1, 3)), 11),
                             ("replicate", nn.ReplicationPad2d(1), 13),
                             ("replicate9", nn.ReplicationPad2d((1, 2, 0, 1)), 9)]:
        torch.manual_seed(137)
        book.export(f"user_pad_{name}", Upsampled(nn.Sequential(pad, nn.Conv2d(4, 4, 3)), (
            6 + sum(pad.padding[2:]) - 2, 6 + sum(pad.padding[:2]) - 2)), x2, opset=opset)
    book.helper("user_pad_reflect_big",
                [helper.make_node("Pad", ["x", "p6"], ["y"], name="pad", mode="reflect")],
                [ints("p6", [0, 0, 6, 6, 0, 0, 6, 6])], (1, 3, 6, 6),
                expect="node 'pad' (Pad): reflect pad 6 must be smaller than the input's 6x6")
    book.export("user_pad_value", Act(nn.Sequential(nn.ConstantPad2d(1, 0.5), nn.Conv2d(4, 4, 3))),
                x, expect="(Pad): constant_value 0.500000 (only zero padding")


class SeparableSE(nn.Module):
    """A MobileNet-style block as users write it: a depthwise separable conv (3x3 depthwise,
    BatchNorm, ReLU6, 1x1), squeeze-and-excitation (GlobalAveragePool -> Conv -> Relu -> Conv ->
    Sigmoid -> Mul, the [N, C, 1, 1] scale first), a residual add, F.interpolate and a head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.pw = nn.Conv2d(8, 8, 1)
        self.se1 = nn.Conv2d(8, 2, 1)
        self.se2 = nn.Conv2d(2, 8, 1)
        self.out = nn.Conv2d(8, 4, 3)
        self.fc = nn.Linear(4 * 10 * 10, 6)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        y = self.pw(F.relu6(self.bn(self.dw(x))))
        s = torch.sigmoid(self.se2(torch.relu(self.se1(F.adaptive_avg_pool2d(y, 1)))))
        x = F.interpolate(s * y + x, scale_factor=2.0, mode="nearest")
        return self.fc(torch.flatten(self.out(x), 1))


class FlatNorm(nn.Module):
    """A conv's output flattened, then a BatchNorm1d and a PReLU per feature (C*H*W of them):
    each feature is one channel of the conv at one pixel, so over K ranks and a batch > 1 the
    features must be read in the flattened order, not in the conv's channel-major layout."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm1d(6 * 5 * 5)
        self.act = nn.PReLU(6 * 5 * 5)
        self.fc = nn.Linear(6 * 5 * 5, 7)

    def forward(self, x):
        return self.fc(self.act(self.bn(torch.flatten(self.c(x), 1))))


def blocks(book):
    torch.manual_seed(151)
    book.export("user_separable_se", bn_all(SeparableSE(), 152), image((2, 3, 6, 6), 153))
    torch.manual_seed(154)
    book.export("user_flat_batchnorm", randomize_prelu(bn_all(FlatNorm(), 155), 156),
                image((1, 3, 5, 5), 157))


class WidthBias(nn.Module):
    """conv(x) + b with b of shape [C] broadcasts along the width (W == C here), not channels."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Parameter(torch.rand(4))

    def forward(self, x):
        return self.c(x) + self.b


class TwoOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.c(x))
        return h, self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


class HandBlocks(nn.Module):
    """What users write by hand beside torchvision's modules (session 31): a normalisation of the
    input, (x - mean) / std (Sub, Div of per-channel constants: one batchnorm layer); a constant
    subtracted after a conv (folded into its bias) and divided (into its weights); a per-channel
    scale and shift after a pool (Mul, Add: a batchnorm); nn.Hardswish, nn.SiLU, nn.LeakyReLU,
    nn.ELU, nn.Tanh; MaxPool with ceil_mode; a Pad of 0 width; F.interpolate(mode="nearest");
    nn.Identity; x.mean((2, 3)), nn.AdaptiveAvgPool2d((1, 1)) then torch.flatten(x, 1),
    x.view(x.size(0), -1), x.reshape(-1, C) and x.squeeze(-1).squeeze(-1), each into a Linear
    (one without bias); 1 - h and h / scale on [N, F] (a batchnorm), unsqueezed back one axis at
    a time."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8).view(1, 8, 1, 1))
        self.register_buffer("per_feature", torch.linspace(1.0, 2.0, 5))
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.c4 = nn.Conv2d(8, 8, 3, padding=1)
        self.acts = nn.ModuleList([nn.Hardswish(), nn.SiLU(), nn.LeakyReLU(0.2), nn.ELU(),
                                   nn.Tanh(), nn.Identity()])
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.ModuleList([nn.Linear(8, 5, bias=k != 0) for k in range(5)])

    def forward(self, x):
        hardswish, silu, leaky, elu, tanh, identity = self.acts
        x = (x - self.mean) / self.std
        x = F.max_pool2d(hardswish(self.c1(x) - 0.2), 2, ceil_mode=True)
        x = x * self.scale + 0.1
        x = leaky(silu(self.c2(F.pad(x, (0, 0, 0, 0)))))
        x = F.interpolate(elu(self.c3(x)), scale_factor=2, mode="nearest")
        x = identity(tanh(self.c4(x) / 3.0))
        p = self.pool(x)
        flat = [x.mean((2, 3)), torch.flatten(p, 1), p.view(p.size(0), -1), p.reshape(-1, 8),
                p.squeeze(-1).squeeze(-1)]
        h = sum(fc(f) for fc, f in zip(self.fc, flat))
        return ((1 - h) / self.per_feature).unsqueeze(-1).unsqueeze(-1)


# Each building block of HandBlocks alone (onnx_user_models.py DIR --each: the survey of
# docs/models.md, CTest onnx_user_blocks_each, slow): NAME -> (forward, modules, input size).
def conv(i=3, o=4):
    return nn.Conv2d(i, o, 3, padding=1)


MEAN, STD = HandBlocks().mean, HandBlocks().std
EACH = {
    "mean23": (lambda m, x: m.fc(F.relu(m.c(x)).mean((2, 3))), dict(c=conv(), fc=nn.Linear(4, 5))),
    "mean23_keepdim": (lambda m, x: F.relu(m.c(x)).mean((2, 3), keepdim=True).flatten(1),
                       dict(c=conv())),
    "flatten": (lambda m, x: m.fc(torch.flatten(F.relu(m.c(x)), 1)),
                dict(c=conv(), fc=nn.Linear(144, 5))),
    "view": (lambda m, x: m.fc(F.relu(m.c(x)).view(x.size(0), -1)),
             dict(c=conv(), fc=nn.Linear(144, 5))),
    "reshape_c": (lambda m, x: m.fc(m.p(F.relu(m.c(x))).reshape(-1, 4)),
                  dict(c=conv(), p=nn.AdaptiveAvgPool2d((1, 1)), fc=nn.Linear(4, 5))),
    "normalise_input": (lambda m, x: m.c((x - MEAN) / STD), dict(c=conv())),
    "scale_shift": (lambda m, x: m.c2(F.relu(m.c(x)) * 0.5 + 0.1), dict(c=conv(), c2=conv(4, 4))),
    "sub_scalar": (lambda m, x: m.c2(F.relu(m.c(x)) - 0.25), dict(c=conv(), c2=conv(4, 4))),
    "div_scalar": (lambda m, x: m.c2(F.relu(m.c(x)) / 3.0), dict(c=conv(), c2=conv(4, 4))),
    "mul_channels": (lambda m, x: m.c2(F.relu(m.c(x)) * torch.linspace(0.5, 2, 4).view(1, 4, 1, 1)),
                     dict(c=conv(), c2=conv(4, 4))),
    "rsub_flat": (lambda m, x: m.fc2(1 - F.relu(m.fc(torch.flatten(x, 1))) * 2.0),
                  dict(fc=nn.Linear(108, 6), fc2=nn.Linear(6, 5))),
    "squeeze_linear": (lambda m, x: m.fc(m.p(F.relu(m.c(x))).squeeze(-1).squeeze(-1))
                       .unsqueeze(-1).unsqueeze(-1),
                       dict(c=conv(), p=nn.AdaptiveAvgPool2d((1, 1)), fc=nn.Linear(4, 5))),
    "hardswish": (lambda m, x: m.a(m.c(x)), dict(c=conv(), a=nn.Hardswish())),
    "silu": (lambda m, x: m.a(m.c(x)), dict(c=conv(), a=nn.SiLU())),
    "leaky_relu": (lambda m, x: m.a(m.c(x)), dict(c=conv(), a=nn.LeakyReLU(0.2))),
    "elu": (lambda m, x: m.a(m.c(x)), dict(c=conv(), a=nn.ELU())),
    "tanh": (lambda m, x: m.a(m.c(x)), dict(c=conv(), a=nn.Tanh())),
    "interpolate_nearest": (lambda m, x: F.interpolate(F.relu(m.c(x)), scale_factor=2,
                                                       mode="nearest"), dict(c=conv())),
    "adaptive_avgpool_7x7": (lambda m, x: m.fc(torch.flatten(m.p(F.relu(m.c(x))), 1)),
                             dict(c=conv(), p=nn.AdaptiveAvgPool2d((1, 1)), fc=nn.Linear(4, 5)),
                             (1, 3, 7, 7)),
    "identity": (lambda m, x: m.i(F.relu(m.c(x))), dict(c=conv(), i=nn.Identity())),
    "linear_nobias": (lambda m, x: m.fc(torch.flatten(F.relu(m.c(x)), 1)),
                      dict(c=conv(), fc=nn.Linear(144, 5, bias=False))),
    "maxpool_ceil": (lambda m, x: F.max_pool2d(F.relu(m.c(x)), 2, ceil_mode=True),
                     dict(c=conv()), (1, 3, 7, 7)),
    "pad_zero_width": (lambda m, x: F.max_pool2d(F.pad(F.relu(m.c(x)), (0, 0, 0, 0)), 2),
                       dict(c=conv())),
}


class Each(nn.Module):
    def __init__(self, forward, modules):
        super().__init__()
        self.f = forward
        for k, v in modules.items():
            setattr(self, k, v)

    def forward(self, x):
        return self.f(self, x)


def building_blocks(book, each=False):
    if not each:
        for opset in (11, 13, 17):
            torch.manual_seed(161)
            book.export(f"user_blocks_o{opset}", HandBlocks(), image((1, 3, 9, 9), 162),
                        opset=opset)
        book.helper("user_squeeze_rank3",
                    [helper.make_node("Squeeze", ["x", "ax"], ["s"], name="sq"),
                     helper.make_node("Relu", ["s"], ["y"], name="relu")], [ints("ax", [3])],
                    (1, 4, 1, 1), expect="node 'relu' (Relu): input 's' is the view [1, 4, 1] "
                                         "between two Squeezes or Unsqueezes")
        return
    for opset in (11, 13, 17):
        for name, (forward, modules, *size) in EACH.items():
            torch.manual_seed(163)
            for m in modules.values():
                for p in m.parameters():
                    p.data.uniform_(-0.5, 0.5)
            book.export(f"each_{name}_o{opset}", Each(forward, modules),
                        image(size[0] if size else (1, 3, 6, 6), 164), opset=opset)


class NormMlp(nn.Module):
    """An MLP with nn.LayerNorm over its hidden features (torch.onnx: LayerNormalization at opset
    17, ReduceMean-Sub-Pow-ReduceMean-Add-Sqrt-Div-Mul-Add below)."""

    def __init__(self, affine=True, eps=1e-5):
        super().__init__()
        self.fc1 = nn.Linear(48, 20)
        self.ln = nn.LayerNorm(20, eps=eps, elementwise_affine=affine)
        self.fc2 = nn.Linear(20, 7)
        if affine:
            with torch.no_grad():
                self.ln.weight.uniform_(0.5, 1.5)
                self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.fc2(F.gelu(self.ln(self.fc1(torch.flatten(x, 1)))))


class Centred(nn.Module):
    """x - x.mean(-1, keepdim=True) alone: LayerNorm's first steps, no LayerNorm."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(48, 6)

    def forward(self, x):
        h = self.fc(torch.flatten(x, 1))
        return torch.relu(h - h.mean(-1, keepdim=True))


class ImageNorm(nn.Module):
    """nn.LayerNorm over the width of an image (not over features): refused."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.ln = nn.LayerNorm(4)

    def forward(self, x):
        return self.ln(self.c(x))


def layer_norms(book):
    for opset in (11, 13, 17):
        torch.manual_seed(171)
        book.export(f"user_layernorm_o{opset}", NormMlp(), image((1, 3, 4, 4), 172), opset=opset)
    torch.manual_seed(173)
    book.export("user_layernorm_plain", NormMlp(affine=False, eps=1e-3), image((1, 3, 4, 4), 174))
    torch.manual_seed(175)
    book.export("user_centred", Centred(), image((1, 3, 4, 4), 176),
                expect="(Relu): reads x - mean(x) (ReduceMean '/ReduceMean'), which departs from "
                       "LayerNorm's")
    book.export("user_layernorm_image", ImageNorm(), image((1, 3, 4, 4), 177),
                expect="node '/ln/ReduceMean' (ReduceMean): axes [3] (only the mean over height "
                       "and width")
    book.export("user_layernorm_image17", ImageNorm(), image((1, 3, 4, 4), 177), opset=17,
                expect="node '/ln/LayerNormalization' (LayerNormalization): over axis -1 of "
                       "[1, 4, 4, 4] (only over the features of an [N, F] tensor")


def graphs(book):
    """Constant nodes, Identity chains, unnamed nodes, unused initializers of other types,
    initializers listed as inputs; two outputs; FP16 and INT64 tensors."""
    rng = np.random.default_rng(141)
    w = rng.uniform(-0.5, 0.5, (4, 3, 3, 3))
    g = rng.uniform(-0.5, 0.5, (4, 5))
    weight = helper.make_tensor("wc", TensorProto.FLOAT, w.shape, w.astype(np.float32).ravel())
    nodes = [
        helper.make_node("Constant", [], ["wconst"], value=weight),
        helper.make_node("Identity", ["wconst"], ["wid"]),
        helper.make_node("Identity", ["x"], ["x1"]),
        helper.make_node("Identity", ["x1"], ["x2"]),
        helper.make_node("Conv", ["x2", "wid"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Identity", ["c"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Constant", [], ["shape"], value_ints=[1, -1]),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "g"], ["gm"]),
        helper.make_node("Identity", ["gm"], ["gi"]),
        helper.make_node("Identity", ["gi"], ["y"]),
    ]
    unused = [base.init("unused_f32", rng.uniform(size=(3, 3))), ints("unused_i64", [1, 2, 3]),
              numpy_helper.from_array(np.ones((2, 2), np.float16), "unused_f16"),
              numpy_helper.from_array(np.ones((2,), np.float64), "unused_f64")]
    x = base.batch_of(image((1, 3, 6, 6), 142))
    r = torch.relu(F.conv2d(x, t(w), padding=1))
    y = r.mean(dim=(2, 3)) @ t(g)
    listed = [helper.make_tensor_value_info("g", TensorProto.FLOAT, [4, 5]),
              helper.make_tensor_value_info("unused_i64", TensorProto.INT64, [3])]
    book.helper("user_unnamed", nodes, [base.init("g", g)] + unused, x, y, inputs_extra=listed)
    book.helper("user_unnamed_bad", [helper.make_node("Sin", ["x"], ["y"])], [], (1, 3, 4, 4),
                expect="unnamed node writing 'y' (Sin): operator Sin is not supported")
    torch.manual_seed(143)
    book.export("user_two_outputs", TwoOut(), image((1, 3, 6, 6), 144), outputs=("h", "y"),
                expect="the graph has 2 outputs ('h', 'y'); one is supported")
    torch.manual_seed(145)
    book.export("user_add_width", WidthBias(), image((1, 3, 4, 4), 146),
                expect="(Add): adding [1, 4, 4, 4] and a constant of shape [4]")
    conv16 = [helper.make_node("Conv", ["x", "w16"], ["y"], name="conv16")]
    book.helper("user_fp16_weight", conv16,
                [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float16), "w16")], (1, 3, 6, 6),
                expect="node 'conv16' (Conv): weight 'w16' has type FLOAT16 (only FLOAT")
    book.helper("user_fp16_input", [helper.make_node("Relu", ["x"], ["y"], name="r")], [],
                (1, 3, 6, 6), elem=TensorProto.FLOAT16,
                expect="input 'x' has type FLOAT16 (only FLOAT, float32, is supported)")
    book.helper("user_int64_input",
                [helper.make_node("Cast", ["x"], ["xf"], name="cast", to=TensorProto.FLOAT),
                 helper.make_node("Relu", ["xf"], ["y"], name="r")], [], (1, 8),
                elem=TensorProto.INT64, expect="input 'x' has type INT64 (only FLOAT")
    book.helper("user_cast_fp16",
                [helper.make_node("Cast", ["x"], ["h"], name="to16", to=TensorProto.FLOAT16),
                 helper.make_node("Cast", ["h"], ["y"], name="to32", to=TensorProto.FLOAT)], [],
                (1, 3, 6, 6), expect="node 'to16' (Cast): operator Cast is not supported")


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--each"]):
        print("usage: onnx_user_models.py DIR [--each]", file=sys.stderr)
        return 2
    book = Book(sys.argv[1])
    os.makedirs(book.out, exist_ok=True)
    torch.set_num_threads(1)
    if sys.argv[2:] == ["--each"]:
        building_blocks(book, each=True)
        book.write()
        return 0
    for make in (opsets, control_flow, pools, padding, groups, gemm, shapes, softmax, clips,
                 activations, unsupported_layers, blocks, building_blocks, layer_norms, graphs):
        make(book)
    book.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
