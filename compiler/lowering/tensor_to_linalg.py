"""tensor-to-linalg: the aicc dialect to linalg on tensors, in destination-passing style.

Elementwise ops become one `linalg.generic` each, whose indexing maps carry NumPy broadcasting
(a size-1 operand dim that broadcasts reads index 0); 2-D matmul becomes `linalg.fill` +
`linalg.matmul`; everything else with no named op (batched matmul with broadcast batch dims,
reductions, transpose, broadcast_to) becomes a `linalg.generic`. Composite ops (softmax,
reduce_mean) are first rewritten into simpler aicc ops, which the same walk then lowers.
Every output starts from a `tensor.empty` (or a `linalg.fill` of it for reductions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, math as xmath, tensor
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    ArrayAttr,
    Float32Type,
    Float64Type,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc import NONPOSITIVE_ARG
from compiler.dialects.aicc_fused import AttentionOp
from compiler.dialects.shapes import is_dynamic
from compiler.errors import CompileError, UnsupportedOpError
from compiler.symbolic import Sym, prod as sym_prod
from compiler.lowering.conv_lowering import PACKED_1X1_RULES, WINOGRAD4_MIN_TILES
from compiler.lowering.nn_to_linalg import LowerConv2dBias, nn_patterns
from compiler.lowering.quant_to_linalg import QUANT_PATTERNS
from compiler.lowering.tensor_op_to_linalg import LowerTensorOp
from compiler.lowering.utils import (
    AFN,
    SOFTMAX_MAX,
    PARALLEL,
    REDUCTION,
    broadcast_map,
    build_generic,
    empty_tensor,
    filled_tensor,
    insert_result,
    reshape,
    scalar_constant,
    sigmoid_body,
    tensor_elem,
)

Body = Callable[[Builder, Sequence[SSAValue], Attribute], SSAValue]


def _c(b: Builder, v: float, t: Attribute) -> SSAValue:
    return scalar_constant(b, v, t)


def _gelu(b: Builder, x: SSAValue, t: Attribute, tanh_form: bool) -> SSAValue:
    half = insert_result(b, arith.MulfOp(x, _c(b, 0.5, t)))
    if tanh_form:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = insert_result(b, arith.MulfOp(insert_result(b, arith.MulfOp(x, x)), x))
        inner = insert_result(b, arith.AddfOp(x, insert_result(b, arith.MulfOp(x3, _c(b, 0.044715, t)))))
        t_ = insert_result(b, xmath.TanhOp(insert_result(b, arith.MulfOp(inner, _c(b, math.sqrt(2 / math.pi), t)))))
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        t_ = insert_result(b, xmath.ErfOp(insert_result(b, arith.MulfOp(x, _c(b, 1 / math.sqrt(2), t)))))
    return insert_result(b, arith.MulfOp(half, insert_result(b, arith.AddfOp(t_, _c(b, 1.0, t)))))


# The scalar body of each elementwise op, one line each: (builder, block args, element type).
UNARY: dict[type[Operation], Body] = {
    aicc.NegOp: lambda b, a, t: insert_result(b, arith.NegfOp(a[0])),
    aicc.AbsOp: lambda b, a, t: insert_result(b, xmath.AbsFOp(a[0])),
    aicc.ExpOp: lambda b, a, t: insert_result(b, xmath.ExpOp(a[0])),
    aicc.LogOp: lambda b, a, t: insert_result(b, xmath.LogOp(a[0])),
    aicc.TanhOp: lambda b, a, t: insert_result(b, xmath.TanhOp(a[0])),
    aicc.ErfOp: lambda b, a, t: insert_result(b, xmath.ErfOp(a[0])),
    aicc.SqrtOp: lambda b, a, t: insert_result(b, xmath.SqrtOp(a[0])),
    aicc.RsqrtOp: lambda b, a, t: insert_result(b, xmath.RsqrtOp(a[0])),
    aicc.ReluOp: lambda b, a, t: insert_result(b, arith.MaximumfOp(a[0], _c(b, 0.0, t))),  # max(x, 0)
    aicc.SigmoidOp: lambda b, a, t: sigmoid_body(b, a[0], _c(b, 1.0, t)),  # 1 / (1 + exp(-x))
    aicc.FloorOp: lambda b, a, t: insert_result(b, xmath.FloorOp(a[0])),
    aicc.CeilOp: lambda b, a, t: insert_result(b, xmath.CeilOp(a[0])),
    aicc.RoundOp: lambda b, a, t: insert_result(b, xmath.RoundEvenOp(a[0])),  # half to even
    aicc.SinOp: lambda b, a, t: insert_result(b, xmath.SinOp(a[0])),
    aicc.CosOp: lambda b, a, t: insert_result(b, xmath.CosOp(a[0])),
    aicc.TanOp: lambda b, a, t: insert_result(b, xmath.TanOp(a[0])),
    aicc.AsinOp: lambda b, a, t: insert_result(b, xmath.AsinOp(a[0])),
    aicc.AcosOp: lambda b, a, t: insert_result(b, xmath.AcosOp(a[0])),
    aicc.AtanOp: lambda b, a, t: insert_result(b, xmath.AtanOp(a[0])),
    aicc.SinhOp: lambda b, a, t: insert_result(b, xmath.SinhOp(a[0])),
    aicc.CoshOp: lambda b, a, t: insert_result(b, xmath.CoshOp(a[0])),
}

# Integer tensors (i32 / i64): the ops whose dialect marks INTEGER_OK.
INT_UNARY: dict[type[Operation], Body] = {
    aicc.NegOp: lambda b, a, t: insert_result(b, arith.SubiOp(_c(b, 0, t), a[0])),  # 0 - x
    aicc.AbsOp: lambda b, a, t: _select(b, _cmpi(b, a[0], _c(b, 0, t), "slt"),
                                        insert_result(b, arith.SubiOp(_c(b, 0, t), a[0])), a[0]),
}

BINARY: dict[type[Operation], Body] = {
    aicc.AddOp: lambda b, a, t: insert_result(b, arith.AddfOp(a[0], a[1])),
    aicc.SubOp: lambda b, a, t: insert_result(b, arith.SubfOp(a[0], a[1])),
    aicc.MulOp: lambda b, a, t: insert_result(b, arith.MulfOp(a[0], a[1])),
    aicc.DivOp: lambda b, a, t: insert_result(b, arith.DivfOp(a[0], a[1])),
    aicc.MaximumOp: lambda b, a, t: insert_result(b, arith.MaximumfOp(a[0], a[1])),  # NaN-propagating
    aicc.MinimumOp: lambda b, a, t: insert_result(b, arith.MinimumfOp(a[0], a[1])),
    aicc.PowOp: lambda b, a, t: insert_result(b, xmath.PowFOp(a[0], a[1])),
    aicc.FModOp: lambda b, a, t: _fmodf(b, a[0], a[1], t),
    aicc.ModOp: lambda b, a, t: _floor_mod(b, _fmodf(b, a[0], a[1], t), a[1], t),
}

INT_BINARY: dict[type[Operation], Body] = {
    aicc.AddOp: lambda b, a, t: insert_result(b, arith.AddiOp(a[0], a[1])),
    aicc.SubOp: lambda b, a, t: insert_result(b, arith.SubiOp(a[0], a[1])),
    aicc.MulOp: lambda b, a, t: insert_result(b, arith.MuliOp(a[0], a[1])),
    aicc.DivOp: lambda b, a, t: _divsi(b, a[0], a[1], t),
    aicc.MaximumOp: lambda b, a, t: insert_result(b, arith.MaxSIOp(a[0], a[1])),
    aicc.MinimumOp: lambda b, a, t: insert_result(b, arith.MinSIOp(a[0], a[1])),
    aicc.FModOp: lambda b, a, t: _remsi(b, a[0], a[1], t),
    aicc.ModOp: lambda b, a, t: _floor_mod(b, _remsi(b, a[0], a[1], t), a[1], t),
}


def _cmpi(b: Builder, x: SSAValue, y: SSAValue, pred: str) -> SSAValue:
    return insert_result(b, arith.CmpiOp(x, y, pred))


def _select(b: Builder, c: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
    return insert_result(b, arith.SelectOp(c, x, y))


def _safe_divisor(b: Builder, d: SSAValue, t: Attribute) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(d, or 1 where d is 0 or -1; d == 0; d == -1): x / 0 and MIN / -1 trap on the CPU."""
    is0 = _cmpi(b, d, _c(b, 0, t), "eq")
    is_m1 = _cmpi(b, d, _c(b, -1, t), "eq")
    safe = _select(b, insert_result(b, arith.OrIOp(is0, is_m1)), _c(b, 1, t), d)
    return safe, is0, is_m1


