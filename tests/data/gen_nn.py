"""Writes tests/data/nn.json: PyTorch's values for the `tensor::nn` functions.

Run from the repository root with a Python that has torch (the benchmark peers' venv):
    ../shared/bench/peers/.venv/bin/python tests/data/gen_nn.py
Inputs are rounded to float32 first; expected values are computed in float64 from them, so the
Rust test (which computes in float32) is compared within a float32 tolerance.
"""
import json

import torch
import torch.nn.functional as F

torch.manual_seed(0)
CASES = []


def enc(t):
    t = t.detach()
    if t.dtype == torch.bool:
        dtype = "bool"
    elif t.dtype in (torch.int64, torch.int32):
        dtype = "i64"
    else:
        dtype = "f32"
    data = t.reshape(-1).tolist()
    data = [float(v) if not isinstance(v, bool) else int(v) for v in data]
    return {"dtype": dtype, "shape": list(t.shape), "data": data}


def f32(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).float().double()


def case(name, fn, opts, inputs, outputs):
    CASES.append({
        "name": name,
        "fn": fn,
        "opts": opts,
        "inputs": {k: enc(v) for k, v in inputs.items()},
        "outputs": [enc(o) for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])],
    })


# ---- convolution ----
for name, dims, xs, ws, o in [
    ("conv1d_basic", 1, (2, 3, 9), (4, 3, 3), dict(stride=1, padding=0, dilation=1, groups=1)),
    ("conv1d_stride_pad", 1, (2, 4, 10), (6, 2, 3), dict(stride=2, padding=2, dilation=1, groups=2)),
    ("conv2d_basic", 2, (2, 3, 7, 6), (5, 3, 3, 3), dict(stride=1, padding=0, dilation=1, groups=1)),
    ("conv2d_stride_dilation", 2, (1, 2, 9, 8), (3, 2, 3, 2), dict(stride=[2, 1], padding=[1, 2], dilation=[2, 1], groups=1)),
    ("conv2d_depthwise", 2, (2, 4, 6, 6), (4, 1, 3, 3), dict(stride=1, padding=1, dilation=1, groups=4)),
    ("conv2d_same", 2, (1, 2, 5, 6), (3, 2, 4, 3), dict(stride=1, padding="same", dilation=1, groups=1)),
    ("conv3d_basic", 3, (1, 2, 5, 4, 4), (2, 2, 2, 3, 2), dict(stride=[1, 2, 1], padding=1, dilation=1, groups=1)),
]:
    x, w, b = f32(*xs), f32(*ws), f32(ws[0])
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    case(name, f"conv{dims}d", o, {"x": x, "w": w, "b": b}, fn(x, w, b, **o))

for name, dims, xs, ws, o in [
    ("conv_transpose1d_stride", 1, (2, 3, 5), (3, 2, 3), dict(stride=2, padding=1, output_padding=1, groups=1, dilation=1)),
    ("conv_transpose2d_basic", 2, (1, 2, 4, 3), (2, 3, 3, 3), dict(stride=1, padding=0, output_padding=0, groups=1, dilation=1)),
    ("conv_transpose2d_stride_groups", 2, (2, 4, 3, 4), (4, 1, 2, 3), dict(stride=[2, 3], padding=[0, 1], output_padding=[1, 0], groups=2, dilation=1)),
    ("conv_transpose2d_dilation", 2, (1, 2, 3, 3), (2, 2, 3, 2), dict(stride=2, padding=1, output_padding=1, groups=1, dilation=2)),
    ("conv_transpose3d_basic", 3, (1, 2, 3, 2, 3), (2, 1, 2, 2, 2), dict(stride=2, padding=0, output_padding=0, groups=1, dilation=1)),
]:
    x, w, b = f32(*xs), f32(*ws), f32(ws[1] * o["groups"])
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    case(name, f"conv_transpose{dims}d", o, {"x": x, "w": w, "b": b}, fn(x, w, b, **o))

x = f32(2, 3, 6, 5)
case("unfold", "unfold", dict(kernel_size=[2, 3], dilation=1, padding=1, stride=[2, 1]), {"x": x},
     F.unfold(x, kernel_size=(2, 3), dilation=1, padding=1, stride=(2, 1)))

# ---- pooling ----
for name, dims, xs, o in [
    ("max_pool1d", 1, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)),
    ("max_pool2d", 2, (2, 3, 8, 8), dict(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)),
    ("max_pool2d_ceil_dilation", 2, (1, 2, 7, 9), dict(kernel_size=[3, 2], stride=[2, 2], padding=[1, 1], dilation=[1, 2], ceil_mode=True)),
    ("max_pool3d", 3, (1, 2, 4, 5, 4), dict(kernel_size=2, stride=[2, 1, 2], padding=0, dilation=1, ceil_mode=True)),
]:
    x = f32(*xs)
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    out, idx = fn(x, return_indices=True, **o)
    case(name, f"max_pool{dims}d", o, {"x": x}, [out, idx])

