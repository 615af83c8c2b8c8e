"""fold-conv-input-scale (compiler/lowering/fold_conv_input_scale.py): a squeeze-and-excitation
gate in front of a 1x1 conv moves into the conv's weight. Checked against torch in float64 on
odd shapes (7, 13 and 129 channels, 29x31 and 1x1 images, stride 2), with and without the
rewrite taking place; tolerance rtol 1e-4, atol 1e-5."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch

import compiler


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "0")


class SEProject(torch.nn.Module):
    """depthwise conv, SiLU, an SE gate (mean, two 1x1 convs, sigmoid or hardsigmoid), then
    the 1x1 projection conv and batch norm, as in EfficientNet and MobileNetV3."""

    def __init__(self, c, oc, stride=1, gate=torch.sigmoid):
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.fc1, self.fc2 = torch.nn.Conv2d(c, 5, 1), torch.nn.Conv2d(5, c, 1)
        self.proj = torch.nn.Conv2d(c, oc, 1, stride=stride, bias=False)
        self.bn = torch.nn.BatchNorm2d(oc)
        self.gate = gate

    def forward(self, x):
        y = torch.nn.functional.silu(self.dw(x))
        g = self.gate(self.fc2(torch.relu(self.fc1(y.mean((2, 3), keepdim=True)))))
        return self.bn(self.proj(y * g))


def _weight_scaled(m, oc: int, c: int) -> bool:
    """Does the tensor IR multiply the (OC, C, 1, 1) weight by the gate?"""
    return re.search(rf"aicc\.mul %\S+, %\S+ : tensor<{oc}x{c}x1x1xf32>, tensor<1x{c}x1x1xf32>",
                     m.ir("tensor")) is not None


@pytest.mark.parametrize("n,c,oc,hw,stride,gate,folded", [
    (1, 13, 7, (29, 31), 1, torch.sigmoid, True),
    (1, 129, 24, (9, 11), 2, torch.nn.functional.hardsigmoid, True),
    (1, 7, 40, (6, 5), 1, torch.sigmoid, False),  # 40 output channels >= 30 pixels: kept
    (2, 13, 7, (29, 31), 1, torch.sigmoid, False),  # a gate per image: kept
    (1, 16, 8, (1, 1), 1, torch.sigmoid, False),  # one pixel: kept
])
def test_se_gate_matches_torch(n, c, oc, hw, stride, gate, folded):
    torch.manual_seed(7)
    mod = SEProject(c, oc, stride, gate).eval()
    with torch.no_grad():
        mod.bn.running_mean.uniform_(-1, 1)
        mod.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(n, c, *hw)
    m = compiler.compile(mod, (x,), threads=1)
    assert _weight_scaled(m, oc, c) == folded
    want = copy.deepcopy(mod).double()(x.double()).detach().numpy()
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-5)
