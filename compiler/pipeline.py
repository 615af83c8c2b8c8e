"""Compiling an aicc-dialect module to a callable, for any target.

The pipeline of a target comes from the target (compiler/targets/): the four shared stages
of compiler/lowering/pipeline.py with its own passes slotted in, then stages of its own. The
stages each target prints (`CompiledModel.ir(stage)`):

    tensor  the traced aicc dialect, after the graph passes (fold constants, simplify, fold
            conv + batch norm, fuse linear + bias) and canonicalize / CSE / DCE
    linalg  linalg on tensors, elementwise chains fused
    memref  bufferized: linalg on memrefs, results as out-parameters
    loops   scf.parallel / scf.for loop nests over memref.load / store
    llvm    cpu: LLVM IR from our emitter (before LLVM's optimizer)
    asm     cpu: assembly after LLVM O3
    gpu     cuda, cuda-emu: the loop nests mapped onto CUDA grids (gpu_map.kernel)
    cuda    cuda, cuda-emu: the CUDA C
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from compiler.cache import CompileCache, cache_enabled, source_digest
from compiler.dialects.aicc import numpy_dtype
from compiler.dialects.shapes import fmt_shape, is_dynamic, shape_of
from compiler.errors import CompileError, DimensionError, InternalError, SpecializationError
from compiler.lowering.nn_to_linalg import (
    CONV_LOWERING_ENV,
    CONV_PACKED_1X1_ENV,
    CONV_PACKED_ENV,
    CONV_WINOGRAD_ENV,
)
from compiler.lowering.pipeline import cleanup, graph_passes, make_context
from compiler.lowering.plan_memory import WORKSPACE_ATTR, WORKSPACE_DYNAMIC_ATTR
from compiler.progress import Progress
from compiler.stages import STAGES, CompileOptions, PassTiming, StageIR
from compiler.symbolic import Sym, parse_dim
from compiler.targets import Target, available_targets, get_target
from compiler.threads import default_threads

REUSE_OUTPUT_BYTES = 1 << 20  # results this large reuse a dropped array of the previous call
FAULT_ENV = "AICC_TEST_NUMERICS_FAULT"  # "INDEX:DELTA": check_numerics' test hook (tests only)


def stage_passes(target: str, fuse: bool = True, schedule: str | dict | None = None,
                 threads: int | None = None) -> list[tuple[str, list[ModulePass]]]:
    """The pipeline of `target` for these options, as (stage whose IR it produces, passes)."""
    options = CompileOptions(target, threads, fuse, schedule=schedule)
    t = get_target(target)
    t.check_options(options)
    return t.pipeline(options)


@dataclass
class CompiledModel:
    """A compiled aicc module: call it with NumPy arrays, read the IR of every stage."""

    func_name: str
    input_types: list[tuple[tuple[int, ...], np.dtype]]
    output_types: list[tuple[tuple[int, ...], np.dtype]]
    output_is_tuple: bool
    stages: dict[str, str]
    executable: object
    timings: list[PassTiming] = field(default_factory=list)
    workspace_bytes: int = 0  # plan-memory's arena, allocated once per calling thread
    # dynamic dims: the arena's bytes as an expression of the symbols (a Sym; None: static);
    # each thread's arena then grows to the largest a call has needed
    workspace_dynamic: object = None
    stats: dict = field(default_factory=dict)  # kernels, flops, bytes: see compiler/stats.py
    target: Target | None = None  # None: the cpu target
    options: CompileOptions | None = None  # what it was compiled with
    tune_report: object = None  # tune=True: what the tuner measured (cpu: tune.TuneReport)
    quantization: object = None  # compiler.quantize(_dynamic): its report
    # (input index, input name, value): inputs compiled as constants (a frontend specialized on
    # the example value); every call checks them, and a different value is a SpecializationError
    guards: list = field(default_factory=list)
    # dynamic dims: {symbol: (min, max)} the frontend allows (max None: unbounded)
    dim_ranges: dict = field(default_factory=dict)
    # inputs / outputs that are uint8 to the caller and int8 (v - 128) in the compiled code (an
    # ONNX model's uint8 tensors, see frontends/onnx_common.py): converted on every call
    uint8_inputs: list = field(default_factory=list)
    uint8_outputs: list = field(default_factory=list)
    _fn: Callable | None = None
    _local: threading.local = field(default_factory=threading.local)
    _shapes_seen: dict = field(default_factory=dict)  # dynamic: input shapes -> _dynamic_sizes

    def _workspace(self, nbytes: int | None = None) -> np.ndarray:
        ws = getattr(self._local, "workspace", None)
        need = self.workspace_bytes if nbytes is None else nbytes
        if ws is None or ws.nbytes < need:  # one per thread so concurrent calls never share it
            target = self.target or get_target("cpu")
            ws = self._local.workspace = target.workspace(need)
        return ws

    def _dynamic_sizes(self, args) -> tuple:
        """For inputs of these shapes: the outputs' shapes, the size parameters (each dynamic
        dim of the inputs, then of the outputs, then the arena's bytes) and the arena's bytes;
        a DimensionError if they break the compiled signature."""
        env = bind_dims(self.func_name, self.input_types, args, getattr(self, "input_names", None),
                        self.dim_ranges)
        out_shapes = [tuple(d.evaluate(env) if isinstance(d, Sym) else d for d in shape)
                      for shape, _ in self.output_types]
        sizes = []
        for (shape, _), actual in [*zip(self.input_types, (a.shape for a in args)),
                                   *zip(self.output_types, out_shapes)]:
            sizes += [n for d, n in zip(shape, actual) if isinstance(d, Sym)]
        nbytes = None
        if self.workspace_dynamic is not None:
            nbytes = max(1, int(self.workspace_dynamic.evaluate(env)))
            sizes.append(nbytes)
        if len(self._shapes_seen) > 256:  # a bound on the memo, not on the shapes served
            self._shapes_seen.clear()
        return out_shapes, tuple(sizes), nbytes

    @cached_property
    def is_dynamic(self) -> bool:
        """Some input dim is symbolic: one compiled model for every value of it."""
        return any(isinstance(d, Sym) for shape, _ in self.input_types for d in shape)

    def _outputs(self, shapes: list[tuple[int, ...]] | None = None) -> list[np.ndarray]:
        """Arrays for the results. A large one reuses the array this thread returned last time
        when nothing references it any more (the caller dropped it, views included): a fresh
        64 MB array costs about as much again as a memory-bound kernel writing it, in page
        faults and the kernel zeroing the pages."""
        cache = getattr(self._local, "outputs", None)
        if cache is None:
            cache = self._local.outputs = [None] * len(self.output_types)
        outs = []
        for i, (shape, dtype) in enumerate(self.output_types):
            if shapes is not None:
                shape = shapes[i]
            # referenced only by the cache and getrefcount's argument: nobody else sees it
            if cache[i] is not None and sys.getrefcount(cache[i]) == 2 \
                    and cache[i].shape == shape:
                outs.append(cache[i])
                continue
            a = np.empty(shape, dtype)
            cache[i] = a if a.nbytes >= REUSE_OUTPUT_BYTES else None
            outs.append(a)
        return outs

    def ir(self, stage: str) -> str:
        if stage not in self.stages:
            raise CompileError(f"unknown IR stage '{stage}' (expected one of: "
                               f"{', '.join(s for s in STAGES if s in self.stages)})")
        if stage == "asm" and not self.stages["asm"] and hasattr(self.executable, "asm"):
            self.stages["asm"] = self.executable.asm()
        return self.stages[stage]

    def export(self, directory, name: str = "model") -> list:
        """Write the model as a library that runs without Python or aicc (cpu: `lib<name>.so`
        and its C header `<name>.h`) into `directory`; the paths written. `compiler.load`
        opens it again."""
        from pathlib import Path

        if self.is_dynamic:
            raise CompileError(f"{self.func_name} has dynamic dims; the library export takes "
                               "static shapes for now: compile it with static input shapes")
        if self.uint8_inputs or self.uint8_outputs:
            raise CompileError("export: the model has uint8 inputs or outputs, which aicc holds as int8 "
                               "(v - 128) inside; the library's C interface would expose that form")
        out = Path(directory)
        return (self.target or get_target("cpu")).export_library(self, out, name)

    def check_numerics(self, *inputs, fault: tuple[int, float] | None = None):
        """Run the model kernel by kernel on `inputs` and compare each kernel's result with
        the reference interpreter in float64 on the same operands (compiler/numerics.py): a
        `NumericsReport` (`.table()`, `.first_failure`, `.ok`). `fault` is a test hook."""
        from compiler.numerics import check_numerics

        def compile_fn(module, func_name, output_is_tuple, options):
            return compile_module(module, func_name, output_is_tuple=output_is_tuple,
                                  options=options, use_cache=False)

        if fault is None and os.environ.get(FAULT_ENV):  # the test hook, from a command line
            index, delta = os.environ[FAULT_ENV].split(":")
            fault = (int(index), float(delta))
        return check_numerics(self, inputs, compile_fn, fault=fault)

    def quant_report(self) -> str:
        """Each int8 layer's SQNR against float, with its scales (compiler.quantize,
        compiler.quantize_dynamic)."""
        if self.quantization is None:
            raise CompileError(f"{self.func_name} is not quantized: make it with compiler.quantize "
                               f"or compiler.quantize_dynamic")
        return self.quantization.table()

    def rebuilt_executable(self):
        """The executable whose code the stage IR describes: this model's own, or for a model
        loaded from the compile cache, the one built when its IR was first asked for (its
        external symbols are named anew)."""
        return getattr(self.stages, "rebuilt", None) or self.executable

    @property
    def threads(self) -> int:
        return self.executable.threads

    @threads.setter
    def threads(self, n: int) -> None:
        self.executable.threads = n

    def __call__(self, *inputs):
        if len(inputs) != len(self.input_types):
            raise CompileError(
                f"{self.func_name} was compiled for {len(self.input_types)} inputs, got {len(inputs)}"
            )
        args = []
        dynamic = self.is_dynamic
        for i, (x, (shape, dtype)) in enumerate(zip(inputs, self.input_types)):
            a = np.asarray(_host_tensor(x))
            if a.dtype != dtype or (not dynamic and a.shape != shape):
                raise CompileError(
                    f"{self.func_name}: input {i} was compiled as {fmt_shape(shape)} {dtype}, "
                    f"got {a.shape} {a.dtype}"
                )
            args.append(np.ascontiguousarray(a))
        out_shapes, sizes, nbytes = None, (), None
        if dynamic:  # checked and sized once per distinct input shapes
            key = tuple(a.shape for a in args)
            known = self._shapes_seen.get(key)
            if known is None:
                known = self._shapes_seen[key] = self._dynamic_sizes(args)
            out_shapes, sizes, nbytes = known
        for i, name, value in self.guards:
            if not np.array_equal(args[i].reshape(value.shape), value):
                raise SpecializationError(
                    f"{self.func_name}: input {i} ('{name}') was compiled as the constant "
                    f"{np.array2string(value, threshold=16)} (the example input's value); this call "
                    f"gives {np.array2string(args[i].reshape(value.shape), threshold=16)}: compile the model again with "
                    "this value", input_name=name)
        for i in self.uint8_inputs:  # v - 128 as int8 is v with its top bit flipped
            args[i] = np.bitwise_xor(args[i], np.uint8(0x80)).view(np.int8)
        outs = self._outputs(out_shapes)
        # the arena: its static size, or the size these shapes need
        extra = [self._workspace(nbytes)] if self.workspace_bytes or nbytes is not None else []
        first = self._fn is None
        if first:
            self._fn = self.executable.get(self.func_name,
                                           len(args) + len(outs) + len(extra) + len(sizes))
        self._fn(*args, *outs, *extra, *sizes)
        if first:  # cuda: each kernel loads on its first launch; cpu: one load for all
            self.stats["kernels_loaded"] = getattr(self.executable, "kernels_loaded",
                                                   self.stats.get("kernels", 0))
        for i in self.uint8_outputs:
            outs[i] = np.bitwise_xor(outs[i].view(np.uint8), np.uint8(0x80))
        if self.output_is_tuple:
            return tuple(outs)
        return outs[0]


def _host_tensor(x):
    """A torch tensor (duck-typed, torch is never imported here) detached and on the CPU, so
    that NumPy can view it; anything else unchanged."""
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach"):
        return x.detach().cpu()
    return x


def run_passes(
    module: ModuleOp, options: CompileOptions, stats: dict | None = None,
    progress: Progress | None = None, locations: dict | None = None,
) -> tuple[StageIR, list[PassTiming]]:
    """Run the pipeline; the IR of each stage, the pass timings, and (into `stats`, when
    given) the statistics of compiler/stats.py. `progress` gets a line per stage.
    `locations` (op -> where the frontend made it) gives `stages.origins` for the ops of the
    tensor stage that the graph passes kept."""
    from compiler.stats import stage_stats

    ctx = make_context()
    stages = StageIR()
    timings: list[PassTiming] = []
    target = get_target(options.target)
    target.check_options(options)
    start = module.clone()  # the tensor-level IR, for a reproducer should a pass fail
    applied: list[ModulePass] = []
    for stage, passes in target.pipeline(options):
        if progress is not None:
            progress.stage(stage, len(passes))
        for p in passes:
            t0 = time.perf_counter()
            applied.append(p)
            try:
                p.apply(ctx, module)
            except CompileError:
                raise
            except Exception as e:  # a pass that crashes is a bug in aicc
                raise InternalError(f"{type(e).__name__}: {e}", pass_name=p.name, stage=stage,
                                    reproducer=write_reproducer(start, applied)) from e
            timings.append(PassTiming(p.name, time.perf_counter() - t0))
            if progress is not None:
                progress.step(p.name)
            if options.print_ir_after_all:
                options.print_ir_after_all(p.name, module)
        try:
            module.verify()
        except VerifyException as e:  # a pass produced invalid IR: a bug in aicc
            culprit = _first_invalid(ctx, start, applied)
            raise InternalError(f"the IR it produced does not verify: {e}", pass_name=culprit.name,
                                stage=stage, reproducer=write_reproducer(
                                    start, applied[:applied.index(culprit) + 1])) from e
        stages[stage] = module.clone()  # printed on demand: big constants print slowly
        if stage == "tensor" and locations:
            stages.origins = [locations.get(op, "") for op in _body_ops(module)]
        if stats is not None:
            stats.update(stage_stats(stage, module))
    return stages, timings


def _first_invalid(ctx, start: ModuleOp, passes: list[ModulePass]) -> ModulePass:
    """Replay `passes` on a copy of `start`, verifying after each: the first whose output
    does not verify (the last pass if none does, in the replay)."""
    module = start.clone()
    for p in passes:
        p.apply(ctx, module)
        try:
            module.verify()
        except VerifyException:
            return p
    return passes[-1]


def write_reproducer(start: ModuleOp, passes: list[ModulePass]) -> str | None:
    """`aicc-repro-<hash>.mlir` in $AICC_REPRO_DIR (else the temporary folder): the tensor-level
    IR, headed by the aicc-opt command that runs `passes` on it. Its path, or None if it could
    not be written (the error is reported all the same)."""
    import tempfile

    pipeline = ",".join(str(p.pipeline_pass_spec()) for p in passes)
    try:
        body = str(start)
        digest = hashlib.sha256((pipeline + body).encode()).hexdigest()[:12]
        folder = os.environ.get("AICC_REPRO_DIR") or tempfile.gettempdir()
        path = os.path.join(folder, f"aicc-repro-{digest}.mlir")
        with open(path, "w") as f:
            f.write(f"// aicc-opt {path} -p '{pipeline}'\n{body}\n")
        return path
    except Exception:  # noqa: BLE001 - the reproducer is a courtesy; the error still goes out
        return None


def compile_module(
    module: ModuleOp,
    func_name: str,
    *,
    output_is_tuple: bool = False,
    options: CompileOptions | None = None,
    use_cache: bool = True,
    locations: dict | None = None,
) -> CompiledModel:
    """Compile an aicc-dialect module (one func `func_name` on tensors) for `options.target`.
    `locations`: the frontend's op -> source location (file:line, ONNX node), kept for the
    ops of the tensor stage (`CompiledModel.check_numerics` names them)."""
    options = options or CompileOptions()
    fn = next(
        (o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == func_name),
        None,
    )
    if fn is None:
        raise CompileError(f"no function @{func_name} in the module")
    ftype = fn.function_type
    dynamic = any(is_dynamic(t) for t in ftype.inputs)
    if dynamic:
        from compiler.lowering.tensor_to_linalg import check_dynamic_support

        check_dynamic_support(module)  # before any pass: an op that needs static sizes
    input_types = [_shape_dtype(t) for t in ftype.inputs]
    output_types = [_shape_dtype(t) for t in ftype.outputs]

    target = get_target(options.target)
    if dynamic and not target.dynamic_shapes:
        raise CompileError(f"the {target.name} target compiles static shapes only: give the model "
                           "static input shapes (input_shapes=, example inputs, @jit(dynamic=False))")
    tune_report = target.prepare(module, func_name, options)
    cache, key = (_model_cache(module, func_name, output_is_tuple, options, target) if use_cache
                  else (None, ""))
    if cache is not None:
        t0 = time.perf_counter()
        entry = cache.get(key)
        if entry is not None:
            stages = LazyStages(module, func_name, output_is_tuple, options, locations)

            def load():
                return target.load_executable(entry, options, len(input_types),
                                              len(output_types))

            def rebuild():  # an entry this aicc cannot load after all: compile anew
                cache.discard(key)
                return stages.rebuild()

            meta = entry.meta
            return CompiledModel(
                func_name, input_types, output_types, output_is_tuple, stages,
                LazyExecutable(load, rebuild, options.threads or default_threads()),
                [PassTiming("cache-load", time.perf_counter() - t0)],
                workspace_bytes=meta["workspace_bytes"],
                workspace_dynamic=_workspace_dynamic(meta.get("workspace_dynamic")),
                stats={**meta["stats"], "cache": "hit", "kernels_loaded": 0}, target=target,
                options=options, tune_report=tune_report)

    stats: dict = {"fused": options.fuse, "compilations": 1}
    with _gc_paused(), Progress() as progress:  # progress: on a terminal, after a while
        stages, timings = run_passes(module, options, stats, progress, locations)
        workspace = fn.attributes.get(WORKSPACE_ATTR)
        workspace_bytes = workspace.value.data if workspace is not None else 0
        dyn = fn.attributes.get(WORKSPACE_DYNAMIC_ATTR)
        workspace_dynamic = dyn.data if dyn is not None else None
        progress.stage("codegen", 1)
        exe = target.build(module, stages, timings, options, len(input_types),
                           len(output_types))
        progress.step()
    stats.update(getattr(exe, "codegen_stats", None) or {})  # what code generation counted
    stats["cache"] = "off"
    stats["kernels_loaded"] = getattr(exe, "kernels_loaded", stats.get("kernels", 0))
    if cache is not None:
        saved = target.save_executable(exe)
        if saved is not None:
            t0 = time.perf_counter()
            meta, blobs = saved
            meta = {**meta, "stats": stats, "workspace_bytes": workspace_bytes,
                    "workspace_dynamic": workspace_dynamic}
            stats["cache"] = "stored" if cache.put(key, meta, blobs) else "unwritable"
            timings.append(PassTiming("cache-store", time.perf_counter() - t0))
    return CompiledModel(
        func_name,
        input_types,
        output_types,
        output_is_tuple,
        stages,
        exe,
        timings,
        workspace_bytes=workspace_bytes,
        workspace_dynamic=_workspace_dynamic(workspace_dynamic),
        stats=stats,
        target=target,
        options=options,
        tune_report=tune_report,
    )


class LazyExecutable:
    """An executable from a compile cache entry, loaded (cpu: its machine code linked into
    MCJIT, its weights bound) the first time it is used: a model compiled from the cache
    and never called costs no load. Should the load fail, the entry is discarded and the
    model compiled anew (`rebuild`)."""

    def __init__(self, load: Callable, rebuild: Callable, threads: int):
        self._load, self._rebuild = load, rebuild
        self._exe = None
        self._threads = threads

    @property
    def loaded(self) -> bool:
        return self._exe is not None

    def _executable(self):
        if self._exe is None:
            try:
                exe = self._load()
            except Exception:  # noqa: BLE001 - see the class's docstring
                exe = self._rebuild()
            exe.threads = self._threads
            self._exe = exe
        return self._exe

    @property
    def threads(self) -> int:
        return self._exe.threads if self._exe is not None else self._threads

    @threads.setter
    def threads(self, n: int) -> None:
        self._threads = n
        if self._exe is not None:
            self._exe.threads = n

    def __getattr__(self, name: str):  # get, address, data, asm, object_code, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._executable(), name)


@contextmanager
def _gc_paused():
    """The cyclic garbage collector off for the duration of a compile. xDSL's IR is a graph of
    cycles (ops, blocks and regions point at each other) and a compile makes millions of
    objects that mostly live until its end: the collector traversed them again and again as
    the heap grew (ResNet-50: 1 to 2 s of a 10 s compile, half of emit-llvm). The garbage is
    collected as usual afterwards (peak memory: 290 -> 385 MB for ResNet-50). Restores the
    state it found, so a compile inside a compile, or one run with the collector off, leaves
    it as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _model_cache(module: ModuleOp, func_name: str, output_is_tuple: bool,
                 options: CompileOptions, target: Target):
    """(the model cache, this compile's key), or (None, "") when it is not to be used: turned
    off, a target that cannot reload its executables, or IR printed after every pass (which
    needs the passes to run)."""
    if not cache_enabled() or options.print_ir_after_all is not None or not target.cacheable:
        return None, ""
    return CompileCache("model"), model_key(module, func_name, output_is_tuple, options, target)


