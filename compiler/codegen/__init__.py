"""Code generation from loop IR: LLVM IR for the host CPU (``llvm``), vectorizable math
(``mathlib``)."""

from compiler.codegen.llvm import PARALLEL_MIN_WORK, LLVMEmitter, emit_llvm

__all__ = ["LLVMEmitter", "PARALLEL_MIN_WORK", "emit_llvm"]