def _divsi(b: Builder, x: SSAValue, d: SSAValue, t: Attribute) -> SSAValue:
    """Truncating division; x / 0 = 0, x / -1 = -x (wrapping, as NumPy does for MIN / -1)."""
    safe, is0, is_m1 = _safe_divisor(b, d, t)
    q = insert_result(b, arith.DivSIOp(x, safe))
    q = _select(b, is_m1, insert_result(b, arith.SubiOp(_c(b, 0, t), x)), q)
    return _select(b, is0, _c(b, 0, t), q)


def _remsi(b: Builder, x: SSAValue, d: SSAValue, t: Attribute) -> SSAValue:
    """Remainder with the sign of x; x rem 0 = 0 (x rem -1 = x rem 1 = 0)."""
    safe, is0, _ = _safe_divisor(b, d, t)
    return _select(b, is0, _c(b, 0, t), insert_result(b, arith.RemSIOp(x, safe)))


def _fmodf(b: Builder, x: SSAValue, d: SSAValue, t: Attribute) -> SSAValue:
    """x - trunc(x / d) * d, in f64 for f32 operands: exact whenever |x / d| < 2^24."""
    wide = Float64Type()
    if isinstance(t, Float32Type):
        x, d = (insert_result(b, arith.ExtFOp(v, wide)) for v in (x, d))
    q = insert_result(b, xmath.TruncOp(insert_result(b, arith.DivfOp(x, d))))
    r = insert_result(b, arith.SubfOp(x, insert_result(b, arith.MulfOp(q, d))))
    # |x| < |d| (also d = inf, where q * d would be NaN): x itself
    r = _select(b, insert_result(b, arith.CmpfOp(q, _c(b, 0.0, q.type), "oeq")), x, r)
    r = insert_result(b, xmath.CopySignOp(r, x))  # a zero remainder keeps the sign of x
    return insert_result(b, arith.TruncFOp(r, t)) if isinstance(t, Float32Type) else r


