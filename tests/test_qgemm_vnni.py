"""The VNNI int8 GEMM kernel (vpdpbusd: u8 x s8, four products per i32 lane, no saturation).

It is chosen from the target CPU's features: AVX512-VNNI at 512 bits (icelake-server, znver4,
sapphirerapids), AVX-VNNI / AVX512-VNNI+VL at 256 bits (alderlake), and never for an AVX2 CPU
without VNNI (x86-64-v3, znver3, skylake-avx512), which keeps the vpmaddwd kernels. The
assembly tests compile for a named VNNI CPU on any host. The numerical tests run the kernel
two ways: `native` (the instruction: only on a host with VNNI, skipped elsewhere) and
`portable` (the same packing, buffers and zero-point correction, with the dot products in
generic vector code, forced through lower-qgemm's `vnni_portable`: runs on any x86-64 host
with AVX2), both against NumPy's int64 products, exactly."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.parser import Parser

import compiler.targets.cpu.qgemm as qgemm_pass
from compiler.pipeline import CompileOptions, compile_module, make_context, run_passes
from compiler.targets.cpu.machine import cpu_machine, new_target_machine

RNG = np.random.default_rng(7)
HOST_VNNI = cpu_machine("host").vnni_bits


def _dense(w: np.ndarray) -> str:
    if w.ndim == 1:
        return "[" + ", ".join(repr(float(v)) if w.dtype.kind == "f" else str(v) for v in w) + "]"
    return "[" + ", ".join(_dense(r) for r in w) + "]"


def _matmul(m_, k, n, zp, w, batch=()) -> str:
    a_t, o_t = "x".join(map(str, (*batch, m_, k))), "x".join(map(str, (*batch, m_, n)))
    return f"""
func.func @mm(%a: tensor<{a_t}xi8>) -> tensor<{o_t}xi32> {{
  %w = aicc.constant dense<{_dense(w)}> : tensor<{n}x{k}xi8>
  %y = aicc.matmul_integer %a, %w {{lhs_zero_point = {zp} : i64, transpose_rhs}} : tensor<{a_t}xi8>, tensor<{n}x{k}xi8> -> tensor<{o_t}xi32>
  func.return %y : tensor<{o_t}xi32>
}}"""


@pytest.mark.parametrize("cpu,bits", [("x86-64-v3", 0), ("znver3", 0), ("skylake-avx512", 0), ("x86-64", 0),
                                      ("icelake-server", 512), ("znver4", 512), ("sapphirerapids", 512),
                                      ("alderlake", 256)])
def test_vnni_is_detected_from_the_target_cpu(cpu, bits):
    from compiler.stages import CompileOptions as Options
    from compiler.targets import get_target

    assert cpu_machine(cpu).vnni_bits == bits
    passes = [p for _, ps in get_target("cpu").pipeline(Options(target_cpu=cpu)) for p in ps]
    (lower,) = [p for p in passes if isinstance(p, qgemm_pass.LowerQGemm)]
    assert lower.vnni == bits and not lower.vnni_portable


def _asm(text: str, cpu: str) -> tuple[str, str]:
    """(loops IR, assembly) of `text` compiled for `cpu` (on any host: nothing runs)."""
    from compiler.codegen.llvm import LLVMEmitter
    import llvmlite.binding as llvm

    module = Parser(make_context(), text).parse_module()
    stages, _ = run_passes(module, CompileOptions("cpu", target_cpu=cpu))
    machine = cpu_machine(cpu)
    ir_text = str(LLVMEmitter(vector_ldexp=machine.vector_ldexp).emit(module))
    return stages["loops"], new_target_machine(machine).emit_assembly(llvm.parse_assembly(ir_text))


@pytest.mark.parametrize("cpu,reg", [("icelake-server", "zmm"), ("znver4", "zmm"), ("alderlake", "ymm"),
                                     ("x86-64-v3", None)])
def test_vnni_kernel_is_selected_and_uses_vpdpbusd(cpu, reg):
    w = RNG.integers(-128, 128, (17, 129)).astype(np.int8)
    loops, asm = _asm(_matmul(7, 129, 17, -3, w), cpu)
    dots = re.findall(r"vpdpbusd\s+(?:\(|%)?[^,]*,\s*%([xyz]mm)", asm)
    if reg is None:  # AVX2: the packed vpmaddwd kernel
        assert "vnni" not in loops and "_packed" in loops
        assert not dots and "vpmaddwd" in asm
        return
    assert f"vnni = {cpu_machine(cpu).vnni_bits}" in loops and "_vnni" in loops and "_packed" not in loops
    assert dots and set(dots) == {reg}, dots
    assert "vpmaddwd" not in asm  # the only matmul runs in the VNNI kernel


_LowerQGemm = qgemm_pass.LowerQGemm  # the pass itself, for force_lower_qgemm


def force_lower_qgemm(monkeypatch, **options):
    """Every pipeline's lower-qgemm built with `options` whatever the target asks for (the
    target's `enabled` kept unless `options` sets it)."""
    monkeypatch.setattr(qgemm_pass, "LowerQGemm",
                        lambda enabled=True, **_: _LowerQGemm(**{"enabled": enabled, **options}))


