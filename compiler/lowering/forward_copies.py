"""forward-copies: a buffer that one elementwise generic writes whole and one copy moves
elsewhere is never made; the generic writes the copy's destination itself.

On memrefs, right after bufferize. The pattern, for a copy C (a linalg.generic whose body
yields its one input, all loops parallel, reading its input B through a permutation map and
writing D through any map) and the producer P of B:

    P: outs(B through maps o_1 .. o_k)      // k >= 1 of P's outputs are B (or one view of it)
    C: B[r(j)] -> D[w(j)]

becomes P writing D through w . r^-1 . o_i in place of B, and C and B (its alloc and
dealloc) are gone. It applies when

  * B is a fresh allocation that nothing but P, C and its dealloc touch, so no one else sees
    it;
  * P is a generic with parallel loops only and no schedule of its own (not a matmul or conv
    that a later pass tiles; a vectorize hint is kept), does not read B (its output's block
    argument is unused) and does not read D's buffer;
  * P writes every element of B once: each o_i is a permutation of P's loops plus constants,
    the constants distinct between the o_i and their count times P's iteration space B's
    size (so C read nothing P did not write);
  * nothing between P and C touches D's buffer, and D (an allocation or a view of one, or a
    function argument) can be defined before P (its alloc and views move up).

A copy that reads in another order (a transpose, an interleave), or that writes a slice at an
offset (a concat's part: `d + c`, or `d + 0` where the destination's dim is larger than the
loop's range, so that the verifier reads the range elsewhere), is forwarded only where its
buffer has more than `permuted_min_bytes` (the cpu target: its L2): the producer's writes
then land out of order or apart, and its loop nest can no longer run over its dims as one
(collapse-dims), which cost more than the copy of a buffer that stays in L2. A slice is
forwarded at any size where the producer's dims would not merge anyway (it reads at a stride
or an offset: Winograd F(4x4)'s input transform writing its 36 tiles into a V whose slices
have extra rows).

Where it pays: Winograd F(4x4, 3x3)'s output transform yields its 16 planes P[r, s] as 16
buffers, each copied into its slice of one (4, 4, N, OC, TH, TW) tensor, which one more copy
interleaves into the output. The 16 copies go: the transform writes its planes into their
slices (constant leading indices, which collapse-dims keeps as dims of their own). Where the
planes pass L2, the interleave goes too: the transform writes the output's
(N, OC, TH, 4, TW, 4) view. One thread, Sapphire Rapids-class Xeon, alternately in one
process, the suite's CNN at batch 32 (its 32 -> 64 channel conv at 32 x 32 takes F(4x4),
8 MiB of planes): 7.47 ms without the pass, 7.10 with the 16 copies forwarded, 6.56 with
the interleave too (AVX2 code: 9.60, 9.14, 8.40); resnet18 at batch 1 (planes of 0.4-0.8
MiB, the interleave kept) 17.3 -> 16.8 ms and 16.8 -> 16.5 on two runs, where forwarding
the interleave as well had cost 2% (16.8 -> 17.5 ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, AffineMapAttr, ArrayAttr, ModuleOp
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.aicc import VECTORIZE_ATTR
from compiler.lowering.collapse_dims import collapse_groups, operand_dims
from compiler.lowering.linalg_to_loops import loop_ranges
from compiler.lowering.utils import is_before, plus, view_root

VIEWS = (memref.CollapseShapeOp, memref.ExpandShapeOp)


def _is_copy(op: Operation) -> bool:
    """A generic that moves its one input to its one output element by element."""
    if not isinstance(op, GenericOp) or len(op.inputs) != 1 or len(op.outputs) != 1:
        return False
    if any(it.data != IteratorType.PARALLEL for it in op.iterator_types):
        return False
    ops = list(op.body.block.ops)
    return (len(ops) == 1 and isinstance(ops[0], YieldOp)
            and list(ops[0].operands) == [op.body.block.args[0]])


def _is_permutation(m: AffineMap) -> bool:
    return m.num_dims == len(m.results) and m.num_symbols == 0 and m.is_projected_permutation()


def _dims_and_constants(m: AffineMap, n_dims: int) -> tuple[int, ...] | None:
    """The constants of a map whose results are the dims 0 .. n_dims - 1 once each in some
    order plus constants (those in result order), else None."""
    seen, consts = [], []
    for e in m.results:
        if isinstance(e, AffineDimExpr):
            seen.append(e.position)
        elif isinstance(e, AffineConstantExpr):
            consts.append(e.value)
        else:
            return None
    return tuple(consts) if sorted(seen) == list(range(n_dims)) else None


def _hoist(v: SSAValue, before: Operation) -> list[Operation] | None:
    """The ops to move above `before` so that `v` dominates it (an alloc without operands and
    the views and constants on the way), or None where `v` cannot be."""
    op = v.owner
    if not isinstance(op, Operation) or op.parent is not before.parent or is_before(op, before):
        return []  # a block argument, or defined above `before` already
    if isinstance(op, memref.AllocOp) and not op.operands:
        return [op]
    if isinstance(op, (*VIEWS, arith.ConstantOp)):
        moved: list[Operation] = []
        for x in op.operands:
            sub = _hoist(x, before)
            if sub is None:
                return None
            moved += sub
        return [*moved, op]
    return None


def _touches(op: Operation, root: SSAValue) -> bool:
    """Does `op` (or an op nested in it) use `root` or a view of it?"""
    for o in op.walk():
        if any(view_root(x) is root for x in o.operands):
            return True
    return False


def _maps_into(prod: GenericOp, ranges: list[int], outs: list[int], dst: SSAValue,
               to_dst: AffineMap) -> list[AffineMapAttr] | None:
    """The producer's maps with its outputs `outs` through `to_dst` into `dst`, or None where
    its loop ranges could no longer be read from its operands. A dim of `dst` that a loop
    indexes plainly but that is larger than the loop's range (a slice: a concat's part) is
    indexed `d + 0`, which the linalg verifier does not read a range from."""
    n_in = len(prod.inputs)
    maps = [m.data for m in prod.indexing_maps.data]
    shape = dst.type.get_shape()
    for i in outs:
        m = to_dst.compose(maps[n_in + i])
        maps[n_in + i] = AffineMap(m.num_dims, m.num_symbols, tuple(
            plus(e, 0) if isinstance(e, AffineDimExpr) and shape[pos] != ranges[e.position] else e
            for pos, e in enumerate(m.results)))
    known = {e.position for m in maps for e in m.results if isinstance(e, AffineDimExpr)}
    if known != set(range(len(ranges))):
        return None
    return [AffineMapAttr(m) for m in maps]


def _merges(prod: GenericOp, maps: list[AffineMap], ranges: list[int]) -> bool:
    """Whether collapse-dims would merge some of the producer's loops."""
    dims = [operand_dims(m, v.type.get_shape(), ranges) for m, v in zip(maps, prod.operands)]
    if any(d is None for d in dims):  # a strided or shifted read: nothing merges
        return False
    return len(collapse_groups(ranges, dims)) < sum(r != 1 for r in ranges)


