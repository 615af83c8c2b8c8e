"""Whole PyTorch models through the torch frontend, against torch's own float32 outputs:
a ResNet-style CNN, a UNet-like encoder-decoder (transposed convolution, interpolation,
concatenated skips, reflect padding), torch.nn.TransformerEncoderLayer variants and a
hand-written attention block, all small and with seeded random weights (batch-norm statistics
included).

Tolerance: |aicc - torch| <= 1e-4 + 1e-4 * |torch|. Both sides compute in float32 but sum
convolutions, matmuls and normalizations in different orders, and aicc's exp/tanh/erf are
polynomials; through a few layers of O(1) activations that stays well under 1e-4.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import compiler  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)


def _seeded(seed: int):
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 1)


def _randomize_batch_norms(model: nn.Module, g) -> None:
    """Give every BatchNorm non-trivial statistics and affine weights."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)


def compare(model: nn.Module, *inputs, tol=TOL):
    model = model.eval()
    m = compiler.compile(model, inputs)
    got = m(*inputs)
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **tol)
    return m


# -- a ResNet-style CNN --------------------------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:  # strided 1x1 conv downsample on the shortcut
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.down is None else self.down(x)))


class SmallResNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


@pytest.mark.parametrize("batch", [1, 2])
def test_resnet_style_cnn(batch):
    g = _seeded(0)
    model = SmallResNet()
    _randomize_batch_norms(model, g)
    x = torch.randn(batch, 3, 11, 13, generator=g)  # odd, non-square
    m = compare(model, x)
    tensor_ir = m.ir("tensor")
    assert tensor_ir.count("aicc.conv2d") == 6 and "aicc.pool2d" in tensor_ir


# -- a UNet-like encoder-decoder ------------------------------------------------------------------


def conv_bn_relu(cin: int, cout: int) -> nn.Sequential:
    """A reflect-padded 3x3 convolution, batch norm and ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, padding_mode="reflect", bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class SmallUNet(nn.Module):
    """Two levels down (max pool, strided conv) to a residual block, then up by a transposed
    convolution and a bilinear interpolation, skips concatenated on the way. The input sizes are
    odd, so the upsampled maps are reflect-padded or resized to their skip's size; plus
    nearest-upsampled auxiliary logits from the bottom."""

    def __init__(self, classes: int = 2):
        super().__init__()
        self.enc1 = conv_bn_relu(3, 8)
        self.enc2 = conv_bn_relu(8, 16)
        self.down = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.mid = conv_bn_relu(16, 16)
        self.up2 = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1)
        self.dec2 = conv_bn_relu(32, 16)
        self.dec1 = conv_bn_relu(24, 8)
        self.head = nn.Conv2d(8, classes, 1)
        self.aux = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)                                  # H x W
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))    # H/2
        b = self.down(e2)                                  # H/4
        m = b + self.mid(b)
        u2 = self.up2(m)
        dh, dw = e2.shape[-2] - u2.shape[-2], e2.shape[-1] - u2.shape[-1]
        u2 = nn.functional.pad(u2, (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2), mode="reflect")
        d2 = self.dec2(torch.cat([u2, e2], dim=1))
        u1 = nn.functional.interpolate(d2, size=e1.shape[-2:], mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([u1, e1], dim=1))
        aux = nn.functional.interpolate(self.aux(m), size=x.shape[-2:], mode="nearest")
        return self.head(d1) + 0.5 * aux


def test_unet_like_model():
    g = _seeded(3)
    model = SmallUNet()
    _randomize_batch_norms(model, g)
    x = torch.randn(2, 3, 9, 10, generator=g)  # odd, non-square: 9x10 -> 4x5 -> 2x3 and back
    m = compare(model, x)
    tensor_ir = m.ir("tensor")
    assert "aicc.conv_transpose2d" in tensor_ir and tensor_ir.count("aicc.concat") == 2
    assert tensor_ir.count("aicc.resample") >= 4  # reflect padding and both interpolations


# -- transformer encoders --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "batch_first,norm_first,activation,causal",
    [(True, False, "relu", False), (False, True, "relu", False), (True, True, "gelu", True)],
    ids=["batch_first-post_norm", "seq_first-pre_norm", "batch_first-pre_norm-gelu-causal"],
)
def test_transformer_encoder_layer(batch_first, norm_first, activation, causal):
    g = _seeded(1)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.1,
                                       activation=activation, batch_first=batch_first, norm_first=norm_first)
    L, B = 7, 2
    x = torch.randn((B, L, 64) if batch_first else (L, B, 64), generator=g)
    if causal:
        mask = nn.Transformer.generate_square_subsequent_mask(L)

        class Causal(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = layer

            def forward(self, src):
                return self.layer(src, src_mask=mask, is_causal=True)

        compare(Causal(), x)
    else:
        compare(layer, x)


class HandAttention(nn.Module):
    """Multi-head causal self-attention written out op by op, with residual and layer norm."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.h = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        B, L, D = x.shape
        hd = D // self.h

        def heads(t):
            return t.view(B, L, self.h, hd).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, L, D)
        return self.norm(x + self.o(out))


@pytest.mark.parametrize("batch", [1, 2])
def test_hand_written_attention_block(batch):
    g = _seeded(2)
    model = HandAttention(32, 4)
    x = torch.randn(batch, 9, 32, generator=g)
    m = compare(model, x)
    # the frontend keeps softmax one op; the CPU pipeline then fuses the block into one causal
    # attention kernel (fuse-attention, tests/test_fusion.py)
    assert "aicc.softmax" in compiler.compile(model.eval(), (x,), fuse=False).ir("tensor")
    assert "aicc_fused.attention" in m.ir("tensor") and "causal" in m.ir("tensor")
