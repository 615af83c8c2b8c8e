"""The packed convolution (compiler/targets/cpu/tile_conv.py, aicc_cpu.conv_kernel) against
torch in float64, on odd shapes: batch 1 to 3, 3/5/7/16/129 input channels, 13/17/24/33/64/129
output channels (edges of the vw-wide channel blocks), 1x1 to 23x19 images, 3x3, 5x3 and 7x7
kernels, strides 1 and 2 (also per axis), dilation 2, padding, bias, and ReLU / residual
blocks around it, each with vw = 8 (AVX2) and vw = 16 (AVX-512: LLVM splits the vectors on
an AVX2 host, so both run anywhere). Tolerance: rtol=1e-4, atol=1e-5*sqrt(K) for sums of
K = IC*KH*KW products.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from xdsl.utils.exceptions import VerifyException

import compiler
from compiler.errors import CompileError
from compiler.lowering.conv_lowering import choose_conv_lowering
from compiler.targets.cpu.schedule import choose_conv_schedule
from compiler.targets.cpu.tile_conv import nhwc_stride
from test_conv_lowering import conv_module, inputs, want_of
from test_runtime_cpu import kernel_loop_is_parallel
from compiler.pipeline import compile_module


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "0")


# The heuristic takes the packed kernel on AVX2 targets (where it was measured): the tests of
# its default choice compile for one, which runs on any x86-64 host with AVX2.
AVX2 = "x86-64-v3"

CASES = [
    # n, ic, oc, (h, w), kernel, stride, pad, dilation, bias
    (1, 3, 64, (23, 19), (7, 7), (2, 2), (3, 3), (1, 1), True),  # a stem
    (2, 7, 13, (9, 11), (3, 3), (1, 1), (1, 1), (1, 1), True),  # 13 channels: one short block
    (1, 129, 24, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), False),
    (3, 5, 33, (13, 9), (5, 3), (2, 1), (2, 1), (1, 1), True),
    (1, 16, 17, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1), True),  # 1x1 image, all but one tap padding
    (1, 4, 16, (12, 12), (3, 3), (1, 1), (2, 2), (2, 2), False),  # dilation 2
    (2, 8, 129, (6, 5), (3, 3), (2, 2), (1, 1), (1, 1), True),
]


def _check(m, x, want, k):
    got = m(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * math.sqrt(k))


def _compile_packed(monkeypatch, conv, x, vw, schedule=""):
    """`conv` compiled with the packed lowering forced at vector width `vw` (and any other
    `schedule` fields): (the model, its loop IR, torch's result in float64)."""
    monkeypatch.setenv("AICC_CONV_LOWERING", "packed")
    monkeypatch.setenv("AICC_CONV_SCHEDULE", f"vw={vw}" + schedule)
    m = compiler.compile(conv, (x,), threads=1)
    return m, m.ir("loops"), copy.deepcopy(conv).double()(x.double()).detach().numpy()


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_packed_conv_matches_torch(monkeypatch, case, vw):
    n, ic, oc, hw, k, s, p, d, bias = case
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(ic, oc, k, stride=s, padding=p, dilation=d, bias=bias).eval()
    x = torch.randn(n, ic, *hw)
    m, loops, want = _compile_packed(monkeypatch, conv, x, vw)
    assert "aicc_cpu.conv_kernel" in loops and f"vw = {vw} : i64" in loops
    assert 'aicc.conv_lowering = "packed"' in m.ir("linalg")
    memref_ir = m.ir("memref")  # the weight packed at compile time, the original dropped
    assert f"_packed{vw} : memref<{-(-oc // vw) * vw * ic * k[0] * k[1]}xf32>" in memref_ir
    assert f"memref<{oc}x{ic}x" not in memref_ir
    _check(m, x.numpy(), want, ic * k[0] * k[1])


class _Block(torch.nn.Module):
    """conv-bn-relu, conv-bn, + the input, relu: a ResNet basic block."""

    def __init__(self, c):
        super().__init__()
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(c)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_resnet_block(monkeypatch, threads):
    """With the heuristic's own choice on an AVX2 target (packed for these 3x3 convs of 24
    channels) the block
    matches torch, the batch norms folded into the convs and the parallel loops on threads."""
    monkeypatch.delenv("AICC_CONV_LOWERING", raising=False)
    torch.manual_seed(1)
    block = _Block(24).eval()
    for bn in (block.b1, block.b2):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 24, 13, 11)
    m = compiler.compile(block, (x,), threads=threads, target_cpu=AVX2)
    assert m.ir("loops").count("aicc_cpu.conv_kernel") >= 2
    want = copy.deepcopy(block).double()(x.double()).detach().numpy()
    _check(m, x.numpy(), want, 24 * 9 * 2)


def test_kill_switch_and_override(monkeypatch):
    """AICC_CONV_PACKED=0 keeps the old choice (im2col); AICC_CONV_SCHEDULE fixes the tile."""
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(16, 32, 3, padding=1).eval()
    x = torch.randn(1, 16, 14, 14)
    want = copy.deepcopy(conv).double()(x.double()).detach().numpy()
    monkeypatch.setenv("AICC_CONV_PACKED", "0")
    m = compiler.compile(conv, (x,), threads=1, target_cpu=AVX2)
    assert "aicc_cpu.conv_kernel" not in m.ir("loops")
    assert 'aicc.conv_lowering = "im2col"' in m.ir("linalg")
    _check(m, x.numpy(), want, 16 * 9)
    monkeypatch.delenv("AICC_CONV_PACKED")
    monkeypatch.setenv("AICC_CONV_SCHEDULE", "owb=3,ocv=1")
    m = compiler.compile(conv, (x,), threads=1, target_cpu=AVX2)
    assert "owb = 3 : i64, ocv = 1 : i64" in m.ir("loops")
    _check(m, x.numpy(), want, 16 * 9)
    monkeypatch.setenv("AICC_CONV_SCHEDULE", "owb=0")
    with pytest.raises(CompileError, match="conv schedule 'owb=0'"):
        compiler.compile(conv, (x,), threads=1, target_cpu=AVX2)


