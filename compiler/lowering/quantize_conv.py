"""Integer convolutions of QDQ graphs, and NHWC int8 activations between them (part of the
quantize-matmul pass).

A QDQ convolution (onnxruntime.quantization.quantize_static's format) reads

    %x = aicc.dequantize %qx {per tensor}                  // i8 NCHW activation
    %p = aicc.pad %x {H, W only, value = 0.0}              // optional
    %w = aicc.dequantize %qw {per output channel or per tensor, zero point 0}   // constant qw
    %c = aicc.conv2d %p, %w
    %b = aicc.add %c, dense<bias> : ..., tensor<Ox1x1xf32>  // optional
    %r = aicc.relu %b                                       // optional
    %y = aicc.quantize %r {per tensor}                      // optional: the next layer's input

and becomes (groups 1) an int8 im2col on NHWC, as compiler.quantize's own convs:

    %t = aicc.transpose %qx (NCHW -> NHWC) ; aicc.pad %t with the zero point (what 0.0 quantizes to)
    %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, s p + d i, s q + d j, c]"
    %acc = aicc.matmul_integer %rows, dense<qw as (O, KH*KW*C)> {lhs_zero_point = zx}

With the quantize, the epilogue is ONNX Runtime's requantization (QLinearConv,
MlasRequantizeOutput), so that the int8 result is ONNX Runtime's integer result:

    y = clamp(rne(float32(acc + bias_i32) * m[o]) + zy, -128, 127),
    m[o] = float32(x_scale) * float32(w_scale[o]) / float32(y_scale)      (float32 arithmetic)

written as aicc.add (int32 bias), aicc.cast, aicc.mul, [aicc.relu] and aicc.quantize of scale
1, one fused loop after the integer GEMM. The int32 bias is the float bias divided by
x_scale * w_scale[o] (the quantizer's bias scale; the frontend dequantized it): exactly an
integer for a bias the quantizer wrote; any other bias stays a float add before a quantize of
scale y_scale. Without a quantize, the conv's float result is float32(acc) * x_scale * w_scale.
The NHWC result goes back to NCHW through a transpose marked `aicc.nhwc`.

A grouped (depthwise) conv whose partial sums provably stay below 2^24 is a float32 conv2d of
the integer values (x - zx and qw: exact), cast back to int32, with the same epilogue, in NCHW.

Then the marked NHWC -> NCHW transposes sink (`SinkNHWCTranspose`) past the layout-free ops
of a QDQ graph: per-tensor quantize and dequantize, casts, unary ops, binary ops whose other
operand is a constant or another marked transpose (a residual add), pads of H and W, pools
(as NHWC aicc.tensor_op reductions) and reductions over H and W; the next int8 conv's
NCHW -> NHWC transpose then cancels against them (simplify composes the two), so consecutive
int8 convs pass int8 NHWC activations on without a float round trip or a relayout. A QDQ max
pool (quantize(max pool(dequantize(x))), the same parameters) becomes a max pool of the int8
x (`Int8MaxPool`).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import UnitAttr, f32, i32
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc_quant import QMAX, QMIN, DequantizeOp, MatmulIntegerOp, QuantizeOp

QUANTIZED_ATTR = "aicc.quantized"  # on the integer ops: m.stats["quantized_ops"] counts them
NHWC_ATTR = "aicc.nhwc"  # on an int8 conv's NHWC -> NCHW transpose: SinkNHWCTranspose moves it
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
FLOAT_EXACT = 1 << 24  # integers below this, and sums of them, are exact in float32


def window(stride: int, v: str, dil: int, k: str) -> str:
    """The input subscript of output index v and window index k: `stride * v + dil * k`."""
    return " + ".join(f"{a} * {x}" if a != 1 else x for a, x in ((stride, v), (dil, k)))


def hw_pad(pad: aicc_nn.PadOp) -> bool:
    """Whether an NCHW pad pads only H and W."""
    return aicc_nn.int_values(pad.low)[:2] == aicc_nn.int_values(pad.high)[:2] == (0, 0)


def nhwc_pad(x: SSAValue, pad: aicc_nn.PadOp, value: float) -> aicc_nn.PadOp:
    """The NCHW pad `pad`, of `value`, on the NHWC `x`."""
    return aicc_nn.PadOp(x, [aicc_nn.int_values(pad.low)[i] for i in TO_NHWC],
                         [aicc_nn.int_values(pad.high)[i] for i in TO_NHWC], value)


def nhwc_pool(x: SSAValue, pool: aicc_nn.Pool2dOp) -> Operation:
    """The NCHW pool `pool` on the NHWC `x`, as a tensor_op: out[n, p, q, c] =
    kind[i, j](x[n, s p + d i, s q + d j, c])."""
    from compiler.dialects.aicc_index import TensorOp

    (kh, kw), (sh, sw) = aicc_nn.int_values(pool.kernel), aicc_nn.int_values(pool.strides)
    (dh, dw), (n, c, oh, ow) = aicc_nn.int_values(pool.dilations), aicc.shape_of(pool.result)
    h, w = window(sh, "p", dh, "i"), window(sw, "q", dw, "j")
    return TensorOp(f"out[n, p, q, c] = {pool.kind.data}[i, j](in0[n, {h}, {w}, c])", [x],
                    {"n": n, "p": oh, "q": ow, "c": c, "i": kh, "j": kw},
                    aicc.TensorType(aicc.element_type_of(x), (n, oh, ow, c)))


def im2col_matmul(xq: SSAValue, zp: int, qw: np.ndarray, strides, dilations, out_hw) -> list[Operation]:
    """The int8 NHWC (padded) `xq` convolved with the (O, C, KH, KW) int8 `qw`: one tensor_op
    gathers the windows, cols[n, p, q, i, j, c] = xq[n, s p + d i, s q + d j, c] (runs of
    KW*C contiguous bytes), and the (N*OH*OW, KH*KW*C) rows times the (O, KH*KW*C) weight run
    in matmul_integer with the lhs zero point `zp`. The last op is the matmul (N*OH*OW, O) i32."""
    from compiler.dialects.aicc_index import TensorOp

    n, _, _, c = aicc.shape_of(xq)
    o, _, kh, kw = qw.shape
    oh, ow = out_hw
    (sh, sw), (dh, dw) = strides, dilations
    text = f"out[n, p, q, i, j, c] = in0[n, {window(sh, 'p', dh, 'i')}, {window(sw, 'q', dw, 'j')}, c]"
    cols = TensorOp(text, [xq], {"n": n, "p": oh, "q": ow, "i": kh, "j": kw, "c": c},
                    aicc.TensorType(aicc.element_type_of(xq), (n, oh, ow, kh, kw, c)))
    rows = aicc.ReshapeOp(cols.result, (n * oh * ow, kh * kw * c))
    cw = aicc.ConstantOp.from_array(np.ascontiguousarray(qw.transpose(0, 2, 3, 1)).reshape(o, kh * kw * c))
    mm = MatmulIntegerOp(rows.result, cw.result, zp, transpose_rhs=True)
    mm.attributes[QUANTIZED_ATTR] = aicc.StringAttr("conv2d")
    return [cols, rows, cw, mm]


def _single_use(v: SSAValue) -> Operation | None:
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def _const(v: SSAValue) -> np.ndarray | None:
    return aicc.numpy_from_dense(v.owner.value) if isinstance(v.owner, aicc.ConstantOp) else None


def _channel_bias(add: Operation, conv_out: SSAValue, o: int) -> np.ndarray | None:
    """The (O,) bias of `conv_out + dense<bias>` (bias shaped (O, 1, 1) or (1, O, 1, 1)), else None."""
    if not isinstance(add, aicc.AddOp) or aicc.shape_of(add.result) != aicc.shape_of(conv_out):
        return None
    other = add.rhs if add.lhs is conv_out else add.lhs
    if other is conv_out:
        return None
    b = _const(other)
    if b is None or b.dtype != np.float32 or b.size != o or b.ndim > 4:
        return None
    shape = (1,) * (4 - b.ndim) + b.shape
    return b.reshape(-1) if shape == (1, o, 1, 1) else None


def _int_bias(bias: np.ndarray, acc_scale: np.ndarray) -> np.ndarray | None:
    """The int32 bias whose dequantization with `acc_scale` (x_scale * w_scale[o]) is `bias`,
    when `bias` is one (as quantize_static writes it), else None."""
    r = bias.astype(np.float64) / acc_scale
    q = np.rint(r)
    if np.all(np.abs(r - q) <= 1e-2) and np.all(np.abs(q) < FLOAT_EXACT):
        return q.astype(np.int32)
    return None


class IntegerConv(RewritePattern):
    """conv2d(dequantize(qx), dequantize(qw)) [+ bias] [relu] [quantize] in integers (see the module)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.Conv2dOp, rewriter: PatternRewriter) -> None:
        if aicc.element_type_of(op.result) != f32:
            return
        if not all(isinstance(d, int) for d in (*aicc.shape_of(op.input), *aicc.shape_of(op.result))):
            return  # symbolic dims: the im2col's ranges are static (the float conv stays)
        x, pad = op.input, None
        if isinstance(x.owner, aicc_nn.PadOp) and hw_pad(x.owner) and x.owner.value.value.data == 0.0:
            pad, x = x.owner, x.owner.input
        dx, dw = x.owner, op.weight.owner
        if not (isinstance(dx, DequantizeOp) and dx.axis.value.data == -1 and isinstance(dw, DequantizeOp)):
            return
        qw = _const(dw.input)
        w_scale, w_zp, w_axis = dw.params()
        if qw is None or qw.ndim != 4 or w_axis not in (-1, 0) or np.any(w_zp != 0):
            return
        o = qw.shape[0]
        groups = op.groups.value.data
        x_scale, x_zp, _ = dx.params()
        sx, zx = np.float32(x_scale.reshape(-1)[0]), int(x_zp.reshape(-1)[0])
        sw = np.broadcast_to(w_scale.reshape(-1), (o,)).astype(np.float32)
        if groups > 1:  # exact in float32 only while every partial sum stays below 2^24
            x_range = max(zx - QMIN, QMAX - zx)
            if int(np.abs(qw.astype(np.int64)).reshape(o, -1).sum(1).max(initial=0)) * x_range >= FLOAT_EXACT:
                return
        # the epilogue: bias, relu, quantize, each the only reader of the one before
        chain: list[Operation] = []
        bias = quant = relu = None
        v = op.result
        u = _single_use(v)
        if u is not None and (b := _channel_bias(u, v, o)) is not None:
            bias, v = b, u.result
            chain.append(u)
            u = _single_use(v)
        if isinstance(u, aicc.ReluOp):
            relu, v = u, u.result
            chain.append(u)
            u = _single_use(v)
        if isinstance(u, QuantizeOp) and u.axis.value.data == -1:
            quant = u
        elif relu is not None:  # a relu the epilogue does not end in: left as it is
            chain.pop()
            relu, v = None, chain[-1].result if chain else op.result
        acc_scale = sx.astype(np.float64) * sw.astype(np.float64)

        n, _, _, _ = aicc.shape_of(op.input)
        _, _, oh, ow = aicc.shape_of(op.result)
        strides, dil = aicc_nn.int_values(op.strides), aicc_nn.int_values(op.dilations)
        new: list[Operation] = []
        if groups == 1:
            t = aicc.TransposeOp(dx.input, list(TO_NHWC))
            new.append(t)
            xq = t.result
            if pad is not None:
                new.append(nhwc_pad(xq, pad, float(zx)))
                xq = new[-1].results[0]
            new += im2col_matmul(xq, zx, qw, strides, dil, (oh, ow))
            along: tuple[int, ...] = (o,)
        else:  # float32 conv2d of x - zx and qw, both exact integers, in NCHW
            xf = aicc.CastOp(dx.input, f32)
            xs = aicc.SubOp(xf.result, aicc.ConstantOp.from_array(np.array(float(zx), np.float32)).result)
            new += [xs.rhs.owner, xf, xs]
            xv = xs.result
            if pad is not None:
                new.append(aicc_nn.PadOp(xv, aicc_nn.int_values(pad.low), aicc_nn.int_values(pad.high), 0.0))
                xv = new[-1].results[0]
            wc = aicc.ConstantOp.from_array(qw.astype(np.float32))
            conv = aicc_nn.Conv2dOp(xv, wc.result, strides, dil, groups)
            conv.attributes[QUANTIZED_ATTR] = aicc.StringAttr("conv2d")
            new += [wc, conv, aicc.CastOp(conv.result, i32)]
            along = (o, 1, 1)
        acc = new[-1].results[0]

        def const(a: np.ndarray) -> SSAValue:
            c = aicc.ConstantOp.from_array(np.ascontiguousarray(a.reshape(along)))
            new.append(c)
            return c.result

        def then(make) -> SSAValue:
            new.append(make)
            return make.results[0]

        int_bias = None if bias is None or quant is None else _int_bias(bias, acc_scale)
        if quant is not None and (bias is None or int_bias is not None):
            # ONNX Runtime's requantization: rne(float32(acc + bias) * m) + zy, saturated
            y_scale, y_zp, _ = quant.params()
            m = (sx * sw) / np.float32(y_scale.reshape(-1)[0])
            if int_bias is not None:
                acc = then(aicc.AddOp(acc, const(int_bias)))
            y = then(aicc.MulOp(then(aicc.CastOp(acc, f32)), const(m.astype(np.float32))))
            if relu is not None:
                y = then(aicc.ReluOp(y))
            y = then(QuantizeOp(y, [1.0], [int(y_zp.reshape(-1)[0])]))
            last = quant
        else:
            y = then(aicc.MulOp(then(aicc.CastOp(acc, f32)), const(acc_scale.astype(np.float32))))
            if quant is not None:  # a float bias: y + bias [relu], then the graph's own quantize
                y = then(aicc.AddOp(y, const(bias)))
                if relu is not None:
                    y = then(aicc.ReluOp(y))
                y_scale, y_zp, _ = quant.params()
                y = then(QuantizeOp(y, [float(y_scale.reshape(-1)[0])], [int(y_zp.reshape(-1)[0])]))
                last = quant
            else:
                last = op  # the graph's bias add and relu (if any) stay after it
        if groups == 1:
            y = then(aicc.ReshapeOp(y, (n, oh, ow, o)))
            back = aicc.TransposeOp(y, list(TO_NCHW))
            back.attributes[NHWC_ATTR] = UnitAttr()
            new.append(back)
        rewriter.insert_op(new)
        rewriter.replace(last, [], [new[-1].results[0]])
        if last is not op:
            for dead in [*reversed(chain), op]:
                rewriter.erase_op(dead)
        if pad is not None and not pad.result.uses:
            rewriter.erase_op(pad)


