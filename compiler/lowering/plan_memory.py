"""plan-memory: place every temporary buffer of a function in one arena, reusing memory by liveness.

After bufferize, each temporary is a `memref.alloc` freed by a `memref.dealloc` after its last use.
This pass gives each one an offset in a single i8 arena such that buffers whose lifetimes
overlap never overlap in memory (greedy first-fit, largest buffers first, 64-byte aligned),
and rewrites it as a `memref.view` of the arena:

    %t = memref.alloc() : memref<64x128xf32>        %t = memref.view %arena[%c4096][] : memref<40960xi8> to memref<64x128xf32>
    ...                                      ==>     ...
    memref.dealloc %t : memref<64x128xf32>

With `workspace-arg=true` the arena is a trailing function argument, and the function records its
size in `aicc.workspace_bytes`. The runtime then allocates the arena once and reuses it on every
call, so the function pays for no malloc, free or page fault. Without that option the arena is
one alloc at entry and one dealloc at exit.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    i8,
    i64,
)
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

ALIGN = 64
WORKSPACE_ATTR = "aicc.workspace_bytes"


def byte_size(t: MemRefType) -> int:
    elem: Attribute = t.element_type
    if isinstance(elem, IntegerType):
        width = max(8, elem.width.data)  # i1 is stored as a byte
    elif isinstance(elem, IndexType):
        width = 64
    else:
        width = elem.bitwidth
    count = 1
    for d in t.get_shape():
        count *= max(d, 1)  # a dynamic dim (`?`) counts 1: the size per unit of it
    return count * width // 8


def _aligned(n: int) -> int:
    return max(ALIGN, -(-n // ALIGN) * ALIGN)


def assign_offsets(buffers: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    """First-fit placement of (size, first use, last use) intervals; returns offsets and arena size."""
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i][0], buffers[i][1]))
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, end)
    offsets = [0] * len(buffers)
    for i in order:
        size, start, end = buffers[i]
        live = sorted((o, s) for o, s, a, b in placed if a <= end and start <= b)
        offset = 0
        for o, s in live:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        offsets[i] = offset
        placed.append((offset, size, start, end))
    return offsets, max((o + s for o, s, _, _ in placed), default=0)


def plan_function(fn: func.FuncOp, workspace_arg: bool) -> None:
    block = fn.body.block
    ops = list(block.ops)
    position = {op: i for i, op in enumerate(ops)}
    allocs = [
        op
        for op in ops
        if isinstance(op, memref.AllocOp)
        and not op.dynamic_sizes
        and isinstance(op.memref.type, MemRefType)
    ]
    if not allocs:
        return
    intervals, deallocs = [], []
    for op in allocs:
        frees = [u.operation for u in op.memref.uses if isinstance(u.operation, memref.DeallocOp)]
        end = max((position[f] for f in frees if f in position), default=len(ops))
        intervals.append((_aligned(byte_size(op.memref.type)), position[op], end))
        deallocs += frees
    offsets, total = assign_offsets(intervals)

    arena_type = MemRefType(i8, [total])
    if workspace_arg:
        arena = block.insert_arg(arena_type, len(block.args))
        arena.name_hint = "workspace"
        ftype = fn.function_type
        fn.function_type = FunctionType.from_lists([*ftype.inputs, arena_type], ftype.outputs)
        fn.attributes[WORKSPACE_ATTR] = IntegerAttr(total, i64)
    else:
        alloc = memref.AllocOp.get(i8, ALIGN, [total])
        Rewriter.insert_op(alloc, InsertPoint.at_start(block))
        arena = alloc.memref
        Rewriter.insert_op(memref.DeallocOp.get(arena), InsertPoint.before(block.last_op))

    for op, offset in zip(allocs, offsets):
        shift = arith.ConstantOp(IntegerAttr(offset, IndexType()))
        view = memref.ViewOp(arena, shift, [], op.memref.type)
        Rewriter.replace_op(op, [shift, view], [view.result])
    for op in deallocs:
        Rewriter.erase_op(op)


@dataclass(frozen=True)
class PlanMemory(ModulePass):
    """Temporaries become views of one arena, reused by liveness."""

    name = "plan-memory"

    workspace_arg: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in list(op.ops):
            if isinstance(fn, func.FuncOp) and not fn.is_declaration:
                plan_function(fn, self.workspace_arg)


__all__ = ["PlanMemory", "WORKSPACE_ATTR", "assign_offsets", "byte_size"]