@pytest.fixture(params=["native256", "native512", "portable256", "portable512"])
def kernel(request, monkeypatch):
    """Which VNNI kernel lower-qgemm emits: the instruction at a width the host has, or the
    portable form at either width."""
    mode, bits = request.param[:-3], int(request.param[-3:])
    if mode == "native":
        if HOST_VNNI == 0 or cpu_machine(None).vnni_bits == 0:
            pytest.skip("this host (or AICC_TARGET_CPU) has no VNNI (vpdpbusd): the portable kernel covers "
                        "the layout")
        if bits > cpu_machine("host").vector_bits or (bits == 512 and HOST_VNNI < 512):
            pytest.skip(f"this host has no {bits}-bit VNNI")
    force_lower_qgemm(monkeypatch, vnni=bits, vnni_portable=mode == "portable")
    return bits, mode


def _compile(text: str, kernel):
    bits, mode = kernel
    module = Parser(make_context(), text).parse_module()
    m = compile_module(module, "mm", output_is_tuple=True, options=CompileOptions("cpu"), use_cache=False)
    loops = m.ir("loops")
    assert f"vnni = {bits}" in loops and ("vnni_portable" in loops) == (mode == "portable")
    if mode == "native":
        assert "vpdpbusd" in m.ir("asm")
    return m


SHAPES = [(1, 1, 1), (1, 7, 3), (7, 129, 17), (129, 33, 7), (9, 4, 16), (11, 2, 24), (33, 300, 129),
          (6, 1, 9), (2, 64, 32)]


