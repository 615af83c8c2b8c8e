"""lower-attention: aicc_fused.attention on memrefs -> one loop nest with online softmax.

Flash-attention style: no L x S score matrix exists. One scf.parallel runs over
(batch entries x blocks of QUERY_BLOCK query rows); each iteration walks its rows ROW_TILE at a
time, and for each tile sweeps the keys in blocks of KEY_BLOCK:

    for each tile of ROW_TILE query rows i (the last tile's rows clamp to L-1: recomputed,
                                              rewritten with the same values)
      m_i = -inf, l_i = 0, acc_i[:] = 0                       // running max, sum, p @ v
      for j0 in 0 .. kend step KEY_BLOCK                      // kend: S, or i_last + 1 if causal
        s[i][c] = scale * (q_i . k_{j0+c}), then masked      // one pass over e per key, all
                                                             //   rows of the tile share k's loads
        m_new = max(m_i, max_c s[i][c])
        ms = m_new == -inf ? 0 : m_new                        // an all-masked block adds nothing
        p[i][c] = exp(s[i][c] - ms);  l_i = l_i * exp(m_i - ms) + sum_c p[i][c]
        acc_i[:] = acc_i[:] * exp(m_i - ms) + sum_c p[i][c] * v_{j0+c}[:]
        m_i = m_new
      out_i[:] = acc_i[:] / l_i

The score tile, p and acc live in per-thread stack buffers (a few KB); q's rows, k and v are
read in place through each operand's permutation and broadcast batch dims, and the result is
written through its permutation. Causal attention stops each tile's key sweep at its last row
and masks the one block that crosses the diagonal. Scores are computed as in the unfused
program (dot product, then the scale, then the mask); the softmax is online, so its rounding
differs from the unfused one by a few ulps.

Innermost loops run over contiguous e (the dot products, a reduction marked reassoc) and f
(the p @ v update), so LLVM vectorizes both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, math as xmath, memref, scf
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.aicc_fused import AttentionOp
from compiler.lowering.loop_builder import IndexBuilder, for_loop

KERNEL_ATTR = "aicc.kernel"
QUERY_BLOCK = 32
ROW_TILE = 4
KEY_BLOCK = 128
REASSOC = arith.FastMathFlagsAttr([arith.FastMathFlag.REASSOC])


class _Emitter:
    def __init__(self, op: AttentionOp):
        self.op = op
        self.batch, self.L, self.S, self.E, self.F = op.sizes()
        self.ety = op.out.type.element_type
        self.idx: IndexBuilder | None = None

    # -- small builders

    def c(self, v: int) -> SSAValue:
        assert self.idx is not None
        return self.idx.const(v)

    def f(self, b: Builder, v: float) -> SSAValue:
        return b.insert(arith.ConstantOp(FloatAttr(v, self.ety))).result

    @staticmethod
    def op2(b: Builder, cls, x, y, fast: bool = False) -> SSAValue:
        o = cls(x, y, REASSOC) if fast else cls(x, y)
        return b.insert(o).result

    def minsi(self, b, x, y):
        return b.insert(arith.MinSIOp(x, y)).result

    def addi(self, b, x, y):
        return b.insert(arith.AddiOp(x, y)).result

    def muli(self, b, x, y):
        return b.insert(arith.MuliOp(x, y)).result

    # -- operand access: logical index -> stored index

    def index(self, value: SSAValue, perm: list[int] | None, logical: list[SSAValue]) -> list[SSAValue]:
        """Stored indices of `value` for a logical index over (batch..., a, b), broadcasting
        the value's batch dims against the result's."""
        shape = value.type.get_shape()
        rank = len(shape)
        nb = len(self.batch)
        batch_ix, tail = logical[:nb], logical[nb:]
        if perm is None:  # the mask: no permutation, plain broadcasting over all dims
            full = [*self.batch, self.L, self.S]
            ix = [*batch_ix, *tail]
            return [self.c(0) if shape[i] == 1 and full[i + len(full) - rank] != 1
                    else ix[i + len(full) - rank] for i in range(rank)]
        lshape = [shape[p] for p in perm]
        lix = [self.c(0) if lshape[i] == 1 and self.batch[i + nb - (rank - 2)] != 1
               else batch_ix[i + nb - (rank - 2)] for i in range(rank - 2)] + tail
        stored: list[SSAValue] = [None] * rank  # type: ignore[list-item]
        for t, p in enumerate(perm):
            stored[p] = lix[t]
        return stored

    def load(self, b: Builder, which: str, logical: list[SSAValue]) -> SSAValue:
        value = {"q": self.op.q, "k": self.op.k, "v": self.op.v, "mask": self.op.mask_value}[which]
        perm = None if which == "mask" else self.op.perm(which)
        return b.insert(memref.LoadOp.get(value, self.index(value, perm, logical))).res

    # -- the nest

    def build(self) -> scf.ParallelOp:
        op = self.op
        L, S, E, F = self.L, self.S, self.E, self.F
        nbatch = math.prod(self.batch)
        qblocks = -(-L // QUERY_BLOCK)
        outer = Builder(InsertPoint.before(op))
        lb, ub, st = (outer.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result
                      for v in (0, nbatch * qblocks, 1))
        body = Block(arg_types=[IndexType()])
        par = scf.ParallelOp([lb], [ub], [st], Region(body))
        par.attributes[KERNEL_ATTR] = StringAttr("attention")
        outer.insert(par)
        body.add_op(scf.ReduceOp())
        self.idx = IndexBuilder(Builder(InsertPoint.before(par)))
        b = Builder(InsertPoint.before(body.last_op))

        task = body.args[0]
        qb = b.insert(arith.RemUIOp(task, self.c(qblocks))).result
        rest = b.insert(arith.DivUIOp(task, self.c(qblocks))).result
        batch_ix: list[SSAValue] = [self.c(0)] * len(self.batch)
        nonunit = [d for d, n in enumerate(self.batch) if n != 1]
        for d in reversed(nonunit[1:]):
            batch_ix[d] = b.insert(arith.RemUIOp(rest, self.c(self.batch[d]))).result
            rest = b.insert(arith.DivUIOp(rest, self.c(self.batch[d]))).result
        if nonunit:
            batch_ix[nonunit[0]] = rest
        self.batch_ix = batch_ix

        kb = min(KEY_BLOCK, S)
        self.kb = kb
        self.scores = b.insert(memref.AllocaOp.get(self.ety, 64, [ROW_TILE, kb])).memref
        self.acc = b.insert(memref.AllocaOp.get(self.ety, 64, [ROW_TILE, F])).memref
        i0 = self.muli(b, qb, self.c(QUERY_BLOCK))
        nrows = self.minsi(b, self.c(QUERY_BLOCK), b.insert(arith.SubiOp(self.c(L), i0)).result)

        def tile(bt: Builder, r0: SSAValue, _):
            self.row_tile(bt, self.addi(bt, i0, r0))
            return []

        for_loop(b, self.c(0), nrows, self.c(ROW_TILE), [], tile)
        return par

    def row_tile(self, b: Builder, first: SSAValue) -> None:
        L, S, F = self.L, self.S, self.F
        op = self.op
        rows = [self.minsi(b, self.addi(b, first, self.c(t)), self.c(L - 1)) for t in range(ROW_TILE)]
        neg_inf, zero = self.f(b, -math.inf), self.f(b, 0.0)

        def clear(bb: Builder, fi: SSAValue, _):
            for t in range(ROW_TILE):
                bb.insert(memref.StoreOp.get(zero, self.acc, [self.c(t), fi]))
            return []

        for_loop(b, self.c(0), self.c(F), self.c(1), [], clear)
        kend = self.c(S)
        if op.causal is not None:
            kend = self.minsi(b, self.addi(b, rows[-1], self.c(1)), self.c(S))

        def key_block(bb: Builder, j0: SSAValue, carried):
            ms, ls = list(carried[:ROW_TILE]), list(carried[ROW_TILE:])
            cols = self.minsi(bb, self.c(self.kb), bb.insert(arith.SubiOp(kend, j0)).result)
            self.score_tile(bb, rows, j0, cols)
            # block max per row
            maxes = for_loop(bb, self.c(0), cols, self.c(1), [neg_inf] * ROW_TILE,
                             lambda b2, c, acc: [self.op2(b2, arith.MaximumfOp, acc[t],
                                                          b2.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res, True)
                                                 for t in range(ROW_TILE)])
            m_new, m_safe, alpha = [], [], []
            for t in range(ROW_TILE):
                mn = self.op2(bb, arith.MaximumfOp, ms[t], maxes[t])
                is_inf = bb.insert(arith.CmpfOp(mn, neg_inf, "oeq")).result
                safe = bb.insert(arith.SelectOp(is_inf, zero, mn)).result
                a = bb.insert(xmath.ExpOp(self.op2(bb, arith.SubfOp, ms[t], safe))).result
                m_new.append(mn), m_safe.append(safe), alpha.append(a)

            def exp_sum(b2: Builder, c: SSAValue, acc):
                out = []
                for t in range(ROW_TILE):
                    s = b2.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res
                    p = b2.insert(xmath.ExpOp(self.op2(b2, arith.SubfOp, s, m_safe[t]))).result
                    b2.insert(memref.StoreOp.get(p, self.scores, [self.c(t), c]))
                    out.append(self.op2(b2, arith.AddfOp, acc[t], p, True))
                return out

            sums = for_loop(bb, self.c(0), cols, self.c(1), [zero] * ROW_TILE, exp_sum)
            new_ls = [self.op2(bb, arith.AddfOp, self.op2(bb, arith.MulfOp, ls[t], alpha[t]), sums[t])
                      for t in range(ROW_TILE)]

            def rescale(b2: Builder, fi: SSAValue, _):
                for t in range(ROW_TILE):
                    a = b2.insert(memref.LoadOp.get(self.acc, [self.c(t), fi])).res
                    b2.insert(memref.StoreOp.get(self.op2(b2, arith.MulfOp, a, alpha[t]), self.acc,
                                                 [self.c(t), fi]))
                return []

            for_loop(bb, self.c(0), self.c(F), self.c(1), [], rescale)

            def pv(b2: Builder, c: SSAValue, _):
                j = self.addi(b2, j0, c)
                ps = [b2.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res for t in range(ROW_TILE)]

                def update(b3: Builder, fi: SSAValue, _):
                    vv = self.load(b3, "v", [*self.batch_ix, j, fi])
                    for t in range(ROW_TILE):
                        a = b3.insert(memref.LoadOp.get(self.acc, [self.c(t), fi])).res
                        a = self.op2(b3, arith.AddfOp, a, self.op2(b3, arith.MulfOp, ps[t], vv))
                        b3.insert(memref.StoreOp.get(a, self.acc, [self.c(t), fi]))
                    return []

                for_loop(b2, self.c(0), self.c(F), self.c(1), [], update)
                return []

            for_loop(bb, self.c(0), cols, self.c(1), [], pv)
            return [*m_new, *new_ls]

        final = for_loop(b, self.c(0), kend, self.c(self.kb), [neg_inf] * ROW_TILE + [zero] * ROW_TILE,
                         key_block)
        ls = final[ROW_TILE:]

        def write(bb: Builder, fi: SSAValue, _):
            for t in range(ROW_TILE):
                a = bb.insert(memref.LoadOp.get(self.acc, [self.c(t), fi])).res
                y = self.op2(bb, arith.DivfOp, a, ls[t])
                out = op.out
                ix = self.index(out, op.perm("out"), [*self.batch_ix, rows[t], fi])
                bb.insert(memref.StoreOp.get(y, out, ix))
            return []

        for_loop(b, self.c(0), self.c(F), self.c(1), [], write)

    def score_tile(self, b: Builder, rows: list[SSAValue], j0: SSAValue, cols: SSAValue) -> None:
        op = self.op
        zero = self.f(b, 0.0)
        scale = op.scale_value
        scale_c = self.f(b, scale) if scale != 1.0 else None
        neg_inf = self.f(b, -math.inf)
        fill = self.f(b, op.fill_value) if op.mask_kind in ("keep", "drop") else None

        def per_key(bb: Builder, c: SSAValue, _):
            j = self.addi(bb, j0, c)

            def dot(b2: Builder, e: SSAValue, acc):
                kv = self.load(b2, "k", [*self.batch_ix, j, e])
                return [self.op2(b2, arith.AddfOp, acc[t],
                                 self.op2(b2, arith.MulfOp, self.load(b2, "q", [*self.batch_ix, rows[t], e]), kv),
                                 True)
                        for t in range(ROW_TILE)]

            dots = for_loop(bb, self.c(0), self.c(self.E), self.c(1), [zero] * ROW_TILE, dot)
            for t in range(ROW_TILE):
                s = dots[t]
                if scale_c is not None:
                    s = self.op2(bb, arith.MulfOp, s, scale_c)
                if op.mask_kind == "add":
                    s = self.op2(bb, arith.AddfOp, s, self.load(bb, "mask", [*self.batch_ix, rows[t], j]))
                elif op.mask_kind in ("keep", "drop"):
                    keep = self.load(bb, "mask", [*self.batch_ix, rows[t], j])
                    a, bsel = (s, fill) if op.mask_kind == "keep" else (fill, s)
                    s = bb.insert(arith.SelectOp(keep, a, bsel)).result
                if op.causal is not None:
                    above = bb.insert(arith.CmpiOp(j, rows[t], "sgt")).result
                    s = bb.insert(arith.SelectOp(above, neg_inf, s)).result
                bb.insert(memref.StoreOp.get(s, self.scores, [self.c(t), c]))
            return []

        for_loop(b, self.c(0), cols, self.c(1), [], per_key)


def lower(op: AttentionOp) -> scf.ParallelOp:
    par = _Emitter(op).build()
    Rewriter.erase_op(op)
    return par


@dataclass(frozen=True)
class LowerAttention(ModulePass):
    """aicc_fused.attention on memrefs becomes a flash-attention loop nest."""

    name = "lower-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in list(op.walk()):
            if isinstance(o, AttentionOp):
                if any(not isinstance(v.type, MemRefType) for v in o.operands):
                    from compiler.errors import CompileError

                    raise CompileError("lower-attention: run bufferize first (attention on tensors)")
                lower(o)


__all__ = ["LowerAttention", "QUERY_BLOCK", "ROW_TILE", "KEY_BLOCK"]
