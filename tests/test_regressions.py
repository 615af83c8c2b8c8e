"""Models that once broke a compiler pass (found by the model zoo), kept small."""

from __future__ import annotations

import numpy as np
import pytest

import compiler

torch = pytest.importorskip("torch")


class SliceTransposeAdd(torch.nn.Module):
    """wav2vec2's positional conv drops its last frame, then transposes and adds; Swin crops
    its window padding the same way. The prefix slice fused next to the full tensor left IR
    that did not verify after fuse-elementwise."""

    def forward(self, c, h):
        return h + c[:, :-1].t()


def test_slice_transpose_add():
    c, h = torch.randn(4, 6), torch.randn(5, 4)
    m = compiler.compile(SliceTransposeAdd(), (c, h))
    np.testing.assert_allclose(m(c, h), (h + c[:, :-1].t()).numpy(), rtol=1e-6)


def test_swin_block_smaller_than_its_window():
    """torchvision's Swin block on a feature map smaller than its window pads and crops back."""
    import importlib.util
    from pathlib import Path

    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed")
    spec = importlib.util.spec_from_file_location("zoo", Path(__file__).resolve().parents[1] / "benchmarks" / "zoo.py")
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    zoo.import_torchvision()
    from torchvision.models.swin_transformer import SwinTransformerBlock

    torch.manual_seed(0)
    block = SwinTransformerBlock(dim=8, num_heads=1, window_size=[4, 4], shift_size=[2, 2]).eval()
    x = torch.randn(1, 2, 2, 8)
    m = compiler.compile(block, (x,))
    np.testing.assert_allclose(m(x), block(x).detach().numpy(), rtol=1e-4, atol=1e-5)
