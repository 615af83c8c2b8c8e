"""Mapped loop IR (gpu_map.kernel ops in a func) -> CUDA C text plus a host plan.

Each `gpu_map.kernel` becomes one `extern "C" __global__` function; its parameters are the
memrefs its body uses (bare pointers: shapes are static, layouts row-major). The rest of the
function is buffer management, recorded as a `HostPlan` that compiler/targets/cuda/runtime.py (or the
emulation harness in tests/) executes: allocations, frees, views into a buffer, copies, and one
launch per kernel.

A kernel's kind (compiler/dialects/gpu_map.py, recognized by compiler/codegen/cuda/patterns.py)
picks the function in KIND_EMITTERS that writes its body through a common.KernelWriter:

    elementwise  elementwise.py  a thread per point of the band
    single       elementwise.py  one thread runs the body
    row_reduce   rows.py         a block per row, the row in registers, block reductions
    col_reduce   columns.py      threads over the kept contiguous dim, loops over the reduced
    matmul       matmul.py       shared-memory tiles, a register tile per thread, epilogues
    attention    attention.py    flash attention for one aicc_fused.attention op
    qgemm        qgemm.py        an int8 GEMM (gpu_map.qgemm) on __dp4a, int32 accumulators
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import builtin
from xdsl.ir import Operation, SSAValue

from compiler.codegen.cuda.attention import ATTENTION_CHUNK, emit_attention
from compiler.codegen.cuda.columns import emit_col_reduce
from compiler.codegen.cuda.common import (
    INT32_LIMIT,
    PRELUDE,
    Buffer,
    CudaProgram,
    HostPlan,
    KernelInfo,
    KernelWriter,
    c_type,
    element_bytes,
    nbytes,
)
from compiler.codegen.cuda.elementwise import emit_elementwise, emit_single
from compiler.codegen.cuda.matmul import emit_matmul
from compiler.codegen.cuda.qgemm import emit_qgemm
from compiler.codegen.cuda.patterns import DIM_PREFIX, bound, is_index_host_op, shape
from compiler.codegen.cuda.rows import emit_row_reduce
from compiler.dialects.gpu_map import KernelOp
from compiler.lowering.dims import arg_dims
from compiler.symbolic import Sym
from compiler.symbolic import prod as sym_prod
from compiler.errors import CompileError, UnsupportedOpError

__all__ = [
    "ATTENTION_CHUNK", "INT32_LIMIT", "KIND_EMITTERS", "PRELUDE", "Buffer", "CudaEmitter",
    "CudaProgram", "HostPlan", "KernelInfo", "c_type", "emit_cuda", "emit_kernel", "nbytes",
]

# kernel kind -> the function that writes a kernel of that kind (its body's ops) into a writer
KIND_EMITTERS: dict[str, Callable[[KernelWriter, list[Operation]], None]] = {
    "elementwise": emit_elementwise,
    "single": emit_single,
    "row_reduce": emit_row_reduce,
    "col_reduce": emit_col_reduce,
    "matmul": emit_matmul,
    "attention": emit_attention,
    "qgemm": emit_qgemm,
}


class CudaEmitter:
    """Emits CUDA C and host plans for a module whose functions were run through map-to-gpu."""

    def emit(self, module: builtin.ModuleOp) -> CudaProgram:
        globals_: dict[str, bytes] = {}
        parts = [PRELUDE]
        plans: dict[str, HostPlan] = {}
        kernels: dict[str, str] = {}
        for op in module.ops:
            if op.name == "memref.global":
                globals_[op.sym_name.data] = _global_bytes(op)
        for op in module.ops:
            if op.name == "func.func":
                if not op.body.blocks:
                    continue
                plan, srcs = self._emit_func(op, globals_)
                plans[plan.func_name] = plan
                parts.extend(srcs)
                kernels.update((k.name, src) for k, src in zip(plan.kernels, srcs))
            elif op.name != "memref.global":
                raise UnsupportedOpError(op.name, f"no CUDA lowering for '{op.name}' (target cuda)")
        return CudaProgram("\n".join(parts), plans, PRELUDE, kernels)

    def _emit_func(self, f: Operation, globals_: dict[str, bytes]):
        args = list(f.body.block.args)
        for a in args:
            if not isinstance(a.type, builtin.MemRefType):
                raise CompileError(f"func @{f.sym_name.data}: argument of type {a.type}: "
                                   "the CUDA target takes memref arguments only")
        plan = HostPlan(f.sym_name.data, [a.type for a in args])
        plan.arg_dims = [[DIM_PREFIX + d.name if isinstance(d, Sym) and d.name else None
                          for d in dims] for dims in (arg_dims(f) or [])]
        bufs: dict[SSAValue, int] = {}

        def new(buf: Buffer, value: SSAValue) -> int:
            plan.buffers.append(buf)
            bufs[value] = len(plan.buffers) - 1
            return bufs[value]

        for i, a in enumerate(args):
            new(Buffer("arg", _bytes(a), index=i), a)
        sources = []
        for op in f.body.block.ops:
            n = op.name
            if n in ("arith.constant", "func.return") or is_index_host_op(op):
                continue  # index arithmetic: sizes, which the plan holds as expressions
            if n == "memref.alloc":
                plan.steps.append(("alloc", new(Buffer("alloc", _bytes(op.memref)), op.memref)))
            elif n == "memref.dealloc":
                plan.steps.append(("free", bufs[op.memref]))
            elif n == "memref.copy":
                plan.steps.append(("copy", bufs[op.destination], bufs[op.source],
                                   _bytes(op.source)))
            elif n == "memref.get_global":
                name = op.name_.root_reference.data
                if name not in globals_:
                    raise CompileError(f"memref.get_global @{name}: no such memref.global")
                new(Buffer("global", len(globals_[name]), name=name), op.memref)
                plan.globals[name] = globals_[name]
            elif n in ("memref.collapse_shape", "memref.expand_shape", "memref.cast"):
                bufs[op.results[0]] = bufs[op.operands[0]]
            elif n == "memref.view":
                off = bound(op.byte_shift)
                if off is None:
                    raise CompileError("memref.view needs an offset the host can compute")
                new(Buffer("view", _bytes(op.results[0]), index=bufs[op.source], offset=off),
                    op.results[0])
            elif isinstance(op, KernelOp):
                src, info = emit_kernel(op, bufs)
                sources.append(src)
                plan.kernels.append(info)
                plan.steps.append(("launch", len(plan.kernels) - 1))
            else:
                raise UnsupportedOpError(
                    n, f"no CUDA lowering for '{n}' outside a gpu_map.kernel (target cuda; "
                    "run map-to-gpu first)")
        return plan, sources


def _bytes(v: SSAValue) -> int | Sym:
    """The bytes of memref `v`: an int, or a Sym of its dynamic dims (kernel_dim names)."""
    dims = shape(v)
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise CompileError(f"{v.type}: a dynamic size the CUDA host plan cannot compute")
    return sym_prod(dims) * element_bytes(v.type.element_type)


def _global_bytes(op: Operation) -> bytes:
    mt = op.type
    size = nbytes(mt)
    init = op.initial_value
    if not isinstance(init, builtin.DenseIntOrFPElementsAttr):
        return bytes(size)
    data = bytes(init.data.data)
    if isinstance(mt.element_type, builtin.IntegerType) and mt.element_type.width.data == 1:
        data = bytes(1 if b else 0 for b in data)
    if len(data) != size and data and size % len(data) == 0:
        data = data * (size // len(data))  # a splat stored as one element
    if len(data) != size:
        raise CompileError(f"memref.global @{op.sym_name.data}: initializer has {len(data)} "
                           f"bytes, its type needs {size}")
    return data


def emit_kernel(kernel: KernelOp, bufs: dict[SSAValue, int]) -> tuple[str, KernelInfo]:
    """One gpu_map.kernel as a __global__ function (C text) and its KernelInfo; `bufs` maps
    the host buffers it may use to their ids in the plan."""
    emit = KIND_EMITTERS.get(kernel.kind.data)
    if emit is None:
        raise CompileError(f"gpu_map.kernel {kernel.sym_name.data}: no CUDA emitter for kind "
                           f"'{kernel.kind.data}'")
    w = KernelWriter(kernel, bufs)
    emit(w, list(kernel.body.block.ops))
    return w.finish()


def emit_cuda(module: builtin.ModuleOp) -> CudaProgram:
    return CudaEmitter().emit(module)
