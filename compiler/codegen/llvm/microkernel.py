"""LLVM IR for `aicc_cpu.microkernel`: an mr x nr register tile of FMAs.

    for k < kc (unrolled ku times, then a remainder loop):
        b[q]    = load <vw x T> B[boff + k*b_ks + q*vw]          q < nr/vw
        a       = splat A[aoff + r*a_rs + k*a_ks]                  r < mr
        acc[r][q] = llvm.fma(a, b[q], acc[r][q])
    C[coff + r*ldc + q*vw ...] = (accumulate ? C + acc : acc)    r < m, lanes < n

The accumulators are loop-carried values (phis), so LLVM keeps them in registers: pick
mr * nr / vw below the register count (32 zmm with AVX-512, 16 ymm with AVX2). The splat is
an insertelement + zero shufflevector, which x86 folds into the FMA as an embedded broadcast
or one vbroadcastss per row. A full tile (m == mr, n == nr) updates C with plain vector
loads and stores; an edge tile masks lanes past n and skips rows past m.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.llvm import mathlib
from compiler.codegen.llvm.emitter import FunctionEmitter, byte_size, handles, memory_type

C_PREFETCH_LOCALITY = 2  # llvm.prefetch locality for the C tile: 2 = prefetcht1 (to L2)

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)


class _Literal(ir.Constant):
    """A constant printed as an LLVM literal (`zeroinitializer`, `undef`): llvmlite spells
    vector constants out element by element, which makes the IR hard to read."""

    def __init__(self, ty: ir.Type, text: str):
        super().__init__(ty, None)
        self.text = text

    def get_reference(self) -> str:
        return self.text

    def _to_string(self) -> str:
        return f"{self.type} {self.text}"


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _masked(e: FunctionEmitter, kind: str, vty: ir.VectorType) -> ir.Function:
    """llvm.masked.load / llvm.masked.store for vty (the explicit-alignment form, which
    LLVM 22 still accepts and upgrades)."""
    module = e.em.module
    name = f"llvm.masked.{kind}.{mathlib.type_suffix(vty)}.p0"
    fn = module.globals.get(name)
    if fn is None:
        mty = ir.VectorType(I1, vty.count)
        if kind == "load":
            sig = ir.FunctionType(vty, [ir.PointerType(), I32, mty, vty])
        else:
            sig = ir.FunctionType(ir.VoidType(), [vty, ir.PointerType(), I32, mty])
        fn = ir.Function(module, sig, name=name)
    return fn


@handles("aicc_cpu.microkernel")
def emit_microkernel(e: FunctionEmitter, op) -> None:
    """A call of the kernel function for op's configuration (emitted once per module)."""
    ety = memory_type(op.c.type.element_type)
    cfg = (str(ety), *(op.int_prop(k) for k in (
        "mr", "nr", "vw", "a_rs", "a_ks", "b_ks", "ldc", "ku")),
        op.a_clamp is not None and bool(op.a_clamp.value.data),
        op.b_masked is not None and bool(op.b_masked.value.data),
        op.b_pf.value.data if op.b_pf is not None else 0,
        None if op.init is None else op.init_rs.value.data,
        op.init_cs.value.data if op.init_cs is not None else 1)
    fn = _kernel_function(e, cfg, ety)
    b = e.b
    buffers = [(op.a, op.a_off), (op.b, op.b_off), (op.c, op.c_off)]
    if op.init is not None:
        buffers.append((op.init, op.init_off))
    args = [b.gep(e.get(v), [e.get(off)], inbounds=True, source_etype=ety) for v, off in buffers]
    b.call(fn, args[:3] + [e.get(op.kc), e.get(op.m), e.get(op.n), e.get(op.accumulate)]
           + args[3:])


def _kernel_function(e: FunctionEmitter, cfg: tuple, ety: ir.Type) -> ir.Function:
    """`void @aicc.microkernel.<config>(ptr a, ptr b, ptr c, i64 kc, i64 m, i64 n, i1 acc
    [, ptr init])`.

    A function of its own, not inlined: LLVM then compiles the register tile once per
    configuration, and cannot unswitch an enclosing loop into copies of it."""
    _, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku, a_clamp, b_masked, b_pf, init_rs, init_cs = cfg
    a_clamp, b_masked = bool(a_clamp), bool(b_masked)
    name = "aicc.microkernel." + ".".join(str(x).replace(" ", "") for x in (
        ety, f"{mr}x{nr}", f"v{vw}", a_rs, a_ks, b_ks, ldc, ku, int(a_clamp), int(b_masked), b_pf))
    if init_rs is not None:
        name += f".init{init_rs}" + ("" if init_cs else ".rowinit")
    module = e.em.module
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ptr = ir.PointerType()
    params = [ptr, ptr, ptr, I64, I64, I64, I1] + ([ptr] if init_rs is not None else [])
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    e.em.vector_attrs(fn)
    for arg in (*fn.args[:3], *fn.args[7:]):
        arg.add_attribute("noalias")
        arg.add_attribute("captures(none)")
    k = FunctionEmitter(e.em, fn)
    _emit_kernel_body(k, fn.args, ety, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku, a_clamp, b_masked,
                      b_pf, init_rs, init_cs)
    k.b.ret_void()
    k.finish()
    return fn


