"""LLVM IR for `aicc_cpu.conv_kernel`: one register tile of a direct convolution whose
output channels lie in vectors (the weights blocked NCHWc-style), and for
`aicc_cpu.dw_kernel`: a run of output columns of one depthwise channel, the columns in
vectors (see _emit_dw_body).

    acc[j][q] = 0                                           j < owb, q < ocv
    for r < kh, s < kw, c < ic (c unrolled CONV_UNROLL times):
        w[q]      = load <vw x f32> W[woff + q*w_ocs + ((r*kw + s)*ic + c)*vw]
        x         = splat X[xoff + c*x_cs + r*dh*x_rs + s*dw + j*sw]
        acc[j][q] = llvm.fma(x, w[q], acc[j][q])
    O[ooff + (q*vw + l)*o_cs + 0 .. owb] += <acc[0][q][l], ..., acc[owb-1][q][l]>   q*vw + l < ocn

The last step transposes the tile into the NCHW output's rows (shuffles: once per tile,
against ic*kh*kw*owb*ocv FMAs), so the output needs no layout conversion. A tile that is the
output's whole value gets its bias (one vector per q), relu and epilogue region before the
transpose, on the accumulators; a residual is added after it, in the output's layout.

This is MLAS's NchwcConv kernel shape (output columns x blocks of output channels, inputs
broadcast, weights packed so that one vector load serves vw output channels), and the dual
of aicc_cpu.microkernel: there A (the weights) is broadcast and B (the im2col copy of the
input) loaded as vectors; here the input is read where it lies, so no copy is made. The
accumulators are loop-carried phis: pick owb * ocv + ocv + 1 within the register count.
With `pf`, each of the ocv weight streams is prefetched pf input channels ahead, once per
64-byte line (conv_prefetch_rule: Intel cores with AVX-512).
"""

from __future__ import annotations

import hashlib

from llvmlite import ir

from compiler.codegen.llvm.emitter import FunctionEmitter, byte_size, handles, memory_type
from compiler.codegen.llvm.microkernel import (
    Literal,
    apply_epilogue,
    masked_intrinsic,
    prefetch_intrinsic,
    region_key,
)
from compiler.dialects.aicc_cpu import CONV_UNROLL, DW_KERNEL_INTS

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)

_INTS = ("owb", "ocv", "ocn", "vw", "ic", "kh", "kw", "sw", "dh", "dw", "x_cs", "x_rs", "w_ocs",
         "o_cs")


