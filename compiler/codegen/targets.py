"""aicc-opt output targets: `aicc-opt FILE.mlir -t llvm` prints LLVM IR of loop IR;
`aicc-opt FILE.mlir -p map-to-gpu -t cuda` prints the CUDA C of mapped loop IR.

aicc-opt replaces xDSL's own `llvm` target (which goes through xDSL's llvm dialect) with
aicc's emitter; `aicc-llvm` names the same target for xdsl-opt users.
"""

from __future__ import annotations

from typing import IO

from xdsl.dialects.builtin import ModuleOp


def print_llvm(module: ModuleOp, output: IO[str]) -> None:
    from compiler.codegen.llvm import emit_llvm

    output.write(emit_llvm(module))


def print_cuda(module: ModuleOp, output: IO[str]) -> None:
    from compiler.codegen.cuda import emit_cuda

    output.write(emit_cuda(module).source)


def register_targets(targets: dict) -> None:
    targets["llvm"] = print_llvm
    targets["cuda"] = print_cuda
    targets["aicc-llvm"] = print_llvm
