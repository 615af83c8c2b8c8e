"""The vector-Jacobian product of every differentiable aicc op, one rule per op (see
compiler/lowering/autodiff.py). Each rule gets the op and the cotangent `g` of its result and
returns one gradient per operand (None: no gradient), written with aicc ops; the identity it
implements is its comment. Broadcast operands get `b.unbroadcast`: the sum over the broadcast
dims.

Conventions where the derivative is not unique, as in PyTorch: maximum/minimum split the
gradient evenly between equal operands; reduce_max/min split it evenly among the tied
extremes; max pooling gives it to the first maximum of each window (row-major); relu, abs and
sign-like kinks have derivative 0 at 0; floor, ceil and round have derivative 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc_nn import int_values
from compiler.dialects.shapes import element_type_of, shape_of
from compiler.lowering.autodiff import VJPBuilder, differentiable, vjp

Grads = list[SSAValue | None]


def _x(op: Operation) -> SSAValue:
    return op.operands[0]


def _y(op: Operation) -> SSAValue:
    return op.results[0]


# -- elementwise, one operand: dx = g * f'(x) -------------------------------------------------


def _unary(b: VJPBuilder, op: Operation, g: SSAValue, dfdx: SSAValue) -> Grads:
    return [b.mul(g, dfdx)]


@vjp(aicc.NegOp)
def _neg(b, op, g):  # d(-x) = -1
    return [b.neg(g)]


@vjp(aicc.ExpOp)
def _exp(b, op, g):  # d exp x = exp x
    return _unary(b, op, g, _y(op))


@vjp(aicc.LogOp)
def _log(b, op, g):  # d log x = 1 / x
    return [b.div(g, _x(op))]


@vjp(aicc.TanhOp)
def _tanh(b, op, g):  # d tanh x = 1 - tanh^2 x
    y = _y(op)
    return _unary(b, op, g, b.sub(b.constant(1.0, y), b.mul(y, y)))


@vjp(aicc.SigmoidOp)
def _sigmoid(b, op, g):  # d s(x) = s (1 - s)
    y = _y(op)
    return _unary(b, op, g, b.mul(y, b.sub(b.constant(1.0, y), y)))


@vjp(aicc.SqrtOp)
def _sqrt(b, op, g):  # d sqrt x = 1 / (2 sqrt x)
    return [b.div(b.scale(g, 0.5), _y(op))]


@vjp(aicc.RsqrtOp)
def _rsqrt(b, op, g):  # d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
    y = _y(op)
    return _unary(b, op, g, b.scale(b.mul(b.mul(y, y), y), -0.5))


def _positive(b: VJPBuilder, x: SSAValue) -> SSAValue:
    """1.0 where x > 0, else 0.0."""
    return b.select(b.compare("gt", x, b.constant(0.0, x)), b.constant(1.0, x), b.constant(0.0, x))


@vjp(aicc.ReluOp)
def _relu(b, op, g):  # d max(x, 0) = [x > 0]
    return _unary(b, op, g, _positive(b, _x(op)))


@vjp(aicc.AbsOp)
def _abs(b, op, g):  # d |x| = sign x
    x = _x(op)
    return _unary(b, op, g, b.sub(_positive(b, x), _positive(b, b.neg(x))))


@vjp(aicc.ErfOp)
def _erf(b, op, g):  # d erf x = 2/sqrt(pi) exp(-x^2)
    x = _x(op)
    e = b.emit(aicc.ExpOp(b.neg(b.mul(x, x))))
    return _unary(b, op, g, b.scale(e, 2.0 / math.sqrt(math.pi)))


@vjp(aicc.GeluOp)
def _gelu(b, op, g):
    x = _x(op)
    one = b.constant(1.0, x)
    if op.is_tanh:
        # y = x/2 (1 + tanh u), u = c (x + a x^3): dy = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) c (1 + 3a x^2)
        c, a = math.sqrt(2.0 / math.pi), 0.044715
        x2 = b.mul(x, x)
        t = b.emit(aicc.TanhOp(b.scale(b.add(x, b.scale(b.mul(x2, x), a)), c)))
        du = b.scale(b.add(one, b.scale(x2, 3 * a)), c)
        dt = b.mul(b.sub(one, b.mul(t, t)), du)
        d = b.add(b.scale(b.add(one, t), 0.5), b.mul(b.scale(x, 0.5), dt))
    else:
        # y = x Phi(x): dy = Phi(x) + x phi(x)
        phi_cdf = b.scale(b.add(one, b.emit(aicc.ErfOp(b.scale(x, 1.0 / math.sqrt(2.0))))), 0.5)
        pdf = b.scale(b.emit(aicc.ExpOp(b.scale(b.mul(x, x), -0.5))), 1.0 / math.sqrt(2.0 * math.pi))
        d = b.add(phi_cdf, b.mul(x, pdf))
    return _unary(b, op, g, d)


@vjp(aicc.SinOp)
def _sin(b, op, g):  # d sin = cos
    return _unary(b, op, g, b.emit(aicc.CosOp(_x(op))))


@vjp(aicc.CosOp)
def _cos(b, op, g):  # d cos = -sin
    return _unary(b, op, g, b.neg(b.emit(aicc.SinOp(_x(op)))))


@vjp(aicc.TanOp)
def _tan(b, op, g):  # d tan = 1 + tan^2
    y = _y(op)
    return _unary(b, op, g, b.add(b.constant(1.0, y), b.mul(y, y)))


def _one_minus_sq(b: VJPBuilder, x: SSAValue) -> SSAValue:
    return b.sub(b.constant(1.0, x), b.mul(x, x))


@vjp(aicc.AsinOp)
def _asin(b, op, g):  # d asin = 1 / sqrt(1 - x^2)
    return [b.div(g, b.emit(aicc.SqrtOp(_one_minus_sq(b, _x(op)))))]


@vjp(aicc.AcosOp)
def _acos(b, op, g):  # d acos = -1 / sqrt(1 - x^2)
    return [b.neg(b.div(g, b.emit(aicc.SqrtOp(_one_minus_sq(b, _x(op))))))]


@vjp(aicc.AtanOp)
def _atan(b, op, g):  # d atan = 1 / (1 + x^2)
    x = _x(op)
    return [b.div(g, b.add(b.constant(1.0, x), b.mul(x, x)))]


@vjp(aicc.SinhOp)
def _sinh(b, op, g):  # d sinh = cosh
    return _unary(b, op, g, b.emit(aicc.CoshOp(_x(op))))


@vjp(aicc.CoshOp)
def _cosh(b, op, g):  # d cosh = sinh
    return _unary(b, op, g, b.emit(aicc.SinhOp(_x(op))))


@vjp(aicc.FloorOp, aicc.CeilOp, aicc.RoundOp)
def _step(b, op, g):  # piecewise constant: derivative 0
    return [None]


@vjp(aicc.CastOp)
def _cast(b, op, g):  # a float -> float cast passes the gradient back in the operand's type
    x = _x(op)
    if not differentiable(x):
        return [None]
    return [g if element_type_of(x) == element_type_of(g) else b.emit(aicc.CastOp(g, element_type_of(x)))]


# -- elementwise, two operands (with broadcasting) ---------------------------------------------


def _back(b: VJPBuilder, op: Operation, ga: SSAValue | None, gb: SSAValue | None) -> Grads:
    lhs, rhs = op.operands[0], op.operands[1]
    return [None if ga is None else b.unbroadcast(ga, shape_of(lhs)),
            None if gb is None else b.unbroadcast(gb, shape_of(rhs))]


@vjp(aicc.AddOp)
def _add(b, op, g):  # d(a + b) = (1, 1)
    return _back(b, op, g, g)


@vjp(aicc.SubOp)
def _sub(b, op, g):  # d(a - b) = (1, -1)
    return _back(b, op, g, b.neg(g))


@vjp(aicc.MulOp)
def _mul(b, op, g):  # d(a b) = (b, a)
    lhs, rhs = op.operands
    return _back(b, op, b.mul(g, rhs), b.mul(g, lhs))


@vjp(aicc.DivOp)
def _div(b, op, g):  # d(a / b) = (1 / b, -a / b^2) = (1 / b, -y / b)
    rhs = op.operands[1]
    ga = b.div(g, rhs)
    return _back(b, op, ga, b.neg(b.mul(ga, _y(op))))


def _extreme(b: VJPBuilder, op: Operation, g: SSAValue, wins: str) -> Grads:
    """maximum (wins="gt") / minimum ("lt"): the winner takes g, a tie splits it in halves."""
    lhs, rhs = op.operands
    y = _y(op)
    one, half, zero = (b.constant(v, y) for v in (1.0, 0.5, 0.0))
    share = b.select(b.compare(wins, lhs, rhs), one, b.select(b.compare("eq", lhs, rhs), half, zero))
    ga = b.mul(g, share)
    return _back(b, op, ga, b.sub(g, ga))


@vjp(aicc.MaximumOp)
def _maximum(b, op, g):
    return _extreme(b, op, g, "gt")


@vjp(aicc.MinimumOp)
def _minimum(b, op, g):
    return _extreme(b, op, g, "lt")


@vjp(aicc.PowOp)
def _pow(b, op, g):  # d a^b = (b a^(b-1), a^b log a), the latter 0 where a <= 0
    lhs, rhs = op.operands
    y = _y(op)
    ga = b.mul(g, b.mul(rhs, b.emit(aicc.PowOp(lhs, b.sub(rhs, b.constant(1.0, rhs))))))
    pos = b.compare("gt", lhs, b.constant(0.0, lhs))
    safe = b.select(pos, lhs, b.constant(1.0, lhs))
    gb = b.mul(g, b.mul(y, b.emit(aicc.LogOp(safe))))
    return _back(b, op, ga, gb)


@vjp(aicc.ModOp)
def _mod(b, op, g):  # a mod b = a - b floor(a / b): (1, -floor(a / b))
    lhs, rhs = op.operands
    return _back(b, op, g, b.neg(b.mul(g, b.emit(aicc.FloorOp(b.div(lhs, rhs))))))


@vjp(aicc.FModOp)
def _fmod(b, op, g):  # fmod a b = a - b trunc(a / b): (1, -trunc(a / b))
    lhs, rhs = op.operands
    q = b.div(lhs, rhs)
    trunc = b.select(b.compare("ge", q, b.constant(0.0, q)), b.emit(aicc.FloorOp(q)), b.emit(aicc.CeilOp(q)))
    return _back(b, op, g, b.neg(b.mul(g, trunc)))


@vjp(aicc.SelectOp)
def _select(b, op, g):  # where(c, a, b): g flows to the chosen side
    cond, lhs, rhs = op.operands
    zero = b.constant(0.0, g)
    ga = b.unbroadcast(b.select(cond, g, zero), shape_of(lhs))
    gb = b.unbroadcast(b.select(cond, zero, g), shape_of(rhs))
    return [None, ga, gb]


# -- linear algebra and shapes ------------------------------------------------------------------


def _swap_last(shape: Sequence[int]) -> tuple[int, ...]:
    return (*shape[:-2], shape[-1], shape[-2])


def _transpose_last(b: VJPBuilder, v: SSAValue) -> SSAValue:
    rank = len(shape_of(v))
    return b.emit(aicc.TransposeOp(v, [*range(rank - 2), rank - 1, rank - 2]))


@vjp(aicc.MatmulOp)
def _matmul(b, op, g):
    # y = A' B' (+ bias), A' = A or A^T, B' = B or B^T: dA' = g B'^T, dB' = A'^T g
    lhs, rhs = op.lhs, op.rhs
    tl, tr = op.trans_lhs, op.trans_rhs
    da = b.emit(aicc.MatmulOp(g, rhs, transpose_rhs=not tr))
    da = b.unbroadcast(da, _swap_last(shape_of(lhs)) if tl else shape_of(lhs))
    db = b.emit(aicc.MatmulOp(lhs, g, transpose_lhs=not tl))
    db = b.unbroadcast(db, _swap_last(shape_of(rhs)) if tr else shape_of(rhs))
    grads = [_transpose_last(b, da) if tl else da, _transpose_last(b, db) if tr else db]
    if op.bias is not None:
        grads.append(b.unbroadcast(g, shape_of(op.bias)))
    return grads


def _keep_shape(op: aicc.ReduceOp) -> tuple[int, ...]:
    shape = shape_of(_x(op))
    return tuple(1 if i in op.axes_tuple else d for i, d in enumerate(shape))


def _spread(b: VJPBuilder, op: aicc.ReduceOp, v: SSAValue) -> SSAValue:
    """A reduction's result (or cotangent) broadcast back over the reduced dims."""
    keep = _keep_shape(op)
    if shape_of(v) != keep:
        v = b.emit(aicc.ReshapeOp(v, keep))
    return b.broadcast(v, shape_of(_x(op)))


