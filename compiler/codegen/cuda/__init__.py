"""GPU-mapped loop IR (``gpu_map.kernel`` regions) to CUDA C: the emitter, and the structural
queries (``patterns``) by which both map-to-gpu and the emitter recognize a kernel's kind."""

from compiler.codegen.cuda.emitter import CudaEmitter, CudaProgram, emit_cuda

__all__ = ["CudaEmitter", "CudaProgram", "emit_cuda"]
