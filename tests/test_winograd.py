"""The "winograd" and "winograd4" conv lowerings (compiler/lowering/winograd.py, F(2x2, 3x3)
and F(4x4, 3x3)) against torch in float64: batch 1 to 3, 3 to 64 input channels, 5 to 33
output channels, images from one tile (2x2 output) to 28x28 and non-square, padded and not
(F(4x4) on outputs that are not multiples of 4: the input padded to whole tiles, the extra
outputs dropped), with bias, ReLU and a residual block; convs they do not apply to (odd output
sizes, stride 2, 5x5, groups, a weight known only at run time) fall back to the heuristic's
lowering. Tolerance as for the other lowerings: rtol=1e-4, atol=1e-5*sqrt(K) for sums of
K = 9*IC products.
"""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pytest
import torch

import compiler


# the transformed tiles: (m+2)^2 for F(m x m, 3x3), the batch of its one matmul
TILES = {"winograd": 16, "winograd4": 36}


@pytest.fixture(autouse=True, params=sorted(TILES))
def mode(request, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "0")
    monkeypatch.setenv("AICC_CONV_LOWERING", request.param)
    return request.param


def _check(model, x, ic, threads=1):
    m = compiler.compile(model, (x,), threads=threads)
    want = model.double()(x.double()).detach().numpy()
    model.float()
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-5 * math.sqrt(9 * ic))
    return m


CASES = [
    # n, ic, oc, (h, w), padding, bias, relu
    (1, 3, 5, (4, 4), 1, True, True),
    (2, 8, 16, (6, 10), 1, False, False),  # non-square, no bias
    (1, 16, 33, (2, 2), 1, True, False),  # one tile
    (3, 5, 7, (8, 6), 0, True, True),  # unpadded: a 6x4 output
    (1, 64, 64, (28, 28), 1, True, True),
    (2, 32, 24, (32, 32), 1, True, False),  # slices of 4 KiB multiples: staggered rows
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_winograd_matches_torch(case, mode):
    n, ic, oc, hw, pad, bias, relu = case
    torch.manual_seed(0)
    layers = [torch.nn.Conv2d(ic, oc, 3, padding=pad, bias=bias)] + [torch.nn.ReLU()] * relu
    model = torch.nn.Sequential(*layers).eval()
    m = _check(model, torch.randn(n, ic, *hw), ic)
    linalg = m.ir("linalg")
    # one matmul of the transformed weight, batched over the 16 or 36 tiles and the images,
    # marked for choose-schedule
    assert linalg.count(f'aicc.conv_lowering = "{mode}"') == 1, linalg
    assert f"tensor<{TILES[mode]}x{n}x" in linalg, linalg


@pytest.mark.parametrize("case", [(1, 64, 64, (28, 28)), (3, 32, 40, (16, 16)), (1, 7, 5, (6, 10))],
                         ids=str)
def test_winograd_threads(case, mode):
    """The batched matmul's (a, b) entries split over 2 threads (and a batch of 3 images)."""
    n, ic, oc, hw = case
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Conv2d(ic, oc, 3, padding=1), torch.nn.ReLU()).eval()
    m = _check(model, torch.randn(n, ic, *hw), ic, threads=2)
    assert "aicc_cpu.microkernel" in m.ir("loops")


def test_stagger_rows():
    """The slices of V and M start on different L1 sets (4 KiB period, 64-byte lines): at most
    two a set where the row size allows it, no rows added where they already do."""
    from compiler.lowering.winograd import stagger_rows

    def sets(slices, row_bytes, rows):
        return len({i * rows * row_bytes % 4096 // 64 for i in range(slices)})

    for slices, tiles, rows in ((36, 196, 64), (36, 64, 32), (36, 64, 64), (16, 49, 256),
                                (16, 128, 8), (36, 16, 64), (36, 4, 64), (16, 1024, 64)):
        extra = stagger_rows(slices, tiles * 4, rows)
        assert 0 <= extra < 16
        best = max(sets(slices, tiles * 4, rows + e) for e in range(16))
        assert sets(slices, tiles * 4, rows + extra) >= min(best, slices // 2), (tiles, rows)
    assert sets(36, 4 * 196, 64) == 4 and stagger_rows(36, 4 * 196, 64) == 1
    assert stagger_rows(16, 4 * 49, 3) == 0  # 16 slices of 588 bytes: spread already


class _Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x))) + x)