@vjp(aicc.ReduceSumOp)
def _reduce_sum(b, op, g):  # d sum = 1 for each term
    return [_spread(b, op, g)]


@vjp(aicc.ReduceMeanOp)
def _reduce_mean(b, op, g):  # d mean = 1 / count
    shape = shape_of(_x(op))
    count = int(np.prod([shape[a] for a in op.axes_tuple]))
    return [_spread(b, op, b.scale(g, 1.0 / max(count, 1)))]


@vjp(aicc.ReduceMaxOp, aicc.ReduceMinOp)
def _reduce_extreme(b, op, g):  # the extreme takes g, ties share it evenly
    x = _x(op)
    hit = b.compare("eq", x, _spread(b, op, _y(op)))
    mask = b.select(hit, b.constant(1.0, x), b.constant(0.0, x))
    count = b.emit(aicc.ReduceSumOp(mask, op.axes_tuple, keepdims=True))
    return [b.mul(mask, b.broadcast(b.div(b.emit(aicc.ReshapeOp(g, _keep_shape(op))), count), shape_of(x)))]


@vjp(aicc.ReduceProdOp)
def _reduce_prod(b, op, g):  # d prod = prod / x_i (for x_i != 0)
    return [b.div(b.mul(_spread(b, op, g), _spread(b, op, _y(op))), _x(op))]


