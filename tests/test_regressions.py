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


class OPTFeedForward(torch.nn.Module):
    """The end of OPT's decoder layer: the attention block's output (x + out_proj(a), a
    temporary) is flattened to rows, and the feed-forward adds it back:
    `(r + fc2(relu(fc1(r)))).view(shape)` with `r = h.reshape(-1, hidden)`. OPT's random init
    zeroes the biases, so fuse-linear-bias made the residual r fc2's accumulator start, and
    tile-matmul folded that copy into the kernels' init: they read r, a view of h, while h's
    dealloc stayed before the kernels, and plan-memory gave h's memory to fc2's packed A.
    OPTModel at its full size (opt-125m's shape) was 1.46 x its output's scale off."""

    def __init__(self, hidden=16, ffn=64):
        super().__init__()
        self.out_proj = torch.nn.Linear(hidden, hidden)
        self.fc1 = torch.nn.Linear(hidden, ffn)
        self.fc2 = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        h = x + self.out_proj(x)
        shape = h.shape
        r = h.reshape(-1, h.size(-1))
        return (r + self.fc2(torch.relu(self.fc1(r)))).view(shape)


@pytest.mark.parametrize("threads", [1, 2])
def test_opt_residual_view_folded_into_matmul_init(threads):
    torch.manual_seed(0)
    block = OPTFeedForward().eval()
    x = torch.randn(1, 8, 16)
    # packing A (as opt-125m's fc2 chooses for K = 3072) allocates the buffer that reused h
    m = compiler.compile(block, (x,), threads=threads, schedule={"pack_a": True})
    np.testing.assert_allclose(m(x), block(x).detach().numpy(), rtol=1e-5, atol=1e-5)
