"""Expected values for tests/optim.rs: torch.optim's documented update formulas and
torch.optim.lr_scheduler's closed forms, reimplemented in NumPy (float64), on a fixed
least-squares problem. torch is not installed here; `optim_reference.py` beside this file
computes the same numbers with torch itself and prints the same JSON, so the two can be
diffed on a machine that has torch:

    python tests/data/gen_optim.py > a.json
    python tests/data/optim_reference.py > b.json
    python -c "import json;a=json.load(open('a.json'));b=json.load(open('b.json'));\
print(max(abs(x-y) for k in a for x,y in zip(a[k],b[k])))"
"""

import json
import math

import numpy as np

STEPS = 20
X = np.array([[1.0, 2.0, -1.0], [0.5, -1.0, 2.0], [-1.5, 0.5, 1.0], [2.0, 1.0, 0.5]])
Y = np.array([[1.0, -1.0], [2.0, 0.5], [-0.5, 1.5], [1.0, 2.0]])
W0 = np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]])
B0 = np.array([0.05, -0.05])


def grads(w, b):
    """d/d(w, b) of 0.5 * sum((X w + b - Y)^2) / 4."""
    r = X @ w + b - Y
    return [X.T @ r / 4.0, r.sum(0) / 4.0]


# --- schedules: lr at step k (0-based), torch.optim.lr_scheduler closed forms ---------------


def constant(base):
    return lambda k: base


def step_lr(base, step_size, gamma):
    return lambda k: base * gamma ** (k // step_size)


def exponential(base, gamma):
    return lambda k: base * gamma**k


def cosine(base, t_max, eta_min):
    return lambda k: eta_min + (base - eta_min) * (1 + math.cos(math.pi * k / t_max)) / 2


def linear(base, start, end, total):
    return lambda k: base * (start + (end - start) * min(total, k) / total)


def one_cycle(max_lr, total, pct_start=0.3, div_factor=25.0, final_div_factor=1e4):
    initial = max_lr / div_factor
    minimum = initial / final_div_factor
    phases = [
        (float(pct_start * total) - 1, initial, max_lr),
        (float(total - 1), max_lr, minimum),
    ]

    def lr(k):
        start_step = 0.0
        for i, (end_step, a, b) in enumerate(phases):
            if k <= end_step or i == len(phases) - 1:
                pct = (k - start_step) / (end_step - start_step)
                return b + (a - b) / 2.0 * (math.cos(math.pi * pct) + 1)
            start_step = end_step
        raise AssertionError

    return lr


# --- optimizers: torch.optim's single-tensor update formulas ---------------------------------


def sgd(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    def step(p, g, s, lr, t):
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            buf = g.copy() if t == 1 else momentum * s["buf"] + (1 - dampening) * g
            s["buf"] = buf
            g = g + momentum * buf if nesterov else buf
        return p - lr * g

    return step


def adam(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    b1, b2 = betas

    def step(p, g, s, lr, t):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = s.get("m", np.zeros_like(p))
        v = s.get("v", np.zeros_like(p))
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        s["m"], s["v"] = m, v
        bc1 = 1 - b1**t
        bc2 = 1 - b2**t
        if amsgrad:
            vmax = np.maximum(s.get("vmax", np.zeros_like(p)), v)
            s["vmax"] = vmax
            denom = np.sqrt(vmax) / math.sqrt(bc2) + eps
        else:
            denom = np.sqrt(v) / math.sqrt(bc2) + eps
        return p - (lr / bc1) * m / denom

    return step


def rmsprop(alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    def step(p, g, s, lr, t):
        if weight_decay:
            g = g + weight_decay * p
        sq = alpha * s.get("sq", np.zeros_like(p)) + (1 - alpha) * g * g
        s["sq"] = sq
        if centered:
            ga = alpha * s.get("ga", np.zeros_like(p)) + (1 - alpha) * g
            s["ga"] = ga
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * s.get("buf", np.zeros_like(p)) + g / avg
            s["buf"] = buf
            return p - lr * buf
        return p - lr * g / avg

    return step


def adagrad(lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    def step(p, g, s, lr, t):
        if weight_decay:
            g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        total = s.get("sum", np.full_like(p, initial_accumulator_value)) + g * g
        s["sum"] = total
        return p - clr * g / (np.sqrt(total) + eps)

    return step


SCHEDULES = {
    "constant": constant(0.1),
    "step": step_lr(0.1, 5, 0.5),
    "exponential": exponential(0.1, 0.9),
    "cosine": cosine(0.1, 10, 0.001),
    "linear_warmup": linear(0.1, 0.25, 1.0, 5),
    "one_cycle": one_cycle(0.1, STEPS),
}

CASES = {
    "sgd": (sgd(), constant(0.1)),
    "sgd_momentum": (sgd(momentum=0.9, dampening=0.1, weight_decay=0.01), step_lr(0.05, 5, 0.5)),
    "sgd_nesterov": (sgd(momentum=0.9, nesterov=True, weight_decay=0.01), exponential(0.05, 0.9)),
    "adam": (adam(weight_decay=0.01), cosine(0.05, 10, 0.001)),
    "adam_amsgrad": (adam(betas=(0.8, 0.99), amsgrad=True), linear(0.05, 0.25, 1.0, 5)),
    "adamw": (adam(weight_decay=0.1, decoupled=True), one_cycle(0.05, STEPS)),
    "rmsprop": (rmsprop(), constant(0.01)),
    "rmsprop_centered": (
        rmsprop(alpha=0.9, weight_decay=0.01, momentum=0.5, centered=True),
        cosine(0.01, STEPS, 0.0),
    ),
    "adagrad": (
        adagrad(lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1),
        step_lr(0.1, 10, 0.5),
    ),
}


def run(step, schedule):
    params = [W0.copy(), B0.copy()]
    states = [{}, {}]
    for k in range(STEPS):
        gs = grads(*params)
        lr = schedule(k)
        params = [step(p, g, s, lr, k + 1) for p, g, s in zip(params, gs, states)]
    return [float(v) for p in params for v in p.ravel()]


def clip_case():
    """clip_grad_norm_ of the gradients at (W0, B0) to max_norm 0.5: [total, clipped...]."""
    gs = grads(W0, B0)
    total = math.sqrt(sum(float((g * g).sum()) for g in gs))
    scale = min(0.5 / (total + 1e-6), 1.0)
    return [total] + [float(v) for g in gs for v in (g * scale).ravel()]


def main():
    out = {f"lr/{name}": [s(k) for k in range(STEPS)] for name, s in SCHEDULES.items()}
    out.update({name: run(step, sched) for name, (step, sched) in CASES.items()})
    out["clip_grad_norm"] = clip_case()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