@pytest.mark.parametrize("m_,k,n", SHAPES, ids=str)
@pytest.mark.parametrize("zp", [-128, 0, 9, 127])
def test_vnni_matmul_integer_is_exact(kernel, m_, k, n, zp):
    """Every edge: tiles of 1 to 4 rows, 1 or 2 column groups, a masked store of the last
    n % L columns, blocks of 8 rows and their rest, k not a multiple of 4 or 16; extreme
    values (-128 weights by 127 - zp activations: no saturation, unlike vpmaddubsw)."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    w[0, :] = -128
    m = _compile(_matmul(m_, k, n, zp, w), kernel)
    for a in (RNG.integers(-128, 128, (m_, k)), np.full((m_, k), 127), np.full((m_, k), -128)):
        a = a.astype(np.int8)
        np.testing.assert_array_equal(m(a)[0], (a.astype(np.int64) - zp) @ w.T.astype(np.int64))


def test_vnni_batched_lhs_and_7bit_weight(kernel):
    """A batched A (rows of every batch in one GEMM) and a weight within [-64, 64], which the
    AVX2 path gives to vpmaddubsw: the VNNI kernel takes every constant B."""
    w = RNG.integers(-64, 64, (5, 40)).astype(np.int8)
    m = _compile(_matmul(3, 40, 5, -7, w, batch=(2,)), kernel)
    a = RNG.integers(-128, 128, (2, 3, 40)).astype(np.int8)
    np.testing.assert_array_equal(m(a)[0], (a.astype(np.int64) + 7) @ w.T.astype(np.int64))


@pytest.fixture
def avx2(monkeypatch):
    """lower-qgemm as on a CPU with AVX2 and no VNNI, whatever the host has."""
    force_lower_qgemm(monkeypatch, enabled=True)


@pytest.mark.parametrize("m_,k,n", SHAPES, ids=str)
@pytest.mark.parametrize("zp", [-128, 0, 127])
def test_7bit_weights_take_vpmaddubsw_exactly(avx2, m_, k, n, zp):
    """Without VNNI a weight within [-64, 64] gets the quad kernel by vpmaddubsw (u8 x s8 pairs
    into i16) and vpmaddwd by ones: exact at the edge of int16, where a pair of 255 * -64 or
    255 * 64 products (A + 128 = 255: a = 127) sums to -32640 or 32640, and for every tile and
    tail shape; a weight beyond (65) keeps the vpmaddwd kernel."""
    w = RNG.integers(-64, 65, (n, k)).astype(np.int8)
    w[0, :] = -64
    w[-1, ::2] = 64
    module = Parser(make_context(), _matmul(m_, k, n, zp, w)).parse_module()
    m = compile_module(module, "mm", output_is_tuple=True, options=CompileOptions("cpu"), use_cache=False)
    assert "pmaddubsw" in m.ir("loops") and "vpmaddubsw" in m.ir("asm")
    for a in (RNG.integers(-128, 128, (m_, k)), np.full((m_, k), 127), np.full((m_, k), -128)):
        a = a.astype(np.int8)
        np.testing.assert_array_equal(m(a)[0], (a.astype(np.int64) - zp) @ w.T.astype(np.int64))
    w[0, 0] = 65
    module = Parser(make_context(), _matmul(m_, k, n, zp, w)).parse_module()
    assert "pmaddubsw" not in compile_module(module, "mm", output_is_tuple=True, options=CompileOptions("cpu"),
                                             use_cache=False).ir("loops")


def saturated_pairs(a_u8: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum_k a[i, k] w[j, k] as vpmaddubsw and vpmaddwd by ones compute it (ONNX Runtime's AVX2
    u8 x s8 kernel): products of k = 2p and 2p + 1 summed and saturated to int16, then added
    in int32. `a_u8`: (M, K) values 0..255; `w`: (N, K) int8."""
    k = a_u8.shape[1]
    a = np.zeros((a_u8.shape[0], k + k % 2), np.int64)
    b = np.zeros((w.shape[0], k + k % 2), np.int64)
    a[:, :k], b[:, :k] = a_u8, w
    products = a[:, None, :] * b[None, :, :]
    return np.clip(products[..., 0::2] + products[..., 1::2], -32768, 32767).sum(-1)


