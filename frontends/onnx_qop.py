"""ONNX's QOperator-format int8 ops, and the com.microsoft ones onnxruntime's quantizer writes in
that format, onto aicc's int8 ops.

    MatMulInteger, ConvInteger       (A - a_zp) @ (B - b_zp), conv(x - x_zp, w - w_zp): int32
    QLinearMatMul, QLinearConv       the same, requantized: y = sat(rne(float(acc [+ bias]) * s) + y_zp),
                                     s = x_scale * w_scale / y_scale in float32 (per output channel)
    DynamicQuantizeLinear            uint8 with a scale and zero point from the range of x and 0
    com.microsoft MatMulIntegerToFloat, DynamicQuantizeMatMul (A float, quantized as above)
    com.microsoft QGemm, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
                  QLinearGlobalAveragePool

Integers stay integers: every matmul runs as aicc.matmul_integer (the int8 GEMM kernel) on
the int8 form aicc holds (a uint8 tensor v as v - 128, its zero point z as z - 128, so
v - z is unchanged), and what matmul_integer lacks is corrected exactly in int32:

    sum_k (a - za)(b - zb) = matmul_integer(a, b; lhs zero point za) - zb * sum_k (a - za)

(zb per column of B or per output channel of a weight). A zero point only known at run time
(DynamicQuantizeLinear's) cannot be the kernel's constant: it is subtracted afterwards,
- za * sum_k (b - zb), with sum_k over the taps inside the image for a padded convolution;
except where a MatMulInteger (or MatMulIntegerToFloat) multiplies DynamicQuantizeLinear(x) by a
constant weight of zero point 0, as onnxruntime's quantize_dynamic writes: that is one
aicc.dynamic_matmul_integer of x itself, which quantizes x as the int8 GEMM reads it, with the
run-time zero point subtracted there (the quantized copy of x is then never built).
Convolutions are an im2col (one aicc.tensor_op gathering the windows of the input padded with
its zero point) times the weight, per group; a grouped convolution whose sums provably stay
below 2^24 runs instead as a float32 aicc.conv2d of the integer values, exact because every
partial sum is an integer float32 holds exactly. The requantization is the float32 epilogue
ONNX Runtime computes (MlasRequantizeOutput): scale multiplied, rounded half to even,
zero point added, saturated. Wrapping int32 arithmetic makes every identity above exact even
when a sum overflows int32, as the ONNX ops' own int32 accumulation would.

A B with batch dims is one matmul_integer per batch index (matmul_integer's rhs is 2-D), up to
MAX_BATCH of them. What is refused, naming the node: a zero point per row of A (ONNX Runtime
refuses it too), a convolution weight, a scale or a QLinear op's zero point that is not known
at compile time (a graph input is specialized on its example value), 3-D convolutions.
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc_index import TensorOp
from compiler.dialects.aicc_quant import DynamicMatmulIntegerOp, DynamicQuantParamsOp, MatmulIntegerOp
from frontends.onnx_common import const, int8_value, is_uint8, set_int8_kind, unsupported
from frontends.onnx_nn import conv_geometry, slice_tensor, to_2d
from frontends.registry import HandlerTable

__all__ = ["HANDLERS", "MS_HANDLERS"]

HANDLERS = HandlerTable()  # the ONNX domain
handles = HANDLERS.handles
MS_HANDLERS = HandlerTable()  # com.microsoft
ms_handles = MS_HANDLERS.handles

FLOAT_EXACT = 1 << 24  # integers below this are exact in float32, sums of them too


def _opt(ins, i):
    return ins[i] if len(ins) > i and ins[i] is not None else None


def _scale(imp, node, v, what: str, sizes=(1,)) -> np.ndarray:
    """A constant float scale as a 1-D float32 array of one of `sizes` elements."""
    s = np.asarray(const(imp, node, v, what))
    if s.dtype.kind != "f":
        raise unsupported(imp, node, f"a {s.dtype} {what}")
    s = s.astype(np.float32).reshape(-1)
    if s.size not in sizes:
        raise unsupported(imp, node, f"a {what} of {s.size} elements (expected {' or '.join(map(str, sizes))})")
    return s


def _zero_point(imp, node, v, unsigned: bool, what: str, sizes=(1,), dynamic: bool = False):
    """A zero point of a (u)int8 tensor of kind `unsigned`, as aicc holds it (z - 128 for uint8):
    a 1-D int64 array of one of `sizes` elements, or, where `dynamic`, for a value known only
    at run time (one element) a 0-d int32 SSA value. Absent, it is 0. Otherwise it must be
    known at compile time (a graph input is specialized on its example value)."""
    if v is None:
        return np.full(1, -128 if unsigned else 0, np.int64)
    if is_uint8(imp, node, v) != unsigned:
        raise unsupported(imp, node, f"a {what} whose type differs from its tensor's")
    if not dynamic:
        v = const(imp, node, v, what)
    v, _ = int8_value(imp, node, v)
    g = imp.g
    if isinstance(v, np.ndarray):
        z = v.astype(np.int64).reshape(-1)
        if z.size not in sizes:
            raise unsupported(imp, node, f"a {what} of {z.size} elements (expected {' or '.join(map(str, sizes))}"
                              + (", per tensor" if sizes == (1,) else "") + ")")
        return z
    if int(np.prod(g.shape(v))) != 1:
        raise unsupported(imp, node, f"a non-constant {what} of more than one element")
    return g.reshape(g.cast(v, np.int32), ())


def _operand(imp, node, v, what: str):
    """A (u)int8 operand as aicc holds it, and whether it is uint8."""
    if not isinstance(v, np.ndarray) and imp.g.dtype(v) != np.int8:
        raise unsupported(imp, node, f"a {imp.g.dtype(v)} {what} (int8 and uint8 are)")
    return int8_value(imp, node, v)


def _static(z) -> bool:
    return isinstance(z, np.ndarray)


def _i32(g, v):
    return v.astype(np.int32) if isinstance(v, np.ndarray) else g.cast(v, np.int32)


def _rowsum(g, a, za, k: int):
    """sum_k (a - za) over the last axis, kept (int32)."""
    s = g.reduce(aicc.ReduceSumOp, _i32(g, a), [-1], True)
    if _static(za):
        return g.sub(s, np.array(k * int(za[0]), np.int32)) if za[0] else s
    return g.sub(s, g.mul(za, np.array(k, np.int32)))


def _requantize(imp, acc, mult: np.ndarray, zp: int, unsigned: bool):
    """sat(rne(float32(acc) * mult) + zp) as aicc holds the (u)int8 result (zp already shifted),
    as ONNX Runtime's MlasRequantizeOutput computes it."""
    g = imp.g
    f = g.mul(g.cast(acc, np.float32), np.asarray(mult, np.float32))
    return _saturate(imp, g.unary(aicc.RoundOp, f), zp, unsigned)