# The environment the passes read: a compile under other values is another cache entry
# (a target's own knobs are in its `cache_key`).
COMPILE_ENV = (CONV_LOWERING_ENV, CONV_PACKED_ENV, CONV_PACKED_1X1_ENV, CONV_WINOGRAD_ENV)


def model_key(module: ModuleOp, func_name: str, output_is_tuple: bool,
              options: CompileOptions, target: Target) -> str:
    """The compile cache's key of a model: the tensor-level IR (its fingerprint), every
    option, the environment the passes read, the target's machine and tool versions
    (`Target.cache_key`), and the versions of aicc (its source digest), xDSL and NumPy."""
    from compiler.fingerprint import module_fingerprint

    described = {
        "func": func_name, "tuple": output_is_tuple, "target": options.target,
        "threads": options.threads, "default_threads": default_threads(), "fuse": options.fuse,
        "target_cpu": options.target_cpu,
        "target_options": {k: v for k, v in options.target_options.items()
                           if k not in target.keyless_options},
        "env": {k: os.environ.get(k, "") for k in COMPILE_ENV},
        "machine": target.cache_key(options),
        "versions": _versions(),
    }
    h = hashlib.blake2b(json.dumps(described, sort_keys=True, default=str).encode(),
                        digest_size=20)
    h.update(module_fingerprint(module).encode())
    return h.hexdigest()


