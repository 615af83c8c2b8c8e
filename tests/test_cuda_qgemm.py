"""The CUDA target's int8 GEMM: gpu_map.qgemm, a __dp4a kernel with int32 accumulators.

Checked in the emulation harness (cuda-emu: the same CUDA C compiled by g++, __dp4a emulated
bit for bit) against NumPy's int64 products, exactly, on odd shapes and extreme values;
`compiler.quantize` and `compiler.quantize_dynamic` on cuda-emu against the same models on the
CPU (the int32 sums are exact on both, the float epilogues the same formulas); the CUDA C
compiled by NVRTC for sm_90 (skipped where NVRTC is not installed); and on a real GPU (marked
`gpu`, skipped without one)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

import compiler
from compiler.pipeline import CompileOptions, compile_module, make_context

RNG = np.random.default_rng(11)


def _compile(text: str, target: str = "cuda-emu"):
    module = Parser(make_context(), text).parse_module()
    return compile_module(module, "mm", output_is_tuple=True, options=CompileOptions(target), use_cache=False)


def _mm_text(shape_a, n, zp):
    k = shape_a[-1]
    a_t = "x".join(map(str, shape_a))
    o_t = "x".join(map(str, (*shape_a[:-1], n)))
    return f"""
func.func @mm(%a: tensor<{a_t}xi8>, %b: tensor<{n}x{k}xi8>) -> tensor<{o_t}xi32> {{
  %y = aicc.matmul_integer %a, %b {{lhs_zero_point = {zp} : i64, transpose_rhs}} : tensor<{a_t}xi8>, tensor<{n}x{k}xi8> -> tensor<{o_t}xi32>
  func.return %y : tensor<{o_t}xi32>
}}"""


def _kinds(m) -> list[str]:
    return [k.kind for k in m.executable.program.kernels]


SHAPES = [((1, 1), 1), ((1, 7), 3), ((7, 129), 5), ((65, 33), 70), ((129, 4), 129), ((2, 3, 40), 17),
          ((3, 64), 64)]


@pytest.mark.parametrize("shape_a,n", SHAPES, ids=str)
@pytest.mark.parametrize("zp", [-128, 0, 127])
def test_dp4a_matmul_integer_is_exact(shape_a, n, zp):
    """Edge tiles in rows and columns, k not a multiple of 4 or of the 32-byte step, a
    batched A, and extreme values: the int32 result exactly, zero point included."""
    m = _compile(_mm_text(shape_a, n, zp))
    assert _kinds(m) == ["qgemm"]  # the fill went: the kernel stores every C
    assert "__dp4a(a[i], b[j], acc[i][j])" in m.ir("cuda")
    k = shape_a[-1]
    b = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    b[0] = -128
    for a in (RNG.integers(-128, 128, shape_a), np.full(shape_a, 127), np.full(shape_a, -128)):
        a = a.astype(np.int8)
        expect = (a.astype(np.int64) - zp) @ b.T.astype(np.int64)
        np.testing.assert_array_equal(m(a, b)[0], expect.astype(np.int32))


@pytest.mark.parametrize("m_,k,n", [(1, 7, 3), (9, 37, 6), (70, 65, 33)], ids=str)
@pytest.mark.parametrize("scale,zp", [(0.05, 0.0), (0.031, -17.0), (0.5, 127.0)])
def test_dp4a_dynamic_matmul_integer(m_, k, n, scale, zp):
    """A float A quantized as the tile is staged: rne(a / scale) + zp saturated to int8 (the
    division IEEE's, ties to even), then minus zp, times B."""
    m = _compile(f"""
func.func @mm(%a: tensor<{m_}x{k}xf32>, %w: tensor<{n}x{k}xi8>, %p: tensor<2xf32>) -> tensor<{m_}x{n}xi32> {{
  %y = aicc.dynamic_matmul_integer %a, %w, %p : tensor<{m_}x{k}xf32>, tensor<{n}x{k}xi8>, tensor<2xf32> -> tensor<{m_}x{n}xi32>
  func.return %y : tensor<{m_}x{n}xi32>
}}""")
    assert _kinds(m) == ["qgemm"]
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    x = (RNG.standard_normal((m_, k)) * 4).astype(np.float32)
    x[0, : min(k, 4)] = [1e6, -1e6, 0.0, scale * 2.5][: min(k, 4)]  # saturation and a tie
    q = np.clip(np.rint(x / np.float32(scale)) + zp, -128, 127)
    expect = (q.astype(np.int64) - int(zp)) @ w.T.astype(np.int64)
    np.testing.assert_array_equal(m(x, w, np.array([scale, zp], np.float32))[0], expect)


W1 = (RNG.standard_normal((8, 3, 3, 3)) / 5).astype(np.float32)
B1 = (RNG.standard_normal(8) * 0.1).astype(np.float32)
W2 = (RNG.standard_normal((12, 8, 3, 3)) / 8).astype(np.float32)
W4 = (RNG.standard_normal((12 * 4 * 4, 5)) / 10).astype(np.float32)


def _cnn(x):
    h = compiler.ops.relu(compiler.ops.conv2d(x, W1, B1, padding=1))
    h = compiler.ops.max_pool2d(compiler.ops.conv2d(h, W2, stride=2, padding=1), 2)
    return h.reshape(x.shape[0], -1) @ W4


def test_quantize_on_cuda_runs_int8_convs_and_matmuls_in_dp4a_kernels():
    """compiler.quantize(..., target="cuda-emu"): both convs (im2col rows times the weight)
    and the linear layer run as qgemm kernels, and the model matches the CPU's int8 model (the
    same int32 sums and the same requantization) and the float model."""
    calib = [(RNG.standard_normal((2, 3, 15, 15)).astype(np.float32),) for _ in range(2)]
    x = RNG.standard_normal((2, 3, 15, 15)).astype(np.float32)
    gpu = compiler.quantize(_cnn, calib, (x,), target="cuda-emu")
    cpu = compiler.quantize(_cnn, calib, (x,))
    assert gpu.stats["quantized_ops"] == 3
    assert _kinds(gpu).count("qgemm") == 3
    y = gpu(x)
    np.testing.assert_allclose(y, cpu(x), rtol=1e-6, atol=1e-6 * np.abs(y).max())
    ref = _cnn(x)
    assert np.dot(y.ravel(), ref.ravel()) / (np.linalg.norm(y) * np.linalg.norm(ref)) > 0.99


def test_quantize_dynamic_on_cuda_uses_the_dp4a_kernel():
    w = (RNG.standard_normal((37, 13)) / 6).astype(np.float32)
    b = RNG.standard_normal(13).astype(np.float32)

    def linear(x):
        return x @ w + b

    x = (RNG.standard_normal((7, 37)) * 3).astype(np.float32)
    gpu = compiler.quantize_dynamic(linear, (x,), target="cuda-emu")
    cpu = compiler.quantize_dynamic(linear, (x,))
    assert gpu.stats["quantized_ops"] == 1 and _kinds(gpu).count("qgemm") == 1
    for xx in (x, np.abs(x), -np.abs(x)):
        y = gpu(xx)
        np.testing.assert_allclose(y, cpu(xx), rtol=1e-6, atol=1e-6 * np.abs(y).max())


def test_nvrtc_compiles_the_dp4a_kernels_for_sm90():
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) is not installed")
    static = _compile(_mm_text((7, 129), 5, -3), target="cuda")
    dynamic = _compile("""
func.func @mm(%a: tensor<9x37xf32>, %w: tensor<6x37xi8>, %p: tensor<2xf32>) -> tensor<9x6xi32> {
  %y = aicc.dynamic_matmul_integer %a, %w, %p : tensor<9x37xf32>, tensor<6x37xi8>, tensor<2xf32> -> tensor<9x6xi32>
  func.return %y : tensor<9x6xi32>
}""", target="cuda")
    for m in (static, dynamic):
        assert m.executable.target_arch() == "sm_90" or m.executable.arch
        assert _kinds(m) == ["qgemm"] and "__dp4a(" in m.ir("cuda")
        stats = m.executable.stats  # ptxas's, per kernel: NVRTC built them
        (s,) = stats.values()
        assert 0 < s.registers <= 255 and not s.spills, s
        assert s.shared_bytes >= 2 * 8 * 65 * 4  # the two tiles of words


