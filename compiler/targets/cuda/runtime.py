"""CUDA runtime: NVRTC compiles the emitted CUDA C to a cubin; a device runs the host plan.

NVRTC (from the `nvidia-cuda-nvrtc` wheel, through `cuda-bindings`) runs on any machine, GPU or
not. Each kernel is its own NVRTC program, built on a background thread from compile() on (or
on its first launch, whichever comes first), so its ptxas statistics (registers, shared memory,
spills) are known without a GPU, and loaded onto the device on its first launch. Running needs an NVIDIA GPU: kernels launch through PyCUDA when it is
installed, else through cuda-bindings' driver API, in the device's primary context (so torch or
cupy can share buffers). Cubins are cached on disk, keyed by source, options and NVRTC version.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.cache import CompileCache, cache_enabled
from compiler.codegen.cuda.common import INT32_LIMIT
from compiler.errors import CompileError
from compiler.symbolic import Sym, evaluate_size

DEFAULT_ARCH = "sm_90"  # without a GPU: Hopper
NO_GPU_MESSAGE = "running the cuda target needs an NVIDIA GPU with a CUDA driver; none was found"


# ------------------------------------------------------------------------------ NVRTC


def _wheel_lib_dirs() -> list[Path]:
    """Library folders of the nvidia-* wheels (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib)."""
    try:
        import nvidia  # namespace package of the wheels
    except ImportError:
        return []
    dirs = []
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib"):
            if (Path(root) / sub).is_dir():
                dirs.append(Path(root) / sub)
    return dirs


_nvrtc_module = None


def nvrtc():
    """cuda.bindings.nvrtc, with libnvrtc from the wheel made loadable."""
    global _nvrtc_module
    if _nvrtc_module is not None:
        return _nvrtc_module
    try:
        from cuda.bindings import nvrtc as mod
    except ImportError:
        raise CompileError("the cuda target needs NVRTC: pip install 'aicc[cuda]' "
                           "(cuda-bindings and nvidia-cuda-nvrtc)") from None
    try:
        mod.nvrtcVersion()
    except Exception:
        # cuda-bindings looks for libnvrtc on the loader path; load the wheel's copy globally
        # so its dlopen finds it already mapped.
        for d in _wheel_lib_dirs():
            for lib in sorted(d.glob("libnvrtc.so*")) + sorted(d.glob("libnvrtc-builtins.so*")):
                try:
                    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass
        try:
            mod.nvrtcVersion()
        except Exception as e:
            raise CompileError(f"cannot load NVRTC ({e}); install nvidia-cuda-nvrtc") from None
    _nvrtc_module = mod
    return mod


def nvrtc_version() -> tuple[int, int]:
    err, major, minor = nvrtc().nvrtcVersion()
    return major, minor


@dataclass
class KernelStats:
    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    # "ptxas": from ptxas' verbose log; "cubin": read from the cubin's ELF because the log had
    # none (NVRTC 13.0 leaves it empty once the process has initialized the CUDA driver), so the
    # spill counts are unknown (0): a stack frame may be spills or a local array
    source: str = "ptxas"

    @property
    def spills(self) -> bool:
        """ptxas reported spill stores or loads."""
        return bool(self.spill_stores or self.spill_loads)

    @property
    def may_spill(self) -> bool:
        """Spills, or a stack frame whose spill counts are unknown (statistics from the cubin)."""
        return self.spills or (self.source == "cubin" and self.stack_bytes > 0)

    def __str__(self) -> str:
        if self.source == "cubin":
            return (f"{self.registers} registers, {self.shared_bytes} B shared, "
                    f"{self.stack_bytes} B stack frame (from the cubin)")
        return (f"{self.registers} registers, {self.shared_bytes} B shared, "
                f"{self.spill_stores} B spill stores, {self.spill_loads} B spill loads")


def parse_ptxas_log(log: str) -> dict[str, KernelStats]:
    """Per-kernel statistics from the `-Xptxas -v` part of an NVRTC log."""
    stats: dict[str, KernelStats] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\S+)", line) or re.search(
            r"Compiling entry function '([^']+)'", line)
        if m:
            current = stats.setdefault(m.group(1), KernelStats())
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current.registers = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current.shared_bytes = int(s.group(1)) if s else 0
    return stats


_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT = 0x11, 0x2F
_SM90_RESERVED_SMEM = 1024  # sm_90 cubins count the block's reserved shared memory in .nv.shared


def cubin_stats(image: bytes) -> dict[str, KernelStats]:
    """Per-kernel registers, stack frame and static shared memory read from a cubin's ELF: the
    `.nv.info` section's EIATTR_REGCOUNT and EIATTR_FRAME_SIZE records (format 4: a u32 symbol
    index and a u32 value) and the size of `.nv.shared.<kernel>`. Spill counts are not in the
    cubin."""
    import struct

    if image[:4] != b"\x7fELF" or image[4] != 2:
        return {}
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    # (name, type, flags, addr, offset, size, link, info, align, entsize)
    secs = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]

    def cstr(table: int, off: int) -> str:
        start = secs[table][4] + off
        return image[start:image.index(b"\0", start)].decode()

    names = [cstr(shstrndx, sec[0]) for sec in secs]
    symtab = names.index(".symtab") if ".symtab" in names else None
    if symtab is None:
        return {}
    sym = secs[symtab]
    symbols = [cstr(sym[6], struct.unpack_from("<I", image, sym[4] + 24 * i)[0])
               for i in range(sym[5] // 24)]
    reserved = any(n.startswith(".nv.reservedSmem") for n in symbols)
    stats: dict[str, KernelStats] = {}
    for sec, name in zip(secs, names):
        if name == ".nv.info":
            data, i = image[sec[4]:sec[4] + sec[5]], 0
            while i + 4 <= len(data):
                fmt, attr, size = data[i], data[i + 1], struct.unpack_from("<H", data, i + 2)[0]
                if fmt != 4:  # formats 1-3 carry their value in the 2 bytes
                    i += 4 if fmt != 1 else 2
                    continue
                if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and size == 8:
                    index, value = struct.unpack_from("<II", data, i + 4)
                    st = stats.setdefault(symbols[index], KernelStats(source="cubin"))
                    if attr == _EIATTR_REGCOUNT:
                        st.registers = value
                    else:
                        st.stack_bytes = value
                i += 4 + size
    for sec, name in zip(secs, names):
        if name.startswith(".nv.shared.") and name[len(".nv.shared."):] in stats:
            size = sec[5] - (_SM90_RESERVED_SMEM if reserved else 0)
            stats[name[len(".nv.shared."):]].shared_bytes = max(size, 0)
    return stats


def kernel_stats(log: str, image: bytes) -> dict[str, KernelStats]:
    """ptxas' statistics from the log, and from the cubin for a kernel the log leaves out."""
    stats = parse_ptxas_log(log)
    for name, st in cubin_stats(image).items():
        if name not in stats or not stats[name].registers:
            stats[name] = st
    return stats