def _saturate(imp, r, zp: int, unsigned: bool):
    """Rounded float32 values r: r + zp clamped to int8, as an int8 tensor of the given kind."""
    g = imp.g
    if zp:
        r = g.add(r, np.array(zp, np.float32))
    r = g.emit(aicc.MaximumOp, r, np.array(-128, np.float32))
    r = g.emit(aicc.MinimumOp, r, np.array(127, np.float32))
    return set_int8_kind(imp, g.cast(r, np.int8), unsigned)


# ---------------------------------------------------------------------------------------------
# Matmuls
# ---------------------------------------------------------------------------------------------


def _matmul_integer(imp, node, a, za, b, zb):
    """np.matmul(a - za, b - zb) in int32 for int8-held a, b; za per tensor (an array of one
    element or a 0-d int32 value), zb per tensor or per column of the 2-D b."""
    g = imp.g
    sa, sb = g.shape(a), g.shape(b)
    if not sa or not sb:
        raise unsupported(imp, node, "a rank-0 operand")
    if len(sb) > 2 and any(d != 1 for d in sb[:-2]):
        return _batched_matmul_integer(imp, node, a, za, b, zb)
    b2 = b
    if len(sb) == 1:
        b2 = g.reshape(b, (sb[0], 1))
    elif len(sb) > 2:
        b2 = g.reshape(b, sb[-2:])
    k, n = g.shape(b2)
    a2 = g.reshape(a, (1, sa[0])) if len(sa) == 1 else a
    if g.shape(a2)[-1] != k:
        raise ValueError(f"{node.op_type}: A {tuple(sa)} and B {tuple(sb)} do not multiply")
    if len(sb) == 1:
        out = tuple(sa[:-1])
    elif len(sa) == 1:
        out = (*sb[:-2], n)
    else:
        out = (*np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])), sa[-2], n)
    if _static(zb) and zb.size not in (1, n):
        raise unsupported(imp, node, f"a B zero point of {zb.size} elements for {n} columns")
    bt = np.ascontiguousarray(b2.T) if isinstance(b2, np.ndarray) else g.transpose(b2, (1, 0))
    y = g.emit(lambda x, w: MatmulIntegerOp(x, w, int(za[0]) if _static(za) else 0, transpose_rhs=True), a2, bt)
    if not _static(za):  # - za * sum_k b
        colsum = b2.astype(np.int32).sum(0, dtype=np.int32) if isinstance(b2, np.ndarray) else \
            g.reduce(aicc.ReduceSumOp, _i32(g, b2), [0], False)
        y = g.sub(y, g.mul(za, colsum))
    if not _static(zb) or np.any(zb):  # - zb * sum_k (a - za)
        zb_n = zb.astype(np.int32) if _static(zb) else zb
        y = g.sub(y, g.mul(_rowsum(g, a2, za, k), zb_n))
    return g.reshape(y, out)


