"""The public entry points: `compiler.compile` and `compiler.jit`.

They take a user's model, hand it to the frontend that knows its kind (imported lazily, so
`import compiler` stays light and the compiler core never depends on a frontend), and compile
the resulting aicc module with `compiler.pipeline`.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.errors import CompileError
from compiler.pipeline import CompiledModel, CompileOptions, compile_module
from compiler.targets import get_target


def _check_target(options: CompileOptions) -> None:
    """The target exists (a registered one: see compiler/targets) and takes the options."""
    get_target(options.target).check_options(options)


def compile(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    target: str = "cpu",
    *,
    threads: int | None = None,
    fuse: bool = True,
    print_ir_after_all: Callable | None = None,
    input_shapes: dict[str, Sequence[int]] | None = None,
    schedule: str | dict | None = None,
    target_cpu: str | None = None,
    tune: bool | str = False,
    tune_budget: float | None = None,
) -> CompiledModel | JitFunction:
    """Compile `model` for `target`.

    A Python function with `example_inputs` is traced and compiled now for those shapes; without
    them it compiles on first call, once per distinct input shapes and dtypes (like `jit`).
    An ONNX model (a ModelProto or a path ending in .onnx) takes the sizes of symbolic input
    dims from `input_shapes` ({input name: shape}) or from the shapes of `example_inputs`;
    a torch.nn.Module is exported with torch.export on `example_inputs`.

    `schedule` overrides fields of the CPU matmul schedules that choose-schedule picks
    (printed as `aicc.schedule` in `ir("linalg")`): `{"mr": 6, "kc": 128}` for every matmul,
    `{0: {...}, 1: {...}}` per matmul in program order, or the text form `"mr=6,kc=128"`.

    `target` is any registered target (`compiler.targets.available_targets()`: cpu, cuda,
    cuda-emu and any installed through the `aicc.targets` entry point). `target_cpu` (cpu) is
    the LLVM name of the CPU to generate code for (default: $AICC_TARGET_CPU, else the host).

    `tune=True` (cpu) first measures schedules for the model's matmuls and convs on this
    machine within `tune_budget` seconds (default 60) and records the fastest in the cache
    folder's tuning record, which every later compile on this machine uses
    (`m.stats["tuned"]`); `tune="ray"` spreads the measurements over a Ray cluster.
    """
    tuning = {"tune": tune, "tune_budget": tune_budget} if tune else {}
    options = CompileOptions(target, threads, fuse, print_ir_after_all, schedule, target_cpu,
                             target_options=tuning)
    _check_target(options)
    if callable(model) and not _is_module_object(model) and not is_torch_module(model) \
            and example_inputs is None:
        return JitFunction(model, options)
    return compile_program(import_model(model, example_inputs, input_shapes), options)


def import_model(model: Any, example_inputs: Sequence[Any] | None = None,
                 input_shapes: dict[str, Sequence[int]] | None = None) -> Any:
    """The aicc program of `model` (a Python function with its example inputs, a
    torch.nn.Module, an ONNX model or path), through the frontend that knows its kind."""
    if _is_onnx(model):
        from frontends.onnx_import import import_onnx

        return import_onnx(model, input_shapes, example_inputs)
    if is_torch_module(model):
        from frontends.torch_import import import_torch  # torch is loaded: the user made `model`

        if example_inputs is None:
            raise CompileError(
                f"compiling a torch.nn.Module ({type(model).__name__}) needs example_inputs"
            )
        if not isinstance(example_inputs, list | tuple):
            example_inputs = (example_inputs,)
        return import_torch(model, tuple(example_inputs))
    if callable(model) and not _is_module_object(model):
        from frontends.numpy_trace import trace

        if example_inputs is None:
            raise CompileError(f"tracing {getattr(model, '__name__', 'a function')} needs example inputs")
        return trace(model, tuple(example_inputs),
                     name=getattr(model, "__name__", "main").strip("<>") or "main")
    raise CompileError(
        f"cannot compile a {type(model).__name__}: expected a Python function, a "
        "torch.nn.Module, an onnx.ModelProto or the path of a .onnx file"
    )


def _is_onnx(model: Any) -> bool:
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model).lower().endswith(".onnx")
    return type(model).__module__.split(".")[0] == "onnx" and type(model).__name__ == "ModelProto"


def is_torch_module(model: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def compile_program(program: Any, options: CompileOptions) -> CompiledModel:
    """Compile a frontend's program (anything with .module / .func_name / .output_is_tuple)."""
    m = compile_module(
        program.module,
        program.func_name,
        output_is_tuple=program.output_is_tuple,
        options=options,
        locations=getattr(program, "locations", None),
    )
    m.input_names = getattr(program, "input_names", None)
    m.output_names = getattr(program, "output_names", None)
    m.guards = list(getattr(program, "guards", None) or [])
    set_uint8_io(m, program)
    return m


