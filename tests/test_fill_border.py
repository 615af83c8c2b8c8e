"""fill-border against PyTorch: paddings whose fill stores only the border (the copy into the
interior writes the rest) give the framework's result, on odd shapes, several padded dims,
a pad value that is not zero (a max pool's, F.pad's) and a batch of images.

Tolerance: the convs sum in another order than PyTorch (atol 1e-5 at these sizes); the pads
themselves are exact (compared bitwise against the same model without fill-border).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from xdsl.dialects.linalg import ops as linalg
from xdsl.parser import Parser

import compiler
from compiler.lowering.fill_border import interior
from compiler.lowering.pipeline import make_context


class Pads(torch.nn.Module):
    """A 1x1 conv + ReLU into a grouped 3x3 conv (its input padded, as regnet's), F.pad with
    -1.5 on three sides, a strided conv padded unevenly, a max pool padded with -inf."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(16, 16, 1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=2)
        self.c3 = torch.nn.Conv2d(16, 8, 3, stride=2, padding=(2, 1))
        self.pool = torch.nn.MaxPool2d(3, 2, padding=1)

    def forward(self, x):
        y = self.c2(torch.relu(self.c1(x)))
        y = torch.nn.functional.pad(y, (1, 2, 0, 3), value=-1.5)
        return self.pool(self.c3(torch.relu(y)))


@pytest.mark.parametrize("shape", [(1, 16, 9, 7), (2, 16, 14, 14), (1, 16, 1, 5), (3, 16, 6, 1)],
                         ids=str)
def test_padded_buffers_fill_their_border(shape, monkeypatch):
    model = Pads().eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    want = model(x).detach().numpy()
    m = compiler.compile(model, [x.numpy()], threads=2)
    got = m(x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the pass applies: the memref stage's fills of padded buffers have a copy into a box
    memref_ir = Parser(make_context(), m.ir("memref")).parse_module()
    fills = [o for o in memref_ir.walk() if isinstance(o, linalg.FillOp)]
    boxes = [b for b in map(interior, fills) if b is not None]
    assert len(boxes) >= 2, "no padding's fill was found"
    # and changes nothing but the stores: bitwise the result without it
    monkeypatch.setenv("AICC_FILL_BORDER", "0")
    whole = compiler.compile(model, [x.numpy()], threads=2)
    np.testing.assert_array_equal(got, whole(x.numpy()))
    assert whole.ir("loops") != m.ir("loops")