MAX_BATCH = 256  # a batched B is one matmul_integer per batch index


def _batched_matmul_integer(imp, node, a, za, b, zb):
    """A B with batch dims: one 2-D product per (broadcast) batch index, stacked."""
    g = imp.g
    sa, sb = g.shape(a), g.shape(b)
    if len(sa) == 1:
        y = _batched_matmul_integer(imp, node, g.reshape(a, (1, sa[0])), za, b, zb)
        sy = g.shape(y)
        return g.reshape(y, (*sy[:-2], sy[-1]))
    batch = np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
    nb = int(np.prod(batch))
    if nb > MAX_BATCH:
        raise unsupported(imp, node, f"a B with {nb} batches (aicc's int8 matmul takes a 2-D B; at most "
                          f"{MAX_BATCH} are unrolled)")
    (m, k), n = sa[-2:], sb[-1]
    a3 = g.reshape(g.broadcast_to(a, (*batch, m, k)), (nb, m, k))
    b3 = g.reshape(g.broadcast_to(b, (*batch, k, n)), (nb, k, n))
    outs = []
    for i in range(nb):
        ai = g.reshape(slice_tensor(g, a3, [i, 0, 0], [1, 1, 1], [1, m, k]), (m, k))
        bi = g.reshape(slice_tensor(g, b3, [i, 0, 0], [1, 1, 1], [1, k, n]), (k, n))
        outs.append(g.reshape(_matmul_integer(imp, node, ai, za, bi, zb), (1, m, n)))
    y = outs[0] if nb == 1 else g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 0), *outs)
    return g.reshape(y, (*batch, m, n))


def _kinds_and_values(imp, node, ins, ia: int, ib: int):
    a, ua = _operand(imp, node, ins[ia], "A")
    b, ub = _operand(imp, node, ins[ib], "B")
    return a, ua, b, ub


def _columns(imp, b) -> int:
    s = imp.g.shape(b)
    return s[-1] if len(s) > 1 else 1


@handles("MatMulInteger")
def _op_matmul_integer(imp, node, ins, at):
    a, ua, b, ub = _kinds_and_values(imp, node, ins, 0, 1)
    if _opt(ins, 2) is not None and isinstance(ins[2], np.ndarray) and ins[2].size > 1:
        raise unsupported(imp, node, "a zero point per row of A (ONNX Runtime also takes one per tensor)")
    za = _zero_point(imp, node, _opt(ins, 2), ua, "A zero point", dynamic=True)
    zb = _zero_point(imp, node, _opt(ins, 3), ub, "B zero point", (1, _columns(imp, b)), dynamic=True)
    fused = _fused_dynamic(imp, a, _opt(ins, 2), b, zb)
    if fused is not None:  # x quantized as the int8 GEMM reads it
        return [imp.g.emit(DynamicMatmulIntegerOp, fused[0], np.ascontiguousarray(b.T), fused[1])]
    return [_matmul_integer(imp, node, a, za, b, zb)]


@handles("QLinearMatMul")
def _op_qlinear_matmul(imp, node, ins, at):
    a, ua, b, ub = _kinds_and_values(imp, node, ins, 0, 3)
    n = _columns(imp, b)
    a_scale = _scale(imp, node, ins[1], "a_scale")
    b_scale = _scale(imp, node, ins[4], "b_scale", (1, n))
    y_scale = _scale(imp, node, ins[6], "y_scale")
    za = _zero_point(imp, node, ins[2], ua, "a_zero_point")
    zb = _zero_point(imp, node, ins[5], ub, "b_zero_point", (1, n))
    uy = is_uint8(imp, node, ins[7])
    zy = _zero_point(imp, node, ins[7], uy, "y_zero_point")
    acc = _matmul_integer(imp, node, a, za, b, zb)
    mult = (a_scale[0] * b_scale) / y_scale[0]  # float32, in ONNX Runtime's order
    return [_requantize(imp, acc, mult, int(zy[0]), uy)]


