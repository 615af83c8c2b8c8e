"""A YOLOv8-style detector (C2f blocks, SiLU, channel chunks and concats, an upsample, and
the detection head's split, reshape + transpose + softmax over a 16-wide axis and DFL
convolution) through both frontends, against torch. Its channel split once produced IR that
did not verify after fuse-elementwise."""

from __future__ import annotations

import numpy as np
import pytest

import compiler

torch = pytest.importorskip("torch")
nn = torch.nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class C2f(nn.Module):
    def __init__(self, c1, c2, n=1):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c)
        self.cv2 = Conv((2 + n) * self.c, c2)
        self.m = nn.ModuleList(nn.Sequential(Conv(self.c, self.c, 3), Conv(self.c, self.c, 3)) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class DFL(nn.Module):
    def __init__(self, c1=16):
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(c1, dtype=torch.float).view(1, c1, 1, 1)
        self.c1 = c1

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


class Detect(nn.Module):
    def __init__(self, nc=8, ch=(32, 64), reg=16):
        super().__init__()
        self.nc, self.reg, self.no = nc, reg, nc + reg * 4
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, 32, 3), Conv(32, 32, 3), nn.Conv2d(32, 4 * reg, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, 32, 3), Conv(32, 32, 3), nn.Conv2d(32, nc, 1)) for x in ch)
        self.dfl = DFL(reg)

    def forward(self, xs):
        outs = [torch.cat((self.cv2[i](x), self.cv3[i](x)), 1) for i, x in enumerate(xs)]
        b = outs[0].shape[0]
        x_cat = torch.cat([o.view(b, self.no, -1) for o in outs], 2)
        box, cls = x_cat.split((self.reg * 4, self.nc), 1)
        return torch.cat((self.dfl(box), cls.sigmoid()), 1)


class TinyYolo(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.l1, self.c1 = Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32)
        self.l2, self.c2 = Conv(32, 64, 3, 2), C2f(64, 64)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = Detect()

    def forward(self, x):
        a = self.c1(self.l1(self.stem(x)))
        b = self.c2(self.l2(a))
        return self.head([a + self.up(b)[:, :32], b])


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = TinyYolo().eval()
    for mod in m.modules():  # non-trivial batch-norm statistics
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        return m, x, m(x).numpy()


def test_torch_export(model):
    m, x, ref = model
    out = compiler.compile(m, (x,))(x)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_onnx(model, tmp_path):
    pytest.importorskip("onnx")
    m, x, ref = model
    path = tmp_path / "yolo.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17)
    out = compiler.compile(str(path), example_inputs=(x.numpy(),))(x.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
