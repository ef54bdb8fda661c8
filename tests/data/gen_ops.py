"""Writes tests/data/ops.json: reference values of the ops of tests/ops_reference.rs.

Run with a Python that has NumPy and PyTorch (the project's peers venv):

    ../shared/bench/peers/.venv/bin/python tests/data/gen_ops.py

Each case names an op, its inputs (dtype, shape, data), its parameters and the expected
outputs. NumPy gives the values where its semantics are the ones implemented (elementwise
math, pads, sorting ascending); PyTorch where the op follows PyTorch (gather, one_hot,
cummax/cummin indices, descending stable sort, topk, var/std correction). Floats that JSON
cannot hold are strings: "nan", "inf", "-inf", "-0"; integers beyond 2^53 are "i<digits>".
"""

import json
import math
import os

import numpy as np
import torch

RNG = np.random.default_rng(19)
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5,
           2.5, -2.5, 3.0, -3.0, 0.25, 1e-3, -7.0, 1e30, -1e30]
CASES = []

DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
          np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.int8): "i8",
          np.dtype(np.uint8): "u8", np.dtype(np.uint32): "u32", np.dtype(np.int16): "i16",
          np.dtype(np.bool_): "bool"}


def encode(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        # JSON numbers are read as f64: integers beyond 2^53 travel as decimal strings.
        return int(v) if abs(int(v)) <= 2**53 else f"i{int(v)}"
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0 and math.copysign(1, v) < 0:
        return "-0"
    return v


def arr(a, dtype=None):
    if isinstance(a, torch.Tensor):
        if a.dtype == torch.bfloat16:
            return {"dtype": "bf16", "shape": list(a.shape),
                    "data": [encode(v) for v in a.float().reshape(-1).tolist()]}
        a = a.numpy()
    a = np.asarray(a, dtype=dtype)
    return {"dtype": DTYPES[a.dtype], "shape": list(a.shape),
            "data": [encode(v) for v in a.reshape(-1).tolist()]}


def case(name, op, inputs, outputs, params=None, rtol=1e-6, atol=1e-6, signed_zeros=False):
    CASES.append({"name": name, "op": op, "inputs": [arr(i) for i in inputs],
                  "outputs": [arr(o) for o in outputs], "params": params or {},
                  "rtol": rtol, "atol": atol, "signed_zeros": signed_zeros})


def floats(shape, lo=-3.0, hi=3.0, dtype=np.float32):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def with_specials(shape, dtype=np.float32, lo=-3.0, hi=3.0):
    a = floats(shape, lo, hi, dtype).reshape(-1)
    k = min(len(SPECIAL), a.size)
    a[:k] = np.array(SPECIAL[:k], dtype=dtype)
    RNG.shuffle(a)
    return a.reshape(shape)


def tol(dtype):
    return {np.float32: (2e-6, 1e-6), np.float64: (1e-12, 1e-12)}[dtype]


# ---- regression 1: pow's special-value table (C99 Annex F), against libm through NumPy ----
bases = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.7,
                  -3.7], dtype=np.float64)
exps = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, -2.5, math.inf,
                 -math.inf, math.nan, 1e20, -1e20], dtype=np.float64)
B, E = np.meshgrid(bases, exps, indexing="ij")
with np.errstate(all="ignore"):
    for dt in (np.float64, np.float32):
        b, e = B.astype(dt), E.astype(dt)
        r, a = tol(dt)
        case(f"pow_table_{DTYPES[np.dtype(dt)]}", "pow", [b, e], [np.power(b, e)], rtol=r * 4,
             atol=0, signed_zeros=True)
    for s in (0.5, -0.5, 2.0, -1.0, 3.0, 2.5, -2.5):
        b = bases.astype(np.float32)
        # An exponent array: NumPy's scalar fast path takes sqrt for 0.5, which is not pow.
        case(f"pow_scalar_{s}", "pow_scalar", [b], [np.power(b, np.full_like(b, s))],
             params={"exponent": s}, rtol=1e-6, atol=0, signed_zeros=True)
    x = floats((3, 4), 0.1, 3.0)
    y = floats((4,), -2.0, 2.0)
    case("pow_broadcast", "pow", [x, y], [np.power(x, y)], rtol=2e-6, atol=1e-6)

