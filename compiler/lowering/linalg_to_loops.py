"""linalg-to-loops: linalg on memrefs -> scf.parallel / scf.for nests of memref.load/store.

Named ops are generalized first (xDSL's linalg-generalize-named-ops pattern). For each
generic the loop order is chosen for memory order: the innermost loop is the dim that walks
the most bytes contiguously (the last index of the operands it addresses, weighted by
operand size, outputs twice since they are read and written), the other parallel dims go
outermost, reductions in between:

    matmul (i, j, k) -> scf.parallel (i) { scf.for k { scf.for j { C[i,j] += A[i,k] B[k,j] } } }
    row sum (i, r)   -> scf.parallel (i) { acc = scf.for r iter_args(acc) { acc + x[i,r] } }

The leading band of parallel dims becomes one `scf.parallel` (threads on the CPU, the grid on a
GPU); the rest are `scf.for`. An innermost reduction carries its accumulator in `iter_args`
(a register), and its combiner is marked `fastmath<reassoc>` so LLVM may vectorize it.

With `window-inner=true` (the CPU pipeline), a small window of reductions (two or more static
reduction dims, at most WINDOW_TRIPS points, that the outputs do not index: a depthwise conv's
or a pooling's kh, kw) goes inside the contiguous parallel dim instead of outside it:

    depthwise conv (c, oh, ow | kh, kw):
      default:       scf.parallel (c, oh) { for kh { for kw { for ow { O[c,oh,ow] += ... } } } }
      window-inner:  scf.parallel (c, oh) { for ow { acc = for kh iter_args { for kw iter_args
                         { acc + X[c, oh+kh, ow+kw] W[c,kh,kw] } }; O[c,oh,ow] = acc } }

so each output is loaded and stored once instead of once per window point, LLVM unrolls the
window (constant trips) and vectorizes the ow loop with the accumulator in a register.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.linalg import abstract_ops, attrs, ops as linalg
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr, MemRefType, ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.transforms.linalg_generalize_named_ops import GeneralizeNamedOpPattern

from compiler.dialects.aicc import VECTORIZE_ATTR
from compiler.dialects.aicc_fused import GatherElementsOp, GatherOp
from compiler.errors import CompileError
from compiler.lowering.dims import dim_value
from compiler.lowering.loop_builder import IndexBuilder
from compiler.lowering.utils import scalar_constant

REASSOCIABLE = (arith.AddfOp, arith.MulfOp, arith.MaximumfOp, arith.MinimumfOp)


def combiner_flags(op: Operation) -> arith.FastMathFlagsAttr:
    """The fast-math flags of a reduction's combiner: reassoc, so that LLVM vectorizes it; and
    for max/min also nsz: which zero a max of -0.0 and +0.0 gives is unspecified (NumPy and
    PyTorch answer differently, by position), and LLVM then lowers llvm.maximum to vmaxps and a
    NaN check, without the blends that order the zeros. NaN still propagates, unless the op
    carries nnan already (a softmax's max: utils.SOFTMAX_MAX): the flags it has are kept."""
    flags = {arith.FastMathFlag.REASSOC}
    if isinstance(op, (arith.MaximumfOp, arith.MinimumfOp)):
        flags.add(arith.FastMathFlag.NO_SIGNED_ZEROS)
    own = getattr(op, "fastmath", None)
    return arith.FastMathFlagsAttr(list(flags | (own.data if own is not None else set())))


# What the heuristics (loop order, transpose tiling) assume for a dynamic range: large.
DYNAMIC_RANGE_GUESS = 1 << 16


def loop_sources(op: linalg.GenericOp) -> list[tuple[SSAValue, int]]:
    """For each loop dim, an operand and the position of its dim that the loop ranges over:
    a static one where any operand has one."""
    maps = [m.data for m in op.indexing_maps]
    found: list[tuple[SSAValue, int] | None] = [None] * maps[0].num_dims
    for value, m in zip(op.operands, maps):
        if not isinstance(value.type, MemRefType):
            continue
        shape = value.type.get_shape()
        for pos, expr in enumerate(m.results):
            if not isinstance(expr, AffineDimExpr):
                continue
            cur = found[expr.position]
            if cur is None or (cur[0].type.get_shape()[cur[1]] == DYNAMIC_INDEX
                               and shape[pos] != DYNAMIC_INDEX):
                found[expr.position] = (value, pos)
    if any(r is None for r in found):
        raise CompileError(f"linalg-to-loops: cannot infer the loop ranges of {op.name}")
    return found  # type: ignore[return-value]


def loop_ranges(op: linalg.GenericOp) -> list[int]:
    """Each loop dim's range; DYNAMIC_INDEX where only a dynamic dim gives it."""
    return [v.type.get_shape()[pos] for v, pos in loop_sources(op)]


def _guess(ranges: Sequence[int]) -> list[int]:
    return [DYNAMIC_RANGE_GUESS if r == DYNAMIC_INDEX else r for r in ranges]


def _elements(t) -> int:
    return prod(_guess(t.get_shape()))


def loop_order(op: linalg.GenericOp, ranges: Sequence[int]) -> list[int]:
    maps = [m.data for m in op.indexing_maps]
    n_in = len(op.inputs)
    score = [0] * len(ranges)
    for i, (value, m) in enumerate(zip(op.operands, maps)):
        if not m.results or not isinstance(value.type, MemRefType):
            continue
        last = m.results[-1]
        if isinstance(last, AffineDimExpr):
            size = max(1, _elements(value.type))
            score[last.position] += size * (2 if i >= n_in else 1)
    iters = [it.data for it in op.iterator_types]
    dims = list(range(len(ranges)))
    inner = max(reversed(dims), key=lambda d: score[d]) if dims else None
    rest = [d for d in dims if d != inner]
    parallel = [d for d in rest if iters[d] == attrs.IteratorType.PARALLEL]
    reduction = [d for d in rest if iters[d] != attrs.IteratorType.PARALLEL]
    return parallel + reduction + ([inner] if inner is not None else [])


WINDOW_TRIPS = 64  # most points of a reduction window that window-inner moves inside


def window_dims(op: linalg.GenericOp, order: Sequence[int], ranges: Sequence[int]) -> list[int]:
    """The reduction dims of `order` that window-inner moves inside its innermost dim: all
    of them, when there are two or more, all static with at most WINDOW_TRIPS points in all,
    the outputs index none of them and the innermost dim is parallel (else [])."""
    iters = [it.data for it in op.iterator_types]
    maps = [m.data for m in op.indexing_maps]
    reds = [d for d in order if iters[d] != attrs.IteratorType.PARALLEL]
    if len(reds) < 2 or not order or iters[order[-1]] != attrs.IteratorType.PARALLEL:
        return []
    if any(ranges[d] == DYNAMIC_INDEX for d in reds) or prod(ranges[d] for d in reds) > WINDOW_TRIPS:
        return []
    if any(d in m.used_dims() for m in maps[len(op.inputs):] for d in reds):
        return []
    return reds


class _IndexBuilder:
    """Materializes affine expressions of the loop ivs as index arithmetic."""

    def __init__(self, b: Builder, ivs: dict[int, SSAValue]):
        self.b, self.ivs, self.consts = b, ivs, {}

    def const(self, v: int) -> SSAValue:
        if v not in self.consts:
            op = arith.ConstantOp(IntegerAttr(v, IndexType()))
            self.b.insert(op)
            self.consts[v] = op.result
        return self.consts[v]

    def expr(self, e: AffineExpr) -> SSAValue:
        if isinstance(e, AffineDimExpr):
            return self.ivs[e.position]
        if isinstance(e, AffineConstantExpr):
            return self.const(e.value)
        if isinstance(e, AffineBinaryOpExpr):
            lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
            cls = {
                AffineBinaryOpKind.Add: arith.AddiOp,
                AffineBinaryOpKind.Mul: arith.MuliOp,
                AffineBinaryOpKind.FloorDiv: arith.FloorDivSIOp,
                AffineBinaryOpKind.Mod: arith.RemSIOp,
            }.get(e.kind)
            if cls is not None:
                op = cls(lhs, rhs)
                self.b.insert(op)
                return op.result
        raise CompileError(f"linalg-to-loops: unsupported affine expression {e}")

    def indices(self, m: AffineMap) -> list[SSAValue]:
        return [self.expr(e) for e in m.results]


def transpose_dims(op: linalg.GenericOp, order: Sequence[int], ranges: Sequence[int],
                   min_bytes: int = 32 * 1024) -> tuple[int, int] | None:
    """(d, inner) when an all-parallel op walks a large operand across its contiguous dim d
    while the innermost loop `inner` walks another operand contiguously: a transpose. Tiling
    d and inner keeps both in cache; otherwise each step of `inner` touches a new line of
    the first operand (and, a multiple of 4 KiB apart, the same L1 set)."""
    iters = [it.data for it in op.iterator_types]
    if len(order) < 2 or any(it != attrs.IteratorType.PARALLEL for it in iters):
        return None
    inner = order[-1]
    best, best_bytes = None, min_bytes - 1
    for value, m in zip(op.operands, (m.data for m in op.indexing_maps)):
        if not isinstance(value.type, MemRefType) or not m.results:
            continue
        last = m.results[-1]
        if not isinstance(last, AffineDimExpr) or last.position == inner:
            continue
        nbytes = _elements(value.type) * 4
        if ranges[last.position] > 1 and ranges[inner] > 1 and nbytes > best_bytes:
            best, best_bytes = last.position, nbytes
    return None if best is None else (best, inner)


def emit_body(op: linalg.GenericOp, b: Builder, ivs: dict[int, SSAValue],
               accs: Sequence[SSAValue] | None,
               operands: Sequence[tuple[SSAValue, AffineMap]] | None = None):
    """Loads, the cloned scalar body, and stores (or the yielded accumulators).

    `operands`: (memref, indexing map) to read and write in place of the op's own, one per
    operand: the same elements seen through another view (tile-matmul's epilogue on C's
    shape)."""
    if operands is None:
        operands = [(v, m.data) for v, m in zip(op.operands, op.indexing_maps)]
    n_in = len(op.inputs)
    body = op.body.block
    idx = _IndexBuilder(b, ivs)
    mapping: dict[SSAValue, SSAValue] = {}
    for i, (value, m) in enumerate(operands):
        arg = body.args[i]
        if i >= n_in and accs is not None:
            mapping[arg] = accs[i - n_in]
        elif not isinstance(value.type, MemRefType):  # a scalar operand (linalg.fill)
            mapping[arg] = value
        elif arg.uses:
            mapping[arg] = b.insert(memref.LoadOp.get(value, idx.indices(m))).res
    *ops, yield_op = list(body.ops)
    for o in ops:
        clone = o.clone(value_mapper=mapping)
        if accs is not None and isinstance(clone, REASSOCIABLE) and any(
            v in accs for v in clone.operands
        ):
            clone.fastmath = combiner_flags(clone)
        b.insert(clone)
    results = [mapping.get(v, v) for v in yield_op.operands]
    if accs is not None:
        return results
    for (value, m), res in zip(operands[n_in:], results):
        b.insert(memref.StoreOp.get(res, value, idx.indices(m)))
    return None


def _lower_tiled(op: linalg.GenericOp, rewriter: PatternRewriter, ranges: Sequence[int],
                 order: Sequence[int], tiled: tuple[int, int], tile: int) -> None:
    """An all-parallel op as tile x tile blocks of (d, inner): the other dims and the block
    indices form the scf.parallel band, the two intra-block loops are scf.for."""
    d, inner = tiled
    outer = Builder(InsertPoint.before(op))

    def const(v: int) -> SSAValue:
        return outer.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result

    zero, one, t = const(0), const(1), const(tile)
    limits = {x: const(ranges[x]) for x in tiled if ranges[x] % tile}
    rest = [x for x in order if x not in tiled]
    ubs = [const(ranges[x]) for x in rest] + [const(-(-ranges[x] // tile)) for x in (d, inner)]
    block = Block(arg_types=[IndexType()] * len(ubs))
    outer.insert(scf.ParallelOp([zero] * len(ubs), ubs, [one] * len(ubs), Region(block)))
    Builder(InsertPoint.at_end(block)).insert(scf.ReduceOp())
    b = Builder(InsertPoint.before(block.last_op))
    ivs: dict[int, SSAValue] = dict(zip(rest, block.args))
    for x, blk in zip((d, inner), block.args[len(rest):]):
        lb = b.insert(arith.MuliOp(blk, t)).result
        ub = b.insert(arith.AddiOp(lb, t)).result
        if x in limits:
            ub = b.insert(arith.MinSIOp(ub, limits[x])).result
        body = Block(arg_types=[IndexType()])
        b.insert(scf.ForOp(lb, ub, one, [], Region(body)))
        Builder(InsertPoint.at_end(body)).insert(scf.YieldOp())
        b = Builder(InsertPoint.before(body.last_op))
        ivs[x] = body.args[0]
    emit_body(op, b, ivs, None)
    rewriter.erase(op)


def lower_generic(op: linalg.GenericOp, rewriter: PatternRewriter, transpose_tile: int = 0,
                  window_inner: bool = False) -> None:
    sources = loop_sources(op)
    ranges = [v.type.get_shape()[pos] for v, pos in sources]
    dynamic = DYNAMIC_INDEX in ranges
    order = loop_order(op, _guess(ranges))
    window = window_dims(op, order, ranges) if window_inner else []
    if window:
        order = [d for d in order if d not in window] + window
    tiled = transpose_dims(op, order, ranges) if transpose_tile > 1 and not dynamic else None
    if tiled is not None:
        _lower_tiled(op, rewriter, ranges, order, tiled, transpose_tile)
        return
    iters = [it.data for it in op.iterator_types]
    maps = [m.data for m in op.indexing_maps]
    n_in = len(op.inputs)

    outer = Builder(InsertPoint.before(op))
    zero, one = (outer.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result for v in (0, 1))

    bounds = [outer.insert(arith.ConstantOp(IntegerAttr(r, IndexType()))).result
              if r != DYNAMIC_INDEX else dim_value(outer, v, pos)
              for r, (v, pos) in zip(ranges, sources)]

    band = []
    for d in order:
        if iters[d] != attrs.IteratorType.PARALLEL:
            break
        band.append(d)
    seq = order[len(band):]
    # An innermost reduction whose outputs do not depend on the inner dim accumulates in
    # registers (so does a window that window-inner moved inside: its loops carry it).
    inner = seq[-1] if seq else None
    reg_acc = (
        inner is not None
        and iters[inner] != attrs.IteratorType.PARALLEL
        and all(inner not in m.used_dims() for m in maps[n_in:])
        and all(_elements(out.type) > 0 for out in op.outputs)
    )
    acc_dims = (window if window and reg_acc else [inner]) if reg_acc else []

    ivs: dict[int, SSAValue] = {}
    b = outer
    if band:
        block = Block(arg_types=[IndexType()] * len(band))
        ub = [bounds[d] for d in band]
        par = b.insert(scf.ParallelOp([zero] * len(band), ub, [one] * len(band), Region(block)))
        if VECTORIZE_ATTR in op.attributes and not seq:  # its innermost loop is the band's
            par.attributes[VECTORIZE_ATTR] = op.attributes[VECTORIZE_ATTR]
        ivs.update(zip(band, block.args))
        b = Builder(InsertPoint.at_end(block))
        Builder(InsertPoint.at_end(block)).insert(scf.ReduceOp())
        b = Builder(InsertPoint.before(block.last_op))

    def body(b: Builder, ivs: dict[int, SSAValue], accs: Sequence[SSAValue] | None):
        return emit_body(op, b, ivs, accs)

    for d in seq[:len(seq) - len(acc_dims)]:
        block = Block(arg_types=[IndexType()])
        for_op = scf.ForOp(zero, bounds[d], one, [], Region(block))
        b.insert(for_op)
        ivs[d] = block.args[0]
        b = Builder(InsertPoint.at_end(block))
        Builder(InsertPoint.at_end(block)).insert(scf.YieldOp())
        b = Builder(InsertPoint.before(block.last_op))

    if reg_acc:
        out_idx = _IndexBuilder(b, ivs)
        out_indices = [out_idx.indices(m) for m in maps[n_in:]]
        inits = [
            b.insert(memref.LoadOp.get(v, ix)).res for v, ix in zip(op.outputs, out_indices)
        ]

        def carried(b: Builder, k: int, accs: Sequence[SSAValue]) -> Sequence[SSAValue]:
            """The loop of acc_dims[k] and those inside it, carrying the accumulators."""
            block = Block(arg_types=[IndexType(), *(v.type for v in accs)])
            for_op = scf.ForOp(zero, bounds[acc_dims[k]], one, accs, Region(block))
            b.insert(for_op)
            inner_b = Builder(InsertPoint.at_end(block))
            ivs[acc_dims[k]] = block.args[0]
            if k + 1 < len(acc_dims):
                results = carried(inner_b, k + 1, block.args[1:])
            else:
                results = body(inner_b, dict(ivs), block.args[1:])
            inner_b.insert(scf.YieldOp(*results))
            return for_op.results

        results = carried(b, 0, inits)
        for res, v, ix in zip(results, op.outputs, out_indices):
            b.insert(memref.StoreOp.get(res, v, ix))
    else:
        body(b, ivs, None)
    rewriter.erase(op)


def lower_gather(op: GatherOp | GatherElementsOp, rewriter: PatternRewriter) -> None:
    """One scf.parallel over the result: the index loaded where the op's index dims say, plus
    the axis size when negative, and the data read there on the axis (the result's own index
    elsewhere, as the data dims say); an index out of range reads no data and gives 0.
    gather: out[i..., j..., k...] = data[i..., indices[j...], k...];
    gather_elements: out[i] = data[i with i[axis] = indices[i]]."""
    data, indices, out = op.data, op.indices, op.out
    rank = len(out.type.get_shape())
    outer = Builder(InsertPoint.before(op))
    ix = IndexBuilder(outer)

    def size(v: SSAValue, i: int) -> SSAValue:
        d = dim_value(outer, v, i)
        return d if isinstance(d, SSAValue) else ix.const(d)

    zero, one = ix.const(0), ix.const(1)
    axis_size = size(data, op.axis_value)
    # A 0-d result loops once: its loads stay a loop nest (one kernel on a GPU).
    bounds = [size(out, i) for i in range(rank)] or [one]
    block = Block(arg_types=[IndexType()] * len(bounds))
    outer.insert(scf.ParallelOp([zero] * len(bounds), bounds, [one] * len(bounds), Region(block)))
    Builder(InsertPoint.at_end(block)).insert(scf.ReduceOp())
    b = Builder(InsertPoint.before(block.last_op))
    ivs = list(block.args)[:rank]
    raw = b.insert(memref.LoadOp.get(indices, [ivs[d] for d in op.index_dims()])).res
    i = b.insert(arith.IndexCastOp(raw, IndexType())).result
    wrapped = b.insert(arith.SelectOp(b.insert(arith.CmpiOp(i, zero, "slt")).result,
                                      b.insert(arith.AddiOp(i, axis_size)).result, i)).result
    ok = b.insert(arith.AndIOp(b.insert(arith.CmpiOp(wrapped, zero, "sge")).result,
                               b.insert(arith.CmpiOp(wrapped, axis_size, "slt")).result)).result
    safe = b.insert(arith.SelectOp(ok, wrapped, zero)).result
    at = [safe if d is None else ivs[d] for d in op.data_dims()]
    value = b.insert(memref.LoadOp.get(data, at)).res
    value = b.insert(arith.SelectOp(ok, value, scalar_constant(b, 0, value.type))).result
    b.insert(memref.StoreOp.get(value, out, ivs))
    rewriter.erase(op)


class GatherToLoops(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GatherOp | GatherElementsOp, rewriter: PatternRewriter) -> None:
        if any(isinstance(v.type, TensorType) for v in op.operands):
            raise CompileError(f"linalg-to-loops: run bufferize first ({op.name} on tensors)")
        lower_gather(op, rewriter)


@dataclass
class GenericToLoops(RewritePattern):
    transpose_tile: int = 0
    window_inner: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: linalg.GenericOp, rewriter: PatternRewriter) -> None:
        if any(isinstance(v.type, TensorType) for v in op.operands):
            raise CompileError("linalg-to-loops: run bufferize first (linalg.generic on tensors)")
        lower_generic(op, rewriter, self.transpose_tile, self.window_inner)


@dataclass(frozen=True)
class LinalgToLoops(ModulePass):
    """Lower linalg ops on memrefs to scf.parallel / scf.for loop nests."""

    name = "linalg-to-loops"

    # Block size for transposing ops (0: none). The CPU pipeline sets it; a GPU maps the
    # untiled band onto threads instead.
    transpose_tile: int = 0
    # Small reduction windows inside the contiguous parallel dim (see the module's doc). The
    # CPU pipeline sets it; a GPU maps the band as it is.
    window_inner: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GeneralizeNamedOpPattern(), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(GatherToLoops(), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(GenericToLoops(self.transpose_tile, self.window_inner),
                             apply_recursively=False).rewrite_module(op)
        for o in op.walk():
            # aicc_fused.attention is lower-attention's (CPU) or map-to-gpu's (CUDA) to lower
            if isinstance(o, abstract_ops.LinalgStructuredOperation) \
                    and o.name != "aicc_fused.attention":
                raise CompileError(f"linalg-to-loops: '{o.name}' was left unlowered")
