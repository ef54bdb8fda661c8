"""DP-SGD step peers for `cargo run --release --example dp_step`, float32, PyTorch on CPU.

Models (the same as examples/per_sample_grads_cnn.rs and per_sample_grads_transformer.rs):
  cnn          the torch.func per-sample-gradients tutorial CNN, MNIST-shaped [B,1,28,28], 10 classes
  transformer  one pre-LN block: token embedding 1000x64 + learned positions (seq 32), 4 heads of 16
               (fused qkv), MLP 64->256->64 exact GELU, final LN, mean-pool, head 64->10

Peers (each a full step: per-sample clipping to norm C, Gaussian noise sigma*C once, mean):
  torch_nonprivate  forward + backward of the mean loss (no clipping, no noise): the reference
  opacus_ghost      Opacus PrivacyEngine.make_private(grad_sample_mode="ghost"): ghost clipping
                    (per-sample norms without per-sample gradients, a second backward)
  opacus_hooks      Opacus PrivacyEngine.make_private(grad_sample_mode="hooks"), the default
  torch_func        torch.func vmap(grad(loss)) + per-sample norms + clip factor + weighted sum + noise
The Opacus steps run zero_grad, forward, backward and optimizer.step() (SGD, so the step includes an
O(P) parameter update that ours does not).

Prints one line per peer: `PEER <name> <median ms> ...` (with the share of the CPUs other processes
used meanwhile) or `PEER <name> ERROR <why>`.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLIP, SIGMA = 1.0, 1.0
V, S, D, H, FF, C = 1000, 32, 64, 4, 256, 10


class SimpleCNN(nn.Module):  # the tutorial's
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(F.max_pool2d(x, 2), 1)
        return self.fc2(F.relu(self.fc1(x)))


class Block(nn.Module):
    """Positions are an nn.Embedding of arange(S) (a learned [S, D] table, as Opacus needs its
    parameters inside layers it knows)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(S, D)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)
        self.head = nn.Linear(D, C)
        self.register_buffer("positions", torch.arange(S))

    def forward(self, t):  # t [B, S]
        b = t.shape[0]
        x = self.tok(t) + self.pos(self.positions.expand(b, S).contiguous())  # Opacus ghost views the ids
        q, k, v = (a.reshape(b, S, H, D // H).transpose(1, 2) for a in self.qkv(self.ln1(x)).split(D, -1))
        a = torch.softmax(q @ k.transpose(-1, -2) / (D // H) ** 0.5, dim=-1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(b, S, D))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(self.lnf(x).mean(1))


def make(model, batch):
    torch.manual_seed(0)
    if model == "cnn":
        return SimpleCNN(), torch.randn(batch, 1, 28, 28), torch.randint(0, C, (batch,))
    return Block(), torch.randint(0, V, (batch, S)), torch.randint(0, C, (batch,))


def nonprivate(model, batch):
    m, x, y = make(model, batch)

    def step():
        m.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), y).backward()

    return step, "forward + backward of the mean loss (.grad filled)"


def opacus(model, batch, mode):
    import opacus
    from opacus import PrivacyEngine

    m, x, y = make(model, batch)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant="rdp")
    kwargs = dict(module=m, optimizer=opt, data_loader=loader, noise_multiplier=SIGMA, max_grad_norm=CLIP,
                  poisson_sampling=False, grad_sample_mode=mode)
    if mode == "ghost":
        m, opt, crit, _ = engine.make_private(criterion=nn.CrossEntropyLoss(), **kwargs)
    else:
        m, opt, _ = engine.make_private(**kwargs)
        crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        crit(m(x), y).backward()
        opt.step()

    return step, f"opacus {opacus.__version__} make_private(grad_sample_mode={mode!r}), SGD step"


def torch_func(model, batch):
    from torch.func import functional_call, grad, vmap

    m, x, y = make(model, batch)
    params = {k: v.detach() for k, v in m.named_parameters()}

    def sample_loss(p, xi, yi):
        return F.cross_entropy(functional_call(m, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))
    seed = [0]

    def step():
        seed[0] += 1
        gen = torch.Generator().manual_seed(seed[0])
        with torch.no_grad():
            g = per_sample(params, x, y)
            norms = torch.stack([v.reshape(batch, -1).square().sum(1) for v in g.values()]).sum(0).sqrt()
            factor = (CLIP / (norms + 1e-6)).clamp(max=1.0)
            return {k: (torch.einsum("i,i...->...", factor, v)
                        + SIGMA * CLIP * torch.randn(v.shape[1:], generator=gen)) / batch
                    for k, v in g.items()}

    return step, "torch.func vmap(grad(loss)) + norms + clip + weighted sum + noise, eager"


def cpu_ticks():
    """(all CPUs' ticks, their busy ticks, this process's ticks) from /proc."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    with open("/proc/self/stat") as f:
        own = f.read().rsplit(")", 1)[1].split()
    return sum(v), sum(v) - v[3] - v[4], int(own[11]) + int(own[12])


def median_ms(step, reps, max_s):
    step()  # first calls: hooks, allocations
    step()
    times = []
    started = time.perf_counter()
    while len(times) < reps and (len(times) < 3 or time.perf_counter() - started < max_s):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times), len(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=["cnn", "transformer"])
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--max-s", type=float, default=20.0)
    args = ap.parse_args()
    peers = {"torch_nonprivate": lambda: nonprivate(args.model, args.batch),
             "opacus_ghost": lambda: opacus(args.model, args.batch, "ghost"),
             "opacus_hooks": lambda: opacus(args.model, args.batch, "hooks"),
             "torch_func": lambda: torch_func(args.model, args.batch)}
    print(f"INFO torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    for name, setup in peers.items():
        try:
            step, how = setup()
            t0, b0, o0 = cpu_ticks()
            ms, n = median_ms(step, args.reps, args.max_s)
            t1, b1, o1 = cpu_ticks()
            others = max(0, (b1 - b0) - (o1 - o0)) / max(1, t1 - t0)
            print(f"PEER {name} {ms:.3f} median of {n}, others used {100 * others:.0f}% of the CPUs: {how}",
                  flush=True)
        except Exception as e:  # a peer that cannot run says why
            why = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            print(f"PEER {name} ERROR {why}", flush=True)


if __name__ == "__main__":
    main()
