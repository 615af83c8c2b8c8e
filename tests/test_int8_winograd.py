"""The integer Winograd kernel for int8 3x3 stride-1 convs (lower-qgemm's `winograd`, see
aicc_cpu.qgemm and compiler/codegen/llvm/qgemm.py's _BodyWinograd): F(2x2, 3x3) with i16
transforms and vpmaddwd products, exact, so its results are the direct kernel's bit for bit.

Every test generates code for a CPU without VNNI (x86-64-v3), where the kernel is chosen, so
it runs the same on any x86-64 host with AVX2; the reference is the same model compiled with
AICC_INT8_WINOGRAD=0 (the direct windowed kernel) or NumPy's int64 sums."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import compiler
from compiler.dialects.aicc_cpu import WINOGRAD_MAX_CHANNELS
from compiler.lowering.winograd import AT, BT, G
from compiler.pipeline import CompileOptions, compile_module, make_context
from compiler.targets.cpu.qgemm import pack_winograd


@pytest.fixture(autouse=True)
def _avx2_code(monkeypatch):
    monkeypatch.setenv("AICC_TARGET_CPU", "x86-64-v3")
    monkeypatch.setenv("AICC_CACHE", "0")  # AICC_INT8_WINOGRAD is in the key; this keeps runs independent


def _both(monkeypatch, build):
    """(the model with the integer Winograd kernel, the same with the direct kernel)."""
    monkeypatch.setenv("AICC_INT8_WINOGRAD", "1")
    wino = build()
    monkeypatch.setenv("AICC_INT8_WINOGRAD", "0")
    direct = build()
    monkeypatch.delenv("AICC_INT8_WINOGRAD")
    return wino, direct


def _cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# (input channels, output channels, H, W, batch, padding): C a multiple of 16 (16-channel
# input transform) or of 8 only (8 at a time); output channels a multiple of 16, of 8 (one
# group alone) or neither (masked stores); one tile per image (2x2), a tile count that leaves
# a partial register block and a partial task, a non-square image, no padding; odd heights
# and widths (half tiles at the bottom and the right: 7x7, 7x5, a 1x3 image, 9x11 unpadded)
SHAPES = [(16, 16, 2, 2, 1, 1), (16, 24, 6, 10, 2, 1), (24, 20, 14, 6, 3, 1), (8, 7, 4, 12, 1, 1),
          (40, 33, 8, 4, 1, 1), (32, 64, 18, 18, 2, 0), (64, 16, 10, 14, 1, 1), (64, 32, 7, 7, 2, 1),
          (16, 24, 7, 5, 3, 1), (8, 16, 1, 3, 2, 1), (24, 8, 11, 13, 1, 0)]


@pytest.mark.parametrize("cin,cout,h,w,n,pad", SHAPES, ids=str)
def test_int8_winograd_is_the_direct_kernel_bit_for_bit(monkeypatch, cin, cout, h, w, n, pad):
    """compiler.quantize's 3x3 stride-1 convs over C % 8 == 0 channels take the kernel, at any
    output size (the
    loops IR records `winograd = T`), and give the direct kernel's results bit for bit:
    requantized to int8 with a bias and a relu (the next conv's input), and as the last conv's
    float32 output; the RGB conv (3 channels) keeps the direct kernel."""
    rng = np.random.default_rng(cin * 1000 + cout * 10 + h)
    w0 = (rng.standard_normal((cin, 3, 3, 3)) / 4).astype(np.float32)
    w1 = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin)).astype(np.float32)
    b1 = (rng.standard_normal(cout) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((16, cout, 3, 3)) / np.sqrt(9 * cout)).astype(np.float32)

    def cnn(x):
        y = compiler.ops.relu(compiler.ops.conv2d(x, w0, padding=1))
        y = compiler.ops.relu(compiler.ops.conv2d(y, w1, b1, padding=pad))
        return compiler.ops.conv2d(y, w2, padding=1)

    shape = (n, 3, h, w)
    calib = [(rng.standard_normal(shape).astype(np.float32),) for _ in range(2)]
    x = rng.standard_normal(shape).astype(np.float32)
    wino, direct = _both(monkeypatch, lambda: compiler.quantize(cnn, calib, (x,)))
    assert wino.ir("loops").count("winograd = ") == (2 if cout % 8 == 0 else 1)
    assert "winograd = " not in direct.ir("loops")
    np.testing.assert_array_equal(wino(x), direct(x))
    # a check that both run the model: three int8 convs calibrated on 2 batches (0.984 at 2x2)
    assert _cos(wino(x), cnn(x)) >= 0.97


def test_int8_winograd_threads(monkeypatch):
    """Two threads split the tiles into tasks with the same result; a stride (or a dilation, a
    5x5 window) keeps the direct kernel."""
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((16, 3, 3, 3)) / 4).astype(np.float32)
    w2 = (rng.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32)
    w3 = (rng.standard_normal((16, 32, 3, 3)) / 17).astype(np.float32)
    w4 = (rng.standard_normal((16, 16, 5, 5)) / 20).astype(np.float32)

    def cnn(x):
        y = compiler.ops.relu(compiler.ops.conv2d(x, w1, padding=1))
        y = compiler.ops.relu(compiler.ops.conv2d(y, w2, padding=1))      # 12x20: winograd
        y = compiler.ops.relu(compiler.ops.conv2d(y, w3, padding=(0, 1)))  # 10x20: winograd
        y = compiler.ops.relu(compiler.ops.conv2d(y, w3[:, :16], padding=(1, 0)))  # 10x18: winograd
        z = compiler.ops.conv2d(y, w4, padding=2, stride=2)                # stride 2: direct
        return z, compiler.ops.conv2d(y[:, :, 1:], w2[:16, :16], padding=1)  # 9x18: winograd

    x = rng.standard_normal((3, 3, 12, 20)).astype(np.float32)
    calib = [(rng.standard_normal(x.shape).astype(np.float32),) for _ in range(2)]
    one = compiler.quantize(cnn, calib, (x,), threads=1)
    two = compiler.quantize(cnn, calib, (x,), threads=2)
    assert one.ir("loops").count("winograd = ") == 4
    for a, b in zip(one(x), two(x)):
        np.testing.assert_array_equal(a, b)
    _, direct = _both(monkeypatch, lambda: compiler.quantize(cnn, calib, (x,), threads=1))
    for a, b in zip(one(x), direct(x)):
        np.testing.assert_array_equal(a, b)


def test_int8_saturation_keeps_the_direct_kernel_for_8bit_weights(monkeypatch):
    """With int8_saturation the user asked for the saturating u8 x s8 pair sums of ONNX
    Runtime's AVX2 kernel: 8-bit weights keep that direct kernel; 7-bit ones (reduce_range),
    exact either way, take the Winograd kernel."""
    rng = np.random.default_rng(4)
    w1 = (rng.standard_normal((16, 3, 3, 3)) / 4).astype(np.float32)
    w2 = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)

    def cnn(x):
        return compiler.ops.conv2d(compiler.ops.relu(compiler.ops.conv2d(x, w1, padding=1)), w2, padding=1)

    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    calib = [(x,)]
    saturating = compiler.quantize(cnn, calib, (x,), int8_saturation=True)
    assert "winograd = " not in saturating.ir("loops") and "pmaddubsw" in saturating.ir("loops")
    seven = compiler.quantize(cnn, calib, (x,), int8_saturation=True, reduce_range=True)
    assert "winograd = " in seven.ir("loops")
    np.testing.assert_array_equal(seven(x), compiler.quantize(cnn, calib, (x,), reduce_range=True)(x))


def _conv_module(n, h, w, c, o, zp, weight) -> str:
    """A valid 3x3 conv of an NHWC int8 input as quantize-matmul writes it (im2col, then
    matmul_integer with the lhs zero point); `weight` (O, 3, 3, C), or an int for a splat."""
    oh, ow = h - 2, w - 2
    rows = n * oh * ow
    dense = str(weight) if isinstance(weight, int) else \
        np.array2string(weight.reshape(o, 9 * c), separator=", ", threshold=10**9).replace("\n", "")
    return f"""
func.func @mm(%x: tensor<{n}x{h}x{w}x{c}xi8>) -> tensor<{rows}x{o}xi32> {{
  %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, p + i, q + j, c]"(%x) {{ranges = {{n = {n} : i64, p = {oh} : i64, q = {ow} : i64, i = 3 : i64, j = 3 : i64, c = {c} : i64}}}} : (tensor<{n}x{h}x{w}x{c}xi8>) -> tensor<{n}x{oh}x{ow}x3x3x{c}xi8>
  %a = aicc.reshape %cols : tensor<{n}x{oh}x{ow}x3x3x{c}xi8> -> tensor<{rows}x{9 * c}xi8>
  %w = aicc.constant dense<{dense}> : tensor<{o}x{9 * c}xi8>
  %y = aicc.matmul_integer %a, %w {{lhs_zero_point = {zp} : i64, transpose_rhs}} : tensor<{rows}x{9 * c}xi8>, tensor<{o}x{9 * c}xi8> -> tensor<{rows}x{o}xi32>
  func.return %y : tensor<{rows}x{o}xi32>
}}"""


@pytest.mark.parametrize("zp", [-128, 0, 127])
def test_int8_winograd_int32_sums_at_the_extremes(zp):
    """The kernel's int32 result (no epilogue) against NumPy's int64 sums: 256 channels of x
    at either end of int8 by weights of -128 and 127, and of random values; then the largest
    channel count the kernel takes (1824, a multiple of 8 below WINOGRAD_MAX_CHANNELS) with
    x - zp = 255 and w = -128 everywhere, where 4 times the sum, the output transform's
    result before the shift, is -2^31 + 4.2 million."""
    rng = np.random.default_rng(zp + 200)
    n, h, w, c, o = 2, 6, 8, 256, 12
    weight = rng.integers(-128, 128, (o, 3, 3, c)).astype(np.int8)
    weight[:4] = -128
    weight[4:6] = 127
    module = Parser(make_context(), _conv_module(n, h, w, c, o, zp, weight)).parse_module()
    m = compile_module(module, "mm", output_is_tuple=True, options=CompileOptions("cpu"), use_cache=False)
    assert "winograd = " in m.ir("loops")
    wt = weight.reshape(o, -1).astype(np.int64)
    for x in (np.full((n, h, w, c), 127), np.full((n, h, w, c), -128), rng.integers(-128, 128, (n, h, w, c))):
        x = x.astype(np.int8)
        xs = x.astype(np.int64) - zp
        cols = np.stack([xs[:, i:i + h - 2, j:j + w - 2] for i in range(3) for j in range(3)], 3)
        ref = cols.reshape(n * (h - 2) * (w - 2), -1) @ wt.T
        np.testing.assert_array_equal(m(x)[0], ref)
    if zp != -128:
        return
    c = WINOGRAD_MAX_CHANNELS - WINOGRAD_MAX_CHANNELS % 8
    assert c == 1824
    module = Parser(make_context(), _conv_module(1, 4, 4, c, 8, zp, -128)).parse_module()
    m = compile_module(module, "mm", output_is_tuple=True, options=CompileOptions("cpu"), use_cache=False)
    assert "winograd = " in m.ir("loops")
    y = m(np.full((1, 4, 4, c), 127, np.int8))[0]
    assert 4 * (9 * c * 255 * -128) == -2**31 + 4210688
    np.testing.assert_array_equal(y, np.full((4, 8), 9 * c * 255 * -128))


def test_pack_winograd_is_the_transformed_weight():
    """pack_winograd's layout: [ab, g, p, 2c + t] = (G' g G'^T)[a, b] of out channel 8g + c
    and in channel 2p + t (G' = 2 G), zeros beyond N; within int16 at w = -128. And the
    identity it serves: At (U' * V) A = 4 * the direct 3x3 sum of a 4x4 window."""
    rng = np.random.default_rng(9)
    n, c = 11, 6
    w = rng.integers(-128, 128, (n, 3, 3, c)).astype(np.int8)
    w[0] = -128
    up = pack_winograd(w.reshape(n, 9 * c))
    assert up.shape == (16, 2, 3, 16) and up.dtype == np.int16
    g2 = (2 * G).astype(np.int64)
    for o, ci in ((0, 0), (5, 3), (10, 5)):
        u = g2 @ w[o, :, :, ci].astype(np.int64) @ g2.T
        np.testing.assert_array_equal(up[:, o // 8, ci // 2, 2 * (o % 8) + ci % 2], u.reshape(16))
    assert not up[:, 1, :, 2 * 3:].any()  # channels 11 .. 15
    assert np.abs(up).max() == 9 * 128
    d = rng.integers(-255, 256, (4, 4)).astype(np.int64)
    gw = w[3, :, :, 2].astype(np.int64)
    bt, at = BT.astype(np.int64), AT.astype(np.int64)
    y4 = at @ ((g2 @ gw @ g2.T) * (bt @ d @ bt.T)) @ at.T
    direct = np.array([[(d[r:r + 3, s:s + 3] * gw).sum() for s in range(2)] for r in range(2)])
    np.testing.assert_array_equal(y4, 4 * direct)


def test_winograd_qgemm_op_verifier():
    """aicc_cpu.qgemm's winograd takes a 3x3 stride-1 window, channels a multiple of 8 and the
    transformed B's shape."""
    def text(window, x_type, b_type):
        return f"""
func.func @f(%x: {x_type}, %b: {b_type}, %c: memref<8x16xi32>, %i: index) {{
  aicc_cpu.qgemm %x[%i], %b, %c[%i] rows %i {{n = 16 : i64, k = {9 * int(x_type.split('x')[3])} : i64, zp = 0 : i64, window = array<i64: {window}>, winograd = 6 : i64}} : {x_type}, {b_type}, memref<8x16xi32>
  func.return
}}"""
    ok = text("2, 4, 3, 3, 1, 1, 1, 1", "memref<1x4x6x8xi8>", "memref<16x2x4x16xi16>")
    Parser(make_context(), ok).parse_module().verify()
    for window, x_type, b_type in [("2, 4, 3, 3, 2, 1, 1, 1", "memref<1x6x6x8xi8>", "memref<16x2x4x16xi16>"),
                                   ("2, 4, 3, 3, 1, 1, 1, 2", "memref<1x4x8x8xi8>", "memref<16x2x4x16xi16>"),
                                   ("2, 4, 3, 3, 1, 1, 1, 1", "memref<1x4x6x12xi8>", "memref<16x2x6x16xi16>"),
                                   ("2, 4, 3, 3, 1, 1, 1, 1", "memref<1x4x6x8xi8>", "memref<16x2x4x16xi8>"),
                                   ("2, 4, 3, 3, 1, 1, 1, 1", "memref<1x4x6x8xi8>", "memref<2x4x16xi16>")]:
        with pytest.raises(VerifyException, match="aicc_cpu.qgemm: winograd takes"):
            Parser(make_context(), text(window, x_type, b_type)).parse_module().verify()
