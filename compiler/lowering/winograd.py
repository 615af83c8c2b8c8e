"""The "winograd" lowering of a 3x3 stride-1 conv2d: Winograd's minimal filtering F(2x2, 3x3)
(Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016), as linalg on
tensors.

The output is cut into 2x2 tiles; tile (ty, tx) of every output channel needs the 4x4 window
of the (already padded) input at rows 2ty.., columns 2tx... With

    Bt = [1  0 -1  0]     G = [1    0    0 ]     At = [1  1  1  0]
         [0  1  1  0]         [1/2  1/2  1/2]          [0  1 -1 -1]
         [0 -1  1  0]         [1/2 -1/2  1/2]
         [0  1  0 -1]         [0    0    1 ]

a tile is At [ sum_c (G g[k, c] Gt) * (Bt d[c] B) ] A: 16 products per tile and channel pair
where the direct conv takes 36. The lowering emits

  * the weight transform at compile time: U[a, b] = (G g Gt)[a, b], 16 constant (OC, IC)
    matrices (the weight must be a constant);
  * the input transform: for each of the 16 (a, b), a generic V_ab[n, c, ty, tx] = the sum of
    the 4 input elements x[n, c, 2ty + i, 2tx + j] with Bt[a, i] * Bt[b, j] = +-1 (the maps
    read the input in place, stride 2);
  * 16 matmuls M_ab[n] (OC x T) = U_ab (OC x IC) @ V_ab[n] (IC x T), T = OH/2 * OW/2 tiles, each
    a matmul generic that choose-schedule and tile-matmul take like a 1x1 conv's (marked
    aicc.conv_lowering = "winograd"; the constant U_ab is packed at compile time);
  * the output transform: for each position (r, s) of a tile, a generic writing plane
    P[r, s] = bias + the sum of +-M_ab over the 9 (a, b) with At[r, a] * At[s, b] != 0, into
    its slice of one (2, 2, N, OC, OH/2, OW/2) tensor (offset output maps, as concat's), then
    one copy generic interleaving the planes into the output viewed as
    (N, OC, OH/2, 2, OW/2, 2).

Every generic is plain linalg, so the pipeline stays printable and any target runs it. It is
asked for per op (`aicc.conv_lowering = "winograd"`), per compile
(`tensor-to-linalg{conv-lowering=winograd}`, AICC_CONV_LOWERING=winograd), or picked by the
heuristic where it was measured to beat the packed direct kernel (conv_lowering.py,
`winograd_wins`): on AVX2 targets from 32 channels, on AVX-512 ones only on large images,
where the direct kernel runs closer to the machine's peak than the 16 matmuls of K = IC do.
A fused transform kernel and a matmul that stores channels-last are what it would need to win
more widely.

The arithmetic differs from the direct sum by rounding only: the transforms add and subtract
(and halve) f32 values, so the error stays within a few units of the sum's magnitude in the
last place (checked against torch in float64 in tests/test_winograd.py).
"""

from __future__ import annotations

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc import dense_from_numpy, numpy_from_dense
from compiler.lowering.conv_lowering import CONV_LOWERING_ATTR
from compiler.lowering.utils import (
    PARALLEL,
    REDUCTION,
    build_generic,
    constant_source,
    empty_tensor,
    filled_tensor,
    insert_result,
    plus,
    reshape,
)

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def _d(i: int) -> AffineDimExpr:
    return AffineDimExpr(i)


def constant_weight(v: SSAValue) -> np.ndarray | None:
    """The value of a constant (through reshapes), or None."""
    op = constant_source(v)
    return None if op is None else numpy_from_dense(op.value)


def winograd_applies(op: aicc_nn.Conv2dOp) -> bool:
    """F(2x2, 3x3) takes this conv: 3x3, stride 1, no dilation, one group, an even output
    height and width, a static batch and a constant f32 weight."""
    n, _, _, _ = aicc.shape_of(op.input)
    oc, _, kh, kw = aicc.shape_of(op.weight)
    _, _, oh, ow = aicc.shape_of(op.result)
    return (isinstance(n, int) and (kh, kw) == (3, 3) and op.groups.value.data == 1
            and tuple(aicc_nn.int_values(op.strides)) == (1, 1)
            and tuple(aicc_nn.int_values(op.dilations)) == (1, 1)
            and isinstance(oh, int) and isinstance(ow, int) and oh % 2 == 0 and ow % 2 == 0
            and aicc.element_type_of(op.input) == aicc.element_type_of(op.weight)
            and str(aicc.element_type_of(op.input)) == "f32"
            and constant_source(op.weight) is not None)


def _constant(rewriter: PatternRewriter, array: np.ndarray) -> SSAValue:
    return insert_result(rewriter, arith.ConstantOp(dense_from_numpy(array)))