@pytest.mark.parametrize("m_,k,n", SHAPES, ids=str)
@pytest.mark.parametrize("zp", [-128, 0, 127])
def test_int8_saturation_pairs_8bit_weights_as_onnx_runtime(m_, k, n, zp):
    """`int8_saturation` on a CPU without VNNI: an 8-bit weight takes the vpmaddubsw kernel
    too, and each pair of products beyond int16 saturates, exactly as ONNX Runtime's u8 x s8
    kernel computes it there (`saturated_pairs`); A + 128 = 255 by weights of 127 or -128
    saturates (where k > 1), so the result is not the exact one. Without the option the same
    weight keeps the exact vpmaddwd kernel."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    w[0, :] = 127
    w[-1, :] = -128
    text = _matmul(m_, k, n, zp, w)
    cpu = "x86-64-v3"  # no VNNI, whatever the host has
    options = CompileOptions("cpu", target_cpu=cpu, target_options={"int8_saturation": True})
    m = compile_module(Parser(make_context(), text).parse_module(), "mm", output_is_tuple=True, options=options,
                       use_cache=False)
    assert "pmaddubsw" in m.ir("loops") and "vpmaddubsw" in m.ir("asm")
    colsum = w.astype(np.int64).sum(1)
    for a in (RNG.integers(-128, 128, (m_, k)), np.full((m_, k), 127), np.full((m_, k), -128)):
        a = a.astype(np.int8)
        exact = (a.astype(np.int64) - zp) @ w.T.astype(np.int64)
        want = saturated_pairs(a.astype(np.int64) + 128, w) - (zp + 128) * colsum
        got = m(a)[0]
        np.testing.assert_array_equal(got, want)
        if a[0, 0] == 127 and k > 1:  # 255 * 127 twice: the pair sum saturates
            assert (got != exact).any()
    exact_m = compile_module(Parser(make_context(), text).parse_module(), "mm", output_is_tuple=True,
                             options=CompileOptions("cpu", target_cpu=cpu), use_cache=False)
    assert "pmaddubsw" not in exact_m.ir("loops")
    a = np.full((m_, k), 127, np.int8)
    np.testing.assert_array_equal(exact_m(a)[0], (a.astype(np.int64) - zp) @ w.T.astype(np.int64))


def test_int8_saturation_is_a_cpu_option_in_the_cache_key():
    """compiler.compile(..., int8_saturation=True) reaches lower-qgemm (`saturate`), changes
    the cache key, and another target refuses it by name."""
    import compiler
    from compiler.errors import CompileError
    from compiler.pipeline import model_key
    from compiler.stages import CompileOptions as Options
    from compiler.targets import get_target

    cpu = get_target("cpu")
    on, off = (Options(target_cpu="x86-64-v3", target_options=t) for t in ({"int8_saturation": True}, {}))
    for options, saturate in ((on, True), (off, False)):
        (lower,) = [p for _, ps in cpu.pipeline(options) for p in ps if isinstance(p, qgemm_pass.LowerQGemm)]
        assert lower.saturate == saturate
    module = Parser(make_context(), _matmul(2, 8, 3, 0, np.ones((3, 8), np.int8))).parse_module()
    assert model_key(module, "mm", True, on, cpu) != model_key(module, "mm", True, off, cpu)
    with pytest.raises(CompileError, match="int8_saturation"):
        compiler.compile(lambda x: x + 1, (np.ones(3, np.float32),), target="cuda-emu", int8_saturation=True)


@pytest.mark.parametrize("batch,m_,k,n", [((), 9, 27, 3), ((2,), 5, 40, 17), ((), 33, 288, 64)], ids=str)
def test_vnni_scaled_in_the_kernel(kernel, batch, m_, k, n):
    """float(matmul_integer(a, w)) * s[j] (an int8 conv's epilogue) stored by the VNNI kernel
    (`col_scale`): the same float32 products as NumPy's."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    sc = (RNG.random(n) + 0.5).astype(np.float32) / 1000
    a_t, o_t = "x".join(map(str, (*batch, m_, k))), "x".join(map(str, (*batch, m_, n)))
    m = _compile(f"""
func.func @mm(%a: tensor<{a_t}xi8>) -> tensor<{o_t}xf32> {{
  %w = aicc.constant dense<{_dense(w)}> : tensor<{n}x{k}xi8>
  %s = aicc.constant dense<{_dense(sc)}> : tensor<{n}xf32>
  %y = aicc.matmul_integer %a, %w {{lhs_zero_point = -5 : i64, transpose_rhs}} : tensor<{a_t}xi8>, tensor<{n}x{k}xi8> -> tensor<{o_t}xi32>
  %f = aicc.cast %y : tensor<{o_t}xi32> -> tensor<{o_t}xf32>
  %z = aicc.mul %f, %s : tensor<{o_t}xf32>, tensor<{n}xf32> -> tensor<{o_t}xf32>
  func.return %z : tensor<{o_t}xf32>
}}""", kernel)
    assert "col_scale" in m.ir("loops")
    a = RNG.integers(-128, 128, (*batch, m_, k)).astype(np.int8)
    acc = (a.astype(np.int64) + 5) @ w.T.astype(np.int64)
    np.testing.assert_array_equal(m(a)[0], acc.astype(np.float32) * sc)


@pytest.mark.parametrize("m_,k,n", [(1, 7, 3), (7, 129, 17), (13, 33, 40)], ids=str)
@pytest.mark.parametrize("scale,zp", [(0.05, 0.0), (0.031, -17.0), (0.5, 127.0)])
def test_vnni_dynamic_quantization(kernel, m_, k, n, scale, zp):
    """dynamic_matmul_integer: the kernel quantizes the float rows as it fills its byte buffer
    (rne(x / scale) + zp, saturated, + 128) and subtracts (zp + 128) * colsum."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    m = _compile(f"""
func.func @mm(%a: tensor<{m_}x{k}xf32>, %p: tensor<2xf32>) -> tensor<{m_}x{n}xi32> {{
  %w = aicc.constant dense<{_dense(w)}> : tensor<{n}x{k}xi8>
  %y = aicc.dynamic_matmul_integer %a, %w, %p : tensor<{m_}x{k}xf32>, tensor<{n}x{k}xi8>, tensor<2xf32> -> tensor<{m_}x{n}xi32>
  func.return %y : tensor<{m_}x{n}xi32>
}}""", kernel)
    assert "quantize" in m.ir("loops")
    x = (RNG.standard_normal((m_, k)) * 4).astype(np.float32)
    x[0, : min(k, 4)] = [1e6, -1e6, 0.0, scale * 2.5][: min(k, 4)]  # saturation and a tie
    q = np.clip(np.rint(x / np.float32(scale)) + zp, -128, 127)
    expect = (q.astype(np.int64) - int(zp)) @ w.T.astype(np.int64)
    np.testing.assert_array_equal(m(x, np.array([scale, zp], np.float32))[0], expect)


def test_vnni_quantized_models_match_the_avx2_kernels(monkeypatch):
    """compiler.quantize (int8 convs as im2col GEMMs with the per-channel scale in the kernel,
    a linear layer) and quantize_dynamic (8- and 7-bit weights): the portable VNNI kernel gives
    the same outputs as the AVX2 kernels, bit for bit (exact int32 sums, the same epilogues)."""
    import compiler

    monkeypatch.setenv("AICC_CACHE", "0")  # the forced kernel is not part of a cache key
    monkeypatch.setenv("AICC_TARGET_CPU", "x86-64-v3")  # the AVX2 kernels on any host
    w1 = (RNG.standard_normal((8, 3, 3, 3)) / 5).astype(np.float32)
    w2 = (RNG.standard_normal((12, 8, 3, 3)) / 8).astype(np.float32)
    w3 = (RNG.standard_normal((12 * 4 * 4, 5)) / 10).astype(np.float32)

    def cnn(x):
        h = compiler.ops.relu(compiler.ops.conv2d(x, w1, padding=1))
        h = compiler.ops.max_pool2d(compiler.ops.conv2d(h, w2, stride=2, padding=1), 2)
        return h.reshape(x.shape[0], -1) @ w3

    def linear(x):
        return x @ w3[:37] + 0.5

    calib = [(RNG.standard_normal((2, 3, 15, 15)).astype(np.float32),) for _ in range(2)]
    x = RNG.standard_normal((2, 3, 15, 15)).astype(np.float32)
    xd = (RNG.standard_normal((7, 37)) * 3).astype(np.float32)

    def build():
        return [compiler.quantize(cnn, calib, (x,)), compiler.quantize_dynamic(linear, (xd,)),
                compiler.quantize_dynamic(linear, (xd,), reduce_range=True)]

    avx2 = build()
    force_lower_qgemm(monkeypatch, vnni=256, vnni_portable=True)
    vnni = build()
    for i, (a, v, inp) in enumerate(zip(avx2, vnni, (x, xd, xd))):
        seven = i == 2  # 7-bit weights: on AVX2 too the quad layout, multiplied by vpmaddubsw
        assert ("pmaddubsw" in a.ir("loops")) == ("vnni = 256" in a.ir("loops")) == seven
        assert "vnni_portable" in v.ir("loops") and "pmaddubsw" not in v.ir("loops")
        np.testing.assert_array_equal(v(inp), a(inp))
    # the matmuls whose only reader is the per-channel scale store it from the kernel, as on AVX2
    assert vnni[0].ir("loops").count("col_scale") == avx2[0].ir("loops").count("col_scale") >= 2


@pytest.mark.parametrize("unsigned", [True, False])
def test_vnni_kernel_requantizes_a_qdq_conv_like_the_avx2_kernel(monkeypatch, unsigned):
    """A QDQ Conv (int32 bias) -> Relu -> QuantizeLinear, 129 output channels (a masked last
    group at 8 and 16 lanes): the VNNI kernel stores the requantized int8 tile itself (col_bias,
    out_zp, relu) and its outputs equal the AVX2 packed kernel's, bit for bit."""
    import compiler
    from test_quantize import qdq_conv_relu_model

    monkeypatch.setenv("AICC_CACHE", "0")
    monkeypatch.setenv("AICC_TARGET_CPU", "x86-64-v3")
    model, x, _ = qdq_conv_relu_model(11, unsigned, (3, 3), (2, 5, 7, 6), (7, 6), pads=[1, 1, 1, 1])
    avx2 = compiler.compile(model, example_inputs=(x,))
    for bits in (256, 512):
        force_lower_qgemm(monkeypatch, vnni=bits, vnni_portable=True)
        vnni = compiler.compile(model, example_inputs=(x,))
        loops = vnni.ir("loops")
        assert f"vnni = {bits}" in loops and "out_zp" in loops and "relu = true" in loops
        got = vnni(x)
        np.testing.assert_array_equal(got, avx2(x))
        assert (got == 0).mean() > 0.2  # the relu clamps


def test_vnni_qgemm_op_verifier():
    """A vnni kernel's B must be packed by quads for its lanes, with a padded colsum."""
    from xdsl.utils.exceptions import VerifyException

    def text(b_type, colsum_type, vnni):
        return f"""
func.func @f(%a: memref<7x33xi8>, %b: {b_type}, %s: {colsum_type}, %c: memref<7x17xi32>) {{
  %z = arith.constant 0 : index
  %m = arith.constant 7 : index
  aicc_cpu.qgemm %a[%z], %b, %c[%z] rows %m colsum %s : {colsum_type} {{n = 17 : i64, k = 33 : i64, zp = 0 : i64, vnni = {vnni} : i64}} : memref<7x33xi8>, {b_type}, memref<7x17xi32>
  func.return
}}"""

    Parser(make_context(), text("memref<2x9x64xi8>", "memref<32xi32>", 512)).parse_module().verify()
    Parser(make_context(), text("memref<3x9x32xi8>", "memref<24xi32>", 256)).parse_module().verify()
    for b_type, colsum_type, vnni, message in [
            ("memref<2x9x64xi8>", "memref<32xi32>", 256, "a vnni = 256 B must be a memref<3x9x32xi8>"),
            ("memref<3x9x32xi8>", "memref<17xi32>", 256, "vnni = 256 takes a colsum memref<24xi32>"),
            ("memref<2x9x64xi8>", "memref<32xi32>", 128, "vnni must be 256 or 512")]:
        with pytest.raises(VerifyException, match="aicc_cpu.qgemm: " + message):
            Parser(make_context(), text(b_type, colsum_type, vnni)).parse_module().verify()


@pytest.mark.parametrize("kind,stem", [("packed", False), ("7bit", False), ("vnni_portable256", False),
                                       ("vnni_portable512", False), ("packed", True), ("7bit", True),
                                       ("vnni_portable512", True)])
def test_conv_rows_are_gathered_from_the_nhwc_input(monkeypatch, kind, stem):
    """compiler.quantize's int8 convs whose input has a multiple of 16 channels read it through
    a `window` (the kernel gathers each im2col row as it converts it): bit for bit the output
    of the same model with the im2col matrix stored (strides 2 and (1, 2), dilation 2, padding,
    a non-square image, batch 2, 33 and 7 output channels), through the 8-bit packed kernel,
    the 7-bit vpmaddubsw one and the portable VNNI one at 256 and 512 bits. A 3-channel input
    is read through too when a window row's KW taps, side by side without dilation, make 16
    bytes or more (a ResNet stem: 7x7, stride 2, 21 bytes), and keeps its im2col under a 3x3
    (9 bytes)."""
    import compiler

    monkeypatch.setenv("AICC_CACHE", "0")  # the forced kernels are not part of a cache key
    monkeypatch.setenv("AICC_TARGET_CPU", "x86-64-v3")
    if kind.startswith("vnni_portable"):  # the layouts of AVX-VNNI (256) and AVX512-VNNI (512)
        force_lower_qgemm(monkeypatch, vnni=int(kind[-3:]), vnni_portable=True)
    # its own generator: with the module's, the data (and how close int8 comes to float)
    # depended on which tests ran before it in the same worker
    rng = np.random.default_rng(11)
    w0 = (rng.standard_normal((16, 3, 7, 7) if stem else (16, 3, 3, 3)) / 5).astype(np.float32)
    w1 = (rng.standard_normal((32, 16, 3, 3)) / 10).astype(np.float32)
    w2 = (rng.standard_normal((33, 32, 3, 2)) / 15).astype(np.float32)
    w3 = (rng.standard_normal((7, 33, 1, 1)) / 5).astype(np.float32)

    def cnn(x):
        h = compiler.ops.relu(compiler.ops.conv2d(x, w0, stride=2, padding=3) if stem else
                              compiler.ops.conv2d(x, w0, padding=1))
        h = compiler.ops.relu(compiler.ops.conv2d(h, w1, stride=2, padding=1))
        h = compiler.ops.relu(compiler.ops.conv2d(h, w2, stride=(1, 2), padding=(2, 1), dilation=2))
        return compiler.ops.conv2d(h, w3)

    shape = (2, 3, 13, 10)
    calib = [(rng.standard_normal(shape).astype(np.float32),) for _ in range(2)]
    x = rng.standard_normal(shape).astype(np.float32)
    seven = kind == "7bit"
    windowed = compiler.quantize(cnn, calib, (x,), reduce_range=seven)
    loops = windowed.ir("loops")
    # the 16-, 32- and 33-channel inputs (the last one's 1x1 a 33-byte span); the RGB one
    # under the 7x7 only
    assert loops.count("window = array") == (4 if stem else 3)
    assert ("pmaddubsw" in loops) == seven and ("vnni_portable" in loops) == kind.startswith("vnni_portable")
    monkeypatch.setattr(qgemm_pass, "_im2col", lambda op, a: None)
    stored = compiler.quantize(cnn, calib, (x,), reduce_range=seven)
    assert "window" not in stored.ir("loops")
    np.testing.assert_array_equal(windowed(x), stored(x))
    y, ref = windowed(x).astype(np.float64).ravel(), cnn(x).astype(np.float64).ravel()
    assert y @ ref / (np.linalg.norm(y) * np.linalg.norm(ref)) >= 0.99
