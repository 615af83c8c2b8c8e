"""The `aicc_cpu` dialect: CPU kernels that the loop IR calls and `LLVMEmitter` expands.

`tile-matmul` turns a matmul into cache-block loops around one op per register tile:

    aicc_cpu.microkernel %ap[%aoff], %bp[%boff], %c[%coff] k %kc rows %m cols %n
        accumulate %first {mr = 14, nr = 32, vw = 16, a_rs = 1, a_ks = 14, b_ks = 32, ldc = 1024, ku = 4}
        : memref<...xf32>, memref<...xf32>, memref<...xf32>

computes the `mr` x `nr` tile C[coff + r*ldc + j] (+)= sum_k A[aoff + r*a_rs + k*a_ks] *
B[boff + k*b_ks + j] over k < kc, for r < m and j < n (offsets in elements of the flattened
memrefs). The emitter keeps the tile in `mr * nr / vw` vector registers of `vw` lanes, loads
B `vw` lanes at a time, broadcasts A one element at a time, and issues FMA intrinsics; the k
loop is unrolled `ku` times. `accumulate` (i1) adds to C instead of overwriting it.

Edges: rows r >= m and columns j >= n are computed but not stored (lanes past n are masked
out of the C update). The kernel reads all mr rows of A and nr columns of B, which a packed,
zero-padded operand allows. For an unpacked A whose last tile is short, `a_clamp` makes an
edge tile read row min(r, m - 1) instead; for an unpacked B, `b_masked` masks the loads of
an edge tile, so neither reads past its buffer.

With `init %x[%off] : memref<...>`, the first K block (accumulate false) starts C from x
instead of zero: C[r, j] = x[off + r*init_rs + j*init_cs] + sum. init_rs = 0 broadcasts one
row (a bias), init_rs = ldc reads a full matrix (a residual); init_cs = 0 (default 1) one
value per row (a conv's per-channel bias, C being (OC, OH*OW)). This replaces the separate
copy of a bias into C that `fuse-linear-bias` asks for.

With `l2pf %y[%off] : memref<...>`, the kernel fetches lines of y into L2 while it computes:
`l2pf_rate` 64-byte lines per unrolled k step (ku steps), the i-th from y[off] on, so a call
of kc steps fetches (kc / ku) * l2pf_rate consecutive lines. tile-matmul points it at the
part of the next cache block's constant operand that this call's share is (see
tile_matmul.py): that block is then in L2 when its first kernel reads it, instead of coming
from memory at the speed of the first sliver's FMAs.

With `m_lanes`, the tile's mr rows lie in the lanes of ceil(mr / vw) vectors instead, read
from A as vectors (a_rs = 1: a packed sliver), and each of the nr columns (any count, not a
multiple of vw) has its own accumulators, B's elements broadcast: the kernel for the last
few columns of a matrix whose N is not a multiple of vw (N = 49: 3 vectors of 16 and one
column), which a vw-wide tile would compute with one useful lane in vw.
"""

from __future__ import annotations

from abc import ABC

from xdsl.dialects.builtin import (BoolAttr, DenseArrayBase, FloatAttr, Float32Type, IndexType, IntegerAttr,
                                   IntegerType, MemRefType, UnitAttr, i1, i64)
from xdsl.dialects.utils import AbstractYieldOperation
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    EqAttrConstraint,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_region_def,
    prop_def,
    traits_def,
)
from xdsl.traits import IsolatedFromAbove, IsTerminator
from xdsl.utils.exceptions import VerifyException

# The integer properties of a microkernel, in printing order.
MICROKERNEL_INTS = ("mr", "nr", "vw", "a_rs", "a_ks", "b_ks", "ldc", "ku")


def verify_epilogue(name: str, region: Region | None, ety: Attribute) -> None:
    """A kernel's `epilogue` (conv_kernel, dw_kernel, microkernel): one block of arith and
    math ops from one `ety` argument to aicc_cpu.yield of one `ety`."""
    if region is None:
        return
    block = region.block
    last = block.last_op
    if len(block.args) != 1 or block.args[0].type != ety or not isinstance(
            last, YieldOp) or [v.type for v in last.operands] != [ety] or any(
            o.dialect_name() not in ("arith", "math") for o in block.ops if o is not last):
        raise VerifyException(f"{name}: the epilogue is one block of arith and math ops "
                              f"from one {ety} argument to aicc_cpu.yield of one {ety}")