# ---- regression 2: half-precision sums and matmuls accumulate in f32 ----
a16 = floats((64, 64), -1, 1, np.float16)
b16 = floats((64, 64), -1, 1, np.float16)
exact = (torch.from_numpy(a16).double() @ torch.from_numpy(b16).double())
case("matmul_f16_64", "matmul", [a16, b16], [exact.half()], rtol=1e-3, atol=1e-3)
abf = torch.from_numpy(floats((32, 48), -1, 1)).bfloat16()
bbf = torch.from_numpy(floats((48, 40), -1, 1)).bfloat16()
case("matmul_bf16", "matmul", [abf, bbf], [(abf.double() @ bbf.double()).bfloat16()],
     rtol=8e-3, atol=8e-3)
s16 = floats((4096,), 0, 1, np.float16)
case("sum_f16_4096", "sum", [s16], [np.array(s16.astype(np.float64).sum(), dtype=np.float16)],
     params={"axes": [0]}, rtol=1e-3, atol=0)
bf = torch.from_numpy(floats((2, 3000), 0, 1)).bfloat16()
case("sum_bf16_3000", "sum", [bf], [bf.double().sum(1).bfloat16()], params={"axes": [1]},
     rtol=8e-3, atol=0)
m16 = floats((3, 2048), 0, 1, np.float16)
case("mean_f16", "mean", [m16], [m16.astype(np.float64).mean(1).astype(np.float16)],
     params={"axes": [1]}, rtol=1e-3, atol=0)

# ---- regression 3: gather with an index shorter than the input on other axes (PyTorch) ----
inp = floats((4, 5, 6))
idx = RNG.integers(0, 4, size=(3, 4, 5)).astype(np.int64)
case("gather_smaller_index_axis0", "gather",
     [inp, idx], [torch.gather(torch.from_numpy(inp), 0, torch.from_numpy(idx))],
     params={"axis": 0}, rtol=0, atol=0)
idx2 = RNG.integers(-6, 6, size=(2, 3, 7)).astype(np.int64)
idx2_t = torch.from_numpy(np.where(idx2 < 0, idx2 + 6, idx2))
case("gather_smaller_index_axis2", "gather",
     [inp, idx2], [torch.gather(torch.from_numpy(inp), 2, idx2_t)], params={"axis": 2}, rtol=0,
     atol=0)