def _floor_mod(b: Builder, r: SSAValue, d: SSAValue, t: Attribute) -> SSAValue:
    """From the truncated remainder r of x / d to the floored one: r + d where r != 0 and the
    signs of r and d differ."""
    if isinstance(t, IntegerType):
        zero = _c(b, 0, t)
        nonzero = _cmpi(b, r, zero, "ne")
        differ = insert_result(b, arith.XOrIOp(_cmpi(b, r, zero, "slt"), _cmpi(b, d, zero, "slt")))
        fix = insert_result(b, arith.AddiOp(r, d))
    else:
        zero = _c(b, 0.0, t)
        nonzero = insert_result(b, arith.CmpfOp(r, zero, "one"))
        differ = insert_result(b, arith.XOrIOp(insert_result(b, arith.CmpfOp(r, zero, "olt")),
                                               insert_result(b, arith.CmpfOp(d, zero, "olt"))))
        fix = insert_result(b, arith.AddfOp(r, d))
        r = _select(b, nonzero, r, insert_result(b, xmath.CopySignOp(r, d)))  # a zero takes d's sign
    return _select(b, insert_result(b, arith.AndIOp(nonzero, differ)), fix, r)

# NumPy semantics: every comparison with NaN is False except `!=` (unordered not-equal).
CMPF_PREDICATE = {"gt": "ogt", "ge": "oge", "lt": "olt", "le": "ole", "eq": "oeq", "ne": "une"}


def _elementwise(
    rewriter: PatternRewriter, op: Operation, operands: Sequence[SSAValue], body: Body
) -> None:
    """Replace `op` by one parallel linalg.generic over its result shape."""
    res_t = op.results[0].type
    assert isinstance(res_t, TensorType)
    shape = tuple(res_t.get_shape())
    init = empty_tensor(rewriter, res_t)
    elem = res_t.element_type
    maps = [broadcast_map(tuple(v.type.get_shape()), shape) for v in operands]
    maps.append(AffineMap.identity(len(shape)))
    generic = build_generic(
        operands,
        [init],
        maps,
        [PARALLEL] * len(shape),
        lambda b, args: [body(b, args[: len(operands)], _operand_elem(operands, elem))],
        [res_t],
    )
    rewriter.replace(op, generic)