@pytest.mark.parametrize("xs, ws, groups, pads", [
    ((2, 3, 9, 7), (17, 3, 3, 3), 1, (1, 1, 1, 1)),  # 17 channels: the last vector padded
    ((1, 8, 6, 5), (24, 4, 3, 3), 2, (1, 1, 1, 1)),  # two groups of 12
    ((2, 40, 7, 7), (24, 40, 1, 1), 1, (0, 0, 0, 0)),  # 1x1 at 7x7: the nhwc input copy too
])
def test_weight_known_only_at_run_time_is_packed_before_the_conv(xs, ws, groups, pads):
    """A weight that is an argument is packed by a loop nest before the conv (into a
    temporary), the zeros past each group's last channel vector included, and the conv runs
    the packed kernel on it. (Code for AVX2, whose pointwise convs at 7x7 always take the
    nhwc copy, whatever the host.)"""
    from compiler.stages import CompileOptions

    x, w, b = inputs(xs, ws)
    m = compile_module(conv_module(x, w, b, (1, 1), (1, 1), groups, pads, True, "packed"), "main",
                       options=CompileOptions(target="cpu", target_cpu=AVX2))
    loops = m.ir("loops")
    assert "aicc_cpu.conv_kernel" in loops
    assert ("nhwc = 1" in m.ir("linalg")) == (ws[2:] == (1, 1))
    want = want_of(x, w, b, (1, 1), (1, 1), groups, pads, True)
    np.testing.assert_allclose(m(x, w, b), want, rtol=1e-4, atol=1e-4)
    w2 = -w[::-1].copy()  # the pack runs per call: another weight, another result
    np.testing.assert_allclose(m(x, w2, b), want_of(x, w2, b, (1, 1), (1, 1), groups, pads, True),
                               rtol=1e-4, atol=1e-4)


def test_heuristic_picks_packed_only_where_the_target_has_it():
    assert choose_conv_lowering(1, 3, 64, 1, (112, 112), (7, 7), (2, 2), packed=True) == "packed"
    assert choose_conv_lowering(1, 64, 64, 1, (56, 56), (3, 3), packed=True) == "packed"
    assert choose_conv_lowering(1, 256, 512, 1, (7, 7), (3, 3), (2, 2), packed=True) == "packed"
    assert choose_conv_lowering(1, 64, 64, 1, (56, 56), (3, 3)) == "im2col"  # no kernel
    assert choose_conv_lowering(1, 64, 256, 1, (56, 56), (1, 1), packed=True) == "matmul"
    assert choose_conv_lowering(1, 64, 128, 1, (28, 28), (1, 1), (2, 2), packed=True) == "im2col"
    assert choose_conv_lowering(1, 128, 128, 4, (28, 28), (3, 3), packed=True) == "packed"  # groups
    assert choose_conv_lowering(1, 16, 16, 4, (28, 28), (3, 3), (2, 2), packed=True) == "im2col"  # 4 a group
    assert choose_conv_lowering(1, 64, 8, 1, (56, 56), (3, 3), packed=True) == "direct"
    # 1x1 convs of one group: packed on small images (narrowing ones up to 16x16, and on any
    # image when they narrow to 128 channels or fewer)
    assert choose_conv_lowering(1, 192, 1152, 1, (7, 7), (1, 1), packed=True) == "packed"
    assert choose_conv_lowering(1, 2048, 512, 1, (8, 8), (1, 1), packed=True) == "packed"
    assert choose_conv_lowering(1, 1024, 256, 1, (14, 14), (1, 1), packed=True) == "packed"
    assert choose_conv_lowering(1, 256, 1024, 1, (14, 14), (1, 1), packed=True) == "matmul"
    assert choose_conv_lowering(1, 512, 128, 1, (28, 28), (1, 1), packed=True) == "packed"
    assert choose_conv_lowering(1, 32, 16, 1, (112, 112), (1, 1), packed=True) == "packed"
    assert choose_conv_lowering(1, 256, 64, 1, (56, 56), (1, 1), packed=True) == "packed"
    assert choose_conv_lowering(1, 1024, 512, 1, (28, 28), (1, 1), packed=True) == "matmul"
    assert choose_conv_lowering(1, 128, 128, 1, (28, 28), (1, 1), packed=True) == "matmul"
    assert choose_conv_lowering(1, 192, 1152, 1, (7, 7), (1, 1)) == "matmul"  # no kernel
    assert choose_conv_lowering(1, 192, 8, 1, (7, 7), (1, 1), packed=True) == "matmul"  # 8 channels
    assert choose_conv_lowering(1, 192, 384, 2, (7, 7), (1, 1), packed=True) == "matmul"  # groups
    # strided ones too (resnet's downsampling shortcuts), else an im2col copy and a matmul
    assert choose_conv_lowering(1, 192, 384, 1, (7, 7), (1, 1), (2, 2), packed=True) == "packed"
    assert choose_conv_lowering(1, 512, 1024, 1, (14, 14), (1, 1), (2, 2), packed=True) == "im2col"
    assert choose_conv_lowering(1, 1024, 512, 1, (14, 14), (1, 1), (2, 2), packed=True) == "packed"