@irdl_op_definition
class MicrokernelOp(IRDLOperation):
    name = "aicc_cpu.microkernel"

    a = operand_def(MemRefType)
    a_off = operand_def(IndexType)
    b = operand_def(MemRefType)
    b_off = operand_def(IndexType)
    c = operand_def(MemRefType)
    c_off = operand_def(IndexType)
    kc = operand_def(IndexType)
    m = operand_def(IndexType)
    n = operand_def(IndexType)
    accumulate = operand_def(EqAttrConstraint(i1))
    init = opt_operand_def(MemRefType)
    init_off = opt_operand_def(IndexType)
    l2pf = opt_operand_def(MemRefType)
    l2pf_off = opt_operand_def(IndexType)

    mr = prop_def(IntegerAttr)
    nr = prop_def(IntegerAttr)
    vw = prop_def(IntegerAttr)
    a_rs = prop_def(IntegerAttr)
    a_ks = prop_def(IntegerAttr)
    b_ks = prop_def(IntegerAttr)
    ldc = prop_def(IntegerAttr)
    ku = prop_def(IntegerAttr)
    a_clamp = opt_prop_def(BoolAttr)
    b_masked = opt_prop_def(BoolAttr)
    b_pf = opt_prop_def(IntegerAttr)
    init_rs = opt_prop_def(IntegerAttr)
    init_cs = opt_prop_def(IntegerAttr)  # absent: 1
    l2pf_rate = opt_prop_def(IntegerAttr)  # with l2pf: lines fetched per ku k steps
    m_lanes = opt_prop_def(BoolAttr)  # the tile's rows in vector lanes (see the module doc)
    # applied to each value of C last, before its store (see _ConvKernelBase): only where the
    # call finishes its tile of C (tile-matmul: one K block)
    epilogue = opt_region_def()

    traits = traits_def(IsolatedFromAbove())  # the epilogue is a function of its argument

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = (
        "$a `[` $a_off `]` `,` $b `[` $b_off `]` `,` $c `[` $c_off `]` `k` $kc `rows` $m "
        "`cols` $n `accumulate` $accumulate (`init` $init^ `[` $init_off `]` `:` type($init))? "
        "(`l2pf` $l2pf^ `[` $l2pf_off `]` `:` type($l2pf))? "
        "(`epilogue` $epilogue^)? attr-dict `:` type($a) `,` type($b) `,` type($c)"
    )

    def __init__(self, a: SSAValue, a_off: SSAValue, b: SSAValue, b_off: SSAValue,
                 c: SSAValue, c_off: SSAValue, kc: SSAValue, m: SSAValue, n: SSAValue,
                 accumulate: SSAValue, *, a_clamp: bool = False, b_masked: bool = False,
                 b_pf: int = 0, init: tuple[SSAValue, SSAValue, int, int] | None = None,
                 l2pf: tuple[SSAValue, SSAValue, int] | None = None, m_lanes: bool = False,
                 epilogue: Region | None = None, **ints: int):
        props = {k: IntegerAttr(ints[k], i64) for k in MICROKERNEL_INTS}
        if m_lanes:
            props["m_lanes"] = BoolAttr(True, i1)
        if init is not None:
            props["init_rs"] = IntegerAttr(init[2], i64)
            if init[3] != 1:
                props["init_cs"] = IntegerAttr(init[3], i64)
        if b_pf:
            props["b_pf"] = IntegerAttr(b_pf, i64)
        if a_clamp:
            props["a_clamp"] = BoolAttr(True, i1)
        if b_masked:
            props["b_masked"] = BoolAttr(True, i1)
        inits = ([init[0]], [init[1]]) if init is not None else ([], [])
        pfs = ([l2pf[0]], [l2pf[1]]) if l2pf is not None else ([], [])
        if l2pf is not None:
            props["l2pf_rate"] = IntegerAttr(l2pf[2], i64)
        super().__init__(operands=[a, a_off, b, b_off, c, c_off, kc, m, n, accumulate, *inits,
                                   *pfs],
                         properties=props, regions=[[epilogue] if epilogue is not None else []])

    def int_prop(self, name: str) -> int:
        return getattr(self, name).value.data

    @property
    def lanes_kernel(self) -> bool:
        return self.m_lanes is not None and bool(self.m_lanes.value.data)

    def verify_(self) -> None:
        v = {k: self.int_prop(k) for k in MICROKERNEL_INTS}
        if min(v.values()) < 1:
            raise VerifyException(f"aicc_cpu.microkernel: sizes and strides must be positive, got {v}")
        if self.lanes_kernel:
            if v["a_rs"] != 1 or self.a_clamp is not None:
                raise VerifyException("aicc_cpu.microkernel: m_lanes reads A's rows as vectors "
                                      "(a_rs = 1, no a_clamp)")
        elif v["nr"] % v["vw"]:
            raise VerifyException(
                f"aicc_cpu.microkernel: nr = {v['nr']} is not a multiple of vw = {v['vw']}")
        if self.accumulate.type != i1:
            raise VerifyException("aicc_cpu.microkernel: accumulate must be an i1")
        if (self.init is None) != (self.init_off is None) or (self.init is None) != (
                self.init_rs is None):
            raise VerifyException("aicc_cpu.microkernel: init needs an offset and init_rs")
        if self.init_cs is not None and (self.init is None or self.init_cs.value.data not in (0, 1)):
            raise VerifyException("aicc_cpu.microkernel: init_cs is 0 or 1, with an init")
        if (self.l2pf is None) != (self.l2pf_rate is None) or (
                self.l2pf_rate is not None and self.l2pf_rate.value.data < 1):
            raise VerifyException("aicc_cpu.microkernel: l2pf needs a positive l2pf_rate")
        elems = {self.a.type.element_type, self.b.type.element_type, self.c.type.element_type}
        if len(elems) != 1:
            raise VerifyException("aicc_cpu.microkernel: A, B and C must have one element type")
        verify_epilogue("aicc_cpu.microkernel", self.epilogue, self.c.type.element_type)


# 4 * (9 C products of |x - zp| <= 255 by |w| <= 128) < 2^31: the integer Winograd's 4 * sum fits i32
WINOGRAD_MAX_CHANNELS = (2**31 - 1) // (4 * 9 * 255 * 128) + 1