def _marked(v: SSAValue) -> aicc.TransposeOp | None:
    t = v.owner
    if isinstance(t, aicc.TransposeOp) and NHWC_ATTR in t.attributes and t.perm == TO_NCHW:
        return t
    return None


class SinkNHWCTranspose(RewritePattern):
    """op(transpose_nchw(x)) -> transpose_nchw(op'(x)) for a marked transpose and a layout-free
    op (see the module); transpose_nhwc(transpose_nchw(x)) -> x."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:

        if not op.operands:
            return
        ts = [_marked(v) for v in op.operands]
        if not any(ts):
            return
        t = next(t for t in ts if t is not None)
        v = t.input
        rank4 = len(aicc.shape_of(t.result)) == 4
        if isinstance(op, aicc.TransposeOp):
            if tuple(TO_NCHW[i] for i in op.perm) == (0, 1, 2, 3):
                rewriter.replace(op, [], [v])
            return
        pre: list[Operation] = []
        if isinstance(op, (QuantizeOp, DequantizeOp)):
            if op.axis.value.data != -1:
                return
            scale, zp, _ = op.params()
            new = type(op)(v, list(scale.reshape(-1)), list(zp.reshape(-1)), -1,
                           *([aicc.element_type_of(op.result)] if isinstance(op, DequantizeOp) else []))
        elif isinstance(op, aicc.CastOp):
            new = aicc.CastOp(v, aicc.element_type_of(op.result))
        elif isinstance(op, aicc.UnaryOp):
            new = type(op).create(operands=[v], result_types=[v.type], attributes=dict(op.attributes),
                                  properties=dict(op.properties))
        elif isinstance(op, aicc.BinaryOp):
            if aicc.shape_of(op.result) != aicc.shape_of(t.result) or not rank4:
                return
            operands = []
            for x, tx in zip(op.operands, ts):
                if tx is not None and tx.input.type == v.type:
                    operands.append(tx.input)
                    continue
                a = _const(x)
                if a is None or a.ndim > 4:
                    return
                k = aicc.ConstantOp.from_array(np.ascontiguousarray(a.reshape((1,) * (4 - a.ndim) + a.shape)
                                                                    .transpose(TO_NHWC)))
                pre.append(k)
                operands.append(k.result)
            new = type(op)(*operands)
        elif isinstance(op, aicc_nn.PadOp) and hw_pad(op):
            new = nhwc_pad(v, op, op.value.value.data)
        elif isinstance(op, aicc_nn.Pool2dOp):
            new = nhwc_pool(v, op)
        elif isinstance(op, aicc.ReduceOp) and op.axes_tuple == (2, 3) and op.keep and rank4:
            new = type(op)(v, [1, 2], True)
        elif isinstance(op, aicc.ReshapeOp):  # moving only unit dims: the NHWC data in the same order
            shape = aicc.shape_of(t.result)
            if [d for d in aicc.shape_of(v) if d != 1] != [d for d in shape if d != 1] or 0 in shape:
                return
            rewriter.replace(op, aicc.ReshapeOp(v, aicc.shape_of(op.result)))
            return
        else:
            return
        back = aicc.TransposeOp(new.results[0], list(TO_NCHW))
        back.attributes[NHWC_ATTR] = UnitAttr()
        rewriter.replace(op, [*pre, new, back], [back.result])


def _same_params(q: QuantizeOp, d: DequantizeOp) -> bool:
    return d.axis.value.data == q.axis.value.data == -1 and list(q.scale.get_values()) == list(d.scale.get_values()) \
        and list(q.zero_point.get_values()) == list(d.zero_point.get_values())


def max_pool_of(pool: Operation | None) -> tuple[SSAValue, str, dict[str, int]] | None:
    """(input, tensor_op text, ranges) of a max pool: an aicc.tensor_op max reduction of one
    access to one input (NHWC, after SinkNHWCTranspose), or an NCHW aicc.pool2d as the same
    tensor_op; else None."""
    from compiler.dialects import index_notation as ixn
    from compiler.dialects.aicc_index import TensorOp

    if isinstance(pool, TensorOp) and len(pool.inputs) == 1:
        stmt = pool.statement
        if not (isinstance(stmt.body, ixn.Reduce) and stmt.body.kind == "max"
                and isinstance(stmt.body.body, ixn.Access)):
            return None
        return pool.inputs[0], pool.expr.data, {k: v.value.data for k, v in pool.ranges.data.items()}
    if isinstance(pool, aicc_nn.Pool2dOp) and pool.kind.data == "max":
        (kh, kw), (sh, sw) = aicc_nn.int_values(pool.kernel), aicc_nn.int_values(pool.strides)
        (dh, dw), (n, c, oh, ow) = aicc_nn.int_values(pool.dilations), aicc.shape_of(pool.result)
        text = (f"out[n, c, p, q] = max[i, j](in0[n, c, {window(sh, 'p', dh, 'i')}, "
                f"{window(sw, 'q', dw, 'j')}])")
        return pool.input, text, {"n": n, "c": c, "p": oh, "q": ow, "i": kh, "j": kw}
    return None


class Int8MaxPool(RewritePattern):
    """quantize(max pool(dequantize(x))) with the same per-tensor parameters (a QDQ max pool)
    is the max pool of the int8 x itself: dequantize increases strictly and quantize inverts
    it exactly. The pool (an NHWC aicc.tensor_op max after SinkNHWCTranspose, or an NCHW
    aicc.pool2d) then reads and writes int8, a quarter of the float32 bytes.

    A padded pool (ResNet's stem: a pad of -inf between the dequantize and the max) pads the
    int8 x with its type's least value, QMIN, instead: no value of x is below it, so a window's
    max is the same, and a window of padding alone gives quantize(-inf) = QMIN either way."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: QuantizeOp, rewriter: PatternRewriter) -> None:
        from compiler.dialects.aicc_index import TensorOp

        pool = max_pool_of(op.input.owner)
        if pool is None:
            return
        x, text, ranges = pool
        pad, d = None, x.owner
        if isinstance(d, aicc_nn.PadOp) and d.value.value.data == -np.inf:
            pad, d = d, d.input.owner
        if not (isinstance(d, DequantizeOp) and _same_params(op, d)):
            return
        new = [] if pad is None else [aicc_nn.PadOp(d.input, aicc_nn.int_values(pad.low),
                                                    aicc_nn.int_values(pad.high), QMIN)]
        src = new[0].result if new else d.input
        rewriter.replace(op, [*new, TensorOp(text, [src], ranges, op.result.type)])


__all__ = ["IntegerConv", "Int8MaxPool", "NHWC_ATTR", "QUANTIZED_ATTR", "SinkNHWCTranspose", "TO_NCHW", "TO_NHWC",
           "hw_pad", "im2col_matmul", "max_pool_of", "nhwc_pad", "window"]