# 1x1 convs on the packed kernel, the image as one row of H*W columns: n, ic, oc, (h, w), bias
POINTWISE = [
    (1, 192, 1152 // 8, (7, 7), True),  # efficientnet's last stage, narrowed
    (2, 129, 24, (7, 7), False),  # batch 2, one short block of channels
    (2, 64, 40, (7, 7), True),  # batch 2, the copy's columns padded (64 -> 80 floats apart)
    (1, 40, 17, (13, 11), True),  # narrowing on a non-square image of 143 pixels
    (1, 7, 33, (1, 1), True),  # a 1x1 image
    (3, 16, 16, (3, 5), False),
]


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_packed_conv_reading_an_nhwc_copy_matches_torch(monkeypatch, case, vw):
    """`nhwc` on a KxK conv (nhwc_kxk_rule: the strided and small-image convs of a ResNet's
    late stages): the kernels read the input as [N][Hp][Wp][IC] (the padding's
    copy writing that layout where there is one), strided, dilated, batched, a 1x1 image;
    the results are unchanged."""
    n, ic, oc, hw, k, s, p, d, bias = case
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(ic, oc, k, stride=s, padding=p, dilation=d, bias=bias).eval()
    x = torch.randn(n, ic, *hw)
    m, loops, want = _compile_packed(monkeypatch, conv, x, vw, ",nhwc=1")
    assert "x_cs = 1 : i64" in loops
    if p != (0, 0):  # the padding's copy writes the NHWC layout: no padded NCHW buffer
        padded = f"{ic}x{hw[0] + 2 * p[0]}x{hw[1] + 2 * p[1]}xf32"
        assert padded not in m.ir("loops"), padded
    _check(m, x.numpy(), want, ic * k[0] * k[1])


@pytest.mark.parametrize("nhwc", [0, 1])
@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", POINTWISE, ids=str)
def test_packed_pointwise_conv_matches_torch(case, vw, nhwc, monkeypatch):
    n, ic, oc, hw, bias = case
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(ic, oc, 1, bias=bias).eval()
    block = torch.nn.Sequential(conv, torch.nn.ReLU()).eval()
    x = torch.randn(n, ic, *hw)
    monkeypatch.setenv("AICC_CONV_SCHEDULE", f"vw={vw},nhwc={nhwc}")
    m = compiler.compile(block, (x,), threads=1, target_cpu=AVX2)
    loops = m.ir("loops")
    assert "aicc_cpu.conv_kernel" in loops and "relu" in loops
    if nhwc:  # the [N][W][IC] copy: a column's channels contiguous, columns IC apart (one
        # 64-byte line more where IC floats are an even count of lines: 192 -> 208, 16 stays)
        stride = nhwc_stride(ic)
        assert stride == {192: 208, 64: 80}.get(ic, ic)
        assert "x_cs = 1 : i64, x_rs = 1 : i64, w_ocs" in loops and f"sw = {stride} : i64" in loops
    else:  # one row of h*w output columns: the kernel's x_rs (row stride) is the whole image
        assert f"x_rs = {hw[0] * hw[1]} : i64" in loops, loops
    want = block.double()(x.double()).detach().numpy()
    _check(m, x.numpy(), want, ic)
    monkeypatch.setenv("AICC_CONV_PACKED_1X1", "0")  # the A/B switch: a matmul again
    m = compiler.compile(block.float(), (x,), threads=1, target_cpu=AVX2)
    assert "aicc_cpu.conv_kernel" not in m.ir("loops")
    _check(m, x.numpy(), want, ic)


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", [(1, 64, 48, (13, 13), (2, 2)), (2, 24, 17, (8, 15), (2, 3)),
                                  (1, 33, 16, (1, 1), (2, 2))], ids=str)
def test_packed_strided_pointwise_conv_matches_torch(case, vw, monkeypatch):
    """A strided 1x1 conv on a small image (a downsampling shortcut) takes the packed kernel,
    which reads the input at its stride; the A/B switch gives it an im2col copy again."""
    n, ic, oc, hw, s = case
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(ic, oc, 1, stride=s).eval()
    x = torch.randn(n, ic, *hw)
    monkeypatch.setenv("AICC_CONV_SCHEDULE", f"vw={vw}")
    m = compiler.compile(conv, (x,), threads=1, target_cpu=AVX2)
    assert f"sw = {s[1]} : i64" in m.ir("loops") and "aicc_cpu.conv_kernel" in m.ir("loops")
    want = copy.deepcopy(conv).double()(x.double()).detach().numpy()
    _check(m, x.numpy(), want, ic)
    monkeypatch.setenv("AICC_CONV_PACKED_1X1", "0")
    m = compiler.compile(conv, (x,), threads=1, target_cpu=AVX2)
    assert "aicc_cpu.conv_kernel" not in m.ir("loops")
    _check(m, x.numpy(), want, ic)


