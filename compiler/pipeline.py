"""The pass pipelines per target, and compiling an aicc-dialect module to a callable.

Stages (each printable with `CompiledModel.ir(stage)`):

    tensor  the traced aicc dialect, after the graph passes (fold constants, simplify, fold
            conv + batch norm, fuse linear + bias) and canonicalize / CSE / DCE
    linalg  linalg on tensors, elementwise chains fused
    memref  bufferized: linalg on memrefs, results as out-parameters
    loops   scf.parallel / scf.for loop nests over memref.load / store
    llvm    LLVM IR from our emitter (before LLVM's optimizer)
    asm     host assembly after LLVM O3
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, linalg, math, memref, scf, tensor
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination
from xdsl.utils.exceptions import VerifyException

from compiler.dialects.aicc import AICC, numpy_dtype
from compiler.dialects.aicc_cpu import AICCCPU
from compiler.dialects.aicc_fused import AICC_FUSED
from compiler.dialects.gpu_map import GPUMap
from compiler.errors import CompileError
from compiler.lowering.bufferize import Bufferize
from compiler.lowering.fold_constants import FoldConstants
from compiler.lowering.fold_conv_bn import FoldConvBatchNorm
from compiler.lowering.fuse_attention import FuseAttention
from compiler.lowering.fuse_elementwise import FuseElementwise
from compiler.lowering.fuse_linear_bias import FuseLinearBias
from compiler.lowering.fuse_rows import FuseRows
from compiler.lowering.linalg_to_loops import LinalgToLoops
from compiler.lowering.lower_attention import LowerAttention
from compiler.lowering.plan_memory import WORKSPACE_ATTR, PlanMemory
from compiler.lowering.simplify import Simplify
from compiler.lowering.tensor_to_linalg import TensorToLinalg

TARGETS = ("cpu", "cuda")
REUSE_OUTPUT_BYTES = 1 << 20  # results this large reuse a dropped array of the previous call
STAGES = ("tensor", "linalg", "memref", "loops", "llvm", "asm", "gpu", "cuda")
# the stages each target produces (gpu: loops wrapped in gpu_map.kernel; cuda: CUDA C)
TARGET_STAGES = {"cpu": STAGES[:6], "cuda": ("tensor", "linalg", "memref", "loops", "gpu", "cuda")}


def make_context() -> Context:
    ctx = Context()
    for d in (
        builtin.Builtin,
        func.Func,
        arith.Arith,
        math.Math,
        tensor.Tensor,
        linalg.Linalg,
        memref.MemRef,
        scf.Scf,
        AICC,
        AICCCPU,
        AICC_FUSED,
        GPUMap,
    ):
        ctx.load_dialect(d)
    return ctx


def cleanup() -> list[ModulePass]:
    return [CanonicalizePass(), CommonSubexpressionElimination(), DeadCodeElimination()]


def graph_passes(target: str = "cpu") -> list[ModulePass]:
    """The tensor-level graph passes, before cleanup. Simplify after folding sees the folded
    constants; fold-conv-bn and fuse-linear-bias, which rewrite an op only when it has one
    use, run after CSE, so that they never split a shared matmul or conv into two.
    On CUDA a bias stays an add after the matmul: map-to-gpu fuses it into the tiled matmul
    kernel as an epilogue, while a bias-initialized accumulator would be a kernel of its own."""
    return [FoldConstants(), Simplify(),
            CommonSubexpressionElimination(), FoldConvBatchNorm(),
            *([FuseLinearBias()] if target != "cuda" else [])]


def stage_passes(target: str, fuse: bool = True, schedule: str | dict | None = None,
                 threads: int | None = None) -> list[tuple[str, list[ModulePass]]]:
    """The pipeline for `target`, as (stage whose IR it produces, passes) in order.

    On the CPU, choose-schedule attaches a schedule to each matmul (`schedule` overrides its
    fields, see compiler/lowering/schedule.py) and tile-matmul turns it into packing, cache
    blocks and micro-kernels before plan-memory places the packed buffers. The CUDA target
    maps the untiled matmul loops itself."""
    if target not in TARGETS:
        raise CompileError(f"unknown target '{target}' (expected one of: {', '.join(TARGETS)})")
    cpu_linalg: list[ModulePass] = []
    cpu_memref: list[ModulePass] = []
    if target == "cpu":
        from compiler.lowering.choose_schedule import ChooseSchedule
        from compiler.lowering.schedule import format_overrides
        from compiler.lowering.tile_matmul import TileMatmul
        from compiler.runtime.cpu import host_cache_bytes, host_vector_bits

        l1, l2 = host_cache_bytes()
        cpu_linalg = [ChooseSchedule(vector_bits=host_vector_bits(), threads=threads or 0,
                                     l1_bytes=l1, l2_bytes=l2,
                                     overrides=format_overrides(schedule))]
        cpu_memref = [TileMatmul(threads=threads or 0)]
    elif schedule:
        raise CompileError(f"schedule= applies to the cpu target, not '{target}'")
    # fuse-rows emits loop nests with per-thread stack buffers, which the CUDA mapping does not
    # take: the CUDA pipeline keeps its unfused row kernels (map-to-gpu fuses those itself).
    # Attention fuses on both targets: lower-attention turns the op into the CPU's loop nest,
    # while on CUDA the op stays whole through the loops stage and map-to-gpu maps it to one
    # flash-attention kernel (head dims up to MAX_ATTENTION_HEAD_DIM; a larger one stays unfused).
    fuse_nests = fuse and target == "cpu"
    fuse_attention: list[ModulePass] = []
    if fuse and target == "cpu":
        fuse_attention = [FuseAttention(), DeadCodeElimination()]
    elif fuse:
        from compiler.lowering.map_to_gpu import MAX_ATTENTION_HEAD_DIM

        fuse_attention = [FuseAttention(max_head_dim=MAX_ATTENTION_HEAD_DIM, f32_only=True),
                          DeadCodeElimination()]
    stages = [
        ("tensor", [*graph_passes(target), *cleanup(), *fuse_attention]),
        ("linalg", [TensorToLinalg(conv_bias=target != "cuda"), *([FuseElementwise()] if fuse else []), *cleanup(),
                    *cpu_linalg]),
        ("memref", [Bufferize(), *([FuseRows()] if fuse_nests else []), *cpu_memref,
                    PlanMemory(workspace_arg=True)]),
        ("loops", [*([LowerAttention()] if target == "cpu" else []), LinalgToLoops(transpose_tile=64 if target == "cpu" else 0),
                   CanonicalizePass(), CommonSubexpressionElimination()]),
    ]
    if target == "cuda":
        from compiler.lowering.map_to_gpu import MapToGpu

        stages.append(("gpu", [MapToGpu()]))
    return stages


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
    stats: dict = field(default_factory=dict)  # kernels, flops, bytes: see compiler/stats.py
    _fn: Callable | None = None
    _local: threading.local = field(default_factory=threading.local)

    def _workspace(self) -> np.ndarray:
        ws = getattr(self._local, "workspace", None)
        if ws is None:  # one per thread so concurrent calls never share it
            from compiler.runtime.cpu import arena

            ws = self._local.workspace = arena(self.workspace_bytes)
        return ws

    def _outputs(self) -> list[np.ndarray]:
        """Arrays for the results. A large one reuses the array this thread returned last time
        when nothing references it any more (the caller dropped it, views included): a fresh
        64 MB array costs about as much again as a memory-bound kernel writing it, in page
        faults and the kernel zeroing the pages."""
        cache = getattr(self._local, "outputs", None)
        if cache is None:
            cache = self._local.outputs = [None] * len(self.output_types)
        outs = []
        for i, (shape, dtype) in enumerate(self.output_types):
            # referenced only by the cache and getrefcount's argument: nobody else sees it
            if cache[i] is not None and sys.getrefcount(cache[i]) == 2:
                outs.append(cache[i])
                continue
            a = np.empty(shape, dtype)
            cache[i] = a if a.nbytes >= REUSE_OUTPUT_BYTES else None
            outs.append(a)
        return outs

    def ir(self, stage: str) -> str:
        if stage not in self.stages:
            raise CompileError(f"unknown IR stage '{stage}' (expected one of: {', '.join(STAGES)})")
        if stage == "asm" and not self.stages["asm"] and hasattr(self.executable, "asm"):
            self.stages["asm"] = self.executable.asm()
        return self.stages[stage]

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
        for i, (x, (shape, dtype)) in enumerate(zip(inputs, self.input_types)):
            a = np.asarray(_host_tensor(x))
            if a.shape != shape or a.dtype != dtype:
                raise CompileError(
                    f"{self.func_name}: input {i} was compiled as {shape} {dtype}, "
                    f"got {a.shape} {a.dtype}"
                )
            args.append(np.ascontiguousarray(a))
        outs = self._outputs()
        extra = [self._workspace()] if self.workspace_bytes else []
        if self._fn is None:
            self._fn = self.executable.get(self.func_name, len(args) + len(outs) + len(extra))
        self._fn(*args, *outs, *extra)
        if self.output_is_tuple:
            return tuple(outs)
        return outs[0]


def _host_tensor(x):
    """A torch tensor (duck-typed, torch is never imported here) detached and on the CPU, so
    that NumPy can view it; anything else unchanged."""
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach"):
        return x.detach().cpu()
    return x


class StageIR(dict):
    """Stage name -> IR text. A stage may be held as a module snapshot (a clone: the attributes,
    weights included, are shared, not copied) and is printed the first time it is read, so a
    model with hundreds of MB of weights does not pay for printing IR nobody asks for."""

    def __getitem__(self, stage: str) -> str:
        value = super().__getitem__(stage)
        if isinstance(value, ModuleOp):
            value = str(value)
            self[stage] = value
        return value


def run_passes(
    module: ModuleOp, options: CompileOptions, stats: dict | None = None
) -> tuple[StageIR, list[PassTiming]]:
    """Run the pipeline; the IR of each stage, the pass timings, and (into `stats`, when
    given) the statistics of compiler/stats.py."""
    from compiler.stats import stage_stats

    ctx = make_context()
    stages = StageIR()
    timings: list[PassTiming] = []
    for stage, passes in stage_passes(options.target, options.fuse, options.schedule,
                                      options.threads):
        for p in passes:
            t0 = time.perf_counter()
            p.apply(ctx, module)
            timings.append(PassTiming(p.name, time.perf_counter() - t0))
            if options.print_ir_after_all:
                options.print_ir_after_all(p.name, module)
        try:
            module.verify()
        except VerifyException as e:  # a pass produced invalid IR: a bug in aicc
            raise RuntimeError(f"IR after the {stage} stage does not verify: {e}") from e
        stages[stage] = module.clone()  # printed on demand: big constants print slowly
        if stats is not None:
            stats.update(stage_stats(stage, module))
    return stages, timings


def compile_module(
    module: ModuleOp,
    func_name: str,
    *,
    output_is_tuple: bool = False,
    options: CompileOptions | None = None,
) -> CompiledModel:
    """Compile an aicc-dialect module (one func `func_name` on tensors) for `options.target`."""
    options = options or CompileOptions()
    fn = next(
        (o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == func_name),
        None,
    )
    if fn is None:
        raise CompileError(f"no function @{func_name} in the module")
    ftype = fn.function_type
    input_types = [_shape_dtype(t) for t in ftype.inputs]
    output_types = [_shape_dtype(t) for t in ftype.outputs]

    stats: dict = {"fused": options.fuse}
    stages, timings = run_passes(module, options, stats)
    workspace = fn.attributes.get(WORKSPACE_ATTR)
    if options.target == "cuda":
        from compiler.runtime.cuda import compile_cuda

        exe = compile_cuda(module, stages, timings, len(input_types), len(output_types))
        return CompiledModel(func_name, input_types, output_types, output_is_tuple, stages, exe,
                             timings, workspace_bytes=workspace.value.data if workspace else 0,
                             stats=stats)

    from compiler.codegen.llvm import EXTERNAL_DATA_MIN_BYTES, LLVMEmitter
    from compiler.runtime.cpu import CPUExecutable

    t0 = time.perf_counter()
    emitter = LLVMEmitter(external_data_min_bytes=EXTERNAL_DATA_MIN_BYTES)
    llvm_ir = str(emitter.emit(module))
    timings.append(PassTiming("emit-llvm", time.perf_counter() - t0))
    t0 = time.perf_counter()
    exe = CPUExecutable(llvm_ir, threads=options.threads, data=emitter.external_data)
    timings.append(PassTiming("llvm-O3-and-jit", time.perf_counter() - t0))
    stages["llvm"] = llvm_ir
    stages["asm"] = ""  # produced on demand: printing assembly costs a second codegen
    return CompiledModel(
        func_name,
        input_types,
        output_types,
        output_is_tuple,
        stages,
        exe,
        timings,
        workspace_bytes=workspace.value.data if workspace is not None else 0,
        stats=stats,
    )


def _shape_dtype(t) -> tuple[tuple[int, ...], np.dtype]:
    return tuple(t.get_shape()), numpy_dtype(t.element_type)


__all__ = [
    "CompileOptions",
    "CompiledModel",
    "STAGES",
    "TARGETS",
    "compile_module",
    "make_context",
    "stage_passes",
]
