"""The numbers of gen_optim.py computed by torch.optim itself (run where torch is installed):
prints the same JSON keys, so `optim_reference.py` and `gen_optim.py` outputs diff directly
(see gen_optim.py's docstring). The float64 runs check the NumPy reimplementation exactly
(differences ~1e-15); tests/optim.rs holds the values to 1e-5 in float32."""

import json

import torch

STEPS = 20
DTYPE = torch.float64
X = torch.tensor([[1.0, 2.0, -1.0], [0.5, -1.0, 2.0], [-1.5, 0.5, 1.0], [2.0, 1.0, 0.5]], dtype=DTYPE)
Y = torch.tensor([[1.0, -1.0], [2.0, 0.5], [-0.5, 1.5], [1.0, 2.0]], dtype=DTYPE)
W0 = torch.tensor([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]], dtype=DTYPE)
B0 = torch.tensor([0.05, -0.05], dtype=DTYPE)

S = torch.optim.lr_scheduler


def fresh():
    return [W0.clone().requires_grad_(True), B0.clone().requires_grad_(True)]


def loss(w, b):
    return 0.5 * ((X @ w + b - Y) ** 2).sum() / 4.0


SCHEDULES = {
    "constant": lambda o: S.LambdaLR(o, lambda k: 1.0),
    "step": lambda o: S.StepLR(o, step_size=5, gamma=0.5),
    "exponential": lambda o: S.ExponentialLR(o, gamma=0.9),
    "cosine": lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "linear_warmup": lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=5),
    "one_cycle": lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=STEPS, cycle_momentum=False),
}

O = torch.optim
CASES = {
    "sgd": (lambda p: O.SGD(p, lr=0.1), lambda o: S.LambdaLR(o, lambda k: 1.0)),
    "sgd_momentum": (
        lambda p: O.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
        lambda o: S.StepLR(o, step_size=5, gamma=0.5),
    ),
    "sgd_nesterov": (
        lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda o: S.ExponentialLR(o, gamma=0.9),
    ),
    "adam": (
        lambda p: O.Adam(p, lr=0.05, weight_decay=0.01),
        lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    ),
    "adam_amsgrad": (
        lambda p: O.Adam(p, lr=0.05, betas=(0.8, 0.99), amsgrad=True),
        lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=5),
    ),
    "adamw": (
        lambda p: O.AdamW(p, lr=0.05, weight_decay=0.1),
        lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=STEPS, cycle_momentum=False),
    ),
    "rmsprop": (lambda p: O.RMSprop(p, lr=0.01), lambda o: S.LambdaLR(o, lambda k: 1.0)),
    "rmsprop_centered": (
        lambda p: O.RMSprop(p, lr=0.01, alpha=0.9, weight_decay=0.01, momentum=0.5, centered=True),
        lambda o: S.CosineAnnealingLR(o, T_max=STEPS, eta_min=0.0),
    ),
    "adagrad": (
        lambda p: O.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1),
        lambda o: S.StepLR(o, step_size=10, gamma=0.5),
    ),
}


def lrs(make):
    opt = O.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    sched = make(opt)
    out = []
    for _ in range(STEPS):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def run(make_opt, make_sched):
    params = fresh()
    opt = make_opt(params)
    sched = make_sched(opt)
    for _ in range(STEPS):
        opt.zero_grad()
        loss(*params).backward()
        opt.step()
        sched.step()
    return [float(v) for p in params for v in p.detach().reshape(-1)]


def clip_case():
    params = fresh()
    loss(*params).backward()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm=0.5)
    return [float(total)] + [float(v) for p in params for v in p.grad.reshape(-1)]


def main():
    out = {f"lr/{name}": lrs(make) for name, make in SCHEDULES.items()}
    out.update({name: run(*case) for name, case in CASES.items()})
    out["clip_grad_norm"] = clip_case()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