# ---- elementwise (item 6) ----
with np.errstate(all="ignore"):
    for dt in (np.float32, np.float64):
        r, a = tol(dt)
        name = DTYPES[np.dtype(dt)]
        x = with_specials((5, 8), dt, -4, 4)
        case(f"round_{name}", "round", [x], [np.round(x)], rtol=0, atol=0, signed_zeros=True)
        halves = (np.arange(-12, 13, dtype=dt) * 0.5)
        case(f"round_halves_{name}", "round", [halves], [np.round(halves)], rtol=0, atol=0,
             signed_zeros=True)
        for d in (2, -1):
            xd = floats((4, 6), -300, 300, dt)
            case(f"round_decimals_{d}_{name}", "round_decimals", [xd], [np.round(xd, d)],
                 params={"decimals": d}, rtol=r, atol=a)
        u = with_specials((4, 10), dt, -1.2, 1.2)
        case(f"asin_{name}", "asin", [u], [np.arcsin(u)], rtol=4 * r, atol=a, signed_zeros=True)
        case(f"acos_{name}", "acos", [u], [np.arccos(u)], rtol=4 * r, atol=a)
        w = with_specials((4, 10), dt, -50, 50)
        case(f"atan_{name}", "atan", [w], [np.arctan(w)], rtol=4 * r, atol=a, signed_zeros=True)
        sp = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 2.5, -1e-3],
                      dtype=dt)
        Y, X = np.meshgrid(sp, sp, indexing="ij")
        case(f"atan2_table_{name}", "atan2", [Y, X], [np.arctan2(Y, X)], rtol=4 * r, atol=0,
             signed_zeros=True)
        yy, xx = floats((3, 5), -5, 5, dt), floats((5,), -5, 5, dt)
        case(f"atan2_broadcast_{name}", "atan2", [yy, xx], [np.arctan2(yy, xx)], rtol=4 * r,
             atol=a)
        case(f"copysign_{name}", "copysign", [Y, X], [np.copysign(Y, X)], rtol=0, atol=0,
             signed_zeros=True)
        case(f"signbit_{name}", "signbit", [x], [np.signbit(x)], rtol=0, atol=0)
        fa = with_specials((6, 7), dt, -20, 20)
        fb = with_specials((6, 7), dt, -6, 6)
        case(f"fmod_{name}", "fmod", [fa, fb], [np.fmod(fa, fb)], rtol=0, atol=0,
             signed_zeros=True)
        la = with_specials((6, 7), dt, -30, 30)
        lb = with_specials((6, 7), dt, -30, 30)
        lb[0, :3] = la[0, :3]
        case(f"logaddexp_{name}", "logaddexp", [la, lb], [np.logaddexp(la, lb)], rtol=4 * r,
             atol=a)
        case(f"isnan_{name}", "isnan", [x], [np.isnan(x)], rtol=0, atol=0)
        case(f"isinf_{name}", "isinf", [x], [np.isinf(x)], rtol=0, atol=0)
        case(f"isfinite_{name}", "isfinite", [x], [np.isfinite(x)], rtol=0, atol=0)
        ca = with_specials((5, 6), dt)
        cb = ca + floats((5, 6), -1e-5, 1e-5, dt) * np.abs(ca)
        cb[0] = floats((6,), -3, 3, dt)
        cb[1, :3] = [math.nan, math.inf, -math.inf]
        ca[1, :3] = [math.nan, math.inf, math.inf]
        for en in (False, True):
            case(f"isclose_{name}_{en}", "isclose", [ca, cb],
                 [np.isclose(ca, cb, rtol=1e-5, atol=1e-8, equal_nan=en)],
                 params={"rtol": 1e-5, "atol": 1e-8, "equal_nan": en}, rtol=0, atol=0)
            case(f"allclose_{name}_{en}", "allclose", [ca[2:], cb[2:]],
                 [np.array(np.allclose(ca[2:], cb[2:], rtol=1e-5, atol=1e-8, equal_nan=en))],
                 params={"rtol": 1e-5, "atol": 1e-8, "equal_nan": en}, rtol=0, atol=0)
        v = floats((3, 4, 5), -2, 2, dt)
        for corr in (0, 1, 2):
            tv = torch.from_numpy(v)
            case(f"var_{name}_c{corr}", "var_with", [v],
                 [torch.var(tv, dim=(0, 2), correction=corr)],
                 params={"axes": [0, 2], "correction": corr}, rtol=8 * r, atol=a)
            case(f"std_{name}_c{corr}", "std_with", [v],
                 [torch.std(tv, dim=1, correction=corr, keepdim=True)],
                 params={"axes": [1], "correction": corr, "keepdim": True}, rtol=8 * r, atol=a)
    one = np.array([3.0], dtype=np.float32)
    case("var_n_le_correction", "var_with", [one],
         [torch.var(torch.from_numpy(one), dim=0, correction=1)],
         params={"axes": [0], "correction": 1}, rtol=0, atol=0)

    for dt in (np.int32, np.int8, np.uint8, np.int64):
        info = np.iinfo(dt)
        vals = np.array([0, 1, -1, 5, -8, 100, info.min, info.max], dtype=np.int64).astype(dt)
        amounts = np.array([0, 1, 3, 7, 8, info.bits - 1, info.bits, info.bits + 3], dtype=dt)
        V, S = np.meshgrid(vals, amounts, indexing="ij")
        tl = torch.from_numpy(V.astype(np.int64)), torch.from_numpy(S.astype(np.int64))
        name = DTYPES[np.dtype(dt)]
        # Past the width: NumPy and PyTorch give 0 for <<, the sign fill for >>.
        left = np.where(S >= info.bits, 0, np.left_shift(V, np.minimum(S, info.bits - 1)))
        right = np.right_shift(V, np.minimum(S, info.bits - 1))
        right = np.where((S >= info.bits) & (V >= 0), 0, right)
        case(f"shl_{name}", "shl", [V, S], [left.astype(dt)], rtol=0, atol=0)
        case(f"shr_{name}", "shr", [V, S], [right.astype(dt)], rtol=0, atol=0)
    bits = with_specials((3, 5), np.float32)
    case("bitcast_f32_i32", "bitcast", [bits], [bits.view(np.int32)], params={"dtype": "i32"},
         rtol=0, atol=0)
    ints = RNG.integers(-2**31, 2**31, size=(2, 6)).astype(np.int32)
    ints[0, 0] = 0x7FC00000
    case("bitcast_i32_f32", "bitcast", [ints], [ints.view(np.float32)], params={"dtype": "f32"},
         rtol=0, atol=0, signed_zeros=True)
    h = with_specials((2, 5), np.float16)
    case("bitcast_f16_i16", "bitcast", [h], [h.view(np.int16)], params={"dtype": "i16"}, rtol=0,
         atol=0)
    labels = np.array([[0, 3, 1], [2, 5, -1]], dtype=np.int64)
    tl = torch.from_numpy(np.where((labels >= 0) & (labels < 4), labels, 0))
    hot = torch.nn.functional.one_hot(tl, 4).numpy()
    hot[(labels < 0) | (labels >= 4)] = 0
    case("one_hot_default_i64", "one_hot", [labels], [hot.astype(np.int64)],
         params={"num_classes": 4}, rtol=0, atol=0)
    case("one_hot_f32", "one_hot", [labels], [hot.astype(np.float32)],
         params={"num_classes": 4, "dtype": "f32"}, rtol=0, atol=0)


