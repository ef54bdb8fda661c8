"""Makes tests/data/torch_linear.safetensors: the state_dict of a small PyTorch MLP
(`fc1 = nn.Linear(3, 4)`, `fc2 = nn.Linear(4, 2)` in float16, and a BatchNorm's int64
`bn.num_batches_tracked`), with values that tests/checkpoint.rs checks exactly.

Written by PyTorch (torch 2.15, `safetensors.torch.save_file`, as a model's
`save_file(model.state_dict(), PATH)` writes it) where torch is installed; without torch, by
safetensors' NumPy API, which writes the same tensors under the same names.
"""

from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

PATH = Path(__file__).with_name("torch_linear.safetensors")


def tensors():
    """torch's layout: a Linear's weight is [out_features, in_features]."""
    return {
        "fc1.weight": (np.arange(12, dtype=np.float32).reshape(4, 3) - 6.0) / 8.0,
        "fc1.bias": np.array([0.5, -0.25, 0.125, 1.0], dtype=np.float32),
        "fc2.weight": ((np.arange(8).reshape(2, 4) - 4) / 4.0).astype(np.float16),
        "fc2.bias": np.array([-1.5, 2.0], dtype=np.float16),
        "bn.num_batches_tracked": np.array(7, dtype=np.int64),
    }


if __name__ == "__main__":
    try:
        import torch
        from safetensors.torch import save_file as save_torch

        save_torch({k: torch.from_numpy(v) for k, v in tensors().items()}, str(PATH))
    except ImportError:
        save_file(tensors(), str(PATH), metadata={"format": "pt"})
    for name, value in tensors().items():
        print(name, value.dtype, list(value.shape), value.ravel().tolist())
