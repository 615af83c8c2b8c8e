"""Loop IR to LLVM IR through llvmlite: the function emitter (``emitter``), the register-tile
micro-kernel of ``aicc_cpu.microkernel`` (``microkernel``, which registers its handler in the
emitter's table) and vectorizable polynomial math (``mathlib``). Nothing here knows the
machine: a target passes its vector width and features in and compiles the text itself."""

from compiler.codegen.llvm import microkernel  # registers the aicc_cpu.microkernel handler
from compiler.codegen.llvm import qgemm  # registers the aicc_cpu.qgemm handler
from compiler.codegen.llvm import conv_kernel  # registers the aicc_cpu.conv_kernel handler
from compiler.codegen.llvm.emitter import (
    EXTERNAL_DATA_MIN_BYTES,
    PARALLEL_FOR_SYMBOL,
    PARALLEL_MIN_WORK,
    LLVMEmitter,
    emit_llvm,
)

__all__ = ["EXTERNAL_DATA_MIN_BYTES", "LLVMEmitter", "PARALLEL_FOR_SYMBOL", "PARALLEL_MIN_WORK",
           "conv_kernel", "emit_llvm", "microkernel", "qgemm"]
