"""The cuda-emu target: the cuda target's kernels, run on the CPU.

The same pipeline and CUDA C as the cuda target, compiled by the host g++ against an
emulation of the CUDA execution model (emu.py, cuda_emu.h) instead of NVRTC, and run through
the same host plan as on a GPU. `aicc model.py --target cuda-emu --run` checks the GPU
kernels of a model on a machine without a GPU (and without the CUDA packages). It is slow:
a check, not a way to run models.
"""

from __future__ import annotations

import time

from compiler.stages import CompileOptions, PassTiming
from compiler.targets import Target
from compiler.targets.cuda import cuda_pipeline, map_to_gpu_pass


class CudaEmuTarget(Target):
    name = "cuda-emu"
    description = "the cuda target's CUDA C run on the CPU by an emulator (g++): GPU kernels checked without a GPU"
    stages = ("tensor", "linalg", "memref", "loops", "gpu", "cuda")
    timed = False
    dynamic_shapes = True

    def pipeline(self, options: CompileOptions) -> list[tuple[str, list]]:
        return cuda_pipeline(options)

    def build(self, module, stages, timings, options, n_inputs, n_outputs):
        from compiler.codegen.cuda import emit_cuda
        from compiler.targets.cuda_emu.emu import EmuExecutable

        t0 = time.perf_counter()
        program = emit_cuda(module)
        timings.append(PassTiming("emit-cuda", time.perf_counter() - t0))
        stages["cuda"] = program.source
        t0 = time.perf_counter()
        exe = EmuExecutable(program, n_inputs, n_outputs)
        timings.append(PassTiming("g++-emulation", time.perf_counter() - t0))
        return exe

    def cache_key(self, options: CompileOptions) -> dict[str, str]:
        from compiler.targets.cuda_emu.emu import HERE

        header = (HERE / "cuda_emu.h").read_bytes()
        import hashlib

        return {"target": self.name, "emulator": hashlib.sha256(header).hexdigest()[:16]}

    def workspace(self, nbytes: int):
        import numpy as np

        return np.empty(0, np.uint8)  # the runner allocates the workspace as "device" memory

    def passes(self):
        return {"map-to-gpu": map_to_gpu_pass}

    def report(self, m, require_run: bool) -> int | None:
        print(f"cuda-emu: {len(m.executable.program.kernels)} kernel(s), run by the CPU "
              "emulation of CUDA (g++)")
        return None


TARGET = CudaEmuTarget()

__all__ = ["CudaEmuTarget", "TARGET"]