def _has_gpu() -> bool:
    try:
        from compiler.targets.cuda.runtime import has_gpu

        return has_gpu()
    except ImportError:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("shape_a,n,zp", [((7, 129), 5, -3), ((2, 65, 33), 70, 127), ((257, 300), 129, 0)],
                         ids=str)
def test_dp4a_on_the_gpu(shape_a, n, zp):
    m = _compile(_mm_text(shape_a, n, zp), target="cuda")
    a = RNG.integers(-128, 128, shape_a).astype(np.int8)
    b = RNG.integers(-128, 128, (n, shape_a[-1])).astype(np.int8)
    np.testing.assert_array_equal(m(a, b)[0], ((a.astype(np.int64) - zp) @ b.T.astype(np.int64)).astype(np.int32))
    x = (RNG.standard_normal((9, 37)) * 3).astype(np.float32)
    w = (RNG.standard_normal((37, 13)) / 6).astype(np.float32)
    gpu = compiler.quantize_dynamic(lambda x: x @ w, (x,), target="cuda")
    cpu = compiler.quantize_dynamic(lambda x: x @ w, (x,))
    np.testing.assert_allclose(gpu(x), cpu(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("types,message", [
    ("memref<7x12xi8>, memref<5x13xi8>, memref<7x5xi32>", "expected A \\(..., M, K\\), B \\(N, K\\)"),
    ("memref<7x12xi8>, memref<5x12xi8>, memref<7x5xf32>", "expected an i8 A, an i8 B and an i32 C, got memref<7x5xf32>"),
])
def test_qgemm_op_verifier_names_the_op_and_types(types, message):
    from xdsl.utils.exceptions import VerifyException

    a, b, c = (t.strip() for t in types.split(", "))
    text = f"""
func.func @f(%a: {a}, %b: {b}, %c: {c}) {{
  gpu_map.qgemm %a, %b, %c {{zp = 0 : i64}} : {types}
  func.return
}}"""
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(VerifyException, match="gpu_map.qgemm: " + message):
        module.verify()