@pytest.mark.parametrize("pf", [1, 16, 64])
@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[6]], ids=str)
def test_packed_conv_with_weight_prefetch_matches_torch(monkeypatch, case, vw, pf):
    """The schedule's `pf` (conv_prefetch_rule: Intel cores with AVX-512) prefetches the
    weight streams pf channels ahead, past the weight's end on the last channels (which a
    prefetch never faults on): the kernels carry it, and the results are unchanged."""
    n, ic, oc, hw, k, s, p, d, bias = case
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(ic, oc, k, stride=s, padding=p, dilation=d, bias=bias).eval()
    x = torch.randn(n, ic, *hw)
    m, loops, want = _compile_packed(monkeypatch, conv, x, vw, f",pf={pf}")
    assert f"pf = {pf} : i64" in loops and "llvm.prefetch" in m.ir("llvm")
    _check(m, x.numpy(), want, ic * k[0] * k[1])


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[3], CASES[6]], ids=str)
def test_packed_conv_with_l2_prefetch_matches_torch(monkeypatch, case, vw):
    """The schedule's `l2pf` (conv_l2_prefetch_rule): each kernel call fetches its
    share of the next block of output channels' weights into L2, past the weight's end from
    the last block; the kernels of a constant weight with four input channels or more carry
    it, and the results are unchanged."""
    n, ic, oc, hw, k, s, p, d, bias = case
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(ic, oc, k, stride=s, padding=p, dilation=d, bias=bias).eval()
    x = torch.randn(n, ic, *hw)
    m, loops, want = _compile_packed(monkeypatch, conv, x, vw, ",l2pf=1")
    assert ("l2pf_rate" in loops) == (ic >= 4), loops.count("l2pf_rate")
    _check(m, x.numpy(), want, ic * k[0] * k[1])


@pytest.mark.parametrize("case", [(1, 40, 16, (9, 13)), (2, 64, 24, (7, 7)), (1, 129, 32, (1, 7)),
                                  (1, 96, 24, (28, 28))], ids=str)
def test_pointwise_rule_of_the_machine_matches_torch(case, monkeypatch):
    """Unstrided 1x1 convs that narrow: the packed kernel for a generic AVX2 CPU (x86-64-v3,
    the rules measured on AMD's cores), under AICC_CONV_PACKED_1X1=small only up to 64
    pixels, and for none under AICC_CONV_PACKED_1X1=none or on an Intel core (haswell:
    packed_1x1_rule "none"): the matmul then. Every variant matches torch (float64)."""
    n, ic, oc, hw = case
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Conv2d(ic, oc, 1), torch.nn.ReLU()).eval()
    x = torch.randn(n, ic, *hw)
    want = copy.deepcopy(block).double()(x.double()).detach().numpy()
    small = hw[0] * hw[1] <= 64
    for cpu, env, packed in ((AVX2, None, True), (AVX2, "small", small), ("haswell", None, False),
                             (AVX2, "none", False)):
        if env is None:
            monkeypatch.delenv("AICC_CONV_PACKED_1X1", raising=False)
        else:
            monkeypatch.setenv("AICC_CONV_PACKED_1X1", env)
        m = compiler.compile(block, (x,), threads=1, target_cpu=cpu)
        assert ("aicc_cpu.conv_kernel" in m.ir("loops")) == packed, (cpu, env)
        _check(m, x.numpy(), want, ic)