# ---- scans (item 3), PyTorch's values and indices ----
def torch_pair(pair):
    return [pair.values, pair.indices]


for dt in (np.float32, np.float64):
    name = DTYPES[np.dtype(dt)]
    r, a = tol(dt)
    x = floats((3, 7), -2, 2, dt)
    x[0, 2] = 0.0
    x[1, 1:3] = 0.0
    for axis in (1, 0):
        t = torch.from_numpy(x)
        case(f"cumprod_{name}_ax{axis}", "cumprod", [x], [torch.cumprod(t, axis)],
             params={"axis": axis}, rtol=8 * r, atol=a)
        case(f"logcumsumexp_{name}_ax{axis}", "logcumsumexp", [x],
             [torch.logcumsumexp(t, axis)], params={"axis": axis}, rtol=8 * r, atol=a)
    sp = with_specials((4, 6), dt)
    sp[0, :4] = [1.0, 1.0, -0.0, 0.0]
    for op in ("cummax", "cummin"):
        for axis in (1, 0):
            t = torch.from_numpy(sp)
            case(f"{op}_{name}_ax{axis}", op, [sp], torch_pair(getattr(torch, op)(t, axis)),
                 params={"axis": axis}, rtol=0, atol=0)
    ls = with_specials((3, 8), dt, -5, 5)
    ls[0] = [-math.inf] * 3 + [1.0, -math.inf, 2.0, 2.0, math.inf]
    ls[2, :] = np.nan_to_num(ls[2], nan=0.5)
    case(f"logcumsumexp_specials_{name}", "logcumsumexp", [ls],
         [torch.logcumsumexp(torch.from_numpy(ls), 1)], params={"axis": 1}, rtol=8 * r, atol=a)
ci = np.array([[3, 1, 4, 1, 5, 9, 2, 6], [-2, 7, 7, -9, 0, 3, 3, 1]], dtype=np.int32)
# The dtype is JAX's (i32 stays i32; NumPy widens to i64), the values NumPy's.
case("cumprod_i32", "cumprod", [ci], [np.cumprod(ci, axis=1).astype(np.int32)],
     params={"axis": 1}, rtol=0, atol=0)
