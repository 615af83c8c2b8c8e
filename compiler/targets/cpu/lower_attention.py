"""lower-attention: aicc_fused.attention on memrefs -> one loop nest with online softmax.

The CPU pipeline's lowering. The CUDA pipeline does not run it: its per-thread stack buffers do
not map onto a GPU, so map-to-gpu keeps the op whole in a gpu_map.kernel of kind "attention" and
CudaEmitter.emit_attention writes the GPU's flash-attention kernel (same semantics: scale, then
the mask, -inf past the diagonal, an all-masked row 0 / 0 = NaN).

Flash-attention style: no L x S score matrix exists. A first scf.parallel writes k^T once,
as tiles of E x KEY_BLOCK keys per (batch entry, key block), into a heap buffer freed after the
second; every query block reads its tiles from there (transposing k once per query block cost
10-15% of whisper's and vit's attention). The second scf.parallel runs over (batch entries x
blocks of QUERY_BLOCK query rows); each iteration walks its rows ROW_TILE at a time, and for
each tile sweeps the keys in blocks of KEY_BLOCK:

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

The score tile, p and acc live in per-thread stack buffers (a few KB); q's rows and v are
read in place through each operand's permutation and broadcast batch dims, and the result is
written through its permutation. A block of fewer keys than KEY_BLOCK (the last) computes
scores, the mask and exp only up to the next multiple of SCORE_COLS keys. Causal attention
stops the task's key sweep after its last row, and each row tile's keys after the tile's
last row (its scores and exp up to the next multiple of SCORE_COLS), masking only the keys
past the diagonal within them. Scores are computed as in the unfused program (dot product,
then the scale, then the mask); the softmax is online, so its rounding differs from the
unfused one by a few ulps.

Both products are register tiles: the scores of ROW_TILE rows x SCORE_COLS keys are values
carried through the loop over e (one multiply-add of a q element and a row of the k^T tile
each per e), and the accumulators of ROW_TILE rows x SCORE_COLS columns of v through the loop
over the block's keys (loaded and rescaled by exp(m_i - ms) before it, stored after it; F's
tail past a multiple of SCORE_COLS updates memory); each loop takes K_UNROLL steps per
iteration, then the rest one at a time. LLVM's SLP vectorizer packs the carried
values into vector registers, so neither loop loads or stores its sums (a memory-resident tile
ran at about half the FMA rate: 6.3 -> 3.0-3.4 ms for 12 heads of 197 x 64 at 1 thread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, math as xmath, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.aicc import NONPOSITIVE_ARG
from compiler.dialects.aicc_fused import AttentionOp
from compiler.lowering.dims import dim_value
from compiler.lowering.loop_builder import IndexBuilder, for_loop, index_product
from compiler.lowering.utils import AFN

KERNEL_ATTR = "aicc.kernel"
QUERY_BLOCK = 64  # query rows per parallel task
DYNAMIC_SIZE_GUESS = 128  # the query / key count the blocks are sized for when it is dynamic
# rows that share each load of k^T and v with AVX2's 16 vector registers: 6 rows x 16 keys
# (or v columns) are 12 accumulators, plus 2 loads and a broadcast. Twelve independent FMA
# chains keep both FMA pipes busy through a 4-cycle latency where 4 rows' 8 left them short:
# one thread, Zen 3 (AVX2), alternately in one process, 4 -> 6 rows: causal 8 x 1024 x 64
# 59 -> 68 GFLOP/s, 12 x 197 x 64 (vit) 57 -> 62, 6 x 1500 x 64 (whisper) 63 -> 73,
# 12 x 128 x 64 +2%, causal 4 x 77 x 64 +3%
ROW_TILE = 6
# ... with AVX-512's 32 registers, and keys per block. One thread, Zen 4, against 4 rows and
# 64 keys: 6 heads of 1500 x 64 (whisper) 78 -> 82 GFLOP/s, 12 x 197 x 64 (vit) 62 -> 65,
# causal 8 x 1024 x 64 +2%; with AVX2 code 8 rows spill and run at half speed, and 128 keys
# are even with 64.
ROW_TILE_WIDE = 8
KEY_BLOCK = 128
SCORE_COLS = 16  # keys per register tile of the scores: ROW_TILE x 16 sums in registers
# ... and with AVX-512: 8 rows x 32 keys (or v columns) are 16 accumulators, two loads of
# k^T (or v) and 8 broadcasts per 16 FMAs, where 8 x 16 had 8 accumulators and 9 loads per 8
# FMAs. One thread, Sapphire Rapids-class Xeon, alternately in one process, 8 x 16 -> 8 x 32:
# 6 heads of 1500 x 64 (whisper) 50.1 -> 36.1 ms, 12 x 128 x 64 1.32 -> 1.04 ms, causal
# 8 x 1024 x 64 18.3 -> 15.0 ms, 12 x 197 x 64 (vit) 3.01 -> 2.93 ms. AVX2's 16 registers
# hold 6 x 16 (12 accumulators) and no more.
SCORE_COLS_WIDE = 32
# Steps per iteration of the two register-tile loops (over e for the scores, over the block's
# keys for p @ v; then a loop of the rest): one step's 12 (AVX2) or 16 (AVX-512) FMAs left
# the loop's own increments and branch in every few cycles. One thread, Sapphire Rapids-class
# Xeon, alternately in one process, ms with 1 / 2 / 4 steps: haswell code, 6 heads of
# 1500 x 64 (whisper) 41.4 / 40.9 / 39.1, 12 x 197 x 64 (vit) 1.66 / 1.66 / 1.62, 12 x 128 x
# 64 0.710 / 0.705 / 0.666, causal 8 x 1024 x 64 14.9 / 14.4 / 13.7 (8 steps: 71.3 and 24.3,
# slower); AVX-512 code 30.8 / 29.8 / 29.1, 1.28 / 1.27 / 1.27, 0.528 / 0.520 / 0.517,
# 10.8 / 10.6 / 10.4.
K_UNROLL = 4
ACC_BYTES = 64 * 1024
KT_BYTES = 32 * 1024
REASSOC = arith.FastMathFlagsAttr([arith.FastMathFlag.REASSOC])
MAX_FLAGS = arith.FastMathFlagsAttr([arith.FastMathFlag.REASSOC, arith.FastMathFlag.NO_NANS,
                                     arith.FastMathFlag.NO_SIGNED_ZEROS])
# the products of q . k and p @ v may fuse into FMAs (one rounding instead of two)
CONTRACT = arith.FastMathFlagsAttr([arith.FastMathFlag.ALLOW_CONTRACT])
REASSOC_CONTRACT = arith.FastMathFlagsAttr([arith.FastMathFlag.REASSOC, arith.FastMathFlag.ALLOW_CONTRACT])


class _Emitter:
    def __init__(self, op: AttentionOp, row_tile: int = ROW_TILE, score_cols: int = SCORE_COLS):
        self.op = op
        self.rt = row_tile  # query rows a register tile
        self.sc = score_cols  # keys (and v columns) a register tile
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
    def op2(b: Builder, cls, x, y, fast: bool = False, flags=None) -> SSAValue:
        o = cls(x, y, flags or REASSOC) if fast or flags else cls(x, y)
        return b.insert(o).result

    def fma(self, b: Builder, acc, x, y, reassoc: bool) -> SSAValue:
        """acc + x * y, contractible into one FMA."""
        prod = self.op2(b, arith.MulfOp, x, y, flags=CONTRACT)
        return self.op2(b, arith.AddfOp, acc, prod, flags=REASSOC_CONTRACT if reassoc else CONTRACT)

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

    def _size(self, b: Builder, which: str, i: int):
        """Logical dim i of an operand: an int, or (dynamic) a memref.dim of it."""
        value = {"q": self.op.q, "k": self.op.k, "v": self.op.v, "out": self.op.out}[which]
        perm = self.op.perm(which)
        p = perm[i % len(perm)]
        d = value.type.get_shape()[p]
        return d if d != DYNAMIC_INDEX else dim_value(b, value, p)

    def v(self, x) -> SSAValue:
        return self.c(x) if isinstance(x, int) else x

    def build(self) -> scf.ParallelOp:
        op = self.op
        outer = Builder(InsertPoint.before(op))
        # index constants go before the first op made here: they dominate both parallel loops
        zero = outer.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
        self.idx = IndexBuilder(Builder(InsertPoint.before(zero.owner)))
        self.idx.consts[0] = zero
        # dynamic sizes (batch, L, S) are read from the operands; E and F are static
        nb = len(self.batch)
        self.batch = [self._size(outer, "out", j) for j in range(nb)]
        self.L, self.S = self._size(outer, "out", -2), self._size(outer, "k", -2)
        L, S, E, F = self.L, self.S, self.E, self.F
        self.bq = block_rows(F, L if isinstance(L, int) else DYNAMIC_SIZE_GUESS, self.rt)
        self.kb = keys_per_block(E, S if isinstance(S, int) else DYNAMIC_SIZE_GUESS, self.sc)

        qblocks = self.ceil_div(outer, L, self.bq)
        self.nkb = self.ceil_div(outer, S, self.kb)
        self.kt_all = self.transpose_k(outer)
        lb = outer.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
        ub = index_product(outer, [*self.batch, qblocks])
        st = outer.insert(arith.ConstantOp(IntegerAttr(1, IndexType()))).result
        body = Block(arg_types=[IndexType()])
        par = scf.ParallelOp([lb], [ub], [st], Region(body))
        par.attributes[KERNEL_ATTR] = StringAttr("attention")
        outer.insert(par)
        outer.insert(memref.DeallocOp.get(self.kt_all))
        body.add_op(scf.ReduceOp())
        b = Builder(InsertPoint.before(body.last_op))

        task = body.args[0]
        qb = b.insert(arith.RemUIOp(task, self.v(qblocks))).result
        self.flat = b.insert(arith.DivUIOp(task, self.v(qblocks))).result
        self.batch_ix = self.batch_of(b, self.flat)
        # the batch entry's k^T tiles in kt_all
        self.kt_entry = self.muli(b, self.flat, index_product(b, [self.nkb, self.E * self.kb]))

        ety = self.ety
        self.scores = b.insert(memref.AllocaOp.get(ety, 64, [self.rt, self.kb])).memref
        self.acc = b.insert(memref.AllocaOp.get(ety, 64, [self.bq, F])).memref
        self.m = b.insert(memref.AllocaOp.get(ety, 64, [self.bq])).memref
        self.l = b.insert(memref.AllocaOp.get(ety, 64, [self.bq])).memref
        self.i0 = self.muli(b, qb, self.c(self.bq))
        self.nrows = self.minsi(b, self.c(self.bq), b.insert(arith.SubiOp(self.v(L), self.i0)).result)
        neg_inf, zero = self.f(b, -math.inf), self.f(b, 0.0)

        def init(bb: Builder, r: SSAValue, _):
            bb.insert(memref.StoreOp.get(neg_inf, self.m, [r]))
            bb.insert(memref.StoreOp.get(zero, self.l, [r]))
            self.loop(bb, F, lambda b2, f: b2.insert(memref.StoreOp.get(zero, self.acc, [r, f])))
            return []

        for_loop(b, self.c(0), self.c(self.bq), self.c(1), [], init)
        kend = self.v(S)
        if op.causal is not None:  # the block's last row sees keys up to itself
            kend = self.minsi(b, self.addi(b, self.i0, self.nrows), self.v(S))

        def key_block(bb: Builder, j0: SSAValue, _):
            self.key_block(bb, j0, kend)
            return []

        for_loop(b, self.c(0), kend, self.c(self.kb), [], key_block)

        def write(bb: Builder, r: SSAValue, _):
            i = self.addi(bb, self.i0, r)
            lr = bb.insert(memref.LoadOp.get(self.l, [r])).res

            def store(b2: Builder, f: SSAValue):
                a = b2.insert(memref.LoadOp.get(self.acc, [r, f])).res
                y = self.op2(b2, arith.DivfOp, a, lr)
                ix = self.index(op.out, op.perm("out"), [*self.batch_ix, i, f])
                b2.insert(memref.StoreOp.get(y, op.out, ix))

            self.loop(bb, F, store)
            return []

        for_loop(b, self.c(0), self.nrows, self.c(1), [], write)
        return par

    def ceil_div(self, b: Builder, n, d: int):
        """ceil(n / d) for an int or an index value n."""
        if isinstance(n, int):
            return -(-n // d)
        return b.insert(arith.DivUIOp(self.addi(b, n, self.c(d - 1)), self.c(d))).result

    def batch_of(self, b: Builder, flat: SSAValue) -> list[SSAValue]:
        """The result's batch indices of a flat batch entry (row-major over self.batch)."""
        batch_ix: list[SSAValue] = [self.c(0)] * len(self.batch)
        nonunit = [d for d, n in enumerate(self.batch) if not isinstance(n, int) or n != 1]
        rest = flat
        for d in reversed(nonunit[1:]):
            batch_ix[d] = b.insert(arith.RemUIOp(rest, self.v(self.batch[d]))).result
            rest = b.insert(arith.DivUIOp(rest, self.v(self.batch[d]))).result
        if nonunit:
            batch_ix[nonunit[0]] = rest
        return batch_ix

    def transpose_k(self, outer: Builder) -> SSAValue:
        """k^T once for all query blocks, in key blocks: a buffer of (batch entry, key block)
        tiles of E x kb, each laid out as the tile the scores read (keys past S repeat key
        S-1; they are masked), filled by a parallel loop over the tiles."""
        E, kb = self.E, self.kb
        tiles = index_product(outer, [*self.batch, self.nkb])
        size = index_product(outer, [*self.batch, self.nkb, E * kb])
        if isinstance(size.owner, arith.ConstantOp):
            n = size.owner.value.value.data
            buf = outer.insert(memref.AllocOp.get(self.ety, 64, [n])).memref
        else:
            buf = outer.insert(memref.AllocOp.get(self.ety, 64, [DYNAMIC_INDEX],
                                                  dynamic_sizes=[size])).memref
        body = Block(arg_types=[IndexType()])
        par = scf.ParallelOp([self.c(0)], [tiles], [self.c(1)], Region(body))
        par.attributes[KERNEL_ATTR] = StringAttr("attention-transpose-k")
        outer.insert(par)
        body.add_op(scf.ReduceOp())
        b = Builder(InsertPoint.before(body.last_op))
        tile = body.args[0]
        jb = b.insert(arith.RemUIOp(tile, self.v(self.nkb))).result
        batch_ix = self.batch_of(b, b.insert(arith.DivUIOp(tile, self.v(self.nkb))).result)
        j0 = self.muli(b, jb, self.c(kb))
        base = self.muli(b, tile, self.c(E * kb))
        last = self.last(b, self.S)

        def transpose(bb: Builder, e: SSAValue):
            row = self.addi(bb, base, self.muli(bb, e, self.c(kb)))

            def col(b2: Builder, c: SSAValue):
                # past the end: a real key, masked later
                j = self.minsi(b2, self.addi(b2, j0, c), last)
                b2.insert(memref.StoreOp.get(self.load(b2, "k", [*batch_ix, j, e]), buf,
                                             [self.addi(b2, row, c)]))

            self.loop(bb, kb, col)

        self.loop(b, E, transpose)
        return buf

    def last(self, b: Builder, n) -> SSAValue:
        """n - 1 as an index value."""
        if isinstance(n, int):
            return self.c(n - 1)
        return b.insert(arith.SubiOp(n, self.c(1))).result

    def loop(self, b: Builder, n: int | SSAValue, body) -> None:
        """for x in 0..n: body(builder, x), nothing carried."""
        ub = self.c(n) if isinstance(n, int) else n

        def inner(bb: Builder, x: SSAValue, _):
            body(bb, x)
            return []

        for_loop(b, self.c(0), ub, self.c(1), [], inner)

    def for_unrolled(self, b: Builder, n: int | SSAValue, inits: list[SSAValue],
                     step) -> list[SSAValue]:
        """for x in 0..n: carried = step(builder, x, carried), K_UNROLL steps per iteration
        of a main loop, then a loop of the rest (none where n is a static multiple)."""
        u = K_UNROLL
        if isinstance(n, int):
            main = self.c(n // u * u)
        else:
            main = self.muli(b, b.insert(arith.DivUIOp(n, self.c(u))).result, self.c(u))

        def unrolled(bb: Builder, x: SSAValue, carried):
            for i in range(u):
                carried = step(bb, x if i == 0 else self.addi(bb, x, self.c(i)), carried)
            return carried

        out = list(for_loop(b, self.c(0), main, self.c(u), inits, unrolled))
        if isinstance(n, int) and n % u == 0:
            return out
        return list(for_loop(b, main, self.v(n), self.c(1), out, step))

    def key_block(self, b: Builder, j0: SSAValue, kend: SSAValue) -> None:
        """Keys j0 .. j0 + cols against every row tile of the block; their k^T tile lies at
        kt_all[(flat * nkb + j0 / kb) * E * kb ..]."""
        cols = self.minsi(b, self.c(self.kb), b.insert(arith.SubiOp(kend, j0)).result)
        kt = self.addi(b, self.kt_entry, self.muli(b, j0, self.c(self.E)))
        first = self.c(0)
        if self.op.causal is not None:  # rows above the block's first key see none of it
            skip = b.insert(arith.SubiOp(j0, self.i0)).result
            skip = b.insert(arith.MaxSIOp(skip, self.c(0))).result
            first = self.muli(b, b.insert(arith.DivUIOp(skip, self.c(self.rt))).result, self.c(self.rt))

        def tile(bb: Builder, r0: SSAValue, _):
            self.row_tile(bb, r0, j0, cols, kt)
            return []

        for_loop(b, first, self.nrows, self.c(self.rt), [], tile)

    def row_tile(self, b: Builder, r0: SSAValue, j0: SSAValue, cols: SSAValue,
                 kt: SSAValue) -> None:
        """self.rt rows (state slots r0 ..; rows past L read row L-1 and are not written)
        against one key block: scores, their scale / mask / block max, the online-softmax
        state, then the accumulators."""
        slots = [self.addi(b, r0, self.c(t)) for t in range(self.rt)]
        last = self.last(b, self.L)
        rows = [self.minsi(b, self.addi(b, self.i0, r), last) for r in slots]
        if self.op.causal is not None:
            # the tile's keys end after its last row (rows[-1] >= j0: earlier tiles were
            # skipped), not after the block's: the other tiles of the block crossing the
            # diagonal compute no scores, exps or p @ v updates that the mask would zero
            upto = self.addi(b, b.insert(arith.SubiOp(rows[-1], j0)).result, self.c(1))
            cols = self.minsi(b, cols, upto)
        # the score tile's columns past `cols`, up to the next multiple of sc, are computed
        # and masked
        cend = self.muli(b, self.ceil_div(b, cols, self.sc), self.c(self.sc))
        self.tile_scores(b, rows, cend, kt)
        maxes = self.tile_masked_max(b, rows, j0, cols, cend)
        alpha = self.tile_softmax_state(b, slots, maxes, cend)
        self.tile_accumulate(b, slots, alpha, j0, cols)

    def tile_scores(self, b: Builder, rows: list[SSAValue], cend: SSAValue, kt: SSAValue) -> None:
        """scores[t][:cend] = q_t . k^T tile (at kt_all[kt ..]), sc keys at a time: the
        rt x sc sums are values carried through the loop over e (registers, which
        LLVM's SLP vectorizer packs into vectors), one outer-product update of them per e,
        stored once."""
        zero = self.f(b, 0.0)
        sc = self.sc

        def chunk(bb: Builder, c0: SSAValue, _):
            kt0 = self.addi(bb, kt, c0)

            def per_e(b2: Builder, e: SSAValue, acc):
                qs = [self.load(b2, "q", [*self.batch_ix, rows[t], e]) for t in range(self.rt)]
                row = self.addi(b2, kt0, self.muli(b2, e, self.c(self.kb)))
                ks = [b2.insert(memref.LoadOp.get(self.kt_all, [self.addi(b2, row, self.c(c))])).res
                      for c in range(sc)]
                return [self.fma(b2, acc[t * sc + c], qs[t], ks[c], False)
                        for t in range(self.rt) for c in range(sc)]

            sums = self.for_unrolled(bb, self.E, [zero] * (self.rt * sc), per_e)
            for t in range(self.rt):
                for c in range(sc):
                    bb.insert(memref.StoreOp.get(sums[t * sc + c], self.scores,
                                                 [self.c(t), self.addi(bb, c0, self.c(c))]))
            return []

        for_loop(b, self.c(0), cend, self.c(sc), [], chunk)

    def tile_masked_max(self, b: Builder, rows: list[SSAValue], j0: SSAValue,
                        cols: SSAValue, cend: SSAValue) -> list[SSAValue]:
        """Scale and mask the scores in place; the block max per row. Row t sees the block's
        first lim_t keys (fewer past the end of k, or past the diagonal when causal); only a
        block where some row sees fewer than all of them pays for the compare."""
        op, S, kb = self.op, self.S, self.kb
        neg_inf = self.f(b, -math.inf)
        scale_c = self.f(b, op.scale_value) if op.scale_value != 1.0 else None
        fill = self.f(b, op.fill_value) if op.mask_kind in ("keep", "drop") else None
        lims = []
        for t in range(self.rt):
            lim = cols
            if op.causal is not None:
                upto = self.addi(b, b.insert(arith.SubiOp(rows[t], j0)).result, self.c(1))
                lim = self.minsi(b, lim, upto)
            lims.append(lim)
        fewest = lims[0]
        for lim in lims[1:]:
            fewest = self.minsi(b, fewest, lim)
        partial = b.insert(arith.CmpiOp(fewest, self.c(kb), "slt")).result

        def finish_loop(bb: Builder, masked: bool) -> list[SSAValue]:
            def finish(b2: Builder, c: SSAValue, acc):
                jc = self.minsi(b2, self.addi(b2, j0, c), self.last(b2, S))
                out = []
                for t in range(self.rt):
                    s = b2.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res
                    if scale_c is not None:
                        s = self.op2(b2, arith.MulfOp, s, scale_c)
                    if op.mask_kind == "add":
                        s = self.op2(b2, arith.AddfOp, s, self.load(b2, "mask", [*self.batch_ix, rows[t], jc]))
                    elif op.mask_kind in ("keep", "drop"):
                        keep = self.load(b2, "mask", [*self.batch_ix, rows[t], jc])
                        a, bsel = (s, fill) if op.mask_kind == "keep" else (fill, s)
                        s = b2.insert(arith.SelectOp(keep, a, bsel)).result
                    if masked:
                        dead = b2.insert(arith.CmpiOp(c, lims[t], "sge")).result
                        s = b2.insert(arith.SelectOp(dead, neg_inf, s)).result
                    b2.insert(memref.StoreOp.get(s, self.scores, [self.c(t), c]))
                    # nnan nsz: one vmaxps, where maximumf's NaN and signed-zero rules cost
                    # five more instructions per vector (a NaN score still reaches its row's
                    # result through exp(s - max)); reassoc: a vector reduction along c
                    out.append(self.op2(b2, arith.MaximumfOp, acc[t], s, flags=MAX_FLAGS))
                return out

            return list(for_loop(bb, self.c(0), cend, self.c(1), [neg_inf] * self.rt, finish))

        branches = []
        for masked in (True, False):
            block = Block()
            inner = Builder(InsertPoint.at_end(block))
            inner.insert(scf.YieldOp(*finish_loop(inner, masked)))
            branches.append(Region(block))
        return list(b.insert(scf.IfOp(partial, [self.ety] * self.rt, *branches)).results)

    @staticmethod
    def exp_nonpositive(b: Builder, x: SSAValue) -> SSAValue:
        """exp(x) of an x never above 0 (s - max, old max - new max; -inf and NaN may reach
        it): `afn` (results below 2^-126 flush to 0) and NONPOSITIVE_ARG (no upper clamp)."""
        e = xmath.ExpOp(x, AFN)
        e.attributes[NONPOSITIVE_ARG] = UnitAttr()
        return b.insert(e).result

    def tile_softmax_state(self, b: Builder, slots: list[SSAValue],
                           maxes: list[SSAValue], cend: SSAValue) -> list[SSAValue]:
        """Online softmax: the new running max, p = exp(s - max) in place of the scores, the
        running sums; returns each row's rescale factor exp(old max - new max)."""
        neg_inf, zero = self.f(b, -math.inf), self.f(b, 0.0)
        alpha, safe = [], []
        for t in range(self.rt):
            m_old = b.insert(memref.LoadOp.get(self.m, [slots[t]])).res
            m_new = self.op2(b, arith.MaximumfOp, m_old, maxes[t])
            is_inf = b.insert(arith.CmpfOp(m_new, neg_inf, "oeq")).result
            sf = b.insert(arith.SelectOp(is_inf, zero, m_new)).result  # an all-masked row so far
            alpha.append(self.exp_nonpositive(b, self.op2(b, arith.SubfOp, m_old, sf)))
            b.insert(memref.StoreOp.get(m_new, self.m, [slots[t]]))
            safe.append(sf)

        def exp_sum(bb: Builder, c: SSAValue, acc):
            out = []
            for t in range(self.rt):
                s = bb.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res
                p = self.exp_nonpositive(bb, self.op2(bb, arith.SubfOp, s, safe[t]))
                bb.insert(memref.StoreOp.get(p, self.scores, [self.c(t), c]))
                out.append(self.op2(bb, arith.AddfOp, acc[t], p, True))
            return out

        sums = for_loop(b, self.c(0), cend, self.c(1), [zero] * self.rt, exp_sum)
        for t in range(self.rt):
            l_old = b.insert(memref.LoadOp.get(self.l, [slots[t]])).res
            l_new = self.op2(b, arith.AddfOp, self.op2(b, arith.MulfOp, l_old, alpha[t]), sums[t])
            b.insert(memref.StoreOp.get(l_new, self.l, [slots[t]]))
        return alpha

    def tile_accumulate(self, b: Builder, slots: list[SSAValue], alpha: list[SSAValue],
                        j0: SSAValue, cols: SSAValue) -> None:
        """acc = acc * alpha + p @ v, self.sc columns of v at a time (then SCORE_COLS at a
        time, when sc is wider): the rt x width accumulators are values carried through the
        loop over the keys (registers), loaded and rescaled before it, stored after it. F's
        tail (F % SCORE_COLS columns) keeps a load / store per update."""
        F = self.F

        def chunk_of(width: int):
            def chunk(bb: Builder, f0: SSAValue, _):
                fs = [self.addi(bb, f0, self.c(f)) for f in range(width)]
                start = [self.op2(bb, arith.MulfOp, bb.insert(memref.LoadOp.get(self.acc, [slots[t], fs[f]])).res,
                                  alpha[t]) for t in range(self.rt) for f in range(width)]

                def per_key(b2: Builder, c: SSAValue, acc):
                    j = self.addi(b2, j0, c)
                    ps = [b2.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res for t in range(self.rt)]
                    vs = [self.load(b2, "v", [*self.batch_ix, j, fs[f]]) for f in range(width)]
                    return [self.fma(b2, acc[t * width + f], ps[t], vs[f], False)
                            for t in range(self.rt) for f in range(width)]

                sums = self.for_unrolled(bb, cols, start, per_key)
                for t in range(self.rt):
                    for f in range(width):
                        bb.insert(memref.StoreOp.get(sums[t * width + f], self.acc, [slots[t], fs[f]]))
                return []

            return chunk

        full = 0
        for width in dict.fromkeys((self.sc, SCORE_COLS)):
            n = (F - full) // width * width
            if n:
                for_loop(b, self.c(full), self.c(full + n), self.c(width), [], chunk_of(width))
                full += n
        if full == F:
            return

        def rescale(bb: Builder, f: SSAValue):
            for t in range(self.rt):
                a = bb.insert(memref.LoadOp.get(self.acc, [slots[t], f])).res
                bb.insert(memref.StoreOp.get(self.op2(bb, arith.MulfOp, a, alpha[t]), self.acc, [slots[t], f]))

        def tail(bb: Builder, lb: SSAValue, body) -> None:
            def inner(b2: Builder, x: SSAValue, _):
                body(b2, x)
                return []

            for_loop(bb, lb, self.c(F), self.c(1), [], inner)

        tail(b, self.c(full), rescale)

        def pv(bb: Builder, c: SSAValue):
            j = self.addi(bb, j0, c)
            ps = [bb.insert(memref.LoadOp.get(self.scores, [self.c(t), c])).res for t in range(self.rt)]

            def update(b2: Builder, f: SSAValue):
                vv = self.load(b2, "v", [*self.batch_ix, j, f])
                for t in range(self.rt):
                    a = b2.insert(memref.LoadOp.get(self.acc, [slots[t], f])).res
                    b2.insert(memref.StoreOp.get(self.fma(b2, a, ps[t], vv, False), self.acc, [slots[t], f]))

            tail(bb, self.c(full), update)

        self.loop(b, cols, pv)


def block_rows(F: int, L: int, row_tile: int = ROW_TILE) -> int:
    """Query rows per task: QUERY_BLOCK, fewer when a row's accumulator is long (the rows'
    accumulators stay within ACC_BYTES), never more than L needs; a multiple of row_tile."""
    rows = max(row_tile, min(QUERY_BLOCK, ACC_BYTES // (4 * max(F, 1))) // row_tile * row_tile)
    return min(rows, -(-L // row_tile) * row_tile)


def keys_per_block(E: int, S: int, score_cols: int = SCORE_COLS) -> int:
    """Keys per block: KEY_BLOCK, fewer when the transposed k tile would pass KT_BYTES; a
    multiple of score_cols."""
    sc = score_cols
    keys = max(sc, min(KEY_BLOCK, KT_BYTES // (4 * max(E, 1))) // sc * sc)
    return min(keys, -(-S // sc) * sc)


def lower(op: AttentionOp, row_tile: int = ROW_TILE, score_cols: int = SCORE_COLS) -> scf.ParallelOp:
    par = _Emitter(op, row_tile, score_cols).build()
    Rewriter.erase_op(op)
    return par


@dataclass(frozen=True)
class LowerAttention(ModulePass):
    """aicc_fused.attention on memrefs becomes a flash-attention loop nest."""

    name = "lower-attention"

    # the target's: with 32 vector registers (512 bits), tiles of ROW_TILE_WIDE rows x
    # SCORE_COLS_WIDE keys; else ROW_TILE x SCORE_COLS
    vector_bits: int = 256

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        wide = self.vector_bits >= 512
        row_tile = ROW_TILE_WIDE if wide else ROW_TILE
        score_cols = SCORE_COLS_WIDE if wide else SCORE_COLS
        for o in list(op.walk()):
            if isinstance(o, AttentionOp):
                if any(not isinstance(v.type, MemRefType) for v in o.operands):
                    from compiler.errors import CompileError

                    raise CompileError("lower-attention: run bufferize first (attention on tensors)")
                lower(o, row_tile, score_cols)


__all__ = ["LowerAttention", "QUERY_BLOCK", "ROW_TILE", "ROW_TILE_WIDE", "SCORE_COLS", "SCORE_COLS_WIDE",
           "KEY_BLOCK", "block_rows", "keys_per_block"]
