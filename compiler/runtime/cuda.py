"""CUDA runtime: NVRTC compiles the emitted CUDA C to a cubin; a device runs the host plan.

NVRTC (from the `nvidia-cuda-nvrtc` wheel, through `cuda-bindings`) runs on any machine, GPU or
not, so every kernel is compiled and its ptxas statistics (registers, shared memory, spills) are
known at compile time. Running needs an NVIDIA GPU: kernels launch through PyCUDA when it is
installed, else through cuda-bindings' driver API, in the device's primary context (so torch or
cupy can share buffers). Cubins are cached on disk, keyed by source, options and NVRTC version.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.errors import CompileError

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

    def __str__(self) -> str:
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


def cache_dir() -> Path:
    d = os.environ.get("AICC_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "aicc"


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
        self.options = ("--std=c++17", f"--gpu-architecture={self.arch}", "-Xptxas", "-v",
                        "--use_fast_math", *options)

    def compile(self, source: str, name: str = "aicc.cu") -> Cubin:
        mod = nvrtc()
        version = nvrtc_version()
        key = hashlib.sha256(
            json.dumps([source, self.options, version]).encode()).hexdigest()[:32]
        path = cache_dir() / "cuda" / key
        if (path / "kernel.cubin").exists():
            try:
                log = (path / "log.txt").read_text()
                return Cubin((path / "kernel.cubin").read_bytes(), log, self.arch,
                             parse_ptxas_log(log), 0.0, cached=True)
            except OSError:
                pass
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
        try:
            path.mkdir(parents=True, exist_ok=True)
            tmp = path / f"kernel.cubin.{os.getpid()}"
            tmp.write_bytes(bytes(image))
            (path / "log.txt").write_text(log)
            tmp.replace(path / "kernel.cubin")
        except OSError:
            pass  # a read-only cache is not an error
        return Cubin(bytes(image), log, self.arch, parse_ptxas_log(log), seconds)


def _check(err, what: str) -> None:
    mod = nvrtc()
    if err != mod.nvrtcResult.NVRTC_SUCCESS:
        _, msg = mod.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC {what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")


def _program_log(mod, prog) -> str:
    err, size = mod.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    mod.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0 ").decode(errors="replace")


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
    that spills."""
    for name, s in stats.items():
        if s.spill_stores or s.spill_loads:
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


class DriverDevice:
    """cuda-bindings driver API on device 0's primary context."""

    def __init__(self, cubin: bytes):
        from cuda.bindings import driver

        self.d = driver
        self._ok(driver.cuInit(0))
        dev = self._ok(driver.cuDeviceGet(0))
        self.ctx = self._ok(driver.cuDevicePrimaryCtxRetain(dev))
        self._ok(driver.cuCtxSetCurrent(self.ctx))
        self.module = self._ok(driver.cuModuleLoadData(cubin))
        self.functions: dict[str, object] = {}

    def _ok(self, result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.d.CUresult.CUDA_SUCCESS:
            _, msg = self.d.cuGetErrorString(err)
            raise RuntimeError(f"CUDA driver error: {msg.decode() if msg else err}")
        return rest[0] if len(rest) == 1 else rest

    def alloc(self, n: int) -> int:
        self._ok(self.d.cuCtxSetCurrent(self.ctx))
        return int(self._ok(self.d.cuMemAlloc(max(n, 1))))

    def free(self, ptr: int) -> None:
        self._ok(self.d.cuMemFree(ptr))

    def htod(self, ptr: int, a: np.ndarray) -> None:
        if a.nbytes:
            self._ok(self.d.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes))

    def dtoh(self, a: np.ndarray, ptr: int) -> None:
        if a.nbytes:
            self._ok(self.d.cuMemcpyDtoH(a.ctypes.data, ptr, a.nbytes))

    def dtod(self, dst: int, src: int, n: int) -> None:
        if n:
            self._ok(self.d.cuMemcpyDtoD(dst, src, n))

    def launch(self, name: str, grid, block, ptrs) -> None:
        f = self.functions.get(name)
        if f is None:
            f = self.functions[name] = self._ok(self.d.cuModuleGetFunction(self.module, name.encode()))
        g = (*grid, 1, 1)[:3]
        b = (*block, 1, 1)[:3]
        args = (tuple(ptrs), tuple(ctypes.c_void_p for _ in ptrs))
        self._ok(self.d.cuLaunchKernel(f, *g, *b, 0, 0, args, 0))

    def sync(self) -> None:
        self._ok(self.d.cuCtxSynchronize())


class PyCudaDevice(DriverDevice):
    """PyCUDA on device 0's primary context."""

    def __init__(self, cubin: bytes):
        import pycuda.driver as drv

        drv.init()
        self.drv = drv
        self.ctx = drv.Device(0).retain_primary_context()
        self.ctx.push()
        self.module = drv.module_from_buffer(cubin)
        self.functions = {}
        self.allocs: dict[int, object] = {}

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

    def launch(self, name: str, grid, block, ptrs) -> None:
        f = self.functions.get(name)
        if f is None:
            f = self.functions[name] = self.module.get_function(name)
        f(*[np.uintp(p) for p in ptrs], block=(*block, 1, 1)[:3], grid=(*grid, 1)[:2])

    def sync(self) -> None:
        self.drv.Context.synchronize()


def open_device(cubin: bytes):
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        return DriverDevice(cubin)
    return PyCudaDevice(cubin)


# ------------------------------------------------------------------------------ host plans