@irdl_op_definition
class QGemmOp(IRDLOperation):
    """int8 GEMM rows, for `lower-qgemm`:

        aicc_cpu.qgemm %a[%aoff], %b, %c[%coff] rows %m {n = 512, k = 784, zp = -3}

    C[coff + r*n + j] = sum over kk < k of (A[aoff + r*k + kk] - zp) * B[j*k + kk] for r < m,
    j < n: A (i8) and B (i8, rows of the transposed weight) both contiguous along k, C i32.
    The emitter keeps a 2 x 4 tile of 16-wide i16 dot products in registers (`vpmaddwd`).

    With `quantize %scale, %zp` (f32 values) A is f32, quantized as its rows are read:
    A[...] - zp above becomes clamp(rne(A[...] / scale) + zp, -128, 127) - zp, the run-time
    zero point replacing the attribute (dynamic quantization).

    A packed B, memref<G x K2 x 16 x i8> (G = ceil(N / 8), K2 = ceil(k / 2)): a constant B
    laid out by lower-qgemm for the broadcast kernel, Bp[g, p, 2c + t] = B[8g + c, 2p + t]
    (zeros beyond N and k); see compiler/codegen/llvm/qgemm.py's _BodyPacked.

    With a packed B, `col_scale %s : memref<Nxf32>` makes C f32: C[r, j] = sum * s[j], the
    matmul's int32 -> float32 epilogue (an int8 conv's per-channel scale) done as the tile is
    stored, so the int32 result is never written. `col_bias %b : memref<Nxi32>` adds b[j] to
    the sum first: C[r, j] = float32(sum + b[j]) * s[j].

    With `out_zp` (and a col_scale) C is i8, requantized as the tile is stored, as ONNX
    Runtime's QLinearConv / MlasRequantizeOutput: C[r, j] = clamp(rne(float32(sum [+ b[j]])
    * s[j]) + out_zp, -128, 127), after max(., 0) with `relu`: neither the int32 nor the
    float32 result is ever written.

    With `vnni = 256` or `512` (a CPU with VNNI's `vpdpbusd`, of that width: L = vnni / 32
    lanes) B is packed by quads of k, memref<G x K4 x 4L x i8> (G = ceil(N / L), K4 =
    ceil(k / 4)), Bp[g, p, 4c + t] = B[Lg + c, 4p + t] (zeros beyond N and k), and the colsum,
    memref<G*L x i32> (zeros beyond N), is always there: the kernel multiplies A + 128 (uint8)
    by B, four products per i32 lane, and subtracts (zp + 128) * colsum[j]. `vnni_portable`
    computes the same sums with generic vector code instead of the instruction (for a CPU
    without VNNI: tests of the kernel's layout on any x86-64 host). `pmaddubsw` (with vnni =
    256) computes them with AVX2's `vpmaddubsw`, pairs of u8 x s8 products summed into i16,
    then `vpmaddwd` by ones: exact only for a B within [-64, 64] (7-bit weights: a pair sum
    is at most 2 * 255 * 64 < 2^15 in magnitude), the B lower-qgemm gives it on a CPU without
    VNNI; any B with lower-qgemm's `saturate`, where a pair sum beyond int16 saturates (as in
    ONNX Runtime's U8S8 kernel on AVX2).

    With `window = array<i64: OH, OW, KH, KW, SH, SW, DH, DW>` (a packed or quad-packed B) A is
    the padded NHWC input of a convolution, memref<N x HP x WP x C>, read as its im2col: row r
    (a_off the first one's index, not an element offset) is output pixel (n, p, q) of
    (N, OH, OW), and its k = KH * KW * C elements are A[n, SH p + DH i, SW q + DW j, c] for
    (i, j, c) in (KH, KW, C) order: the kernel gathers each row as it converts it, and the
    im2col matrix is never stored.

    With `winograd = T` (a window 3x3, stride 1, no dilation, C a multiple of 8; no vnni) the
    conv runs as Winograd's F(2x2, 3x3) in integers: B is the transformed weight U = G' g G'^T
    (G' = 2 G, see compiler/lowering/winograd.py) of each (out, in) channel pair,
    memref<16 x G x C/2 x 16 x i16> (G = ceil(N / 8)), Up[ab, g, p, 2c + t] = U[ab][8g + c][2p + t]
    (zeros beyond N), and a_off and m count 2x2 output tiles of (N, ceil(OH/2), ceil(OW/2))
    (under an odd OH or OW the last ones halves), at most T per op (the kernel's buffers hold
    T); c_off is 0 (the kernel writes each tile's 4 rows of C itself). Each tile's input
    window d (4x4, minus zp) becomes V = Bt d B (within [-1020, 1020]: i16),
    M_ab = sum_c V_ab[c] U_ab[., c] (vpmaddwd, i32), and C = (At M A) / 4, exact: the integer
    identity holds modulo 2^32 and the result is 4 times the conv's sum, below 2^31 in magnitude for C < WINOGRAD_MAX_CHANNELS (see
    compiler/codegen/llvm/qgemm.py)."""

    name = "aicc_cpu.qgemm"

    a = operand_def(MemRefType)
    a_off = operand_def(IndexType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    c_off = operand_def(IndexType)
    m = operand_def(IndexType)
    scale = opt_operand_def(Float32Type)
    zero_point = opt_operand_def(Float32Type)
    colsum = opt_operand_def(MemRefType)
    col_scale = opt_operand_def(MemRefType)
    col_bias = opt_operand_def(MemRefType)

    n = prop_def(IntegerAttr)
    k = prop_def(IntegerAttr)
    zp = prop_def(IntegerAttr)
    vnni = opt_prop_def(IntegerAttr)
    vnni_portable = opt_prop_def(UnitAttr)
    pmaddubsw = opt_prop_def(UnitAttr)
    window = opt_prop_def(DenseArrayBase)
    winograd = opt_prop_def(IntegerAttr)
    out_zp = opt_prop_def(IntegerAttr)
    relu = opt_prop_def(BoolAttr)

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = ("$a `[` $a_off `]` `,` $b `,` $c `[` $c_off `]` `rows` $m "
                       "(`quantize` $scale^ `,` $zero_point)? (`colsum` $colsum^ `:` type($colsum))? "
                       "(`col_scale` $col_scale^ `:` type($col_scale))? (`col_bias` $col_bias^ `:` type($col_bias))? "
                       "attr-dict "
                       "`:` type($a) `,` type($b) `,` type($c)")

    def __init__(self, a: SSAValue, a_off: SSAValue, b: SSAValue, c: SSAValue, c_off: SSAValue,
                 m: SSAValue, *, n: int, k: int, zp: int, quantize: tuple[SSAValue, SSAValue] | None = None,
                 colsum: SSAValue | None = None, col_scale: SSAValue | None = None,
                 col_bias: SSAValue | None = None, out_zp: int | None = None, relu: bool = False,
                 vnni: int = 0, vnni_portable: bool = False, pmaddubsw: bool = False,
                 window: tuple[int, ...] | None = None, winograd: int = 0):
        scale, zero_point = ([quantize[0]], [quantize[1]]) if quantize else ([], [])
        props = {"n": IntegerAttr(n, i64), "k": IntegerAttr(k, i64), "zp": IntegerAttr(zp, i64)}
        if out_zp is not None:
            props["out_zp"] = IntegerAttr(out_zp, i64)
        if relu:
            props["relu"] = BoolAttr.from_bool(True)
        if vnni:
            props["vnni"] = IntegerAttr(vnni, i64)
            if vnni_portable:
                props["vnni_portable"] = UnitAttr()
            if pmaddubsw:
                props["pmaddubsw"] = UnitAttr()
        if window is not None:
            props["window"] = DenseArrayBase.from_list(i64, list(window))
        if winograd:
            props["winograd"] = IntegerAttr(winograd, i64)
        super().__init__(operands=[a, a_off, b, c, c_off, m, scale, zero_point, [colsum] if colsum else [],
                                   [col_scale] if col_scale else [], [col_bias] if col_bias else []],
                         properties=props)

    @property
    def requantized(self) -> bool:
        return self.out_zp is not None

    def window_of(self) -> tuple[int, ...] | None:
        """(OH, OW, KH, KW, SH, SW, DH, DW, HP, WP) of a windowed A (see the op), else None."""
        if self.window is None:
            return None
        _, hp, wp, _ = self.a.type.get_shape()
        return (*(int(v) for v in self.window.get_values()), hp, wp)

    @property
    def vnni_lanes(self) -> int:
        """The i32 lanes of the VNNI kernel (8 or 16); 0 for the vpmaddwd kernels."""
        return self.vnni.value.data // 32 if self.vnni is not None else 0

    @property
    def dynamic(self) -> bool:
        return self.scale is not None

    @property
    def packed(self) -> bool:
        return len(self.b.type.get_shape()) == 3 or self.winograd is not None

    @property
    def winograd_tiles(self) -> int:
        """The tiles of the Winograd kernel's buffers (see the op), 0 for the GEMM kernels."""
        return self.winograd.value.data if self.winograd is not None else 0

    def verify_(self) -> None:
        if min(self.n.value.data, self.k.value.data) < 1:
            raise VerifyException("aicc_cpu.qgemm: n and k must be positive")
        if (self.scale is None) != (self.zero_point is None):
            raise VerifyException("aicc_cpu.qgemm: quantize takes a scale and a zero point")
        if self.colsum is not None and (getattr(self.colsum.type.element_type, "width", None) is None or
                                        self.colsum.type.element_type.width.data != 32):
            raise VerifyException(f"aicc_cpu.qgemm: colsum must be i32, got {self.colsum.type}")
        n, k, b_shape = self.n.value.data, self.k.value.data, self.b.type.get_shape()
        lanes = self.vnni_lanes
        if self.vnni is not None and self.vnni.value.data not in (256, 512):
            raise VerifyException(f"aicc_cpu.qgemm: vnni must be 256 or 512, got {self.vnni.value.data}")
        if self.vnni_portable is not None and not lanes:
            raise VerifyException("aicc_cpu.qgemm: vnni_portable needs vnni")
        if self.pmaddubsw is not None and (lanes != 8 or self.vnni_portable is not None):
            raise VerifyException("aicc_cpu.qgemm: pmaddubsw needs vnni = 256 (and not vnni_portable)")
        if self.window is not None:
            w, a_shape = self.window.get_values(), self.a.type.get_shape()
            if len(w) != 8 or min(w) < 1 or len(a_shape) != 4 or min(a_shape) < 1 or self.dynamic \
                    or not (self.packed or lanes) or w[2] * w[3] * a_shape[3] != k \
                    or (w[0] - 1) * w[4] + (w[2] - 1) * w[6] >= a_shape[1] \
                    or (w[1] - 1) * w[5] + (w[3] - 1) * w[7] >= a_shape[2]:
                raise VerifyException(
                    "aicc_cpu.qgemm: a window [OH, OW, KH, KW, SH, SW, DH, DW] takes a packed B, an int8 A "
                    f"memref<N x HP x WP x C> with KH * KW * C = k = {k} whose window stays inside it, got "
                    f"{list(w)} and {self.a.type}")
        if self.winograd is not None:
            w, a_shape = self.window_of(), self.a.type.get_shape()
            c = a_shape[3]
            if self.winograd_tiles < 1 or w is None or tuple(w[2:8]) != (3, 3, 1, 1, 1, 1) or c % 8 \
                    or c >= WINOGRAD_MAX_CHANNELS or lanes or b_shape != (16, -(-n // 8), c // 2, 16) \
                    or self.b.type.element_type != IntegerType(16):
                raise VerifyException(
                    "aicc_cpu.qgemm: winograd takes a window [OH, OW, 3, 3, 1, 1, 1, 1], an "
                    f"input of C < {WINOGRAD_MAX_CHANNELS} channels, a multiple of 8, no vnni, and a B "
                    f"memref<16x{-(-n // 8)}xC/2x16xi16>, got window {None if w is None else list(w[:8])}, "
                    f"{self.a.type} and {self.b.type}")
        elif lanes:
            g = -(-n // lanes)
            if b_shape != (g, -(-k // 4), 4 * lanes):
                raise VerifyException(f"aicc_cpu.qgemm: a vnni = {32 * lanes} B must be a memref<{g}x{-(-k // 4)}x"
                                      f"{4 * lanes}xi8>, got {self.b.type}")
            if self.colsum is None or self.colsum.type.get_shape() != (g * lanes,):
                raise VerifyException(f"aicc_cpu.qgemm: vnni = {32 * lanes} takes a colsum memref<{g * lanes}xi32>")
        elif self.packed:
            if b_shape != (-(-n // 8), -(-k // 2), 16) or self.colsum is not None:
                raise VerifyException(f"aicc_cpu.qgemm: a packed B must be a memref<{-(-n // 8)}x{-(-k // 2)}x16xi8> "
                                      f"(and takes no colsum), got {self.b.type}")
        elif b_shape != (n, k) or self.colsum is not None:
            raise VerifyException(f"aicc_cpu.qgemm: B must be a memref<{n}x{k}xi8> (and takes no colsum), got "
                                  f"{self.b.type}")
        if self.col_scale is not None and (not self.packed or self.col_scale.type.get_shape() != (n,)
                                           or not isinstance(self.col_scale.type.element_type, Float32Type)):
            raise VerifyException(f"aicc_cpu.qgemm: col_scale takes a packed B and a memref<{n}xf32>, got "
                                  f"{self.col_scale.type}")
        if (self.col_bias is not None or self.requantized) and self.col_scale is None:
            raise VerifyException("aicc_cpu.qgemm: col_bias and out_zp take a col_scale")
        if self.relu is not None and not self.requantized:
            raise VerifyException("aicc_cpu.qgemm: relu takes an out_zp")
        if self.requantized and not -128 <= self.out_zp.value.data <= 127:
            raise VerifyException(f"aicc_cpu.qgemm: out_zp must be within [-128, 127], got {self.out_zp.value.data}")
        if self.col_bias is not None and (self.col_bias.type.get_shape() != (n,) or
                                          getattr(self.col_bias.type.element_type, "width", None) is None or
                                          self.col_bias.type.element_type.width.data != 32):
            raise VerifyException(f"aicc_cpu.qgemm: col_bias must be a memref<{n}xi32>, got {self.col_bias.type}")
        for v, width in ((self.a, 8), (self.b, 16 if self.winograd is not None else 8),
                         (self.c, 8 if self.requantized else 32)):
            e = v.type.element_type
            f32 = (v is self.a and self.dynamic) or (v is self.c and self.col_scale is not None
                                                     and not self.requantized)
            ok = isinstance(e, Float32Type) if f32 else (hasattr(e, "width") and e.width.data == width)
            if not ok:
                c_kind = "an i8" if self.requantized else "an f32" if self.col_scale is not None else "an i32"
                raise VerifyException(f"aicc_cpu.qgemm: expected {'an f32' if self.dynamic else 'an i8'} A, "
                                      f"an i8 B and {c_kind} C, got {v.type}")


# The integer properties of a conv kernel, in printing order.
# Input channels per step of conv_kernel's unrolled channel loop (its l2pf_rate is per step)
CONV_UNROLL = 4

CONV_KERNEL_INTS = ("owb", "ocv", "ocn", "vw", "ic", "kh", "kw", "sw", "dh", "dw", "x_cs",
                    "x_rs", "w_ocs", "o_cs")


class _ConvKernelBase(IRDLOperation, ABC):
    """What conv_kernel and dw_kernel share: X, W and O at offsets, the optional bias and
    residual, the start and relu, the epilogue region, the assembly format and the checks on
    them.

    `epilogue`, when present, is an elementwise function applied to each output value last,
    right before the store (after the start, the residual, relu and clip_hi): one block whose
    argument is the value (f32), of arith and math ops on f32 scalars, ending in
    `aicc_cpu.yield` of the result. The kernels apply it to whole vectors of outputs in
    registers (SiLU, hardswish, sigmoid, GELU after the conv, with no pass over its output):

        aicc_cpu.conv_kernel ... epilogue {
        ^bb0(%v: f32):
          %e = math.exp ...
          aicc_cpu.yield %r : f32
        } {owb = 14, ...}"""

    x = operand_def(MemRefType)
    x_off = operand_def(IndexType)
    w = operand_def(MemRefType)
    w_off = operand_def(IndexType)
    o = operand_def(MemRefType)
    o_off = operand_def(IndexType)
    bias = opt_operand_def(MemRefType)
    bias_off = opt_operand_def(IndexType)
    res = opt_operand_def(MemRefType)
    res_off = opt_operand_def(IndexType)
    l2pf = opt_operand_def(MemRefType)  # conv_kernel only: see ConvKernelOp
    l2pf_off = opt_operand_def(IndexType)

    start = opt_prop_def(IntegerAttr)  # absent: 0
    relu = opt_prop_def(UnitAttr)
    epilogue = opt_region_def()

    traits = traits_def(IsolatedFromAbove())  # the epilogue is a function of its argument

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = ("$x `[` $x_off `]` `,` $w `[` $w_off `]` `,` $o `[` $o_off `]` "
                       "(`bias` $bias^ `[` $bias_off `]` `:` type($bias))? "
                       "(`res` $res^ `[` $res_off `]` `:` type($res))? "
                       "(`l2pf` $l2pf^ `[` $l2pf_off `]` `:` type($l2pf))? "
                       "(`epilogue` $epilogue^)? "
                       "attr-dict `:` type($x) `,` type($w) `,` type($o)")

    def _build(self, x, x_off, w, w_off, o, o_off, props: dict, start: int,
               bias: tuple[SSAValue, SSAValue] | None, res: tuple[SSAValue, SSAValue] | None,
               relu: bool, epilogue: Region | None = None,
               l2pf: tuple[SSAValue, SSAValue] | None = None) -> None:
        if start:
            props["start"] = IntegerAttr(start, i64)
        if relu:
            props["relu"] = UnitAttr()
        biases = ([bias[0]], [bias[1]]) if bias is not None else ([], [])
        residuals = ([res[0]], [res[1]]) if res is not None else ([], [])
        pfs = ([l2pf[0]], [l2pf[1]]) if l2pf is not None else ([], [])
        super().__init__(operands=[x, x_off, w, w_off, o, o_off, *biases, *residuals, *pfs],
                         properties=props, regions=[[epilogue] if epilogue is not None else []])

    @property
    def start_kind(self) -> int:
        return self.start.value.data if self.start is not None else 0

    def int_prop(self, name: str) -> int:
        return getattr(self, name).value.data

    def verify_common(self, name: str) -> None:
        """The checks conv_kernel and dw_kernel share: start, bias, residual, types."""
        if self.start_kind not in (0, 1, 2) or (self.start_kind == 2) != (self.bias is not None):
            raise VerifyException(f"{name}: start is 0 (O), 1 (zero) or 2 (with a bias operand)")
        elems = {self.x.type.element_type, self.w.type.element_type, self.o.type.element_type}
        for v in (self.bias, self.res):
            if v is not None:
                elems.add(v.type.element_type)
        if len(elems) != 1 or not isinstance(self.x.type.element_type, Float32Type):
            raise VerifyException(f"{name}: X, W, O (and bias, res) must be f32")
        if self.res is not None and self.start_kind == 0:
            raise VerifyException(f"{name}: a residual needs start 1 or 2")
        verify_epilogue(name, self.epilogue, self.o.type.element_type)


@irdl_op_definition
class ConvKernelOp(_ConvKernelBase):
    """One register tile of a direct convolution, its output channels in vectors, for
    `tile-conv`:

        aicc_cpu.conv_kernel %x[%xoff], %w[%woff], %o[%ooff]
            {owb = 6, ocv = 2, ocn = 16, vw = 8, ic = 64, kh = 3, kw = 3, sw = 1, dh = 1,
             dw = 1, x_cs = 3364, x_rs = 58, w_ocs = 4608, o_cs = 3136}

    adds, for j < owb output columns and p < ocn output channels (p = q*vw + l, q < ocv),

        O[ooff + p*o_cs + j] += sum over c < ic, r < kh, s < kw of
            X[xoff + c*x_cs + r*dh*x_rs + s*dw + j*sw] * W[woff + q*w_ocs + ((r*kw + s)*ic + c)*vw + l]

    X is the (padded) input in plain NCHW, read one scalar at a time and broadcast; W the
    weight packed at compile time as [OC/vw][KH][KW][IC][vw] (zero past OC); O the NCHW
    output, already holding its start (zeros or the bias). The owb x ocv vector
    accumulators stay in registers over the whole reduction, and are transposed into O's
    rows at the end.

    `start` says where a row starts from: absent or 0, O itself (+=, as above); 1, zero (O is
    overwritten, never read); 2, the channel's bias, `bias %b[%boff]` (O[...] = b[boff + p] +
    sum): the zero fill or bias broadcast of the output that tile-conv folds in. Then an
    epilogue, the elementwise op after the conv that tile-conv folds in: `res %r[%roff]` adds
    a residual read like O (r[roff + p*o_cs + j]), and `relu` takes max(., 0), before the
    store. `pf` (absent: 0) prefetches each weight vector's stream pf input channels ahead
    (pf * vw floats), into L1. With `l2pf %y[%off]`, the kernel also fetches lines of y into
    L2, `l2pf_rate` 64-byte lines per unrolled step of the channel loop, the i-th from
    y[off] on (a call of kh * kw * ic / 4 such steps fetches that many times l2pf_rate
    consecutive lines): tile-conv points it at this call's share of the next block of
    channels' weights, as tile-matmul does for its kernels (MicrokernelOp)."""

    name = "aicc_cpu.conv_kernel"

    owb = prop_def(IntegerAttr)
    ocv = prop_def(IntegerAttr)
    ocn = prop_def(IntegerAttr)
    vw = prop_def(IntegerAttr)
    ic = prop_def(IntegerAttr)
    kh = prop_def(IntegerAttr)
    kw = prop_def(IntegerAttr)
    sw = prop_def(IntegerAttr)
    dh = prop_def(IntegerAttr)
    dw = prop_def(IntegerAttr)
    x_cs = prop_def(IntegerAttr)
    x_rs = prop_def(IntegerAttr)
    w_ocs = prop_def(IntegerAttr)
    o_cs = prop_def(IntegerAttr)
    pf = opt_prop_def(IntegerAttr)  # absent: 0
    l2pf_rate = opt_prop_def(IntegerAttr)  # with l2pf: lines fetched per unrolled step

    def __init__(self, x: SSAValue, x_off: SSAValue, w: SSAValue, w_off: SSAValue,
                 o: SSAValue, o_off: SSAValue, *, start: int = 0,
                 bias: tuple[SSAValue, SSAValue] | None = None,
                 res: tuple[SSAValue, SSAValue] | None = None, relu: bool = False,
                 epilogue: Region | None = None, pf: int = 0,
                 l2pf: tuple[SSAValue, SSAValue, int] | None = None, **ints: int):
        props = {k: IntegerAttr(ints[k], i64) for k in CONV_KERNEL_INTS}
        if pf:
            props["pf"] = IntegerAttr(pf, i64)
        if l2pf is not None:
            props["l2pf_rate"] = IntegerAttr(l2pf[2], i64)
        self._build(x, x_off, w, w_off, o, o_off, props, start, bias, res, relu, epilogue,
                    l2pf[:2] if l2pf is not None else None)

    @property
    def prefetch_distance(self) -> int:
        return self.pf.value.data if self.pf is not None else 0

    def verify_(self) -> None:
        v = {k: self.int_prop(k) for k in CONV_KERNEL_INTS}
        if min(v.values()) < 1:
            raise VerifyException(f"aicc_cpu.conv_kernel: sizes and strides must be positive, got {v}")
        if not (v["ocv"] - 1) * v["vw"] < v["ocn"] <= v["ocv"] * v["vw"]:
            raise VerifyException(f"aicc_cpu.conv_kernel: ocn = {v['ocn']} channels do not fill "
                                  f"ocv = {v['ocv']} vectors of vw = {v['vw']}")
        if self.prefetch_distance < 0:
            raise VerifyException(f"aicc_cpu.conv_kernel: pf = {self.prefetch_distance} must not "
                                  "be negative")
        if (self.l2pf is None) != (self.l2pf_rate is None) or (
                self.l2pf_rate is not None and self.l2pf_rate.value.data < 1):
            raise VerifyException("aicc_cpu.conv_kernel: l2pf needs a positive l2pf_rate")
        self.verify_common("aicc_cpu.conv_kernel")


DW_KERNEL_INTS = ("cols", "owb", "vw", "kh", "kw", "sw", "dh", "dw", "x_rs")


@irdl_op_definition
class DwKernelOp(_ConvKernelBase):
    """A run of output columns of one channel of a depthwise convolution, for `tile-conv`:

        aicc_cpu.dw_kernel %x[%xoff], %w[%woff], %o[%ooff]
            {cols = 32, owb = 4, vw = 8, kh = 3, kw = 3, sw = 2, dh = 1, dw = 1, x_rs = 114}

    adds, for j < cols output columns (cols <= owb * vw),

        O[ooff + j] += sum over r < kh, s < kw of X[xoff + r*dh*x_rs + s*dw + j*sw] * W[woff + r*kw + s]

    X is the channel's (padded) input plane, W its kh x kw weights, O its output row. The
    columns lie in owb vectors of vw lanes (the last one partly, with masked loads and
    stores): each weight is broadcast and multiplied into owb vectors of X read along the row
    (with stride 2, two loads and a shuffle of the even lanes), the accumulators staying in
    registers over the whole window. `start`, `bias`, `res` and `relu` are conv_kernel's,
    with one bias value for the channel (b[boff]); `clip_hi` then takes min(., clip_hi) after
    relu (ReLU6).

    Zero padding read through (X unpadded): with `x_w`, X's rows are x_w columns wide and
    lane j's tap s reads column x_c0 + j*sw + s*dw, a zero outside 0 <= column < x_w (masked
    loads: nothing outside the row is read); `r_lo` <= r < `r_hi` are the tap rows inside X
    (the others are zeros: skipped). xoff may then point before X's first element.

    A whole plane in one row (`x_h`, `x_r0`, `p0`; needs x_w, sw = 1 and x_rs = x_w, an
    output as wide as X): the columns are the pixels p0 + j of the channel's output plane,
    flattened, lane j at row y and column x = divmod(p0 + j, x_w). Tap (r, s) then reads
    X[xoff + j + r*dh*x_rs + s*dw] as above, a zero unless 0 <= x_r0 + y + r*dh < x_h and
    0 <= x_c0 + x + s*dw < x_w: a small image fills the vectors across its rows."""

    name = "aicc_cpu.dw_kernel"

    cols = prop_def(IntegerAttr)
    owb = prop_def(IntegerAttr)
    vw = prop_def(IntegerAttr)
    kh = prop_def(IntegerAttr)
    kw = prop_def(IntegerAttr)
    sw = prop_def(IntegerAttr)
    dh = prop_def(IntegerAttr)
    dw = prop_def(IntegerAttr)
    x_rs = prop_def(IntegerAttr)
    clip_hi = opt_prop_def(FloatAttr)  # after relu: min(., clip_hi) (ReLU6)
    x_w = opt_prop_def(IntegerAttr)  # padding read through: X's width
    x_c0 = opt_prop_def(IntegerAttr)  # ... and the column of lane 0's tap s = 0
    r_lo = opt_prop_def(IntegerAttr)  # the tap rows inside X (absent: 0 and kh)
    r_hi = opt_prop_def(IntegerAttr)
    x_h = opt_prop_def(IntegerAttr)  # a whole plane in one row: X's height
    x_r0 = opt_prop_def(IntegerAttr)  # ... the row of output row 0's tap r = 0
    p0 = opt_prop_def(IntegerAttr)  # ... and the plane's pixel in lane 0

    def __init__(self, x: SSAValue, x_off: SSAValue, w: SSAValue, w_off: SSAValue,
                 o: SSAValue, o_off: SSAValue, *, start: int = 0,
                 bias: tuple[SSAValue, SSAValue] | None = None,
                 res: tuple[SSAValue, SSAValue] | None = None, relu: bool = False,
                 clip_hi: float | None = None, columns: tuple[int, int] | None = None,
                 rows: tuple[int, int] | None = None, plane: tuple[int, int, int] | None = None,
                 epilogue: Region | None = None, **ints: int):
        """`columns`: (x_w, x_c0), `rows`: (r_lo, r_hi), for padding read through; `plane`:
        (x_h, x_r0, p0), a whole plane in one row."""
        props = {k: IntegerAttr(ints[k], i64) for k in DW_KERNEL_INTS}
        if clip_hi is not None:
            props["clip_hi"] = FloatAttr(clip_hi, Float32Type())
        if columns is not None:
            props["x_w"], props["x_c0"] = (IntegerAttr(v, i64) for v in columns)
        if rows is not None:
            props["r_lo"], props["r_hi"] = (IntegerAttr(v, i64) for v in rows)
        if plane is not None:
            props["x_h"], props["x_r0"], props["p0"] = (IntegerAttr(v, i64) for v in plane)
        self._build(x, x_off, w, w_off, o, o_off, props, start, bias, res, relu, epilogue)

    def tap_rows(self) -> tuple[int, int]:
        """(r_lo, r_hi): the tap rows the kernel reads."""
        if self.r_lo is None:
            return 0, self.int_prop("kh")
        return self.int_prop("r_lo"), self.int_prop("r_hi")

    def columns(self) -> tuple[int, int] | None:
        """(x_w, x_c0) when the columns are masked to X's width, else None."""
        return None if self.x_w is None else (self.int_prop("x_w"), self.int_prop("x_c0"))

    def plane(self) -> tuple[int, int, int] | None:
        """(x_h, x_r0, p0) when the columns are a flattened plane's pixels, else None."""
        return None if self.x_h is None else tuple(self.int_prop(k) for k in ("x_h", "x_r0", "p0"))

    def reads_padding_through(self) -> bool:
        """Does the kernel skip tap rows or mask columns (X's offset may then lie before X)?"""
        return self.columns() is not None or self.tap_rows() != (0, self.int_prop("kh"))

    def verify_(self) -> None:
        v = {k: self.int_prop(k) for k in DW_KERNEL_INTS}
        if self.l2pf is not None:
            raise VerifyException("aicc_cpu.dw_kernel: no l2pf (a conv_kernel's)")
        if min(v.values()) < 1:
            raise VerifyException(f"aicc_cpu.dw_kernel: sizes and strides must be positive, got {v}")
        if not (v["owb"] - 1) * v["vw"] < v["cols"] <= v["owb"] * v["vw"]:
            raise VerifyException(f"aicc_cpu.dw_kernel: cols = {v['cols']} do not fill "
                                  f"owb = {v['owb']} vectors of vw = {v['vw']}")
        if self.clip_hi is not None and self.relu is None:
            raise VerifyException("aicc_cpu.dw_kernel: clip_hi needs relu (it is ReLU6's top)")
        if (self.x_w is None) != (self.x_c0 is None) or (self.r_lo is None) != (self.r_hi is None):
            raise VerifyException("aicc_cpu.dw_kernel: x_w and x_c0, r_lo and r_hi go together")
        lo, hi = self.tap_rows()
        if not 0 <= lo < hi <= v["kh"] or (self.x_w is not None and self.int_prop("x_w") < 1):
            raise VerifyException(f"aicc_cpu.dw_kernel: tap rows {lo}..{hi} of kh = {v['kh']}, "
                                  "or a width x_w < 1")
        plane = [getattr(self, k) is None for k in ("x_h", "x_r0", "p0")]
        if len(set(plane)) > 1:
            raise VerifyException("aicc_cpu.dw_kernel: x_h, x_r0 and p0 go together")
        if self.x_h is not None and (
                self.x_w is None or v["sw"] != 1 or v["x_rs"] != self.int_prop("x_w")
                or self.int_prop("x_h") < 1 or self.int_prop("p0") < 0):
            raise VerifyException("aicc_cpu.dw_kernel: a plane in one row needs x_w = x_rs, "
                                  "sw = 1, x_h >= 1 and p0 >= 0")
        self.verify_common("aicc_cpu.dw_kernel")


@irdl_op_definition
class YieldOp(AbstractYieldOperation[Attribute]):
    """The end of a conv_kernel's or dw_kernel's epilogue: its result."""

    name = "aicc_cpu.yield"

    traits = traits_def(IsTerminator())


AICCCPU = Dialect("aicc_cpu", [MicrokernelOp, QGemmOp, ConvKernelOp, DwKernelOp, YieldOp], [])