@dataclass
class Cubin:
    image: bytes
    log: str
    arch: str
    stats: dict[str, KernelStats]
    seconds: float = 0.0
    cached: bool = False


class NVRTCCompiler:
    """CUDA C -> cubin through NVRTC, with a disk cache."""

    def __init__(self, arch: str | None = None, options: tuple[str, ...] = ()):
        self.arch = arch or DEFAULT_ARCH
        # Fast division and square root (within 2 ulp) and FMA contraction, but not
        # --use_fast_math: that also swaps the math library for its approximate intrinsics
        # (__powf is NaN for a negative base, __sinf is wrong away from [-pi, pi]) and flushes
        # denormals. A kernel that wants an intrinsic where it is exact enough names it
        # (attention's __expf of arguments <= 0).
        self.options = ("--std=c++17", f"--gpu-architecture={self.arch}", "-Xptxas", "-v",
                        "--fmad=true", "--prec-div=false", "--prec-sqrt=false", *options)

    def compile(self, source: str, name: str = "aicc.cu") -> Cubin:
        mod = nvrtc()
        version = nvrtc_version()
        key = hashlib.sha256(
            json.dumps([source, self.options, version]).encode()).hexdigest()[:32]
        # cubins live in the compile cache's store (compiler/cache.py): checksummed, written
        # atomically; AICC_CACHE=0 turns it off
        cache = CompileCache("cubin") if cache_enabled() else None
        entry = cache.get(key) if cache is not None else None
        if entry is not None:
            log = entry.meta["log"]
            image = bytes(entry.blobs["cubin"])
            return Cubin(image, log, self.arch, kernel_stats(log, image), 0.0, cached=True)
        t0 = time.perf_counter()
        err, prog = mod.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
        _check(err, "nvrtcCreateProgram")
        try:
            (err,) = mod.nvrtcCompileProgram(prog, len(self.options),
                                              [o.encode() for o in self.options])
            log = _program_log(mod, prog)
            if err != mod.nvrtcResult.NVRTC_SUCCESS:
                raise CompileError(describe_nvrtc_failure(source, log))
            err, size = mod.nvrtcGetCUBINSize(prog)
            _check(err, "nvrtcGetCUBINSize")
            image = bytearray(size)
            (err,) = mod.nvrtcGetCUBIN(prog, image)
            _check(err, "nvrtcGetCUBIN")
        finally:
            mod.nvrtcDestroyProgram(prog)
        seconds = time.perf_counter() - t0
        if cache is not None:
            cache.put(key, {"log": log, "arch": self.arch}, {"cubin": bytes(image)})
        return Cubin(bytes(image), log, self.arch, kernel_stats(log, bytes(image)), seconds)


