"""GPU-mapped loop IR (``gpu_map.kernel`` regions) to CUDA C: the emitter (``emitter``, which
hands each kernel to the file of its kind: ``elementwise``, ``rows``, ``columns``, ``matmul``,
``attention``, all writing through ``common.KernelWriter``), and the structural queries
(``patterns``) by which both map-to-gpu and the emitter recognize a kernel's kind."""

from compiler.codegen.cuda.emitter import CudaEmitter, CudaProgram, emit_cuda

__all__ = ["CudaEmitter", "CudaProgram", "emit_cuda"]