@pytest.mark.parametrize("bits,regs", [(256, 16), (512, 32)])
def test_conv_schedule_fits_the_register_file(bits, regs):
    """vw from the target's vector width (8 on AVX-512 too for 8 channels or fewer, half a
    16-lane vector); accumulators + weight vectors + one broadcast fit the registers, for
    every output width and channel count."""
    for ow in (1, 2, 5, 7, 13, 14, 28, 56, 112):
        for oc in (1, 8, 13, 16, 24, 64, 129):
            s = choose_conv_schedule(bits, ow, oc)
            assert s["vw"] == (8 if bits >= 512 and oc <= 8 else bits // 32)
            assert 1 <= s["owb"] <= ow
            assert s["owb"] * s["ocv"] + s["ocv"] + 1 <= regs, (ow, oc, s)
            assert s["ocv"] <= -(-oc // s["vw"])
    assert choose_conv_schedule(256, 56, 64) == {"vw": 8, "owb": 4, "ocv": 3}
    assert choose_conv_schedule(256, 56, 64, fixed={"owb": 6, "ocv": 2}) == {
        "vw": 8, "owb": 6, "ocv": 2}
    # a short reduction (a stem: 3 x 3 x 3 products) takes at most 8 columns with AVX-512
    assert choose_conv_schedule(512, 112, 32) == {"vw": 16, "owb": 14, "ocv": 2}
    assert choose_conv_schedule(512, 112, 32, k=27) == {"vw": 16, "owb": 8, "ocv": 2}
    assert choose_conv_schedule(512, 112, 64, k=147) == {"vw": 16, "owb": 8, "ocv": 3}
    assert choose_conv_schedule(512, 112, 32, k=576) == {"vw": 16, "owb": 14, "ocv": 2}
    assert choose_conv_schedule(256, 112, 32, k=27) == choose_conv_schedule(256, 112, 32)


def test_pointwise_convs_on_small_images_take_the_nhwc_copy_by_vector_width():
    """A 1x1 conv on a 7x7 image reads an [N][W][IC] copy of its input: always with 256-bit
    vectors, with 512-bit ones only where IC * OC reaches NHWC_WIDE_MIN_WEIGHTS; never on an
    image whose row is a multiple of 16 pixels, nor on a conv that is not pointwise."""
    def nhwc(bits, ow, ic, oc, pointwise=True):
        return choose_conv_schedule(bits, ow, oc, k=ic, pointwise=pointwise).get("nhwc", 0)

    assert nhwc(256, 49, 1152, 192) == nhwc(256, 49, 192, 1152) == 1
    assert nhwc(512, 49, 1152, 192) == nhwc(512, 49, 672, 192) == nhwc(512, 49, 192, 1152) == 0
    assert nhwc(512, 49, 2048, 512) == nhwc(512, 49, 512, 2048) == 1
    assert nhwc(256, 64, 256, 256) == nhwc(512, 64, 2048, 512) == 0  # 8x8: rows of 64 floats
    assert nhwc(256, 49, 1152, 192, pointwise=False) == 0
    assert choose_conv_schedule(512, 49, 192, k=1152, pointwise=True,
                                fixed={"nhwc": 1})["nhwc"] == 1  # a fixed field is kept


def test_conv_kernel_verifier():
    from xdsl.dialects.builtin import Float32Type, IndexType, MemRefType
    from xdsl.ir import Block

    from compiler.dialects.aicc_cpu import ConvKernelOp

    blk = Block(arg_types=[MemRefType(Float32Type(), [64]), IndexType()])
    m, i = blk.args
    ints = dict(owb=4, ocv=2, vw=8, ic=3, kh=3, kw=3, sw=1, dh=1, dw=1, x_cs=9, x_rs=3,
                w_ocs=216, o_cs=16)
    ConvKernelOp(m, i, m, i, m, i, ocn=13, **ints).verify()
    with pytest.raises(VerifyException, match="ocn = 17 channels do not fill"):
        ConvKernelOp(m, i, m, i, m, i, ocn=17, **ints).verify()
    with pytest.raises(VerifyException, match="ocn = 8 channels do not fill"):
        ConvKernelOp(m, i, m, i, m, i, ocn=8, **ints).verify()


# Activations that the kernels apply in their `epilogue` region (any function of the output
# alone), with the ops the region holds (SiLU's x * (1 / d) is x / d after fuse-elementwise).
REGION_ACTS = {
    "silu": (torch.nn.functional.silu, "arith.negf,math.exp,arith.addf,arith.divf"),
    "hardswish": (torch.nn.functional.hardswish, None),
    "sigmoid": (torch.sigmoid, "arith.negf,math.exp,arith.addf,arith.divf"),
    "gelu": (torch.nn.functional.gelu, None),
}


class _Epilogue(torch.nn.Module):
    """conv + bias, then relu(.), . + r, relu(. + r), an activation of REGION_ACTS or a second
    use of the conv's output."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.conv = torch.nn.Conv2d(5, 19, 3, padding=1)

    def forward(self, x, r):
        y = self.conv(x)
        if self.kind == "relu":
            return torch.relu(y)
        if self.kind == "add":
            return y + r
        if self.kind == "add_relu":
            return torch.relu(r + y)
        if self.kind in REGION_ACTS:
            return REGION_ACTS[self.kind][0](y)
        return torch.relu(y) + y * r  # two readers: no epilogue


@pytest.mark.parametrize("kind,fused", [("relu", "arith.maximumf"), ("add", "arith.addf"),
                                        ("add_relu", "arith.addf,arith.maximumf"),
                                        ("two_uses", None),
                                        *((k, v[1] or True) for k, v in REGION_ACTS.items())])
def test_packed_epilogues(kind, fused):
    """The elementwise op after the conv runs in the kernels (recorded as the conv loop's
    epilogue) when it is the output's only reader: relu and the residual add as the kernels'
    own steps, any other function of the output (SiLU, hardswish, sigmoid, GELU) as their
    epilogue region. The result matches torch either way (x * 3: hardswish's and GELU's
    pieces all reached)."""
    torch.manual_seed(3)
    mod = _Epilogue(kind).eval()
    x, r = torch.randn(2, 5, 7, 13) * 3, torch.randn(2, 19, 7, 13)
    m = compiler.compile(mod, (x, r), threads=1, target_cpu=AVX2)
    loops = m.ir("loops")
    assert "aicc_cpu.conv_kernel" in loops
    if fused:
        assert "epilogue = " in loops and (fused is True or f'epilogue = "{fused}"' in loops)
        assert ("res %" in loops) == ("add" in kind)
        assert ("aicc_cpu.yield" in loops) == (kind in REGION_ACTS)
    else:
        assert "epilogue" not in loops
    want = copy.deepcopy(mod).double()(x.double(), r.double()).detach().numpy()
    np.testing.assert_allclose(m(x.numpy(), r.numpy()), want, rtol=1e-4, atol=1e-4)


def test_default_on_avx2_and_avx512_targets():
    """The cpu target's tensor-to-linalg offers the kernel to the heuristic for AVX2 and
    AVX-512 targets (timed on both), not for a 128-bit one."""
    from compiler.stages import CompileOptions
    from compiler.targets import get_target

    cpu = get_target("cpu")
    for name, want in (("x86-64-v3", True), ("skylake-avx512", True), ("x86-64-v2", False)):
        stages = cpu.pipeline(CompileOptions(target="cpu", target_cpu=name))
        t2l = next(p for _, passes in stages for p in passes if p.name == "tensor-to-linalg")
        assert t2l.conv_packed is want, name


def test_float64_convs_keep_im2col():
    """The kernel is f32: a float64 conv with a constant weight keeps the matmul path by
    default (a forced packed would run the direct loop)."""
    from compiler.dialects import aicc, aicc_nn
    from compiler.pipeline import CompileOptions
    from test_conv_lowering import np_conv2d
    from test_nn_ops import build, rand

    x = rand(1, 16, 9, 9, dtype=np.float64)
    w = rand(32, 16, 3, 3, seed=1, dtype=np.float64)

    def body(bld, xv):
        wv = bld.insert(aicc.ConstantOp.from_array(w)).result
        return bld.insert(aicc_nn.Conv2dOp(xv, wv)).result

    m = compile_module(build([x], body), "main", options=CompileOptions(target_cpu=AVX2))
    assert 'aicc.conv_lowering = "im2col"' in m.ir("linalg")
    np.testing.assert_allclose(m(x), np_conv2d(x, w, (1, 1), (1, 1), 1), rtol=1e-12, atol=1e-12)


def test_packed_residual_in_place():
    """relu(conv(x) + r) where bufferize may write the result over r: the kernels read each
    residual element before writing it."""
    from compiler.dialects import aicc, aicc_nn
    from compiler.lowering.nn_to_linalg import CONV_LOWERING_ATTR
    from xdsl.dialects.builtin import StringAttr
    from test_conv_lowering import np_conv2d
    from test_nn_ops import build, rand

    x, r = rand(1, 3, 9, 9), rand(1, 17, 7, 7, seed=2)
    w = rand(17, 3, 3, 3, seed=1)

    def body(bld, xv, rv):
        wv = bld.insert(aicc.ConstantOp.from_array(w)).result
        conv = bld.insert(aicc_nn.Conv2dOp(xv, wv))
        conv.attributes[CONV_LOWERING_ATTR] = StringAttr("packed")
        s = bld.insert(aicc.AddOp(conv.result, rv)).result
        return bld.insert(aicc.ReluOp(s)).result

    m = compile_module(build([x, r], body), "main")
    assert "res %" in m.ir("loops")
    want = np.maximum(np_conv2d(x, w, (1, 1), (1, 1), 1) + r, 0)
    np.testing.assert_allclose(m(x, r), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- depthwise (aicc_cpu.dw_kernel)

DW_CASES = [
    # n, channels, (h, w), kernel, stride, pad, dilation, bias
    (1, 7, (14, 14), (3, 3), (1, 1), (1, 1), (1, 1), True),  # 14 columns: a full vector + 6
    (2, 16, (7, 7), (5, 5), (1, 1), (2, 2), (1, 1), True),  # one partial vector per row
    (1, 3, (23, 19), (3, 3), (2, 2), (1, 1), (1, 1), False),  # stride 2: rows split even / odd
    (1, 6, (14, 14), (5, 5), (2, 2), (2, 2), (1, 1), True),  # 5x5 stride 2: taps moved 2 lanes
    (1, 3, (9, 20), (2, 2), (2, 2), (0, 0), (1, 1), True),  # 2x2 stride 2: no third load
    (1, 2, (15, 37), (7, 7), (2, 2), (3, 3), (1, 1), False),  # 7x7 stride 2: 19 columns
    (1, 2, (13, 13), (3, 3), (2, 2), (2, 2), (2, 2), True),  # stride 2, dilation 2: element loads
    (1, 9, (56, 57), (3, 3), (2, 2), (1, 1), (1, 1), True),  # 29 columns
    (3, 2, (9, 11), (5, 3), (2, 1), (2, 1), (1, 1), True),  # per-axis strides, 5x3 kernel
    (1, 5, (12, 13), (3, 3), (1, 1), (2, 2), (2, 2), False),  # dilation 2
    (1, 4, (10, 17), (3, 3), (3, 3), (1, 1), (1, 1), True),  # stride 3: element loads
    (1, 129, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1), True),  # 1x1 image, all but one tap padding
    (1, 8, (40, 112), (7, 7), (1, 1), (3, 3), (1, 1), True),  # 112 columns: 4 calls a row
    # stride 1, as wide as the input: a plane in one row (plane = 1, the default)
    (1, 11, (7, 7), (5, 5), (1, 1), (2, 2), (1, 1), True),  # 49 pixels: one call
    (2, 3, (28, 28), (3, 3), (1, 1), (1, 1), (1, 1), True),  # 784: calls sharing masks
    (1, 4, (13, 5), (3, 5), (1, 1), (1, 2), (1, 1), False),  # 3x5 kernel, 13x5 plane
    (1, 2, (1, 17), (3, 3), (1, 1), (1, 1), (1, 1), True),  # one row
    (1, 3, (9, 1), (3, 3), (1, 1), (1, 1), (1, 1), True),  # one column
    (1, 2, (11, 10), (3, 3), (1, 1), (2, 2), (2, 2), True),  # dilation 2
    (1, 2, (6, 8), (3, 3), (1, 1), (0, 1), (1, 1), True),  # rows unpadded: 4 x 8
    (1, 2, (6, 8), (3, 3), (1, 1), (1, 0), (1, 1), True),  # narrower output: by rows
]


def _plane_applies(hw, k, s, p, d) -> bool:
    """Is a depthwise conv's output as wide as its input, at stride 1 (plane = 1 applies)?"""
    return s == (1, 1) and 2 * p[1] == d[1] * (k[1] - 1) and p != (0, 0)


@pytest.mark.parametrize("plane", [0, 1])
@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", DW_CASES, ids=str)
def test_depthwise_conv_matches_torch(monkeypatch, case, vw, plane):
    n, c, hw, k, s, p, d, bias = case
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(c, c, k, stride=s, padding=p, dilation=d, groups=c, bias=bias).eval()
    x = torch.randn(n, c, *hw)
    m, loops, want = _compile_packed(monkeypatch, conv, x, vw, f",plane={plane}")
    assert "aicc_cpu.dw_kernel" in loops and f"vw = {vw} : i64" in loops
    assert "aicc_cpu.conv_kernel" not in loops
    assert ("x_h = " in loops) == (plane == 1 and _plane_applies(hw, k, s, p, d))
    _check(m, x.numpy(), want, k[0] * k[1])


class _DwBlock(torch.nn.Module):
    """A MobileNet-style depthwise conv, batch norm, then an activation, added to the input."""

    def __init__(self, c, act):
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn = torch.nn.BatchNorm2d(c)
        self.act = act

    def forward(self, x):
        y = self.bn(self.dw(x))
        if self.act == "relu":
            return torch.relu(y)
        if self.act == "relu6":
            return torch.nn.functional.relu6(y)
        if self.act == "add":
            return y + x
        if self.act in REGION_ACTS:
            return REGION_ACTS[self.act][0](y)
        return torch.relu(y + x)


@pytest.mark.parametrize("act,fused", [("relu", "arith.maximumf"), ("add", "arith.addf"),
                                       ("add_relu", "arith.addf,arith.maximumf"),
                                       ("relu6", "arith.maximumf,arith.minimumf"),
                                       ("silu", REGION_ACTS["silu"][1]),
                                       ("hardswish", "")])
@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_block_folds_bias_and_epilogue(act, fused, threads):
    """On an AVX2 target the heuristic takes the kernel for a depthwise conv with a constant
    weight; batch norm's bias becomes its start and the activation / residual its epilogue."""
    torch.manual_seed(4)
    block = _DwBlock(13, act).eval()
    with torch.no_grad():
        block.bn.running_mean.uniform_(-1, 1)
        block.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 13, 17, 40) * 4  # 5 vectors of columns: calls of 3, then 2
    m = compiler.compile(block, (x,), threads=threads, target_cpu=AVX2)
    loops = m.ir("loops")
    # the padding is read through: no padded copy; the 17 x 40 plane of a channel in 85
    # vectors of 8 pixels, 11 calls of 8 vectors (the last of 5), their loads masked by each
    # lane's row and column
    assert "19x42" not in m.ir("memref") and loops.count("aicc_cpu.dw_kernel") == 11
    assert loops.count("x_w = 40 : i64, x_c0 = -1 : i64, x_h = 17 : i64, x_r0 = -1 : i64") == 11
    assert "cols = 64 : i64, owb = 8 :" in loops and "cols = 40 : i64, owb = 5 :" in loops
    assert f'epilogue = "{fused}' in loops and "start = 2" in loops
    assert ("aicc_cpu.yield" in loops) == (act in REGION_ACTS)
    want = copy.deepcopy(block).double()(x.double()).detach().numpy()
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-4)


