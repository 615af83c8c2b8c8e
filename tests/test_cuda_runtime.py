"""The CUDA runtime's code paths that run without a GPU: the driver-API argument packing and
error reporting (against cuda-bindings itself), the plan runner's buffer caching and its
device-pointer entry (on the emulated device), the cubin cache, the register-cap fallback."""

from __future__ import annotations

import ctypes
import shutil

import numpy as np
import pytest

import compiler
from compiler import ops
from compiler.errors import CompileError

driver = pytest.importorskip("cuda.bindings.driver")

from compiler.targets.cuda.runtime import (  # noqa: E402
    CudaError,
    DriverDevice,
    KernelStats,
    NVRTCCompiler,
    PlanRunner,
    check_driver,
    device_pointer,
    kernel_params,
    relax_launch_bounds,
)

rng = np.random.default_rng(3)


def test_kernel_params_pack_into_a_void_pointer_array():
    ptrs = [0x7F0000001000, 0x7F0000002040, 5]
    packed = driver._HelperKernelParams(kernel_params(ptrs))  # what cuLaunchKernel does with it
    array = (ctypes.c_void_p * len(ptrs)).from_address(packed.ckernelParams)
    assert [ctypes.c_uint64.from_address(array[i]).value for i in range(len(ptrs))] == ptrs


def test_driver_errors_name_the_call_and_the_result():
    with pytest.raises(CudaError, match=r"cuLaunchKernel\(k\) failed: CUDA_ERROR_INVALID_VALUE"):
        check_driver((driver.CUresult.CUDA_ERROR_INVALID_VALUE,), "cuLaunchKernel(k)")
    assert check_driver((driver.CUresult.CUDA_SUCCESS, 42), "cuMemAlloc") == 42
    assert check_driver((driver.CUresult.CUDA_SUCCESS,), "cuInit") == ()


class _FakeDriver:
    """Records the driver calls DriverDevice makes."""

    CUresult = driver.CUresult

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            if name == "cuModuleGetFunction":
                return (driver.CUresult.CUDA_SUCCESS, "fn:" + args[1].decode())
            if name == "cuModuleLoadData":
                return (driver.CUresult.CUDA_SUCCESS, "module:" + args[0].decode())
            return (driver.CUresult.CUDA_SUCCESS,)
        return call


def test_driver_launch_pads_grid_and_block_and_packs_pointers():
    dev = DriverDevice.__new__(DriverDevice)
    loaded = []
    dev.d, dev.modules, dev.functions, dev.ctx = _FakeDriver(), {}, {}, "ctx"
    dev.load = lambda name: loaded.append(name) or f"cubin-of-{name}".encode()
    dev.launch("k0", (4, 2), (16, 16), [0x1000, 0x2000])
    dev.launch("k0", (7,), (256,), [0x3000])
    calls = [c for c in dev.d.calls if c[0] == "cuLaunchKernel"]
    # the kernel's own module, loaded on its first launch and looked up once
    assert loaded == ["k0"]
    assert [c for c in dev.d.calls if c[0] == "cuModuleLoadData"] == [
        ("cuModuleLoadData", (b"cubin-of-k0",))]
    assert [c for c in dev.d.calls if c[0] == "cuModuleGetFunction"] == [
        ("cuModuleGetFunction", ("module:cubin-of-k0", b"k0"))]
    f, *dims, smem, stream, params, extra = calls[0][1]
    assert f == "fn:k0" and dims == [4, 2, 1, 16, 16, 1] and (smem, stream, extra) == (0, 0, 0)
    assert params == ((0x1000, 0x2000), (ctypes.c_void_p, ctypes.c_void_p))
    assert calls[1][1][1:7] == (7, 1, 1, 256, 1, 1)


def test_device_pointer_reads_the_cuda_array_interface():
    class Fake:
        __cuda_array_interface__ = {"data": (0xABC000, False), "shape": (2, 3),
                                    "typestr": "<f4", "strides": (12, 4), "version": 3}

    class Strided:
        __cuda_array_interface__ = {"data": (0xABC000, False), "shape": (2, 3),
                                    "typestr": "<f4", "strides": (4, 8), "version": 3}

    assert device_pointer(Fake()) == 0xABC000 and device_pointer(77) == 77
    with pytest.raises(CompileError, match="contiguous"):
        device_pointer(Strided())
    with pytest.raises(CompileError, match="not a device array"):
        device_pointer(np.zeros(3))