for op in ("cummax", "cummin"):
    case(f"{op}_i32", op, [ci], torch_pair(getattr(torch, op)(torch.from_numpy(ci), 1)),
         params={"axis": 1}, rtol=0, atol=0)

# ---- padding modes (item 4), NumPy's np.pad and JAX's lax.pad ----
px = floats((3, 5), -2, 2)
for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
    for pads in (((1, 2), (2, 0)), ((2, 2), (4, 3)), ((0, 1), (1, 1))):
        if mode == "reflect" and max(max(p) for p in pads) > 2:
            pads = ((1, 2), (2, 4))
        case(f"pad_{mode}_{pads}", "pad_mode", [px], [np.pad(px, pads, mode=np_mode)],
             params={"pads": [list(p) for p in pads], "mode": mode}, rtol=0, atol=0)
case("pad_constant_negative", "pad_mode", [px], [np.pad(px, ((0, 0), (2, 1)), constant_values=7)[1:, 1:-2]],
     params={"pads": [[-1, 0], [1, -1]], "mode": "constant", "value": 7.0}, rtol=0, atol=0)
case("pad_reflect_negative", "pad_mode", [px], [np.pad(px[:, 1:], ((1, 1), (0, 2)), mode="reflect")],
     params={"pads": [[1, 1], [-1, 2]], "mode": "reflect"}, rtol=0, atol=0)
import jax  # noqa: E402
from jax import lax  # noqa: E402
jax.config.update("jax_enable_x64", True)
for cfg in (((1, 2, 1), (0, -1, 2)), ((-1, 1, 0), (2, 0, 1)), ((0, 0, 3), (-2, -1, 1))):
    want = np.asarray(lax.pad(px, np.float32(-1.5), cfg))
    case(f"pad_interior_{cfg}", "pad_interior", [px], [want],
         params={"config": [list(c) for c in cfg], "value": -1.5}, rtol=0, atol=0)

# ---- sorting (item 5) ----
for dt in (np.float32, np.float64, np.int32):
    name = DTYPES[np.dtype(dt)]
    if dt == np.int32:
        sx = RNG.integers(-4, 4, size=(4, 9)).astype(dt)
    else:
        sx = with_specials((4, 9), dt)
        sx[1] = [2.0, 1.0, 2.0, -0.0, 0.0, math.nan, 1.0, math.nan, -math.inf]
    t = torch.from_numpy(sx)
    for axis in (1, 0):
        for desc in (False, True):
            case(f"sort_{name}_ax{axis}_{desc}", "sort", [sx],
                 torch_pair(torch.sort(t, dim=axis, descending=desc, stable=True)),
                 params={"axis": axis, "descending": desc}, rtol=0, atol=0, signed_zeros=True)
        case(f"argsort_numpy_{name}_ax{axis}", "argsort", [sx],
             [np.argsort(sx, axis=axis, kind="stable").astype(np.int64)],
             params={"axis": axis}, rtol=0, atol=0)
    distinct = RNG.permutation(40).reshape(4, 10).astype(dt) - 20
    td = torch.from_numpy(distinct)
    for largest in (True, False):
        case(f"topk_{name}_{largest}", "topk", [distinct],
             torch_pair(torch.topk(td, 3, dim=1, largest=largest, sorted=True)),
             params={"k": 3, "axis": 1, "largest": largest}, rtol=0, atol=0)
    case(f"kthvalue_{name}", "kthvalue", [distinct], torch_pair(torch.kthvalue(td, 4, dim=0)),
         params={"k": 4, "axis": 0}, rtol=0, atol=0)
    case(f"msort_{name}", "msort", [sx], [np.sort(sx, axis=0)], rtol=0, atol=0)

# ---- updates (item 6 of the deliverables): PyTorch's scatter*, JAX's .at and dynamic slices ----
import jax.numpy as jnp  # noqa: E402

