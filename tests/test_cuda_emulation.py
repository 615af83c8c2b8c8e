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

from compiler.targets.cuda_emu.emu import run_emulated  # noqa: E402
from test_fusion import attention_fn, mha  # noqa: E402  (attention written out in NumPy)

from compiler.targets.cuda.runtime import has_gpu  # noqa: E402

try:  # imported before any kernel runs: the device-pointer tests share torch's buffers
    import torch
except ImportError:
    torch = None

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
    # the math library, not its fast intrinsics: __powf is NaN for a negative base, __sinf and
    # __cosf are far off outside [-pi, pi]
    "pow_negative_base": (lambda x: x ** 3.0 - np.abs(x) ** 0.5, (f32(7, 129),), {"elementwise"}),
    "sin_cos_large": (lambda x: np.sin(x * 1000.0) + np.cos(x * 300.0), (f32(5, 77),),
                      {"elementwise"}),
    # 2^20 points and more: 4 neighbours per thread (float4 accesses; the last dim a multiple
    # of 4), or points a grid apart (an odd last dim)
    "elementwise_vec4": (lambda x, b: np.maximum(x * 2.0 + b, 0.0), (f32(1031, 1028), f32(1028)),
                         {"elementwise"}),
    "elementwise_many_odd": (lambda x: x * 2.0 + 1.0, (f32(1031, 1029),), {"elementwise"}),
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
        assert not s.spills, (name, s)
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
    from compiler.targets.cuda import map_to_gpu

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
    # one flash-attention kernel (test_attention_over_128_head_dim_stays_unfused: the unfused
    # Q @ Kᵀ, softmax row kernel, P @ V with the division fused into A)
    assert [k.kind for k in m.executable.program.kernels] == ["attention"]
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


def _elf_segment_types(path) -> list[int]:
    """p_type of each program header of an ELF64 little-endian shared library."""
    import struct

    data = Path(path).read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]


def test_program_libraries_add_no_tls_module():
    """Each emulated program is a shared library loaded into the test process. Its thread_local
    state (threadIdx, blockIdx, ...) lives in the one runtime library, so a program has no TLS
    segment: hundreds of TLS modules in one process made glibc's loader abort a later
    pthread_create ("_dl_allocate_tls_init: Assertion `listp != NULL' failed")."""
    from compiler.targets.cuda_emu.emu import build

    PT_TLS = 7
    x = f32(5, 9)
    m = compiler.compile(lambda x: np.tanh(x) * 2.0, (x,), target="cuda")
    lib = build(m.executable.program)
    assert PT_TLS not in _elf_segment_types(lib._name)
    np.testing.assert_allclose(run_emulated(m, x), np.tanh(x) * 2.0, rtol=1e-5, atol=1e-6)


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
@pytest.mark.parametrize("launch", ["driver", "pycuda"])
def test_launch_paths_on_gpu(launch, monkeypatch):
    """The same model through each launch path: PyCUDA and cuda-bindings' driver API, with fresh
    inputs on every call (a stale or unwritten output would not match)."""
    if launch == "pycuda":
        pytest.importorskip("pycuda.driver")
    monkeypatch.setenv("AICC_CUDA_LAUNCH", launch)
    fn = lambda x, w, b: softmax(np.maximum(x @ w + b, 0.0))  # noqa: E731
    args = (f32(129, 70), f32(70, 33), f32(33))
    m = compiler.compile(fn, args, target="cuda")
    runner = m.executable.get(m.func_name)
    assert type(runner.dev).__name__ == {"driver": "DriverDevice", "pycuda": "PyCudaDevice"}[launch]
    for _ in range(3):
        args = (f32(129, 70), f32(70, 33), f32(33))
        want = fn(*(a.astype(np.float64) for a in args))
        np.testing.assert_allclose(m(*args), want, rtol=1e-4, atol=1e-6)


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
def test_vec4_elementwise_on_misaligned_device_pointers():
    """The float4 path runs when every pointer is 16-byte aligned; a view one float past that
    takes the scalar path, with the same result."""
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs torch built for CUDA")
    from compiler.targets.cuda.runtime import device_pointer

    fn = lambda x, b: np.maximum(x * 2.0 + b, 0.0)  # noqa: E731
    x, b = f32(1024, 1028), f32(1028)
    m = compiler.compile(fn, (x, b), target="cuda")
    assert "float4" in m.ir("cuda")
    runner = m.executable.get(m.func_name)
    for shift in (0, 1, 2):
        dx = torch.empty(x.size + 4, device="cuda")[shift:shift + x.size]
        dx.copy_(torch.from_numpy(x.ravel()))
        out = torch.full((x.size + 4,), float("nan"), device="cuda")[shift:shift + x.size]
        runner.launch([device_pointer(dx), device_pointer(torch.from_numpy(b).cuda()),
                       device_pointer(out)])
        torch.cuda.synchronize()
        np.testing.assert_allclose(out.cpu().numpy().reshape(x.shape), fn(x, b), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")
def test_device_pointers_on_gpu():
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs torch built for CUDA")
    from compiler.targets.cuda.runtime import device_pointer

    x = f32(300, 2000)
    m = compiler.compile(softmax, (x,), target="cuda")
    dx = torch.from_numpy(x).cuda()
    out = torch.empty_like(dx)
    m.executable.get(m.func_name).launch([device_pointer(dx), device_pointer(out)])
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), softmax(x), rtol=1e-4, atol=1e-6)