for name, dims, xs, o in [
    ("avg_pool1d", 1, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=False, count_include_pad=True)),
    ("avg_pool2d_exclude_pad", 2, (2, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=False, count_include_pad=False)),
    ("avg_pool2d_ceil", 2, (1, 2, 6, 7), dict(kernel_size=[2, 3], stride=[2, 2], padding=[1, 1], ceil_mode=True, count_include_pad=True)),
    ("avg_pool2d_ceil_exclude", 2, (1, 2, 6, 7), dict(kernel_size=[2, 3], stride=[2, 2], padding=[1, 1], ceil_mode=True, count_include_pad=False)),
    ("avg_pool3d", 3, (1, 1, 4, 4, 5), dict(kernel_size=2, stride=2, padding=0, ceil_mode=True, count_include_pad=True)),
]:
    x = f32(*xs)
    fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dims]
    case(name, f"avg_pool{dims}d", o, {"x": x}, fn(x, **o))

x = f32(2, 3, 6, 6)
pooled, idx = F.max_pool2d(x, 2, return_indices=True)
case("max_unpool2d", "max_unpool2d", dict(kernel_size=2, stride=2, padding=0), {"x": pooled, "indices": idx},
     F.max_unpool2d(pooled, idx, 2))

x = f32(2, 3, 7, 10)
case("adaptive_avg_pool2d", "adaptive_avg_pool2d", dict(size=[3, 4]), {"x": x}, F.adaptive_avg_pool2d(x, (3, 4)))
x = f32(2, 3, 11)
case("adaptive_avg_pool1d", "adaptive_avg_pool1d", dict(size=[4]), {"x": x}, F.adaptive_avg_pool1d(x, 4))

for mode, ac, size in [("nearest", False, [7, 5]), ("nearest-exact", False, [3, 9]), ("bilinear", False, [7, 5]),
                       ("bilinear", True, [3, 9])]:
    x = f32(1, 2, 4, 6)
    kw = {} if mode.startswith("nearest") else {"align_corners": ac}
    case(f"interpolate_{mode}_{ac}", "interpolate", dict(size=size, mode=mode, align_corners=ac), {"x": x},
         F.interpolate(x, size=size, mode=mode, **kw))
x = f32(1, 2, 5)
case("interpolate_linear", "interpolate", dict(size=[8], mode="linear", align_corners=False), {"x": x},
     F.interpolate(x, size=8, mode="linear", align_corners=False))
x = f32(1, 1, 3, 2, 4)
case("interpolate_trilinear", "interpolate", dict(size=[4, 3, 6], mode="trilinear", align_corners=True), {"x": x},
     F.interpolate(x, size=(4, 3, 6), mode="trilinear", align_corners=True))

# ---- normalization ----
x, w, b = f32(3, 4, 5), f32(4, 5), f32(4, 5)
case("layer_norm", "layer_norm", dict(shape=[4, 5], eps=1e-5), {"x": x, "w": w, "b": b}, F.layer_norm(x, (4, 5), w, b, 1e-5))
x, w = f32(3, 6), f32(6)
case("rms_norm", "rms_norm", dict(shape=[6], eps=1e-6), {"x": x, "w": w}, F.rms_norm(x, (6,), w, 1e-6))
x, w, b = f32(2, 6, 3, 2), f32(6), f32(6)
case("group_norm", "group_norm", dict(groups=3, eps=1e-5), {"x": x, "w": w, "b": b}, F.group_norm(x, 3, w, b, 1e-5))
x, w, b = f32(4, 3, 2, 2), f32(3), f32(3)
rm, rv = f32(3), f32(3).abs() + 0.5
rm2, rv2 = rm.clone(), rv.clone()
out = F.batch_norm(x, rm2, rv2, w, b, training=True, momentum=0.1, eps=1e-5)
case("batch_norm_train", "batch_norm", dict(training=True, momentum=0.1, eps=1e-5),
     {"x": x, "rm": rm, "rv": rv, "w": w, "b": b}, [out, rm2, rv2])
case("batch_norm_eval", "batch_norm", dict(training=False, momentum=0.1, eps=1e-5),
     {"x": x, "rm": rm, "rv": rv, "w": w, "b": b}, F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5))

# ---- activations (special values included) ----
x = torch.cat([f32(40, scale=3.0), torch.tensor([0.0, -0.0, 6.0, -3.0, 3.0, 25.0, -25.0, 1e-3, -1e-3], dtype=torch.float64)])
for fn, out, opts in [
    ("relu6", F.relu6(x), {}),
    ("leaky_relu", F.leaky_relu(x, 0.02), {"slope": 0.02}),
    ("elu", F.elu(x, 0.7), {"alpha": 0.7}),
    ("selu", F.selu(x), {}),
    ("celu", F.celu(x, 1.3), {"alpha": 1.3}),
    ("gelu", F.gelu(x), {}),
    ("gelu_tanh", F.gelu(x, approximate="tanh"), {}),
    ("silu", F.silu(x), {}),
    ("mish", F.mish(x), {}),
    ("softplus", F.softplus(x, beta=2.0, threshold=10.0), {"beta": 2.0, "threshold": 10.0}),
    ("softsign", F.softsign(x), {}),
    ("hardtanh", F.hardtanh(x, -2.0, 1.5), {"min": -2.0, "max": 1.5}),
    ("hardsigmoid", F.hardsigmoid(x), {}),
    ("hardswish", F.hardswish(x), {}),
    ("logsigmoid", F.logsigmoid(x), {}),
    ("erf", torch.erf(x), {}),
    ("erfc", torch.erfc(x), {}),
]:
    case(fn, fn, opts, {"x": x}, out)

