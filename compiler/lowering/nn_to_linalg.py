"""The NN ops of compiler/dialects/aicc_nn.py to linalg on tensors (part of tensor-to-linalg).

Windows and offsets live in the indexing maps, as affine expressions of the loop dims:
  * pad:     fill the result with the pad value, then a generic copies the input in through
             the output map (d0 + low0, d1 + low1, ...);
  * conv2d:  loops (n, g, oc, oh, ow | ic, kh, kw) over the input viewed as (N, G, IC/G, H, W)
             read at (n, g, ic, oh*sh + kh*dh, ow*sw + kw*dw), the weight viewed as
             (G, OC/G, IC/G, KH, KW); the (N, G, OC/G, OH, OW) result is reshaped back;
  * pool2d:  loops (n, c, oh, ow | kh, kw), a max or add reduction from -inf or 0;
  * concat:  one copy generic per operand into the same destination, offset along the axis;
  * slice:   a generic reading the input at (start + d * step);
  * gather:  a reduction over the gathered axis k that selects data[.., k, ..] where
             indices == k (or k - size, for negative indices), with k read from an iota constant.
Reshapes are emitted as aicc.reshape, which the same pattern walk then lowers.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from compiler.dialects import aicc, aicc_nn
from compiler.lowering.utils import (
    PARALLEL,
    REDUCTION,
    build_generic,
    empty_tensor,
    filled_tensor,
    insert_result,
)


def _reshape(rewriter: PatternRewriter, v: SSAValue, shape) -> SSAValue:
    if aicc.shape_of(v) == tuple(shape):
        return v
    op = aicc.ReshapeOp(v, shape)
    rewriter.insert(op)
    return op.result


def _d(i: int) -> AffineDimExpr:
    return AffineDimExpr(i)


def _off(e: AffineExpr, c: int) -> AffineExpr:
    """e + c, kept as an addition even for c == 0: the verifier then takes the loop range from
    another operand instead of requiring this operand's dim to equal it."""
    return AffineBinaryOpExpr(AffineBinaryOpKind.Add, e, AffineConstantExpr(c))


