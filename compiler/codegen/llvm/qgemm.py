"""LLVM IR for `aicc_cpu.qgemm`: int8 GEMM rows with i16 dot products (`vpmaddwd`).

    for each pair of rows r, r+1 and group of 4 columns j..j+3 (then the odd row and columns):
        acc[i][q] = 0                                   <8 x i32>, 2 x 4 of them in registers
        for kk < k - k % 16, step 16:
            a_i = sext<16 x i16>(A[r+i, kk:kk+16]) - zp      (in [-255, 255]: no overflow)
            b_q = sext<16 x i16>(B[j+q, kk:kk+16])
            acc[i][q] += pmaddwd(a_i, b_q)              pairs of products summed into i32
        C[r+i, j+q] = reduce_add(acc[i][q]) + the scalar tail over kk >= k - k % 16

Both operands are contiguous along k (B holds the weight's rows, see quantize-matmul), so
each 16-element chunk is one `vpmovsxbw` load; a pair of products is at most 2 * 255 * 128,
far inside i32. AVX2's `vpmaddwd` does 16 multiply-adds per instruction.

The A rows of a block are converted once to i16 minus the zero point in a stack buffer that
every column tile reads. With `quantize %scale, %zp` (dynamic quantization) A is float32 and
that conversion quantizes it, 16 lanes at a time: clamp(rne(a / scale) + zp, -128, 127) - zp
(the division, as ONNX Runtime's quantizer); the buffer then holds the whole row, its tail
included, so the tiles never read A itself.

A packed B (any other constant, memref<G x K2 x 16 x i8>) gets the broadcast kernel
(`_BodyPacked`): each vpmaddwd multiplies one row's broadcast i16 pair of A by 8 columns, the
accumulators hold C's row segments (no horizontal sums) and, with a `col_scale`, the tile is
stored as float(sum) * scale[j]. On AVX2 without VNNI (Zen 3: one vpmaddwd per cycle) this is
the int8 peak, 16 multiply-adds per cycle, which the dot-product kernel above only approaches.

A B packed by quads of k with a `colsum` gets the quad kernel (`_BodyVNNI`): VNNI's vpdpbusd
on A + 128 as bytes, or, for a 7-bit B (within [-64, 64]) on AVX2, `vpmaddubsw` (u8 x s8, pair
sums exact in i16) and `vpmaddwd` by ones: 32 multiply-adds per two multiplies instead of 16
per one plus the widening of B, the same instructions as ONNX Runtime's AVX2 u8 x s8 kernel.

With `winograd` (a 3x3 stride-1 conv's window) the Winograd kernel (`_BodyWinograd`): F(2x2,
3x3) in integers, the transforms in i16 and i32 vectors and the 16 GEMMs by the broadcast
vpmaddwd kernel's tiles, 6 output tiles by 16 channels.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from compiler.codegen.llvm.emitter import FunctionEmitter, handles
from compiler.lowering.winograd import AT, BT

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
V16I8, V16I16, V8I32 = ir.VectorType(I8, 16), ir.VectorType(I16, 16), ir.VectorType(I32, 8)
V16F32, V8F32 = ir.VectorType(F32, 16), ir.VectorType(F32, 8)
CHUNK = 16
MR, NR = 2, 4


def _c(v: int, ty=I64) -> ir.Constant:
    return ir.Constant(ty, v)


@handles("aicc_cpu.qgemm")
def emit_qgemm(e: FunctionEmitter, op) -> None:
    n, k, zp = (getattr(op, p).value.data for p in ("n", "k", "zp"))
    dynamic, quads = op.scale is not None, op.colsum is not None
    scaled = op.col_scale is not None
    out = _Out(op.col_bias is not None, op.out_zp.value.data if op.requantized else None,
               op.relu is not None and op.relu.value.data) if scaled else None
    window = op.window_of()
    fn = _kernel(e, n, k, zp, dynamic, op.packed, out, op.vnni_lanes,
                 "e" if op.vnni_portable is not None else "u7" if op.pmaddubsw is not None else "", window,
                 op.winograd_tiles)
    b = e.b
    # with a window A is the padded NHWC input and a_off the first row's index
    a = e.get(op.a) if window else b.gep(e.get(op.a), [e.get(op.a_off)], inbounds=True,
                                        source_etype=F32 if dynamic else I8)
    c_ty = I8 if op.requantized else F32 if scaled else I32
    c = b.gep(e.get(op.c), [e.get(op.c_off)], inbounds=True, source_etype=c_ty)
    extra = [e.get(op.scale), e.get(op.zero_point)] if dynamic else []
    b.call(fn, [a, e.get(op.b), c, e.get(op.m), *([e.get(op.colsum)] if quads else []),
                *([e.get(op.col_scale)] if scaled else []), *([e.get(op.col_bias)] if out and out.bias else []),
                *extra, *([e.get(op.a_off)] if window else [])])


@dataclass(frozen=True)
class _Out:
    """A packed kernel's store epilogue after the column scale: an int32 bias added first, and
    requantization to i8 with a zero point (after a relu)."""

    bias: bool = False
    out_zp: int | None = None
    relu: bool = False

    def suffix(self) -> str:
        return ".s" + (".b" if self.bias else "") + ("" if self.out_zp is None else f".q{self.out_zp}") \
            + (".r" if self.relu else "")


def _kernel(e: FunctionEmitter, n: int, k: int, zp: int, dynamic: bool = False, packed: bool = False,
            out: _Out | None = None, vnni: int = 0, dot: str = "",
            window: tuple[int, ...] | None = None, winograd: int = 0) -> ir.Function:
    """`void @aicc.qgemm.<n>.<k>.<zp>(ptr a, ptr b, ptr c, i64 rows)`, once per module;
    dynamic: `@aicc.dqgemm.<n>.<k>(ptr a, ptr b, ptr c, i64 rows, float scale, float zp)`;
    B packed (`_BodyPacked`): `.p`, and with a column scale (an f32 C) `.s` and `ptr col_scale`
    after `rows` (and after the colsum), then with a column bias `.b` and `ptr col_bias`,
    requantized to i8 `.q<zp>`, after a relu `.r` (`_Out`); vnni (lanes, B packed by quads and
    a colsum, `ptr colsum` after `rows`): `.v<32 * lanes>`, then `.<dot>` for the quads'
    products without vpdpbusd, `e` portable code or `u7` vpmaddubsw (`_BodyVNNI`); with a window
    (A an NHWC input read as its im2col, see aicc_cpu.qgemm) `.w<OH>x<OW>x<KH>x<KW>x<SH>x<SW>x<DH>x
    <DW>x<HP>x<WP>` and `i64 row0` (the first row's index) last; with `winograd` (T tiles, a
    3x3 window: `_BodyWinograd`) `.wino<T>`, rows and row0 counting 2x2 output tiles."""
    module = e.em.module
    kb = (4 * -(-k // 4) if vnni else 2 * -(-k // 2)) if packed else k
    name = (f"aicc.dqgemm.{n}.{k}" if dynamic else f"aicc.qgemm.{n}.{k}.{zp}") \
        + (f".v{32 * vnni}" + (f".{dot}" if dot else "") if vnni else "") \
        + (".p" if packed else "") + (out.suffix() if out else "") \
        + (".w" + "x".join(map(str, window)) if window else "") + (f".wino{winograd}" if winograd else "")
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, I64, *([ptr] * (bool(vnni) + bool(out))),
                                                             *([ptr] if out and out.bias else []),
                                                             *([F32, F32] if dynamic else []),
                                                             *([I64] if window else [])]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
        arg.add_attribute("captures(none)")
    body = FunctionEmitter(e.em, fn)
    if winograd:
        _BodyWinograd(body, fn.args, n, k, zp, kb, out, window, winograd).emit()
    elif vnni:
        _BodyVNNI(body, fn.args, n, k, zp, kb, out, vnni, dot, window=window).emit()
    else:
        (_BodyPacked if packed else _Body)(body, fn.args, n, k, zp, kb, out, window=window).emit()
    body.b.ret_void()
    body.finish()
    return fn


class _Body:
    def __init__(self, e: FunctionEmitter, args, n: int, k: int, zp: int, kb: int, out: _Out | None = None,
                 window: tuple[int, ...] | None = None):
        self.e, self.b = e, e.b
        self.a, self.bm, self.c, self.rows = args[:4]
        args = list(args[4:])
        self.window = window  # (OH, OW, KH, KW, SH, SW, DH, DW, HP, WP): A read as an im2col
        if window:
            self.row0 = args.pop()
        args = self.extra(args)
        self.dynamic = len(args) > 0
        self.n, self.k, self.zp, self.kb = n, k, zp, kb  # kb: B's row length, k or padded
        self.padded = kb > k
        self.kv = k - k % CHUNK  # A's 16-wide conversion chunks
        self.kc = kb if self.padded else self.kv  # the tiles' vector chunks; any rest is the scalar tail
        # the i16 buffer's row: all of A's (zeros beyond k) when dynamic or padded
        self.ks = kb if self.padded else k if self.dynamic else self.kv
        module = e.em.module
        if self.dynamic:
            self.scale, self.zpf = args[:2]
            self.roundeven = module.globals.get("llvm.roundeven.v16f32") or ir.Function(
                module, ir.FunctionType(V16F32, [V16F32]), name="llvm.roundeven.v16f32")
            self.roundeven1 = module.globals.get("llvm.roundeven.f32") or ir.Function(
                module, ir.FunctionType(F32, [F32]), name="llvm.roundeven.f32")
        self.pmaddwd = module.globals.get("llvm.x86.avx2.pmadd.wd") or ir.Function(
            module, ir.FunctionType(V8I32, [V16I16, V16I16]), name="llvm.x86.avx2.pmadd.wd")
        self.reduce = module.globals.get("llvm.vector.reduce.add.v8i32") or ir.Function(
            module, ir.FunctionType(I32, [V8I32]), name="llvm.vector.reduce.add.v8i32")
        self.zp_v = ir.Constant(V16I16, [zp] * CHUNK)
        self.buffers: dict[int, ir.Value] = {}

    def extra(self, args: list) -> list:
        """The arguments after `rows` that a subclass takes first; the rest."""
        return args

    def over_k(self, convert, count: int) -> None:
        """`convert(CHUNK)` over the whole chunks of `count` elements, then `convert(1)` over its
        tail: a span of A's row converted to u8 (the quad kernels)."""
        k16 = count - count % CHUNK
        if k16:
            self.e.loop(_c(0), _c(k16), _c(CHUNK), [], convert(CHUNK), known_nonempty=True)
        if count % CHUNK:
            self.e.loop(_c(k16), _c(count), _c(1), [], convert(1), known_nonempty=True)

    def spans(self, r: ir.Value, convert) -> None:
        """`convert(src, dst, count)` for the spans of A's row r, `count` contiguous elements from
        `src` that go to the row's buffer from element `dst`: the whole row (dst 0, count k); with
        a window, r = (n, p, q) in (N, OH, OW) (after row0) and the C channels of each tap (i, j)
        of the KH x KW window, read at A[n, SH p + DH i, SW q + DW j, :] (A: the padded NHWC
        input, memref<N x HP x WP x C>) into dst = (i KW + j) C: im2col's row, never stored.
        Without dilation along W (DW = 1) the KW taps of each window row are one span of KW C."""
        b, e = self.b, self.e
        if self.window is None:
            convert(self._row(self.a, r, self.k, F32 if self.dynamic else I8), _c(0), self.k)
            return
        oh, ow, kh, kw, sh, sw, dh, dw, hp, wp = self.window
        c = self.k // (kh * kw)
        r = b.add(r, self.row0)
        img, pq = b.udiv(r, _c(oh * ow)), b.urem(r, _c(oh * ow))
        h0 = b.add(b.mul(img, _c(hp)), b.mul(b.udiv(pq, _c(ow)), _c(sh)))
        w0 = b.mul(b.urem(pq, _c(ow)), _c(sw))

        def pixel(h, w):  # A[img, h, w, 0], h counted from the image's first padded row
            return b.gep(self.a, [b.mul(b.add(b.mul(h, _c(wp)), w), _c(c))], inbounds=True, source_etype=I8)

        def tap_row(i, _):
            h = b.add(h0, b.mul(i, _c(dh)))
            if dw == 1:  # the KW taps of the window's row i lie side by side: one span
                convert(pixel(h, w0), b.mul(i, _c(kw * c)), kw * c)
                return []

            def tap(j, _):
                convert(pixel(h, b.add(w0, b.mul(j, _c(dw)))), b.mul(b.add(b.mul(i, _c(kw)), j), _c(c)), c)
                return []

            e.loop(_c(0), _c(kw), _c(1), [], tap, known_nonempty=True)
            return []

        e.loop(_c(0), _c(kh), _c(1), [], tap_row, known_nonempty=True)

    def emit(self) -> None:
        b, e = self.b, self.e
        pairs = b.sdiv(self.rows, _c(MR))
        e.loop(_c(0), pairs, _c(1), [], lambda p, _: self.row_block(b.mul(p, _c(MR)), MR) or [])
        odd = b.icmp_signed("!=", b.srem(self.rows, _c(MR)), _c(0))
        with b.if_then(odd):
            self.row_block(b.sub(self.rows, _c(1)), 1)

    def row_block(self, r0: ir.Value, mr: int) -> None:
        self.a16 = None
        if self.ks:  # the rows as i16 minus the zero point, once for all columns
            self.a16 = self.scratch(mr)
            for i in range(mr):
                self.convert_row(self.b.add(r0, _c(i)), _c(i * self.ks))
        self.column_tiles(r0, mr)

    def convert_row(self, r: ir.Value, at0: ir.Value) -> None:
        """A's row r as i16 minus the zero point (quantized first when dynamic) into the buffer
        from element at0: 16-wide chunks of each span, then, where the buffer holds them, its tail
        one by one, and zeros up to B's padded row length."""
        b = self.b
        self.spans(r, lambda src, dst, count: self.convert_span(src, b.add(at0, dst), count))
        self.zero_pad(at0, I16)

    def convert_span(self, row: ir.Value, at0: ir.Value, count: int) -> None:
        """`count` elements of A from `row` into the buffer from element at0 (see convert_row)."""
        e, b = self.e, self.b
        kv = count - count % CHUNK

        def convert(kk, _):
            if self.dynamic:
                v = self.quantize(b.load(b.gep(row, [kk], inbounds=True, source_etype=F32), typ=V16F32, align=4),
                                  V16F32, V16I16)
            else:
                v = b.sub(b.sext(b.load(b.gep(row, [kk], inbounds=True, source_etype=I8), typ=V16I8, align=1),
                                 V16I16), self.zp_v)
            b.store(v, b.gep(self.a16, [b.add(at0, kk)], inbounds=True, source_etype=I16), align=2)
            return []

        def convert_tail(kk, _):
            if self.dynamic:
                v = self.quantize(b.load(b.gep(row, [kk], inbounds=True, source_etype=F32), typ=F32), F32, I16)
            else:
                v = b.sub(b.sext(b.load(b.gep(row, [kk], inbounds=True, source_etype=I8), typ=I8), I16),
                          _c(self.zp, I16))
            b.store(v, b.gep(self.a16, [b.add(at0, kk)], inbounds=True, source_etype=I16), align=2)
            return []

        if kv:
            e.loop(_c(0), _c(kv), _c(CHUNK), [], convert, known_nonempty=True)
        if self.ks >= self.k and count > kv:  # the buffer holds the tail
            e.loop(_c(kv), _c(count), _c(1), [], convert_tail, known_nonempty=True)

    def zero_pad(self, at0: ir.Value, ety) -> None:
        """Zeros in a row of the buffer (from element at0) beyond k, up to B's padded row length."""
        if not self.padded:
            return
        b = self.b

        def body(kk, _):
            b.store(ir.Constant(ety, 0), b.gep(self.a16, [b.add(at0, kk)], inbounds=True, source_etype=ety))
            return []

        self.e.loop(_c(self.k), _c(self.kb), _c(1), [], body, known_nonempty=True)

    def column_tiles(self, r0: ir.Value, mr: int) -> None:
        """The row block's tiles: NR columns at a time, then the columns left one by one."""
        e, groups = self.e, self.n // NR
        if groups:
            e.loop(_c(0), _c(groups), _c(1), [],
                   lambda q, _: self.tile(r0, self.b.mul(q, _c(NR)), mr, NR) or [])
        if self.n % NR:
            e.loop(_c(groups * NR), _c(self.n), _c(1), [], lambda j, _: self.tile(r0, j, mr, 1) or [])

    def quantize(self, x: ir.Value, fty, ity, shift: bool = True) -> ir.Value:
        """clamp(rne(x / scale) + zp, -128, 127) - zp as ity (x float32, or 16 lanes of it);
        without `shift`, not minus zp."""
        b = self.b
        lanes = fty.count if isinstance(fty, ir.VectorType) else None

        def splat(v):
            if lanes is None:
                return v
            return b.shuffle_vector(b.insert_element(ir.Constant(fty, ir.Undefined), v, _c(0, I32)),
                                    ir.Constant(fty, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

        def const(v):
            return ir.Constant(fty, [v] * lanes) if lanes else ir.Constant(F32, v)

        zp = splat(self.zpf)
        q = b.call(self.roundeven if lanes else self.roundeven1, [b.fdiv(x, splat(self.scale))])
        q = b.fadd(q, zp)
        lo, hi = const(-128.0), const(127.0)
        q = b.select(b.fcmp_ordered("<", q, lo), lo, q)
        q = b.select(b.fcmp_ordered(">", q, hi), hi, q)
        return b.fptosi(b.fsub(q, zp) if shift else q, ity)

    scratch_ety = I16  # the row buffer's elements: A's rows as i16 minus the zero point

    def scratch(self, mr: int) -> ir.Value:
        """An entry-block stack buffer of mr * ks scratch_ety (one per row count, reused)."""
        buf = self.buffers.get(mr)
        if buf is None:
            buf = self.buffers[mr] = self.stack_buffer(self.scratch_ety, mr * self.ks)
        return buf

    def stack_buffer(self, ety, count: int) -> ir.Value:
        """An entry-block stack array of `count` ety, 32-byte aligned."""
        buf = self.e.alloca_builder.alloca(ir.ArrayType(ety, count))
        buf.align = 32
        buf.type = ir.PointerType()  # opaque, as the emitter's pointers are
        return buf

    def splat(self, v: ir.Value, vty) -> ir.Value:
        """The scalar v in every lane of a vty."""
        b, lanes = self.b, vty.count
        return b.shuffle_vector(b.insert_element(ir.Constant(vty, ir.Undefined), v, _c(0, I32)),
                                ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def _row(self, base: ir.Value, row: ir.Value, ld: int, ety) -> ir.Value:
        return self.b.gep(base, [self.b.mul(row, _c(ld), flags=["nsw"])], inbounds=True, source_etype=ety)

    def tile(self, r0: ir.Value, j0: ir.Value, mr: int, nr: int) -> None:
        b, e = self.b, self.e
        a_rows = [self._row(self.a, b.add(r0, _c(i)), self.k, I8) for i in range(mr)]
        b_rows = [self._row(self.bm, b.add(j0, _c(q)), self.kb, I8) for q in range(nr)]
        zero = ir.Constant(V8I32, None)

        def chunk(kk, accs):
            def load(row):
                p = b.gep(row, [kk], inbounds=True, source_etype=I8)
                return b.sext(b.load(p, typ=V16I8, align=1), V16I16)
            av = [b.load(b.gep(self.a16, [b.add(_c(i * self.ks), kk)], inbounds=True, source_etype=I16),
                         typ=V16I16, align=2) for i in range(mr)]
            bv = [load(r) for r in b_rows]
            return [b.add(accs[i * nr + q], b.call(self.pmaddwd, [av[i], bv[q]]))
                    for i in range(mr) for q in range(nr)]

        accs = [zero] * (mr * nr)
        if self.kc:
            accs = e.loop(_c(0), _c(self.kc), _c(CHUNK), accs, chunk, known_nonempty=True)
        sums = [b.call(self.reduce, [v]) for v in accs]
        if self.kc < self.k:
            def tail(kk, carried):
                def elem(row):
                    return b.sext(b.load(b.gep(row, [kk], inbounds=True, source_etype=I8), typ=I8), I32)
                if self.dynamic:  # the buffer holds the tail too
                    av = [b.sext(b.load(b.gep(self.a16, [b.add(_c(i * self.ks), kk)], inbounds=True,
                                              source_etype=I16), typ=I16), I32) for i in range(mr)]
                else:
                    av = [b.sub(elem(r), _c(self.zp, I32)) for r in a_rows]
                bv = [elem(r) for r in b_rows]
                return [b.add(carried[i * nr + q], b.mul(av[i], bv[q]))
                        for i in range(mr) for q in range(nr)]
            sums = e.loop(_c(self.kc), _c(self.k), _c(1), sums, tail, known_nonempty=True)
        for i in range(mr):
            c_row = self._row(self.c, b.add(r0, _c(i)), self.n, I32)
            for q in range(nr):
                b.store(sums[i * nr + q], b.gep(c_row, [b.add(j0, _c(q))], inbounds=True, source_etype=I32),
                        align=4)


V32I8 = ir.VectorType(I8, 32)


PACK_COLS, PACK_ROWS = 8, 8  # a packed B's column groups; the rows converted at a time
TILE_ROWS = 4


class _BodyPacked(_Body):
    """B packed by lower-qgemm, memref<G x K2 x 16 x i8> (G = ceil(n / 8) groups of 8
    columns, K2 = ceil(k / 2) pairs of k, zeros beyond n and k): Bp[g, p] holds columns
    8g..8g+7, each its pair (B[j, 2p], B[j, 2p + 1]). Then for a tile of up to 4 rows by 16
    columns (two groups), per pair p:

        a_i = broadcast of A's i16 pair (a[i, 2p], a[i, 2p + 1]) to 8 lanes
        acc[i][h] += pmaddwd(a_i, Bp[g + h, p])       8 columns of row i, two products each

    (Bp[g + h, p] sign-extended to i16 as it is loaded, one vpmovsxbw), so the accumulators
    hold C's row segments as they are stored: no horizontal sums. The A rows of a block of 8
    are converted (as `_Body`, zeros beyond k) before the column loop, and each 16-column
    panel of B (16 * k bytes) stays in L1 across the block's tiles; B stays int8 so that a wide
    layer's, streamed from L2 or L3 once per block, costs half the bytes of an i16 copy."""

    def __init__(self, e: FunctionEmitter, args, n: int, k: int, zp: int, kb: int, out: _Out | None = None,
                 window: tuple[int, ...] | None = None):
        self.out = out
        self.scaled = out is not None
        self.requant = out is not None and out.out_zp is not None
        self.width = PACK_COLS  # the columns of one group: one vector of C
        super().__init__(e, args, n, k, zp, kb, window=window)
        self.ks = kb  # the whole (even) row
        self.k2, self.groups = kb // 2, -(-n // PACK_COLS)
        module = e.em.module
        self.c_ety = I8 if self.requant else F32 if self.scaled else I32
        ety = ir.VectorType(self.c_ety, 8)
        name = f"llvm.masked.store.v8{'i8' if self.requant else 'f32' if self.scaled else 'i32'}.p0"
        self.masked_store = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(ir.VoidType(), [ety, ir.PointerType(), I32, ir.VectorType(ir.IntType(1), 8)]),
            name=name)

    def extra(self, args: list) -> list:
        if self.scaled:
            self.col_scale = args[0]
            if self.out.bias:
                self.col_bias = args[1]
                return args[2:]
            return args[1:]
        return args

    def emit(self) -> None:
        b, e = self.b, self.e
        self.a16 = self.scratch(PACK_ROWS)
        blocks = b.sdiv(b.add(self.rows, _c(PACK_ROWS - 1)), _c(PACK_ROWS))

        def block(blk, _):
            r0 = b.mul(blk, _c(PACK_ROWS))
            left = b.sub(self.rows, r0)
            mr = b.select(b.icmp_signed("<", left, _c(PACK_ROWS)), left, _c(PACK_ROWS))
            e.loop(_c(0), mr, _c(1), [], lambda i, _: self.convert_row(b.add(r0, i), b.mul(i, _c(self.ks))) or [],
                   known_nonempty=True)
            pairs = self.groups // 2
            if pairs:
                e.loop(_c(0), _c(pairs), _c(1), [], lambda q, _: self.panel(r0, mr, b.mul(q, _c(2)), 2) or [])
            if self.groups % 2:
                self.panel(r0, mr, _c(self.groups - 1), 1)
            return []

        e.loop(_c(0), blocks, _c(1), [], block)

    def panel(self, r0: ir.Value, mr: ir.Value, g: ir.Value, ng: int) -> None:
        """The block's rows by groups g .. g + ng - 1: tiles of 4 rows, then the 1 to 3 left."""
        b, e = self.b, self.e
        full = b.sdiv(mr, _c(TILE_ROWS))
        e.loop(_c(0), full, _c(1), [], lambda t, _: self.tile4(r0, b.mul(t, _c(TILE_ROWS)), g, ng, TILE_ROWS) or [])
        rest = b.srem(mr, _c(TILE_ROWS))
        start = b.mul(full, _c(TILE_ROWS))
        for tr in range(1, TILE_ROWS):
            with b.if_then(b.icmp_signed("==", rest, _c(tr))):
                self.tile4(r0, start, g, ng, tr)

    def tile4(self, r0: ir.Value, i0: ir.Value, g: ir.Value, ng: int, tr: int) -> None:
        """Rows r0 + i0 .. + tr - 1 (buffer rows i0 ..) by column groups g .. g + ng - 1."""
        b, e = self.b, self.e
        b_base = [b.mul(b.add(g, _c(h)), _c(self.k2 * 16)) for h in range(ng)]
        a_base = [b.mul(b.add(i0, _c(i)), _c(self.ks)) for i in range(tr)]

        def pair(p, accs):
            bv = [b.sext(b.load(b.gep(self.bm, [b.add(base, b.mul(p, _c(16)))], inbounds=True, source_etype=I8),
                                typ=V16I8, align=1), V16I16) for base in b_base]
            out = []
            for i in range(tr):
                at = b.add(a_base[i], b.mul(p, _c(2)))
                word = b.load(b.gep(self.a16, [at], inbounds=True, source_etype=I16), typ=I32, align=4)
                av = b.bitcast(self.splat(word, V8I32), V16I16)
                out += [b.add(accs[i * ng + h], b.call(self.pmaddwd, [av, bv[h]])) for h in range(ng)]
            return out

        accs = e.loop(_c(0), _c(self.k2), _c(1), [ir.Constant(V8I32, None)] * (tr * ng), pair, known_nonempty=True,
                      unroll=False)
        cols = [b.mul(b.add(g, _c(h)), _c(PACK_COLS)) for h in range(ng)]
        self.store_tile(accs, r0, i0, cols, tr, ng)

    def store_tile(self, accs: list[ir.Value], r0: ir.Value, i0: ir.Value, cols: list[ir.Value],
                   tr: int, ng: int, rows: list[ir.Value] | None = None) -> None:
        """The tile's int32 sums (row i, group h: accs[i * ng + h], `width` columns from
        cols[h]) stored into C's rows r0 + i0 + i (or rows[i]), through the epilogue `out`."""
        b, w = self.b, self.width
        if self.scaled:  # C = float32(sum [+ col_bias[j]]) * col_scale[j] [requantized]
            scales = [self.column(self.col_scale, col, F32) for col in cols]
            if self.out.bias:
                bias = [self.column(self.col_bias, col, I32) for col in cols]
                accs = [b.add(accs[i * ng + h], bias[h]) for i in range(tr) for h in range(ng)]
            vf32 = ir.VectorType(F32, w)
            accs = [b.fmul(b.sitofp(accs[i * ng + h], vf32), scales[h]) for i in range(tr) for h in range(ng)]
            if self.requant:
                accs = [self.requantize(v) for v in accs]
        for i in range(tr):
            c_row = self._row(self.c, rows[i] if rows else b.add(r0, b.add(i0, _c(i))), self.n, self.c_ety)
            for h, col in enumerate(cols):
                ptr = b.gep(c_row, [col], inbounds=True, source_etype=self.c_ety)
                align = 1 if self.requant else 4
                if self.n % w == 0:
                    b.store(accs[i * ng + h], ptr, align=align)
                    continue
                b.call(self.masked_store, [accs[i * ng + h], ptr, _c(align, I32), self.mask(col)])

    def mask(self, col: ir.Value) -> ir.Value:
        """The lanes of the 8 columns from `col` that lie within n (the last group: n % 8)."""
        b, v8i64 = self.b, ir.VectorType(I64, 8)
        return b.icmp_signed("<", ir.Constant(v8i64, list(range(8))), self.splat(b.sub(_c(self.n), col), v8i64))

    def column(self, base: ir.Value, col: ir.Value, ety) -> ir.Value:
        """base[col .. col + 7] (f32 or i32), zeros beyond n."""
        b, module = self.b, self.e.em.module
        w = self.width
        vty = ir.VectorType(ety, w)
        ptr = b.gep(base, [col], inbounds=True, source_etype=ety)
        if self.n % w == 0:
            return b.load(ptr, typ=vty, align=4)
        name = f"llvm.masked.load.v{w}{'f32' if ety == F32 else 'i32'}.p0"
        load = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(vty, [ir.PointerType(), I32, ir.VectorType(ir.IntType(1), w), vty]), name=name)
        return b.call(load, [ptr, _c(4, I32), self.mask(col), ir.Constant(vty, None)])

    def requantize(self, v: ir.Value) -> ir.Value:
        """<w x f32> scaled sums to <w x i8>: [max(v, 0)], rounded half to even, plus the zero
        point, clamped to [-128, 127] (exact integers in float32 until the conversion)."""
        b, w = self.b, v.type.count
        name = f"llvm.roundeven.v{w}f32"
        roundeven = self.e.em.module.globals.get(name) or ir.Function(
            self.e.em.module, ir.FunctionType(v.type, [v.type]), name=name)

        def splat(x: float) -> ir.Constant:
            return ir.Constant(v.type, [x] * w)

        def bound(v, x, pred):
            return b.select(b.fcmp_ordered(pred, v, splat(x)), splat(x), v)

        if self.out.relu:
            v = bound(v, 0.0, "<")
        v = b.fadd(b.call(roundeven, [v]), splat(float(self.out.out_zp)))
        v = bound(bound(v, -128.0, "<"), 127.0, ">")
        # Straight to i8 (exact: v is an integer in [-128, 127]), not fptosi to i32 and a
        # trunc: on AVX-512 targets LLVM folds that trunc into the masked store (vpmovdb) and,
        # where the mask keeps one lane (n % w == 1, the last group), stores that lane's whole
        # i32 (vmovss), overwriting the next row's first three bytes.
        return b.fptosi(v, ir.VectorType(I8, w))


class _BodyVNNI(_BodyPacked):
    """VNNI's `vpdpbusd` (u8 x s8, four products summed into each i32 lane and added to it,
    without saturation: exact), L = 8 (ymm) or 16 (zmm) lanes. B is packed by lower-qgemm
    by quads of k, memref<G x K4 x 4L x i8>: Bp[g, p, 4c + t] = B[Lg + c, 4p + t], zeros
    beyond n and k, so that lane c of the i32 vector Bp[g, p] holds column Lg + c's quad p.
    The row buffer holds A + 128 as bytes (uint8; the dynamic kernel quantizes as it fills
    it), zeros beyond k up to 4 * K4. Then for a tile of up to 4 rows by 2L columns, per quad p:

        a_i = broadcast of A's 4 bytes (a[i, 4p .. 4p + 3] + 128) to the L lanes
        acc[i][h] = vpdpbusd(acc[i][h], a_i, Bp[g + h, p])     L columns of row i, 4 products each

    and at the end C = acc - (zp + 128) * colsum[j], since sum_k (a - zp) b = sum_k (a + 128) b -
    (zp + 128) sum_k b (colsum is padded to G * L with zeros). An int32 sum of u8 x s8 products
    is exact for k < 2^31 / (255 * 128), as the int32 result itself must be. With `portable`,
    the same sums by generic vector code: bytes widened to i32, multiplied, quads summed by
    shuffles (`dot` "e": what a CPU without VNNI runs, for tests). With `dot` "u7" (8 lanes, a B
    within [-64, 64]), vpmaddubsw and vpmaddwd by ones on AVX2 (see aicc_cpu.qgemm)."""

    scratch_ety = I8  # A + 128 as bytes

    def __init__(self, e: FunctionEmitter, args, n: int, k: int, zp: int, kb: int, out: _Out | None,
                 lanes: int, dot: str = "", window: tuple[int, ...] | None = None):
        self.out, self.lanes, self.portable, self.u7 = out, lanes, dot == "e", dot == "u7"
        self.scaled = out is not None
        self.requant = out is not None and out.out_zp is not None
        self.width = lanes
        _Body.__init__(self, e, args, n, k, zp, kb, window=window)
        self.ks = kb  # 4 * K4 bytes per row
        self.k2, self.groups = kb // 4, -(-n // lanes)  # k2: the quads of k
        self.vi32, self.vf32 = ir.VectorType(I32, lanes), ir.VectorType(F32, lanes)
        self.vbool = ir.VectorType(ir.IntType(1), lanes)
        module = e.em.module
        self.c_ety = I8 if self.requant else F32 if self.scaled else I32
        ety = ir.VectorType(self.c_ety, lanes)
        name = f"llvm.masked.store.v{lanes}{'i8' if self.requant else 'f32' if self.scaled else 'i32'}.p0"
        self.masked_store = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(ir.VoidType(), [ety, ir.PointerType(), I32, self.vbool]), name=name)
        name = f"llvm.x86.avx512.vpdpbusd.{32 * lanes}"  # AVX-VNNI's too (LLVM picks the VEX form)
        self.vpdpbusd = None if dot else module.globals.get(name) or ir.Function(
            module, ir.FunctionType(self.vi32, [self.vi32] * 3), name=name)
        if self.u7:
            self.pmaddubsw = module.globals.get("llvm.x86.avx2.pmadd.ub.sw") or ir.Function(
                module, ir.FunctionType(V16I16, [V32I8, V32I8]), name="llvm.x86.avx2.pmadd.ub.sw")
            self.ones = ir.Constant(V16I16, [1] * 16)

    def extra(self, args: list) -> list:
        self.colsum = args[0]
        return _BodyPacked.extra(self, args[1:])

    def to_u8(self, x: ir.Value, width: int) -> ir.Value:
        """A's held int8 values (or its floats quantized) plus 128, as bytes."""
        b = self.b
        if not self.dynamic:
            flip = ir.Constant(ir.VectorType(I8, width), [-128] * width) if width > 1 else ir.Constant(I8, -128)
            return b.xor(x, flip)  # v + 128 mod 256: the uint8 bit pattern
        ity = ir.VectorType(I32, width) if width > 1 else I32
        q = self.quantize(x, x.type, ity, shift=False)
        q = b.add(q, ir.Constant(ity, [128] * width) if width > 1 else ir.Constant(I32, 128))
        return b.trunc(q, ir.VectorType(I8, width) if width > 1 else I8)

    def convert_row(self, r: ir.Value, at0: ir.Value) -> None:
        """A's row r + 128 as bytes into the buffer from byte at0: each span 16 at a time, its
        tail one by one, then zeros up to the whole quads."""
        b = self.b
        ety = F32 if self.dynamic else I8

        def span(row, dst, count):
            def convert(width):
                def body(kk, _):
                    ptr = b.gep(row, [kk], inbounds=True, source_etype=ety)
                    x = b.load(ptr, typ=ir.VectorType(ety, width) if width > 1 else ety,
                               align=4 if self.dynamic else 1)
                    at = b.add(b.add(at0, dst), kk)
                    b.store(self.to_u8(x, width), b.gep(self.a16, [at], inbounds=True, source_etype=I8), align=1)
                    return []
                return body

            self.over_k(convert, count)

        self.spans(r, span)
        for kk in range(self.k, self.ks):
            b.store(ir.Constant(I8, 0), b.gep(self.a16, [b.add(at0, _c(kk))], inbounds=True, source_etype=I8))

    def dot(self, acc: ir.Value, a: ir.Value, bv: ir.Value) -> ir.Value:
        """acc + the sums of a's unsigned by bv's signed byte quads, lane by lane."""
        b, lanes = self.b, self.lanes
        if self.u7:
            pairs = b.call(self.pmaddubsw, [b.bitcast(a, V32I8), b.bitcast(bv, V32I8)])
            return b.add(acc, b.call(self.pmaddwd, [pairs, self.ones]))
        if not self.portable:
            return b.call(self.vpdpbusd, [acc, a, bv])
        wide, bytes_ = ir.VectorType(I32, 4 * lanes), ir.VectorType(I8, 4 * lanes)
        prod_ = b.mul(b.zext(b.bitcast(a, bytes_), wide), b.sext(b.bitcast(bv, bytes_), wide))
        for t in range(4):
            part = b.shuffle_vector(prod_, ir.Constant(wide, ir.Undefined),
                                    ir.Constant(ir.VectorType(I32, lanes), [4 * c + t for c in range(lanes)]))
            acc = b.add(acc, part)
        return acc

    def tile4(self, r0: ir.Value, i0: ir.Value, g: ir.Value, ng: int, tr: int) -> None:
        """Rows r0 + i0 .. + tr - 1 (buffer rows i0 ..) by column groups g .. g + ng - 1."""
        b, e, lanes = self.b, self.e, self.lanes
        row_bytes = self.k2 * 4 * lanes  # one group's quads
        b_base = [b.mul(b.add(g, _c(h)), _c(row_bytes)) for h in range(ng)]
        a_base = [b.mul(b.add(i0, _c(i)), _c(self.ks)) for i in range(tr)]

        def quad(p, accs):
            bv = [b.load(b.gep(self.bm, [b.add(base, b.mul(p, _c(4 * lanes)))], inbounds=True, source_etype=I8),
                         typ=self.vi32, align=1) for base in b_base]
            out = []
            for i in range(tr):
                at = b.add(a_base[i], b.mul(p, _c(4)))
                word = b.load(b.gep(self.a16, [at], inbounds=True, source_etype=I8), typ=I32, align=1)
                av = self.splat(word, self.vi32)
                out += [self.dot(accs[i * ng + h], av, bv[h]) for h in range(ng)]
            return out

        accs = e.loop(_c(0), _c(self.k2), _c(1), [ir.Constant(self.vi32, None)] * (tr * ng), quad,
                      known_nonempty=True, unroll=False)
        cols = [b.mul(b.add(g, _c(h)), _c(lanes)) for h in range(ng)]
        zu = self.splat(b.add(b.fptosi(self.zpf, I32), _c(128, I32)), self.vi32) if self.dynamic \
            else ir.Constant(self.vi32, [self.zp + 128] * lanes)
        fixes = [b.mul(zu, b.load(b.gep(self.colsum, [col], inbounds=True, source_etype=I32), typ=self.vi32,
                                  align=4)) for col in cols]
        accs = [b.sub(accs[i * ng + h], fixes[h]) for i in range(tr) for h in range(ng)]
        self.store_tile(accs, r0, i0, cols, tr, ng)

    def mask(self, col: ir.Value) -> ir.Value:
        """The lanes of the L columns from `col` that lie within n."""
        vi64 = ir.VectorType(I64, self.lanes)
        return self.b.icmp_signed("<", ir.Constant(vi64, list(range(self.lanes))),
                                  self.splat(self.b.sub(_c(self.n), col), vi64))


