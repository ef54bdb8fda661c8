"""Writes the PyTorch values that tests/recurrent.rs checks (torch 2.x, CPU, float64).

Every tensor is filled by `fill(shape, seed)`: element i (row-major) is 0.5 * sin(0.7 i + seed),
the same formula the Rust test uses. Run: python tests/data/recurrent_reference.py
"""
import json, math
import torch

torch.set_default_dtype(torch.float64)


def fill(shape, seed):
    n = math.prod(shape)
    return torch.tensor([0.5 * math.sin(0.7 * i + seed) for i in range(n)]).reshape(shape)


def set_weights(module, seed):
    for k, (name, p) in enumerate(module.named_parameters()):
        with torch.no_grad():
            p.copy_(fill(p.shape, seed + k))


def flat(t):
    return [round(v, 12) for v in t.detach().reshape(-1).tolist()]


out = {}
# GRU, one layer, [T, N, I] = [5, 2, 3], H = 4, zero h0.
gru = torch.nn.GRU(3, 4)
set_weights(gru, 1.0)
x = fill([5, 2, 3], 0.3)
y, h = gru(x)
out["gru_output"], out["gru_h"] = flat(y), flat(h)
# Per-sample gradients of sum(output^2) over the weights, samples unbatched [T, I], over the
# first 3 steps (the loop vmap methods compile the unrolled recurrence into large kernels).
x = x[:3]
names = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
per_sample = {n: [] for n in names}
for i in range(x.shape[1]):  # one unbatched sample [T, I] at a time (torch.func.vmap cannot batch GRU)
    gru.zero_grad()
    yi, _ = gru(x[:, i, :])
    (yi ** 2).sum().backward()
    for n, p in gru.named_parameters():
        per_sample[n].append(p.grad.clone())
for n in names:
    out["gru_grad_" + n] = flat(torch.stack(per_sample[n]))

# LSTM, two layers, bidirectional, batch_first: [N, T, I] = [2, 4, 3], H = 2, given state.
lstm = torch.nn.LSTM(3, 2, num_layers=2, bidirectional=True, batch_first=True)
set_weights(lstm, 2.0)
x = fill([2, 4, 3], 0.9)
h0, c0 = fill([4, 2, 2], 0.2), fill([4, 2, 2], 0.4)
y, (h, c) = lstm(x, (h0, c0))
out["lstm_output"], out["lstm_h"], out["lstm_c"] = flat(y), flat(h), flat(c)
out["lstm_names"] = [n for n, _ in lstm.named_parameters()]

# RNN with ReLU, no bias, unbatched [T, I] = [6, 3], H = 3, given h0 [1, H].
rnn = torch.nn.RNN(3, 3, nonlinearity="relu", bias=False)
set_weights(rnn, 3.0)
x = fill([6, 3], 1.7)
y, h = rnn(x, fill([1, 3], 0.5))
out["rnn_output"], out["rnn_h"] = flat(y), flat(h)

print(json.dumps(out))