@ms_handles("QGemm")
def _op_qgemm(imp, node, ins, at):
    """com.microsoft QGemm: alpha (A - za)(B - zb) + C with C in int32, requantized to y or
    (without y_scale) scaled to float32."""
    g = imp.g
    a, ua, b, ub = _kinds_and_values(imp, node, ins, 0, 3)
    if at.get("transA", 0):
        a = np.ascontiguousarray(a.T) if isinstance(a, np.ndarray) else g.transpose(a, (1, 0))
    if at.get("transB", 0):
        b = np.ascontiguousarray(b.T) if isinstance(b, np.ndarray) else g.transpose(b, (1, 0))
    if len(g.shape(a)) != 2 or len(g.shape(b)) != 2:
        raise unsupported(imp, node, "operands that are not 2-D")
    n = g.shape(b)[1]
    a_scale = _scale(imp, node, ins[1], "a_scale")
    b_scale = _scale(imp, node, ins[4], "b_scale", (1, n))
    za = _zero_point(imp, node, ins[2], ua, "a_zero_point")
    zb = _zero_point(imp, node, ins[5], ub, "b_zero_point", (1, n))
    acc = _matmul_integer(imp, node, a, za, b, zb)
    c = _opt(ins, 6)
    if c is not None:
        if not isinstance(c, np.ndarray) and g.dtype(c) != np.int32:
            raise unsupported(imp, node, f"a {g.dtype(c)} C (int32 is)")
        acc = g.add(acc, _i32(g, c))
    mult = np.float32(at.get("alpha", 1.0)) * a_scale[0] * b_scale
    y_scale, y_zp = _opt(ins, 7), _opt(ins, 8)
    if y_scale is None:
        if y_zp is not None:
            raise unsupported(imp, node, "a y_zero_point without a y_scale")
        return [g.mul(g.cast(acc, np.float32), mult)]
    if y_zp is None:
        raise unsupported(imp, node, "a y_scale without a y_zero_point")
    mult = mult / _scale(imp, node, y_scale, "y_scale")[0]
    uy = is_uint8(imp, node, y_zp)
    return [_requantize(imp, acc, mult, int(_zero_point(imp, node, y_zp, uy, "y_zero_point")[0]), uy)]


# ---------------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------------


