"""The CUDA emulation harness: compile aicc's generated CUDA C with the host g++ against
cuda_emu.h (each block's threads as OS threads, `__syncthreads` as a barrier, `__shared__`
per block), and run a compiled model's host plan on it with host memory as "device" memory,
through the same PlanRunner that drives a real GPU. Slow, but it catches wrong indexing,
races on shared memory and bad reductions without a GPU."""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_BUILD = Path(tempfile.gettempdir()) / "aicc-cuda-emu"
_libs: dict[str, ctypes.CDLL] = {}


def emulation_source(program) -> str:
    launchers = [
        f'extern "C" void aicc_emu_{k.name}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, '
        f"unsigned by, unsigned bz, void** args) {{\n"
        f"  aicc_emu_launch({k.name}, dim3(gx, gy, gz), dim3(bx, by, bz), args);\n}}"
        for k in program.kernels
    ]
    return "\n".join(['#include "cuda_emu.h"', program.source, *launchers, ""])


def _gxx(key: str, src: str, *extra: str) -> Path:
    """The shared library g++ builds from `src`, cached in the build directory under `key`."""
    _BUILD.mkdir(parents=True, exist_ok=True)
    so = _BUILD / f"{key}.so"
    if so.exists():
        return so
    cu = _BUILD / f"{key}.cpp"
    cu.write_text(src)
    tmp = _BUILD / f"{key}.{id(src)}.so"
    try:
        r = subprocess.run(
            ["g++", "-std=c++17", "-O1", "-pthread", "-shared", "-fPIC", f"-I{HERE}",
             "-o", str(tmp), str(cu), *extra], capture_output=True, text=True)
    except FileNotFoundError:
        from compiler.errors import CompileError

        raise CompileError("the cuda-emu target compiles CUDA C with g++, which is not "
                           "installed here") from None
    if r.returncode:
        raise RuntimeError(f"aicc bug: g++ failed on the emulated CUDA C {cu}:\n"
                           f"{r.stderr[-4000:]}")
    tmp.replace(so)
    return so


def _runtime(header: str) -> Path:
    """The emulator's runtime library for cuda_emu.h's text `header`: the one definition of
    the thread_local state that it declares (the emulated threadIdx, blockIdx, ...), loaded once
    per process so that the program libraries add no TLS module of their own."""
    key = "rt-" + hashlib.sha256(header.encode()).hexdigest()[:24]
    if key not in _libs:
        so = _gxx(key, '#define AICC_EMU_RUNTIME\n#include "cuda_emu.h"\n')
        _libs[key] = ctypes.CDLL(str(so), mode=ctypes.RTLD_GLOBAL)
    return Path(_libs[key]._name)


def build(program) -> ctypes.CDLL:
    src = emulation_source(program)
    header = (HERE / "cuda_emu.h").read_text()
    key = hashlib.sha256((src + header).encode()).hexdigest()[:24]
    if key not in _libs:
        rt = _runtime(header)
        _libs[key] = ctypes.CDLL(str(_gxx(key, src, str(rt))))  # DT_NEEDED: rt by its path
    return _libs[key]


class EmuDevice:
    """Host memory standing in for device memory; launches call the emulated kernels."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.mem: dict[int, np.ndarray] = {}

    def alloc(self, n: int) -> int:
        a = np.full(max(n, 1) + 64, 0xCD, np.uint8)  # poisoned, like uninitialized memory
        ptr = a.ctypes.data + (-a.ctypes.data % 64)
        self.mem[ptr] = a
        return ptr

    def free(self, ptr: int) -> None:
        del self.mem[ptr]

    def htod(self, ptr: int, a: np.ndarray) -> None:
        ctypes.memmove(ptr, a.ctypes.data, a.nbytes)

    def dtoh(self, a: np.ndarray, ptr: int) -> None:
        ctypes.memmove(a.ctypes.data, ptr, a.nbytes)

    def dtod(self, dst: int, src: int, n: int) -> None:
        ctypes.memmove(dst, src, n)

    def launch(self, name: str, grid, block, ptrs, dims=(), index_type: str = "int") -> None:
        dim_type = ctypes.c_int if index_type == "int" else ctypes.c_longlong
        cells = [ctypes.c_void_p(p) for p in ptrs] + [dim_type(d) for d in dims]
        args = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
        g = (*grid, 1, 1)[:3]
        b = (*block, 1, 1)[:3]
        getattr(self.lib, f"aicc_emu_{name}")(*map(ctypes.c_uint, (*g, *b)), args)

    def current(self) -> None:
        pass

    def sync(self) -> None:
        pass


class EmuExecutable:
    """The cuda-emu target's executable: the CUDA program built by g++ for the emulator."""

    def __init__(self, program, n_inputs: int, n_outputs: int):
        self.program, self.n_inputs, self.n_outputs = program, n_inputs, n_outputs
        self.lib = build(program)
        self.threads = 1
        self._runners: dict = {}

    @property
    def source(self) -> str:
        return self.program.source

    def get(self, name: str, nargs: int = 0):
        from compiler.targets.cuda.runtime import PlanRunner

        if name not in self._runners:
            self._runners[name] = PlanRunner(self.program.plans[name], EmuDevice(self.lib),
                                             self.n_inputs, self.n_outputs)
        return self._runners[name]


def run_emulated(m, *inputs):
    """Run CompiledModel `m` (target cuda or cuda-emu) on the emulated device; returns its
    outputs."""
    from compiler.targets.cuda.runtime import PlanRunner

    exe = m.executable
    lib = build(exe.program)
    runner = PlanRunner(exe.program.plans[m.func_name], EmuDevice(lib), exe.n_inputs,
                        exe.n_outputs)
    args = [np.ascontiguousarray(x) for x in inputs]
    outs = [np.empty(shape, dtype) for shape, dtype in m.output_types]
    extra = [np.empty(m.workspace_bytes, np.uint8)] if m.workspace_bytes else []
    runner(*args, *outs, *extra)
    return tuple(outs) if m.output_is_tuple else outs[0]