def test_depthwise_kernels_share_the_threads():
    """The loop of a depthwise conv's kernel calls is worth threads: its work counts each
    call's vector FMAs (owb x kh x kw), as the conv and matmul kernels count theirs. Counted as
    one op a call, efficientnet_b0's 672 channels at 14x14 (5x5, one call a channel) came to
    fewer ops than a parallel loop needs, and its depthwise convs ran on one thread of two."""
    torch.manual_seed(6)
    conv = torch.nn.Conv2d(672, 672, 5, padding=2, groups=672).eval()
    x = torch.randn(1, 672, 14, 14)
    want = copy.deepcopy(conv).double()(x.double()).detach().numpy()
    for threads in (1, 2):
        m = compiler.compile(conv, (x,), threads=threads, target_cpu=AVX2)
        assert kernel_loop_is_parallel(m, "aicc_cpu.dw_kernel", trips=672)
        np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-4)


def test_depthwise_heuristic_and_schedule():
    from compiler.targets.cpu.schedule import choose_dw_schedule

    assert choose_conv_lowering(1, 96, 96, 96, (14, 14), (5, 5), packed=True) == "packed"
    assert choose_conv_lowering(1, 96, 96, 96, (14, 14), (5, 5)) == "direct"  # no kernel
    assert choose_conv_lowering(1, 96, 192, 96, (14, 14), (3, 3), packed=True) != "packed"  # x2
    # by rows (no height given, a stride 2, or plane = 0 asked for)
    assert choose_dw_schedule(256, 112) == {"vw": 8, "owb": 4, "plane": 0}  # 14 vectors: 4 x 4
    assert choose_dw_schedule(256, 56, oh=56, strides=(2, 2)) == {"vw": 8, "owb": 4, "plane": 0}
    assert choose_dw_schedule(256, 14, {"plane": 0}, oh=14) == {"vw": 8, "owb": 2, "plane": 0}
    # a row in half a vector: 8 lanes, not 16 (AVX2's 8 stay)
    assert choose_dw_schedule(512, 7, oh=7, strides=(1, 2)) == {"vw": 8, "owb": 1, "plane": 0}
    assert choose_dw_schedule(512, 8, oh=8, strides=(2, 2)) == {"vw": 8, "owb": 1, "plane": 0}
    assert choose_dw_schedule(512, 9, oh=9, strides=(2, 2)) == {"vw": 16, "owb": 1, "plane": 0}
    assert choose_dw_schedule(256, 4, oh=4, strides=(2, 2)) == {"vw": 8, "owb": 1, "plane": 0}
    assert choose_dw_schedule(512, 7, {"vw": 16}, oh=7, strides=(2, 2))["vw"] == 16  # asked for
    assert choose_dw_schedule(256, 56, {"owb": 2}) == {"vw": 8, "owb": 2, "plane": 0}
    # stride 1: the plane flattened, calls of up to 8 vectors as even as can be
    assert choose_dw_schedule(512, 7, oh=7) == {"vw": 16, "owb": 4, "plane": 1}  # 49 pixels
    assert choose_dw_schedule(256, 14, oh=14) == {"vw": 8, "owb": 7, "plane": 1}  # 25: 4 calls
    assert choose_dw_schedule(256, 112, {"owb": 3}, oh=2) == {"vw": 8, "owb": 3, "plane": 1}