def _conv_integer(imp, node, at, x, zx, w, zw):
    """conv(x - zx, w - zw) in int32, NC(H)W, for int8-held x and a constant int8-held weight;
    zx per tensor (an array of one element or a 0-d int32 value), zw per tensor or per output
    channel (an array)."""
    g = imp.g
    if not isinstance(w, np.ndarray):
        raise unsupported(imp, node, "a non-constant weight")
    x, one_d = to_2d(imp, node, x)
    if one_d:
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    if w.ndim != 4:
        raise unsupported(imp, node, f"a rank-{w.ndim} weight")
    n, c, h, wd = g.shape(x)
    o, cg, kh, kw = w.shape
    groups = int(at.get("group", 1))
    if "kernel_shape" in at and list(at["kernel_shape"]) != list(w.shape[2 + one_d:]):
        raise unsupported(imp, node, f"kernel_shape {list(at['kernel_shape'])} unlike the weight's")
    if groups < 1 or c != cg * groups or o % groups:
        raise ValueError(f"{node.op_type}: input channels {c}, weight {w.shape} and group {groups} disagree")
    (sh, sw), (dh, dw), begin, end = conv_geometry(imp, node, at, (h, wd), (kh, kw), one_d)
    oh = (h + begin[0] + end[0] - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + begin[1] + end[1] - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{node.op_type}: the kernel is larger than the padded input")
    zw = np.broadcast_to(zw, (o,)).astype(np.int64)
    wc = w.astype(np.int64) - zw.reshape(-1, 1, 1, 1)  # w - zw, exact in int64
    if _static(zx):
        x_range = max(int(zx[0]) + 128, 127 - int(zx[0]))
    else:
        x_range = 255
    exact_in_float = int(np.abs(wc).reshape(o, -1).sum(1).max(initial=0)) * x_range < FLOAT_EXACT
    if groups > 1 and exact_in_float:
        y = _conv_float(imp, x, zx, wc, groups, (sh, sw), (dh, dw), begin, end)
    else:
        y = _conv_im2col(imp, x, zx, w, zw, groups, (sh, sw), (dh, dw), begin, end, (oh, ow))
    if one_d:
        y = g.reshape(y, (n, o, ow))
    return y


def _conv_float(imp, x, zx, wc, groups, strides, dil, begin, end):
    """A grouped conv whose every partial sum is an integer below 2^24: float32 conv2d of
    x - zx (exact integers) and w - zw, converted back to int32 exactly."""
    g = imp.g
    xf = g.cast(x, np.float32)
    xf = g.sub(xf, np.array(float(zx[0]), np.float32) if _static(zx) else g.cast(zx, np.float32))
    if any(begin) or any(end):
        xf = g.emit(lambda v: aicc_nn.PadOp(v, [0, 0, *begin], [0, 0, *end], 0.0), xf)
    y = g.emit(lambda v, k: aicc_nn.Conv2dOp(v, k, strides, dil, groups), xf, wc.astype(np.float32))
    return g.cast(y, np.int32)


def _inside_taps(size: int, pad: int, k: int, stride: int, dil: int, out: int) -> np.ndarray:
    """(out, k): whether tap i of output position p reads the image (not its padding)."""
    pos = np.arange(out)[:, None] * stride + np.arange(k)[None, :] * dil - pad
    return (pos >= 0) & (pos < size)


def _conv_im2col(imp, x, zx, w, zw, groups, strides, dil, begin, end, out_hw):
    """Per group: the windows of x (padded with zx, or with 0 when zx is known only at run
    time) as rows of an int8 matrix, times the weight in matmul_integer, then corrected for
    zw (and a run-time zx), back to NCHW."""
    g = imp.g
    n, c, h, wd = g.shape(x)
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = out_hw
    (sh, sw), (dh, dw) = strides, dil
    pad_value = int(zx[0]) if _static(zx) else 0
    x = g.cast(x, np.float32)  # tensor_op computes float32: the int8 values pass through it exactly
    if any(begin) or any(end):
        x = g.emit(lambda v: aicc_nn.PadOp(v, [0, 0, *begin], [0, 0, *end], float(pad_value)), x)
    hp, wp = g.shape(x)[2:]
    k = kh * kw * cg
    za = zx if _static(zx) else np.zeros(1, np.int64)
    inside = None
    if not _static(zx):  # which taps of each output position read the image
        inside = (_inside_taps(h, begin[0], kh, sh, dh, oh)[:, None, :, None]
                  & _inside_taps(wd, begin[1], kw, sw, dw, ow)[None, :, None, :])  # (oh, ow, kh, kw)

    def term(stride, v, d, i):
        return " + ".join(f"{a} * {s}" if a != 1 else s for a, s in ((stride, v), (d, i)))

    text = f"out[n, p, q, i, j, c] = in0[n, c, {term(sh, 'p', dh, 'i')}, {term(sw, 'q', dw, 'j')}]"
    outs = []
    for gi in range(groups):
        xg = slice_tensor(g, x, [0, gi * cg, 0, 0], [1] * 4, [n, cg, hp, wp]) if groups > 1 else x
        cols = g.emit(lambda v: TensorOp(text, [v], {"n": n, "p": oh, "q": ow, "i": kh, "j": kw, "c": cg},
                                         aicc.TensorType(aicc.mlir_element_type(np.float32), (n, oh, ow, kh, kw, cg))),
                      xg)
        rows = g.reshape(g.cast(cols, np.int8), (n * oh * ow, k))
        wg = w[gi * og:(gi + 1) * og]
        wmat = np.ascontiguousarray(wg.transpose(0, 2, 3, 1)).reshape(og, k)
        y = g.emit(lambda r, m: MatmulIntegerOp(r, m, int(za[0]), transpose_rhs=True), rows, wmat)
        zwg = zw[gi * og:(gi + 1) * og]
        if np.any(zwg):  # - zw * sum over the window of (x - zx): the padding adds nothing
            y = g.sub(y, g.mul(_rowsum(g, rows, za, k), zwg.astype(np.int32)))
        y = g.reshape(y, (n, oh * ow, og))
        if inside is not None:  # - zx * sum over the taps inside the image of (w - zw)
            wsum = (wg.astype(np.int64) - zwg.reshape(-1, 1, 1, 1)).sum(1)  # (og, kh, kw)
            t2 = np.einsum("pqij,oij->pqo", inside.astype(np.int64), wsum).reshape(oh * ow, og)
            y = g.sub(y, g.mul(zx, t2.astype(np.int32)))
        outs.append(y)
    y = outs[0] if len(outs) == 1 else g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 2), *outs)
    y = g.reshape(y, (n, oh, ow, o))
    return g.transpose(y, (0, 3, 1, 2))


def _conv_operands(imp, node, ins, ix: int, iw: int):
    x, ux = _operand(imp, node, ins[ix], "x")
    w, uw = _operand(imp, node, const(imp, node, ins[iw], "weight"), "w")
    rank = len(imp.g.shape(x))
    if rank not in (3, 4):
        raise unsupported(imp, node, f"a rank-{rank} input (aicc has 1-D and 2-D {node.op_type})")
    return x, ux, w, uw


