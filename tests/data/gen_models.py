"""Writes tests/data/models.json: PyTorch's per-sample gradients of small models built from
torch.nn.functional, for tests/nn_models.rs.

Run from the repository root with a Python that has torch (the benchmark peers' venv):
    ../shared/bench/peers/.venv/bin/python tests/data/gen_models.py
Each case holds the parameters (torch layouts: conv weights [O, I, kH, kW], linear weights
[out, in]), a batch of inputs and labels, and torch.func.vmap(grad(loss)) of the parameters, one
output per parameter in the order of the case's "params". Parameters and inputs are rounded to
float32 first; the gradients are computed in float64 from them, so the Rust test (float32) is
compared within a float32 tolerance.
"""
import json
import os

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
CASES = []


def enc(t):
    t = t.detach()
    dtype = "i64" if t.dtype in (torch.int64, torch.int32) else "f32"
    data = [int(v) if dtype == "i64" else float(v) for v in t.reshape(-1).tolist()]
    return {"dtype": dtype, "shape": list(t.shape), "data": data}


def f32(*shape, scale=1.0, shift=0.0):
    return (torch.randn(*shape) * scale + shift).float().double()


def case(name, model, opts, params, x, y, loss):
    names = list(params)
    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    inputs = {**params, "x": x, "y": y}
    CASES.append({
        "name": name,
        "model": model,
        "opts": opts,
        "params": names,
        "inputs": {k: enc(v) for k, v in inputs.items()},
        "outputs": [enc(grads[n]) for n in names],
    })


# ---- the tutorial CNN, scaled down: conv 1->4 3x3, ReLU, conv 4->6 3x3, ReLU, max-pool 2,
# flatten, linear 54->8, ReLU, linear 8->5, log_softmax, NLL (summed over the batch of one).
def cnn_loss(p, x, y):
    h = F.relu(F.conv2d(x.unsqueeze(0), p["w1"], p["b1"]))
    h = F.relu(F.conv2d(h, p["w2"], p["b2"]))
    h = F.max_pool2d(h, 2).flatten(1)
    h = F.relu(F.linear(h, p["w3"], p["b3"]))
    z = F.linear(h, p["w4"], p["b4"])
    return F.nll_loss(F.log_softmax(z, -1), y.unsqueeze(0), reduction="sum")


cnn = {
    "w1": f32(4, 1, 3, 3, scale=1 / 3), "b1": f32(4, scale=0.1),
    "w2": f32(6, 4, 3, 3, scale=1 / 6), "b2": f32(6, scale=0.1),
    "w3": f32(8, 54, scale=54 ** -0.5), "b3": f32(8, scale=0.1),
    "w4": f32(5, 8, scale=8 ** -0.5), "b4": f32(5, scale=0.1),
}
case("cnn_tiny", "cnn", {}, cnn, f32(3, 1, 10, 10), torch.tensor([4, 0, 2]), cnn_loss)


# ---- one pre-LN transformer block, scaled down from examples/per_sample_grads_transformer.rs:
# embedding + learned positions, multi-head self-attention (fused qkv), layer norms, MLP with
# exact GELU, residuals, final layer norm; then either mean-pool + linear head + cross-entropy
# on one label (the example's sequence classifier, "cls"), or a linear head per position and
# token-level cross-entropy averaged over the positions ("lm", with a causal mask).
V, S, D, H, FF = 11, 6, 8, 2, 16
EPS = 1e-5


def block(p, t, causal):
    ln = lambda x, g, b: F.layer_norm(x, (D,), p[g], p[b], EPS)  # noqa: E731
    x = F.embedding(t, p["tok_emb"]) + p["pos_emb"]
    qkv = F.linear(ln(x, "ln1_g", "ln1_b"), p["w_qkv"], p["b_qkv"])
    q, k, v = (a.reshape(S, H, D // H).transpose(0, 1) for a in qkv.split(D, dim=-1))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    x = x + F.linear(o.transpose(0, 1).reshape(S, D), p["w_o"], p["b_o"])
    h = F.gelu(F.linear(ln(x, "ln2_g", "ln2_b"), p["w_fc1"], p["b_fc1"]))
    x = x + F.linear(h, p["w_fc2"], p["b_fc2"])
    return ln(x, "lnf_g", "lnf_b")


def cls_loss(p, t, y):
    z = F.linear(block(p, t, False).mean(0), p["w_head"], p["b_head"])
    return F.cross_entropy(z.unsqueeze(0), y.unsqueeze(0))


def lm_loss(p, t, y):
    z = F.linear(block(p, t, True), p["w_head"], p["b_head"])
    return F.cross_entropy(z, y)


def block_params(classes):
    return {
        "tok_emb": f32(V, D, scale=0.5), "pos_emb": f32(S, D, scale=0.5),
        "ln1_g": f32(D, scale=0.1, shift=1.0), "ln1_b": f32(D, scale=0.05),
        "w_qkv": f32(3 * D, D, scale=D ** -0.5), "b_qkv": f32(3 * D, scale=0.05),
        "w_o": f32(D, D, scale=D ** -0.5), "b_o": f32(D, scale=0.05),
        "ln2_g": f32(D, scale=0.1, shift=1.0), "ln2_b": f32(D, scale=0.05),
        "w_fc1": f32(FF, D, scale=D ** -0.5), "b_fc1": f32(FF, scale=0.05),
        "w_fc2": f32(D, FF, scale=FF ** -0.5), "b_fc2": f32(D, scale=0.05),
        "lnf_g": f32(D, scale=0.1, shift=1.0), "lnf_b": f32(D, scale=0.05),
        "w_head": f32(classes, D, scale=D ** -0.5), "b_head": f32(classes, scale=0.05),
    }


def tokens(b):
    t = torch.randint(0, V, (b, S))
    t[:, 1] = t[:, 0]  # a repeated token: its embedding gradient must add both rows
    return t


dims = {"vocab": V, "seq": S, "dim": D, "heads": H, "hidden": FF}
case("transformer_cls", "transformer", {**dims, "causal": False, "head": "cls"},
     block_params(3), tokens(3), torch.randint(0, 3, (3,)), cls_loss)
t = tokens(3)
case("transformer_lm_causal", "transformer", {**dims, "causal": True, "head": "lm"},
     block_params(V), t, torch.roll(t, -1, dims=1), lm_loss)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.json")
with open(path, "w") as f:
    json.dump({"torch": torch.__version__, "rtol": 1e-4, "atol": 1e-5, "cases": CASES}, f)
print(f"wrote {len(CASES)} cases to {path} ({os.path.getsize(path)} bytes)")