def _emit_kernel_body(e: FunctionEmitter, args, ety, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku,
                      a_clamp, b_masked, b_pf, init_rs=None, init_cs=1) -> None:
    esize = byte_size(ety)
    vty = ir.VectorType(ety, vw)
    nq = nr // vw
    b = e.b
    a_base, b_base, c_base, kc, m, n, accumulate = args[:7]
    init_base = args[7] if init_rs is not None else None

    def a_row_ptrs(clamp: bool) -> list[ir.Value]:
        """Row r of A at a constant offset from one base; clamped: row min(r, m - 1)."""
        if not clamp:
            return [b.gep(a_base, [_c64(r * a_rs)], inbounds=True, source_etype=ety)
                    for r in range(mr)]
        last_row = b.sub(m, _c64(1))
        out = []
        for r in range(mr):
            row = _c64(0) if r == 0 else e.intr("smin", _c64(r), last_row)
            off = row if a_rs == 1 else b.mul(row, _c64(a_rs), flags=["nsw"])
            out.append(b.gep(a_base, [off], inbounds=True, source_etype=ety))
        return out

    lanes = ir.Constant(ir.VectorType(I64, vw), list(range(vw)))

    def lane_mask(q: int) -> ir.Value:
        """Lanes q*vw + l < n of column block q."""
        bound = b.sub(n, _c64(q * vw))
        splat = b.shuffle_vector(b.insert_element(ir.Constant(ir.VectorType(I64, vw), None), bound,
                                                  ir.Constant(I32, 0)),
                                 ir.Constant(ir.VectorType(I64, vw), None),
                                 ir.Constant(ir.VectorType(I32, vw), [0] * vw))
        return b.icmp_signed("<", lanes, splat)

    zero_v = _Literal(vty, "zeroinitializer")
    undef_v = _Literal(vty, "undef")
    splat_mask = _Literal(ir.VectorType(I32, vw), "zeroinitializer")

    prefetch = e.em.module.globals.get("llvm.prefetch.p0") or ir.Function(
        e.em.module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), I32, I32, I32]),
        name="llvm.prefetch.p0")

    def k_steps(kk: ir.Value, accs: list[ir.Value], a_rows, masks) -> list[ir.Value]:
        """One k step: nq loads of B, mr broadcasts of A, mr * nq FMAs."""
        boff = kk if b_ks == 1 else b.mul(kk, _c64(b_ks), flags=["nsw"])
        bvec = []
        for q in range(nq):
            off = boff if q == 0 else b.add(boff, _c64(q * vw), flags=["nsw"])
            p = b.gep(b_base, [off], inbounds=True, source_etype=ety)
            if masks is None:
                bvec.append(b.load(p, typ=vty, align=esize))
            else:
                bvec.append(b.call(_masked(e, "load", vty),
                                   [p, ir.Constant(I32, esize), masks[q], zero_v]))
        if b_pf and masks is None:  # B streams from L2: fetch the rows b_pf steps ahead
            for j in range(0, nr, 64 // esize):
                p = b.gep(b_base, [b.add(boff, _c64(b_pf * b_ks + j), flags=["nsw"])],
                          source_etype=ety)  # not inbounds: may point past the end
                b.call(prefetch, [p, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
        aoff = kk if a_ks == 1 else b.mul(kk, _c64(a_ks), flags=["nsw"])
        out = list(accs)
        for r in range(mr):
            x = b.load(b.gep(a_rows[r], [aoff], inbounds=True, source_etype=ety), typ=ety,
                       align=esize)
            xv = b.shuffle_vector(b.insert_element(undef_v, x, ir.Constant(I32, 0)), undef_v,
                                  splat_mask)
            for q in range(nq):
                i = r * nq + q
                out[i] = e.intr("fma", xv, bvec[q], out[i])
        return out

    def k_loops(edge: bool) -> list[ir.Value]:
        """The k loop (unrolled by ku) and its remainder; returns the accumulators. The edge
        version clamps the rows of an unpacked A and masks the loads of an unpacked B; it runs
        for one tile in a row or column of tiles, so it is not unrolled (less code)."""
        a_rows = a_row_ptrs(edge and a_clamp)
        masks = [lane_mask(q) for q in range(nq)] if edge and b_masked else None
        accs = [zero_v] * (mr * nq)
        if ku > 1 and not edge:
            main = b.mul(b.sdiv(kc, _c64(ku)), _c64(ku), flags=["nsw"])

            def unrolled(k, carried):
                for u in range(ku):
                    kk = k if u == 0 else b.add(k, _c64(u), flags=["nsw"])
                    carried = k_steps(kk, carried, a_rows, masks)
                return carried

            accs = e.loop(_c64(0), main, _c64(ku), accs, unrolled)
        else:
            main = _c64(0)
        return e.loop(main, kc, _c64(1), accs,
                      lambda k, carried: k_steps(k, carried, a_rows, masks))

    # Start fetching the C tile now: it arrives while the k loop runs, instead of stalling
    # the update at the end (C rows are ldc apart, often in no cache at all).
    line = 64 // esize
    for r in range(mr):
        for j in range(0, nr, line):
            b.call(prefetch, [b.gep(c_base, [_c64(r * ldc + j)], source_etype=ety),
                              ir.Constant(I32, 1), ir.Constant(I32, C_PREFETCH_LOCALITY),
                              ir.Constant(I32, 1)])

    if a_clamp or b_masked:
        # Unpacked operands: an edge tile must not read past the rows of A or the columns
        # of B, so it takes a second, slower copy of the k loop.
        edge = b.or_(b.icmp_signed("<", m, _c64(mr)) if a_clamp else ir.Constant(I1, 0),
                     b.icmp_signed("<", n, _c64(nr)) if b_masked else ir.Constant(I1, 0))
        fast_bb = e.fn.append_basic_block("mk.kfull")
        slow_bb = e.fn.append_basic_block("mk.kedge")
        join_bb = e.fn.append_basic_block("mk.kdone")
        b.cbranch(edge, slow_bb, fast_bb)
        b.position_at_end(fast_bb)
        fast = k_loops(False)
        fast_end = b.block
        b.branch(join_bb)
        b.position_at_end(slow_bb)
        slow = k_loops(True)
        slow_end = b.block
        b.branch(join_bb)
        b.position_at_end(join_bb)
        accs = []
        for f, sl in zip(fast, slow):
            p = b.phi(vty)
            p.add_incoming(f, fast_end)
            p.add_incoming(sl, slow_end)
            accs.append(p)
    else:
        accs = k_loops(False)

    # C update: plain vectors for a full tile, masked lanes and skipped rows at an edge.
    full = b.and_(b.icmp_signed("==", m, _c64(mr)), b.icmp_signed("==", n, _c64(nr)))
    full_bb = e.fn.append_basic_block("mk.cfull")
    edge_bb = e.fn.append_basic_block("mk.cedge")
    done_bb = e.fn.append_basic_block("mk.done")
    b.cbranch(full, full_bb, edge_bb)

    def c_ptr(r: int, q: int) -> ir.Value:
        return b.gep(c_base, [_c64(r * ldc + q * vw)], inbounds=True, source_etype=ety)

    def src_ptr(r: int, q: int, p: ir.Value) -> ir.Value:
        """Where the tile starts from: C itself, or (first K block) the init operand."""
        if init_base is None:
            return p
        i = b.gep(init_base, [_c64(r * init_rs + q * vw)], inbounds=True, source_etype=ety)
        return b.select(accumulate, p, i)

    def row_start(r: int, old: ir.Value) -> ir.Value:
        """With one init value per row (init_cs = 0): C's old value, or (first K block) the
        row's value in every lane."""
        if init_base is None or init_cs:
            return old
        x = b.load(b.gep(init_base, [_c64(r * init_rs)], inbounds=True, source_etype=ety),
                   typ=ety, align=esize)
        splat = b.shuffle_vector(b.insert_element(undef_v, x, ir.Constant(I32, 0)), undef_v,
                                 splat_mask)
        return b.select(accumulate, old, splat)

    def update(old: ir.Value, acc: ir.Value) -> ir.Value:
        if init_base is not None:
            return b.fadd(old, acc)
        return b.select(accumulate, b.fadd(old, acc), acc)

    b.position_at_end(full_bb)
    for r in range(mr):
        for q in range(nq):
            p = c_ptr(r, q)
            old = row_start(r, b.load(src_ptr(r, q, p) if init_cs else p, typ=vty, align=esize))
            b.store(update(old, accs[r * nq + q]), p, align=esize)
    b.branch(done_bb)

    b.position_at_end(edge_bb)
    masks = [lane_mask(q) for q in range(nq)]
    for r in range(mr):
        row_bb = e.fn.append_basic_block(f"mk.row{r}")
        next_bb = e.fn.append_basic_block(f"mk.row{r}.next")
        b.cbranch(b.icmp_signed("<", _c64(r), m), row_bb, next_bb)
        b.position_at_end(row_bb)
        for q in range(nq):
            p = c_ptr(r, q)
            old = row_start(r, b.call(_masked(e, "load", vty), [
                src_ptr(r, q, p) if init_cs else p, ir.Constant(I32, esize), masks[q], zero_v]))
            b.call(_masked(e, "store", vty),
                   [update(old, accs[r * nq + q]), p, ir.Constant(I32, esize), masks[q]])
        b.branch(next_bb)
        b.position_at_end(next_bb)
    b.branch(done_bb)
    b.position_at_end(done_bb)