def test_winograd_resnet_block(mode):
    torch.manual_seed(1)
    m = _check(_Block(12).eval(), torch.randn(1, 12, 10, 14), 12)
    assert m.ir("linalg").count(f'aicc.conv_lowering = "{mode}"') == 2


@pytest.mark.parametrize("conv", [
    torch.nn.Conv2d(4, 6, 3, padding=1),  # 7x7 output: odd
    torch.nn.Conv2d(4, 6, 3, stride=2, padding=1),
    torch.nn.Conv2d(4, 6, 5, padding=2),
    torch.nn.Conv2d(4, 6, 3, padding=1, groups=2),
    torch.nn.Conv2d(4, 6, 3, dilation=2, padding=2),
], ids=["odd", "stride2", "5x5", "groups", "dilation"])
def test_winograd_falls_back_where_it_does_not_apply(conv):
    torch.manual_seed(2)
    m = _check(torch.nn.Sequential(conv).eval(), torch.randn(1, 4, 7, 7), 4)
    assert "winograd" not in m.ir("linalg")


def test_weight_known_at_run_time_falls_back():
    x = np.random.default_rng(0).standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)
    f = compiler.compile(lambda x, w: compiler.ops.conv2d(x, w), (x, w), threads=1)
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(),
                                      torch.from_numpy(w).double()).numpy()
    np.testing.assert_allclose(f(x, w), want, rtol=1e-4, atol=1e-4)
    assert "winograd" not in f.ir("linalg")


def test_winograd_on_the_cuda_emulator(mode):
    pytest.importorskip("cuda.bindings.nvrtc")
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulation harness needs g++")
    from compiler.targets.cuda_emu.emu import run_emulated

    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 6, 4)
    m = compiler.compile(model, (x,), target="cuda")
    assert m.ir("linalg").count(f'aicc.conv_lowering = "{mode}"') == 1
    want = model.double()(x.double()).detach().numpy()
    np.testing.assert_allclose(run_emulated(m, x.numpy()), want, rtol=1e-4, atol=1e-4)