# F(2x2, 3x3)'s input and output transforms (integers: +-1 and 0)
WINO_BT = tuple(tuple(int(v) for v in row) for row in BT)
WINO_AT = tuple(tuple(int(v) for v in row) for row in AT)
WINO_MR = 6  # tiles per register block: 6 x 2 groups of i32 accumulators, 2 of U, 1 broadcast


class _BodyWinograd(_BodyPacked):
    """A 3x3 stride-1 int8 conv as Winograd's F(2x2, 3x3) in integers (`winograd = T`, see
    aicc_cpu.qgemm): the kernel takes `rows` = m tiles from tile row0 of (N, ceil(OH/2),
    ceil(OW/2)), at most T, and for them

        V[ab, t, c] = (Bt (d_t[c] - zp) B)[a, b]            the 4x4 window d_t, 16 (8) channels at once
        for each 16 output channels j (2 groups of 8; the last group alone):
          M[ab, t, j] = sum_c V[ab, t, c] U[ab, j, c]       16 GEMMs of T x C by C x 16, vpmaddwd
          C[tile t's 4 pixels, j] = epilogue((At M[., t, j] A) >> 2)

    V (16 T C i16) and M (16 T 16 i32) are stack buffers, sized to stay near L1 (T from
    lower-qgemm); each GEMM is `_BodyPacked`'s broadcast kernel (one tile's i16 pair of V
    broadcast, times 8 output channels of U's pair, per vpmaddwd), 6 tiles by 16 channels in
    registers. V's entries are sums of 4 values |x - zp| <= 255 (i16); U's, of 9 products of G'
    entries (|row sum| <= 3) with the weight (|w| <= 128): 1152 at most (i16). The output
    transform adds and subtracts i32 sums that may wrap, but integer arithmetic modulo 2^32 keeps
    the identity At M A = 4 * (the conv's sum), which fits i32 (WINOGRAD_MAX_CHANNELS): the
    shift is exact, and the result is the direct kernel's bit for bit. F(2x2, 3x3) takes 16
    products per 4 outputs and channel pair where the direct conv takes 36: on AVX2 without
    VNNI, where i16 and u8 x s8 dot products both give 16 multiply-adds per instruction, 2.25x
    fewer."""

    def __init__(self, e: FunctionEmitter, args, n: int, k: int, zp: int, kb: int, out: _Out | None,
                 window: tuple[int, ...], tiles: int):
        super().__init__(e, args, n, k, zp, kb, out, window=window)
        self.cin = k // 9
        self.tb = tiles
        self.cw = CHUNK if self.cin % CHUNK == 0 else 8  # the input transform's channels at a time
        self.k2 = self.cin // 2
        self.oh, self.ow = window[0], window[1]
        self.th, self.tw, self.hp, self.wp = -(-self.oh // 2), -(-self.ow // 2), window[8], window[9]

    def clamp(self, v: ir.Value, n: int) -> ir.Value:
        """min(v, n - 1)."""
        return self.b.select(self.b.icmp_signed("<", v, _c(n - 1)), v, _c(n - 1))

    def tile_of(self, t: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(image, tile row, tile column) of tile row0 + t."""
        b = self.b
        t = b.add(t, self.row0)
        per = self.th * self.tw
        img, rest = b.udiv(t, _c(per)), b.urem(t, _c(per))
        return img, b.udiv(rest, _c(self.tw)), b.urem(rest, _c(self.tw))

    def emit(self) -> None:
        b, e = self.b, self.e
        self.v = self.stack_buffer(I16, 16 * self.tb * self.cin)
        self.mbuf = self.stack_buffer(I32, 16 * self.tb * 2 * PACK_COLS)
        e.loop(_c(0), self.rows, _c(1), [], lambda t, _: self.transform_input(t) or [], known_nonempty=True)
        pairs = self.groups // 2
        if pairs:
            e.loop(_c(0), _c(pairs), _c(1), [], lambda q, _: self.columns(b.mul(q, _c(2)), 2) or [])
        if self.groups % 2:
            self.columns(_c(self.groups - 1), 1)

    def transform_input(self, t: ir.Value) -> None:
        """V[ab, t, :] = (Bt (d - zp) B)[a, b] over the tile's 4x4 window d, cw channels at a time."""
        b, e, cw = self.b, self.e, self.cw
        img, ty, tx = self.tile_of(t)
        h0, w0 = b.mul(ty, _c(2)), b.mul(tx, _c(2))
        # the window's rows and columns; under an odd OH (OW) the last tile's fourth row (column)
        # lies beyond the input, and reads the last one instead: whatever it holds, the exact
        # integer transforms cancel it from the tile's first output row (column), and its
        # second one is not stored
        hs = [self.clamp(b.add(h0, _c(i)), self.hp) if 2 * self.th + 2 > self.hp else b.add(h0, _c(i))
              for i in range(4)]
        ws = [self.clamp(b.add(w0, _c(j)), self.wp) if 2 * self.tw + 2 > self.wp else b.add(w0, _c(j))
              for j in range(4)]
        img0 = b.mul(img, _c(self.hp))
        lines = [b.mul(b.add(img0, h), _c(self.wp)) for h in hs]  # the window rows' first pixels
        vi8, vi16 = ir.VectorType(I8, cw), ir.VectorType(I16, cw)
        zp = ir.Constant(vi16, [self.zp] * cw)

        def chunk(c, _):
            def load(i, j):
                at = b.add(b.mul(b.add(lines[i], ws[j]), _c(self.cin)), c)
                p = b.gep(self.a, [at], inbounds=True, source_etype=I8)
                return b.sub(b.sext(b.load(p, typ=vi8, align=1), vi16), zp)

            d = [[load(i, j) for j in range(4)] for i in range(4)]
            rows = [[_combine(b, coeffs, [d[i][j] for i in range(4)]) for j in range(4)] for coeffs in WINO_BT]
            for a_, row in enumerate(rows):
                for b_, coeffs in enumerate(WINO_BT):
                    v = _combine(b, coeffs, row)
                    at = b.add(b.mul(b.add(_c((4 * a_ + b_) * self.tb), t), _c(self.cin)), c)
                    b.store(v, b.gep(self.v, [at], inbounds=True, source_etype=I16), align=2)
            return []

        e.loop(_c(0), _c(self.cin), _c(cw), [], chunk, known_nonempty=True)

    def columns(self, g: ir.Value, ng: int) -> None:
        """Output channel groups g .. g + ng - 1 of every tile: the 16 GEMMs into M, then the
        output transform and the epilogue."""
        b, e = self.b, self.e
        blocks = b.sdiv(b.add(self.rows, _c(WINO_MR - 1)), _c(WINO_MR))

        def position(ab, _):
            def block(rb, _):
                self.gemm(ab, b.mul(rb, _c(WINO_MR)), g, ng)
                return []
            e.loop(_c(0), blocks, _c(1), [], block, known_nonempty=True)
            return []

        e.loop(_c(0), _c(16), _c(1), [], position, known_nonempty=True)
        e.loop(_c(0), self.rows, _c(1), [], lambda t, _: self.transform_output(t, g, ng) or [], known_nonempty=True)

    def gemm(self, ab: ir.Value, t0: ir.Value, g: ir.Value, ng: int) -> None:
        """M[ab, t0 .. t0 + 5, groups] = V[ab, t0 .. t0 + 5, :] by U[ab, groups] (tiles beyond
        `rows` compute from whatever V holds there and are never read)."""
        b, e = self.b, self.e
        u_base = [b.mul(b.add(b.mul(ab, _c(self.groups)), b.add(g, _c(h))), _c(self.k2 * 16)) for h in range(ng)]
        v_base = [b.mul(b.add(b.mul(ab, _c(self.tb)), b.add(t0, _c(i))), _c(self.cin)) for i in range(WINO_MR)]

        def pair(p, accs):
            uv = [b.load(b.gep(self.bm, [b.add(base, b.mul(p, _c(16)))], inbounds=True, source_etype=I16),
                         typ=V16I16, align=2) for base in u_base]
            out = []
            for i in range(WINO_MR):
                word = b.load(b.gep(self.v, [b.add(v_base[i], b.mul(p, _c(2)))], inbounds=True, source_etype=I16),
                              typ=I32, align=4)
                av = b.bitcast(self.splat(word, V8I32), V16I16)
                out += [b.add(accs[i * ng + h], b.call(self.pmaddwd, [av, uv[h]])) for h in range(ng)]
            return out

        accs = e.loop(_c(0), _c(self.k2), _c(1), [ir.Constant(V8I32, None)] * (WINO_MR * ng), pair,
                      known_nonempty=True, unroll=False)
        for i in range(WINO_MR):
            row = b.mul(b.add(b.mul(ab, _c(self.tb)), b.add(t0, _c(i))), _c(2 * PACK_COLS))
            for h in range(ng):
                b.store(accs[i * ng + h], b.gep(self.mbuf, [b.add(row, _c(h * PACK_COLS))], inbounds=True,
                                                source_etype=I32), align=32)

    def transform_output(self, t: ir.Value, g: ir.Value, ng: int) -> None:
        """Tile t's 2x2 pixels of groups g ..: (At M A) >> 2, through the epilogue into C."""
        b = self.b
        img, ty, tx = self.tile_of(t)
        oh, ow = self.oh, self.ow
        r00 = b.add(b.add(b.mul(img, _c(oh * ow)), b.mul(ty, _c(2 * ow))), b.mul(tx, _c(2)))
        rows = [r00, b.add(r00, _c(1)), b.add(r00, _c(ow)), b.add(r00, _c(ow + 1))]
        two = ir.Constant(V8I32, [2] * 8)
        ys: list[list[ir.Value]] = [[], [], [], []]
        for h in range(ng):
            m = [[b.load(b.gep(self.mbuf, [b.add(b.mul(b.add(_c((4 * a_ + b_) * self.tb), t), _c(2 * PACK_COLS)),
                                                 _c(h * PACK_COLS))], inbounds=True, source_etype=I32),
                         typ=V8I32, align=32) for b_ in range(4)] for a_ in range(4)]
            half = [[_combine(b, coeffs, [m[a_][b_] for a_ in range(4)]) for b_ in range(4)] for coeffs in WINO_AT]
            for r, row in enumerate(half):
                for s, coeffs in enumerate(WINO_AT):
                    ys[2 * r + s].append(b.ashr(_combine(b, coeffs, row), two))
        cols = [b.mul(b.add(g, _c(h)), _c(PACK_COLS)) for h in range(ng)]
        if oh % 2 == 0 and ow % 2 == 0:
            self.store_tile([v for y in ys for v in y], None, None, cols, 4, ng, rows=rows)
            return
        # an odd OH (OW): the last tile row's (column's) second output row (column) is not there
        last_row = b.icmp_signed("==", ty, _c(self.th - 1)) if oh % 2 else None
        last_col = b.icmp_signed("==", tx, _c(self.tw - 1)) if ow % 2 else None
        for i, (row, y) in enumerate(zip(rows, ys)):
            skip = [c for c, on in ((last_row, i >= 2), (last_col, i % 2 == 1)) if on and c is not None]
            if not skip:
                self.store_tile(y, None, None, cols, 1, ng, rows=[row])
                continue
            cond = skip[0] if len(skip) == 1 else b.or_(skip[0], skip[1])
            with b.if_then(b.not_(cond)):
                self.store_tile(y, None, None, cols, 1, ng, rows=[row])


def _combine(b: ir.IRBuilder, coeffs, values: list[ir.Value]) -> ir.Value:
    """sum of c * v over the +-1 coefficients (at least one nonzero), by adds and subtracts."""
    terms = sorted(((c, v) for c, v in zip(coeffs, values) if c), key=lambda cv: -cv[0])  # + first
    c0, out = terms[0]
    if c0 < 0:
        out = b.sub(ir.Constant(out.type, None), out)
    for c, v in terms[1:]:
        out = b.add(out, v) if c > 0 else b.sub(out, v)
    return out