@handles("ConvInteger")
def _op_conv_integer(imp, node, ins, at):
    x, ux, w, uw = _conv_operands(imp, node, ins, 0, 1)
    zx = _zero_point(imp, node, _opt(ins, 2), ux, "x_zero_point", dynamic=True)
    zw = _zero_point(imp, node, _opt(ins, 3), uw, "w_zero_point", (1, w.shape[0]))
    return [_conv_integer(imp, node, at, x, zx, w, zw)]


@handles("QLinearConv")
def _op_qlinear_conv(imp, node, ins, at):
    g = imp.g
    x, ux, w, uw = _conv_operands(imp, node, ins, 0, 3)
    o = w.shape[0]
    x_scale = _scale(imp, node, ins[1], "x_scale")
    w_scale = _scale(imp, node, ins[4], "w_scale", (1, o))
    y_scale = _scale(imp, node, ins[6], "y_scale")
    zx = _zero_point(imp, node, ins[2], ux, "x_zero_point")
    zw = _zero_point(imp, node, ins[5], uw, "w_zero_point", (1, o))
    uy = is_uint8(imp, node, ins[7])
    zy = _zero_point(imp, node, ins[7], uy, "y_zero_point")
    acc = _conv_integer(imp, node, at, x, zx, w, zw)
    rank = len(g.shape(acc))
    along = (-1,) + (1,) * (rank - 2)  # per output channel
    bias = _opt(ins, 8)
    if bias is not None:
        if not isinstance(bias, np.ndarray) and g.dtype(bias) != np.int32:
            raise unsupported(imp, node, f"a {g.dtype(bias)} bias (int32 is)")
        acc = g.add(acc, g.reshape(_i32(g, bias), along))
    mult = ((x_scale[0] * w_scale) / y_scale[0]).reshape(along if w_scale.size > 1 else ())
    return [_requantize(imp, acc, mult, int(zy[0]), uy)]


# ---------------------------------------------------------------------------------------------
# DynamicQuantizeLinear
# ---------------------------------------------------------------------------------------------


def _dynamic_params_numpy(x: np.ndarray) -> tuple[np.float32, np.float32]:
    f = np.float32
    lo, hi = min(f(x.min(initial=0.0)), f(0)), max(f(x.max(initial=0.0)), f(0))
    scale = f(1) if hi == lo else f(hi - lo) / f(255)
    zp = np.round(np.clip(f(0) - lo / scale, f(0), f(255)))  # np.round: half to even
    return scale, zp


def _dynamic_records(imp) -> dict:
    """DynamicQuantizeLinear's outputs -> (its float input, its [scale, zero point] value), for
    the matmuls that then quantize that input as they read it."""
    if not hasattr(imp, "dynamic_quantized"):
        imp.dynamic_quantized = {}
    return imp.dynamic_quantized


def _dynamic_params(imp, x):
    """The [scale, zero point as held] (a tensor<2xf32>) of DynamicQuantizeLinear(x), one pass."""
    return imp.g.emit(DynamicQuantParamsOp, x)


@handles("DynamicQuantizeLinear")
def _op_dynamic_quantize(imp, node, ins, at):
    """uint8 y = sat(rne(x / s) + z) with s = (max(x, 0) - min(x, 0)) / 255 and
    z = rne(sat(0 - min(x, 0) / s)) (s = 1 when x is all 0), in float32 as ONNX Runtime:
    aicc.dynamic_quant_params (one pass for the range) and an elementwise quantization, which
    a MatMulInteger of a constant weight skips (it quantizes x itself as it reads it)."""
    g, x = imp.g, ins[0]
    if g.dtype(x) != np.float32:
        raise unsupported(imp, node, f"a {g.dtype(x)} input (float32 is)")
    if 0 in g.shape(x):
        raise unsupported(imp, node, "an empty input")
    f32 = np.float32
    if isinstance(x, np.ndarray):
        scale, zp = _dynamic_params_numpy(x)
        y = np.clip(np.round(x / scale) + zp, 0, 255).astype(np.uint8)
        return [y, np.array(scale, f32), np.array(zp, np.uint8)]
    params = _dynamic_params(imp, x)
    scale = g.reshape(slice_tensor(g, params, [0], [1], [1]), ())
    zp = g.reshape(slice_tensor(g, params, [1], [1], [1]), ())  # as aicc holds uint8
    q = g.add(g.unary(aicc.RoundOp, g.div(x, scale)), zp)
    q = g.emit(aicc.MinimumOp, g.emit(aicc.MaximumOp, q, np.array(-128, f32)), np.array(127, f32))
    y = set_int8_kind(imp, g.cast(q, np.int8), True)
    z = set_int8_kind(imp, g.cast(zp, np.int8), True)
    _dynamic_records(imp)[y] = (x, params, z)
    return [y, scale, z]


