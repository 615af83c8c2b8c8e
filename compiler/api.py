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


def cpu_target_options(tune: bool | str = False, tune_budget: float | None = None,
                       int8_saturation: bool = False) -> dict:
    """compile's cpu options (see there) as CompileOptions.target_options: only those asked
    for, so that a compile without them keeps its cache key."""
    options = {"tune": tune, "tune_budget": tune_budget} if tune else {}
    if int8_saturation:
        options["int8_saturation"] = True
    return options


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
    dynamic_shapes: Any = None,
    int8_saturation: bool = False,
) -> CompiledModel | JitFunction:
    """Compile `model` for `target`.

    A Python function with `example_inputs` is traced and compiled now for those shapes; without
    them it compiles on first call, once per distinct input shapes and dtypes (like `jit`).
    An ONNX model (a ModelProto or a path ending in .onnx) keeps its symbolic input dims
    (`dim_param`) symbolic: compiled once, it runs at any size of them (`m.is_dynamic`); sizes
    from `input_shapes` ({input name: shape}) or from the shapes of `example_inputs` compile it
    for those shapes instead. A torch.nn.Module is exported with torch.export on
    `example_inputs`; `dynamic_shapes` is torch.export's argument (a torch.export.Dim per
    dynamic dim), whose dims then stay symbolic the same way, checked against the Dims' ranges
    on every call. A call that breaks the compiled shapes raises DimensionError.

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

    `int8_saturation=True` (cpu) computes an int8 model's u8 x s8 products as ONNX Runtime's
    GEMM does on this CPU: without VNNI, in pairs of k = 2i, 2i + 1 summed into int16 with
    saturation (vpmaddubsw, as in its MLAS kernels, oneDNN and TVM there), which is faster,
    but a pair of large products saturates; with VNNI nothing changes. The default keeps every
    int32 sum exact (7-bit weights take vpmaddubsw exactly anyway). Measured against ONNX
    Runtime's AVX2 kernels: MatMulInteger and QLinearConv saturate as here, ConvInteger does
    not (its results are the exact ones).
    """
    options = CompileOptions(target, threads, fuse, print_ir_after_all, schedule, target_cpu,
                             target_options=cpu_target_options(tune, tune_budget, int8_saturation))
    _check_target(options)
    if callable(model) and not _is_module_object(model) and not is_torch_module(model) \
            and example_inputs is None:
        return JitFunction(model, options)
    if dynamic_shapes is not None and not is_torch_module(model):
        raise CompileError("dynamic_shapes is torch.export's argument, for a torch.nn.Module; "
                           "an ONNX model's symbolic dims stay dynamic when no input_shapes are "
                           "given, and a Python function takes @jit(dynamic=True)")
    return compile_program(import_model(model, example_inputs, input_shapes, dynamic_shapes),
                           options)


def import_model(model: Any, example_inputs: Sequence[Any] | None = None,
                 input_shapes: dict[str, Sequence[int]] | None = None, dynamic_shapes=None) -> Any:
    """The aicc program of `model` (a Python function with its example inputs, a
    torch.nn.Module, an ONNX model or path), through the frontend that knows its kind.
    `dynamic_shapes`: a module's torch.export argument, or for a function {dim: symbol name}
    per input (the dims traced as symbols)."""
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
        return import_torch(model, tuple(example_inputs), dynamic_shapes)
    if callable(model) and not _is_module_object(model):
        from frontends.numpy_trace import trace

        if example_inputs is None:
            raise CompileError(f"tracing {getattr(model, '__name__', 'a function')} needs example inputs")
        return trace(model, tuple(example_inputs),
                     name=getattr(model, "__name__", "main").strip("<>") or "main",
                     dynamic_dims=dynamic_shapes)
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
    m.dim_ranges = dict(getattr(program, "dim_ranges", None) or {})
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


