"""Makes tests/data/torch_linear.safetensors: the state_dict of a small PyTorch MLP
(`fc1 = nn.Linear(3, 4)`, `fc2 = nn.Linear(4, 2)` in float16, and a BatchNorm's int64
`bn.num_batches_tracked`), with values that tests/checkpoint.rs checks exactly.

Written with safetensors' NumPy API (torch is not installed where the fixture was made); with
torch the same file comes from

    import torch
    from safetensors.torch import save_file
    save_file({k: torch.from_numpy(v) for k, v in tensors().items()}, PATH)

or from a real model: `save_file(model.state_dict(), PATH)`.
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
    save_file(tensors(), str(PATH), metadata={"format": "pt"})
    for name, value in tensors().items():
        print(name, value.dtype, list(value.shape), value.ravel().tolist())