base = floats((5, 4), -2, 2)
src = floats((4, 4), -3, 3)
perm_idx = np.stack([RNG.permutation(5)[:3] for _ in range(4)], axis=1).astype(np.int64)
tb, ts = torch.from_numpy(base), torch.from_numpy(src)
case("scatter_unique_axis0", "scatter", [base, perm_idx, src],
     [tb.scatter(0, torch.from_numpy(perm_idx), ts)], params={"axis": 0}, rtol=0, atol=0)
idx1 = np.array([[0, 2], [3, 3], [1, 0], [2, 2], [0, 1]], dtype=np.int64)
dup_last = tb.clone()
for r in range(5):
    for j in range(2):
        dup_last[r, idx1[r, j]] = ts[r, j] if r < 4 else 0
src5 = floats((5, 3), -3, 3)
dup_last = tb.clone()
for r in range(5):
    for j in range(2):
        dup_last[r, idx1[r, j]] = float(src5[r, j])
case("scatter_repeated_last_wins_axis1", "scatter", [base, idx1, src5], [dup_last],
     params={"axis": 1}, rtol=0, atol=0)
rep = RNG.integers(-5, 5, size=(6, 4)).astype(np.int64)
rsrc = floats((6, 4), -3, 3)
rep_t = torch.from_numpy(np.where(rep < 0, rep + 5, rep))
for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        want = tb.scatter_reduce(0, rep_t, torch.from_numpy(rsrc), red, include_self=inc)
        case(f"scatter_reduce_{red}_{inc}", "scatter_reduce", [base, rep, rsrc], [want],
             params={"axis": 0, "reduce": red, "include_self": inc}, rtol=2e-6, atol=1e-6)
ib = RNG.integers(-10, 10, size=(4, 3)).astype(np.int32)
iidx = np.array([[1, 0, 3], [1, 2, 3]], dtype=np.int64)
isrc = RNG.integers(-10, 10, size=(2, 3)).astype(np.int32)
for red in ("sum", "prod", "amax", "amin"):
    want = torch.from_numpy(ib).scatter_reduce(0, torch.from_numpy(iidx), torch.from_numpy(isrc),
                                               red, include_self=True)
    case(f"scatter_reduce_i32_{red}", "scatter_reduce", [ib, iidx, isrc], [want],
         params={"axis": 0, "reduce": red, "include_self": True}, rtol=0, atol=0)
ax = floats((6, 3), -2, 2)
aidx = np.array([4, -1, 0, 4, 9], dtype=np.int32)
avals = floats((5, 3), -3, 3)
jx = jnp.asarray(ax)
for how in ("set", "add", "mul", "min", "max"):
    vals = avals
    if how == "set":
        aidx_set = np.array([4, -1, 0, 2, 9], dtype=np.int32)
        want = getattr(jx.at[aidx_set], how)(vals)
        case(f"at_{how}", "at", [ax, aidx_set, vals], [np.asarray(want)], params={"how": how},
             rtol=0, atol=0)
    else:
        want = getattr(jx.at[aidx], how)(vals)
        case(f"at_{how}", "at", [ax, aidx, vals], [np.asarray(want)], params={"how": how},
             rtol=2e-6, atol=1e-6)
case("at_get", "at", [ax, np.array([[1, -1], [0, 2]], dtype=np.int32), avals],
     [ax[np.array([[1, -1], [0, 2]])]], params={"how": "get"}, rtol=0, atol=0)
dx = floats((5, 6, 4), -2, 2)
for starts in ((1, 2, 0), (4, -3, 3), (0, 5, 1)):
    st = np.array(starts, dtype=np.int32)
    want = lax.dynamic_slice(dx, st, (3, 2, 2))
    case(f"dynamic_slice_{starts}", "dynamic_slice", [dx, st], [np.asarray(want)],
         params={"sizes": [3, 2, 2]}, rtol=0, atol=0)
    up = floats((2, 3, 4), 5, 6)
    want = lax.dynamic_update_slice(dx, up, st)
    case(f"dynamic_update_slice_{starts}", "dynamic_update_slice", [dx, up, st],
         [np.asarray(want)], rtol=0, atol=0)