def test_heuristic_picks_winograd_where_it_won(monkeypatch, mode):
    if mode != "winograd":
        pytest.skip("the heuristic's choice, once")
    from compiler.lowering.conv_lowering import choose_conv_lowering, winograd_wins
    from compiler.stages import CompileOptions
    from compiler.targets import get_target

    assert winograd_wins(256, 32, 64, 784) and not winograd_wins(256, 16, 16, 12544)
    assert winograd_wins(512, 24, 24, 3136) and winograd_wins(512, 32, 64, 784)
    assert not winograd_wins(512, 16, 16, 12544) and not winograd_wins(512, 64, 64, 1)
    assert not winograd_wins(128, 256, 256, 3136)  # no packed kernel to compare with
    # F(4x4) on outputs of 32 tiles of 4x4 or more, else F(2x2) (14x14: 16 tiles)
    for hw, want_mode in (((56, 56), "winograd4"), ((28, 28), "winograd4"), ((14, 14), "winograd"),
                          ((24, 24), "winograd4"), ((20, 20), "winograd"), ((16, 12), "winograd"),
                          ((8, 8), "winograd"), ((28, 30), "winograd4")):
        assert choose_conv_lowering(1, 64, 64, 1, hw, (3, 3), packed=True,
                                    winograd_bits=256) == want_mode, hw
    assert choose_conv_lowering(1, 64, 64, 1, (56, 56), (3, 3), packed=True) == "packed"
    # from 16 tiles (the cpu target's winograd4_rule on AMD cores): 14x14 too, not 8x8
    for hw, want_mode in (((14, 14), "winograd4"), ((16, 12), "winograd"), ((8, 8), "winograd")):
        assert choose_conv_lowering(1, 64, 64, 1, hw, (3, 3), packed=True, winograd_bits=256,
                                    winograd4_min_tiles=16) == want_mode, hw
    # the cpu target passes its vector width to tensor-to-linalg; the cuda one none
    for target, cpu, bits in (("cpu", "x86-64-v3", 256), ("cpu", "skylake-avx512", 512),
                              ("cuda", None, 0)):
        stages = get_target(target).pipeline(CompileOptions(target=target, target_cpu=cpu))
        t2l = next(p for _, passes in stages for p in passes if p.name == "tensor-to-linalg")
        assert t2l.conv_vector_bits == bits, (target, cpu)
    for cpu, tiles in (("x86-64-v3", 32), ("haswell", 32), ("sapphirerapids", 32),
                       ("znver3", 16), ("znver4", 16)):
        stages = get_target("cpu").pipeline(CompileOptions(target="cpu", target_cpu=cpu))
        t2l = next(p for _, passes in stages for p in passes if p.name == "tensor-to-linalg")
        assert t2l.conv_winograd4_min_tiles == tiles, cpu
    # by default (no lowering asked for) on an AVX2 target: Winograd from 24 channels, and
    # AICC_CONV_WINOGRAD=0 keeps the heuristic off it
    monkeypatch.delenv("AICC_CONV_LOWERING")
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 32, 8, 8)
    want = model.double()(x.double()).detach().numpy()
    model.float()
    m = compiler.compile(model, (x,), threads=1, target_cpu="x86-64-v3")
    assert m.ir("linalg").count('aicc.conv_lowering = "winograd"') == 1
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-5 * math.sqrt(9 * 32))
    # 10x10 tiles of 4x4: F(4x4), its input transform vectorized 4 lanes wide
    x40 = torch.randn(1, 32, 40, 40)
    want40 = model.double()(x40.double()).detach().numpy()
    model.float()
    m = compiler.compile(model, (x40,), threads=1, target_cpu="x86-64-v3")
    assert m.ir("linalg").count('aicc.conv_lowering = "winograd4"') == 1
    assert m.ir("loops").count("aicc.vectorize = 4 : i64") == 1
    assert '!"llvm.loop.vectorize.width", i32 4' in m.ir("llvm")
    np.testing.assert_allclose(m(x40.numpy()), want40, rtol=1e-4, atol=1e-5 * math.sqrt(9 * 32))
    monkeypatch.setenv("AICC_CONV_WINOGRAD", "0")
    m = compiler.compile(model, (x,), threads=1, target_cpu="x86-64-v3")
    assert "winograd" not in m.ir("linalg") and "aicc_cpu.conv_kernel" in m.ir("loops")


@pytest.mark.parametrize("interleave_in_place", [False, True], ids=["planes", "interleaved"])
def test_winograd4_output_transform_writes_in_place(monkeypatch, mode, interleave_in_place):
    """forward-copies: F(4x4)'s output transform writes its 16 planes into their slices of
    the planes buffer (no plane buffers, no 16 copies); where the planes pass the target's
    L2 (forced here: 1 byte) it writes the output's interleaved view, and the interleave copy
    is gone too. Same numbers either way."""
    if mode != "winograd4":
        pytest.skip("F(4x4, 3x3) only")
    from compiler.lowering import forward_copies

    if interleave_in_place:
        apply = forward_copies.ForwardCopies.apply
        monkeypatch.setattr(forward_copies.ForwardCopies, "apply",
                            lambda self, ctx, op: apply(forward_copies.ForwardCopies(1), ctx, op))
    torch.manual_seed(2)
    n, ic, oc = 2, 8, 16
    model = torch.nn.Sequential(torch.nn.Conv2d(ic, oc, 3, padding=1), torch.nn.ReLU()).eval()
    m = _check(model, torch.randn(n, ic, 12, 12), ic)
    buffers = re.findall(r"memref\.view .* to (memref<.*>)", m.ir("memref"))
    # the (N, OC, TH, TW) planes never get buffers of their own, nor the 4 x 4 planes tensor
    # where the interleave is in place
    assert "memref<2x16x3x3xf32>" not in buffers, buffers
    assert ("memref<4x4x2x16x3x3xf32>" in buffers) != interleave_in_place, buffers