# The independent FMA chains a dw_kernel call keeps at least: with owb vectors of columns, each
# vector's taps go round ceil(DW_MIN_CHAINS / owb) partial sums, added at the end. Without
# them one 7-column vector of a 5x5 stride-2 conv (14x14 -> 7x7) is 25 FMAs in a row, each
# waiting on the last. Measured at one thread on a Zen 3 (AVX2 code, one depthwise conv, A/B
# in one process), 4 against 1: 672 channels 5x5 s2 at 14x14 1.27x (1.14x with SiLU), 576
# channels 5x5 s2 at 14x14 with Hardswish 1.20x, 96 channels 5x5 s2 at 28x28 (two vectors)
# 1.05x; 2 chains gave 1.16-1.22x on the first two, 8 less with SiLU (1.04x). A 3x3 at 28x28
# stride 2 (two vectors) and calls of 4 or more vectors do not change.
DW_MIN_CHAINS = 4


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _tree_sum(b: ir.IRBuilder, values: list):
    """values[0] + values[1] + ..., added pairwise ((a + b) + (c + d))."""
    while len(values) > 1:
        values = [b.fadd(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


@handles("aicc_cpu.conv_kernel", "aicc_cpu.dw_kernel")
def emit_conv_kernel(e: FunctionEmitter, op) -> None:
    """A call of the kernel function for op's configuration (emitted once per module)."""
    ety = memory_type(op.o.type.element_type)
    dw = op.name == "aicc_cpu.dw_kernel"
    ints = DW_KERNEL_INTS if dw else _INTS
    cfg = {k: op.int_prop(k) for k in ints}
    cfg["start"] = op.start_kind
    cfg["res"] = op.res is not None
    cfg["relu"] = op.relu is not None
    cfg["epilogue"] = op.epilogue
    # padding read through: X's pointer may lie before X (not inbounds)
    through = dw and op.reads_padding_through()
    if dw:
        cfg["columns"], cfg["rows"], cfg["plane"] = op.columns(), op.tap_rows(), op.plane()
        cfg["clip_hi"] = op.clip_hi.value.data if op.clip_hi is not None else None
    else:
        cfg["pf"] = op.prefetch_distance
        cfg["l2pf"] = op.l2pf_rate.value.data if op.l2pf_rate is not None else 0
    fn = _kernel_function(e, cfg, ety, "aicc.dw_kernel" if dw else "aicc.conv_kernel", ints,
                          _emit_dw_body if dw else _emit_body)
    b = e.b
    buffers = [(op.x, op.x_off), (op.w, op.w_off), (op.o, op.o_off)]
    if op.bias is not None:
        buffers.append((op.bias, op.bias_off))
    if op.res is not None:
        buffers.append((op.res, op.res_off))
    if op.l2pf is not None:
        buffers.append((op.l2pf, op.l2pf_off))
    b.call(fn, [b.gep(e.get(v), [e.get(off)], inbounds=not (through and i == 0),
                      source_etype=ety) for i, (v, off) in enumerate(buffers)])


def _kernel_function(e: FunctionEmitter, cfg: dict, ety: ir.Type, prefix: str, ints,
                     emit_body) -> ir.Function:
    """`void @<prefix>.<config>(ptr x, ptr w, ptr o [, ptr bias] [, ptr res] [, ptr l2pf])`,
    internal and noinline."""
    name = prefix + "." + ".".join(f"{k}{cfg[k]}" for k in ints)
    if cfg.get("columns") is not None:
        name += ".w{}.c{}".format(*cfg["columns"]).replace("-", "m")
    if cfg.get("rows") is not None and cfg["rows"] != (0, cfg["kh"]):
        name += ".r{}-{}".format(*cfg["rows"])
    if cfg.get("plane") is not None:  # calls whose lanes read the same taps share code
        name += ".plane" + _plane_key(cfg)
    if cfg.get("pf"):
        name += f".pf{cfg['pf']}"
    if cfg.get("l2pf"):
        name += f".l2pf{cfg['l2pf']}"
    if cfg["start"]:
        name += f".start{cfg['start']}"
    name += ".res" * cfg["res"] + ".relu" * cfg["relu"]
    if cfg.get("clip_hi") is not None:
        name += f".hi{cfg['clip_hi']!r}"
    if cfg.get("epilogue") is not None:
        name += ".epi" + region_key(cfg["epilogue"])
    module = e.em.module
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ptr = ir.PointerType()
    nptr = 3 + (cfg["start"] == 2) + cfg["res"] + bool(cfg.get("l2pf"))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * nptr), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    e.em.vector_attrs(fn)
    res_arg = 3 + (cfg["start"] == 2)
    for i, arg in enumerate(fn.args):
        # the residual may be the output itself (an in-place add): each element is read
        # before it is written, but the two may not be marked noalias
        if not (cfg["res"] and i in (2, res_arg)):
            arg.add_attribute("noalias")
        arg.add_attribute("captures(none)")
    k = FunctionEmitter(e.em, fn)
    emit_body(k, fn.args, ety, **cfg)
    k.b.ret_void()
    k.finish()
    return fn


def plane_reads(plane: tuple[int, int, int], columns: tuple[int, int], dh: int, dw: int,
                r: int, s: int, j: int) -> bool:
    """Does lane j of a dw_kernel that spans a plane (`plane` = (x_h, x_r0, p0), `columns` =
    (x_w, x_c0)) read X at tap (r, s)? (See _emit_dw_body.)"""
    (x_h, x_r0, p0), (x_w, x_c0) = plane, columns
    y, x = divmod(p0 + j, x_w)
    return 0 <= x_r0 + y + r * dh < x_h and 0 <= x_c0 + x + s * dw < x_w


def _plane_key(cfg: dict) -> str:
    """A digest of which lanes of a plane-spanning dw_kernel read which taps."""
    where = (cfg["plane"], cfg["columns"], cfg["dh"], cfg["dw"])
    bits = bytes(plane_reads(*where, r, s, j) for r in range(cfg["kh"]) for s in range(cfg["kw"])
                 for j in range(cfg["cols"]))
    return hashlib.sha256(bits).hexdigest()[:12]


def _kernel_args(args, start: int, res: bool) -> tuple:
    """(x, w, o, bias or None, res or None): a kernel function's pointer arguments (an l2pf
    pointer, when there is one, follows them)."""
    return (*args[:3], args[3] if start == 2 else None,
            args[3 + (start == 2)] if res else None)


def _emit_body(e: FunctionEmitter, args, ety, owb, ocv, ocn, vw, ic, kh, kw, sw, dh, dw, x_cs,
               x_rs, w_ocs, o_cs, start, res, relu, epilogue=None, pf=0, l2pf=0) -> None:
    b = e.b
    x_base, w_base, o_base, bias_base, res_base = _kernel_args(args, start, res)
    l2pf_base = args[-1] if l2pf else None
    vty = ir.VectorType(ety, vw)
    esize = byte_size(ety)
    undef_v = Literal(vty, "undef")
    splat_mask = Literal(ir.VectorType(I32, vw), "zeroinitializer")

    def splat(v):
        return b.shuffle_vector(b.insert_element(undef_v, v, ir.Constant(I32, 0)), undef_v,
                                splat_mask)

    prefetch = prefetch_intrinsic(e.em.module)

    def step(xp, wp, c: ir.Value, accs: list, fetch: bool = False) -> list:
        """Input channel c of window tap (xp, wp): ocv weight loads, owb broadcasts; with
        `fetch`, a prefetch of each weight stream pf channels ahead (not inbounds: it may
        point past the weight, which a prefetch never faults on)."""
        woff = b.mul(c, _c64(vw), flags=["nsw"])
        wv = [b.load(b.gep(wp, [woff if q == 0 else b.add(woff, _c64(q * w_ocs), flags=["nsw"])],
                           inbounds=True, source_etype=ety), typ=vty, align=esize)
              for q in range(ocv)]
        for q in range(ocv if fetch else 0):
            ahead = b.gep(wp, [b.add(woff, _c64(q * w_ocs + pf * vw), flags=["nsw"])],
                          source_etype=ety)
            b.call(prefetch, [ahead, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
        xoff = b.mul(c, _c64(x_cs), flags=["nsw"])
        out = list(accs)
        for j in range(owb):
            off = xoff if j == 0 else b.add(xoff, _c64(j * sw), flags=["nsw"])
            xv = splat(b.load(b.gep(xp, [off], inbounds=True, source_etype=ety), typ=ety,
                              align=esize))
            for q in range(ocv):
                out[j * ocv + q] = e.intr("fma", xv, wv[q], out[j * ocv + q])
        return out

    main = ic - ic % CONV_UNROLL
    line = 64 // esize

    def fetch_l2(tap, c, j: int) -> None:
        """Line j of the l2pf_rate lines that the unrolled step at channel c of window tap
        `tap` (r * kw + s) fetches into L2: line (tap * main / CONV_UNROLL + c / CONV_UNROLL)
        * l2pf + j of the l2pf stream."""
        it = b.add(b.mul(tap, _c64(main // CONV_UNROLL), flags=["nsw"]),
                   b.sdiv(c, _c64(CONV_UNROLL)), flags=["nsw"])
        off = b.add(b.mul(it, _c64(l2pf * line), flags=["nsw"]), _c64(j * line), flags=["nsw"])
        p = b.gep(l2pf_base, [off], source_etype=ety)  # not inbounds: may point past it
        b.call(prefetch, [p, ir.Constant(I32, 0), ir.Constant(I32, 2), ir.Constant(I32, 1)])

    def channels(xp, wp, accs: list, tap) -> list:
        def unrolled(c, carried):
            for u in range(CONV_UNROLL):
                cc = c if u == 0 else b.add(c, _c64(u), flags=["nsw"])
                # one prefetch per 64-byte line of each weight stream
                carried = step(xp, wp, cc, carried, fetch=pf > 0 and (u * vw * esize) % 64 == 0)
                for j in range(u, l2pf, CONV_UNROLL):  # the next block's weights, into L2
                    fetch_l2(tap, c, j)
            return carried

        if main:
            accs = e.loop(_c64(0), _c64(main), _c64(CONV_UNROLL), accs, unrolled,
                          known_nonempty=True, unroll=False)
        for c in range(main, ic):
            accs = step(xp, wp, _c64(c), accs)
        return accs

    def tap_row(r, accs):
        def tap(s, carried):
            x_off = b.add(b.mul(r, _c64(dh * x_rs), flags=["nsw"]),
                          b.mul(s, _c64(dw), flags=["nsw"]), flags=["nsw"])
            w_off = b.mul(b.add(b.mul(r, _c64(kw), flags=["nsw"]), s, flags=["nsw"]),
                          _c64(ic * vw), flags=["nsw"])
            xp = b.gep(x_base, [x_off], inbounds=True, source_etype=ety)
            wp = b.gep(w_base, [w_off], inbounds=True, source_etype=ety)
            return channels(xp, wp, carried, b.add(b.mul(r, _c64(kw), flags=["nsw"]), s,
                                                   flags=["nsw"]))

        return e.loop(_c64(0), _c64(kw), _c64(1), accs, tap, known_nonempty=True, unroll=False)

    zero = Literal(vty, "zeroinitializer")
    accs = e.loop(_c64(0), _c64(kh), _c64(1), [zero] * (owb * ocv), tap_row,
                  known_nonempty=True, unroll=False)
    # A tile that is the output's whole value (start 1: from zero, 2: from the bias) takes its
    # bias, and its relu and epilogue when no residual comes between, on the accumulators:
    # vectors of vw channels, one bias load per vector, the epilogue on owb * ocv full
    # vectors instead of ocn rows of owb columns. The rest follows the transpose.
    early = start != 0
    if start == 2:
        for q in range(ocv):
            bq = _channel_vector(e, bias_base, q * vw, min(vw, ocn - q * vw), vty)
            for j in range(owb):
                accs[j * ocv + q] = b.fadd(accs[j * ocv + q], bq)
    post = not (early and res_base is None)
    if not post:
        for i, acc in enumerate(accs):
            if relu:
                acc = e.intr("maximum", acc, zero)
            accs[i] = apply_epilogue(e, epilogue, acc)
    rty = ety if owb == 1 else ir.VectorType(ety, owb)
    for p in range(ocn):
        q, lane = divmod(p, vw)
        if owb == 1:
            row = b.extract_element(accs[q], ir.Constant(I32, lane))
        else:
            row = Literal(rty, "undef")
            for j in range(owb):
                row = b.insert_element(row, b.extract_element(accs[j * ocv + q],
                                                              ir.Constant(I32, lane)),
                                       ir.Constant(I32, j))
        ptr = b.gep(o_base, [_c64(p * o_cs)], inbounds=True, source_etype=ety)
        if start == 0:  # O += the tile
            row = b.fadd(b.load(ptr, typ=rty, align=esize), row)
        if res_base is not None:  # the epilogue: + the residual, then max(., 0)
            rp = b.gep(res_base, [_c64(p * o_cs)], inbounds=True, source_etype=ety)
            row = b.fadd(row, b.load(rp, typ=rty, align=esize))
        if post:
            if relu:
                row = e.intr("maximum", row, ir.Constant(rty, 0.0) if owb == 1
                             else Literal(rty, "zeroinitializer"))
            row = apply_epilogue(e, epilogue, row)
        b.store(row, ptr, align=esize)


def _channel_vector(e: FunctionEmitter, base, first: int, count: int, vty: ir.VectorType):
    """<vw x f32> of base[first .. first + count) (count <= vw), zeros past it (a masked
    load: the bias has no element past the conv's last channel)."""
    b = e.b
    ptr = b.gep(base, [_c64(first)], inbounds=True, source_etype=vty.element)
    align = byte_size(vty.element)
    if count == vty.count:
        return b.load(ptr, typ=vty, align=align)
    mask = ir.Constant(ir.VectorType(I1, vty.count), [i < count for i in range(vty.count)])
    return b.call(masked_intrinsic(e, "load", vty),
                  [ptr, ir.Constant(I32, align), mask, Literal(vty, "zeroinitializer")])


def _emit_dw_body(e: FunctionEmitter, args, ety, cols, owb, vw, kh, kw, sw, dh, dw, x_rs, start,
                  res, relu, columns=None, rows=None, plane=None, clip_hi=None,
                  epilogue=None) -> None:
    """One channel's output columns j < cols in owb vectors (the last with cols % vw lanes
    when that is not 0), straight-line code over the window:

        acc[v][k] = 0                                               v < owb, k < chains
        for r < kh, s < kw (tap t):                                 (unrolled)
            w         = splat W[r*kw + s]
            acc[v][k] = llvm.fma(X[r*dh*x_rs + s*dw + (v*vw + lanes)*sw], w, acc[v][k])
                                                                    k = t % chains
        O[v*vw + lanes] = start + sum_k acc[v][k] (+ R[...]) (max 0)

    with chains = ceil(DW_MIN_CHAINS / owb), so that few vectors still give the FMAs
    independent work.

    A row of X is read with one vector load per vector of columns when sw = 1. When sw = 2
    (dw = 1), each tap row's span of a vector is loaded once, as three vectors, and split
    into its even and odd elements; the kw taps are those, moved by s // 2 lanes (one
    shuffle each). Measured at one thread on a Zen 4 (one depthwise conv + SiLU), against two
    loads and a shuffle per tap: 1.07-1.15x with AVX-512 code, 1.03-1.11x with AVX2 code.
    Otherwise (a dilated stride 2, stride 3 and up) element by element. The loads stop at
    the last column the call reads, and the last vector's stores are masked to its lanes,
    so nothing past the columns' inputs and outputs is touched.

    Padding read through (`columns` = (x_w, x_c0), `rows` = (r_lo, r_hi)): element e of a
    row load at tap s is column x_c0 + v*vw*sw + s*dw + e of X, loaded only where it lies in
    0..x_w (the mask, the rest zeros, which the padding is), and tap rows outside r_lo..r_hi
    are skipped; X's pointer is then not `inbounds` (it may point before X).

    A plane in one row (`plane` = (x_h, x_r0, p0), sw = 1): lane j is the plane's pixel
    p0 + j, at row y and column x = divmod(p0 + j, x_w); its tap (r, s) is loaded where
    0 <= x_r0 + y + r*dh < x_h and 0 <= x_c0 + x + s*dw < x_w, and a tap no lane of a vector
    reads adds nothing to it."""
    b = e.b
    x_base, w_base, o_base, bias_base, res_base = _kernel_args(args, start, res)
    vty = ir.VectorType(ety, vw)
    esize = byte_size(ety)
    undef_v = Literal(vty, "undef")
    zero = Literal(vty, "zeroinitializer")
    align = ir.Constant(I32, esize)
    lanes = [min(vw, cols - v * vw) for v in range(owb)]
    x_w, x_c0 = columns if columns is not None else (None, 0)
    r_lo, r_hi = rows if rows is not None else (0, kh)
    through = columns is not None or (r_lo, r_hi) != (0, kh)  # X's pointer may lie before X

    def ptr(base, off: int):
        return b.gep(base, [_c64(off)], inbounds=base is not x_base or not through,
                     source_etype=ety)

    def load(base, off: int, bits: list[bool]):
        """The elements e of base + off where bits[e] (zeros elsewhere): a plain load when
        all are, a masked one otherwise."""
        if all(bits):
            return b.load(ptr(base, off), typ=vty, align=esize)
        if not any(bits):
            return zero
        m = ir.Constant(ir.VectorType(I1, vw), [int(x) for x in bits])
        return b.call(masked_intrinsic(e, "load", vty), [ptr(base, off), align, m, zero])

    def store(value, base, off: int, n: int) -> None:
        if n == vw:
            b.store(value, ptr(base, off), align=esize)
        else:
            m = ir.Constant(ir.VectorType(I1, vw), [int(i < n) for i in range(vw)])
            b.call(masked_intrinsic(e, "store", vty), [value, ptr(base, off), align, m])

    def splat(v):
        return b.shuffle_vector(b.insert_element(undef_v, v, ir.Constant(I32, 0)), undef_v,
                                Literal(ir.VectorType(I32, vw), "zeroinitializer"))

    def inside(col: int) -> bool:
        """Is X's column `col` (relative to lane 0's first tap) inside the row?"""
        return x_w is None or 0 <= x_c0 + col < x_w

    def reads(r: int, s: int, j: int) -> bool:
        """Does column (or pixel) j of the call read X at tap (r, s), stride 1?"""
        if plane is None:
            return inside(s * dw + j)
        return plane_reads(plane, columns, dh, dw, r, s, j)

    def row(r: int, s: int, v: int):
        """X[r*dh*x_rs + s*dw + (v*vw + l)*sw] for the lanes l of vector v."""
        n, last = lanes[v], v == owb - 1
        col = s * dw + v * vw * sw  # of element 0, relative to x_c0
        off = r * dh * x_rs + col
        if sw == 1:
            return load(x_base, off, [i < n and reads(r, s, v * vw + i) for i in range(vw)])
        if sw == 2:
            # the even elements of two vectors; a vector before the call's last may read the
            # next one's elements, the last only what it needs
            span = 2 * vw if not last else (n - 1) * 2 + 1
            lo = load(x_base, off, [i < span and inside(col + i) for i in range(vw)])
            hi = load(x_base, off + vw, [vw + i < span and inside(col + vw + i) for i in range(vw)])
            return b.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(I32, vw),
                                                        [2 * i for i in range(vw)]))
        out = zero
        for i in range(n):
            if inside(col + i * sw):
                out = b.insert_element(out, b.load(ptr(x_base, off + i * sw), typ=ety,
                                                   align=esize), ir.Constant(I32, i))
        return out

    # stride 2, no dilation: a tap row's columns of vector v are loaded once, as three
    # vectors A, B, C from its first column on, and split into even and odd elements; tap s
    # is then E or O (s < 2), or E / O moved by s // 2 lanes with the first of C's even / odd
    # elements after it: 3 loads and 2 + kw shuffles per tap row, against 2 loads and one
    # shuffle per tap
    split = sw == 2 and dw == 1 and plane is None and 1 < kw and (kw - 1) // 2 <= vw // 2
    gmax = 2 * (cols - 1) + kw - 1  # the last column (from x_c0) the call reads

    def span(off: int, first: int):
        """vw elements of the row at column `first` (from x_c0), zeros past gmax / outside."""
        return load(x_base, off, [first + i <= gmax and inside(first + i) for i in range(vw)])

    def shuffle(x, y, idx):
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, vw), idx))

    def taps2(r: int, v: int) -> list:
        """The kw tap vectors of tap row r, vector v (stride 2)."""
        col = v * vw * 2
        off = r * dh * x_rs + col
        a, bb = span(off, col), span(off + vw, col + vw)
        c = span(off + 2 * vw, col + 2 * vw) if kw > 2 else None  # taps 2.. reach into it
        even = shuffle(a, bb, [2 * i for i in range(vw)])
        odd = shuffle(a, bb, [2 * i + 1 for i in range(vw)])
        if c is not None:
            pad = [0] * (vw - vw // 2)  # (lanes past vw / 2 are not read)
            nxt = (shuffle(c, c, [2 * i for i in range(vw // 2)] + pad),
                   shuffle(c, c, [2 * i + 1 for i in range(vw // 2)] + pad))
        out = []
        for t in range(kw):
            src, m = (even, odd)[t % 2], t // 2
            out.append(src if m == 0 else shuffle(src, nxt[t % 2], [i + m for i in range(vw)]))
        return out

    # each vector's taps go round `chains` accumulators (DW_MIN_CHAINS), summed at the end
    chains = -(-DW_MIN_CHAINS // owb)
    parts = [[zero] * chains for _ in range(owb)]
    for r in range(r_lo, r_hi):
        rowtaps = [taps2(r, v) for v in range(owb)] if split else None
        for s in range(kw):
            k = ((r - r_lo) * kw + s) % chains  # the tap's accumulator
            wv = splat(b.load(ptr(w_base, r * kw + s), typ=ety, align=esize))
            for v in range(owb):
                if split:
                    c0 = v * vw * 2 + s
                    hit = any(inside(c0 + 2 * i) for i in range(lanes[v]))
                    xv = rowtaps[v][s] if hit else zero
                else:
                    xv = row(r, s, v)
                if xv is not zero:  # (a tap no lane reads adds nothing)
                    parts[v][k] = e.intr("fma", xv, wv, parts[v][k])
    accs = [_tree_sum(b, [p for p in ps if p is not zero] or [zero]) for ps in parts]
    bias = splat(b.load(bias_base, typ=ety, align=esize)) if bias_base is not None else None
    for v in range(owb):
        out, n = accs[v], lanes[v]
        prefix = [i < n for i in range(vw)]
        if start == 0:  # O += the columns
            out = b.fadd(load(o_base, v * vw, prefix), out)
        elif start == 2:  # O = the channel's bias + the columns
            out = b.fadd(bias, out)
        if res_base is not None:
            out = b.fadd(out, load(res_base, v * vw, prefix))
        if relu:
            out = e.intr("maximum", out, zero)
        if clip_hi is not None:  # ReLU6's top
            out = e.intr("minimum", out, ir.Constant(vty, [clip_hi] * vw))
        store(apply_epilogue(e, epilogue, out), o_base, v * vw, n)