# -- attention: fuse-attention + map-to-gpu give one flash-attention kernel ----------------------

from compiler.dialects.aicc_fused import attention_reference  # noqa: E402


def _attention_kernels(m):
    kinds = [k.kind for k in m.executable.program.kernels]
    assert kinds.count("attention") == 1, kinds
    assert m.stats["kernel_ops"].get("aicc_fused.attention") == 1
    return kinds


def _check_attention(m, inputs, ref, rtol=2e-4, atol=2e-5):
    out = run_emulated(m, *inputs)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
    return out


# heads x seq x head dim; heads vary with the sequence to keep the emulation short
ATTENTION_CASES = [(h, n, e) for n, h in ((1, 1), (7, 3), (64, 8), (129, 2)) for e in (16, 64)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("H,L,E", ATTENTION_CASES, ids=lambda v: str(v))
def test_attention_one_kernel(H, L, E, causal):
    q, k, v = f32(H, L, E), f32(H, L, E), f32(H, L, E)
    m = compiler.compile(attention_fn(L, L, E, "causal" if causal else "none"), (q, k, v),
                         target="cuda")
    assert _attention_kernels(m) == ["attention"] and m.stats["kernels"] == 1
    assert ("causal" in m.ir("tensor")) == causal
    _no_spills(m)
    ref = attention_reference(q, k, v, scale=1 / np.sqrt(E), causal=causal)
    _check_attention(m, (q, k, v), ref)


@pytest.mark.parametrize("L,S,E,F", [(33, 45, 128, 128), (20, 9, 17, 9), (5, 70, 96, 40)],
                         ids=lambda v: str(v))
def test_attention_head_dims_and_cross_lengths(L, S, E, F):
    """Head dims padded to the thread's float4 groups (17, 9, 40), 4 threads per row (96, 128),
    L != S (cross attention), 32-key tiles for head dims over 64."""
    q, k, v = f32(2, L, E), f32(2, S, E), f32(2, S, F)
    m = compiler.compile(attention_fn(L, S, E), (q, k, v), target="cuda")
    assert _attention_kernels(m) == ["attention"]
    _no_spills(m)
    _check_attention(m, (q, k, v), attention_reference(q, k, v, scale=1 / np.sqrt(E)))


def test_attention_additive_mask():
    L, S, E = 40, 70, 16
    q, k, v = f32(3, L, E), f32(3, S, E), f32(3, S, E)
    mask = np.where(rng.random((L, S)) < 0.6, 0.0, -np.inf).astype(np.float32)
    mask[:, 0] = 0.0
    mask += f32(L, S) * np.float32(0.5)
    m = compiler.compile(attention_fn(L, S, E, "add"), (q, k, v, mask), target="cuda")
    assert _attention_kernels(m) == ["attention"]
    _no_spills(m)
    ref = attention_reference(q, k, v, mask, scale=1 / np.sqrt(E), mask_kind="add")
    _check_attention(m, (q, k, v, mask), ref)


def test_attention_boolean_mask_and_fully_masked_row():
    """A boolean mask (kept where true, -inf elsewhere); row 3 sees no key: NaN (0/0), as the
    CPU's fused kernel and the unfused softmax give."""
    L, S, E = 70, 33, 64
    q, k, v = f32(2, L, E), f32(2, S, E), f32(2, S, E)
    keep = (rng.random((L, S)) < 0.5).astype(np.float32)
    keep[:, 1] = 1.0
    keep[3, :] = 0.0
    fn = attention_fn(L, S, E, "bool")
    m = compiler.compile(fn, (q, k, v, keep), target="cuda")
    assert _attention_kernels(m) == ["elementwise", "attention"]  # the mask's compare, then it
    _no_spills(m)
    with np.errstate(invalid="ignore"):
        ref = attention_reference(q, k, v, keep > 0, scale=1 / np.sqrt(E), mask_kind="keep")
    out = run_emulated(m, q, k, v, keep)
    cpu = compiler.compile(fn, (q, k, v, keep))(q, k, v, keep)
    assert np.isnan(out[:, 3]).all() and not np.isnan(np.delete(out, 3, axis=1)).any()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(cpu))
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-5)


