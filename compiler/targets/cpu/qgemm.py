"""lower-qgemm: an int8 matmul generic becomes parallel blocks of `aicc_cpu.qgemm` rows.

    linalg.generic {aicc.qgemm = -3 : i64} ins(%a, %b : memref<64x784xi8>, memref<512x784xi8>)
                                           outs(%c : memref<64x512xi32>)  // i32 dot products
  ==>
    scf.parallel (%t) = (0) to (8) step (1) {
      %r0 = %t * 8 ;  %m = min(8, 64 - %r0)
      aicc_cpu.qgemm %a[%r0 * 784], %b, %c[%r0 * 512] rows %m {n = 512, k = 784, zp = -3}
    }

matmul_integer's lowering (compiler/lowering/quant_to_linalg.py) marks its generic with the
lhs zero point when the rhs is read as (N, K); the kernel (compiler/codegen/llvm/qgemm.py)
needs AVX2's `vpmaddwd`, so the pass runs only for CPUs that have it (`enabled`), and the
generic loop nest remains the fallback everywhere else. Rows go to threads in blocks of
`ROWS_PER_TASK` (the lhs rows, batch dims included, are contiguous).

A dynamic_matmul_integer's generic (`aicc.qgemm_dynamic`: a float lhs and its run-time
[scale, zero point]) becomes the same row blocks of `aicc_cpu.qgemm ... quantize %s, %z`,
which quantize each float row as the kernel packs it: the int8 lhs is never stored.

A constant B is replaced by a copy packed for the broadcast kernel (`<name>_packed`, `pack`):
pairs of k for groups of 8 columns, so that each vpmaddwd multiplies one row's broadcast pair
of A by 8 columns at once (accumulators hold C's rows: no horizontal sums), and no dot product
has a scalar tail. The original global goes if nothing else reads it.

On a CPU with VNNI (`vnni = 256 | 512`, from CPUMachine.vnni_bits) every constant B goes to
the vpdpbusd kernel instead (`pack_vnni`: quads of k for groups of vnni / 32 columns, and a
colsum, B's row sums padded to whole groups), whatever its range: u8 x s8 quads summed into i32
cannot saturate. `vnni_portable` asks for that kernel without the instruction (tests).

Without VNNI, a constant B whose values all lie within [-64, 64] (7-bit weights:
`quantize_dynamic(..., reduce_range=True)`, `quantize(..., reduce_range=True)`, or an ONNX
model quantized with reduce_range) gets the same quad layout for 8 lanes and the kernel's
`pmaddubsw` form: uint8 A by B with `vpmaddubsw`, whose i16 pair sums cannot saturate, then
`vpmaddwd` by ones, as ONNX Runtime's AVX2 u8 x s8 kernel does (see the op). With `saturate`
(the cpu target's `int8_saturation`) every constant B takes that kernel without VNNI, 8-bit
weights too: then a pair sum a[2i] b[2i] + a[2i+1] b[2i+1] beyond int16 saturates, as in ONNX
Runtime's MLAS U8S8 GEMM kernels on AVX2 and on AVX-512 without VNNI (and oneDNN's and TVM's),
which pair the same products (k = 2i, 2i + 1 of A's uint8 values, B packed by quads of k), at
their speed. With VNNI nothing saturates.

An int8 conv's im2col (quantize-matmul's gather of a padded NHWC input into the GEMM's A,
a copy generic out[n, p, q, i, j, c] = in[n, SH p + DH i, SW q + DW j, c]) whose buffer
nothing else reads is read through (`_im2col`): with a constant B, the kernel gets the NHWC
input and a `window`, and gathers each row into its row buffer as it converts it, so the
im2col matrix (KH * KW times the input's bytes) is neither written nor read back:

    linalg.generic ins(%x : memref<1x10x10x8xi8>) outs(%cols : memref<1x8x8x3x3x8xi8>)  // im2col
    %a = collapse_shape / expand_shape %cols : memref<64x72xi8>
    linalg.generic {aicc.qgemm = 0} ins(%a, %w) ...
  ==>
    aicc_cpu.qgemm %x[%row0], %w_packed, %c[%coff] rows %m {..., window = array<i64: 8, 8, 3, 3, 1, 1, 1, 1>}

Such a window that is 3x3, stride 1, no dilation, with C a multiple of 8, on a CPU without
VNNI, gets the integer Winograd kernel instead (`winograd = T`, see aicc_cpu.qgemm;
`winograd=false` or AICC_INT8_WINOGRAD=0 keep the direct one): B is replaced by its F(2x2, 3x3)
transform as i16 (`pack_winograd`), and the tasks take T 2x2 output tiles each
(`_winograd_tiles`; under an odd OH or OW the last tiles are halves). Not under `saturate` with
an 8-bit B, whose pair sums the user asked to saturate as the direct u8 x s8 kernel does: the
Winograd sums are exact.

    aicc_cpu.qgemm %x[%t0], %w_winograd, %c[%0] rows %m {..., window = array<i64: 8, 8, 3, 3, 1, 1, 1, 1>, winograd = 24}
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
)
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Block, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.codegen.llvm.qgemm import PACK_COLS, WINO_MR
from compiler.dialects import aicc
from compiler.dialects.aicc_cpu import WINOGRAD_MAX_CHANNELS, QGemmOp
from compiler.lowering.loop_builder import IndexBuilder
from compiler.lowering.quant_to_linalg import QGEMM_ATTR, QGEMM_DYNAMIC_ATTR
from compiler.lowering.utils import view_root
from compiler.lowering.winograd import G
from compiler.targets.cpu.tile_conv import buffer_users, erase_if_dead, keep_alive_through
ROWS_PER_TASK = 8
WINOGRAD_G2 = (2 * G).astype(np.int64)  # F(2x2, 3x3)'s G doubled: integers


U8_WEIGHT_MIN, U8_WEIGHT_MAX = -64, 64  # B within these: vpmaddubsw's int16 pair sums cannot saturate (2 * 255 * 64 < 2^15)


def _constant(module: ModuleOp, bm) -> tuple[str, np.ndarray] | None:
    """(global name, values) of B when it is a constant global, else None."""
    owner = bm.owner
    if not isinstance(owner, memref.GetGlobalOp):
        return None
    name = owner.name_.root_reference.data
    glob = next((g for g in module.body.block.ops if isinstance(g, memref.GlobalOp) and g.sym_name.data == name),
                None)
    if glob is None or not isinstance(glob.initial_value, DenseIntOrFPElementsAttr):
        return None
    return name, aicc.numpy_from_dense(glob.initial_value)


def _global(module: ModuleOp, name: str, values: np.ndarray, b: Builder):
    """A new private constant global of `values` (i8 or i32), named after `name`, read at `b`."""
    taken = {g.sym_name.data for g in module.body.block.ops if isinstance(g, memref.GlobalOp)}
    sym = next(f"{name}{i or ''}" for i in range(len(taken) + 1) if f"{name}{i or ''}" not in taken)
    elem = IntegerType(8 * values.dtype.itemsize)
    t = MemRefType(elem, list(values.shape))
    value = DenseIntOrFPElementsAttr.from_list(TensorType(elem, list(values.shape)), values.ravel().tolist())
    module.body.block.insert_op_before(
        memref.GlobalOp.get(StringAttr(sym), t, value, sym_visibility=StringAttr("private"), constant=UnitAttr()),
        module.body.block.first_op)
    return b.insert(memref.GetGlobalOp(sym, t)).memref


def pack(w: np.ndarray) -> np.ndarray:
    """An (N, K) int8 B laid out for the broadcast kernel: (ceil(N / 8), ceil(K / 2), 16) int8,
    [g, p, 2c + t] = B[8g + c, 2p + t], zeros beyond N and K (see aicc_cpu.qgemm)."""
    n, k = w.shape
    g, k2 = -(-n // PACK_COLS), -(-k // 2)
    wp = np.zeros((g * PACK_COLS, k2 * 2), np.int8)
    wp[:n, :k] = w
    return np.ascontiguousarray(wp.reshape(g, PACK_COLS, k2, 2).transpose(0, 2, 1, 3)).reshape(g, k2, 2 * PACK_COLS)


def pack_vnni(w: np.ndarray, lanes: int) -> np.ndarray:
    """An (N, K) int8 B laid out for the VNNI kernel (L = `lanes`): (ceil(N / L), ceil(K / 4),
    4L) int8, [g, p, 4c + t] = B[Lg + c, 4p + t], zeros beyond N and K (see aicc_cpu.qgemm)."""
    n, k = w.shape
    g, k4 = -(-n // lanes), -(-k // 4)
    wp = np.zeros((g * lanes, k4 * 4), np.int8)
    wp[:n, :k] = w
    return np.ascontiguousarray(wp.reshape(g, lanes, k4, 4).transpose(0, 2, 1, 3)).reshape(g, k4, 4 * lanes)


def _seven_bit(w: np.ndarray) -> bool:
    """Whether every value of the int8 B lies within [-64, 64]: vpmaddubsw multiplies it exactly."""
    return w.size > 0 and U8_WEIGHT_MIN <= int(w.min()) and int(w.max()) <= U8_WEIGHT_MAX


def _drop_unused(module: ModuleOp, value) -> None:
    """Erase the memref.get_global of `value` if nothing reads it, and its global if no other
    get_global names it (a B replaced by its packed or padded copy)."""
    owner = value.owner
    if value.uses:
        return
    name = owner.name_.root_reference.data
    Rewriter.erase_op(owner)
    if not any(isinstance(o, memref.GetGlobalOp) and o.name_.root_reference.data == name for o in module.walk()):
        glob = next(g for g in module.body.block.ops if isinstance(g, memref.GlobalOp) and g.sym_name.data == name)
        Rewriter.erase_op(glob)


# ops that may lie between the matmul and its epilogue (the epilogue's operands move before the matmul)
_BETWEEN = (arith.ConstantOp, memref.GetGlobalOp, memref.AllocOp, memref.DeallocOp)


@dataclass
class _Epilogue:
    """What the packed kernel does as it stores a tile instead of the generic `op` after it."""

    op: linalg.GenericOp
    scale: SSAValue  # memref<N x f32>
    bias: SSAValue | None = None  # memref<N x i32>
    out_zp: int | None = None  # requantized to i8 with this zero point
    relu: bool = False


def _scalar(module: ModuleOp, v) -> float | None:
    """The value of a constant memref<1xf32> (a scalar operand of an elementwise generic), else None."""
    if not (isinstance(v.type, MemRefType) and v.type.get_shape() == (1,) and v.type.element_type == f32):
        return None
    const = _constant(module, v)
    return None if const is None else float(const[1].reshape(-1)[0])


def _epilogue_body(g: linalg.GenericOp, c, n: int, module: ModuleOp) -> _Epilogue | None:
    """The epilogue the generic `g` computes from C, when the kernel can: its body, read in
    order, is [addi(x, b[j])], sitofp, mulf(., s[j]), then either the yield (an f32 result) or
    the requantization a quantize of scale 1 after the per-channel scale lowers to:
    [maximumf(., 0)], [divf(., 1)], roundeven, addf(., zp), maximumf(., -128),
    minimumf(., 127), fptosi to i8 (b: i32, s: f32 memrefs of N read along the last dim; the
    scalars constant memref<1xf32>)."""
    rank = len(c.type.get_shape())
    along, ident = AffineMap(rank, 0, (AffineDimExpr(rank - 1),)), AffineMap.identity(rank)
    maps = [m.data for m in g.indexing_maps.data]
    if len(g.outputs) != 1 or not g.inputs or g.inputs[0] is not c or maps[0] != ident or maps[-1] != ident:
        return None
    args = g.body.block.args
    role: dict = {args[0]: "x"}
    for v, m, arg in zip(g.inputs[1:], maps[1:], args[1:]):
        if not isinstance(v.type, MemRefType):
            return None
        if m == along and v.type.get_shape() == (n,):
            role[arg] = v
        elif (value := _scalar(module, v)) is not None:
            role[arg] = value
        else:
            return None

    def column(x, ty):  # the memref of N read by block arg x, of element type `ty`, else None
        v = role.get(x)
        return v if isinstance(v, SSAValue) and v.type.element_type == ty else None

    def value_of(x) -> float | None:  # a scalar operand's or an arith.constant's value
        v = role.get(x)
        if isinstance(v, float):
            return v
        if isinstance(x, SSAValue) and isinstance(x.owner, arith.ConstantOp) and x.type == f32:
            return float(x.owner.value.value.data)
        return None

    def scalar(x, value):
        return value_of(x) == value

    out = g.outputs[0]
    ops = [o for o in g.body.block.ops if not isinstance(o, arith.ConstantOp)]  # read by value_of
    cur, i = args[0], 0
    bias = None

    def nxt():
        return ops[i] if i < len(ops) else None

    def other(op, v):  # op's operand besides v, when v is one of its two
        a, b = op.operands
        return b if a is v else a if b is v else None

    o = nxt()
    if isinstance(o, arith.AddiOp) and (bias := column(other(o, cur), IntegerType(32))) is not None:
        cur, i = o.result, i + 1
    o = nxt()
    if not (isinstance(o, arith.SIToFPOp) and o.input is cur):
        return None
    cur, i = o.result, i + 1
    o = nxt()
    scale = column(other(o, cur), f32) if isinstance(o, arith.MulfOp) else None
    if scale is None:
        return None
    cur, i = o.result, i + 1
    o = nxt()
    if isinstance(o, linalg.YieldOp):
        ok = tuple(o.operands) == (cur,) and out.type.element_type == f32
        return _Epilogue(g, scale, bias) if ok else None
    relu = False
    if isinstance(o, arith.MaximumfOp) and scalar(other(o, cur), 0.0):
        relu, cur, i = True, o.result, i + 1
        o = nxt()
    if isinstance(o, arith.DivfOp) and o.lhs is cur and scalar(o.rhs, 1.0):
        cur, i = o.result, i + 1
        o = nxt()
    if not (isinstance(o, xmath.RoundEvenOp) and o.operand is cur):
        return None
    cur, i = o.result, i + 1
    o = nxt()
    zp = value_of(other(o, cur)) if isinstance(o, arith.AddfOp) else None
    if not isinstance(zp, float) or zp != int(zp) or not -128 <= zp <= 127:
        return None
    cur, i = o.result, i + 1
    for kind, bound in ((arith.MaximumfOp, -128.0), (arith.MinimumfOp, 127.0)):
        o = nxt()
        if not (isinstance(o, kind) and scalar(other(o, cur), bound)):
            return None
        cur, i = o.result, i + 1
    o = nxt()
    if not (isinstance(o, arith.FPToSIOp) and o.input is cur and o.result.type == IntegerType(8)):
        return None
    cur, i = o.result, i + 1
    o = nxt()
    if not (isinstance(o, linalg.YieldOp) and tuple(o.operands) == (cur,) and out.type.element_type == IntegerType(8)):
        return None
    return _Epilogue(g, scale, bias, int(zp), relu)


def _scale_epilogue(op: linalg.GenericOp, fill, c, n: int, module: ModuleOp) -> _Epilogue | None:
    """The generic that reads C only to write float32(C[..., j] [+ b[j]]) * s[j] (a conv's
    per-channel scale), or that requantized to i8 (see _epilogue_body), after the matmul with
    nothing in between but constants, allocations and deallocations, which the packed kernel
    then does as it stores (`col_scale`, `col_bias`, `out_zp`); else None. The allocation of
    its output and the get_globals of s and b move before the matmul."""
    users = {u.operation for u in c.uses if not isinstance(u.operation, memref.DeallocOp)} - {op, fill}
    if len(users) != 1:
        return None
    g = users.pop()
    if not isinstance(g, linalg.GenericOp) or any(not isinstance(v.type, MemRefType) for v in g.operands):
        return None
    if g.outputs[0].type.get_shape() != c.type.get_shape() if g.outputs else True:
        return None
    ep = _epilogue_body(g, c, n, module)
    if ep is None:
        return None
    keep = [v for v in (ep.scale, ep.bias, g.outputs[0]) if v is not None]
    between, moved = op.next_op, []
    while between is not g:
        if between is None or not isinstance(between, _BETWEEN) \
                or isinstance(between, memref.DeallocOp) and between.memref in keep:
            return None
        if between.results and between.results[0] in keep:
            if between.operands:
                return None
            moved.append(between)
        between = between.next_op
    for o in moved:
        o.detach()
        op.parent_block().insert_op_before(o, op)
    return ep


# the windowed kernel gathers spans in 16-byte chunks: a tap's C channels, or without dilation
# along W a window row's KW taps side by side (KW * C bytes). Spans shorter than 16 bytes (a
# 3x3 conv on RGB: 9) keep the im2col copy: for 3-byte spans LLVM turned the 8-bit kernel's
# gather into byte shuffles that ran about 10x slower than that copy (Zen 3, conv 3 -> 32 at
# batch 32: 0.8 -> 9 ms), while ResNet's 7x7 stride-2 stem on RGB (21-byte spans) runs 1.6x
# faster read through (Zen 3, batch 1, 7- and 8-bit weights)
WINDOW_SPAN_BYTES = 16


def _im2col(op: linalg.GenericOp, a: SSAValue) -> tuple[linalg.GenericOp, tuple[int, ...]] | None:
    """The im2col copy that alone writes A's buffer, read by nothing but the matmul `op` (A a
    reshape of it, rows (N, OH, OW) by (KH, KW, C)): out[n, p, q, i, j, c] = in[n, SH p + DH i,
    SW q + DW j, c] of a contiguous int8 memref<N x HP x WP x C> (C a multiple of
    WINDOW_SPAN_BYTES, or DW = 1 and KW * C at least that), in the same block before `op`;
    returns (the copy, (OH, OW, KH, KW, SH, SW, DH, DW)), else None."""
    root = view_root(a)
    if not (isinstance(root, OpResult) and isinstance(root.op, memref.AllocOp)):
        return None
    _, users = buffer_users(root)
    copies = [u for u in users if u is not op]
    if len(copies) != 1 or len(users) != 2 or not isinstance(copies[0], linalg.GenericOp):
        return None
    g = copies[0]
    if len(g.inputs) != 1 or len(g.outputs) != 1 or g.outputs[0] is not root or g.parent_block() is not op.parent_block():
        return None
    x = g.inputs[0]
    ops = list(g.body.block.ops)
    if not isinstance(x.type, MemRefType) or len(ops) != 1 or list(ops[0].operands) != [g.body.block.args[0]] \
            or x.type.element_type != IntegerType(8) or not isinstance(x.type.layout, NoneAttr):
        return None
    shape, out_shape = x.type.get_shape(), root.type.get_shape()
    in_map, out_map = (m.data for m in g.indexing_maps.data)
    if len(shape) != 4 or len(out_shape) != 6 or out_map != AffineMap.identity(6) or len(in_map.results) != 4 \
            or out_shape[0] != shape[0] or out_shape[5] != shape[3]:
        return None
    # the map's coefficients, from its values at 0 and at the unit vectors; then linearity
    zero = in_map.eval([0] * 6, [])
    unit = [[v - z for v, z in zip(in_map.eval([int(d == i) for d in range(6)], []), zero)] for i in range(6)]
    want = [[1, 0, 0, 0], [0, None, 0, 0], [0, 0, None, 0], [0, None, 0, 0], [0, 0, None, 0], [0, 0, 0, 1]]
    if any(z != 0 for z in zero) or any(w is not None and u != w for uv, wv in zip(unit, want) for u, w in zip(uv, wv)):
        return None
    probe = [2, 3, 5, 7, 11, 13]
    if list(in_map.eval(probe, [])) != [sum(p * u[r] for p, u in zip(probe, unit)) for r in range(4)]:
        return None
    sh, sw, dh, dw = unit[1][1], unit[2][2], unit[3][1], unit[4][2]
    if min(sh, sw, dh, dw) < 1:
        return None
    if shape[3] % WINDOW_SPAN_BYTES and (dw != 1 or out_shape[4] * shape[3] < WINDOW_SPAN_BYTES):
        return None
    return g, (*out_shape[1:5], sh, sw, dh, dw)


def pack_winograd(w: np.ndarray) -> np.ndarray:
    """An (N, 9 C) int8 B (a 3x3 conv's weight in (N, KH, KW, C) order) transformed for the
    integer Winograd kernel: U[ab][o, c] = (G' g[o, :, :, c] G'^T)[a, b] (G' = 2 G, integers
    within [-1152, 1152]) laid out (16, ceil(N / 8), C / 2, 16) int16, [ab, g, p, 2c + t] =
    U[ab][8g + c, 2p + t], zeros beyond N (see aicc_cpu.qgemm)."""
    n, k = w.shape
    c = k // 9
    g = w.reshape(n, 3, 3, c).astype(np.int64)
    u = np.einsum("ai,oijc,bj->aboc", WINOGRAD_G2, g, WINOGRAD_G2).reshape(16, n, c)
    groups = -(-n // PACK_COLS)
    up = np.zeros((16, groups * PACK_COLS, c), np.int64)
    up[:, :n] = u
    up = up.reshape(16, groups, PACK_COLS, c // 2, 2).transpose(0, 1, 3, 2, 4).reshape(16, groups, c // 2, 16)
    assert np.abs(up).max(initial=0) < 2**15
    return np.ascontiguousarray(up.astype(np.int16))


# the integer Winograd kernel's V buffer (16 T C i16) is kept to about this many bytes
WINOGRAD_V_BYTES = 24 * 1024
WINOGRAD_MAX_BLOCKS = 4  # T: at most 4 register blocks of WINO_MR tiles


def _winograd_tiles(options: LowerQGemm, window: tuple[int, ...], k: int, w: np.ndarray) -> int:
    """The tiles per task (T) of the integer Winograd kernel for the windowed conv, 0 where
    the direct kernel runs: a 3x3 stride-1 window, C a multiple of 8, on a CPU without VNNI
    (whose vpdpbusd does 4 products per lane where vpmaddwd does 2: about even with F(2x2,
    3x3)'s 2.25x, and untried), and not where `saturate` asks for the direct kernel's
    saturating pair sums (an 8-bit B: the integer Winograd's sums are exact)."""
    if not options.winograd or options.vnni or (options.saturate and not _seven_bit(w)):
        return 0
    rest = window[2:]
    c = k // 9
    if tuple(rest) != (3, 3, 1, 1, 1, 1) or c % 8 or c >= WINOGRAD_MAX_CHANNELS:
        return 0
    return WINO_MR * max(1, min(WINOGRAD_MAX_BLOCKS, WINOGRAD_V_BYTES // (32 * c * WINO_MR)))


def _lower(op: linalg.GenericOp, module: ModuleOp, options: LowerQGemm) -> None:
    dynamic = QGEMM_DYNAMIC_ATTR in op.attributes
    a, bm, *params = op.inputs
    op_b = bm
    (c,) = op.outputs
    if not all(isinstance(v.type, MemRefType) for v in (a, bm, c, *params)):
        return
    a_shape, (n, k) = a.type.get_shape(), bm.type.get_shape()
    if any(d < 0 for d in (*a_shape, n, k)):  # symbolic dims: the generic loop nest stays
        return
    rows = prod(a_shape[:-1])
    zp = op.attributes[QGEMM_ATTR].value.data
    fill = op.prev_op
    b = Builder(InsertPoint.before(op))
    colsum = epilogue = None
    const = _constant(module, bm)
    gather = _im2col(op, a) if const is not None and not dynamic else None
    wino = _winograd_tiles(options, gather[1], k, const[1]) if gather else 0
    vnni = options.vnni if const is not None and not wino else 0  # the VNNI kernel takes a constant B
    u7 = const is not None and not vnni and not wino and (options.saturate or _seven_bit(const[1]))
    if u7:  # the quad kernel by vpmaddubsw (exact for a 7-bit B; else its pair sums may saturate)
        vnni = 256
    lanes = vnni // 32
    if lanes:  # vpdpbusd (or vpmaddubsw), u8 A x s8 B, minus (zp + 128) * colsum
        name, w = const
        w = w.reshape(n, k)
        sums = np.zeros(-(-n // lanes) * lanes, np.int32)
        sums[:n] = w.astype(np.int32).sum(1, dtype=np.int32)
        colsum = _global(module, f"{name}_colsum", sums, b)
        epilogue = _scale_epilogue(op, fill, c, n, module)
        bm = _global(module, f"{name}_{'u7' if u7 else 'vnni'}", pack_vnni(w, lanes), b)
    elif const is not None:
        name, w = const
        epilogue = _scale_epilogue(op, fill, c, n, module)
        bm = _global(module, f"{name}_winograd", pack_winograd(w.reshape(n, k)), b) if wino \
            else _global(module, f"{name}_packed", pack(w.reshape(n, k)), b)
    a_read = gather[0].inputs[0] if gather else a  # the windowed kernel reads the NHWC input
    outer = IndexBuilder(b)
    # the Winograd kernel's units are 2x2 output tiles, `wino` to a task
    if wino:
        oh, ow = gather[1][:2]
        per_task, rows = wino, rows // (oh * ow) * -(-oh // 2) * -(-ow // 2)  # the N images' tiles
    else:
        per_task = ROWS_PER_TASK
    tasks = -(-rows // per_task)
    block = Block(arg_types=[IndexType()])
    par = b.insert(scf.ParallelOp([outer.const(0)], [outer.const(tasks)], [outer.const(1)], Region(block)))
    inner = Builder(InsertPoint.at_end(block))
    ix = IndexBuilder(inner)  # the body's own constants: it runs as a task of the thread pool
    (t,) = block.args
    r0 = inner.insert(arith.MuliOp(t, ix.const(per_task))).result
    left = inner.insert(arith.SubiOp(ix.const(rows), r0)).result
    m = inner.insert(arith.MinSIOp(left, ix.const(per_task))).result
    a_off = r0 if gather else inner.insert(arith.MuliOp(r0, ix.const(k))).result
    c_off = ix.const(0) if wino else inner.insert(arith.MuliOp(r0, ix.const(n))).result
    quantize = None
    if dynamic:  # [scale, zero point] of the float A, computed earlier in this call
        quantize = tuple(inner.insert(memref.LoadOp.get(params[0], [ix.const(i)])).res for i in (0, 1))
    out = epilogue.op.outputs[0] if epilogue else c
    ep = epilogue or _Epilogue(op, None)
    inner.insert(QGemmOp(a_read, a_off, bm, out, c_off, m, n=n, k=k, zp=zp, quantize=quantize, colsum=colsum,
                         col_scale=ep.scale, col_bias=ep.bias, out_zp=ep.out_zp, relu=ep.relu,
                         vnni=vnni, vnni_portable=options.vnni_portable and not u7, pmaddubsw=u7,
                         window=gather[1] if gather else None, winograd=wino))
    inner.insert(scf.ReduceOp())
    if isinstance(fill, linalg.FillOp) and tuple(fill.outputs) == (c,):  # the kernel stores every C
        Rewriter.erase_op(fill)
    Rewriter.erase_op(op)
    if epilogue is not None:
        read = list(epilogue.op.inputs)
        Rewriter.erase_op(epilogue.op)
        for v in read:  # the scalar constants only the epilogue read
            if isinstance(v.owner, memref.GetGlobalOp) and not v.uses:
                Rewriter.erase_op(v.owner)
        if isinstance(c.owner, memref.AllocOp) and all(isinstance(u.operation, memref.DeallocOp) for u in c.uses):
            for u in list(c.uses):  # the int32 C, never written now
                Rewriter.erase_op(u.operation)
            Rewriter.erase_op(c.owner)
    if const is not None and bm is not op_b:  # the original B, now read by nothing
        _drop_unused(module, op_b)
    if gather:  # the im2col matrix, never written now; its input read by the kernel instead
        copy, _ = gather
        Rewriter.erase_op(copy)
        erase_if_dead(view_root(a))
        keep_alive_through(a_read, par)


@dataclass(frozen=True)
class LowerQGemm(ModulePass):
    """Replace marked int8 matmul generics (on memrefs) by aicc_cpu.qgemm row blocks."""

    name = "lower-qgemm"

    enabled: bool = True  # the target CPU has AVX2
    vnni: int = 0  # the width of its VNNI vpdpbusd (256, 512), 0 without: the kernel of a constant B
    vnni_portable: bool = False  # the VNNI kernel without the instruction (tests on any x86-64)
    saturate: bool = False  # without VNNI, 8-bit B by vpmaddubsw too: int16 pair sums saturate (ONNX Runtime's)
    winograd: bool = True  # 3x3 stride-1 convs without VNNI by the integer F(2x2, 3x3) kernel

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.enabled:
            return
        if self.vnni not in (0, 256, 512):
            raise ValueError(f"lower-qgemm: vnni must be 0, 256 or 512, got {self.vnni}")
        for g in [o for o in op.walk() if isinstance(o, linalg.GenericOp) and QGEMM_ATTR in o.attributes]:
            _lower(g, op, self)
