"""The model workloads as torch.nn.Modules, for aicc's torch frontend and the torch and ONNX
Runtime peers: an MLP, a small CNN and a transformer encoder layer, each built from the NumPy
weights of workloads.py (`*_params`) so that every peer computes with the same numbers.

    MLP(p)            784-512-512-10, ReLU
    CNN(p)            conv3x3 3->32 (pad 1), ReLU, conv3x3 32->64 (pad 1), ReLU, maxpool 2,
                      flatten, linear -> 10, on 3x32x32 images
    EncoderLayer(p)   post-norm encoder layer (self-attention, add & norm, ReLU FFN, add & norm)
                      written out in torch ops: no nn.TransformerEncoderLayer fast path
    to_onnx(module, inputs)   the module through torch.onnx.export (the TorchScript exporter:
                      the dynamo one needs onnxscript), as an onnx.ModelProto with input "x"

This file imports torch: run.py imports it only when a case needs it.
"""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from workloads import LN_EPS


def _load(module: nn.Module, weights: dict[str, np.ndarray]) -> nn.Module:
    """Copy NumPy arrays into the module's parameters (by state-dict name); eval mode."""
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
    module.load_state_dict(state, strict=True)
    return module.eval()


class MLP(nn.Module):
    def __init__(self, p: dict):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (nn.Linear(*p[f"w{i}"].shape) for i in (1, 2, 3))
        # workloads.mlp_params stores w as (in, out), nn.Linear as (out, in)
        _load(self, {f"fc{i}.weight": p[f"w{i}"].T for i in (1, 2, 3)}
              | {f"fc{i}.bias": p[f"b{i}"] for i in (1, 2, 3)})

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self, p: dict):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(p["fc_w"].shape[1], p["fc_w"].shape[0])
        _load(self, {"conv1.weight": p["c1_w"], "conv1.bias": p["c1_b"], "conv2.weight": p["c2_w"],
                     "conv2.bias": p["c2_b"], "fc.weight": p["fc_w"], "fc.bias": p["fc_b"]})

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.flatten(F.max_pool2d(x, 2), 1))


class EncoderLayer(nn.Module):
    """x: (batch, sequence, d_model)."""

    def __init__(self, p: dict):
        super().__init__()
        D, F_ = p["D"], p["F"]
        self.heads = p["H"]
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(D, F_), nn.Linear(F_, D)
        self.norm1, self.norm2 = nn.LayerNorm(D, eps=LN_EPS), nn.LayerNorm(D, eps=LN_EPS)
        w = {f"{n}.weight": p["w" + n].T for n in "qkvo"} | {f"{n}.bias": p["b" + n] for n in "qkvo"}
        w |= {"ff1.weight": p["w1"].T, "ff1.bias": p["b1"], "ff2.weight": p["w2"].T, "ff2.bias": p["b2"]}
        w |= {f"norm{i}.weight": p[f"g{i}"] for i in (1, 2)} | {f"norm{i}.bias": p[f"be{i}"] for i in (1, 2)}
        _load(self, w)

    def forward(self, x):
        B, S, D = x.shape
        H = self.heads
        E = D // H

        def split(y):
            return y.reshape(B, S, H, E).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        s = q @ k.transpose(-2, -1) / math.sqrt(E)
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, S, D)
        x = self.norm1(x + self.o(a))
        return self.norm2(x + self.ff2(torch.relu(self.ff1(x))))


def to_onnx(module: nn.Module, inputs: tuple[np.ndarray, ...]):
    import onnx

    f = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated, and says so
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(torch.from_numpy(a) for a in inputs), f, dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=17)
    return onnx.load_from_string(f.getvalue())