def _fused_dynamic(imp, a, za_value, b, zb):
    """(x, params) when A is DynamicQuantizeLinear's output of x with its own zero point and B
    a constant 2-D weight of zero point 0 (as held), so that one dynamic_matmul_integer on x
    computes the product; else None."""
    rec = _dynamic_records(imp).get(a) if not isinstance(a, np.ndarray) else None
    if rec is None or za_value is not rec[2] or not isinstance(b, np.ndarray) or b.ndim != 2:
        return None
    if not _static(zb) or np.any(zb) or len(imp.g.shape(a)) < 2:
        return None
    return rec[0], rec[1]


# ---------------------------------------------------------------------------------------------
# com.microsoft MatMulIntegerToFloat, DynamicQuantizeMatMul (onnxruntime's fusions of the above)
# ---------------------------------------------------------------------------------------------


def _scaled_float(imp, node, acc, a_scale, b_scale, bias):
    """float32(acc) * (a_scale * b_scale) [+ bias], as ONNX Runtime's float epilogue."""
    g = imp.g
    y = g.mul(g.cast(acc, np.float32), g.mul(a_scale, b_scale))
    if bias is not None:
        if g.dtype(bias) != np.float32:
            raise unsupported(imp, node, f"a {g.dtype(bias)} bias (float32 is)")
        y = g.add(y, bias)
    return y


@ms_handles("MatMulIntegerToFloat")
def _op_matmul_integer_to_float(imp, node, ins, at):
    """(A - a_zp) @ (B - b_zp) in int32, times a_scale * b_scale (per column of B or one), plus
    bias: the fusion onnxruntime makes of MatMulInteger, Cast and Mul."""
    g = imp.g
    a, ua, b, ub = _kinds_and_values(imp, node, ins, 0, 1)
    n = _columns(imp, b)
    a_scale = ins[2] if not isinstance(ins[2], np.ndarray) else _scale(imp, node, ins[2], "a_scale").reshape(())
    if not isinstance(a_scale, np.ndarray) and int(np.prod(g.shape(a_scale))) != 1:
        raise unsupported(imp, node, "an a_scale of more than one element")
    b_scale = _scale(imp, node, ins[3], "b_scale", (1, n))
    za_value = _opt(ins, 4)
    za = _zero_point(imp, node, za_value, ua, "a_zero_point", dynamic=True)
    zb = _zero_point(imp, node, _opt(ins, 5), ub, "b_zero_point", (1, n), dynamic=True)
    fused = _fused_dynamic(imp, a, za_value, b, zb)
    if fused is not None:
        acc = g.emit(DynamicMatmulIntegerOp, fused[0], np.ascontiguousarray(b.T), fused[1])
    else:
        acc = _matmul_integer(imp, node, a, za, b, zb)
    if not isinstance(a_scale, np.ndarray):
        a_scale = g.reshape(a_scale, ())
    return [_scaled_float(imp, node, acc, a_scale, b_scale if b_scale.size > 1 else b_scale.reshape(()),
                          _opt(ins, 6))]


@ms_handles("DynamicQuantizeMatMul")
def _op_dynamic_quantize_matmul(imp, node, ins, at):
    """A quantized to uint8 as DynamicQuantizeLinear does, (A_q - a_zp) @ (B - b_zp) in int32,
    times a_scale * b_scale, plus bias."""
    y, a_scale, za_value = _op_dynamic_quantize(imp, node, [ins[0]], {})
    return _op_matmul_integer_to_float(imp, node, [y, ins[1], a_scale, ins[2], za_value, _opt(ins, 3),
                                                   _opt(ins, 4)], at)


# ---------------------------------------------------------------------------------------------
# com.microsoft elementwise and pooling ops
# ---------------------------------------------------------------------------------------------


def _elementwise_operand(imp, node, ins, i: int, what: str):
    """(value as held, kind, scale, zero point as held) of input i and its scale and zp."""
    v, u = _operand(imp, node, ins[i], what)
    s = _scale(imp, node, ins[i + 1], f"{what}_scale")
    z = _zero_point(imp, node, _opt(ins, i + 2), u, f"{what}_zero_point")
    return v, u, s[0], int(z[0])


def _output_params(imp, node, ins, i: int, unsigned_default: bool):
    s = _scale(imp, node, ins[i], "output scale")[0]
    zv = _opt(ins, i + 1)
    u = is_uint8(imp, node, zv) if zv is not None else unsigned_default
    z = _zero_point(imp, node, zv, u, "output zero point")
    return s, int(z[0]), u