@vjp(aicc.SoftmaxOp)
def _softmax(b, op, g):  # dx = y (g - sum(g y))
    y = _y(op)
    axis = op.axis.value.data
    dot = b.emit(aicc.ReduceSumOp(b.mul(g, y), [axis], keepdims=True))
    return [b.mul(y, b.sub(g, dot))]


@vjp(aicc.TransposeOp)
def _transpose(b, op, g):  # the inverse permutation
    perm = list(op.permutation.get_values())
    return [b.emit(aicc.TransposeOp(g, list(np.argsort(perm))))]


@vjp(aicc.ReshapeOp)
def _reshape(b, op, g):
    return [b.emit(aicc.ReshapeOp(g, shape_of(_x(op))))]


@vjp(aicc.BroadcastToOp)
def _broadcast_to(b, op, g):
    return [b.unbroadcast(g, shape_of(_x(op)))]


@vjp(aicc_nn.PadOp)
def _pad(b, op, g):  # the interior of g
    x = _x(op)
    shape = shape_of(x)
    return [b.emit(aicc_nn.SliceOp(g, int_values(op.low), [1] * len(shape), shape))]


@vjp(aicc_nn.ConcatOp)
def _concat(b, op, g):  # each operand's part of g
    axis = op.axis.value.data
    grads, offset = [], 0
    rank = len(shape_of(g))
    for v in op.operands:
        shape = shape_of(v)
        starts = [offset if i == axis else 0 for i in range(rank)]
        grads.append(b.emit(aicc_nn.SliceOp(g, starts, [1] * rank, shape)) if differentiable(v) else None)
        offset += shape[axis]
    return grads


