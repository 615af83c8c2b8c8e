"""Targets: what turns the shared loop IR into something that runs, one package each.

A target is one object (a `Target`) that says, for given `CompileOptions`:
  - its pass pipeline: the shared stages (compiler/lowering/pipeline.py) with its own passes
    slotted in, plus stages of its own;
  - how it builds an executable from the loop IR (code generator, then its runtime);
  - what identifies the code it generates (`cache_key`: CPU name and features, GPU arch,
    tool versions), and which options it takes;
  - for aicc-opt: its passes (`passes`) and output formats (`printers`, `-t NAME`).

Targets are found through the `aicc.targets` entry point group, so another package can add
one without editing aicc:

    [project.entry-points."aicc.targets"]
    rocm = "aicc_rocm:TARGET"

`register_target` adds one at run time (a test's toy target, say). The built-in ones (cpu,
cuda, cuda-emu) are also found from a source tree without installed metadata. Nothing at the
shared levels (dialects, frontends, compiler/lowering, compiler/codegen) imports a target.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from compiler.errors import CompileError
from compiler.stages import SHARED_STAGES, CompileOptions, StageIR

ENTRY_POINT_GROUP = "aicc.targets"
BUILTIN_TARGETS = {
    "cpu": "compiler.targets.cpu:TARGET",
    "cuda": "compiler.targets.cuda:TARGET",
    "cuda-emu": "compiler.targets.cuda_emu:TARGET",
}


class Target:
    """The interface of a target. Subclasses set the class attributes and override
    `pipeline` and `build`; the rest has defaults that suit a target without options."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # the IR stages `CompiledModel.ir` prints for this target, in pipeline order
    stages: ClassVar[tuple[str, ...]] = SHARED_STAGES
    # CompileOptions fields this target reads beyond target/threads/fuse
    options: ClassVar[tuple[str, ...]] = ()
    # `aicc MODEL` times the compiled model against the eager run (off for an emulator)
    timed: ClassVar[bool] = True
    # its executables go into the compile cache (`save_executable` / `load_executable`)
    cacheable: ClassVar[bool] = False
    # compiles functions with dynamic (symbolic) dims: loop bounds and sizes from the inputs
    dynamic_shapes: ClassVar[bool] = False
    # target options that change no code by themselves, left out of the cache key (cpu's
    # tune: what it measures reaches the key through `cache_key`, as the record's digest)
    keyless_options: ClassVar[tuple[str, ...]] = ()

    def check_options(self, options: CompileOptions) -> None:
        """Refuse options this target does not take (a CompileError naming the option)."""
        for field in ("schedule", "target_cpu"):
            if getattr(options, field) and field not in self.options:
                raise CompileError(f"{field}= applies to the cpu target, not '{self.name}'")
        unknown = set(options.target_options) - set(self.options)
        if unknown:
            raise CompileError(f"target '{self.name}' takes no option(s) {', '.join(sorted(unknown))}"
                               f" (it takes: {', '.join(self.options) or 'none'})")

    def pipeline(self, options: CompileOptions) -> list[tuple[str, list]]:
        """(stage whose IR it produces, [ModulePass]) in order."""
        raise NotImplementedError

    def build(self, module, stages: StageIR, timings: list, options: CompileOptions,
              n_inputs: int, n_outputs: int) -> Any:
        """An executable for the loop-IR `module` (after `pipeline`): it has `get(func_name,
        nargs)` returning a callable on buffers and a `threads` attribute. Adds the IR of the
        target's own stages to `stages` and its steps' times to `timings`."""
        raise NotImplementedError

    def prepare(self, module, func_name: str, options: CompileOptions):
        """Before a compile (and its cache lookup): work on the tensor-level `module` that
        changes how it is compiled (cpu: autotuning; its report is returned and kept as
        `CompiledModel.tune_report`). Must not change `module`."""
        return None

    def cache_key(self, options: CompileOptions) -> dict[str, str]:
        """What, besides the IR and the options, decides the generated code: the machine
        and the versions of the tools that compile it."""
        return {"target": self.name}

    def save_executable(self, exe) -> tuple[dict, dict] | None:
        """What the compile cache keeps of `exe`: (JSON-able metadata, {name: bytes or
        array}); None to keep nothing."""
        return None

    def load_executable(self, entry, options: CompileOptions, n_inputs: int, n_outputs: int):
        """The executable that `save_executable` saved, from a compile cache entry (`.meta`,
        `.blobs`, `.array(name, dtype, shape)`)."""
        raise NotImplementedError

    def workspace(self, nbytes: int):
        """The host buffer passed for plan-memory's workspace argument."""
        import numpy as np

        return np.empty(nbytes, np.uint8)

    def passes(self) -> dict[str, Callable[[], type]]:
        """Pass name -> loader of the pass class, for aicc-opt."""
        return {}

    def printers(self) -> dict[str, Callable]:
        """aicc-opt `-t NAME` outputs: name -> fn(module, output stream)."""
        return {}

    def report(self, m, require_run: bool) -> int | None:
        """After `aicc` compiled a model: print what the target has to say; an exit status
        when the model cannot run here, else None."""
        return None

    def write_outputs(self, m, out: Path) -> list[Path]:
        """`aicc -o DIR`: write each stage's IR and the target's artifacts into `out`."""
        written = []
        for stage in self.stages:
            written.append(out / f"{stage}.mlir" if stage in SHARED_STAGES or stage == "gpu"
                           else out / f"model.{stage}")
            written[-1].write_text(m.ir(stage))
        return written

    def export_library(self, m, out: Path, name: str) -> list[Path]:
        """`aicc --aot -o DIR` / `CompiledModel.export`: write `m` as an artifact that runs
        without Python; the paths written."""
        raise CompileError(f"the {self.name} target cannot write an ahead-of-time library "
                           "(--aot): compile for the cpu target")

    def load_library(self, directory: Path, meta: dict):
        """`compiler.load`: the artifact `export_library` wrote, as a callable model."""
        raise CompileError(f"the {self.name} target cannot load an ahead-of-time library")

    def __repr__(self) -> str:
        return f"<aicc target {self.name!r}>"