def _operand_elem(operands: Sequence[SSAValue], default: Attribute) -> Attribute:
    """The element type the scalar body computes in: that of the float operands."""
    for v in operands:
        if isinstance(tensor_elem(v), AnyFloat):
            return tensor_elem(v)
    return default


class LowerUnary(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.UnaryOp, rewriter: PatternRewriter) -> None:
        if isinstance(op, aicc.GeluOp):
            tanh_form = op.is_tanh
            _elementwise(rewriter, op, [op.input], lambda b, a, t: _gelu(b, a[0], t, tanh_form))
        elif isinstance(tensor_elem(op.input), IntegerType) and type(op) in INT_UNARY:
            _elementwise(rewriter, op, [op.input], INT_UNARY[type(op)])
        elif isinstance(op, aicc.ExpOp) and "fastmath" in op.attributes:
            flags = op.attributes["fastmath"]
            nonpositive = NONPOSITIVE_ARG in op.attributes

            def exp(b, a, t):
                e = xmath.ExpOp(a[0], fastmath=flags)
                if nonpositive:
                    e.attributes[NONPOSITIVE_ARG] = UnitAttr()
                return insert_result(b, e)

            _elementwise(rewriter, op, [op.input], exp)
        elif type(op) in UNARY:
            _elementwise(rewriter, op, [op.input], UNARY[type(op)])


class LowerBinary(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.BinaryOp, rewriter: PatternRewriter) -> None:
        table = INT_BINARY if isinstance(tensor_elem(op.lhs), IntegerType) else BINARY
        _elementwise(rewriter, op, [op.lhs, op.rhs], table[type(op)])


class LowerCompare(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.CompareOp, rewriter: PatternRewriter) -> None:
        pred = op.predicate.data
        if isinstance(tensor_elem(op.lhs), AnyFloat):
            body: Body = lambda b, a, t: insert_result(b, arith.CmpfOp(a[0], a[1], CMPF_PREDICATE[pred]))
        else:
            ipred = {"gt": "sgt", "ge": "sge", "lt": "slt", "le": "sle", "eq": "eq", "ne": "ne"}
            body = lambda b, a, t: insert_result(b, arith.CmpiOp(a[0], a[1], ipred[pred]))
        _elementwise(rewriter, op, [op.lhs, op.rhs], body)


class LowerSelect(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.SelectOp, rewriter: PatternRewriter) -> None:
        _elementwise(
            rewriter,
            op,
            [op.cond, op.lhs, op.rhs],
            lambda b, a, t: insert_result(b, arith.SelectOp(a[0], a[1], a[2])),
        )


def _convert(b: Builder, x: SSAValue, src: Attribute, dst: Attribute) -> SSAValue:
    if src == dst:
        return x
    if isinstance(src, IntegerType) and isinstance(dst, AnyFloat):
        cls = arith.UIToFPOp if src.width.data == 1 else arith.SIToFPOp
        return insert_result(b, cls(x, dst))
    if isinstance(src, AnyFloat) and isinstance(dst, IntegerType):
        if dst.width.data == 1:  # float -> bool is x != 0
            return insert_result(b, arith.CmpfOp(x, _c(b, 0.0, src), "une"))
        return insert_result(b, arith.FPToSIOp(x, dst))
    if isinstance(src, AnyFloat) and isinstance(dst, AnyFloat):
        cls = arith.ExtFOp if src.bitwidth < dst.bitwidth else arith.TruncFOp
        return insert_result(b, cls(x, dst))
    if isinstance(src, IntegerType) and isinstance(dst, IntegerType):
        if dst.width.data == 1:
            return insert_result(b, arith.CmpiOp(x, _c(b, 0, src), "ne"))
        if src.width.data < dst.width.data:
            cls = arith.ExtUIOp if src.width.data == 1 else arith.ExtSIOp
            return insert_result(b, cls(x, dst))
        return insert_result(b, arith.TruncIOp(x, dst))
    raise UnsupportedOpError("aicc.cast", f"aicc.cast: no conversion from {src} to {dst}")