@lru_cache(maxsize=None)
def _versions() -> dict[str, str]:
    """aicc (its source digest), xDSL and NumPy: read once per process."""
    from importlib import metadata

    try:
        xdsl = metadata.version("xdsl")
    except metadata.PackageNotFoundError:
        xdsl = "?"
    return {"aicc-source": source_digest(), "xdsl": xdsl, "numpy": np.__version__}


class LazyStages(StageIR):
    """The stage IR of a model loaded from the compile cache: nothing is kept, so the first
    stage asked for compiles the model again (passes and code generation, no cache) and keeps
    every stage of that compile."""

    def __init__(self, module: ModuleOp, func_name: str, output_is_tuple: bool,
                 options: CompileOptions, locations: dict | None = None):
        super().__init__()
        copy = module.clone()
        if locations:  # the same ops in the copy, in the same order
            locations = {c: locations[o] for o, c in zip(_body_ops(module), _body_ops(copy))
                         if o in locations}
        self._source = (copy, func_name, output_is_tuple, options, locations)
        self.rebuilt = None  # the executable of that compile

    def rebuild(self):
        """Compile the model again (every stage's IR) and return that compile's executable."""
        self._fill()
        return self.rebuilt

    def _fill(self) -> None:
        if self._source is None:
            return
        module, func_name, output_is_tuple, options, locations = self._source
        self._source = None
        again = compile_module(module, func_name, output_is_tuple=output_is_tuple,
                               options=options, use_cache=False, locations=locations)
        self.rebuilt = again.executable
        self.modules, self.origins = again.stages.modules, again.stages.origins
        for stage in again.stages:
            dict.__setitem__(self, stage, dict.__getitem__(again.stages, stage))
        if "asm" in again.stages and not dict.__getitem__(again.stages, "asm"):
            dict.__setitem__(self, "asm", again.executable.asm())

    def __contains__(self, stage) -> bool:
        self._fill()
        return super().__contains__(stage)

    def __getitem__(self, stage: str) -> str:
        self._fill()
        return super().__getitem__(stage)

    def module(self, stage: str) -> ModuleOp:
        self._fill()
        return super().module(stage)