@vjp(aicc_nn.SliceOp)
def _slice(b, op, g):
    # g lands at start + i * step of each axis and zeros fill the rest: one resample per sliced
    # axis, whose single tap has weight 1 where a sliced element lands and 0 elsewhere.
    x = _x(op)
    in_shape, out_shape = shape_of(x), shape_of(_y(op))
    for axis, (start, step, n, d) in enumerate(zip(int_values(op.starts), int_values(op.steps), out_shape, in_shape)):
        if step == 1 and start == 0 and n == d:
            continue
        pos = np.arange(d)
        q, r = np.divmod(pos - start, step)
        hit = (r == 0) & (q >= 0) & (q < n)
        g = b.emit(aicc_nn.ResampleOp(g, axis, np.where(hit, q, 0), hit.astype(np.float64)))
    return [g]


@vjp(aicc_nn.ResampleOp)
def _resample(b, op, g):  # the transposed linear map: each input gathers the outputs it fed
    x = _x(op)
    if not differentiable(x):
        return [None]
    axis = op.axis.value.data
    idx, w = op.tables()
    n_in = shape_of(x)[axis]
    dense = np.zeros((idx.shape[0], n_in))
    np.add.at(dense, (np.repeat(np.arange(idx.shape[0]), idx.shape[1]), idx.reshape(-1)),
              (np.ones(idx.shape) if w is None else w).reshape(-1))
    taps = max(1, int((dense != 0).sum(axis=0).max(initial=0)))
    t_idx, t_w = np.zeros((n_in, taps), np.int64), np.zeros((n_in, taps))
    for i in range(n_in):
        (outs,) = np.nonzero(dense[:, i])
        t_idx[i, :len(outs)] = outs
        t_w[i, :len(outs)] = dense[outs, i]
    return [b.emit(aicc_nn.ResampleOp(g, axis, t_idx, t_w))]


