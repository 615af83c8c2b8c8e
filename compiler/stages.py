"""What every target's pipeline shares: the compile options, the names of the IR stages, the
record of a pass's time, and the stage -> IR map. They sit below the pipeline, the targets and
their runtimes, which all use them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp

# Every stage some target prints, in pipeline order: the four shared levels, then the
# targets' own (cpu: llvm, asm; cuda: gpu, cuda).
STAGES = ("tensor", "linalg", "memref", "loops", "llvm", "asm", "gpu", "cuda")
SHARED_STAGES = STAGES[:4]


@dataclass
class PassTiming:
    name: str
    seconds: float


@dataclass
class CompileOptions:
    target: str = "cpu"
    threads: int | None = None
    fuse: bool = True
    print_ir_after_all: Callable[[str, ModuleOp], None] | None = None
    schedule: str | dict | None = None  # matmul schedule overrides (cpu)
    target_cpu: str | None = None  # cpu: an LLVM CPU name; None: $AICC_TARGET_CPU, else the host
    target_options: dict = field(default_factory=dict)  # anything else a target takes


class StageIR(dict):
    """Stage name -> IR text. A stage may be held as a module snapshot (a clone: the attributes,
    weights included, are shared, not copied) and is printed the first time it is read, so a
    model with hundreds of MB of weights does not pay for printing IR nobody asks for."""

    # the tensor stage's module is kept after it is printed: `module("tensor")` (the numerics
    # check instruments it); `origins[i]`: where op i of its function came from ("" unknown)
    KEEP = ("tensor",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.modules: dict[str, ModuleOp] = {}
        self.origins: list[str] = []

    def __setitem__(self, stage: str, value) -> None:
        if isinstance(value, ModuleOp) and stage in self.KEEP:
            self.modules[stage] = value
        super().__setitem__(stage, value)

    def __getitem__(self, stage: str) -> str:
        value = super().__getitem__(stage)
        if isinstance(value, ModuleOp):
            value = str(value)
            dict.__setitem__(self, stage, value)
        return value

    def module(self, stage: str) -> ModuleOp:
        """The IR of a kept stage (`KEEP`) as a module."""
        return self.modules[stage]


__all__ = ["STAGES", "SHARED_STAGES", "CompileOptions", "PassTiming", "StageIR"]