def test_dw_kernel_verifier():
    from xdsl.dialects.builtin import Float32Type, IndexType, MemRefType
    from xdsl.ir import Block

    from compiler.dialects.aicc_cpu import DwKernelOp

    block = Block(arg_types=[MemRefType(Float32Type(), [64]), IndexType()])
    buf, off = block.args
    ints = dict(cols=20, owb=2, vw=8, kh=3, kw=3, sw=1, dh=1, dw=1, x_rs=16)
    with pytest.raises(VerifyException, match="cols = 20 do not fill owb = 2 vectors of vw = 8"):
        DwKernelOp(buf, off, buf, off, buf, off, **ints).verify()
    with pytest.raises(VerifyException, match="dw_kernel: a residual needs start 1 or 2"):
        DwKernelOp(buf, off, buf, off, buf, off, res=(buf, off), **{**ints, "cols": 16}).verify()
    with pytest.raises(VerifyException, match="clip_hi needs relu"):
        DwKernelOp(buf, off, buf, off, buf, off, clip_hi=6.0, **{**ints, "cols": 16}).verify()
    DwKernelOp(buf, off, buf, off, buf, off, **{**ints, "cols": 16}).verify()
    plane = dict(columns=(16, -1), plane=(4, -1, 0), **{**ints, "cols": 16})
    DwKernelOp(buf, off, buf, off, buf, off, **plane).verify()
    for bad in ({"sw": 2}, {"x_rs": 17}, {"columns": None}, {"plane": (4, -1, -8)}):
        with pytest.raises(VerifyException, match="a plane in one row needs"):
            DwKernelOp(buf, off, buf, off, buf, off, **{**plane, **bad}).verify()


