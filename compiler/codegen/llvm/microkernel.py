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

import hashlib
from io import StringIO

from llvmlite import ir
from xdsl.ir import Region
from xdsl.printer import Printer

from compiler.codegen.llvm import mathlib
from compiler.codegen.llvm.emitter import FunctionEmitter, byte_size, handles, memory_type

C_PREFETCH_LOCALITY = 2  # llvm.prefetch locality for the C tile: 2 = prefetcht1 (to L2)

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)


def prefetch_intrinsic(module: ir.Module) -> ir.Function:
    """`llvm.prefetch.p0(ptr, rw, locality, cache type)`, declared once per module."""
    return module.globals.get("llvm.prefetch.p0") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), I32, I32, I32]),
        name="llvm.prefetch.p0")


class Literal(ir.Constant):
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


def masked_intrinsic(e: FunctionEmitter, kind: str, vty: ir.VectorType) -> ir.Function:
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


def region_key(region: Region) -> str:
    """A short digest of an epilogue region's text: kernels with the same one share code."""
    text = StringIO()
    Printer(stream=text).print_region(region)
    return hashlib.sha256(text.getvalue().encode()).hexdigest()[:12]


def apply_epilogue(e: FunctionEmitter, region: Region | None, v: ir.Value) -> ir.Value:
    """A kernel's `epilogue` region (aicc_cpu.conv_kernel, dw_kernel, microkernel) applied to
    v (a vector of outputs, or one): its ops emitted on v's type, constants splat to it."""
    if region is None:
        return v
    block = region.block
    e.set(block.args[0], v)
    for op in block.ops:
        if op.name == "aicc_cpu.yield":
            return e.get(op.operands[0])
        if op.name == "arith.constant":
            c = ir.Constant(v.type.element if isinstance(v.type, ir.VectorType) else v.type,
                            op.value.value.data)
            e.set(op.results[0], ir.Constant(v.type, [c] * v.type.count)
                  if isinstance(v.type, ir.VectorType) else c)
        else:
            e.emit_op(op)
    raise AssertionError("an epilogue region without aicc_cpu.yield")  # the verifier's


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
        op.init_cs.value.data if op.init_cs is not None else 1,
        op.l2pf_rate.value.data if op.l2pf_rate is not None else 0,
        op.lanes_kernel)
    fn = _kernel_function(e, cfg, ety, op.epilogue)
    b = e.b
    buffers = [(op.a, op.a_off), (op.b, op.b_off), (op.c, op.c_off)]
    if op.init is not None:
        buffers.append((op.init, op.init_off))
    if op.l2pf is not None:
        buffers.append((op.l2pf, op.l2pf_off))
    args = [b.gep(e.get(v), [e.get(off)], inbounds=True, source_etype=ety) for v, off in buffers]
    b.call(fn, args[:3] + [e.get(op.kc), e.get(op.m), e.get(op.n), e.get(op.accumulate)]
           + args[3:])


def _kernel_function(e: FunctionEmitter, cfg: tuple, ety: ir.Type,
                     epilogue: Region | None = None) -> ir.Function:
    """`void @aicc.microkernel.<config>(ptr a, ptr b, ptr c, i64 kc, i64 m, i64 n, i1 acc
    [, ptr init][, ptr l2pf])`.

    A function of its own, not inlined: LLVM then compiles the register tile once per
    configuration, and cannot unswitch an enclosing loop into copies of it."""
    (_, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku, a_clamp, b_masked, b_pf, init_rs, init_cs,
     l2pf_rate, m_lanes) = cfg
    a_clamp, b_masked = bool(a_clamp), bool(b_masked)
    name = "aicc.microkernel." + ".".join(str(x).replace(" ", "") for x in (
        ety, f"{mr}x{nr}", f"v{vw}", a_rs, a_ks, b_ks, ldc, ku, int(a_clamp), int(b_masked), b_pf))
    if init_rs is not None:
        name += f".init{init_rs}" + ("" if init_cs else ".rowinit")
    if l2pf_rate:
        name += f".l2pf{l2pf_rate}"
    if m_lanes:
        name += ".lanes"
    if epilogue is not None:
        name += ".epi" + region_key(epilogue)
    module = e.em.module
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ptr = ir.PointerType()
    params = [ptr, ptr, ptr, I64, I64, I64, I1] + ([ptr] if init_rs is not None else []) \
        + ([ptr] if l2pf_rate else [])
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    e.em.vector_attrs(fn)
    for arg in (*fn.args[:3], *fn.args[7:]):
        arg.add_attribute("noalias")
        arg.add_attribute("captures(none)")
    k = FunctionEmitter(e.em, fn)
    if m_lanes:
        _LanesBody(k, fn.args, ety, mr, nr, vw, a_ks, b_ks, ldc, init_rs, init_cs,
                   epilogue).emit()
    else:
        _emit_kernel_body(k, fn.args, ety, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku, a_clamp,
                          b_masked, b_pf, init_rs, init_cs, epilogue, l2pf_rate)
    k.b.ret_void()
    k.finish()
    return fn


