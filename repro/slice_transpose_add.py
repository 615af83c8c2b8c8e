"""Reproducer (compiler pass, linalg stage): a slice, then a transpose, then an add with
another tensor does not compile; the linalg IR does not verify. Both frontends meet it:

    RuntimeError: IR after the linalg stage does not verify: inferred input/output operand #1
    has shape's dimension #1 to be 5, but found 6

Seen in the zoo (benchmarks/zoo.py) in
  * wav2vec2 (transformers): the positional conv embedding drops its last frame,
    `hidden + gelu(conv(h)[:, :, :-1]).transpose(1, 2)`;
  * swin_t (torchvision) where a feature map is smaller than the window: the window padding
    is cropped off, `x[:, :H, :W, :]`, after windows are permuted back, and added to the
    shortcut (repro/swin_block.py).
The slice alone, or slice + transpose without the add, compile and match.

    PYTHONPATH=. python repro/slice_transpose_add.py
"""
import numpy as np
import torch

import compiler


class SliceTransposeAdd(torch.nn.Module):
    def forward(self, c, h):
        return h + c[:, :-1].t()


c, h = torch.randn(4, 6), torch.randn(5, 4)
m = compiler.compile(SliceTransposeAdd(), (c, h))
print("max err", np.abs(m(c, h) - (h + c[:, :-1].t()).numpy()).max())