def lower_winograd(op: aicc_nn.Conv2dOp, bias: SSAValue | None,
                   rewriter: PatternRewriter) -> SSAValue:
    """The F(2x2, 3x3) form of conv2d(op) [+ bias] (winograd_applies(op) holds); returns the
    (N, OC, OH, OW) result."""
    n, c, _, _ = aicc.shape_of(op.input)
    oc = aicc.shape_of(op.weight)[0]
    _, _, oh, ow = aicc.shape_of(op.result)
    th, tw = oh // 2, ow // 2
    elem = aicc.element_type_of(op.input)
    g = constant_weight(op.weight).reshape(oc, c, 3, 3).astype(np.float64)
    u = np.einsum("ai,kcij,bj->abkc", G, g, G).astype(np.float32)  # (4, 4, OC, IC)

    # input transform: V_ab[n, c, ty, tx] = sum of +-x[n, c, 2ty + i, 2tx + j]
    v_t = aicc.tensor_type(elem, (n, c, th, tw))
    vs = []
    for a in range(4):
        for b in range(4):
            terms = [(i, j, BT[a, i] * BT[b, j]) for i in range(4) for j in range(4)
                     if BT[a, i] * BT[b, j]]
            maps = [AffineMap(4, 0, (_d(0), _d(1), _d(2) * 2 + i, _d(3) * 2 + j))
                    for i, j, _ in terms] + [AffineMap.identity(4)]

            def body(bld: Builder, args, terms=terms):
                acc = args[0] if terms[0][2] > 0 else insert_result(bld, arith.NegfOp(args[0]))
                for (_, _, sign), x in zip(terms[1:], args[1:len(terms)]):
                    op_ = arith.AddfOp(acc, x) if sign > 0 else arith.SubfOp(acc, x)
                    acc = insert_result(bld, op_)
                return [acc]

            vs.append(insert_result(rewriter, build_generic(
                [op.input] * len(terms), [empty_tensor(rewriter, v_t)], maps,
                [PARALLEL] * 4, body, [v_t])))

    # 16 matmuls: M_ab[n] (OC x T) = U_ab (OC x IC) @ V_ab[n] (IC x T)
    t = th * tw
    m_t = aicc.tensor_type(elem, (n, oc, t))
    # loops: 0 n, 1 m (oc), 2 p (tile), 3 k (ic)
    mm_maps = [AffineMap(4, 0, (_d(1), _d(3))), AffineMap(4, 0, (_d(0), _d(3), _d(2))),
               AffineMap(4, 0, (_d(0), _d(1), _d(2)))]

    def mac(bld: Builder, args):
        prod = insert_result(bld, arith.MulfOp(args[0], args[1]))
        return [insert_result(bld, arith.AddfOp(args[2], prod))]

    ms = []
    for ab, v in enumerate(vs):
        a, b = divmod(ab, 4)
        mm = build_generic([_constant(rewriter, np.ascontiguousarray(u[a, b])),
                            reshape(rewriter, v, (n, c, t))],
                           [filled_tensor(rewriter, op, m_t, 0.0)], mm_maps,
                           [PARALLEL] * 3 + [REDUCTION], mac, [m_t])
        mm.attributes[CONV_LOWERING_ATTR] = StringAttr("winograd")
        ms.append(reshape(rewriter, insert_result(rewriter, mm), (n, oc, th, tw)))

    # output transform, per output position (r, s) of a tile: a plane
    #   P[r, s, n, k, ty, tx] = bias[k] + sum of +-M_ab[n, k, ty, tx] over At[r,a] At[s,b] != 0
    # (9 terms), each plane a generic that writes its (r, s) slice of P (as concat does)
    p_t = aicc.tensor_type(elem, (2, 2, n, oc, th, tw))
    planes = empty_tensor(rewriter, p_t)
    ms = [reshape(rewriter, mv, (1, 1, n, oc, th, tw)) for mv in ms]
    if bias is not None:
        one = int(np.prod(aicc.shape_of(bias))) == 1
        bias = reshape(rewriter, bias, (1,) if one else (oc,))
        bias_map = AffineMap(6, 0, (AffineConstantExpr(0),) if one else (_d(3),))
    for r in range(2):
        for s_ in range(2):
            terms = [(ab, AT[r, ab // 4] * AT[s_, ab % 4]) for ab in range(16)
                     if AT[r, ab // 4] * AT[s_, ab % 4]]
            inputs = [ms[ab] for ab, _ in terms]
            maps = [AffineMap.identity(6)] * len(terms)
            if bias is not None:
                inputs.append(bias)
                maps.append(bias_map)
            # kept additions (+ 0 too): the loop range comes from the M operands
            maps.append(AffineMap(6, 0, (plus(_d(0), r), plus(_d(1), s_),
                                         *(_d(i) for i in range(2, 6)))))

            def plane(bld: Builder, args, terms=terms):
                acc = args[len(terms)] if bias is not None else None
                for (_, sign), m_ in zip(terms, args):
                    if acc is None:
                        acc = m_ if sign > 0 else insert_result(bld, arith.NegfOp(m_))
                    else:
                        acc = insert_result(bld, arith.AddfOp(acc, m_) if sign > 0
                                            else arith.SubfOp(acc, m_))
                return [acc]

            planes = insert_result(rewriter, build_generic(
                inputs, [planes], maps, [PARALLEL] * 6, plane, [p_t]))

    # the planes interleaved into the output, viewed as (N, OC, OH/2, 2, OW/2, 2):
    # loops (n, k, ty, r, tx, s)
    y_t = aicc.tensor_type(elem, (n, oc, th, 2, tw, 2))
    read = AffineMap(6, 0, (_d(3), _d(5), _d(0), _d(1), _d(2), _d(4)))
    y = insert_result(rewriter, build_generic(
        [planes], [empty_tensor(rewriter, y_t)], [read, AffineMap.identity(6)],
        [PARALLEL] * 6, lambda bld, a: [a[0]], [y_t]))
    return reshape(rewriter, y, (n, oc, oh, ow))


__all__ = ["constant_weight", "lower_winograd", "winograd_applies"]