class LowerCast(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.CastOp, rewriter: PatternRewriter) -> None:
        src, dst = tensor_elem(op.input), tensor_elem(op.result)
        _elementwise(rewriter, op, [op.input], lambda b, a, t: _convert(b, a[0], src, dst))


class LowerBroadcastTo(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.BroadcastToOp, rewriter: PatternRewriter) -> None:
        _elementwise(rewriter, op, [op.input], lambda b, a, t: a[0])


class LowerTranspose(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.TransposeOp, rewriter: PatternRewriter) -> None:
        perm = op.perm
        rank = len(perm)
        # Loop dims are the result's; input dim j is read at the loop dim i with perm[i] == j.
        in_map = AffineMap(rank, 0, tuple(AffineDimExpr(perm.index(j)) for j in range(rank)))
        init = empty_tensor(rewriter, op.result.type)
        generic = build_generic(
            [op.input],
            [init],
            [in_map, AffineMap.identity(rank)],
            [PARALLEL] * rank,
            lambda b, a: [a[0]],
            [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerMatmul(RewritePattern):
    """2-D matmul -> linalg.matmul; transposed operands and batches -> linalg.generic with the
    operand maps swapped (the transpose is never materialized). A bias initializes the
    accumulator (a broadcast copy) in place of the zero fill."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.MatmulOp, rewriter: PatternRewriter) -> None:
        res_t = op.result.type
        out_shape = tuple(res_t.get_shape())
        if op.bias is not None:
            acc = insert_result(rewriter, build_generic(
                [op.bias],
                [empty_tensor(rewriter, res_t)],
                [broadcast_map(aicc.shape_of(op.bias), out_shape), AffineMap.identity(len(out_shape))],
                [PARALLEL] * len(out_shape),
                lambda b, a: [a[0]],
                [res_t],
            ))
        else:
            acc = filled_tensor(rewriter, op, res_t, 0.0)
        a_shape, b_shape = aicc.shape_of(op.lhs), aicc.shape_of(op.rhs)
        if len(a_shape) == 2 and len(b_shape) == 2 and not (op.trans_lhs or op.trans_rhs):
            rewriter.replace(op, linalg.MatmulOp([op.lhs, op.rhs], [acc], [res_t]))
            return
        # Batched, with broadcast batch dims: loops (batch..., m, n, k).
        nb = len(out_shape) - 2
        m, n, k = (AffineDimExpr(nb + i) for i in range(3))

        def operand_map(shape: Sequence[int], tail) -> AffineMap:
            bmap = broadcast_map(shape[:-2], out_shape[:nb]).results
            return AffineMap(nb + 3, 0, (*bmap, *tail))

        maps = [
            operand_map(a_shape, (k, m) if op.trans_lhs else (m, k)),
            operand_map(b_shape, (n, k) if op.trans_rhs else (k, n)),
            AffineMap(nb + 3, 0, (*(AffineDimExpr(i) for i in range(nb)), m, n)),
        ]

        def body(b: Builder, a: Sequence[SSAValue]) -> list[SSAValue]:
            prod = insert_result(b, arith.MulfOp(a[0], a[1]))
            return [insert_result(b, arith.AddfOp(a[2], prod))]

        generic = build_generic(
            [op.lhs, op.rhs], [acc], maps, [PARALLEL] * (nb + 2) + [REDUCTION], body, [res_t]
        )
        rewriter.replace(op, generic)


# Reductions: (identity element, combiner).
REDUCTIONS: dict[type[Operation], tuple[float, type[Operation]]] = {
    aicc.ReduceSumOp: (0.0, arith.AddfOp),
    aicc.ReduceMaxOp: (-math.inf, arith.MaximumfOp),
    aicc.ReduceMinOp: (math.inf, arith.MinimumfOp),
    aicc.ReduceProdOp: (1.0, arith.MulfOp),
}


def _int_reduction(op: Operation, t: IntegerType) -> tuple[int, type[Operation]]:
    """(identity, combiner) of an integer reduction."""
    width = t.width.data
    return {
        aicc.ReduceSumOp: (0, arith.AddiOp),
        aicc.ReduceMaxOp: (-(1 << (width - 1)), arith.MaxSIOp),
        aicc.ReduceMinOp: ((1 << (width - 1)) - 1, arith.MinSIOp),
        aicc.ReduceProdOp: (1, arith.MuliOp),
    }[type(op)]


class LowerReduce(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.ReduceOp, rewriter: PatternRewriter) -> None:
        axes, keep = op.axes_tuple, op.keep
        if isinstance(op, aicc.ReduceMeanOp):  # mean = sum * (1/N)
            s = aicc.ReduceSumOp(op.input, axes, keep)
            shape = aicc.shape_of(op.input)
            count = math.prod(shape[a] for a in axes)
            scale = aicc.ConstantOp.from_array(
                _np_scalar(1.0 / count if count else math.nan, tensor_elem(op.input))
            )
            rewriter.insert([s, scale])
            rewriter.replace(op, aicc.MulOp(s.result, scale.result))
            return
        shape = aicc.shape_of(op.input)
        rank, k = len(shape), len(shape) - len(axes)
        if len(axes) > 1 and sorted(axes) == list(range(k, rank)) \
                and all(isinstance(d, int) and d >= 0 for d in shape):
            # trailing axes, contiguous in memory: one axis of their product, so that the
            # loop nest has one long inner reduction loop (a global average pool's H x W)
            flat = reshape(rewriter, op.input, (*shape[:k], math.prod(shape[k:])))
            red = insert_result(rewriter, type(op)(flat, [k], keep))
            rewriter.replace_op(op, [], [reshape(rewriter, red, aicc.shape_of(op.result))])
            return
        elem = tensor_elem(op.input)
        if isinstance(elem, IntegerType):
            identity, combiner = _int_reduction(op, elem)
        else:
            identity, combiner = REDUCTIONS[type(op)]
        # a softmax's max: SOFTMAX_MAX
        flags = None if isinstance(elem, IntegerType) else op.attributes.get("fastmath")
        res_t = op.result.type
        acc = filled_tensor(rewriter, op, res_t, identity)
        rank = len(aicc.shape_of(op.input))
        out_exprs = [
            (AffineConstantExpr(0) if i in axes else AffineDimExpr(i))
            for i in range(rank)
            if keep or i not in axes
        ]
        maps = [AffineMap.identity(rank), AffineMap(rank, 0, tuple(out_exprs))]
        iters = [REDUCTION if i in axes else PARALLEL for i in range(rank)]
        generic = build_generic(
            [op.input], [acc], maps, iters,
            lambda b, a: [insert_result(b, combiner(a[1], a[0], *([flags] if flags else [])))], [res_t]
        )
        rewriter.replace(op, generic)


def _np_scalar(value: float, elem: Attribute):
    import numpy as np

    return np.array(value, dtype=aicc.numpy_dtype(elem))


class LowerSoftmax(RewritePattern):
    """softmax(x) = exp(x - max(x)) / sum(exp(x - max(x))), along `axis`. The exp is marked
    `fastmath<afn>` (mathlib.emit_exp's `flush`): its argument is never above 0, so only its
    results below 2^-126 change (to 0), entries of the softmax that small; without
    AVX-512's vscalefps the exp is then 3 ops shorter. It is also marked NONPOSITIVE_ARG (no
    upper clamp), and the max carries SOFTMAX_MAX (nnan nsz: one vmaxps, a NaN of the row
    reaching every output through the sum). AVX2 code on a Zen 5, one thread, 4096 x 4096,
    alternately in one process: 7.28 -> 6.52 ms with both (ONNX Runtime's AVX2 kernel 6.97);
    512 x 1000 0.173 -> 0.161 ms (0.159)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.SoftmaxOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        mx = aicc.ReduceMaxOp(op.input, [axis], keepdims=True)
        mx.attributes["fastmath"] = SOFTMAX_MAX
        shifted = aicc.SubOp(op.input, mx.result)
        e = aicc.ExpOp(shifted.result, {"fastmath": AFN, NONPOSITIVE_ARG: UnitAttr()})
        s = aicc.ReduceSumOp(e.result, [axis], keepdims=True)
        rewriter.insert([mx, shifted, e, s])
        rewriter.replace(op, aicc.DivOp(e.result, s.result))


def _reassociation(groups: Sequence[Sequence[int]]) -> ArrayAttr:
    return ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups])


class FlattenLinear(RewritePattern):
    """x (..., K) @ w (K, N), a linear layer on a batch of sequences: one 2-D matmul over the
    rows (prod(...), K), between two free reshapes. Its B panels are then packed once for all
    rows rather than once per batch entry, and with dynamic leading dims it tiles with a
    dynamic M. (A 2-layer d=256 encoder at batch 1, seq 128, one thread: 12.7 -> 7.5 ms.)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.MatmulOp, rewriter: PatternRewriter) -> None:
        x, y = aicc.shape_of(op.lhs), aicc.shape_of(op.result)
        if len(x) < 3 or len(aicc.shape_of(op.rhs)) != 2 or op.trans_lhs:
            return
        bias = op.bias
        if bias is not None and aicc.shape_of(bias) not in ((y[-1],), tuple(y)):
            return
        rows = sym_prod(x[:-1])
        x2 = aicc.ReshapeOp(op.lhs, (rows, x[-1]))
        new = [x2]
        if bias is not None and len(aicc.shape_of(bias)) > 1:
            new.append(aicc.ReshapeOp(bias, (rows, y[-1])))
            bias = new[-1].result
        mm = aicc.MatmulOp(x2.result, op.rhs, bias, False, op.trans_rhs)
        new += [mm, aicc.ReshapeOp(mm.result, y)]
        rewriter.replace_op(op, new, [new[-1].result])


class LowerReshape(RewritePattern):
    """A row-major reshape: collapse to 1-D, then expand to the new shape (both free views)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.ReshapeOp, rewriter: PatternRewriter) -> None:
        src, dst = aicc.shape_of(op.input), aicc.shape_of(op.result)
        value = op.input
        if src == dst:
            rewriter.replace(op, [], [value])
            return
        if not src:  # one element to shape (1, ..., 1): a broadcast (xDSL rejects expand from rank 0)
            rewriter.replace(op, aicc.BroadcastToOp(value, dst))
            return
        # Via rank 1, except to rank 0, which collapses with no groups at all. A dynamic dim
        # stays symbolic: (batch, 64) collapses to (batch*64,); bufferize gives an expand's
        # dynamic sizes from its result's encoding.
        mid = dst if not dst else (sym_prod(src),)
        if mid != src:
            collapse = tensor.CollapseShapeOp.create(
                operands=[value],
                result_types=[aicc.tensor_type(tensor_elem(op.input), mid)],
                properties={"reassociation": _reassociation([range(len(src))] if mid else [])},
            )
            rewriter.insert(collapse)
            value = collapse.results[0]
        if mid == dst:
            rewriter.replace(op, [], [value])
            return
        expand = tensor.ExpandShapeOp(
            value, [], _reassociation([range(len(dst))]),
            [DYNAMIC_INDEX if isinstance(d, Sym) else d for d in dst], op.result.type
        )
        rewriter.replace(op, expand)