@ms_handles("QLinearAdd")
def _op_qlinear_add(imp, node, ins, at):
    """C = (A_scale (A - A_zp) + B_scale (B - B_zp)) / C_scale + C_zp in float32, rounded half
    to even and saturated (the contrib op's definition, and ONNX Runtime's portable kernel)."""
    g = imp.g
    a, ua, sa, za = _elementwise_operand(imp, node, ins, 0, "A")
    b, ub, sb, zb = _elementwise_operand(imp, node, ins, 3, "B")
    sc, zc, uc = _output_params(imp, node, ins, 6, ua)
    fa = g.mul(g.sub(g.cast(a, np.float32), np.array(za, np.float32)), np.array(sa, np.float32))
    fb = g.mul(g.sub(g.cast(b, np.float32), np.array(zb, np.float32)), np.array(sb, np.float32))
    r = g.unary(aicc.RoundOp, g.div(g.add(fa, fb), np.array(sc, np.float32)))
    return [_saturate(imp, r, zc, uc)]


@ms_handles("QLinearMul")
def _op_qlinear_mul(imp, node, ins, at):
    """C = (A - A_zp)(B - B_zp) in int32, requantized with A_scale B_scale / C_scale (float32),
    as ONNX Runtime's kernel."""
    g = imp.g
    a, ua, sa, za = _elementwise_operand(imp, node, ins, 0, "A")
    b, ub, sb, zb = _elementwise_operand(imp, node, ins, 3, "B")
    sc, zc, uc = _output_params(imp, node, ins, 6, ua)
    ia = g.sub(_i32(g, a), np.array(za, np.int32)) if za else _i32(g, a)
    ib = g.sub(_i32(g, b), np.array(zb, np.int32)) if zb else _i32(g, b)
    mult = (np.float32(sa) * np.float32(sb)) / np.float32(sc)
    return [_requantize(imp, g.mul(ia, ib), mult, zc, uc)]


def _lookup(imp, node, ins, fn):
    """A unary op of static scales as ONNX Runtime computes it: a table of its 256 results,
    each input value dequantized in float32, transformed by `fn` and quantized again."""
    g = imp.g
    x, ux, sx, zx = _elementwise_operand(imp, node, ins, 0, "X")
    sy, zy, uy = _output_params(imp, node, ins, 3, ux)
    held = np.arange(-128, 128)  # the table is indexed by the held value + 128
    deq = np.float32(sx) * (held - zx).astype(np.float32)
    with np.errstate(over="ignore"):
        val = np.asarray(fn(deq), np.float32)
    q = np.clip(np.round(val / np.float32(sy)), -128 - zy, 127 - zy) + zy
    table = q.astype(np.int8)
    if isinstance(x, np.ndarray):
        y = table[x.astype(np.int64) + 128]
        return [(y.astype(np.int16) + 128).astype(np.uint8) if uy else y]
    idx = g.add(g.cast(x, np.int32), np.array(128, np.int32))
    return [set_int8_kind(imp, g.emit(lambda t, i: aicc_nn.GatherOp(t, i, 0), table, idx), uy)]


@ms_handles("QLinearSigmoid")
def _op_qlinear_sigmoid(imp, node, ins, at):
    return _lookup(imp, node, ins, lambda v: 1.0 / (1.0 + np.exp(-v.astype(np.float64))))


@ms_handles("QLinearLeakyRelu")
def _op_qlinear_leaky_relu(imp, node, ins, at):
    alpha = np.float32(at.get("alpha", 0.01))
    return _lookup(imp, node, ins, lambda v: np.where(v >= 0, v, alpha * v))


@ms_handles("QLinearGlobalAveragePool")
def _op_qlinear_global_average_pool(imp, node, ins, at):
    """sum(x - x_zp) over the image in int32, requantized with x_scale / (y_scale * size), as
    ONNX Runtime's kernel."""
    g = imp.g
    x, ux, sx, zx = _elementwise_operand(imp, node, ins, 0, "x")
    sy, zy, uy = _output_params(imp, node, ins, 3, ux)
    shape = g.shape(x)
    if len(shape) < 3:
        raise unsupported(imp, node, f"a rank-{len(shape)} input")
    axes = list(range(1, len(shape) - 1)) if at.get("channels_last", 0) else list(range(2, len(shape)))
    size = int(np.prod([shape[a] for a in axes]))
    acc = g.reduce(aicc.ReduceSumOp, _i32(g, x), axes, True)
    if zx:
        acc = g.sub(acc, np.array(zx * size, np.int32))
    mult = np.float32(sx) / (np.float32(sy) * np.float32(size))
    return [_requantize(imp, acc, mult, zy, uy)]