_registered: dict[str, Target] = {}
_loaded: dict[str, Target] = {}


def register_target(target: Target, *, replace: bool = False) -> None:
    """Make `target` available under `target.name` (for `compile`, `jit`, `aicc`, `aicc-opt`)."""
    if not target.name:
        raise ValueError("a target needs a name")
    if not replace and target.name in available_targets():
        raise ValueError(f"a target named '{target.name}' is already registered")
    _registered[target.name] = target
    _loaded.pop(target.name, None)


def unregister_target(name: str) -> None:
    _registered.pop(name, None)
    _loaded.pop(name, None)


@lru_cache(maxsize=None)
def _entry_points() -> dict[str, str]:
    """Name -> "module:attr" of the built-in and installed targets (read once: installing a
    package does not change the running process)."""
    found = dict(BUILTIN_TARGETS)
    try:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            found.setdefault(ep.name, ep.value)
    except Exception:  # noqa: BLE001 - broken metadata of some other package: keep the built-ins
        pass
    return found


def available_targets() -> tuple[str, ...]:
    """The names of every target: built-in, installed through the entry point, registered."""
    names = [*_entry_points(), *(n for n in _registered if n not in BUILTIN_TARGETS)]
    return tuple(dict.fromkeys(names))


def get_target(name: str) -> Target:
    """The target called `name`; a CompileError naming the known ones if there is none."""
    if name in _registered:
        return _registered[name]
    if name in _loaded:
        return _loaded[name]
    spec = _entry_points().get(name) if isinstance(name, str) else None
    if spec is None:
        raise CompileError(f"unknown target '{name}' (expected one of: "
                           f"{', '.join(available_targets())})")
    module, _, attr = spec.partition(":")
    target = getattr(importlib.import_module(module), attr or "TARGET")
    if not isinstance(target, Target):
        raise CompileError(f"target '{name}' ({spec}) is not an aicc Target")
    _loaded[name] = target
    return target


__all__ = ["BUILTIN_TARGETS", "ENTRY_POINT_GROUP", "Target", "available_targets", "get_target",
           "register_target", "unregister_target"]
