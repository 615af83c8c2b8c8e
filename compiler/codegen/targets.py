"""aicc-opt output targets: `aicc-opt FILE.mlir -p ... -t llvm` prints the LLVM IR of loop IR."""

from __future__ import annotations

from typing import IO

from xdsl.dialects.builtin import ModuleOp


def _print_llvm(module: ModuleOp, output: IO[str]) -> None:
    from compiler.codegen.llvm import emit_llvm

    output.write(emit_llvm(module))


def register_targets(targets: dict) -> None:
    targets.setdefault("llvm", lambda: _print_llvm)