class LowerConstant(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.ConstantOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, arith.ConstantOp(op.value))


class RejectUnlowered(RewritePattern):
    """Runs last: an aicc op that no pattern lowered is an error, never silently left behind."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.dialect_name() == "aicc":
            raise UnsupportedOpError(op.name, f"no lowering of '{op.name}' to linalg")


# The ops whose lowering (here and below) computes with dynamic dims: any of their dims may be
# `?`. Any other op on a dynamic tensor is an UnsupportedOpError, never a guess.
DYNAMIC_OK: tuple[type[Operation], ...] = (
    aicc.UnaryOp, aicc.BinaryOp, aicc.CompareOp, aicc.SelectOp, aicc.CastOp, aicc.MatmulOp,
    aicc.ReduceSumOp, aicc.ReduceMaxOp, aicc.ReduceMinOp, aicc.ReduceProdOp, aicc.SoftmaxOp,
    aicc.TransposeOp, aicc.ConstantOp, aicc.ReshapeOp, aicc.BroadcastToOp,
    # its verifier admits a dynamic dim read whole, a static count inside one, and a symbolic
    # count from a static dim (the frontend bounds the symbol); the generic's loops follow
    # the result
    aicc_nn.SliceOp,
)


def check_dynamic_support(module: ModuleOp) -> None:
    for o in module.walk():
        if not any(is_dynamic(t) for t in (*o.operand_types, *o.result_types)):
            continue
        if isinstance(o, DYNAMIC_OK) or o.name.startswith(("func.", "tensor.", "linalg.", "arith.")):
            continue
        if isinstance(o, aicc_nn.GatherOp) and not any(isinstance(d, Sym) for d in aicc.shape_of(o.data)):
            continue  # dynamic indices into a static table (an embedding)
        if isinstance(o, aicc_nn.Conv2dOp | aicc_nn.Pool2dOp) and not any(
                isinstance(d, Sym) for v in (*o.operands, o.results[0]) for d in aicc.shape_of(v)[1:]):
            continue  # a dynamic batch of images; channels and spatial sizes static
        if isinstance(o, aicc_nn.PadOp) and all(
                lo == hi == 0 for d, lo, hi in zip(aicc.shape_of(o.input), aicc_nn.int_values(o.low),
                                                   aicc_nn.int_values(o.high)) if isinstance(d, Sym)):
            continue  # pads static dims only
        if isinstance(o, AttentionOp) and not any(
                isinstance(d, Sym) for w in ("q", "v") for d in o.shape(w)[-1:]):
            continue  # dynamic batch and sequence lengths; the head dims are static
        if isinstance(o, aicc.ReduceMeanOp) and not any(
                isinstance(aicc.shape_of(o.input)[a], Sym) for a in o.axes.get_values()):
            continue  # the mean's count is static
        types = ", ".join(str(t) for t in o.operand_types)
        raise UnsupportedOpError(o.name, f"{o.name} on {types}: this op needs static sizes "
                                 "(dynamic dims reach it); compile with static input shapes "
                                 "(input_shapes= or example inputs; --input-shape NAME=D0xD1...)")


@dataclass(frozen=True)
class TensorToLinalg(ModulePass):
    """Lower the aicc dialect to linalg on tensors (destination-passing style)."""

    name = "tensor-to-linalg"

    # direct, im2col or matmul for every conv2d without an `aicc.conv_lowering` attribute;
    # "" for $AICC_CONV_LOWERING, else the heuristic (see nn_to_linalg.py)
    conv_lowering: str = ""
    # lower conv2d + per-channel bias together, the bias as the accumulator's start (off for
    # CUDA, where map-to-gpu fuses the add into the matmul kernel as an epilogue instead)
    conv_bias: bool = True
    # the target has the packed conv kernel (cpu: tile-conv), which the heuristic may then pick
    conv_packed: bool = False
    # the target's vector width in bits, for where the heuristic picks Winograd (0: never)
    conv_vector_bits: int = 0
    # which of the heuristic's packed-kernel rules the machine keeps for unstrided 1x1 convs:
    # all, small or none (see choose_conv_lowering)
    conv_packed_1x1: str = "all"
    # from how many 4x4 tiles of its output a Winograd conv takes F(4x4, 3x3) (winograd_tile)
    conv_winograd4_min_tiles: int = WINOGRAD4_MIN_TILES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_dynamic_support(op)
        if self.conv_packed_1x1 not in PACKED_1X1_RULES:
            raise CompileError(f"conv-packed-1x1 '{self.conv_packed_1x1}': expected one of "
                               f"{', '.join(PACKED_1X1_RULES)}")
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [
                    *([LowerConv2dBias(self.conv_lowering, self.conv_packed, self.conv_vector_bits,
                                       self.conv_packed_1x1, self.conv_winograd4_min_tiles)]
                      if self.conv_bias else []),  # before LowerBinary
                    LowerConstant(),
                    LowerUnary(),
                    LowerBinary(),
                    LowerCompare(),
                    LowerSelect(),
                    LowerCast(),
                    LowerBroadcastTo(),
                    LowerTranspose(),
                    FlattenLinear(),  # before LowerMatmul
                    LowerMatmul(),
                    LowerReduce(),
                    LowerSoftmax(),
                    LowerReshape(),
                    LowerTensorOp(),  # aicc.tensor_op: index notation
                    *QUANT_PATTERNS,  # quantize, dequantize, matmul_integer
                    *nn_patterns(self.conv_lowering, self.conv_bias, self.conv_packed,
                                 self.conv_vector_bits, self.conv_packed_1x1,
                                 self.conv_winograd4_min_tiles),
                ]
            ),
        ).rewrite_module(op)
        PatternRewriteWalker(RejectUnlowered(), apply_recursively=False).rewrite_module(op)