# ---------------------------------------------------------------- grouped (conv_kernel per group)

GROUPED_CASES = [
    # n, ic, oc, groups, (h, w), kernel, stride, pad, bias
    (1, 48, 48, 6, (14, 14), (3, 3), (1, 1), (1, 1), True),  # regnet's 8-channel groups
    (2, 104, 104, 13, (9, 11), (3, 3), (2, 2), (1, 1), True),
    (1, 12, 36, 3, (7, 9), (3, 3), (1, 1), (1, 1), False),  # 4 in, 12 out per group: a short vector
    (3, 10, 16, 2, (6, 5), (5, 3), (1, 2), (2, 1), True),
]


@pytest.mark.parametrize("vw", [8, 16])
@pytest.mark.parametrize("case", GROUPED_CASES, ids=str)
def test_grouped_conv_matches_torch(monkeypatch, case, vw):
    """A grouped conv runs the packed kernel a group at a time (the weight packed per group);
    a per-channel bias is still the kernels' start."""
    n, ic, oc, g, hw, k, s, p, bias = case
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(ic, oc, k, stride=s, padding=p, groups=g, bias=bias).eval()
    x = torch.randn(n, ic, *hw)
    m, loops, want = _compile_packed(monkeypatch, conv, x, vw)
    assert "aicc_cpu.conv_kernel" in loops and f"vw = {vw} : i64" in loops
    assert f"_packed{vw}g{g} : memref<{g * -(-(oc // g) // vw) * vw * (ic // g) * k[0] * k[1]}xf32>" in m.ir("memref")
    assert ("start = 2" in loops) == bias
    _check(m, x.numpy(), want, ic // g * k[0] * k[1])


class _DwAfterIntermediate(torch.nn.Module):
    """A pointwise conv and hardswish, then a padded depthwise conv into a temporary: the
    conv's input is a temporary that bufferization frees after its last reader, the
    padding's copy; once tile-conv reads the padding through from it, it must live on until
    the conv, or plan-memory lays the conv's output over it."""

    def __init__(self, c):
        super().__init__()
        self.pw = torch.nn.Conv2d(c, c, 1)
        self.dw = torch.nn.Conv2d(c, c, 5, padding=2, groups=c)

    def forward(self, x):
        return self.dw(torch.nn.functional.hardswish(self.pw(x))) * 3.0


@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_reads_a_temporary_through(threads):
    torch.manual_seed(5)
    mod = _DwAfterIntermediate(24).eval()
    x = torch.randn(1, 24, 14, 14)
    m = compiler.compile(mod, (x,), threads=threads, target_cpu=AVX2)
    loops = m.ir("loops")
    assert "x_w = 14 : i64" in loops  # read through: no padded copy
    want = copy.deepcopy(mod).double()(x.double()).detach().numpy()
    for _ in range(2):
        np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("conv, hw", [
    (torch.nn.Conv2d(16, 24, 1), (9, 13)),                         # a matmul over (N, C, H*W)
    (torch.nn.Conv2d(8, 16, 3, padding=1), (7, 129)),              # the packed kernel
    (torch.nn.Conv2d(16, 16, 3, padding=1, groups=16), (1, 29)),   # the depthwise kernel
    (torch.nn.Conv2d(64, 64, 3, padding=1), (14, 14)),             # Winograd
], ids=["1x1", "3x3", "depthwise", "winograd"])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_result_written_into_the_callers_buffer(conv, hw, threads):
    """A conv whose output is the model's result: its kernel writes a view of it as (N, C,
    H*W) or whatever shape it computes in, so no temporary and no copy remain (bufferize
    redirects the temporary to the same view of the out-parameter); twice, to see that
    nothing of the first call's output is read by the second."""
    torch.manual_seed(11)
    mod = conv.eval()
    x = torch.randn(1, conv.in_channels, *hw)
    m = compiler.compile(mod, (x,), threads=threads, target_cpu=AVX2)
    assert "memref.copy" not in m.ir("memref")
    want = copy.deepcopy(mod).double()(x.double()).detach().numpy()
    for _ in range(2):
        np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-4)
