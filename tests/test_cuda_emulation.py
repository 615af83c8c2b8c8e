"""The CUDA target without a GPU: every kernel compiles with NVRTC (no errors, no spills), and the
same CUDA C, built with the host g++ against tests/cuda_emulation/cuda_emu.h, computes what NumPy
computes. On a machine with a GPU the `gpu` tests run the real thing."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler import ops

pytest.importorskip("cuda.bindings.nvrtc")
if shutil.which("g++") is None:
    pytest.skip("the CUDA emulation harness needs g++", allow_module_level=True)

from cuda_emulation.emu import run_emulated  # noqa: E402

from compiler.runtime.cuda import has_gpu  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def _with_nan(x):
    x = x.copy()
    x.flat[::7] = np.nan
    return x


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978846 * (x + 0.044715 * x * x * x)))


CASES = {
    # name: (fn, inputs, kinds that must appear)
    "elementwise": (lambda x: x * 2.0 + 1.0, (f32(7, 129),), {"elementwise"}),
    "broadcast": (lambda x, b: np.maximum(x + b, 0.0), (f32(5, 33), f32(33)), {"elementwise"}),
    "gelu": (gelu, (f32(3, 1000),), {"elementwise"}),
    "softmax": (softmax, (f32(5, 37),), {"row_reduce"}),
    "softmax_wide": (softmax, (f32(3, 600),), {"row_reduce"}),
    "layernorm": (layernorm, (f32(6, 77),), {"row_reduce"}),
    "sum_all": (lambda x: x.sum(), (f32(9, 13),), {"single"}),
    "column_mean": (lambda x: x.mean(axis=0), (f32(17, 5),), {"col_reduce"}),
    "column_max_split": (lambda x: x.max(axis=0), (f32(300, 7),), {"col_reduce"}),
    "column_sum_wide": (lambda x: x.sum(axis=0, keepdims=True), (f32(9, 1100),), {"col_reduce"}),
    "middle_axis_mean": (lambda x: x.mean(axis=1), (f32(4, 17, 5),), {"col_reduce"}),
    "two_axes_sum": (lambda x: x.sum(axis=(0, 1)), (f32(6, 5, 33),), {"col_reduce"}),
    "column_mean_then_relu": (lambda x, b: np.maximum(x.mean(axis=0) + b, 0.0),
                              (f32(40, 70), f32(70)), {"col_reduce"}),
    "matmul_edges": (lambda a, b: a @ b, (f32(67, 33), f32(33, 45)), {"matmul"}),
    "matmul_bias_relu": (lambda a, b, c: np.maximum(a @ b + c, 0.0),
                         (f32(70, 20), f32(20, 130), f32(130)), {"matmul"}),
    "matmul_skinny": (lambda a, b: a @ b, (f32(40, 300), f32(300, 10)), {"matmul"}),
    "matmul_odd_k": (lambda a, b: a @ b, (f32(33, 7), f32(7, 19)), {"matmul"}),
    "matmul_big_tile": (lambda a, b: a @ b, (f32(130, 36), f32(36, 260)), {"matmul"}),
    "bmm": (lambda a, b: a @ b, (f32(3, 20, 16), f32(3, 16, 24)), {"matmul"}),
    "bmm_broadcast_rhs": (lambda a, b: a @ b, (f32(2, 3, 20, 12), f32(12, 28)), {"matmul"}),
    "bmm_broadcast_dims": (lambda a, b: a @ b, (f32(2, 1, 9, 13), f32(3, 13, 6)), {"matmul"}),
    "bmm_transposed_rhs": (lambda a, b: a @ b.transpose(0, 2, 1),
                           (f32(2, 17, 8), f32(2, 11, 8)), {"matmul"}),
    "nan_max": (lambda x: np.maximum(x, np.float32(0.5)), (_with_nan(f32(4, 9)),), {"elementwise"}),
    "nan_min": (lambda x: np.minimum(x, np.float32(0.5)), (_with_nan(f32(4, 9)),), {"elementwise"}),
    "nan_row_max": (lambda x: x.max(axis=-1), (_with_nan(f32(4, 9)),), {"row_reduce"}),
    "nan_softmax": (softmax, (_with_nan(f32(4, 9)),), {"row_reduce"}),
    "row_sum_long": (lambda x: x.sum(axis=-1), (f32(3, 20000),), {"row_reduce"}),
    "layernorm_3d": (layernorm, (f32(2, 3, 40),), {"row_reduce"}),
}


# kernels a case must compile to, in order: what fused
FUSED = {
    "softmax": ["row_reduce"],
    "softmax_wide": ["row_reduce"],
    "layernorm": ["row_reduce"],
    "layernorm_3d": ["row_reduce"],
    "matmul_bias_relu": ["matmul"],
    "matmul_edges": ["matmul"],
    "bmm": ["matmul"],
    "column_mean": ["col_reduce"],
    "column_mean_then_relu": ["col_reduce"],
    "row_sum_long": ["row_reduce"],
}


def _example(name):
    ns = runpy.run_path(str(ROOT / "examples" / f"{name}.py"))
    inputs = ns["example_inputs"]
    return ns["model"], tuple(inputs() if callable(inputs) else inputs)


def _check(m, fn, inputs, rtol=2e-4, atol=2e-5):
    out = run_emulated(m, *inputs)
    ref = fn(*inputs)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


def _no_spills(m):
    stats = m.executable.stats
    assert set(stats) == {k.name for k in m.executable.program.kernels}
    for name, s in stats.items():
        assert s.spill_stores == 0 and s.spill_loads == 0, (name, s)
        assert 0 < s.registers <= 255


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernels_compile_and_match_numpy(case):
    fn, inputs, kinds = CASES[case]
    m = compiler.compile(fn, inputs, target="cuda")
    assert kinds <= {k.kind for k in m.executable.program.kernels}
    if case in FUSED:
        assert [k.kind for k in m.executable.program.kernels] == FUSED[case]
    _no_spills(m)
    _check(m, fn, inputs)


# the 128x128 and 128x64 tiles with 8x8 per thread, forced onto small (edge-tile) problems
@pytest.mark.parametrize("config", [0, 1])
@pytest.mark.parametrize("case", ["matmul_big_tile", "matmul_odd_k", "bmm_transposed_rhs",
                                  "matmul_bias_relu"])
def test_large_matmul_tiles(case, config, monkeypatch):
    from compiler.lowering import map_to_gpu

    cfg = map_to_gpu.MATMUL_CONFIGS[config]
    monkeypatch.setattr(map_to_gpu, "MATMUL_CONFIGS", (cfg,))
    fn, inputs, _ = CASES[case]
    m = compiler.compile(fn, inputs, target="cuda")
    k = next(k for k in m.executable.program.kernels if k.kind == "matmul")
    assert k.block == (cfg.tx, cfg.ty)
    _no_spills(m)
    _check(m, fn, inputs)


def test_batched_attention():
    q, k, v = f32(2, 3, 20, 16), f32(2, 3, 13, 16), f32(2, 3, 13, 16)

    def attention(q, k, v):
        s = q @ k.transpose(0, 1, 3, 2) / np.float32(4.0)
        return ops.softmax(s, axis=-1) @ v

    m = compiler.compile(attention, (q, k, v), target="cuda")
    # Q @ Kᵀ, softmax in one row kernel, P @ V with the division fused into A
    assert [k.kind for k in m.executable.program.kernels] == ["matmul", "row_reduce", "matmul"]
    _no_spills(m)
    ref = lambda q, k, v: softmax(q @ k.transpose(0, 1, 3, 2) / 4.0) @ v  # noqa: E731
    _check(m, ref, (q, k, v), rtol=1e-3, atol=1e-4)


def test_nan_semantics_match_cpu():
    x = _with_nan(f32(6, 11))
    fns = [lambda x: np.maximum(x, 0.0), lambda x: np.minimum(x, 0.0),
           lambda x: x.max(axis=-1), lambda x: x.min(axis=0)]
    for fn in fns:
        gpu = run_emulated(compiler.compile(fn, (x,), target="cuda"), x)
        cpu = compiler.compile(fn, (x,))(x)
        np.testing.assert_array_equal(np.isnan(gpu), np.isnan(cpu))
        np.testing.assert_allclose(gpu, cpu, rtol=1e-6)


def test_mlp_example():
    model, inputs = _example("mlp")
    m = compiler.compile(model, inputs, target="cuda")
    assert [k.kind for k in m.executable.program.kernels].count("matmul") == 2
    _no_spills(m)
    _check(m, model, inputs, rtol=1e-3, atol=1e-4)


def test_attention():
    q, k, v = f32(20, 16), f32(20, 16), f32(20, 16)

    def attention(q, k, v):
        return ops.softmax(q @ k.T / np.float32(4.0), axis=-1) @ v

    m = compiler.compile(attention, (q, k, v), target="cuda")
    _no_spills(m)
    _check(m, lambda q, k, v: softmax(q @ k.T / 4.0) @ v, (q, k, v), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "attention"])
def test_example_kernels_compile_without_spills(name):
    model, inputs = _example(name)
    _no_spills(compiler.compile(model, inputs, target="cuda"))


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("case", sorted(CASES))
def test_on_gpu(case):
    fn, inputs, _ = CASES[case]
    m = compiler.compile(fn, inputs, target="cuda")
    np.testing.assert_allclose(m(*inputs), fn(*inputs), rtol=2e-4, atol=2e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("n", [1024, 1031])
def test_large_matmul_on_gpu(n):
    a, b, c = f32(n, n + 4), f32(n + 4, n - 8), f32(n - 8)
    fn = lambda a, b, c: np.maximum(a @ b + c, 0.0)  # noqa: E731
    m = compiler.compile(fn, (a, b, c), target="cuda")
    np.testing.assert_allclose(m(a, b, c), fn(a, b, c), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")
def test_device_pointers_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    from compiler.runtime.cuda import device_pointer

    x = f32(300, 2000)
    m = compiler.compile(softmax, (x,), target="cuda")
    dx = torch.from_numpy(x).cuda()
    out = torch.empty_like(dx)
    m.executable.get(m.func_name).launch([device_pointer(dx), device_pointer(out)])
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), softmax(x), rtol=1e-4, atol=1e-6)