def test_attention_finite_fill_masks_with_the_fill():
    """A boolean mask filled with -1e9 (not -inf): a fully masked row averages v, like the CPU."""
    L, S, E = 9, 20, 16
    q, k, v = f32(2, L, E), f32(2, S, E), f32(2, S, E)
    keep = (rng.random((L, S)) < 0.5).astype(np.float32)
    keep[2, :] = 0.0
    fn = attention_fn(L, S, E, "bool", fill=-1e9)
    m = compiler.compile(fn, (q, k, v, keep), target="cuda")
    _attention_kernels(m)
    ref = attention_reference(q, k, v, keep > 0, scale=1 / np.sqrt(E), mask_kind="keep",
                              fill=-1e9)
    out = _check_attention(m, (q, k, v, keep), ref)
    np.testing.assert_allclose(out[:, 2], np.broadcast_to(v.mean(axis=1), out[:, 2].shape),
                               rtol=1e-4, atol=1e-5)


def test_attention_batch_broadcast():
    """q (2, 3, L, E) against k and v shared by the leading batch dim: one kernel reading k and
    v at broadcast (zero) batch indices; a per-batch additive mask broadcast over heads."""
    L, S, E = 13, 21, 16
    q, k, v = f32(2, 3, L, E), f32(3, S, E), f32(3, S, E)
    mask = f32(2, 1, L, S)
    m = compiler.compile(attention_fn(L, S, E, "add"), (q, k, v, mask), target="cuda")
    assert _attention_kernels(m) == ["attention"]
    _no_spills(m)
    ref = attention_reference(q, k, v, mask, scale=1 / np.sqrt(E), mask_kind="add")
    _check_attention(m, (q, k, v, mask), ref)


@pytest.mark.parametrize("S,H,E", [(7, 4, 16), (129, 2, 64)], ids=lambda v: str(v))
def test_multi_head_attention_reads_heads_in_place(S, H, E):
    """The head split and merge fold into the attention kernel's indexing: 4 projection
    matmuls and one attention kernel, no transpose."""
    fn = mha(S, H, E)
    x = f32(S, H * E)
    m = compiler.compile(fn, (x,), target="cuda")
    kinds = _attention_kernels(m)
    assert sorted(kinds) == ["attention"] + ["matmul"] * 4, kinds
    assert "aicc.transpose" not in m.ir("tensor") and "causal" in m.ir("tensor")
    _no_spills(m)
    ref = fn(x.astype(np.float64))
    _check_attention(m, (x,), ref, rtol=1e-3, atol=1e-4)


def test_attention_over_128_head_dim_stays_unfused():
    q, k, v = f32(2, 9, 160), f32(2, 9, 160), f32(2, 9, 160)
    fn = attention_fn(9, 9, 160)
    m = compiler.compile(fn, (q, k, v), target="cuda")
    kinds = [k.kind for k in m.executable.program.kernels]
    assert "attention" not in kinds and "aicc_fused.attention" not in m.ir("tensor")
    assert kinds == ["matmul", "row_reduce", "matmul"]
    _check_attention(m, (q, k, v), attention_reference(q, k, v, scale=1 / np.sqrt(160)),
                     rtol=1e-3, atol=1e-4)


def test_attention_kernel_resources():
    """NVRTC (sm_90): no spills, at most 32 KB of shared memory (the k and v tiles) for the head
    dims up to 128."""
    for E in (16, 64, 128):
        q = f32(2, 70, E)
        m = compiler.compile(attention_fn(70, 70, E, "causal"), (q, q, q), target="cuda")
        _no_spills(m)
        (s,) = m.executable.stats.values()
        assert s.shared_bytes <= 32 * 1024, (E, s)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("kind", ["none", "causal", "add"])
def test_attention_on_gpu(kind):
    L, E = 300, 64
    q, k, v = f32(8, L, E), f32(8, L, E), f32(8, L, E)
    extra = (f32(L, L),) if kind == "add" else ()
    fn = attention_fn(L, L, E, kind)
    m = compiler.compile(fn, (q, k, v, *extra), target="cuda")
    assert _attention_kernels(m) == ["attention"]
    ref = fn(*(a.astype(np.float64) for a in (q, k, v, *extra)))
    np.testing.assert_allclose(m(q, k, v, *extra), ref, rtol=2e-4, atol=2e-5)