@vjp(aicc_nn.CumSumOp)
def _cumsum(b, op, g):  # the transpose of a prefix sum is the suffix sum
    return [b.emit(aicc_nn.CumSumOp(g, op.axis.value.data, op.exclusive.value.data,
                                    not op.reverse.value.data))]


def _iota(b: VJPBuilder, n: int, like: SSAValue, shape: Sequence[int]) -> SSAValue:
    dtype = aicc.numpy_dtype(element_type_of(like))
    return b.emit(aicc.ConstantOp.from_array(np.arange(n, dtype=dtype).reshape(shape)))


def _normalized(b: VJPBuilder, idx: SSAValue, n: int) -> SSAValue:
    """Indices with negative ones counted from the end, as the gathers read them."""
    zero = b.constant(0, idx)
    return b.select(b.compare("lt", idx, zero), b.add(idx, b.constant(n, idx)), idx)


@vjp(aicc_nn.GatherOp)
def _gather(b, op, g):
    # y[A, I, B] = x[A, idx[I], B]: dx[A, n, B] = sum over I of g[A, I, B] [idx[I] = n], as a
    # matmul of g by the one-hot matrix of the indices.
    data, idx = op.operands
    axis = op.axis.value.data
    ds, ishape = shape_of(data), shape_of(idx)
    n = ds[axis]
    a_, i_, b_ = int(np.prod(ds[:axis])), int(np.prod(ishape)), int(np.prod(ds[axis + 1:]))
    flat = b.emit(aicc.ReshapeOp(_normalized(b, idx, n), (i_, 1)))
    hot = b.compare("eq", flat, _iota(b, n, idx, (1, n)))
    onehot = b.select(hot, b.constant(1.0, g), b.constant(0.0, g))  # (I, N)
    g3 = b.emit(aicc.ReshapeOp(g, (a_, i_, b_)))
    d = b.emit(aicc.MatmulOp(g3, b.broadcast(onehot, (a_, i_, n)), transpose_lhs=True))  # (A, B, N)
    d = b.emit(aicc.TransposeOp(d, [0, 2, 1]))
    return [b.emit(aicc.ReshapeOp(d, ds)), None]