def test_cubin_cache_is_keyed_by_source(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings.nvrtc")
    monkeypatch.setenv("AICC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AICC_CACHE", "1")
    src = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n'
    first = NVRTCCompiler("sm_90").compile(src)
    again = NVRTCCompiler("sm_90").compile(src)
    other = NVRTCCompiler("sm_90").compile(src.replace("1.0f", "2.0f"))
    assert not first.cached and again.cached and not other.cached
    assert again.image == first.image and again.stats == first.stats
    assert NVRTCCompiler("sm_80").compile(src).cached is False  # the arch is in the key


def test_spilling_register_cap_is_dropped():
    src = ('extern "C" __global__ void __launch_bounds__(256, 2) a_k0(float* p) {}\n'
           'extern "C" __global__ void __launch_bounds__(256, 2) a_k1(float* p) {}\n')
    out = relax_launch_bounds(src, {"a_k0": KernelStats(128, 0, 8, 8), "a_k1": KernelStats(90)})
    assert "__launch_bounds__(256) a_k0(" in out and "__launch_bounds__(256, 2) a_k1(" in out
    # statistics read from the cubin (an empty ptxas log): a stack frame may be spills
    out = relax_launch_bounds(src, {"a_k0": KernelStats(64, stack_bytes=32, source="cubin"),
                                    "a_k1": KernelStats(64, stack_bytes=32)})
    assert "__launch_bounds__(256) a_k0(" in out and "__launch_bounds__(256, 2) a_k1(" in out


needs_emulation = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@needs_emulation
def test_plan_runner_allocates_once_and_takes_device_pointers():
    pytest.importorskip("cuda.bindings.nvrtc")
    from compiler.targets.cuda_emu.emu import EmuDevice, build

    def attention(q, k, v):
        return ops.softmax(q @ k.transpose(0, 2, 1), axis=-1) @ v

    # head dim 136: over what the fused attention kernel takes, so three kernels and the
    # scores and probabilities in device memory that the runner allocates (the workspace)
    q, k, v = (rng.standard_normal((2, 9, 136)).astype(np.float32) for _ in range(3))
    m = compiler.compile(attention, (q, k, v), target="cuda")
    plan = m.executable.program.plans[m.func_name]
    dev = EmuDevice(build(m.executable.program))
    runner = PlanRunner(plan, dev, 3, 1)
    e = np.exp(q @ k.transpose(0, 2, 1) - (q @ k.transpose(0, 2, 1)).max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ v
    out = np.empty_like(want)
    runner(q, k, v, out)
    after_first = runner.allocations
    assert after_first > 0
    for _ in range(2):
        out[:] = 0
        runner(q, k, v, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    assert runner.allocations == after_first  # nothing allocated after the first call
    # device-resident buffers: no copies in or out
    ptrs = [dev.alloc(x.nbytes) for x in (q, k, v, out)]
    for p, x in zip(ptrs, (q, k, v)):
        dev.htod(p, x)
    runner.launch(ptrs)
    got = np.empty_like(out)
    dev.dtoh(got, ptrs[3])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(CompileError, match="3 inputs and 1 outputs"):
        runner.launch(ptrs[:2])


@needs_emulation
def test_kernels_build_in_the_background_and_load_on_their_first_launch(monkeypatch):
    """Each kernel is an NVRTC program of its own, built on a background thread from compile()
    on, and loaded onto the device when it is first launched (the emulated device stands in
    for the GPU and checks the numbers)."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from compiler.targets.cuda import runtime
    from compiler.targets.cuda_emu.emu import EmuDevice, build

    def attention(q, k, v):
        return ops.softmax(q @ k.transpose(0, 2, 1), axis=-1) @ v

    q, k, v = (rng.standard_normal((2, 9, 136)).astype(np.float32) for _ in range(3))
    m = compiler.compile(attention, (q, k, v), target="cuda")
    exe = m.executable
    names = list(exe.program.kernel_sources)
    assert len(names) == 3 and m.stats["kernels_loaded"] == 0
    exe.wait()
    assert exe.kernels_built == 3
    for name in names:  # each cubin holds its kernel alone
        assert set(exe.kernel_cubin(name).stats) == {name}
    lib = build(exe.program)

    class FirstLaunchLoads(EmuDevice):
        def __init__(self, load):
            super().__init__(lib)
            self.load, self.loaded = load, []

        def launch(self, name, grid, block, ptrs):
            if name not in self.loaded:  # as DriverDevice: the kernel's cubin, now
                assert self.load(name)[:4] == b"\x7fELF"
                self.loaded.append(name)
            super().launch(name, grid, block, ptrs)

    monkeypatch.setattr(runtime, "has_gpu", lambda: True)
    monkeypatch.setattr(runtime, "open_device", FirstLaunchLoads)
    e = np.exp(q @ k.transpose(0, 2, 1) - (q @ k.transpose(0, 2, 1)).max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ v
    for _ in range(2):
        np.testing.assert_allclose(m(q, k, v), want, rtol=1e-4, atol=1e-5)
        assert m.stats["kernels_loaded"] == 3 and exe.kernels_loaded == 3  # once each


def test_launch_path_is_chosen_by_aicc_cuda_launch(monkeypatch):
    from compiler.targets.cuda import runtime

    made = []
    monkeypatch.setattr(runtime, "DriverDevice", lambda load: made.append("driver") or "driver")
    monkeypatch.setattr(runtime, "PyCudaDevice", lambda load: made.append("pycuda") or "pycuda")
    monkeypatch.setenv("AICC_CUDA_LAUNCH", "driver")
    assert runtime.open_device(None) == "driver"
    monkeypatch.setenv("AICC_CUDA_LAUNCH", "cublas")
    with pytest.raises(CompileError, match="AICC_CUDA_LAUNCH='cublas': expected one of auto, pycuda, driver"):
        runtime.open_device(None)
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        monkeypatch.setenv("AICC_CUDA_LAUNCH", "pycuda")
        with pytest.raises(CompileError, match="PyCUDA is not installed"):
            runtime.open_device(None)
        monkeypatch.setenv("AICC_CUDA_LAUNCH", "auto")
        assert runtime.open_device(None) == "driver"  # auto, without PyCUDA
    else:
        monkeypatch.setenv("AICC_CUDA_LAUNCH", "auto")
        assert runtime.open_device(None) == "pycuda"  # auto prefers PyCUDA
