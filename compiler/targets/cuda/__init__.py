"""The cuda target: NVIDIA GPUs. The shared loop IR is mapped onto a CUDA grid (map-to-gpu,
its kernels one of the kinds in compiler/codegen/cuda/patterns.py), printed as CUDA C by
compiler/codegen/cuda, compiled to a cubin by NVRTC, and launched by runtime.py through
PyCUDA or the driver API. Without a GPU it still compiles every kernel (NVRTC needs none).
"""

from __future__ import annotations

from pathlib import Path

from compiler.stages import CompileOptions
from compiler.targets import Target


def cuda_pipeline(options: CompileOptions) -> list[tuple[str, list]]:
    """The shared stages with CUDA's choices, then map-to-gpu. fuse-rows and lower-attention
    do not run: fuse-rows' nests keep per-thread stack buffers, which the mapping does not
    take, and map-to-gpu fuses row kernels itself; attention stays whole through the loops
    stage and becomes one flash-attention kernel (head dims up to MAX_ATTENTION_HEAD_DIM, f32;
    a larger one stays unfused). A matmul's bias stays an add, which map-to-gpu fuses into the
    tiled matmul kernel as an epilogue (no fuse-linear-bias, no conv bias as the start).
    An int8 matmul (matmul_integer, dynamic_matmul_integer) becomes one gpu_map.qgemm
    (lower-qgemm-gpu), a dp4a kernel."""
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    from compiler.lowering import pipeline as shared
    from compiler.lowering.fuse_attention import FuseAttention
    from compiler.targets.cuda.map_to_gpu import MAX_ATTENTION_HEAD_DIM, MapToGpu
    from compiler.targets.cuda.qgemm import LowerQGemmGpu

    hooks = shared.StageHooks(
        tensor=(FuseAttention(max_head_dim=MAX_ATTENTION_HEAD_DIM, f32_only=True),
                DeadCodeElimination()) if options.fuse else (),
        conv_bias=False,
        memref=(LowerQGemmGpu(),),
    )
    return [*shared.shared_stages(options.fuse, hooks), ("gpu", [MapToGpu()])]


def map_to_gpu_pass():
    from compiler.targets.cuda.map_to_gpu import MapToGpu

    return MapToGpu


def lower_qgemm_gpu_pass():
    from compiler.targets.cuda.qgemm import LowerQGemmGpu

    return LowerQGemmGpu


def print_cuda(module, output) -> None:
    from compiler.codegen.cuda import emit_cuda

    output.write(emit_cuda(module).source)


class CUDATarget(Target):
    name = "cuda"
    description = "NVIDIA GPU: CUDA C compiled by NVRTC, launched by PyCUDA or the driver API"
    stages = ("tensor", "linalg", "memref", "loops", "gpu", "cuda")
    options = ("arch",)
    dynamic_shapes = True

    def pipeline(self, options: CompileOptions) -> list[tuple[str, list]]:
        return cuda_pipeline(options)

    def build(self, module, stages, timings, options, n_inputs, n_outputs):
        from compiler.targets.cuda.runtime import compile_cuda

        return compile_cuda(module, stages, timings, n_inputs, n_outputs,
                            arch=options.target_options.get("arch"))

    def cache_key(self, options: CompileOptions) -> dict[str, str]:
        import os

        from compiler.targets.cuda.runtime import DEFAULT_ARCH, device_arch, nvrtc_version

        arch = (options.target_options.get("arch") or os.environ.get("AICC_CUDA_ARCH")
                or device_arch() or DEFAULT_ARCH)
        return {"target": self.name, "arch": arch,
                "nvrtc": ".".join(map(str, nvrtc_version()))}

    def workspace(self, nbytes: int):
        import numpy as np

        return np.empty(0, np.uint8)  # the runner keeps the workspace on the device

    def passes(self):
        return {"map-to-gpu": map_to_gpu_pass, "lower-qgemm-gpu": lower_qgemm_gpu_pass}

    def printers(self):
        return {"cuda": print_cuda}

    def report(self, m, require_run: bool) -> int | None:
        from compiler.targets.cuda.runtime import report_without_gpu

        return report_without_gpu(m, require_run)

    def write_outputs(self, m, out: Path) -> list[Path]:
        from compiler.targets.cuda.runtime import write_outputs

        return write_outputs(m, out)


TARGET = CUDATarget()

__all__ = ["CUDATarget", "TARGET", "cuda_pipeline"]