def _body_ops(module: ModuleOp) -> list:
    """The ops of the module's functions' bodies, in order (the key of `StageIR.origins`)."""
    return [op for f in module.ops if isinstance(f, func.FuncOp) for op in f.body.walk()]


def _shape_dtype(t) -> tuple[tuple, np.dtype]:
    """A signature type's shape (a Sym for each dynamic dim) and dtype."""
    return shape_of(t), numpy_dtype(t.element_type)


def _workspace_dynamic(text: str | None):
    """plan-memory's aicc.workspace_dynamic as a Sym (None when the arena is static)."""
    return None if text is None else parse_dim(text)


def bind_dims(func_name: str, input_types, arrays, input_names, ranges: dict) -> dict[str, int]:
    """The value of each symbol from the inputs' shapes, after checking every constraint the
    compiled signature puts on them; a DimensionError naming the input, the dim and the
    constraint otherwise."""
    env: dict[str, int] = {}
    pending = []

    def name(i: int) -> str:
        n = input_names[i] if input_names and i < len(input_names) else None
        return f"input {i}" + (f" ('{n}')" if n else "")

    for i, ((shape, _), a) in enumerate(zip(input_types, arrays)):
        if a.ndim != len(shape):
            raise DimensionError(f"{func_name}: {name(i)} was compiled with rank {len(shape)} "
                                 f"{fmt_shape(shape)}, got shape {a.shape}",
                                 input_name=name(i))
        for k, (d, n) in enumerate(zip(shape, a.shape)):
            if not isinstance(d, Sym):
                if d != n:
                    raise DimensionError(
                        f"{func_name}: {name(i)} dim {k} is static {d} in the compiled model "
                        f"{fmt_shape(shape)}, got {n} (shape {a.shape})", input_name=name(i), dim=k)
            elif d.name is not None:
                sym = d.name
                if sym in env and env[sym] != n:
                    raise DimensionError(
                        f"{func_name}: {name(i)} dim {k} is '{sym}', which an earlier input gives "
                        f"as {env[sym]}; got {n} (shape {a.shape})", input_name=name(i), dim=k)
                lo, hi = ranges.get(sym, (1, None))
                if n < lo or (hi is not None and n > hi):
                    raise DimensionError(
                        f"{func_name}: {name(i)} dim {k} ('{sym}') must be in [{lo}, "
                        f"{'inf' if hi is None else hi}], got {n}", input_name=name(i), dim=k)
                env[sym] = n
            else:
                pending.append((i, k, d, n, a.shape))
    for i, k, d, n, shape in pending:
        try:
            want = d.evaluate(env)
        except ValueError:
            raise DimensionError(f"{func_name}: {name(i)} dim {k} is {d}, whose symbols no "
                                 "input gives on its own", input_name=name(i), dim=k) from None
        if want != n:
            raise DimensionError(f"{func_name}: {name(i)} dim {k} must be {d} = {want}, got {n} "
                                 f"(shape {shape})", input_name=name(i), dim=k)
    return env


__all__ = [
    "CompileOptions",
    "CompiledModel",
    "STAGES",
    "available_targets",
    "cleanup",
    "compile_module",
    "graph_passes",
    "make_context",
    "stage_passes",
]
