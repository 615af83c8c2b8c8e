"""tile-matmul: matmul on memrefs -> packing loops + cache-block loops around a micro-kernel.

GotoBLAS/BLIS structure, driven by the op's `aicc.schedule` (chosen by choose-schedule, or
here with the defaults when it has none):

    Ap = pack A into mr-row slivers, k-major:  Ap[sliver][k][r] = A[sliver*mr + r][k]   (0-padded)
    Bp = pack B into nr-wide panels:           Bp[panel][k][j]  = B[k][panel*nr + j]     (0-padded)
    scf.parallel over the (batch, mc block, nc block) tiles named by `parallel`:
      scf.for pc < K step kc:                  # a kc x nc block of B, an mc x kc block of A
        scf.for jr < nc step nr:               # one kc x nr panel of B stays in L1 ...
          scf.for ir < mc step mr:             # ... while the slivers of A stream past it
            aicc_cpu.microkernel Ap[...], Bp[...], C[...] k kc rows m cols n accumulate (pc > 0)

Packed buffers are temporaries (`memref.alloc`, placed in the arena by plan-memory, which
runs after this pass); both packing loops are `scf.parallel` over slivers / panels. A
packed A or B that is a constant (`memref.get_global` of a dense global, or a reshape of
one: a conv's weight) is packed here, at compile time, into a new global in the sliver or
panel layout, and nothing packs it at run time. A zero
`linalg.fill` of C right before the matmul is dropped: the first K block overwrites C.
Sizes that are not multiples of the tile are handled by the micro-kernel (`rows`/`cols`
below mr/nr), reading the zero padding of the packed operands; a last panel of fewer
vectors than nr runs a kernel only as wide as they are, and the rows past the last whole
sliver of a static M kernels of exactly as many rows (`_tail_kernels`).

Epilogues: a copy of a bias or residual into C before the matmul becomes the first K
block's starting value (`init`), and an elementwise op right after it that is C's only
reader (activation, bias, residual add, scaling) runs on each mc x nc tile of C after the
tile's last K block, while the tile is in cache; a temporary C then goes, the matmul
accumulating in the epilogue's output. Neither leaves a loop nest of its own. An
activation (a function of C's value alone) over a K of one block goes into the micro-kernels
themselves, applied to the values in registers before their store (their `epilogue` region).

A conv's im2col matrix (B) with `parallel = "b"`: the copy that writes it runs inside the
tile loop, one image at a time, into the thread's own K x N buffer right before that
image's tiles, and reads through a constant pad before it (see `_take_b_producer` and
`_take_pad`).
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass

import numpy as np
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
    UnitAttr,
    i1,
    i64,
)
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineMap,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.aicc import dense_from_numpy, numpy_from_dense
from compiler.dialects.aicc_cpu import MicrokernelOp
from compiler.errors import CompileError
from compiler.lowering.utils import VIEW_OPS, flat_view, is_before, reshaped_view, view_root
from compiler.lowering.utils import aliases as _aliases
from compiler.stats import TILED_ATTR, flops
from compiler.threads import default_threads
from compiler.targets.cpu.tile_conv import epilogue_region, scalar_constant
from compiler.lowering.dims import dim_value
from compiler.lowering.linalg_to_loops import emit_body
from compiler.lowering.loop_builder import IndexBuilder
from compiler.targets.cpu.schedule import (
    MatmulMatch,
    MatmulSchedule,
    choose_matmul_schedule,
    element_bytes,
    is_constant,
    match_matmul,
    rows_alias_in_l1,
    schedule_of,
)

Index = int | SSAValue

PACK_B_ROWS = 16  # rows of B per iteration of the parallel packing loop
# Independent FMA chains (accumulators) a micro-kernel needs to keep two FMA units busy at a
# latency of 4 cycles (Intel cores since Skylake, Zen 2-5); fewer, and it waits on them.
FMA_CHAINS = 8


class _Ix:
    """Index arithmetic that folds constants: ints stay Python ints until an op needs them."""

    def __init__(self, before: Operation):
        # Constants go right after an anchor constant placed before everything this pass
        # inserts, so they dominate every loop however late they are created.
        self.anchor = arith.ConstantOp(IntegerAttr(0, IndexType()))
        Rewriter.insert_op(self.anchor, InsertPoint.before(before))
        self.consts: dict[tuple[int, str], SSAValue] = {(0, str(IndexType())): self.anchor.result}

    def const(self, v: int, ty=None) -> SSAValue:
        ty = ty or IndexType()
        key = (v, str(ty))
        if key not in self.consts:
            c = arith.ConstantOp(IntegerAttr(v, ty))
            Rewriter.insert_op(c, InsertPoint.after(self.anchor))
            self.consts[key] = c.result
        return self.consts[key]

    def v(self, x: Index) -> SSAValue:
        return self.const(x) if isinstance(x, int) else x

    @staticmethod
    def _emit(b: Builder, op: Operation) -> SSAValue:
        return b.insert(op).results[0]

    def add(self, b: Builder, x: Index, y: Index) -> Index:
        if isinstance(x, int) and isinstance(y, int):
            return x + y
        if x == 0:
            return y
        if y == 0:
            return x
        return self._emit(b, arith.AddiOp(self.v(x), self.v(y)))

    def sub(self, b: Builder, x: Index, y: Index) -> Index:
        if isinstance(x, int) and isinstance(y, int):
            return x - y
        if y == 0:
            return x
        return self._emit(b, arith.SubiOp(self.v(x), self.v(y)))

    def mul(self, b: Builder, x: Index, y: Index) -> Index:
        if isinstance(x, int) and isinstance(y, int):
            return x * y
        if x == 0 or y == 0:
            return 0
        if x == 1:
            return y
        if y == 1:
            return x
        return self._emit(b, arith.MuliOp(self.v(x), self.v(y)))

    def div(self, b: Builder, x: Index, y: int) -> Index:
        if isinstance(x, int):
            return x // y
        if y == 1:
            return x
        return self._emit(b, arith.DivUIOp(x, self.v(y)))

    def rem(self, b: Builder, x: Index, y: int) -> Index:
        if isinstance(x, int):
            return x % y
        if y == 1:
            return 0
        return self._emit(b, arith.RemUIOp(x, self.v(y)))

    def min(self, b: Builder, x: Index, y: Index) -> Index:
        if isinstance(x, int) and isinstance(y, int):
            return min(x, y)
        return self._emit(b, arith.MinSIOp(self.v(x), self.v(y)))


def _for(b: Builder, ix: _Ix, lb: Index, ub: Index, step: int, body) -> None:
    """scf.for lb <= iv < ub step `step`; body(builder, iv)."""
    if isinstance(lb, int) and isinstance(ub, int) and lb >= ub:
        return
    if isinstance(lb, int) and isinstance(ub, int) and ub - lb <= step:
        body(b, lb)  # one trip: no loop
        return
    block = Block(arg_types=[IndexType()])
    b.insert(scf.ForOp(ix.v(lb), ix.v(ub), ix.v(step), [], Region(block)))
    Builder(InsertPoint.at_end(block)).insert(scf.YieldOp())
    body(Builder(InsertPoint.before(block.last_op)), block.args[0])


def _parallel(b: Builder, ix: _Ix, ub: Index, body) -> None:
    """scf.parallel 0 <= iv < ub; body(builder, iv). One trip: no loop."""
    if isinstance(ub, int) and ub <= 0:
        return
    if isinstance(ub, int) and ub == 1:
        body(b, 0)
        return
    block = Block(arg_types=[IndexType()])
    b.insert(scf.ParallelOp([ix.v(0)], [ix.v(ub)], [ix.v(1)], Region(block)))
    Builder(InsertPoint.at_end(block)).insert(scf.ReduceOp())
    body(Builder(InsertPoint.before(block.last_op)), block.args[0])


def _zero(b: Builder, elem) -> SSAValue:
    return b.insert(arith.ConstantOp(FloatAttr(0.0, elem))).result


def _batch_offset(b: Builder, ix: _Ix, bidx: list[Index], bmap, shape, batch_out) -> Index:
    """Flat batch index of an operand whose batch dims follow `bmap` (output dim or None)."""
    flat: Index = 0
    for pos, d in enumerate(bmap):
        size = shape[pos]
        flat = ix.mul(b, flat, size)
        if d is not None:
            flat = ix.add(b, flat, bidx[d])
    return flat


def _split_flat(b: Builder, ix: _Ix, flat: Index, extents: list[int]) -> list[Index]:
    """Row-major digits of `flat` in `extents`."""
    out: list[Index] = []
    for pos in range(len(extents)):
        inner = math.prod(extents[pos + 1:])
        digit = ix.div(b, flat, inner)
        if pos:
            digit = ix.rem(b, digit, extents[pos])
        out.append(digit)
    return out


def _global_of(v: SSAValue, module: ModuleOp) -> memref.GlobalOp | None:
    """The dense global that `v` reads, through reshapes (the same elements in order)."""
    while isinstance(v, OpResult) and isinstance(v.op, memref.CollapseShapeOp
                                                   | memref.ExpandShapeOp):
        v = v.op.operands[0]
    if not (isinstance(v, OpResult) and isinstance(v.op, memref.GetGlobalOp)):
        return None
    name = v.op.name_.root_reference.data
    for op in module.ops:
        if isinstance(op, memref.GlobalOp) and op.sym_name.data == name:
            if isinstance(op.initial_value, DenseIntOrFPElementsAttr):
                return op
    return None


@dataclass
class _Operands:
    """What the tile loops read and write, and the values every tile shares."""
    a_src: SSAValue  # A, packed into slivers or flat in place
    a_packed: bool
    b_src: SSAValue  # B, packed into panels, a thread's buffer, or flat in place
    b_packed: bool
    c: SSAValue  # C, flat
    MP: int  # slivers of A per batch entry
    NP: int  # panels of B per batch entry
    first_overwrites: bool  # the first K block overwrites C instead of adding to it
    true_: SSAValue  # i1 true: accumulate
    ldb: int  # B's row stride in place
    init_flat: SSAValue | None  # the init operand, flat
    epi_on_c: list[tuple[SSAValue, AffineMap]] | None  # see _Tiler._epilogue_on_c
    a_cold: bool = False  # A packed at compile time: its slivers come from memory
    b_cold: bool = False  # B likewise, its panels


@dataclass
class _Tile:
    """Offsets and extents of one mc x nc tile of C (a batch entry's block ic, jc)."""
    ba: Index  # A's batch entry: its offset (in place) or index (packed)
    bb: Index  # B's, likewise (or the thread's buffer slot)
    ic: Index  # first row
    jc: Index  # first column
    mcv: Index  # rows
    ncv: Index  # columns
    c_base: Index  # offset of (ic, jc) in flat C
    i_base: Index | None  # offset of (ic, jc) in the init operand


@dataclass
class _Tiler:
    match: MatmulMatch
    s: MatmulSchedule
    module: ModuleOp
    threads: int = 1

    def run(self) -> None:
        mm, s = self.match, self.s
        op = mm.op
        M, N, K = mm.m, mm.n, mm.k
        if mm.m_dynamic:  # the run-time row count, read before anything this pass inserts
            M = dim_value(Builder(InsertPoint.before(op)), mm.c, 0)
        self.M = M
        # the batch entries (the run-time count for a dynamic batch, read likewise)
        self.nb = (dim_value(Builder(InsertPoint.before(op)), mm.c, 0) if mm.batch_dynamic
                   else math.prod(mm.batch))
        if (not mm.m_dynamic and M == 0) or N == 0 or self.nb == 0:
            Rewriter.erase_op(op)
            return
        if K == 0:  # C keeps its initial value (the fill)
            Rewriter.erase_op(op)
            return
        first_overwrites = self._drop_zero_fill()
        self.init = None if first_overwrites else self._fold_init_copy()
        if self.init is not None:
            first_overwrites = True  # the first K block starts from the init operand
        self.epilogue = self._take_epilogue()
        self.epilogue_region = self._epilogue_in_kernel()
        mm = self.match  # C may now be the epilogue's output
        self.b_producer = None if mm.m_dynamic else self._take_b_producer()
        ix = _Ix(op)
        top = Builder(InsertPoint.before(op))
        elem = mm.element_type
        a_flat, c_flat = flat_view(top, mm.a), flat_view(top, mm.c)
        a_shape, b_shape = mm.a.type.get_shape(), mm.b.type.get_shape()
        nba = math.prod(a_shape[:-2])
        nbb = math.prod(b_shape[:-2])
        MP, NP = (0 if mm.m_dynamic else -(-M // s.mr)), -(-N // s.nr)
        allocs: list[SSAValue] = []

        a_src, a_packed = a_flat, False
        self.a_cold = False
        # Strides of A's rows (m) and columns (k) in place: [m, k], or [k, m] when transposed.
        self.a_rs, self.a_ks = (1, M) if mm.a_trans else (K, 1)
        a_in_rs, a_in_ks = self.a_rs, self.a_ks
        if s.pack_a:
            g = _global_of(mm.a, self.module)
            if g is not None:  # packed now: A^T in panels mr wide are A's slivers
                self.a_cold = True
                a_src = self._prepacked(top, g, f"slivers{s.mr}", s.mr, lambda data: (
                    data.reshape(nba, K, M) if mm.a_trans
                    else data.reshape(nba, M, K).transpose(0, 2, 1)))
            else:
                a_src = top.insert(memref.AllocOp.get(elem, 64, [nba * MP * K * s.mr])).memref
                allocs.append(a_src)
                self._pack_a(top, ix, a_flat, a_src, nba, MP, a_in_rs, a_in_ks)
            a_packed = True
            self.a_rs, self.a_ks = 1, s.mr

        pack_b = s.pack_b or mm.b_trans  # the kernel reads B along n: a [n, k] B is packed
        g = _global_of(mm.b, self.module) if pack_b else None
        self.b_cold = g is not None
        if g is not None:
            b_src = self._prepacked(top, g, f"panels{s.nr}", s.nr, lambda data: (
                data.reshape(nbb, N, K).transpose(0, 2, 1) if mm.b_trans
                else data.reshape(nbb, K, N)))
        elif pack_b:
            size = nbb * NP * K * s.nr
            bp = top.insert(memref.AllocOp.get(elem, 64, [size])).memref
            allocs.append(bp)
            self._pack_b(top, ix, flat_view(top, mm.b), bp, nbb, NP)
            b_src = bp
        elif self.b_producer is not None:
            # One K x N buffer per thread, reused batch after batch (so it stays in cache),
            # in place of the copy's full (batch, K, N) output.
            self.slots = self.threads if mm.batch_dynamic else min(self.threads, self.nb)
            self.ldb = N + (16 if rows_alias_in_l1(N * element_bytes(elem), 8) else 0)
            b_src = top.insert(memref.AllocOp.get(elem, 64, [self.slots * K * self.ldb])).memref
            allocs.append(b_src)
        else:
            b_src = flat_view(top, mm.b)
        b_packed = pack_b

        last_pack = op.prev_op
        self._compute(top, ix, a_src, a_packed, b_src, b_packed, c_flat, MP, NP,
                      first_overwrites)
        # The outermost op of the tile loops stands for the matmul in compiler/stats.py.
        compute = last_pack.next_op
        while not isinstance(compute, scf.ParallelOp | scf.ForOp | MicrokernelOp):
            compute = compute.next_op
        info = {"op": StringAttr(op.name.removeprefix("linalg.")),
                # per row when M is dynamic (compiler/stats.py counts it so)
                "flops": IntegerAttr(2 * (1 if mm.batch_dynamic else math.prod(mm.batch))
                                     * (1 if mm.m_dynamic else M) * N * K
                                     + (flops(self.epilogue) if self.epilogue else 0), i64)}
        if mm.m_dynamic:
            info["per_row"] = UnitAttr()
        if mm.batch_dynamic:  # per batch entry
            info["per_batch"] = UnitAttr()
        if self.epilogue is not None:  # the fused ops, by name
            info["epilogue"] = StringAttr(",".join(
                o.name for o in self.epilogue.body.block.ops if not isinstance(o, linalg.YieldOp)))
        compute.attributes[TILED_ATTR] = DictionaryAttr(info)
        after = Builder(InsertPoint.after(op))
        for a in allocs:
            after.insert(memref.DeallocOp.get(a))
        Rewriter.erase_op(op)
        if self.epilogue is not None:
            Rewriter.erase_op(self.epilogue)
        if self.b_producer is not None:  # emitted inside the tile loop, detached
            col = self.b_producer.outputs[0]
            padded = self.b_producer.inputs[0]
            self.b_producer.erase()
            _erase_dead_buffer(col)
            if self.pad is not None:
                pc, f, _ = self.pad
                Rewriter.erase_op(pc)
                Rewriter.erase_op(f)
                _erase_dead_buffer(view_root(padded))

    # -- B's producer, per batch

    def _take_b_producer(self) -> linalg.GenericOp | None:
        """The copy that writes B (a conv's im2col), when the schedule runs each batch's tiles
        on one thread (`parallel = "b"`) and B is read in place: it then runs inside the
        tile loop, one batch at a time, right before that batch's tiles, so they read B
        from cache instead of memory. B must be a temporary that the copy writes whole
        (all-parallel, identity output map, the body yields its input) and nothing else
        touches; deallocations of the copy's input between it and the matmul move after the
        matmul."""
        mm, s = self.match, self.s
        op = mm.op
        nb = DYNAMIC_INDEX if mm.batch_dynamic else math.prod(mm.batch)
        self.pad = None
        if (s.parallel != "b" or (nb < 2 and not mm.batch_dynamic) or s.pack_b or mm.b_trans
                or list(mm.b_batch) != list(range(len(mm.batch)))):
            return None
        col = view_root(mm.b)
        if not (isinstance(col, OpResult) and isinstance(col.op, memref.AllocOp)):
            return None
        views = _aliases(col)
        writers = [u.operation for v in views for u in v.uses
                   if not isinstance(u.operation, memref.DeallocOp | memref.CollapseShapeOp
                                     | memref.ExpandShapeOp) and u.operation is not op]
        if len(writers) != 1 or not isinstance(writers[0], linalg.GenericOp):
            return None
        g = writers[0]
        shape = col.type.get_shape()
        body = list(g.body.block.ops)
        if not (len(g.inputs) == 1 and len(g.outputs) == 1 and g.outputs[0] is col
                and g.parent is op.parent
                and all(it.data == IteratorType.PARALLEL for it in g.iterator_types)
                and g.indexing_maps.data[1].data == AffineMap.identity(len(shape))
                and len(body) == 1 and isinstance(body[0], linalg.YieldOp)
                and body[0].operands[0] is g.body.block.args[0]
                and shape and shape[0] == nb and math.prod(shape[1:]) == mm.k * mm.n):
            return None
        # the copy's dims 1..kdims make up K, the rest N
        self.kdims = next((j for j in range(1, len(shape))
                           if math.prod(shape[1:j + 1]) == mm.k), None)
        if self.kdims is None:
            return None
        src = _aliases(view_root(g.inputs[0]))
        if src & views:
            return None
        self.pad = self._take_pad(g, view_root(g.inputs[0]))
        if self.pad is not None:  # the copy reads the padded buffer's source instead
            pc = self.pad[0]
            pad_src = _aliases(view_root(pc.inputs[0]))
            if not _deallocs_movable(pc, op, pad_src):
                self.pad = None
        if not _deallocs_movable(g, op, src):
            self.pad = None
            return None
        if self.pad is not None:
            _deallocs_movable(pc, op, pad_src, move=True)
        _deallocs_movable(g, op, src, move=True)
        g.detach()
        return g

    def _take_pad(self, g: linalg.GenericOp, p: SSAValue):
        """(copy, fill, offsets) when the buffer `p` that B's copy reads is a padded copy of
        another: filled with a constant, then written by an elementwise generic at an offset
        in its last two dims (a conv's zero padding), and read by nothing else. The per-batch
        copy then reads the source directly, writes the fill value where the window falls in
        the padding, and the padded buffer goes. Only for a copy whose innermost dim steps
        the last padded dim by 1 (stride-1 convs), which splits each row into a padding run,
        a copy run and a padding run."""
        if not (isinstance(p, OpResult) and isinstance(p.op, memref.AllocOp)):
            return None
        pv = g.inputs[0]
        pshape, vshape = p.type.get_shape(), pv.type.get_shape()
        inner = len(g.outputs[0].type.get_shape()) - 1
        read = g.indexing_maps.data[0].data
        last = read.results[-1]
        if (len(pshape) < 2 or pshape[-2:] != vshape[-2:]
                or math.prod(pshape[:-2]) != math.prod(vshape[:-2])
                or any(inner in r.used_dims() for r in read.results[:-1])
                or not (isinstance(last, AffineBinaryOpExpr) and last.kind == AffineBinaryOpKind.Add
                        and AffineDimExpr(inner) in (last.lhs, last.rhs)
                        and inner not in (last.rhs if last.lhs == AffineDimExpr(inner)
                                          else last.lhs).used_dims())):
            return None
        users = {u.operation for v in _aliases(p) for u in v.uses}
        fills = [o for o in users if isinstance(o, linalg.FillOp)]
        copies = [o for o in users if isinstance(o, linalg.GenericOp) and o is not g]
        if len(fills) != 1 or len(copies) != 1 or any(
                o not in (g, fills[0], copies[0]) and not isinstance(
                    o, memref.DeallocOp | memref.CollapseShapeOp | memref.ExpandShapeOp)
                for o in users):
            return None
        f, pc = fills[0], copies[0]
        value = f.inputs[0]
        if not (f.outputs[0] is p and pc.outputs[0] is p and len(pc.inputs) == 1
                and isinstance(value, OpResult) and isinstance(value.op, arith.ConstantOp)
                and f.parent is g.parent and pc.parent is g.parent):
            return None
        x = pc.inputs[0]
        xshape = x.type.get_shape() if isinstance(x.type, MemRefType) else None
        maps = [m.data for m in pc.indexing_maps]
        if not (xshape is not None and len(xshape) == len(pshape)
                and isinstance(x.type.layout, NoneAttr)
                and all(it.data == IteratorType.PARALLEL for it in pc.iterator_types)
                and maps[0] == AffineMap.identity(len(pshape))
                and not pc.body.block.args[1].uses
                and all(o.dialect_name() in ("arith", "math") for o in pc.body.block.ops
                        if not isinstance(o, linalg.YieldOp))):
            return None
        offsets = []
        for i, e in enumerate(maps[1].results):
            if e == AffineDimExpr(i):
                offsets.append(0)
            elif (isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add
                  and e.lhs == AffineDimExpr(i) and isinstance(e.rhs, AffineConstantExpr)):
                offsets.append(e.rhs.value)
            else:
                return None
        if (any(offsets[:-2]) or any(o < 0 for o in offsets)
                or any(xs + o > ps for xs, o, ps in zip(xshape, offsets, pshape))
                or xshape[:-2] != pshape[:-2]):
            return None
        if not (is_before(f, pc) and is_before(pc, g)):
            return None
        return pc, f, offsets[-2:]

    def _emit_b_producer(self, b: Builder, ix: _Ix, slots: SSAValue, batch: Index,
                         slot: Index) -> None:
        """The copy that writes B, at one batch index, into buffer `slot` of `slots` (viewed
        as (slots, the copy's K dims, a row of ldb >= N)): a loop per remaining dim of the
        copy, innermost contiguous."""
        g = self.b_producer
        shape = g.outputs[0].type.get_shape()
        rank = len(shape)
        # dims 0..rank-1: the copy's own; dim `rank`: the slot
        read = g.indexing_maps.data[0].data
        read = AffineMap(rank + 1, 0, read.results)
        write = AffineMap(rank + 1, 0, (AffineDimExpr(rank), *(AffineDimExpr(d) for d in
                                                                range(1, self.kdims + 1)),
                                        self._n_index()))
        operands = [(g.inputs[0], read), (slots, write)]

        def loops(b: Builder, ivs: dict[int, SSAValue], d: int) -> None:
            if self.pad is not None and d == rank - 1:
                self._emit_padded_row(b, ix, slots, ivs, read)
                return
            if d == rank:
                emit_body(g, b, ivs, None, operands)
                return
            _for(b, ix, 0, shape[d], 1, lambda b, v: loops(b, {**ivs, d: ix.v(v)}, d + 1))

        loops(b, {0: ix.v(batch), rank: ix.v(slot)}, 1)

    def _n_index(self) -> AffineExpr:
        """B's column (the flat index of the copy's N dims) as an expression of its dims."""
        shape = self.b_producer.outputs[0].type.get_shape()
        expr: AffineExpr = AffineConstantExpr(0)
        for d in range(self.kdims + 1, len(shape)):
            expr = expr * shape[d] + AffineDimExpr(d)
        return expr

    def _emit_padded_row(self, b: Builder, ix: _Ix, slots: SSAValue, ivs: dict[int, SSAValue],
                         read: AffineMap) -> None:
        """One innermost row of B's copy read through the padding (see _take_pad): the
        window's row either falls in the padding (the whole row is the fill value) or in
        the source, where the columns split into [0, lo) fill, [lo, hi) source, [hi, OW)
        fill."""
        g = self.b_producer
        pc, f, (ph, pw) = self.pad
        shape = g.outputs[0].type.get_shape()
        inner, rank = len(shape) - 1, len(shape)
        xv = self.pad_source
        h, w = xv.type.get_shape()[-2:]
        fill = f.inputs[0]

        def op(o: Operation) -> SSAValue:
            return b.insert(o).results[0]

        ib, at0 = IndexBuilder(b), {**ivs, inner: ix.v(0)}
        pidx = ib.indices(b, read, at0)  # the padded buffer's index at column 0
        row = op(arith.SubiOp(pidx[-2], ix.v(ph)))  # the source row, when in range
        valid = op(arith.AndIOp(op(arith.CmpiOp(row, ix.v(0), "sge")),
                                op(arith.CmpiOp(row, ix.v(h), "slt"))))
        col0 = op(arith.SubiOp(pidx[-1], ix.v(pw)))  # the source column at column 0

        def clamp(v: SSAValue, lo: SSAValue, hi: SSAValue) -> SSAValue:
            return op(arith.MinSIOp(op(arith.MaxSIOp(v, lo)), hi))

        ow = ix.v(shape[inner])
        lo = clamp(op(arith.SubiOp(ix.v(0), col0)), ix.v(0), ow)
        hi = clamp(op(arith.SubiOp(ix.v(w), col0)), lo, ow)
        lo = op(arith.SelectOp(valid, lo, ix.v(0)))
        hi = op(arith.SelectOp(valid, hi, ix.v(0)))
        out = [ivs[rank], *(ivs[d] for d in range(1, self.kdims + 1))]
        n0 = ib.expr(b, self._n_index(), at0)  # B's column at column 0 (the row's columns follow)

        def at(b: Builder, j: Index) -> list[SSAValue]:
            return [*out, b.insert(arith.AddiOp(n0, ix.v(j))).result]

        def pad(b: Builder, j: Index) -> None:
            b.insert(memref.StoreOp.get(fill, slots, at(b, j)))

        def copy(b: Builder, j: Index) -> None:
            src = b.insert(arith.AddiOp(ix.v(j), col0)).result
            xidx = {i: v for i, v in enumerate([*pidx[:-2], row, src])}
            # the result comes back instead of being stored; the output's block argument is
            # unused, so any fresh value stands in for it
            (v,) = emit_body(pc, b, xidx, [row], [(xv, AffineMap.identity(len(pidx)))] * 2)
            b.insert(memref.StoreOp.get(v, slots, at(b, j)))

        _for(b, ix, 0, lo, 1, pad)
        _for(b, ix, lo, hi, 1, copy)
        _for(b, ix, hi, ow, 1, pad)

    # -- the zero fill

    def _drop_zero_fill(self) -> bool:
        """Erase a `linalg.fill 0` of C that nothing reads before the matmul."""
        op, c = self.match.op, self.match.c
        aliases = _aliases(c)
        prev = op.prev_op
        while prev is not None:
            if _touches(prev, aliases) or prev.regions:
                break
            prev = prev.prev_op
        if not isinstance(prev, linalg.FillOp) or prev.outputs[0] is not c:
            return False
        value = prev.inputs[0]
        if not (isinstance(value, OpResult) and isinstance(value.op, arith.ConstantOp)
                and isinstance(value.op.value, FloatAttr) and value.op.value.value.data == 0.0):
            return False
        Rewriter.erase_op(prev)
        return True

    def _fold_init_copy(self):
        """A copy of a row-contiguous operand into C before the matmul (a bias or a residual
        that fuse-linear-bias made the accumulator's start): erase it, and let the kernels'
        first K block read the operand instead. Ops in between (a fused row nest, say) may
        stay when they touch neither C nor the operand; a dealloc of the operand moves after
        the matmul, which now reads it. Returns (operand, strides of the loop dims
        (batch..., m, n) in it) or None."""
        op, c = self.match.op, self.match.c
        aliases = _aliases(c)
        prev = op.prev_op
        while prev is not None and not _touches(prev, aliases):
            prev = prev.prev_op
        if not (isinstance(prev, linalg.GenericOp) and len(prev.inputs) == 1
                and list(prev.outputs) == [c]):
            return None
        src = prev.inputs[0]
        body = list(prev.body.block.ops)
        rank = len(c.type.get_shape())
        maps = [m.data for m in prev.indexing_maps]
        if (src in aliases or not isinstance(src.type, MemRefType)
                or len(body) != 1 or list(body[0].operands) != [prev.body.block.args[0]]
                or maps[1] != AffineMap.identity(rank)
                or any(it.data != IteratorType.PARALLEL for it in prev.iterator_types)):
            return None
        shape = src.type.get_shape()
        if DYNAMIC_INDEX in shape[1:]:
            return None  # strides only known at run time
        row_major = [math.prod(shape[p + 1:]) for p in range(len(shape))]
        strides = [0] * rank
        for pos, e in enumerate(maps[0].results):
            if isinstance(e, AffineDimExpr):
                strides[e.position] += row_major[pos]
            elif not (isinstance(e, AffineConstantExpr) and e.value == 0):
                return None
        if strides[-1] not in (0, 1):  # the kernel reads init along n, or one value per row
            return None
        # src may be a view (a reshaped residual): its buffer and every view of that buffer,
        # not only the views of src, must stay intact until the matmul reads src
        buffer = _aliases(_base(src))
        late_deallocs = []
        between = prev.next_op
        while between is not op:  # nothing in between may write the operand
            if isinstance(between, memref.DeallocOp) and between.memref in buffer:
                late_deallocs.append(between)
            elif _touches(between, buffer) and not isinstance(between, VIEW_OPS):
                return None
            between = between.next_op
        for d in late_deallocs:
            d.detach()
            Rewriter.insert_op(d, InsertPoint.after(op))
        Rewriter.erase_op(prev)
        return src, strides

    # -- the epilogue

    def _take_epilogue(self) -> linalg.GenericOp | None:
        """An elementwise op right after the matmul that reads C where it writes (bias,
        activation, residual, scaling: `D[i] = f(C[i], others...)`) and is C's only reader,
        possibly through reshapes (a row-major view of C: a conv's (N, OC, OH*OW) result
        read as (N, OC, OH, OW)): it runs on each tile of C right after the tile's last K
        block, while the tile is in cache, and no pass over C remains. When C is a
        temporary, the matmul accumulates in D (a view of it in C's shape) and C goes.
        Before the matmul, ops may write C's start (a bias a fused row nest wrote). Between
        the two, only allocations, views, constants and deallocations (moved before the
        matmul, deallocations left where they are)."""
        op, c = self.match.op, self.match.c
        block = op.parent_block()

        def before_matmul(user: Operation) -> bool:
            top = block.find_ancestor_op_in_block(user)
            return top is not None and is_before(top, op)

        # C's one reader after the matmul, through a chain of single-use reshapes
        view, chain = c, []
        while True:
            readers = [u.operation for u in view.uses if u.operation is not op
                       and not isinstance(u.operation, memref.DeallocOp)
                       and not (view is c and before_matmul(u.operation))]
            if len(readers) != 1:
                return None
            if not isinstance(readers[0], memref.CollapseShapeOp | memref.ExpandShapeOp):
                break
            if self.match.m_dynamic:
                return None  # a reshape of C with a dynamic M: the epilogue stays a loop
            if view is not c and any(isinstance(u.operation, memref.DeallocOp) for u in view.uses):
                return None
            chain.append(readers[0])
            view = readers[0].result
        g = readers[0]
        nxt, between = op.next_op, []
        while nxt is not g:
            if not isinstance(nxt, arith.ConstantOp | memref.AllocOp | memref.DeallocOp
                              | memref.ViewOp | memref.GetGlobalOp | memref.CollapseShapeOp
                              | memref.ExpandShapeOp) or (
                    isinstance(nxt, memref.DeallocOp) and nxt.memref is c):
                return None
            between.append(nxt)
            nxt = nxt.next_op
        shape = view.type.get_shape()
        if not (isinstance(g, linalg.GenericOp) and len(g.outputs) == 1
                and all(it.data == IteratorType.PARALLEL for it in g.iterator_types)):
            return None
        maps = [m.data for m in g.indexing_maps]
        ident = AffineMap.identity(len(shape))
        d = g.outputs[0]
        c_in = [i for i, v in enumerate(g.inputs) if v is view]
        if (len(c_in) != 1 or maps[c_in[0]] != ident or maps[-1] != ident
                or not isinstance(d.type, MemRefType) or d.type.get_shape() != shape
                or d.type.element_type != c.type.element_type
                or any(o.dialect_name() not in ("arith", "math") for o in g.body.block.ops
                       if not isinstance(o, linalg.YieldOp))):
            return None
        others = [v for v in g.inputs if v is not view]
        c_aliases, d_aliases = _aliases(c), _aliases(d)
        if c_aliases != {c, *(v.result for v in chain)} or any(
                v in c_aliases or v in d_aliases for v in others) or any(
                v in d_aliases for v in (self.match.a, self.match.b)):
            return None
        replace_c = d is not view and isinstance(c, OpResult) and isinstance(c.op, memref.AllocOp)
        for o in between:  # before C's allocation when D replaces C, else before the matmul
            if not isinstance(o, memref.DeallocOp) and o not in chain:
                o.detach()
                Rewriter.insert_op(o, InsertPoint.before(c.op if replace_c else op))
        self.epilogue_shape = shape
        if replace_c:
            # a temporary C goes: the matmul accumulates in D, the epilogue works in place
            for u in list(c.uses):
                if isinstance(u.operation, memref.DeallocOp):
                    Rewriter.erase_op(u.operation)
            alloc = c.op
            b = Builder(InsertPoint.before(alloc))
            new_c = d if d.type == c.type else reshaped_view(b, d, c.type, list(alloc.dynamic_sizes))
            c.replace_all_uses_with(new_c)
            Rewriter.erase_op(alloc)
            self.match = dataclasses.replace(self.match, c=new_c)
        for o in chain:  # the epilogue, now inside the tile loops, reads C through them
            o.detach()
            Rewriter.insert_op(o, InsertPoint.before(op))
        return g

    # -- packing

    def _pack_a(self, b: Builder, ix: _Ix, a: SSAValue, ap: SSAValue, nba: int, MP: int,
                a_rs: int, a_ks: int) -> None:
        """Ap[(ba*MP + ip)*K*mr + k*mr + r] = A[ba*M*K + (ip*mr + r)*a_rs + k*a_ks], 0 past
        row M (a_rs, a_ks: K, 1 for A in [m, k]; 1, M for A in [k, m]).

        k outer, the mr rows inner (a constant trip count, unrolled): the writes are
        sequential and the reads walk mr rows in step, one cache line each at a time."""
        M, K, mr = self.match.m, self.match.k, self.s.mr
        zero = _zero(b, self.match.element_type)
        edge_rows = M % mr

        def sliver(b: Builder, src: Index, dst: Index, rows: int) -> None:
            def krow(b: Builder, k: Index) -> None:
                d_k = ix.add(b, dst, ix.mul(b, k, mr))
                s_k = ix.add(b, src, ix.mul(b, k, a_ks))
                for r in range(mr):
                    if r < rows:
                        v = b.insert(memref.LoadOp.get(a, [ix.v(ix.add(b, s_k, r * a_rs))])).res
                    else:
                        v = zero
                    b.insert(memref.StoreOp.get(v, ap, [ix.v(ix.add(b, d_k, r))]))

            _for(b, ix, 0, K, 1, krow)

        def body(b: Builder, p: Index) -> None:
            ba, ip = _split_flat(b, ix, p, [nba, MP])
            src = ix.add(b, ix.mul(b, ba, M * K), ix.mul(b, ip, mr * a_rs))
            dst = ix.mul(b, p, K * mr)
            if not edge_rows:
                sliver(b, src, dst, mr)
                return
            if isinstance(ip, int):
                sliver(b, src, dst, edge_rows if ip == MP - 1 else mr)
                return
            is_full = b.insert(arith.CmpiOp(ip, ix.v(MP - 1), "ult")).result
            full_block, edge_block = Block(), Block()
            b.insert(scf.IfOp(is_full, [], Region(full_block), Region(edge_block)))
            for blk, rows in ((full_block, mr), (edge_block, edge_rows)):
                Builder(InsertPoint.at_end(blk)).insert(scf.YieldOp())
                sliver(Builder(InsertPoint.before(blk.last_op)), src, dst, rows)

        _parallel(b, ix, nba * MP, body)

    def _pack_b(self, b: Builder, ix: _Ix, bm: SSAValue, bp: SSAValue, nbb: int, NP: int) -> None:
        """Bp[(bb*NP + jp)*K*nr + k*nr + j] = B[bb*K*N + k*N + jp*nr + j], 0 past column N
        (a transposed B, [n, k]: B[bb*K*N + (jp*nr + j)*K + k]).

        In blocks of PACK_B_ROWS rows of B (the parallel loop), panel by panel: each panel's
        rows of the block are written contiguously, and the reads advance along those rows."""
        N, K, nr = self.match.n, self.match.k, self.s.nr
        zero = _zero(b, self.match.element_type)
        full_panels, edge_cols = divmod(N, nr)
        kb = min(K, PACK_B_ROWS)
        nkb = -(-K // kb)

        def body(b: Builder, p: Index) -> None:
            bb, kbi = _split_flat(b, ix, p, [nbb, nkb])
            k0 = ix.mul(b, kbi, kb)
            k1 = ix.min(b, ix.add(b, k0, kb), K)
            b_ks, b_ns = (1, K) if self.match.b_trans else (N, 1)  # strides of B's k and n
            src = ix.add(b, ix.mul(b, bb, K * N), ix.mul(b, k0, b_ks))
            dst = ix.add(b, ix.mul(b, ix.mul(b, bb, NP), K * nr), ix.mul(b, k0, nr))

            def panel(b: Builder, jp: Index, cols: int) -> None:
                s_p = ix.add(b, src, ix.mul(b, jp, nr * b_ns))
                d_p = ix.add(b, dst, ix.mul(b, jp, K * nr))

                def krow(b: Builder, k: Index) -> None:
                    s_k = ix.add(b, s_p, ix.mul(b, k, b_ks))
                    d_k = ix.add(b, d_p, ix.mul(b, k, nr))

                    def copy(b: Builder, j: Index) -> None:
                        v = b.insert(memref.LoadOp.get(bm, [ix.v(ix.add(b, s_k, ix.mul(
                            b, j, b_ns)))])).res
                        b.insert(memref.StoreOp.get(v, bp, [ix.v(ix.add(b, d_k, j))]))

                    _for(b, ix, 0, cols, 1, copy)
                    _for(b, ix, cols, nr, 1, lambda b, j: b.insert(memref.StoreOp.get(
                        zero, bp, [ix.v(ix.add(b, d_k, j))])))

                _for(b, ix, 0, ix.sub(b, k1, k0), 1, krow)

            _for(b, ix, 0, full_panels, 1, lambda b, jp: panel(b, jp, nr))
            if edge_cols:
                panel(b, full_panels, edge_cols)

        _parallel(b, ix, nbb * nkb, body)

    def _prepacked(self, b: Builder, g: memref.GlobalOp, suffix: str, width: int,
                   as_kw) -> SSAValue:
        """A constant operand packed now into a global of panels `width` wide: `as_kw`
        views the global's data as (batch, K, W), B itself or A transposed, and panel p of
        a batch entry holds [k][j] = data[k][p*width + j], 0 past W (the layout of
        `_pack_b`, and with width = mr that of `_pack_a`)."""
        name = f"{g.sym_name.data}_{suffix}"
        existing = next((o for o in self.module.ops if isinstance(o, memref.GlobalOp)
                         and o.sym_name.data == name), None)
        if existing is None:
            data = as_kw(numpy_from_dense(g.initial_value))
            nbat, K, W = data.shape
            P = -(-W // width)
            padded = np.zeros((nbat, K, P * width), data.dtype)
            padded[:, :, :W] = data
            panels = padded.reshape(nbat, K, P, width).transpose(0, 2, 1, 3)
            packed = np.ascontiguousarray(panels).reshape(-1)
            existing = memref.GlobalOp.get(
                StringAttr(name), MemRefType(self.match.element_type, [packed.size]),
                dense_from_numpy(packed), sym_visibility=StringAttr("private"),
                constant=UnitAttr())
            self.module.body.block.insert_op_after(existing, g)
        return b.insert(memref.GetGlobalOp(name, existing.type)).memref

    # -- the tile loops

    def _compute(self, b: Builder, ix: _Ix, a_src: SSAValue, a_packed: bool, b_src: SSAValue,
                 b_packed: bool, c: SSAValue, MP: int, NP: int, first_overwrites: bool) -> None:
        """The tile loops: over the (batch, mc block, nc block) tiles of C, the dims the
        schedule names `parallel` flattened into one scf.parallel (with B's producer inside,
        a run of batches per thread instead) and the rest in scf.for loops, each tile
        emitted by _emit_tile."""
        mm, s = self.match, self.s
        M, N = self.M, mm.n
        TM = ix.div(b, ix.add(b, M, s.mc - 1), s.mc) if mm.m_dynamic else -(-M // s.mc)
        TN = -(-N // s.nc)
        nb = self.nb
        extents = {"b": nb, "m": TM, "n": TN}
        # Threads take contiguous runs of the flattened tiles. M blocks come in multiples of
        # mr, so the last is often short; when N's blocks are all equal, run over N outside
        # M, so that each thread's run covers whole columns of tiles and they stay balanced.
        # (A dynamic M: M outside, so that the flattened index splits by a static TN.)
        dims = "bnm" if not mm.m_dynamic and M % s.mc and not N % s.nc else "bmn"

        def several(x: Index) -> bool:
            return not isinstance(x, int) or x > 1

        par = [d for d in dims if d in s.parallel and several(extents[d])]
        seq = [d for d in dims if d not in par and several(extents[d])]
        true_ = ix.const(1, i1)
        ldb = self.ldb if self.b_producer is not None else N  # B's row stride in place
        init_flat = flat_view(b, self.init[0]) if self.init is not None else None
        epi_on_c = self._epilogue_on_c(b) if self.epilogue is not None else None
        self.operands = _Operands(a_src, a_packed, b_src, b_packed, c, MP, NP, first_overwrites,
                                  true_, ldb, init_flat, epi_on_c, self.a_cold, self.b_cold)
        self.tail = self._tail_kernels()

        def nest(b: Builder, idx: dict[str, Index], dims: list[str]) -> None:
            if not dims:
                self._emit_tile(b, ix, idx)
                return
            d = dims[0]
            _for(b, ix, 0, extents[d], 1, lambda b, v: nest(b, {**idx, d: v}, dims[1:]))

        if self.b_producer is not None:  # per thread, a run of batches: B, then its tiles
            shape = self.b_producer.outputs[0].type.get_shape()
            # (slot, the copy's K dims, one padded row of N)
            slots = reshaped_view(b, b_src, MemRefType(
                mm.element_type, [self.slots, *shape[1:self.kdims + 1], self.ldb]))
            if self.pad is not None:  # the padded buffer's source, in the copy's view of it
                x = self.pad[0].inputs[0]
                vshape = self.b_producer.inputs[0].type.get_shape()
                self.pad_source = reshaped_view(b, x, MemRefType(
                    x.type.element_type, [*vshape[:-2], *x.type.get_shape()[-2:]]),
                    [self.nb] if mm.batch_dynamic else [])
            inner = [d for d in dims if d != "b" and extents[d] > 1]

            def run_of_batches(b: Builder, t: Index) -> None:
                lo = ix.div(b, ix.mul(b, t, nb), self.slots)
                hi = ix.div(b, ix.mul(b, ix.add(b, t, 1), nb), self.slots)

                def one(b: Builder, bi: Index) -> None:
                    self._emit_b_producer(b, ix, slots, bi, t)
                    nest(b, {"b": bi, "slot": t}, inner)

                _for(b, ix, lo, hi, 1, one)

            _parallel(b, ix, self.slots, run_of_batches)
        elif par:
            ext = [extents[d] for d in par]

            def par_body(b: Builder, t: Index) -> None:
                nest(b, dict(zip(par, _split_flat(b, ix, t, ext))), seq)

            total: Index = 1
            for e in ext:
                total = ix.mul(b, total, e)
            _parallel(b, ix, total, par_body)
        else:
            nest(b, {}, seq)

    def _emit_tile(self, b: Builder, ix: _Ix, idx: dict[str, Index]) -> None:
        """The mc x nc tile of C at the tile indices `idx` (b, m, n; absent: 0; slot: the
        thread's B buffer): its K blocks (_emit_kblock), then the epilogue on the finished
        tile while it is in cache."""
        mm, s = self.match, self.s
        M, N, K = self.M, mm.n, mm.k
        batch = list(mm.batch)
        a_shape, b_shape = mm.a.type.get_shape(), mm.b.type.get_shape()
        bflat = idx.get("b", 0)
        bidx = _split_flat(b, ix, bflat, batch) if batch else []
        ba = _batch_offset(b, ix, bidx, mm.a_batch, a_shape, batch)
        bb = (idx["slot"] if "slot" in idx  # B written per batch into a thread's buffer
              else _batch_offset(b, ix, bidx, mm.b_batch, b_shape, batch))
        ic = ix.mul(b, idx.get("m", 0), s.mc)
        jc = ix.mul(b, idx.get("n", 0), s.nc)
        mcv = ix.min(b, s.mc, ix.sub(b, M, ic))
        ncv = ix.min(b, s.nc, ix.sub(b, N, jc))
        c_base = ix.add(b, ix.mul(b, bflat, ix.mul(b, M, N)), ix.add(b, ix.mul(b, ic, N), jc))
        i_base: Index | None = None
        if self.init is not None:  # the init operand at (batch, ic, jc)
            i_strides = self.init[1]
            i_base = ix.add(b, ix.mul(b, ic, i_strides[-2]), ix.mul(b, jc, i_strides[-1]))
            for d, bi in enumerate(bidx):
                i_base = ix.add(b, i_base, ix.mul(b, bi, i_strides[d]))
        tile = _Tile(ba, bb, ic, jc, mcv, ncv, c_base, i_base)
        _for(b, ix, 0, K, s.kc, lambda b, pc: self._emit_kblock(b, ix, tile, pc))
        if self.epilogue is not None and self.epilogue_region is None:
            self._emit_epilogue(b, ix, bidx, ic, jc, mcv, ncv, self.operands.epi_on_c)

    def _emit_kblock(self, b: Builder, ix: _Ix, tile: _Tile, pc: Index) -> None:
        """K block pc (kc deep) of a tile: loops over its nr-wide panels of B and mr-row
        slivers of A, nested in the schedule's order, and a micro-kernel per pair; it
        accumulates into C except in a first block that overwrites it."""
        mm, s, o = self.match, self.s, self.operands
        M, K = self.M, mm.k
        kc = ix.min(b, s.kc, ix.sub(b, K, pc))
        if not o.first_overwrites:
            acc = o.true_
        elif isinstance(pc, int):
            acc = ix.const(int(pc > 0), i1)
        else:
            acc = b.insert(arith.CmpiOp(pc, ix.v(0), "ne")).result

        def panels(b: Builder, body) -> None:
            """body(b, jr, nr, lanes) for each panel of the tile, nr the kernel's width: s.nr,
            but a last panel of fewer vectors (the tile's width known) runs a kernel only as
            wide as they are, so fewer lanes idle (N = 49, nr = 16: 56 columns, not 64); and
            where A's rows are packed (a_rs = 1), the last few columns past whole vectors
            (lanes_max_cols) take an m_lanes kernel (`lanes`): the rows in vector lanes, a
            column an FMA per k step instead of mr (N = 49: 48 columns of vectors and one)."""
            ncv = tile.ncv
            rem = ncv % s.nr if isinstance(ncv, int) else 0
            cols = rem % s.vw
            if not (o.a_packed and 0 < cols <= lanes_max_cols(s.mr, s.vw)):
                cols = 0
            narrow = -(-(rem - cols) // s.vw) * s.vw
            if not rem or narrow + cols == s.nr:
                _for(b, ix, 0, ncv, s.nr, lambda b, jr: body(b, jr, s.nr, False))
                return
            _for(b, ix, 0, ncv - rem, s.nr, lambda b, jr: body(b, jr, s.nr, False))
            if narrow:
                body(b, ncv - rem, narrow, False)
            if cols:
                body(b, ncv - cols, cols, True)

        def panel(b: Builder, jr: Index, nr: int, lanes: bool = False) -> tuple[Index, Index]:
            """Columns of the nr from jr on (a kernel nr wide) and their offset in B: a
            panel's first column, or (`lanes`) one within it."""
            n = ix.min(b, nr, ix.sub(b, tile.ncv, jr))
            j = ix.add(b, tile.jc, jr)
            if o.b_packed:  # panel (bb*NP + j/nr), row pc (column j % nr)
                pnl = ix.add(b, ix.mul(b, tile.bb, o.NP), ix.div(b, j, s.nr))
                off = ix.add(b, ix.mul(b, pnl, K * s.nr), ix.mul(b, pc, s.nr))
                return n, ix.add(b, off, ix.rem(b, j, s.nr)) if lanes else off
            return n, ix.add(b, ix.mul(b, tile.bb, K * o.ldb), ix.add(b, ix.mul(b, pc, o.ldb), j))

        tail = self.tail

        def slivers(b: Builder, body) -> None:
            """body(b, ir, mr, slot) for each sliver of the tile's rows, mr the kernel's: s.mr, but
            the M % s.mr rows left at the end of the last M block (M known) run kernels of
            exactly as many rows (_tail_kernels), which compute no rows that are dropped.
            The other blocks are whole slivers (mc a multiple of s.mr), so a tile's rows past
            its whole slivers are 0 or the tail's; a dynamic tile tests which. slot: the
            sliver of s.mr rows whose share of the next block the call fetches (l2pf; None:
            ir / s.mr), which for the second of two tail kernels is the last one."""
            mcv = tile.mcv
            if tail is None:
                _for(b, ix, 0, mcv, s.mr, lambda b, ir: body(b, ir, s.mr, None))
                return
            rem = ix.rem(b, mcv, s.mr)
            if isinstance(rem, int) and not rem:
                _for(b, ix, 0, mcv, s.mr, lambda b, ir: body(b, ir, s.mr, None))
                return
            # at the tail: rem is the tail's leftover (M % s.mr), its kernels take sum(tail)
            at_tail = 1 if isinstance(rem, int) else ix.div(b, rem, self.M % s.mr)
            end = ix.sub(b, mcv, ix.mul(b, at_tail, sum(tail)))
            _for(b, ix, 0, end, s.mr, lambda b, ir: body(b, ir, s.mr, None))

            def tail_kernels(b: Builder) -> None:
                ir, first = end, ix.div(b, end, s.mr)
                for i, rows in enumerate(tail):
                    body(b, ir, rows, ix.add(b, first, i))
                    ir = ix.add(b, ir, rows)

            if isinstance(rem, int):
                tail_kernels(b)
                return
            blk = Block()
            b.insert(scf.IfOp(b.insert(arith.CmpiOp(ix.v(rem), ix.v(0), "ne")).result, [],
                              Region(blk)))
            Builder(InsertPoint.at_end(blk)).insert(scf.YieldOp())
            tail_kernels(Builder(InsertPoint.before(blk.last_op)))

        def sliver(b: Builder, ir: Index, mr: int) -> tuple[Index, Index]:
            """Rows of sliver ir (a kernel of mr rows) and its offset in A."""
            m = mr if tail is not None else ix.min(b, s.mr, ix.sub(b, tile.mcv, ir))
            i = ix.add(b, tile.ic, ir)
            if o.a_packed:
                slv = ix.add(b, ix.mul(b, tile.ba, o.MP), ix.div(b, i, s.mr))
                return m, ix.add(b, ix.mul(b, slv, K * s.mr), ix.mul(b, pc, s.mr))
            return m, ix.add(b, ix.mul(b, tile.ba, ix.mul(b, M, K)),
                             ix.add(b, ix.mul(b, i, self.a_rs), ix.mul(b, pc, self.a_ks)))

        def kernel(b: Builder, ir: Index, jr: Index, mr: int, slot: Index | None, m_a, n_b,
                   nr: int, lanes: bool) -> None:
            l2pf = None if lanes else self._l2_prefetch(b, ix, pc, ir, jr, m_a[1], n_b[1], slot)
            self._emit_microkernel(b, ix, tile, kc, acc, ir, jr, m_a, n_b, mr, nr, l2pf, lanes)

        if s.order == "nm":  # a B panel stays in L1 while the slivers of A pass
            panels(b, lambda b, jr, nr, lanes: (lambda nb_: slivers(
                b, lambda b, ir, mr, slot: kernel(b, ir, jr, mr, slot, sliver(b, ir, mr), nb_,
                                                  nr, lanes)))(panel(b, jr, nr, lanes)))
        else:  # an A sliver stays in L1 while the panels of B pass
            slivers(b, lambda b, ir, mr, slot: (lambda ma_: panels(
                b, lambda b, jr, nr, lanes: kernel(b, ir, jr, mr, slot, ma_,
                                                   panel(b, jr, nr, lanes), nr, lanes)))(
                                                       sliver(b, ir, mr)))

    def _tail_kernels(self) -> list[int] | None:
        """The rows of the kernels that take the last rows of a static M, where M % mr = r is
        not 0: one kernel of r rows; or, with A read in place and r rows too few FMA chains
        to hide the FMA latency (r * nr / vw < FMA_CHAINS), the last whole sliver and the r
        rows as two kernels of (mr + r) / 2 rows each (M = 128, mr = 6: 20 slivers of 6 and
        two of 4, not 21 and one of 2). Without this, the last sliver ran the mr-row kernel
        on clamped rows, in a k loop not unrolled. A chain of 4 layers (512x512 x 4,
        512x2048, 2048x512) with AVX2 code on a Sapphire Rapids-class Xeon, one thread:
        M = 126 26.4-26.7 ms, 128 27.9-28.1, 132 27.7-27.9. None: M dynamic (each edge
        sliver clamps its rows), M a multiple of mr, or mc not a multiple of mr."""
        mm, s, o = self.match, self.s, self.operands
        M = self.M
        if mm.m_dynamic or not isinstance(M, int) or s.mc % s.mr:
            return None
        r = M % s.mr
        if not r:
            return None
        last_block = M - (M - 1) // s.mc * s.mc  # rows of the last M block
        if (not o.a_packed and r * (s.nr // s.vw) < FMA_CHAINS
                and last_block >= s.mr + r):
            return [(s.mr + r + 1) // 2, (s.mr + r) // 2]
        return [r]

    def _l2_prefetch(self, b: Builder, ix: _Ix, pc: Index, ir: Index, jr: Index, a_off: Index,
                     b_off: Index, slot: Index | None = None
                     ) -> tuple[SSAValue, SSAValue, int] | None:
        """What the kernel call on sliver ir and panel jr of K block pc fetches into L2
        (MicrokernelOp's l2pf: buffer, offset, lines per ku steps), or None. slot: the
        sliver whose share of B the call fetches, where not ir / mr (tail kernels).

        With the A sliver outside the panels (order mn), a constant operand packed at compile
        time comes from memory the first time a kernel reads it: B's panels at the first
        sliver of a block, A's sliver at its first panel. The calls of the block fetch the next
        block of it meanwhile, each call its own share:
        - B: the block of the next K block of this tile (the same panels, kc rows on), or of
          the next tile's columns (nc on) after the last K block; the calls on panel p fetch
          that block's panel p, sliver i the i-th share of it;
        - A: the next sliver's K block; the calls on it fetch one share each, one per panel.
        Each call fetches `rate` lines per unrolled k step, enough that the shares cover the
        block. None where a block has a single sliver (B) or panel (A): that streams its
        operand once, in order, which the hardware's prefetchers follow; where a K block is
        less than a line; and with ku = 1 (no unrolled loop to fetch in)."""
        mm, s, o = self.match, self.s, self.operands
        if not s.l2pf or s.order != "mn" or s.ku < 2:
            return None
        K, kc = mm.k, min(s.kc, mm.k)
        line = 64 // element_bytes(mm.element_type)
        steps = max(1, kc // s.ku)  # unrolled iterations of a full K block
        slivers = -(-min(s.mc, self.M if isinstance(self.M, int) else s.mc) // s.mr)
        panels = -(-min(s.nc, mm.n) // s.nr)
        if o.b_cold and slivers >= 2:
            rate = -(-(kc * s.nr // line) // (slivers * steps))  # a panel's K block, shared
            if not rate:
                return None
            last = ix.div(b, ix.add(b, pc, s.kc), K)  # 1 in the tile's last K block
            # the next block: this one + kc rows, or (last K block) `panels` panels on, row 0
            back = ix.sub(b, panels * K * s.nr - s.kc * s.nr, ix.mul(b, pc, s.nr))
            nxt = ix.add(b, b_off, ix.add(b, s.kc * s.nr, ix.mul(b, last, back)))
            share = ix.mul(b, ix.div(b, ir, s.mr) if slot is None else slot,
                           steps * rate * line)
            return o.b_src, ix.v(ix.add(b, nxt, share)), min(rate, 4 * s.ku)
        if o.a_cold and panels >= 2:
            rate = -(-(kc * s.mr // line) // (panels * steps))  # the next sliver, shared
            if not rate:
                return None
            share = ix.mul(b, ix.div(b, jr, s.nr), steps * rate * line)
            return o.a_src, ix.v(ix.add(b, ix.add(b, a_off, K * s.mr), share)), min(rate, 4 * s.ku)
        return None

    def _emit_microkernel(self, b: Builder, ix: _Ix, tile: _Tile, kc: Index, acc: SSAValue,
                          ir: Index, jr: Index, m_a, n_b, mr: int, nr: int,
                          l2pf: tuple[SSAValue, SSAValue, int] | None = None,
                          lanes: bool = False) -> None:
        """The micro-kernel, mr x nr, on sliver ir of A (m rows at a_off) and panel jr of B
        (n columns at b_off), into C's tile at (ir, jr), starting from the init operand when
        there is one."""
        mm, s, o = self.match, self.s, self.operands
        M, N = self.M, mm.n
        (m, a_off), (n, b_off) = m_a, n_b
        c_off = ix.add(b, tile.c_base, ix.add(b, ix.mul(b, ir, N), jr))
        init = None
        if self.init is not None:
            rs, cs = self.init[1][-2:]
            i_off = ix.add(b, tile.i_base, ix.add(b, ix.mul(b, ir, rs), ix.mul(b, jr, cs)))
            init = (o.init_flat, ix.v(i_off), rs, cs)
        b.insert(MicrokernelOp(
            o.a_src, ix.v(a_off), o.b_src, ix.v(b_off), o.c, ix.v(c_off), ix.v(kc),
            ix.v(m), ix.v(n), acc,
            a_clamp=not o.a_packed and (mm.m_dynamic or M % s.mr != 0) and self.tail is None,
            b_masked=not lanes and not o.b_packed and N % nr != 0, m_lanes=lanes,
            mr=mr, nr=nr, vw=s.vw,
            a_rs=self.a_rs, a_ks=self.a_ks,
            b_ks=s.nr if o.b_packed else o.ldb, ldc=N, ku=s.ku,
            b_pf=0 if lanes else s.pf, init=init, l2pf=l2pf,
            epilogue=self.epilogue_region.clone() if self.epilogue_region is not None else None))

    def _c_shape(self) -> list[int]:
        """C's (batch..., m, n); with a dynamic M, C's type (its `?`)."""
        mm = self.match
        if mm.m_dynamic or mm.batch_dynamic:
            return list(mm.c.type.get_shape())
        return [*mm.batch, mm.m, mm.n]

    def _epilogue_on_c(self, b: Builder) -> list[tuple[SSAValue, AffineMap]] | None:
        """The epilogue's operands as views in C's shape, when it works on a reshape of C
        (a conv's (N, OC, OH*OW) read as (N, OC, OH, OW)) and reads every operand
        elementwise from a contiguous buffer: the tile loop then indexes them like C, with
        no division per element, and the inner loop vectorizes."""
        c_shape = self._c_shape()
        e_shape = list(self.epilogue_shape)
        if e_shape == c_shape:
            return None
        ident = AffineMap.identity(len(e_shape))
        out: list[tuple[SSAValue, AffineMap]] = []
        for v, m in zip(self.epilogue.operands, (m.data for m in self.epilogue.indexing_maps)):
            if not m.results:  # a scalar (rank 0) operand: read as it is
                out.append((v, AffineMap(len(c_shape), 0, ())))
            elif (m == ident and isinstance(v.type, MemRefType)
                  and isinstance(v.type.layout, NoneAttr)):
                dyn = [self.nb] if self.match.batch_dynamic else []  # C's one dynamic dim
                out.append((reshaped_view(b, v, MemRefType(v.type.element_type, c_shape), dyn),
                            AffineMap.identity(len(c_shape))))
            else:
                return None
        return out

    def _epilogue_in_kernel(self) -> Region | None:
        """The epilogue as the micro-kernels' `epilogue` region, applied to the tile's values
        in registers before their store (no pass over the tile after it): where it is a
        function of C's value alone (an activation: ReLU, ReLU6, SiLU, hardswish, GELU; its
        one-element constant operands as constants) written where C is (in place, or C gone
        into D), and each call finishes its part of C, K being one K block. Else None (the
        epilogue runs on the tile after its last block).
        One 1x1 conv + SiLU at one thread, Zen 4 (AVX-512), against the pass over the tile:
        1.16x at 16->96 112x112, 1.09x at 24->144 56x56, even at 14x14 and 28x28."""
        g, K, c = self.epilogue, self.match.k, self.match.c
        if g is None or not isinstance(K, int) or K > self.s.kc:
            return None
        d = g.outputs[0]
        if c not in _aliases(d) and d not in _aliases(c):
            return None  # D is not where the kernels write (C stays: another op reads it)
        args = g.body.block.args
        consts = {args[i]: x for i, v in enumerate(g.inputs)
                  if (x := scalar_constant(v)) is not None}
        rest = [args[i] for i in range(len(g.inputs)) if args[i] not in consts]
        if len(rest) != 1:
            return None  # C and another operand (a residual)
        return epilogue_region(g, rest[0], consts)

    def _emit_epilogue(self, b: Builder, ix: _Ix, bidx: list[Index], ic: Index, jc: Index,
                       mcv: Index, ncv: Index,
                       on_c: list[tuple[SSAValue, AffineMap]] | None) -> None:
        """The epilogue's scalar body over the mcv x ncv tile of C at (batch, ic, jc). On a
        reshaped view of C: through views in C's shape (`on_c`, see `_epilogue_on_c`), else
        at the row-major digits of the element's flat index."""
        c_shape = self._c_shape()
        e_shape = list(self.epilogue_shape)

        def row(b: Builder, i: Index) -> None:
            def col(b: Builder, j: Index) -> None:
                at = [*bidx, ix.add(b, ic, i), ix.add(b, jc, j)]
                if e_shape != c_shape and on_c is None:
                    flat: Index = 0
                    for v, size in zip(at, c_shape):
                        flat = ix.add(b, ix.mul(b, flat, size), v)
                    at = _split_flat(b, ix, flat, e_shape)
                emit_body(self.epilogue, b, {dim: ix.v(v) for dim, v in enumerate(at)}, None,
                          on_c)

            _for(b, ix, 0, ncv, 1, col)

        _for(b, ix, 0, mcv, 1, row)


def lanes_max_cols(mr: int, vw: int) -> int:
    """The most columns past a tile's whole vectors that an m_lanes kernel takes (see
    _emit_kblock's panels): it spends cols * ceil(mr / vw) FMAs a k step on them, a kernel
    one vector wide mr, so at most half of that."""
    return mr // 2 // -(-mr // vw)


def _touches(op: Operation, values: set[SSAValue]) -> bool:
    """Whether `op` or any op nested in it has an operand in `values` (a `memref.dim`, which
    reads a size no op changes, does not count)."""
    return any(v in values for o in op.walk() if not isinstance(o, memref.DimOp)
               for v in o.operands)


def _deallocs_movable(first: Operation, op: Operation, buf: set[SSAValue],
                      move: bool = False) -> bool:
    """Whether, between `first` and `op` (same block), only deallocations and views touch the
    views `buf` of a buffer; with `move`, those deallocations go after `op`."""
    moved: list[Operation] = []
    o = first.next_op
    while o is not op:
        if o is None:
            return False
        if isinstance(o, memref.DeallocOp) and o.memref in buf:
            moved.append(o)
        elif _touches(o, buf) and not isinstance(o, memref.CollapseShapeOp | memref.ExpandShapeOp):
            return False
        o = o.next_op
    if move:
        for d in moved:
            d.detach()
            Rewriter.insert_op(d, InsertPoint.after(op))
    return True


def _erase_dead_buffer(v: SSAValue) -> None:
    """Erase allocation `v` and its views when only deallocations and unused views remain."""
    views = _aliases(v)
    users = {u.operation for x in views for u in x.uses}
    if any(not isinstance(o, memref.DeallocOp | memref.CollapseShapeOp | memref.ExpandShapeOp
                          | memref.ViewOp | memref.SubviewOp | memref.CastOp) for o in users):
        return
    for o in [o for o in users if isinstance(o, memref.DeallocOp)]:
        Rewriter.erase_op(o)
    while True:  # views, innermost first
        dead = [x.op for x in views if isinstance(x, OpResult) and x is not v and not x.uses
                and x.op.parent is not None]
        if not dead:
            break
        for o in dead:
            Rewriter.erase_op(o)
    if isinstance(v, OpResult) and not v.uses:
        Rewriter.erase_op(v.op)


def _base(v: SSAValue) -> SSAValue:
    """The buffer a view (reshape, cast, subview) reads, through any chain of views."""
    while isinstance(v, OpResult) and isinstance(
            v.op, memref.CollapseShapeOp | memref.ExpandShapeOp | memref.SubviewOp | memref.CastOp):
        v = v.op.operands[0]
    return v


def _erase_unused_globals(module: ModuleOp, names: set[str]) -> None:
    """Drop the globals in `names` (constant operands now read prepacked) that nothing
    reads but unused reshapes."""
    for o in reversed(list(module.walk())):  # a reshape before the reshape it reads
        if isinstance(o, memref.GetGlobalOp | memref.CollapseShapeOp | memref.ExpandShapeOp) \
                and not o.results[0].uses:
            Rewriter.erase_op(o)
    used = {o.name_.root_reference.data for o in module.walk() if isinstance(o, memref.GetGlobalOp)}
    for o in list(module.ops):
        if isinstance(o, memref.GlobalOp) and o.sym_name.data in names - used:
            Rewriter.erase_op(o)


@dataclass(frozen=True)
class TileMatmul(ModulePass):
    """Tile, pack and micro-kernel every matmul-like linalg op on memrefs (CPU)."""

    name = "tile-matmul"

    vector_bits: int = 512  # for ops without a schedule
    # Threads the tile loops are split for (0: the default, $AICC_NUM_THREADS or all cores):
    # a B written per batch (see _take_b_producer) gets one buffer per thread.
    threads: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        prepacked: set[str] = set()
        for o in list(op.walk()):
            mm = match_matmul(o)
            if mm is None:
                continue
            if not all(isinstance(v.type, MemRefType) for v in (mm.a, mm.b, mm.c)):
                raise CompileError("tile-matmul: run bufferize first (matmul on tensors)")
            s = schedule_of(o)
            if s is None:
                ebytes = element_bytes(mm.element_type)
                s = choose_matmul_schedule(mm.batch, mm.m, mm.n, mm.k,
                                           vw=max(1, self.vector_bits // (8 * ebytes)),
                                           elem_bytes=ebytes, b_constant=is_constant(mm.b),
                                           a_constant=is_constant(mm.a),
                                           a_trans=mm.a_trans, b_trans=mm.b_trans,
                                           fixed=mm.fixed_choices() or None)
            if any(getattr(s, k) != v for k, v in mm.fixed_choices().items()):
                raise CompileError("tile-matmul: a matmul with dynamic sizes cannot pack an "
                                   f"operand whose size depends on them (schedule {s})")
            for v, packed in ((mm.a, s.pack_a), (mm.b, s.pack_b)):
                g = _global_of(v, op) if packed else None
                if g is not None:
                    prepacked.add(g.sym_name.data)
            _Tiler(mm, s, op, self.threads or default_threads()).run()
        if prepacked:
            _erase_unused_globals(op, prepacked)


__all__ = ["TileMatmul"]