@vjp(aicc_nn.GatherElementsOp)
def _gather_elements(b, op, g):
    # y[.., j, ..] = x[.., idx[.., j, ..], ..]: dx[.., n, ..] = sum over j of g [idx = n]
    data, idx = op.operands
    axis = op.axis.value.data
    ds, ishape = shape_of(data), shape_of(idx)
    rank, n = len(ds), ds[axis]
    last = [*(i for i in range(rank) if i != axis), axis]
    gl = b.emit(aicc.TransposeOp(g, last))
    il = b.emit(aicc.TransposeOp(_normalized(b, idx, n), last))
    shp = shape_of(gl)
    hot = b.compare("eq", b.emit(aicc.ReshapeOp(il, (*shp, 1))), _iota(b, n, idx, (n,)))
    masked = b.select(hot, b.broadcast(b.emit(aicc.ReshapeOp(gl, (*shp, 1))), (*shp, n)), b.constant(0.0, g))
    d = b.emit(aicc.ReduceSumOp(masked, [rank - 1], keepdims=False))  # (.., N), axis last
    d = b.emit(aicc.TransposeOp(d, list(np.argsort(last))))
    high = [ds[i] - ishape[i] if i != axis else 0 for i in range(rank)]
    if any(high):  # indices smaller than the data off the axis: the rest gets nothing
        d = b.emit(aicc_nn.PadOp(d, [0] * rank, high))
    return [d, None]


# -- convolution and pooling --------------------------------------------------------------------


def _batch_correlation(b: VJPBuilder, inp: SSAValue, ker: SSAValue, groups: int, strides, dilations,
                       k: tuple[int, int]) -> SSAValue:
    """w[u, v, i, j] = sum over n, p, q of ker[n, u, p, q] inp[n, v, p s + i d, q s + j d]
    (u and v in the same group), shaped (ker's channels, inp's channels / groups, *k): a
    weight's gradient. It is a conv2d of inp with the batch as channels by ker, stride and
    dilation swapped, each group's batch side by side so `groups` keeps them apart."""
    n, ci, *si = shape_of(inp)
    _, ck, *sk = shape_of(ker)
    a, per = ci // groups, ck // groups
    it = b.emit(aicc.ReshapeOp(inp, (n, groups, a, *si)))
    it = b.emit(aicc.TransposeOp(it, [2, 1, 0, 3, 4]))  # (a, groups, n, ..)
    it = b.emit(aicc.ReshapeOp(it, (a, groups * n, *si)))
    kt = b.emit(aicc.ReshapeOp(ker, (n, groups, per, *sk)))
    kt = b.emit(aicc.TransposeOp(kt, [1, 2, 0, 3, 4]))  # (groups, per, n, ..)
    kt = b.emit(aicc.ReshapeOp(kt, (ck, n, *sk)))
    w = b.emit(aicc_nn.Conv2dOp(it, kt, dilations, strides, groups))  # (a, ck, >= k)
    if shape_of(w)[2:] != tuple(k):
        w = b.emit(aicc_nn.SliceOp(w, (0, 0, 0, 0), (1, 1, 1, 1), (a, ck, *k)))
    return b.emit(aicc.TransposeOp(w, [1, 0, 2, 3]))


@vjp(aicc_nn.Conv2dOp)
def _conv2d(b, op, g):
    x, w = op.operands
    h, wd = shape_of(x)[2:]
    kh, kw = shape_of(w)[2:]
    strides, dilations = int_values(op.strides), int_values(op.dilations)
    groups = op.groups.value.data
    # dx: the transposed convolution of g by the same weight.
    dx = b.emit(aicc_nn.ConvTranspose2dOp(g, w, (h, wd), strides, dilations, groups))
    # dw[o, c, i, j] = sum over n, p, q of g[n, o, p, q] x[n, c, p s + i d, q s + j d]
    return [dx, _batch_correlation(b, x, g, groups, strides, dilations, (kh, kw))]