def _emit_kernel_body(e: FunctionEmitter, args, ety, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku,
                      a_clamp, b_masked, b_pf, init_rs=None, init_cs=1, epilogue=None,
                      l2pf_rate=0) -> None:
    """The kernel function's body: prefetch the C tile, run the k loop into mr * nr / vw
    vector accumulators, then update C with them."""
    body = _KernelBody(e, args, ety, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku, a_clamp, b_masked,
                       b_pf, init_rs, init_cs, epilogue, l2pf_rate)
    body.prefetch_c()
    body.update_c(body.accumulate())


class _KernelBody:
    """The micro-kernel's configuration and arguments, and the parts of its body. One k step
    and the C update are unrolled over the tile's mr rows and nq = nr / vw column vectors;
    accumulator r * nq + q holds row r, columns q*vw ... q*vw + vw - 1."""

    def __init__(self, e: FunctionEmitter, args, ety, mr, nr, vw, a_rs, a_ks, b_ks, ldc, ku,
                 a_clamp, b_masked, b_pf, init_rs, init_cs, epilogue=None, l2pf_rate=0):
        self.e, self.b = e, e.b
        self.epilogue = epilogue
        self.ety, self.mr, self.nr, self.vw = ety, mr, nr, vw
        self.a_rs, self.a_ks, self.b_ks, self.ldc, self.ku = a_rs, a_ks, b_ks, ldc, ku
        self.a_clamp, self.b_masked, self.b_pf = a_clamp, b_masked, b_pf
        self.init_rs, self.init_cs = init_rs, init_cs
        self.esize = byte_size(ety)
        self.vty = ir.VectorType(ety, vw)
        self.nq = nr // vw
        self.a_base, self.b_base, self.c_base = args[:3]
        self.kc, self.m, self.n, self.accumulating = args[3:7]  # accumulating: i1, C += or C =
        self.init_base = args[7] if init_rs is not None else None
        self.l2pf_rate = l2pf_rate
        self.l2pf_base = args[-1] if l2pf_rate else None
        self.lanes = ir.Constant(ir.VectorType(I64, vw), list(range(vw)))
        self.zero_v = Literal(self.vty, "zeroinitializer")
        self.undef_v = Literal(self.vty, "undef")
        self.splat_mask = Literal(ir.VectorType(I32, vw), "zeroinitializer")
        self.prefetch = prefetch_intrinsic(e.em.module)

    # -- the k loop

    def a_row_ptrs(self, clamp: bool) -> list[ir.Value]:
        """Row r of A at a constant offset from one base; clamped: row min(r, m - 1)."""
        b, e, ety, a_base, a_rs = self.b, self.e, self.ety, self.a_base, self.a_rs
        if not clamp:
            return [b.gep(a_base, [_c64(r * a_rs)], inbounds=True, source_etype=ety)
                    for r in range(self.mr)]
        last_row = b.sub(self.m, _c64(1))
        out = []
        for r in range(self.mr):
            row = _c64(0) if r == 0 else e.intr("smin", _c64(r), last_row)
            off = row if a_rs == 1 else b.mul(row, _c64(a_rs), flags=["nsw"])
            out.append(b.gep(a_base, [off], inbounds=True, source_etype=ety))
        return out

    def lane_mask(self, q: int) -> ir.Value:
        """Lanes q*vw + l < n of column block q."""
        b, vw = self.b, self.vw
        bound = b.sub(self.n, _c64(q * vw))
        splat = b.shuffle_vector(b.insert_element(ir.Constant(ir.VectorType(I64, vw), None), bound,
                                                  ir.Constant(I32, 0)),
                                 ir.Constant(ir.VectorType(I64, vw), None),
                                 ir.Constant(ir.VectorType(I32, vw), [0] * vw))
        return b.icmp_signed("<", self.lanes, splat)

    def splat(self, x: ir.Value) -> ir.Value:
        """Scalar x in every lane: insertelement + a zero-mask shufflevector."""
        b = self.b
        return b.shuffle_vector(b.insert_element(self.undef_v, x, ir.Constant(I32, 0)),
                                self.undef_v, self.splat_mask)

    def k_steps(self, kk: ir.Value, accs: list[ir.Value], a_rows, masks) -> list[ir.Value]:
        """One k step: nq loads of B, mr broadcasts of A, mr * nq FMAs."""
        b, e, ety, esize, vty, nq = self.b, self.e, self.ety, self.esize, self.vty, self.nq
        b_ks, b_pf, a_ks = self.b_ks, self.b_pf, self.a_ks
        boff = kk if b_ks == 1 else b.mul(kk, _c64(b_ks), flags=["nsw"])
        bvec = []
        for q in range(nq):
            off = boff if q == 0 else b.add(boff, _c64(q * self.vw), flags=["nsw"])
            p = b.gep(self.b_base, [off], inbounds=True, source_etype=ety)
            if masks is None:
                bvec.append(b.load(p, typ=vty, align=esize))
            else:
                bvec.append(b.call(masked_intrinsic(e, "load", vty),
                                   [p, ir.Constant(I32, esize), masks[q], self.zero_v]))
        if b_pf and masks is None:  # B streams from L2: fetch the rows b_pf steps ahead
            for j in range(0, self.nr, 64 // esize):
                p = b.gep(self.b_base, [b.add(boff, _c64(b_pf * b_ks + j), flags=["nsw"])],
                          source_etype=ety)  # not inbounds: may point past the end
                b.call(self.prefetch,
                       [p, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
        aoff = kk if a_ks == 1 else b.mul(kk, _c64(a_ks), flags=["nsw"])
        out = list(accs)
        for r in range(self.mr):
            x = b.load(b.gep(a_rows[r], [aoff], inbounds=True, source_etype=ety), typ=ety,
                       align=esize)
            xv = self.splat(x)
            for q in range(nq):
                i = r * nq + q
                out[i] = e.intr("fma", xv, bvec[q], out[i])
        return out

    def k_loops(self, edge: bool) -> list[ir.Value]:
        """The k loop (unrolled by ku) and its remainder; returns the accumulators. The edge
        version clamps the rows of an unpacked A and masks the loads of an unpacked B; it runs
        for one tile in a row or column of tiles, so it is not unrolled (less code)."""
        b, e, ku, kc = self.b, self.e, self.ku, self.kc
        a_rows = self.a_row_ptrs(edge and self.a_clamp)
        masks = [self.lane_mask(q) for q in range(self.nq)] if edge and self.b_masked else None
        accs = [self.zero_v] * (self.mr * self.nq)
        if ku > 1 and not edge:
            main = b.mul(b.sdiv(kc, _c64(ku)), _c64(ku), flags=["nsw"])

            def unrolled(k, carried):
                for u in range(ku):
                    kk = k if u == 0 else b.add(k, _c64(u), flags=["nsw"])
                    carried = self.k_steps(kk, carried, a_rows, masks)
                    for j in range(u, self.l2pf_rate, ku):
                        self.prefetch_l2(k, j)
                return carried

            accs = e.loop(_c64(0), main, _c64(ku), accs, unrolled)
        else:
            main = _c64(0)
        return e.loop(main, kc, _c64(1), accs,
                      lambda k, carried: self.k_steps(k, carried, a_rows, masks))

    def prefetch_l2(self, k: ir.Value, j: int) -> None:
        """Line j of the l2pf_rate lines of the l2pf stream that the unrolled step at k fetches
        into L2: line (k / ku) * rate + j from l2pf's start. Step u of an unrolled iteration
        fetches lines j = u, u + ku, ..., so that the fetches spread over the loop."""
        b, line = self.b, 64 // self.esize
        off = b.mul(b.sdiv(k, _c64(self.ku)), _c64(self.l2pf_rate * line), flags=["nsw"])
        p = b.gep(self.l2pf_base, [b.add(off, _c64(j * line), flags=["nsw"])],
                  source_etype=self.ety)  # not inbounds: past the buffer's end is harmless
        b.call(self.prefetch, [p, ir.Constant(I32, 0), ir.Constant(I32, 2), ir.Constant(I32, 1)])

    def prefetch_c(self) -> None:
        """Start fetching the C tile now: it arrives while the k loop runs, instead of
        stalling the update at the end (C rows are ldc apart, often in no cache at all)."""
        b = self.b
        line = 64 // self.esize
        for r in range(self.mr):
            for j in range(0, self.nr, line):
                b.call(self.prefetch, [b.gep(self.c_base, [_c64(r * self.ldc + j)],
                                             source_etype=self.ety),
                                       ir.Constant(I32, 1), ir.Constant(I32, C_PREFETCH_LOCALITY),
                                       ir.Constant(I32, 1)])

    def accumulate(self) -> list[ir.Value]:
        """The accumulators after the k loop. Unpacked operands: an edge tile must not read
        past the rows of A or the columns of B, so it takes a second, slower copy of the k
        loop, and phis join the two."""
        if not (self.a_clamp or self.b_masked):
            return self.k_loops(False)
        b, fn, m, n = self.b, self.e.fn, self.m, self.n
        edge = b.or_(b.icmp_signed("<", m, _c64(self.mr)) if self.a_clamp else ir.Constant(I1, 0),
                     b.icmp_signed("<", n, _c64(self.nr)) if self.b_masked else ir.Constant(I1, 0))
        fast_bb = fn.append_basic_block("mk.kfull")
        slow_bb = fn.append_basic_block("mk.kedge")
        join_bb = fn.append_basic_block("mk.kdone")
        paths = []
        if self.a_clamp and self.mr > 1:
            # one row of A (a matrix-vector product: a batch of one): its own k loop, not
            # mr clamped copies of the row
            row_bb = fn.append_basic_block("mk.krow")
            edge_bb = fn.append_basic_block("mk.kedge.test")
            one = b.icmp_signed("==", m, _c64(1))
            if self.b_masked:
                one = b.and_(one, b.icmp_signed("==", n, _c64(self.nr)))
            b.cbranch(one, row_bb, edge_bb)
            b.position_at_end(row_bb)
            row = self.k_loop_one_row()
            paths.append((row + [self.zero_v] * (len(row) * (self.mr - 1)), b.block))
            b.branch(join_bb)
            b.position_at_end(edge_bb)
        b.cbranch(edge, slow_bb, fast_bb)
        b.position_at_end(fast_bb)
        paths.append((self.k_loops(False), b.block))
        b.branch(join_bb)
        b.position_at_end(slow_bb)
        paths.append((self.k_loops(True), b.block))
        b.branch(join_bb)
        b.position_at_end(join_bb)
        accs = []
        for i in range(self.mr * self.nq):
            p = b.phi(self.vty)
            for values, block in paths:
                p.add_incoming(values[i], block)
            accs.append(p)
        return accs

    def k_loop_one_row(self, chains: int = 4) -> list[ir.Value]:
        """Row 0 of A times the panel: `chains` k steps in flight, each into accumulators of
        its own (summed at the end), so that the FMAs of one row do not wait on each other."""
        b, e, ety, esize, vty, nq, kc = self.b, self.e, self.ety, self.esize, self.vty, self.nq, self.kc

        def step(kk: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
            boff = kk if self.b_ks == 1 else b.mul(kk, _c64(self.b_ks), flags=["nsw"])
            aoff = kk if self.a_ks == 1 else b.mul(kk, _c64(self.a_ks), flags=["nsw"])
            x = self.splat(b.load(b.gep(self.a_base, [aoff], inbounds=True, source_etype=ety),
                                  typ=ety, align=esize))
            out = []
            for q in range(nq):
                off = boff if q == 0 else b.add(boff, _c64(q * self.vw), flags=["nsw"])
                bv = b.load(b.gep(self.b_base, [off], inbounds=True, source_etype=ety),
                            typ=vty, align=esize)
                out.append(e.intr("fma", x, bv, accs[q]))
            return out

        main = b.mul(b.sdiv(kc, _c64(chains)), _c64(chains), flags=["nsw"])

        def unrolled(k, carried):
            out = []
            for u in range(chains):
                kk = k if u == 0 else b.add(k, _c64(u), flags=["nsw"])
                out += step(kk, carried[u * nq:(u + 1) * nq])
            return out

        accs = e.loop(_c64(0), main, _c64(chains), [self.zero_v] * (nq * chains), unrolled)
        first = e.loop(main, kc, _c64(1), accs[:nq], lambda k, c: step(k, c))
        total = list(first)
        for u in range(1, chains):
            total = [b.fadd(t, a) for t, a in zip(total, accs[u * nq:(u + 1) * nq])]
        return total

    # -- the C update

    def c_ptr(self, r: int, q: int) -> ir.Value:
        return self.b.gep(self.c_base, [_c64(r * self.ldc + q * self.vw)], inbounds=True,
                          source_etype=self.ety)

    def src_ptr(self, r: int, q: int, p: ir.Value) -> ir.Value:
        """Where the tile starts from: C itself, or (first K block) the init operand."""
        if self.init_base is None:
            return p
        i = self.b.gep(self.init_base, [_c64(r * self.init_rs + q * self.vw)], inbounds=True,
                       source_etype=self.ety)
        return self.b.select(self.accumulating, p, i)

    def row_start(self, r: int, old: ir.Value) -> ir.Value:
        """With one init value per row (init_cs = 0): C's old value, or (first K block) the
        row's value in every lane."""
        if self.init_base is None or self.init_cs:
            return old
        b = self.b
        x = b.load(b.gep(self.init_base, [_c64(r * self.init_rs)], inbounds=True,
                         source_etype=self.ety), typ=self.ety, align=self.esize)
        return b.select(self.accumulating, old, self.splat(x))

    def update(self, old: ir.Value, acc: ir.Value) -> ir.Value:
        """C's new value: old + acc, or (not accumulating, no init operand) acc alone; then
        the epilogue, if any."""
        b = self.b
        if self.init_base is not None:
            new = b.fadd(old, acc)
        else:
            new = b.select(self.accumulating, b.fadd(old, acc), acc)
        return apply_epilogue(self.e, self.epilogue, new)

    def update_c(self, accs: list[ir.Value]) -> None:
        """C update: plain vectors for a full tile, masked lanes and skipped rows at an edge."""
        b, fn = self.b, self.e.fn
        full = b.and_(b.icmp_signed("==", self.m, _c64(self.mr)),
                      b.icmp_signed("==", self.n, _c64(self.nr)))
        full_bb = fn.append_basic_block("mk.cfull")
        edge_bb = fn.append_basic_block("mk.cedge")
        done_bb = fn.append_basic_block("mk.done")
        b.cbranch(full, full_bb, edge_bb)
        b.position_at_end(full_bb)
        self.store_full(accs)
        b.branch(done_bb)
        b.position_at_end(edge_bb)
        self.store_edge(accs)
        b.branch(done_bb)
        b.position_at_end(done_bb)

    def store_full(self, accs: list[ir.Value]) -> None:
        """A full mr x nr tile: a vector load, update and store per row and column block."""
        b, nq, esize, vty = self.b, self.nq, self.esize, self.vty
        for r in range(self.mr):
            for q in range(nq):
                p = self.c_ptr(r, q)
                old = self.row_start(r, b.load(self.src_ptr(r, q, p) if self.init_cs else p,
                                               typ=vty, align=esize))
                b.store(self.update(old, accs[r * nq + q]), p, align=esize)

    def store_edge(self, accs: list[ir.Value]) -> None:
        """An edge tile: rows r < m only, each column block's lanes masked to those < n."""
        b, e, fn, nq, esize, vty = self.b, self.e, self.e.fn, self.nq, self.esize, self.vty
        masks = [self.lane_mask(q) for q in range(nq)]
        for r in range(self.mr):
            row_bb = fn.append_basic_block(f"mk.row{r}")
            next_bb = fn.append_basic_block(f"mk.row{r}.next")
            b.cbranch(b.icmp_signed("<", _c64(r), self.m), row_bb, next_bb)
            b.position_at_end(row_bb)
            for q in range(nq):
                p = self.c_ptr(r, q)
                old = self.row_start(r, b.call(masked_intrinsic(e, "load", vty), [
                    self.src_ptr(r, q, p) if self.init_cs else p, ir.Constant(I32, esize),
                    masks[q], self.zero_v]))
                b.call(masked_intrinsic(e, "store", vty),
                       [self.update(old, accs[r * nq + q]), p, ir.Constant(I32, esize), masks[q]])
            b.branch(next_bb)
            b.position_at_end(next_bb)


# The least count of independent FMA chains a lanes kernel keeps (each of its nr columns'
# vectors times the k steps it interleaves): an FMA's latency is 4 cycles at 2 a cycle.
LANES_MIN_CHAINS = 8


class _LanesBody:
    """The body of an `m_lanes` kernel: the tile's mr rows in the lanes of nv = ceil(mr / vw)
    vectors, loaded from the packed A sliver (a_rs = 1: row r of step k at k * a_ks + r, the
    last vector masked to the rows past mr * (nv - 1)), and one broadcast of B per column:

        for k < kc (steps interleaved over `chains` sets of accumulators):
            a[v]       = load A[k*a_ks + v*vw ...]                       v < nv
            acc[j][v] += a[v] * splat B[k*b_ks + j]                      j < nr
        C[r*ldc + j] = start + acc[j][r / vw][r % vw]                    r < m, j < n

    A column's update is scalar: mr * nr values a call, against kc * nr * nv FMAs."""

    def __init__(self, e: FunctionEmitter, args, ety, mr, nr, vw, a_ks, b_ks, ldc, init_rs,
                 init_cs, epilogue):
        self.e, self.b = e, e.b
        self.ety, self.mr, self.nr, self.vw = ety, mr, nr, vw
        self.a_ks, self.b_ks, self.ldc = a_ks, b_ks, ldc
        self.init_rs, self.init_cs, self.epilogue = init_rs, init_cs, epilogue
        self.esize = byte_size(ety)
        self.vty = ir.VectorType(ety, vw)
        self.nv = -(-mr // vw)
        self.chains = max(1, min(8, -(-LANES_MIN_CHAINS // (nr * self.nv))))
        self.a_base, self.b_base, self.c_base = args[:3]
        self.kc, self.m, self.n, self.accumulating = args[3:7]
        self.init_base = args[7] if init_rs is not None else None
        self.zero_v = Literal(self.vty, "zeroinitializer")
        self.undef_v = Literal(self.vty, "undef")

    def a_vector(self, kk: ir.Value, v: int) -> ir.Value:
        """Rows v*vw ... of A at step kk; lanes past mr are not read (masked to zero)."""
        b, ety = self.b, self.ety
        off = kk if self.a_ks == 1 else b.mul(kk, _c64(self.a_ks), flags=["nsw"])
        if v:
            off = b.add(off, _c64(v * self.vw), flags=["nsw"])
        p = b.gep(self.a_base, [off], inbounds=True, source_etype=ety)
        lanes = min(self.vw, self.mr - v * self.vw)
        if lanes == self.vw:
            return b.load(p, typ=self.vty, align=self.esize)
        mask = ir.Constant(ir.VectorType(I1, self.vw), [i < lanes for i in range(self.vw)])
        return b.call(masked_intrinsic(self.e, "load", self.vty),
                      [p, ir.Constant(I32, self.esize), mask, self.zero_v])

    def step(self, kk: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
        b, ety, nv = self.b, self.ety, self.nv
        avec = [self.a_vector(kk, v) for v in range(nv)]
        boff = kk if self.b_ks == 1 else b.mul(kk, _c64(self.b_ks), flags=["nsw"])
        out = list(accs)
        for j in range(self.nr):
            x = b.load(b.gep(self.b_base, [boff if j == 0 else b.add(boff, _c64(j), flags=["nsw"])],
                             inbounds=True, source_etype=ety), typ=ety, align=self.esize)
            xv = b.shuffle_vector(b.insert_element(self.undef_v, x, ir.Constant(I32, 0)),
                                  self.undef_v, Literal(ir.VectorType(I32, self.vw), "zeroinitializer"))
            for v in range(nv):
                out[j * nv + v] = self.e.intr("fma", avec[v], xv, out[j * nv + v])
        return out

    def accumulate(self) -> list[ir.Value]:
        """The k loop, `chains` steps an iteration each into its own accumulators, then the
        remainder into the first, and the chains summed."""
        b, e, c, size = self.b, self.e, self.chains, self.nr * self.nv
        main = b.mul(b.sdiv(self.kc, _c64(c)), _c64(c), flags=["nsw"])

        def unrolled(k, carried):
            out = []
            for u in range(c):
                kk = k if u == 0 else b.add(k, _c64(u), flags=["nsw"])
                out += self.step(kk, carried[u * size:(u + 1) * size])
            return out

        accs = e.loop(_c64(0), main, _c64(c), [self.zero_v] * (size * c), unrolled)
        total = e.loop(main, self.kc, _c64(1), accs[:size], self.step)
        for u in range(1, c):
            total = [b.fadd(t, a) for t, a in zip(total, accs[u * size:(u + 1) * size])]
        return total

    def emit(self) -> None:
        """C's update, one value at a time: rows r < m, columns j < n."""
        b, fn, ety, nv = self.b, self.e.fn, self.ety, self.nv
        accs = self.accumulate()
        for r in range(self.mr):
            row_bb = fn.append_basic_block(f"mk.row{r}")
            next_bb = fn.append_basic_block(f"mk.row{r}.next")
            b.cbranch(b.icmp_signed("<", _c64(r), self.m), row_bb, next_bb)
            b.position_at_end(row_bb)
            for j in range(self.nr):
                col_bb = fn.append_basic_block(f"mk.row{r}.col{j}")
                skip_bb = fn.append_basic_block(f"mk.row{r}.col{j}.next")
                b.cbranch(b.icmp_signed("<", _c64(j), self.n), col_bb, skip_bb)
                b.position_at_end(col_bb)
                v, lane = divmod(r, self.vw)
                x = b.extract_element(accs[j * nv + v], ir.Constant(I32, lane))
                p = b.gep(self.c_base, [_c64(r * self.ldc + j)], inbounds=True, source_etype=ety)
                if self.init_base is not None:  # first K block: from the init operand
                    ip = b.gep(self.init_base, [_c64(r * self.init_rs + j * self.init_cs)],
                               inbounds=True, source_etype=ety)
                    old = b.load(b.select(self.accumulating, p, ip), typ=ety, align=self.esize)
                    new = b.fadd(old, x)
                else:
                    old = b.load(p, typ=ety, align=self.esize)
                    new = b.select(self.accumulating, b.fadd(old, x), x)
                b.store(apply_epilogue(self.e, self.epilogue, new), p, align=self.esize)
                b.branch(skip_bb)
                b.position_at_end(skip_bb)
            b.branch(next_bb)
            b.position_at_end(next_bb)