def _forward(copy: GenericOp, permuted_min_bytes: int) -> bool:
    src, dst = copy.inputs[0], copy.outputs[0]
    read, write = (m.data for m in copy.indexing_maps.data)
    if not _is_permutation(read) or not isinstance(src.owner, memref.AllocOp) or src.owner.operands:
        return False
    shape = src.type.get_shape()
    if DYNAMIC_INDEX in shape:
        return False
    big = bool(permuted_min_bytes) and \
        math.prod(shape) * src.type.element_type.bitwidth // 8 > permuted_min_bytes
    if read != AffineMap.identity(read.num_dims) and not big:
        return False
    producers = [u.operation for u in src.uses if u.operation is not copy
                 and not isinstance(u.operation, memref.DeallocOp)]
    if len({id(p) for p in producers}) != 1 or not isinstance(producers[0], GenericOp):
        return False
    prod = producers[0]
    if (prod.parent is not copy.parent or not is_before(prod, copy) or src in prod.inputs
            or any(it.data != IteratorType.PARALLEL for it in prod.iterator_types)
            or any(k.startswith("aicc.") and k != VECTORIZE_ATTR for k in prod.attributes)):
        return False
    root = view_root(dst)
    if any(view_root(x) is root for x in prod.inputs):
        return False
    # P's outputs that are B: each a permutation of its loops plus distinct constants, all
    # together B's elements once
    maps = [m.data for m in prod.indexing_maps.data]
    n_in = len(prod.inputs)
    outs = [i for i, o in enumerate(prod.outputs) if o is src]
    ranges = loop_ranges(prod)
    consts = [_dims_and_constants(maps[n_in + i], len(prod.iterator_types)) for i in outs]
    if any(c is None for c in consts) or len(set(consts)) != len(consts):
        return False
    if DYNAMIC_INDEX in ranges or math.prod(ranges) * len(outs) != math.prod(shape):
        return False
    block_args = prod.body.block.args
    if any(block_args[n_in + i].uses for i in outs):
        return False
    # nothing between P and C touches D's buffer; D can be made to dominate P
    op = prod.next_op
    while op is not None and op is not copy:
        if _touches(op, root) and not isinstance(op, (*VIEWS, memref.AllocOp)):
            return False
        op = op.next_op
    moved = _hoist(dst, prod)
    if moved is None:
        return False
    new_maps = _maps_into(prod, ranges, outs, dst, write.compose(read.inverse_permutation()))
    if new_maps is None:
        return False
    # a slice at an offset (d + c, d + 0) keeps the producer's loops apart, as an out-of-order
    # copy does: forwarded on the same terms, unless they would not merge anyway
    if not big and any(not isinstance(e, AffineDimExpr | AffineConstantExpr)
                       for i in outs for e in new_maps[n_in + i].data.results) \
            and _merges(prod, maps, ranges):
        return False
    for m in moved:
        m.detach()
        Rewriter.insert_op(m, InsertPoint.before(prod))
    operands = list(prod.operands)
    for i in outs:
        operands[n_in + i] = dst
    prod.operands = operands
    prod.indexing_maps = ArrayAttr(new_maps)
    Rewriter.erase_op(copy)
    for u in list(src.uses):
        Rewriter.erase_op(u.operation)
    Rewriter.erase_op(src.owner)
    return True


@dataclass(frozen=True)
class ForwardCopies(ModulePass):
    """A generic's result that is only copied elsewhere is written there directly."""

    name = "forward-copies"

    # a copy that reads its input in another order (a transpose, an interleave) is forwarded
    # only when that input has more bytes than this (0: never; the cpu target: its L2)
    permuted_min_bytes: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        changed = True
        while changed:
            changed = False
            for o in list(op.walk()):
                if o.parent is not None and _is_copy(o) and _forward(o, self.permuted_min_bytes):
                    changed = True


__all__ = ["ForwardCopies"]