# ---- indexing (item 7): NumPy's advanced indexing and slices, JAX's static-size selections ----
def index_case(name, x, entries, arrays):
    """entries: ("slice", start, stop, step) | ("full",) | ("at", i) | ("array", k)."""
    key = []
    for e in entries:
        if e[0] == "slice":
            key.append(slice(e[1], e[2], e[3]))
        elif e[0] == "full":
            key.append(slice(None))
        elif e[0] == "at":
            key.append(e[1])
        else:
            key.append(arrays[e[1]])
    want = x[tuple(key)]
    spec = [{"kind": e[0], "args": [a for a in e[1:]]} for e in entries]
    case(name, "index", [x] + arrays, [np.ascontiguousarray(want)], params={"index": spec},
         rtol=0, atol=0)


ix = floats((4, 5, 6), -3, 3)
i0 = np.array([[0, -1], [2, 3]], dtype=np.int64)
i1 = np.array([1, 4], dtype=np.int32)
i2 = np.array([[5], [0], [-2]], dtype=np.int64)
index_case("index_two_adjacent", ix, [("full",), ("array", 0), ("array", 1)], [i1[None, :].repeat(2, 0), np.array([0, 5], dtype=np.int64)])
index_case("index_separated", ix, [("array", 0), ("full",), ("array", 1)], [i0, np.array([1, 5], dtype=np.int64)])
index_case("index_with_slice", ix, [("slice", 1, None, 2), ("array", 0), ("array", 1)], [i1, i2])
index_case("index_at_and_array", ix, [("at", -1), ("slice", None, None, -2), ("array", 0)], [i2])
index_case("index_front_array", ix, [("array", 0)], [i0])
for sl in ((None, None, -1), (4, 0, -2), (-2, None, -3), (1, 100, 3), (None, None, 4),
           (3, 1, 1), (-100, 100, 2), (5, None, -1)):
    index_case(f"slice_step_{sl}", ix, [("full",), ("slice",) + sl], [])
dg = floats((3, 4, 5), -3, 3)
for off, a1, a2 in ((0, 1, 2), (1, 1, 2), (-2, 1, 2), (2, 0, 2), (-1, 2, 0), (7, 1, 2)):
    case(f"diagonal_{off}_{a1}_{a2}", "diagonal", [dg], [np.ascontiguousarray(np.diagonal(dg, off, a1, a2))],
         params={"offset": off, "axis1": a1, "axis2": a2}, rtol=0, atol=0)
nz = np.array([[0.0, 1.5, 0.0, -2.0], [math.nan, 0.0, -0.0, 3.0], [0.0, 0.0, 0.0, 7.0]],
              dtype=np.float32)
for size, fill in ((3, -1), (8, 0), (6, 9)):
    case(f"argwhere_{size}_{fill}", "argwhere", [nz],
         [np.asarray(jnp.argwhere(nz, size=size, fill_value=fill)).astype(np.int64)],
         params={"size": size, "fill": fill}, rtol=0, atol=0)
    cols = jnp.nonzero(nz, size=size, fill_value=fill)
    case(f"nonzero_{size}_{fill}", "nonzero", [nz], [np.asarray(c).astype(np.int64) for c in cols],
         params={"size": size, "fill": fill}, rtol=0, atol=0)
    mk = nz > 0
    vals = floats((3, 4), -3, 3)
    sel = vals[mk]
    want = np.full(size, np.float32(fill))
    want[:min(size, sel.size)] = sel[:size]
    case(f"masked_select_{size}_{fill}", "masked_select", [vals, mk], [want.astype(np.float32)],
         params={"size": size, "fill": fill}, rtol=0, atol=0)

# ---- more sections are appended above this line ----

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json")
with open(out, "w") as f:
    json.dump({"generator": "tests/data/gen_ops.py", "numpy": np.__version__,
               "torch": torch.__version__, "cases": CASES}, f, separators=(",", ":"))
print(f"{len(CASES)} cases written to {out}")