def _check(err, what: str) -> None:
    mod = nvrtc()
    if err != mod.nvrtcResult.NVRTC_SUCCESS:
        _, msg = mod.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC {what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")


def _program_log(mod, prog) -> str:
    err, size = mod.nvrtcGetProgramLogSize(prog)
    # a mutable buffer: NVRTC writes into it (into `b" " * 1`, CPython's shared one-byte
    # object, it would turn every space the process encodes afterwards into a NUL)
    buf = bytearray(size)
    mod.nvrtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b"\0 ").decode(errors="replace")


def describe_nvrtc_failure(source: str, log: str) -> str:
    """The kernel, the source line and NVRTC's log for a failed compile."""
    lines = source.splitlines()
    m = re.search(r"\((\d+)\): (?:catastrophic )?error", log)
    where = ""
    if m:
        n = int(m.group(1))
        kernel = "?"
        for text in reversed(lines[:n]):
            k = re.search(r"__global__ void (?:__launch_bounds__\([\d, ]+\) )?(\w+)\(", text)
            if k:
                kernel = k.group(1)
                break
        code = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        where = f" in kernel {kernel}, line {n}: `{code}`"
    return f"NVRTC failed to compile the generated CUDA C{where}\n{log.strip()}"


def relax_launch_bounds(source: str, stats: dict[str, KernelStats]) -> str:
    """`source` with the minimum-blocks argument of __launch_bounds__ removed from every kernel
    that spills (or may: a stack frame in a cubin whose log said nothing)."""
    for name, s in stats.items():
        if s.may_spill:
            source = re.sub(rf"__launch_bounds__\((\d+), \d+\) {re.escape(name)}\(",
                            rf"__launch_bounds__(\1) {name}(", source)
    return source


# ------------------------------------------------------------------------------ devices


def has_gpu() -> bool:
    """True when a CUDA driver with at least one device is present."""
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            import pycuda.driver as drv

            drv.init()
            return drv.Device.count() > 0
        except Exception:
            return False
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, n = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and n > 0
    except Exception:
        return False