def _shifted(b: VJPBuilder, g: SSAValue, offsets: Sequence[int], lengths: Sequence[int]) -> SSAValue:
    """g's spatial dims re-indexed as out[i] = g[i - offset] for i < length, zeros elsewhere."""
    n, c, *sizes = shape_of(g)
    starts = [max(0, -o) for o in offsets]
    low = [max(0, o) for o in offsets]
    kept = [min(s - st, ln - lo) for s, st, ln, lo in zip(sizes, starts, lengths, low)]
    if any(st or k != s for st, k, s in zip(starts, kept, sizes)):
        g = b.emit(aicc_nn.SliceOp(g, (0, 0, *starts), (1, 1, 1, 1), (n, c, *kept)))
    high = [ln - lo - k for ln, lo, k in zip(lengths, low, kept)]
    if any(low) or any(high):
        g = b.emit(aicc_nn.PadOp(g, (0, 0, *low), (0, 0, *high)))
    return g


@vjp(aicc_nn.ConvTranspose2dOp)
def _conv_transpose2d(b, op, g):
    # y[n, o, h s + i d - p] += x[n, c, h] w[c, o, i]: with gp[q] = g[q - p] over the full
    # (uncropped) length, dx is the convolution of gp by w, and dw the convolution of gp
    # (batch as channels) by x, stride and dilation swapped.
    x, w = op.operands
    n, c, h, wd = shape_of(x)
    kh, kw = shape_of(w)[2:]
    strides, dilations, pads = int_values(op.strides), int_values(op.dilations), int_values(op.pads)
    groups = op.groups.value.data
    full = [aicc_nn.conv_transpose_full(sz, k, s, d) for sz, k, s, d in zip((h, wd), (kh, kw), strides, dilations)]
    gp = _shifted(b, g, pads, full)
    dx = b.emit(aicc_nn.Conv2dOp(gp, w, strides, dilations, groups))
    if shape_of(dx)[2:] != (h, wd):
        dx = b.emit(aicc_nn.SliceOp(dx, (0, 0, 0, 0), (1, 1, 1, 1), (n, c, h, wd)))
    return [dx, _batch_correlation(b, gp, x, groups, strides, dilations, (kh, kw))]


def _depthwise_ones(b: VJPBuilder, like: SSAValue, c: int, k: tuple[int, int]) -> SSAValue:
    return b.constant(1.0, like, (c, 1, *k))


@vjp(aicc_nn.Pool2dOp)
def _pool2d(b, op, g):
    x = _x(op)
    n, c, h, wd = shape_of(x)
    oh, ow = shape_of(g)[2:]
    (kh, kw), strides, (dh, dw) = int_values(op.kernel), int_values(op.strides), int_values(op.dilations)
    if op.kind.data == "sum":  # every window element gets its window's g
        w = _depthwise_ones(b, g, c, (kh, kw))
        return [b.emit(aicc_nn.ConvTranspose2dOp(g, w, (h, wd), strides, (dh, dw), c))]
    # max: window offset (i, j) takes g where it holds the window's first maximum; a 1x1
    # transposed convolution of stride s puts that share back at (p s + i dh, q s + j dw).
    y = _y(op)
    one, zero = b.constant(1.0, y), b.constant(0.0, y)
    ones = _depthwise_ones(b, g, c, (1, 1))
    taken, dx = None, None
    for i in range(kh):
        for j in range(kw):
            xs = b.emit(aicc_nn.SliceOp(x, (0, 0, i * dh, j * dw), (1, 1, *strides), (n, c, oh, ow)))
            hit = b.select(b.compare("eq", xs, y), one, zero)
            if taken is not None:
                hit = b.mul(hit, b.sub(one, taken))
            taken = hit if taken is None else b.add(taken, hit)
            part = b.emit(aicc_nn.ConvTranspose2dOp(b.mul(g, hit), ones, (h, wd), strides, (1, 1), c,
                                                     (-i * dh, -j * dw)))
            dx = part if dx is None else b.add(dx, part)
    return [dx]
