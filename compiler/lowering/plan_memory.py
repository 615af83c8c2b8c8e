"""plan-memory: place every temporary buffer of a function in one arena, reusing memory by liveness.

After bufferize, each temporary is a `memref.alloc` freed by a `memref.dealloc` after its last use.
This pass gives each one an offset in a single i8 arena such that buffers whose lifetimes
overlap never overlap in memory (greedy first-fit, largest buffers first, 64-byte aligned, a
buffer of 4 KiB or more an odd number of 64-byte lines: see `_aligned`), and rewrites it as a
`memref.view` of the arena:

    %t = memref.alloc() : memref<64x128xf32>        %t = memref.view %arena[%c4160][] : memref<36992xi8> to memref<64x128xf32>
    ...                                      ==>     ...
    memref.dealloc %t : memref<64x128xf32>

With `workspace-arg=true` the arena is a trailing function argument, and the function records its
size in `aicc.workspace_bytes`. The runtime then allocates the arena once and reuses it on every
call, so the function pays for no malloc, free or page fault. Without that option the arena is
one alloc at entry and one dealloc at exit.

Dynamic sizes (workspace-arg only). A buffer whose size is c * M bytes for a monomial M of the
function's symbols (batch*seq, say) joins the buffers of the same M: they are placed by the same
first-fit on their coefficients c, so that the group takes C * M bytes for every value of M, and
each offset is a multiple of M. The groups follow the static part of the arena; the arena is then
`memref<?xi8>`, its size (`aicc.workspace_dynamic`, an expression of the symbols) computed by the
runtime for each call, and the arena grows (never shrinks) to the largest seen:

    %t = memref.alloc(%n) : memref<?x64xf32>   ==>   %t = memref.view %arena[%off][%n] : memref<?xi8> to memref<?x64xf32>

with %off = static bytes + (offset coefficient) * n, and `aicc.arena_slot = [group, first,
end]` (in units of the monomial) saying where it lies, so that the LLVM emitter can prove two
views live at once disjoint (noalias) as it does for static offsets. A size of any other form
(a sum of monomials) stays a malloc and free per call.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    i8,
    i64,
)
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.lowering.dims import DimMaterializer, index_symbol
from compiler.symbolic import Sym

ALIGN = 64
STAGGER_MIN_BYTES = 4096  # see _aligned
WORKSPACE_ATTR = "aicc.workspace_bytes"
WORKSPACE_DYNAMIC_ATTR = "aicc.workspace_dynamic"  # the arena's bytes, symbolic (dynamic dims)


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
    """The bytes reserved for a buffer of `n`: whole cache lines (ALIGN), and an odd number of
    them from STAGGER_MIN_BYTES on. Buffers placed one after another then start on different
    L1 sets: a loop nest that streams many buffers of a power-of-two size at once (Winograd's
    36 transformed tiles) would otherwise have them all 4 KiB apart, in the same sets, and
    evict its own lines (F(4x4, 3x3) of 32 channels at 32x32 ran 2.9x slower)."""
    n = max(ALIGN, -(-n // ALIGN) * ALIGN)
    if n >= STAGGER_MIN_BYTES and (n // ALIGN) % 2 == 0:
        n += ALIGN
    return n


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


def _alloc_bytes(op: memref.AllocOp):
    """A dynamic allocation's size in bytes as a Sym, or None when unknown."""
    total = byte_size(op.memref.type)  # the static dims times the element size
    for v in op.dynamic_sizes:
        d = index_symbol(v)
        if d is None:
            return None
        total = total * d
    return total


def _plan_dynamic(allocs: list, position: dict, n_ops: int, static_total: int):
    """(alloc, offset Sym) for each dynamic allocation whose size is one monomial times a
    constant, and the arena's total bytes (a Sym): see the module's docstring."""
    groups: dict[tuple, list] = {}
    for op in allocs:
        size = _alloc_bytes(op)
        if not isinstance(size, Sym) or len(size.terms) != 1:
            continue
        ((mono, coef),) = size.terms.items()
        if coef <= 0:
            continue
        frees = [u.operation for u in op.memref.uses if isinstance(u.operation, memref.DeallocOp)]
        end = max((position[f] for f in frees if f in position), default=n_ops)
        groups.setdefault(mono, []).append((op, -(-coef // ALIGN) * ALIGN, position[op], end))
    placed = []
    base: int | Sym = static_total
    for g, (mono, members) in enumerate(groups.items()):
        unit = Sym({mono: 1})
        offsets, total = assign_offsets([(c, a, b) for _, c, a, b in members])
        placed += [(op, base + off * unit, (g, off, off + c))
                   for (op, c, *_), off in zip(members, offsets)]
        base = base + total * unit
    return placed, base


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
    dynamic = [op for op in ops if isinstance(op, memref.AllocOp) and op.dynamic_sizes] \
        if workspace_arg else []
    if not allocs and not dynamic:
        return
    intervals, deallocs = [], []
    for op in allocs:
        frees = [u.operation for u in op.memref.uses if isinstance(u.operation, memref.DeallocOp)]
        end = max((position[f] for f in frees if f in position), default=len(ops))
        intervals.append((_aligned(byte_size(op.memref.type)), position[op], end))
        deallocs += frees
    offsets, total = assign_offsets(intervals)
    placed, dyn_total = _plan_dynamic(dynamic, position, len(ops), total) if dynamic else ([], total)
    if not allocs and not placed:
        return

    arena_type = MemRefType(i8, [DYNAMIC_INDEX if placed else total])
    if placed:
        fn.attributes[WORKSPACE_DYNAMIC_ATTR] = StringAttr(str(dyn_total))
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
    if placed:
        dims = DimMaterializer(fn)
        for op, offset, slot in placed:
            shift = dims.value(Builder(InsertPoint.before(op)), offset)
            view = memref.ViewOp(arena, shift, list(op.dynamic_sizes), op.memref.type)
            # where it lies, for the LLVM emitter's disjointness proof: (group, first, end) in
            # units of the group's monomial
            view.attributes["aicc.arena_slot"] = DenseArrayBase.from_list(i64, list(slot))
            Rewriter.replace_op(op, [view], [view.result])
            deallocs += [u.operation for u in view.result.uses if isinstance(u.operation, memref.DeallocOp)]
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


__all__ = ["PlanMemory", "WORKSPACE_ATTR", "WORKSPACE_DYNAMIC_ATTR", "assign_offsets", "byte_size"]