def set_uint8_io(m: CompiledModel, program: Any) -> None:
    """The program's uint8 inputs and outputs (held as int8 inside) on the compiled model,
    which then takes and returns uint8 arrays there."""
    m.uint8_inputs = list(getattr(program, "uint8_inputs", None) or [])
    m.uint8_outputs = list(getattr(program, "uint8_outputs", None) or [])
    for i in m.uint8_inputs:
        m.input_types[i] = (m.input_types[i][0], np.dtype(np.uint8))


def _is_module_object(model: Any) -> bool:
    return type(model).__module__.split(".")[0] in ("torch", "onnx")


def _compile_function(fn: Callable, inputs: tuple, options: CompileOptions) -> CompiledModel:
    return compile_program(import_model(fn, inputs), options)


def load(directory: str | os.PathLike, name: str | None = None):
    """The ahead-of-time artifact in `directory` (`aicc MODEL --aot -o DIR`, or
    `CompiledModel.export(DIR)`) as a callable model: NumPy arrays in, NumPy arrays out. `name`
    picks one artifact when the folder holds several (its `--aot-name`)."""
    import json
    from pathlib import Path

    folder = Path(directory)
    if name is None:
        found = sorted(p for p in folder.glob("*.json")
                       if (folder / f"lib{p.stem}.so").exists()) if folder.is_dir() else []
        if len(found) != 1:
            what = (f"holds {len(found)} ({', '.join(p.stem for p in found)}): pass name="
                    if found else "holds none (lib<name>.so with <name>.json)")
            raise CompileError(f"compiler.load: {directory} {what}")
        meta_path = found[0]
    else:
        meta_path = folder / f"{name}.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as e:
        raise CompileError(f"compiler.load: cannot read {meta_path}: {e}") from None
    return get_target(meta.get("target", "cpu")).load_library(folder, meta)


class JitFunction:
    """A traced-on-call function: compiled once per distinct input shapes and dtypes."""

    def __init__(self, fn: Callable, options: CompileOptions):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.options = options
        self.cache: dict[tuple, CompiledModel] = {}

    def compiled_for(self, *inputs) -> CompiledModel:
        arrays = tuple(np.asarray(x) for x in inputs)
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        if key not in self.cache:
            self.cache[key] = _compile_function(self.fn, arrays, self.options)
        return self.cache[key]

    def __call__(self, *inputs):
        return self.compiled_for(*inputs)(*inputs)

    def ir(self, stage: str) -> str:
        """The IR of the most recently compiled signature."""
        if not self.cache:
            raise CompileError(f"{self.fn.__name__} has not been compiled yet: call it first")
        return next(reversed(self.cache.values())).ir(stage)


def jit(fn: Callable | None = None, *, target: str = "cpu", threads: int | None = None,
        fuse: bool = True, target_cpu: str | None = None):
    """`@jit` or `@jit(target="cpu")`: compile a NumPy-style function on first call per signature."""
    options = CompileOptions(target, threads, fuse, target_cpu=target_cpu)
    _check_target(options)

    def wrap(f: Callable) -> JitFunction:
        return JitFunction(f, options)

    return wrap(fn) if fn is not None else wrap