# ---- losses ----
logits, target = f32(5, 4), torch.tensor([0, 3, -100, 1, 3])
weight = f32(4).abs() + 0.2
for red in ["mean", "sum", "none"]:
    for w in [None, weight]:
        for ls in [0.0, 0.2]:
            inputs = {"input": logits, "target": target}
            if w is not None:
                inputs["weight"] = w
            out = F.cross_entropy(logits, target, weight=w, ignore_index=-100, reduction=red, label_smoothing=ls)
            case(f"cross_entropy_{red}_{w is not None}_{ls}", "cross_entropy", dict(reduction=red, label_smoothing=ls), inputs, out)
probs = torch.softmax(f32(5, 4), -1)
case("cross_entropy_probs", "cross_entropy_probs", dict(reduction="mean", label_smoothing=0.1),
     {"input": logits, "target": probs, "weight": weight},
     F.cross_entropy(logits, probs, weight=weight, reduction="mean", label_smoothing=0.1))
x4, t4 = f32(2, 3, 2, 2), torch.randint(0, 3, (2, 2, 2))
case("cross_entropy_spatial", "cross_entropy", dict(reduction="mean", label_smoothing=0.0), {"input": x4, "target": t4},
     F.cross_entropy(x4, t4))
logp = torch.log_softmax(logits, -1)
case("nll_loss_weighted", "nll_loss", dict(reduction="mean"), {"input": logp, "target": target, "weight": weight},
     F.nll_loss(logp, target, weight=weight))
p, y = torch.sigmoid(f32(3, 4)), (torch.rand(3, 4) > 0.5).double()
case("binary_cross_entropy", "binary_cross_entropy", dict(reduction="mean"), {"input": p, "target": y}, F.binary_cross_entropy(p, y))
z, pw = f32(3, 4, scale=4.0), f32(4).abs() + 0.5
case("bce_with_logits", "binary_cross_entropy_with_logits", dict(reduction="sum"), {"input": z, "target": y, "pos_weight": pw},
     F.binary_cross_entropy_with_logits(z, y, pos_weight=pw, reduction="sum"))
a, t = f32(4, 5, scale=2.0), f32(4, 5)
case("mse_loss", "mse_loss", dict(reduction="mean"), {"input": a, "target": t}, F.mse_loss(a, t))
case("l1_loss", "l1_loss", dict(reduction="sum"), {"input": a, "target": t}, F.l1_loss(a, t, reduction="sum"))
case("smooth_l1_loss", "smooth_l1_loss", dict(reduction="none", beta=0.5), {"input": a, "target": t}, F.smooth_l1_loss(a, t, reduction="none", beta=0.5))
case("huber_loss", "huber_loss", dict(reduction="mean", delta=1.5), {"input": a, "target": t}, F.huber_loss(a, t, delta=1.5))
q = torch.softmax(f32(3, 5), -1)
q[0, 1] = 0.0
inp = torch.log_softmax(f32(3, 5), -1)
case("kl_div", "kl_div", dict(reduction="batchmean", log_target=False), {"input": inp, "target": q},
     F.kl_div(inp, q, reduction="batchmean"))
lq = torch.log_softmax(f32(3, 5), -1)
case("kl_div_log_target", "kl_div", dict(reduction="sum", log_target=True), {"input": inp, "target": lq},
     F.kl_div(inp, lq, reduction="sum", log_target=True))

# ---- layers ----
x, w, b = f32(3, 5), f32(4, 5), f32(4)
case("linear", "linear", {}, {"x": x, "w": w, "b": b}, F.linear(x, w, b))
table, idx = f32(10, 3), torch.tensor([[1, 9, 1], [0, 4, 7]])
case("embedding", "embedding", {}, {"indices": idx, "table": table}, F.embedding(idx, table))
q, k, v = f32(2, 3, 4, 8), f32(2, 3, 6, 8), f32(2, 3, 6, 5)
mask = torch.rand(4, 6) > 0.3
mask[:, 0] = True
case("sdpa_mask", "sdpa", dict(causal=False), {"q": q, "k": k, "v": v, "mask": mask},
     F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
q2 = f32(2, 6, 8)
k2, v2 = f32(2, 6, 8), f32(2, 6, 4)
case("sdpa_causal", "sdpa", dict(causal=True, scale=0.3), {"q": q2, "k": k2, "v": v2},
     F.scaled_dot_product_attention(q2, k2, v2, is_causal=True, scale=0.3))

with open("tests/data/nn.json", "w") as f:
    json.dump({"torch": torch.__version__, "rtol": 1e-4, "atol": 2e-5, "cases": CASES}, f)
print(f"{len(CASES)} cases written to tests/data/nn.json (torch {torch.__version__})")