class LowerPad(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.PadOp, rewriter: PatternRewriter) -> None:
        low = aicc_nn._ints(op.low)
        rank = len(low)
        acc = filled_tensor(rewriter, op, op.result.type, op.value.value.data)
        out_map = AffineMap(rank, 0, tuple(_off(_d(i), lo) for i, lo in enumerate(low)))
        generic = build_generic(
            [op.input], [acc], [AffineMap.identity(rank), out_map], [PARALLEL] * rank,
            lambda b, a: [a[0]], [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerConv2d(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.Conv2dOp, rewriter: PatternRewriter) -> None:
        n, c, h, w = aicc.shape_of(op.input)
        oc, icg, kh, kw = aicc.shape_of(op.weight)
        _, _, oh, ow = aicc.shape_of(op.result)
        g = op.groups.value.data
        (sh, sw), (dh, dw) = aicc_nn._ints(op.strides), aicc_nn._ints(op.dilations)
        elem = aicc.element_type_of(op.input)
        x = _reshape(rewriter, op.input, (n, g, icg, h, w))
        wt = _reshape(rewriter, op.weight, (g, oc // g, icg, kh, kw))
        out_t = TensorType(elem, (n, g, oc // g, oh, ow))
        acc = filled_tensor(rewriter, op, out_t, 0.0)
        # loops: 0 n, 1 g, 2 oc, 3 oh, 4 ow, 5 ic, 6 kh, 7 kw
        maps = [
            AffineMap(8, 0, (_d(0), _d(1), _d(5), _d(3) * sh + _d(6) * dh, _d(4) * sw + _d(7) * dw)),
            AffineMap(8, 0, (_d(1), _d(2), _d(5), _d(6), _d(7))),
            AffineMap(8, 0, (_d(0), _d(1), _d(2), _d(3), _d(4))),
        ]

        def body(b: Builder, a):
            return [insert_result(b, arith.AddfOp(a[2], insert_result(b, arith.MulfOp(a[0], a[1]))))]

        generic = build_generic([x, wt], [acc], maps, [PARALLEL] * 5 + [REDUCTION] * 3, body, [out_t])
        rewriter.insert(generic)
        rewriter.replace(op, aicc.ReshapeOp(generic.results[0], (n, oc, oh, ow)))


class LowerPool2d(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.Pool2dOp, rewriter: PatternRewriter) -> None:
        (kh, kw), (sh, sw), (dh, dw) = (aicc_nn._ints(a) for a in (op.kernel, op.strides, op.dilations))
        is_max = op.kind.data == "max"
        acc = filled_tensor(rewriter, op, op.result.type, -math.inf if is_max else 0.0)
        # A (KH, KW) operand gives the kernel loops their ranges; its values are unused.
        window = aicc.ConstantOp.from_array(np.zeros((kh, kw), dtype=np.float32))
        rewriter.insert(window)
        # loops: 0 n, 1 c, 2 oh, 3 ow, 4 kh, 5 kw
        maps = [
            AffineMap(6, 0, (_d(0), _d(1), _d(2) * sh + _d(4) * dh, _d(3) * sw + _d(5) * dw)),
            AffineMap(6, 0, (_d(4), _d(5))),
            AffineMap(6, 0, (_d(0), _d(1), _d(2), _d(3))),
        ]
        combiner = arith.MaximumfOp if is_max else arith.AddfOp
        generic = build_generic(
            [op.input, window.result], [acc], maps, [PARALLEL] * 4 + [REDUCTION] * 2,
            lambda b, a: [insert_result(b, combiner(a[2], a[0]))], [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerConcat(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.ConcatOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        res_t = op.result.type
        rank = len(aicc.shape_of(op.result))
        acc = empty_tensor(rewriter, res_t)
        offset = 0
        for v in op.inputs:
            size = aicc.shape_of(v)[axis]
            if size:
                out_map = AffineMap(rank, 0, tuple(
                    _off(_d(i), offset) if i == axis else _d(i) for i in range(rank)))
                generic = build_generic(
                    [v], [acc], [AffineMap.identity(rank), out_map], [PARALLEL] * rank,
                    lambda b, a: [a[0]], [res_t],
                )
                rewriter.insert(generic)
                acc = generic.results[0]
            offset += size
        rewriter.replace(op, [], [acc])


class LowerSlice(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.SliceOp, rewriter: PatternRewriter) -> None:
        starts, steps = aicc_nn._ints(op.starts), aicc_nn._ints(op.steps)
        rank = len(starts)
        exprs = []
        for i, (s, st) in enumerate(zip(starts, steps)):
            exprs.append(_off(_d(i) * st if st != 1 else _d(i), s))
        init = empty_tensor(rewriter, op.result.type)

        generic = build_generic(
            [op.input], [init], [AffineMap(rank, 0, tuple(exprs)), AffineMap.identity(rank)],
            [PARALLEL] * rank, lambda b, a: [a[0]], [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerGather(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.GatherOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        dshape, ishape = aicc.shape_of(op.data), aicc.shape_of(op.indices)
        size = dshape[axis]
        idx_dt = aicc.numpy_dtype(aicc.element_type_of(op.indices))
        iota = aicc.ConstantOp.from_array(np.arange(size, dtype=idx_dt))
        iota_neg = aicc.ConstantOp.from_array(np.arange(size, dtype=idx_dt) - size)
        rewriter.insert([iota, iota_neg])
        rank_out = len(dshape) - 1 + len(ishape)
        k = _d(rank_out)  # the reduction loop over the gathered axis
        n_loops = rank_out + 1
        data_map = AffineMap(n_loops, 0, (
            *(_d(i) for i in range(axis)), k,
            *(_d(axis + len(ishape) + j) for j in range(len(dshape) - axis - 1)),
        ))
        idx_map = AffineMap(n_loops, 0, tuple(_d(axis + j) for j in range(len(ishape))) or ())
        k_map = AffineMap(n_loops, 0, (k,))
        out_map = AffineMap(n_loops, 0, tuple(_d(i) for i in range(rank_out)))
        acc = filled_tensor(rewriter, op, op.result.type, 0.0)

        def body(b: Builder, a):
            data, idx, kk, kneg, out = a
            hit = insert_result(b, arith.OrIOp(insert_result(b, arith.CmpiOp(idx, kk, "eq")), insert_result(b, arith.CmpiOp(idx, kneg, "eq"))))
            return [insert_result(b, arith.SelectOp(hit, data, out))]

        generic = build_generic(
            [op.data, op.indices, iota.result, iota_neg.result], [acc],
            [data_map, idx_map, k_map, k_map, out_map],
            [PARALLEL] * rank_out + [REDUCTION], body, [op.result.type],
        )
        rewriter.replace(op, generic)


NN_PATTERNS = [LowerPad(), LowerConv2d(), LowerPool2d(), LowerConcat(), LowerSlice(), LowerGather()]
