"""Reproducer: torchvision's SwinTransformerBlock on a feature map smaller than its window
(the block pads to the window and crops back) fails in the compiler's linalg stage, on both
frontends (the same failure as repro/slice_transpose_add.py):

    RuntimeError: IR after the linalg stage does not verify: inferred input/output operand #1
    has shape's dimension #1 to be 2, but found 4

    PYTHONPATH=. python repro/swin_block.py [shift window feature-map]   # default 2 4 2
"""
import sys

import torch

sys.path.insert(0, "benchmarks")
from zoo import import_torchvision  # noqa: E402

import compiler  # noqa: E402

import_torchvision()
from torchvision.models.swin_transformer import SwinTransformerBlock  # noqa: E402

torch.manual_seed(0)
shift = int(sys.argv[1]) if len(sys.argv) > 1 else 2
window = int(sys.argv[2]) if len(sys.argv) > 2 else 4
hw = int(sys.argv[3]) if len(sys.argv) > 3 else 2  # the feature map, smaller than the window
block = SwinTransformerBlock(dim=8, num_heads=1, window_size=[window, window], shift_size=[shift, shift]).eval()
x = torch.randn(1, hw, hw, 8)
m = compiler.compile(block, (x,))
print("max err", abs(m(x) - block(x).detach().numpy()).max())
