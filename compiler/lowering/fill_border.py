"""fill-border: a fill of a buffer whose interior the next op overwrites fills only the border.

A padding (aicc.pad, lowered by nn_to_linalg) becomes a linalg.fill of the padded buffer with
the pad value, then a copy of the source into its interior: a linalg.generic, all parallel,
whose output map is the identity plus constant offsets. Kernels that read through the padding
(tile-conv's depthwise and NHWC copies, tile-matmul's im2col) drop both; the rest (a direct or
grouped conv reading the padded buffer, a max pool) keep them, and the fill writes every
element that the copy then writes again. Here, on memrefs, such a fill becomes loops that
store the pad value on the border alone: for each padded dim, the slabs before and after the
interior, the interior's range of the padded dims outside it and every index of the dims
inside it.

    linalg.fill ins(%zero : f32) outs(%p : memref<1x48x114x114xf32>)
    linalg.generic {maps = [(d0, d1, d2, d3) -> (d0, d1, d2, d3),
                            (d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)]}
        ins(%x : memref<1x48x112x112xf32>) outs(%p : memref<1x48x114x114xf32>)
  ->
    scf.parallel (%n, %c) = (0, 0) to (1, 48) {
      scf.for %h = 0 to 1 { scf.for %w = 0 to 114 { memref.store %zero, %p[%n, %c, %h, %w] } }
      scf.for %h = 113 to 114 { ... }
      scf.for %h = 1 to 113 {
        scf.for %w = 0 to 1 { memref.store ... }  scf.for %w = 113 to 114 { ... }
      }
    }
    linalg.generic ... (unchanged)

The fill's outer unpadded dims are the parallel loop. A fill whose buffer the copy overwrites
whole goes. Only where the copy is the first op after the fill that touches any buffer (views
and constants may stand between) and reads no view of the filled one. regnet_y_400mf (a pad before each grouped 3x3 conv, 7.6 MB
of padded buffers a run), AVX2 code on a Sapphire Rapids-class Xeon, one thread: the memset
was 2% of the run.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp, NoneAttr
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.errors import CompileError
from compiler.lowering.linalg_to_loops import loop_ranges
from compiler.lowering.loop_builder import IndexBuilder, for_loop
from compiler.lowering.utils import aliases, view_root

# ops that may stand between the fill and the copy (they touch no buffer)
_PURE = (arith.ConstantOp, memref.ViewOp, memref.GetGlobalOp, memref.CollapseShapeOp,
         memref.ExpandShapeOp)


def _offset(expr, dim: int) -> int | None:
    """c where `expr` is d`dim` + c (c >= 0), else None."""
    if isinstance(expr, AffineDimExpr):
        return 0 if expr.position == dim else None
    if (isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add
            and isinstance(expr.lhs, AffineDimExpr) and expr.lhs.position == dim
            and isinstance(expr.rhs, AffineConstantExpr) and expr.rhs.value >= 0):
        return expr.rhs.value
    return None


def interior(fill: linalg.FillOp) -> tuple[list[int], list[int]] | None:
    """(offsets, sizes) of the box of the fill's buffer that the next op writing it, a copy
    into it at constant offsets, overwrites; None where there is no such op."""
    p = fill.outputs[0]
    t = p.type
    if not (isinstance(t, MemRefType) and isinstance(t.layout, NoneAttr)
            and all(d >= 0 for d in t.get_shape())):
        return None
    copy = fill.next_op  # the first op after the fill that may touch a buffer
    while copy is not None and isinstance(copy, _PURE):
        copy = copy.next_op
    buffer = aliases(view_root(p))
    if not (isinstance(copy, linalg.GenericOp) and len(copy.outputs) == 1
            and copy.outputs[0] is p
            and all(str(it.data) == "parallel" for it in copy.iterator_types)
            and not any(v in buffer for v in copy.inputs)):
        return None
    # the copy's body must not read its output (a pure overwrite)
    if copy.body.block.args[len(copy.inputs)].uses:
        return None
    out_map = copy.indexing_maps.data[-1].data
    shape = t.get_shape()
    if out_map.num_symbols or len(out_map.results) != len(shape) or out_map.num_dims != len(shape):
        return None
    offsets = [_offset(e, i) for i, e in enumerate(out_map.results)]
    if any(o is None for o in offsets):
        return None
    try:
        ranges = loop_ranges(copy)
    except CompileError:
        return None
    if any(r < 0 for r in ranges) or any(o + r > d for o, r, d in zip(offsets, ranges, shape)):
        return None
    return offsets, ranges  # type: ignore[return-value]


def _loop(b: Builder, ix: IndexBuilder, lo: int, hi: int, body) -> None:
    """scf.for lo <= iv < hi; body(builder, iv). Nothing for an empty range."""
    if lo < hi:
        for_loop(b, ix.const(lo), ix.const(hi), ix.const(1), [],
                 lambda b, iv, _: body(b, iv) or [])


def fill_border(fill: linalg.FillOp, offsets: list[int], sizes: list[int]) -> None:
    """Replace `fill` by loops storing its value on its buffer outside the box (offsets,
    sizes); nothing when the box is the whole buffer."""
    p, value = fill.outputs[0], fill.inputs[0]
    shape = p.type.get_shape()
    rank = len(shape)
    padded = [o != 0 or s != d for o, s, d in zip(offsets, sizes, shape)]
    if not any(padded):
        Rewriter.erase_op(fill)
        return
    anchor = arith.ConstantOp.from_int_and_width(0, IndexType())
    Rewriter.insert_op(anchor, InsertPoint.before(fill))
    b = Builder(InsertPoint.before(fill))
    ix = IndexBuilder(Builder(InsertPoint.before(anchor)))  # constants before the loops
    ix.consts[0] = anchor.result

    def full(b: Builder, dim: int, ivs: list[SSAValue]) -> None:
        if dim == rank:
            b.insert(memref.StoreOp.get(value, p, ivs))
            return
        _loop(b, ix, 0, shape[dim], lambda b, iv: full(b, dim + 1, [*ivs, iv]))

    def border(b: Builder, dim: int, ivs: list[SSAValue]) -> None:
        if not any(padded[dim:]):
            return  # the rest is interior
        lo, hi = offsets[dim], offsets[dim] + sizes[dim]
        if not padded[dim]:
            _loop(b, ix, 0, shape[dim], lambda b, iv: border(b, dim + 1, [*ivs, iv]))
            return
        _loop(b, ix, 0, lo, lambda b, iv: full(b, dim + 1, [*ivs, iv]))
        _loop(b, ix, hi, shape[dim], lambda b, iv: full(b, dim + 1, [*ivs, iv]))
        if any(padded[dim + 1:]):
            _loop(b, ix, lo, hi, lambda b, iv: border(b, dim + 1, [*ivs, iv]))

    outer = padded.index(True)  # the unpadded dims before the first padded one: in parallel
    if outer:
        block = Block(arg_types=[IndexType()] * outer)
        b.insert(scf.ParallelOp([ix.const(0)] * outer, [ix.const(d) for d in shape[:outer]],
                                [ix.const(1)] * outer, Region(block)))
        Builder(InsertPoint.at_end(block)).insert(scf.ReduceOp())
        border(Builder(InsertPoint.before(block.last_op)), outer, list(block.args))
    else:
        border(b, 0, [])
    Rewriter.erase_op(fill)


class FillBorder(ModulePass):
    """A linalg.fill whose buffer the next op overwrites in a box (a padding's copy into its
    interior) stores only outside that box (see the module docstring)."""

    name = "fill-border"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fill in [o for o in op.walk() if isinstance(o, linalg.FillOp)]:
            box = interior(fill)
            if box is not None:
                fill_border(fill, *box)


__all__ = ["FillBorder", "fill_border", "interior"]