class PlanRunner:
    """Runs a HostPlan on a device: buffers, copies and one launch per kernel.

    Globals and scratch arguments beyond inputs/outputs (plan-memory's workspace) live on the
    device for the runner's lifetime; inputs and outputs are copied in and out on every call.
    """

    def __init__(self, plan, device, n_inputs: int, n_outputs: int):
        self.plan, self.dev = plan, device
        self.n_in, self.n_out = n_inputs, n_outputs
        self.persistent: dict[int, int] = {}
        for i, b in enumerate(plan.buffers):
            if b.kind == "global":
                ptr = device.alloc(b.nbytes)
                device.htod(ptr, np.frombuffer(plan.globals[b.name], np.uint8))
                self.persistent[i] = ptr
            elif b.kind == "arg" and b.index >= n_inputs + n_outputs:
                self.persistent[i] = device.alloc(b.nbytes)

    def __call__(self, *arrays: np.ndarray) -> None:
        plan, dev = self.plan, self.dev
        ptr: dict[int, int] = dict(self.persistent)
        owned = []
        for i, b in enumerate(plan.buffers):
            if b.kind == "arg" and b.index < self.n_in + self.n_out:
                ptr[i] = dev.alloc(b.nbytes)
                owned.append(ptr[i])
                if b.index < self.n_in:
                    dev.htod(ptr[i], np.ascontiguousarray(arrays[b.index]))
        try:
            for step in plan.steps:
                op = step[0]
                if op == "alloc":
                    ptr[step[1]] = dev.alloc(plan.buffers[step[1]].nbytes)
                elif op == "free":
                    dev.free(ptr.pop(step[1]))
                elif op == "copy":
                    dev.dtod(self._ptr(ptr, step[1]), self._ptr(ptr, step[2]), step[3])
                elif op == "launch":
                    k = plan.kernels[step[1]]
                    dev.launch(k.name, k.grid, k.block, [self._ptr(ptr, b) for b in k.params])
            for i, b in enumerate(plan.buffers):
                if b.kind == "arg" and self.n_in <= b.index < self.n_in + self.n_out:
                    dev.dtoh(arrays[b.index], ptr[i])
            dev.sync()
        finally:
            for p in owned:
                dev.free(p)

    def _ptr(self, ptr: dict[int, int], buf: int) -> int:
        b = self.plan.buffers[buf]
        if b.kind == "view":
            return self._ptr(ptr, b.index) + b.offset
        return ptr[buf]


# ------------------------------------------------------------------------------ executable


@dataclass
class CudaExecutable:
    """The CUDA program of a compiled model: source, cubin (compiled on first need), launcher."""

    program: object  # compiler.codegen.cuda.CudaProgram
    n_inputs: int
    n_outputs: int
    arch: str | None = None
    threads: int = 1
    _cubin: Cubin | None = None
    _runners: dict = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.program.source

    @property
    def cubin(self) -> Cubin:
        if self._cubin is None:
            arch = self.arch or os.environ.get("AICC_CUDA_ARCH") or device_arch() or DEFAULT_ARCH
            cubin = NVRTCCompiler(arch).compile(self.source)
            relaxed = relax_launch_bounds(self.source, cubin.stats)
            if relaxed != self.source:
                # a kernel asked for a register cap (several blocks per SM) that made ptxas spill:
                # spills cost more than the occupancy gains, so compile it without the cap
                self.program.source = relaxed
                cubin = NVRTCCompiler(arch).compile(relaxed)
            self._cubin = cubin
        return self._cubin

    @property
    def stats(self) -> dict[str, KernelStats]:
        return self.cubin.stats

    def get(self, name: str, nargs: int):
        if not has_gpu():
            raise CompileError(NO_GPU_MESSAGE)
        if name not in self._runners:
            device = open_device(self.cubin.image)
            self._runners[name] = PlanRunner(self.program.plans[name], device, self.n_inputs,
                                             self.n_outputs)
        return self._runners[name]


def compile_cuda(module, stages: dict, timings: list, n_inputs: int, n_outputs: int,
                 arch: str | None = None) -> CudaExecutable:
    """Emit CUDA C for a mapped module and compile it with NVRTC when NVRTC is installed."""
    from compiler.codegen.cuda import emit_cuda
    from compiler.pipeline import PassTiming

    t0 = time.perf_counter()
    program = emit_cuda(module)
    timings.append(PassTiming("emit-cuda", time.perf_counter() - t0))
    stages["cuda"] = program.source
    exe = CudaExecutable(program, n_inputs, n_outputs, arch)
    try:
        nvrtc()
    except CompileError:
        return exe  # compiled on first need, which then reports the missing package
    t0 = time.perf_counter()
    exe.cubin  # noqa: B018  compile now, so errors and statistics come with compile()
    stages["cuda"] = program.source  # as compiled (launch bounds relaxed where they spilled)
    timings.append(PassTiming("nvrtc", time.perf_counter() - t0))
    return exe


# ------------------------------------------------------------------------------ command line


def kernel_report(m) -> list[str]:
    """One line per kernel: name, kind, launch shape and NVRTC's statistics."""
    exe = m.executable
    stats = exe.stats
    lines = [f"cuda: {len(exe.program.kernels)} kernel(s) compiled by NVRTC "
             f"{'.'.join(map(str, nvrtc_version()))} for {exe.cubin.arch}"
             f"{' (cached)' if exe.cubin.cached else ''}"]
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
