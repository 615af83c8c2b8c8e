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
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.llvm.emitter import FunctionEmitter, handles

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
V16I8, V16I16, V8I32 = ir.VectorType(I8, 16), ir.VectorType(I16, 16), ir.VectorType(I32, 8)
V16F32 = ir.VectorType(F32, 16)
CHUNK = 16
MR, NR = 2, 4


def _c(v: int, ty=I64) -> ir.Constant:
    return ir.Constant(ty, v)


@handles("aicc_cpu.qgemm")
def emit_qgemm(e: FunctionEmitter, op) -> None:
    n, k, zp = (getattr(op, p).value.data for p in ("n", "k", "zp"))
    dynamic = op.scale is not None
    fn = _kernel(e, n, k, zp, dynamic)
    b = e.b
    a = b.gep(e.get(op.a), [e.get(op.a_off)], inbounds=True, source_etype=F32 if dynamic else I8)
    c = b.gep(e.get(op.c), [e.get(op.c_off)], inbounds=True, source_etype=I32)
    extra = [e.get(op.scale), e.get(op.zero_point)] if dynamic else []
    b.call(fn, [a, e.get(op.b), c, e.get(op.m), *extra])


def _kernel(e: FunctionEmitter, n: int, k: int, zp: int, dynamic: bool = False) -> ir.Function:
    """`void @aicc.qgemm.<n>.<k>.<zp>(ptr a, ptr b, ptr c, i64 rows)`, once per module;
    dynamic: `@aicc.dqgemm.<n>.<k>(ptr a, ptr b, ptr c, i64 rows, float scale, float zp)`."""
    module = e.em.module
    name = f"aicc.dqgemm.{n}.{k}" if dynamic else f"aicc.qgemm.{n}.{k}.{zp}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, I64, *([F32, F32] if dynamic else [])]),
                     name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
        arg.add_attribute("captures(none)")
    kb = FunctionEmitter(e.em, fn)
    _Body(kb, fn.args, n, k, zp).emit()
    kb.b.ret_void()
    kb.finish()
    return fn


class _Body:
    def __init__(self, e: FunctionEmitter, args, n: int, k: int, zp: int):
        self.e, self.b = e, e.b
        self.a, self.bm, self.c, self.rows = args[:4]
        self.dynamic = len(args) > 4
        self.n, self.k, self.zp = n, k, zp
        self.kc = k - k % CHUNK
        self.ks = k if self.dynamic else self.kc  # the i16 buffer's row: all of it when dynamic
        module = e.em.module
        if self.dynamic:
            self.scale, self.zpf = args[4:6]
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

    def emit(self) -> None:
        b, e = self.b, self.e
        pairs = b.sdiv(self.rows, _c(MR))
        e.loop(_c(0), pairs, _c(1), [], lambda p, _: self.row_block(b.mul(p, _c(MR)), MR) or [])
        odd = b.icmp_signed("!=", b.srem(self.rows, _c(MR)), _c(0))
        with b.if_then(odd):
            self.row_block(b.sub(self.rows, _c(1)), 1)

    def row_block(self, r0: ir.Value, mr: int) -> None:
        e, b = self.e, self.b
        a_rows = [self._row(self.a, b.add(r0, _c(i)), self.k, F32 if self.dynamic else I8) for i in range(mr)]
        self.a16 = None
        if self.ks:  # the rows as i16 minus the zero point, once for all columns
            self.a16 = self.scratch(mr)

            def convert(kk, _):
                for i, row in enumerate(a_rows):
                    if self.dynamic:
                        v = self.quantize(b.load(b.gep(row, [kk], inbounds=True, source_etype=F32), typ=V16F32,
                                                 align=4), V16F32, V16I16)
                    else:
                        v = b.sub(b.sext(b.load(b.gep(row, [kk], inbounds=True, source_etype=I8), typ=V16I8,
                                                align=1), V16I16), self.zp_v)
                    at = b.add(b.mul(_c(i), _c(self.ks)), kk)
                    b.store(v, b.gep(self.a16, [at], inbounds=True, source_etype=I16), align=2)
                return []

            if self.kc:
                e.loop(_c(0), _c(self.kc), _c(CHUNK), [], convert, known_nonempty=True)
            if self.dynamic and self.k % CHUNK:
                def convert_tail(kk, _):
                    for i, row in enumerate(a_rows):
                        v = self.quantize(b.load(b.gep(row, [kk], inbounds=True, source_etype=F32), typ=F32),
                                          F32, I16)
                        at = b.add(b.mul(_c(i), _c(self.ks)), kk)
                        b.store(v, b.gep(self.a16, [at], inbounds=True, source_etype=I16), align=2)
                    return []

                e.loop(_c(self.kc), _c(self.k), _c(1), [], convert_tail, known_nonempty=True)
        groups = self.n // NR
        if groups:
            e.loop(_c(0), _c(groups), _c(1), [],
                   lambda q, _: self.tile(r0, self.b.mul(q, _c(NR)), mr, NR) or [])
        if self.n % NR:
            e.loop(_c(groups * NR), _c(self.n), _c(1), [], lambda j, _: self.tile(r0, j, mr, 1) or [])

    def quantize(self, x: ir.Value, fty, ity) -> ir.Value:
        """clamp(rne(x / scale) + zp, -128, 127) - zp as ity (x float32, or 16 lanes of it)."""
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
        return b.fptosi(b.fsub(q, zp), ity)

    def scratch(self, mr: int) -> ir.Value:
        """An entry-block stack buffer of mr * ks i16 (one per row count, reused)."""
        buf = self.buffers.get(mr)
        if buf is None:
            buf = self.buffers[mr] = self.e.alloca_builder.alloca(ir.ArrayType(I16, mr * self.ks))
            buf.align = 32
            buf.type = ir.PointerType()  # opaque, as the emitter's pointers are
        return buf

    def _row(self, base: ir.Value, row: ir.Value, ld: int, ety) -> ir.Value:
        return self.b.gep(base, [self.b.mul(row, _c(ld), flags=["nsw"])], inbounds=True, source_etype=ety)

    def tile(self, r0: ir.Value, j0: ir.Value, mr: int, nr: int) -> None:
        b, e = self.b, self.e
        a_rows = [self._row(self.a, b.add(r0, _c(i)), self.k, I8) for i in range(mr)]
        b_rows = [self._row(self.bm, b.add(j0, _c(q)), self.k, I8) for q in range(nr)]
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
        if self.k % CHUNK:
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