def _compile_function(fn: Callable, inputs: tuple, options: CompileOptions,
                      dynamic_dims=None) -> CompiledModel:
    return compile_program(import_model(fn, inputs, dynamic_shapes=dynamic_dims), options)


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
    """A traced-on-call function, with torch.compile's automatic dynamic shapes.

    `dynamic=None` (the default): the first call compiles for its exact shapes; a later call
    whose shapes differ from a compiled signature in some dims only (same ranks and dtypes)
    compiles once more with those dims symbolic, and that model serves every later size of
    them. `dynamic=True`: every dim above 1 is symbolic from the first call; `dynamic=False`:
    one compile per distinct shapes. Dims of equal size in the call that made them symbolic
    share one symbol (torch's "duck sizing"); size-1 dims stay static (they broadcast). When
    the function cannot be compiled with symbolic dims (an op that needs static sizes), the
    call compiles for its static shapes instead and `stats["dynamic_fallback"]` says why.
    `stats["compilations"]` counts the compiles."""

    def __init__(self, fn: Callable, options: CompileOptions, dynamic: bool | None = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.options = options
        self.dynamic = dynamic
        self.cache: dict[tuple, CompiledModel] = {}  # exact signatures
        self.dynamic_models: list[tuple[tuple, CompiledModel]] = []  # (signature pattern, model)
        self.stats: dict = {"compilations": 0}

    def _compile(self, arrays: tuple, dynamic_dims=None) -> CompiledModel:
        self.stats["compilations"] += 1
        return _compile_function(self.fn, arrays, self.options, dynamic_dims)

    def compiled_for(self, *inputs) -> CompiledModel:
        arrays = tuple(np.asarray(x) for x in inputs)
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        if key in self.cache:
            return self.cache[key]
        for pattern, m in self.dynamic_models:
            if _matches(pattern, arrays):
                return m
        dims = None
        if self.dynamic:
            dims = _symbolic_dims(arrays, lambda i, k, n: n > 1)
        elif self.dynamic is None:
            prev = next((k for k in reversed(self.cache)
                         if [(len(s), d) for s, d in k] == [(len(a.shape), a.dtype.str) for a in arrays]), None)
            if prev is not None:
                dims = _symbolic_dims(arrays, lambda i, k, n: prev[i][0][k] != n
                                      and max(n, prev[i][0][k]) > 1)
        if dims is not None and any(dims) and "dynamic_fallback" not in self.stats:
            try:
                m = self._compile(arrays, dims)
            except CompileError as e:
                if self.dynamic:
                    raise
                self.stats["dynamic_fallback"] = str(e)  # static compiles from now on
            else:
                pattern = tuple((tuple(None if k in d else n for k, n in enumerate(a.shape)), a.dtype.str)
                                for a, d in zip(arrays, dims))
                self.dynamic_models.append((pattern, m))
                return m
        self.cache[key] = self._compile(arrays)
        return self.cache[key]

    def __call__(self, *inputs):
        return self.compiled_for(*inputs)(*inputs)

    def ir(self, stage: str) -> str:
        """The IR of the most recently compiled signature (a dynamic one when there is one)."""
        if self.dynamic_models:
            return self.dynamic_models[-1][1].ir(stage)
        if not self.cache:
            raise CompileError(f"{self.fn.__name__} has not been compiled yet: call it first")
        return next(reversed(self.cache.values())).ir(stage)


def _symbolic_dims(arrays, pick) -> list[dict[int, str]]:
    """{dim: symbol} per input for the dims `pick(input, dim, size)` chooses; dims of one size
    share a symbol (s0, s1, ... in order of first appearance)."""
    names: dict[int, str] = {}
    out = []
    for i, a in enumerate(arrays):
        d = {}
        for k, n in enumerate(a.shape):
            if pick(i, k, n):
                d[k] = names.setdefault(n, f"s{len(names)}")
        out.append(d)
    return out


def _matches(pattern, arrays) -> bool:
    if len(pattern) != len(arrays):
        return False
    for (shape, dt), a in zip(pattern, arrays):
        if a.dtype.str != dt or len(shape) != a.ndim or any(
                s is not None and s != n for s, n in zip(shape, a.shape)):
            return False
    return True


def jit(fn: Callable | None = None, *, target: str = "cpu", threads: int | None = None,
        fuse: bool = True, target_cpu: str | None = None, dynamic: bool | None = None):
    """`@jit` or `@jit(target="cpu", dynamic=...)`: compile a NumPy-style function on its first
    call; see JitFunction for how later shapes are handled."""
    options = CompileOptions(target, threads, fuse, target_cpu=target_cpu)
    _check_target(options)

    def wrap(f: Callable) -> JitFunction:
        return JitFunction(f, options, dynamic)

    return wrap(fn) if fn is not None else wrap