def device_arch() -> str | None:
    """sm_XY of device 0, or None without a GPU."""
    if not has_gpu():
        return None
    from cuda.bindings import driver

    attrs = driver.CUdevice_attribute
    _, dev = driver.cuDeviceGet(0)
    _, major = driver.cuDeviceGetAttribute(attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return f"sm_{major}{minor}"


class CudaError(RuntimeError):
    """A CUDA driver call failed: names the call and the CUresult."""


def kernel_params(ptrs, dims=(), index_type: str = "int") -> tuple:
    """cuLaunchKernel's kernelParams for a kernel taking pointers, then the values of its
    dynamic dims (C `index_type`): cuda-bindings packs a (values, ctypes types) pair into the
    void** array of pointers to each argument."""
    dim_type = ctypes.c_int if index_type == "int" else ctypes.c_longlong
    return ((*(int(p) for p in ptrs), *(int(d) for d in dims)),
            (*(ctypes.c_void_p for _ in ptrs), *(dim_type for _ in dims)))


def check_driver(result, call: str):
    """The values a cuda-bindings driver call returned after its CUresult, or CudaError."""
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", str(err))
        try:
            _, msg = driver.cuGetErrorString(err)
            msg = msg.decode() if isinstance(msg, bytes) else str(msg)
        except Exception:  # no driver library to ask
            msg = ""
        raise CudaError(f"{call} failed: {name}" + (f" ({msg})" if msg else ""))
    return rest[0] if len(rest) == 1 else tuple(rest)


class DriverDevice:
    """cuda-bindings' driver API on device 0's primary context (the one torch and cupy use, so
    buffers can be shared). Launches go to the legacy default stream (0)."""

    def __init__(self, load: Callable[[str], bytes]):
        """`load(kernel)`: the cubin holding that kernel, asked for on its first launch."""
        from cuda.bindings import driver

        self.d = driver
        check_driver(driver.cuInit(0), "cuInit")
        dev = check_driver(driver.cuDeviceGet(0), "cuDeviceGet")
        self.ctx = check_driver(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check_driver(driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.load = load
        self.modules: dict[str, object] = {}
        self.functions: dict[str, object] = {}

    def current(self) -> None:
        """Make the primary context current on the calling thread (contexts are per thread)."""
        check_driver(self.d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def alloc(self, n: int) -> int:
        return int(check_driver(self.d.cuMemAlloc(max(n, 1)), f"cuMemAlloc({n})"))

    def free(self, ptr: int) -> None:
        check_driver(self.d.cuMemFree(ptr), "cuMemFree")

    def htod(self, ptr: int, a: np.ndarray) -> None:
        if a.nbytes:
            check_driver(self.d.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")

    def dtoh(self, a: np.ndarray, ptr: int) -> None:
        if a.nbytes:
            check_driver(self.d.cuMemcpyDtoH(a.ctypes.data, ptr, a.nbytes), "cuMemcpyDtoH")

    def dtod(self, dst: int, src: int, n: int) -> None:
        if n:
            check_driver(self.d.cuMemcpyDtoDAsync(dst, src, n, 0), "cuMemcpyDtoDAsync")

    def launch(self, name: str, grid, block, ptrs, dims=(), index_type: str = "int") -> None:
        f = self.functions.get(name)
        if f is None:  # the kernel's first launch: load its module
            module = self.modules[name] = check_driver(
                self.d.cuModuleLoadData(self.load(name)), f"cuModuleLoadData({name})")
            f = self.functions[name] = check_driver(
                self.d.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        g = (*grid, 1, 1)[:3]
        b = (*block, 1, 1)[:3]
        check_driver(self.d.cuLaunchKernel(f, *g, *b, 0, 0, kernel_params(ptrs, dims, index_type),
                                           0),
                     f"cuLaunchKernel({name}, grid {g}, block {b})")

    def sync(self) -> None:
        check_driver(self.d.cuCtxSynchronize(), "cuCtxSynchronize")


_PYCUDA_CONTEXT = None
_PYCUDA_PUSHED = threading.local()


def _pycuda_context():
    """Device 0's primary context through PyCUDA, retained once per process."""
    global _PYCUDA_CONTEXT
    if _PYCUDA_CONTEXT is None:
        import pycuda.driver as drv

        drv.init()
        _PYCUDA_CONTEXT = drv.Device(0).retain_primary_context()
    return _PYCUDA_CONTEXT


class _PopAtExit:
    """Pops the context this thread pushed when the thread ends, or at exit for the main
    thread: PyCUDA aborts the process if a thread's context stack is not empty when it goes."""

    def __init__(self, drv, ctx):
        self.drv, self.ctx = drv, ctx
        if threading.current_thread() is threading.main_thread():
            atexit.register(self.pop)

    def pop(self) -> None:
        try:
            if self.drv.Context.get_current() == self.ctx:
                self.drv.Context.pop()
        except Exception:  # noqa: BLE001 - the driver may be gone with the process
            pass

    def __del__(self):  # the thread's locals go when it ends
        if threading.current_thread() is not threading.main_thread():
            self.pop()


class PyCudaDevice(DriverDevice):
    """PyCUDA on device 0's primary context."""

    def __init__(self, load: Callable[[str], bytes]):
        import pycuda.driver as drv

        self.drv = drv
        self.ctx = _pycuda_context()
        self.current()
        self.load = load
        self.modules = {}
        self.functions = {}
        self.allocs: dict[int, object] = {}

    def current(self) -> None:
        """Make the primary context current on the calling thread: pushed once per thread,
        popped when the thread ends (at exit for the main thread)."""
        if self.drv.Context.get_current() != self.ctx:
            self.ctx.push()
            _PYCUDA_PUSHED.popper = _PopAtExit(self.drv, self.ctx)

    def alloc(self, n: int) -> int:
        a = self.drv.mem_alloc(max(n, 1))
        self.allocs[int(a)] = a
        return int(a)

    def free(self, ptr: int) -> None:
        self.allocs.pop(ptr).free()

    def htod(self, ptr: int, a: np.ndarray) -> None:
        if a.nbytes:
            self.drv.memcpy_htod(ptr, a)

    def dtoh(self, a: np.ndarray, ptr: int) -> None:
        if a.nbytes:
            self.drv.memcpy_dtoh(a, ptr)

    def dtod(self, dst: int, src: int, n: int) -> None:
        if n:
            self.drv.memcpy_dtod(dst, src, n)

    def launch(self, name: str, grid, block, ptrs, dims=(), index_type: str = "int") -> None:
        f = self.functions.get(name)
        if f is None:  # the kernel's first launch: load its module
            self.modules[name] = self.drv.module_from_buffer(self.load(name))
            f = self.functions[name] = self.modules[name].get_function(name)
        dim_type = np.int32 if index_type == "int" else np.int64
        f(*[np.uintp(p) for p in ptrs], *[dim_type(d) for d in dims],
          block=(*block, 1, 1)[:3], grid=(*grid, 1, 1)[:3])

    def sync(self) -> None:
        self.drv.Context.synchronize()


LAUNCH_PATHS = ("auto", "pycuda", "driver")


def open_device(load: Callable[[str], bytes]):
    """The device that launches kernels; `load(kernel)` gives a kernel's cubin on its first
    launch. AICC_CUDA_LAUNCH picks the path: `pycuda`, `driver` (cuda-bindings' driver API) or
    `auto` (the default: PyCUDA when it is installed, else the driver API)."""
    choice = os.environ.get("AICC_CUDA_LAUNCH", "auto") or "auto"
    if choice not in LAUNCH_PATHS:
        raise CompileError(f"AICC_CUDA_LAUNCH={choice!r}: expected one of {', '.join(LAUNCH_PATHS)}")
    if choice == "driver":
        return DriverDevice(load)
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        if choice == "pycuda":
            raise CompileError("AICC_CUDA_LAUNCH=pycuda, but PyCUDA is not installed: "
                               "pip install 'aicc[pycuda]'") from None
        return DriverDevice(load)
    return PyCudaDevice(load)


# ------------------------------------------------------------------------------ host plans


class PlanRunner:
    """Runs a HostPlan on a device: buffers, copies and one launch per kernel.

    Every device buffer is allocated once, on the first call, and reused by every call after
    it: globals (copied in once), plan-memory's workspace, the plan's own allocations (its
    frees are no-ops) and the staging buffers of the inputs and outputs. A call from NumPy
    copies the inputs in, launches, and copies the outputs out; `launch` runs on device
    pointers the caller owns (torch or cupy tensors) with no copy and no sync.

    A plan with dynamic dims binds them from the inputs' shapes on each call (once per
    distinct shapes): buffer sizes, view offsets, copy sizes and launch grids are expressions
    of the dims, evaluated then, and each buffer grows (never shrinks) to the largest size a
    call has needed.
    """

    def __init__(self, plan, device, n_inputs: int, n_outputs: int):
        self.plan, self.dev = plan, device
        self.n_in, self.n_out = n_inputs, n_outputs
        self.persistent: dict[int, int] = {}  # buffer id -> device pointer, for the runner's life
        self.io: dict[int, int] = {}  # buffer id of an input/output -> its staging buffer
        self.capacity: dict[int, int] = {}  # buffer id -> bytes its device buffer holds
        self.allocations = 0
        self._lock = threading.Lock()
        self._bound: dict[tuple, _Bound] = {}  # input shapes -> the plan's sizes for them
        static = self._bind([]) if not plan.dynamic else None
        for i, b in enumerate(plan.buffers):
            if b.kind == "global":
                self.persistent[i] = self._alloc(b.nbytes)
                device.htod(self.persistent[i], np.frombuffer(plan.globals[b.name], np.uint8))
            elif static is not None and self._owned(b):
                self._reserve(self.persistent, i, static.nbytes[i])

    def _owned(self, b) -> bool:
        """A buffer the runner allocates: the plan's allocations and the workspace argument."""
        return b.kind == "alloc" or (b.kind == "arg" and b.index >= self.n_in + self.n_out)

    def _alloc(self, n: int) -> int:
        self.allocations += 1
        return self.dev.alloc(n)

    def _reserve(self, table: dict[int, int], i: int, n: int) -> None:
        """Buffer `i` of `table` holds at least `n` bytes (grown, its contents dropped)."""
        if i in table and self.capacity.get(i, 0) >= n:
            return
        if i in table:
            self.dev.free(table.pop(i))
        table[i] = self._alloc(n)
        self.capacity[i] = max(n, 1)

    def _bind(self, shapes) -> _Bound:
        """The plan's sizes for inputs and outputs of these `shapes`."""
        plan = self.plan
        key = tuple(tuple(s) for s in shapes[:self.n_in + self.n_out]) if plan.dynamic else ()
        bound = self._bound.get(key)
        if bound is None:
            env = {}
            for i, names in enumerate(plan.arg_dims[:self.n_in + self.n_out]):
                dyn = [n for d, n in zip(plan.arg_types[i].get_shape(), key[i]) if d < 0]
                for name, n in zip(names, dyn):
                    if name is not None:
                        env[name] = int(n)
            if len(self._bound) > 256:
                self._bound.clear()
            bound = self._bound[key] = _Bound(plan, env)
        return bound

    def close(self) -> None:
        """Free the device buffers (also done when the runner is collected)."""
        ptrs = [*self.persistent.values(), *self.io.values()]
        self.persistent, self.io = {}, {}
        for p in ptrs:
            self.dev.free(p)

    def __del__(self):
        try:
            self.close()
        except Exception:  # the driver may be gone at interpreter exit
            pass

    def __call__(self, *arrays) -> None:
        plan, dev = self.plan, self.dev
        with self._lock:
            dev.current()
            bound = self._bind([np.shape(a) for a in arrays[:self.n_in + self.n_out]])
            self._prepare(bound)
            for i, b in enumerate(plan.buffers):
                if b.kind == "arg" and b.index < self.n_in + self.n_out:
                    self._reserve(self.io, i, bound.nbytes[i])
            for i, p in self.io.items():
                b = plan.buffers[i]
                if b.index < self.n_in:
                    dev.htod(p, np.ascontiguousarray(arrays[b.index]))
            self._steps(self.io, bound)
            for i, p in self.io.items():
                b = plan.buffers[i]
                if b.index >= self.n_in:
                    dev.dtoh(arrays[b.index], p)
            dev.sync()

    def launch(self, pointers, shapes=None) -> None:
        """Run on device buffers: `pointers` to the inputs then the outputs, in argument
        order, and for a plan with dynamic dims their `shapes`. Asynchronous on the default
        stream."""
        if len(pointers) != self.n_in + self.n_out:
            raise CompileError(f"{self.plan.func_name} takes {self.n_in} inputs and "
                               f"{self.n_out} outputs, got {len(pointers)} device buffers")
        if self.plan.dynamic and shapes is None:
            raise CompileError(f"{self.plan.func_name} has dynamic dims: give the buffers' "
                               "shapes (launch(pointers, shapes))")
        args = {i: int(pointers[b.index]) for i, b in enumerate(self.plan.buffers)
                if b.kind == "arg" and b.index < self.n_in + self.n_out}
        with self._lock:
            self.dev.current()
            bound = self._bind(shapes or [])
            self._prepare(bound)
            self._steps(args, bound)

    def _prepare(self, bound: _Bound) -> None:
        """The runner's own buffers large enough for `bound`'s sizes."""
        if not self.plan.dynamic:
            return
        for i, b in enumerate(self.plan.buffers):
            if self._owned(b):
                self._reserve(self.persistent, i, bound.nbytes[i])

    def _steps(self, args: dict[int, int], bound: _Bound) -> None:
        plan, dev = self.plan, self.dev
        ptr = {**self.persistent, **args}
        for step in plan.steps:
            op = step[0]
            if op == "copy":
                dev.dtod(self._ptr(ptr, step[1], bound), self._ptr(ptr, step[2], bound),
                         bound.size(step[3]))
            elif op == "launch":
                k = plan.kernels[step[1]]
                grid, dims = bound.launches[step[1]]
                ptrs = [self._ptr(ptr, b, bound) for b in k.params]
                if dims:
                    dev.launch(k.name, grid, k.block, ptrs, dims, k.index_type)
                else:
                    dev.launch(k.name, grid, k.block, ptrs)
            # alloc / free: the buffer lives for the runner's life, allocated at start

    def _ptr(self, ptr: dict[int, int], buf: int, bound: _Bound) -> int:
        b = self.plan.buffers[buf]
        if b.kind == "view":
            return self._ptr(ptr, b.index, bound) + bound.offsets[buf]
        return ptr[buf]


MAX_GRID_YZ = 65535


class _Bound:
    """A plan's sizes for given values of its dynamic dims (`env`: kernel parameter name ->
    value): each buffer's bytes, each view's offset, each launch's grid and dim values."""

    def __init__(self, plan, env: dict[str, int]):
        self.env = env
        self.nbytes = [max(1, self.size(b.nbytes)) for b in plan.buffers]
        self.offsets = [self.size(b.offset) for b in plan.buffers]
        self.launches = []
        for k in plan.kernels:
            grid = tuple(evaluate_size(g, env) for g in k.grid)
            if any(g > MAX_GRID_YZ for g in grid[1:]) or grid[0] >= 1 << 31:
                raise CompileError(f"{k.name}: grid {grid} is over CUDA's limits for these "
                                   f"sizes ({', '.join(f'{n}={v}' for n, v in env.items())})")
            if k.index_type == "int" and k.dims and any(
                    self.nbytes[p] >= INT32_LIMIT for p in k.params):
                raise CompileError(f"{k.name} indexes its buffers with 32-bit integers, and "
                                   "these sizes make one of them 2 GB or more: compile the model "
                                   "with static shapes")
            self.launches.append((tuple(max(1, g) for g in grid),
                                  tuple(env[d] for d in k.dims)))

    def size(self, x) -> int:
        return x.evaluate(self.env) if isinstance(x, Sym) else x


def device_pointer(x) -> int:
    """The device address of a torch/cupy array (__cuda_array_interface__) or an int."""
    if isinstance(x, int):
        return x
    iface = getattr(x, "__cuda_array_interface__", None)
    if iface is None:
        raise CompileError(f"{type(x).__name__} is not a device array (no __cuda_array_interface__)")
    strides = iface.get("strides")
    if strides is not None:
        expect, acc = [], np.dtype(iface["typestr"]).itemsize
        for d in reversed(iface["shape"]):
            expect.append(acc)
            acc *= d
        if tuple(strides) != tuple(reversed(expect)):
            raise CompileError("device arrays passed to aicc must be contiguous")
    return int(iface["data"][0])


# ------------------------------------------------------------------------------ executable


@dataclass
class CudaExecutable:
    """The CUDA program of a compiled model. Each kernel is its own NVRTC program (the prelude
    and that kernel), built in the background from compile() on, or on the kernel's first
    launch if that comes first, and loaded onto the device on its first launch."""

    program: object  # compiler.codegen.cuda.CudaProgram
    n_inputs: int
    n_outputs: int
    arch: str | None = None
    threads: int = 1
    _cubin: Cubin | None = None
    _runners: dict = field(default_factory=dict)
    _kernels: dict = field(default_factory=dict)  # kernel -> Cubin
    _locks: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _background: threading.Thread | None = None
    kernels_loaded: int = 0  # kernel modules loaded onto a device

    @property
    def source(self) -> str:
        return self.program.source

    def target_arch(self) -> str:
        return self.arch or os.environ.get("AICC_CUDA_ARCH") or device_arch() or DEFAULT_ARCH

    @property
    def cubin(self) -> Cubin:
        """The whole program as one cubin (`aicc -o`: model.cubin)."""
        if self._cubin is None:
            self._cubin = _compile_relaxed(self.source, self.target_arch())
        return self._cubin

    def kernel_cubin(self, name: str) -> Cubin:
        """Kernel `name`'s cubin, built once (the caller waits if another thread is building
        it)."""
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._kernels:
                prelude = self.program.prelude
                self._kernels[name] = _compile_relaxed(
                    f"{prelude}\n{self.program.kernel_sources[name]}", self.target_arch(),
                    f"{name}.cu")
            return self._kernels[name]

    def build_in_background(self) -> None:
        """Start NVRTC on every kernel, in launch order, on a thread of its own."""
        def build():
            for name in self.program.kernel_sources:
                try:
                    self.kernel_cubin(name)
                except Exception:  # noqa: BLE001 - raised again where the kernel is needed
                    pass

        self._background = threading.Thread(target=build, daemon=True, name="aicc-nvrtc")
        self._background.start()
        _BACKGROUND.append(self._background)

    def wait(self) -> None:
        """Until the background build is done."""
        if self._background is not None:
            self._background.join()

    @property
    def kernels_built(self) -> int:
        return len(self._kernels)

    @property
    def stats(self) -> dict[str, KernelStats]:
        """Every kernel's ptxas statistics (builds those not built yet)."""
        return {name: self.kernel_cubin(name).stats.get(name, KernelStats())
                for name in self.program.kernel_sources}

    def _load(self, name: str) -> bytes:
        self.kernels_loaded += 1
        return self.kernel_cubin(name).image

    def get(self, name: str, nargs: int = 0) -> PlanRunner:
        """The runner of function `name`: call it with NumPy arrays, or `.launch(pointers)`
        on device buffers."""
        if not has_gpu():
            raise CompileError(NO_GPU_MESSAGE)
        if name not in self._runners:
            device = open_device(self._load)
            self._runners[name] = PlanRunner(self.program.plans[name], device, self.n_inputs,
                                             self.n_outputs)
        return self._runners[name]


_BACKGROUND: list[threading.Thread] = []


@atexit.register
def _join_background() -> None:
    # NVRTC threads finish before the interpreter goes (a daemon thread in the middle of a
    # C call while the process tears down is a crash waiting to happen)
    for t in _BACKGROUND:
        t.join()


def _compile_relaxed(source: str, arch: str, name: str = "aicc.cu") -> Cubin:
    cubin = NVRTCCompiler(arch).compile(source, name)
    relaxed = relax_launch_bounds(source, cubin.stats)
    if relaxed != source:
        # a kernel asked for a register cap (several blocks per SM) that made ptxas spill:
        # spills cost more than the occupancy gains, so compile it without the cap
        cubin = NVRTCCompiler(arch).compile(relaxed, name)
    return cubin


def compile_cuda(module, stages: dict, timings: list, n_inputs: int, n_outputs: int,
                 arch: str | None = None) -> CudaExecutable:
    """Emit CUDA C for a mapped module; NVRTC builds its kernels in the background when it
    is installed (else the first need of a kernel reports the missing package)."""
    from compiler.codegen.cuda import emit_cuda
    from compiler.stages import PassTiming

    t0 = time.perf_counter()
    program = emit_cuda(module)
    timings.append(PassTiming("emit-cuda", time.perf_counter() - t0))
    stages["cuda"] = program.source
    exe = CudaExecutable(program, n_inputs, n_outputs, arch)
    try:
        nvrtc()
    except CompileError:
        return exe
    exe.build_in_background()
    return exe


# ------------------------------------------------------------------------------ command line


def kernel_report(m) -> list[str]:
    """One line per kernel: name, kind, launch shape and NVRTC's statistics."""
    exe = m.executable
    stats = exe.stats
    cached = all(exe.kernel_cubin(k).cached for k in exe.program.kernel_sources)
    lines = [f"cuda: {len(exe.program.kernels)} kernel(s) compiled by NVRTC "
             f"{'.'.join(map(str, nvrtc_version()))} for {exe.target_arch()}"
             f"{' (cached)' if cached else ''}"]
    for k in exe.program.kernels:
        s = stats.get(k.name, KernelStats())
        lines.append(f"  {k.name:<16} {k.kind:<11} grid {'x'.join(map(str, k.grid)):>8} "
                     f"block {'x'.join(map(str, k.block)):>6}  {s}")
    return lines


def report_without_gpu(m, require_gpu: bool) -> int | None:
    """For `aicc --target cuda`: print the kernels' statistics; without a GPU, say so and return
    the exit status (0, or 1 when running was required). None: there is a GPU, go on."""
    for line in kernel_report(m):
        print(line)
    if has_gpu():
        return None
    print(f"aicc: {NO_GPU_MESSAGE}: the kernels were generated and compiled, not run")
    return 1 if require_gpu else 0


def write_outputs(m, out: Path) -> list[Path]:
    written = []
    for stage in ("tensor", "linalg", "memref", "loops", "gpu"):
        written.append(out / f"{stage}.mlir")
        written[-1].write_text(m.ir(stage))
    written.append(out / "model.cu")
    written[-1].write_text(m.ir("cuda"))
    written.append(out / "model.cubin")
    written[-1].write_bytes(m.executable.cubin.image)
    written.append(out / "model.ptxas.txt")
    written[-1].write_text(m.executable.cubin.log)
    return written
