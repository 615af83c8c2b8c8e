"""aicc.tensor_op -> one linalg.generic (a pattern of tensor-to-linalg).

The iteration domain's dims are the op's indices (`index_order`: output indices first). Each
distinct access becomes an input whose indexing map is its subscripts as affine expressions
(`x[c, 2 * i + k]` reads (d0, d1 * 2 + d2)); the body is built from arith / math ops, and a
top-level reduction combines into the output (filled with the reduction's identity; the max
or min of a plain read of an integer tensor, an int8 max pool, compares signed integers):

    out[i] = sum[k](x[i + k] * w[k])
    ->  linalg.generic {maps = [(d0, d1) -> (d0 + d1), (d0, d1) -> (d1), (d0, d1) -> (d0)],
                        iterators = [parallel, reduction]} ins(%x, %w) outs(%zero)

linalg-to-loops (and fuse-elementwise) take each loop's range from an operand dim indexed by
that loop alone. An index that never is a subscript on its own (`k` of `x[c, 2 * i + k]` with
its range given) gets one: an extra input, a `tensor.empty` shaped like those ranges and read
plainly, whose block argument the body never uses (so no loop loads it).

`out[f(i, k)] += body` (the scatter form of gradients) fills the output with zeros and adds
each iteration's value at f(i, k). An index that is an output subscript on its own is a
parallel loop (distinct values write distinct elements); every other index is a reduction
loop, so no two parallel iterations ever add to the same element.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.builder import Builder
from xdsl.dialects import arith, math as xmath
from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from compiler.dialects import index_notation as ixn
from compiler.dialects.aicc_index import TensorOp
from compiler.lowering.utils import (
    PARALLEL,
    REDUCTION,
    build_generic,
    empty_tensor,
    filled_tensor,
    insert_result,
    scalar_constant,
    sigmoid_body,
)

# (identity, combiner) of each reduction
REDUCTIONS = {
    "sum": (0.0, arith.AddfOp),
    "max": (-math.inf, arith.MaximumfOp),  # NaN-propagating, as np.max
    "min": (math.inf, arith.MinimumfOp),
    "prod": (1.0, arith.MulfOp),
}
# max / min of an integer tensor (an int8 max pool): (identity, combiner) for a bit width
INT_REDUCTIONS = {
    "max": lambda w: (-(1 << (w - 1)), arith.MaxSIOp),
    "min": lambda w: ((1 << (w - 1)) - 1, arith.MinSIOp),
}
# NumPy semantics: every comparison with NaN is False except `!=`.
CMPF = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}
ARITH = {"+": arith.AddfOp, "-": arith.SubfOp, "*": arith.MulfOp, "/": arith.DivfOp,
         "max": arith.MaximumfOp, "min": arith.MinimumfOp}
UNARY: dict[str, Callable[[SSAValue], object]] = {
    "neg": arith.NegfOp, "exp": xmath.ExpOp, "log": xmath.LogOp, "tanh": xmath.TanhOp,
    "sqrt": xmath.SqrtOp, "rsqrt": xmath.RsqrtOp, "abs": xmath.AbsFOp, "sin": xmath.SinOp,
    "cos": xmath.CosOp, "erf": xmath.ErfOp,
}


def affine_expr(a: ixn.Affine, dim: dict[str, int]) -> AffineExpr:
    terms: list[AffineExpr] = [AffineDimExpr(dim[n]) if c == 1 else AffineDimExpr(dim[n]) * c
                               for n, c in a.terms]
    if a.const or not terms:
        terms.append(AffineConstantExpr(a.const))
    e = terms[0]
    for t in terms[1:]:
        e = e + t
    return e


class _Body:
    """Scalar code of an expression: float values of type `t`, comparisons as i1."""

    def __init__(self, b: Builder, t: Attribute, args: dict[ixn.Access, SSAValue]):
        self.b, self.t, self.args = b, t, args
        self.memo: dict[ixn.Expr, SSAValue] = {}

    def ins(self, op) -> SSAValue:
        return insert_result(self.b, op)

    def const(self, v: float) -> SSAValue:
        return scalar_constant(self.b, v, self.t)

    def float(self, v: SSAValue) -> SSAValue:
        return v if v.type == self.t else self.ins(arith.UIToFPOp(v, self.t))

    def bool(self, v: SSAValue) -> SSAValue:
        return v if v.type != self.t else self.ins(arith.CmpfOp(v, self.const(0.0), "une"))

    def __call__(self, e: ixn.Expr) -> SSAValue:
        if e not in self.memo:
            self.memo[e] = self.emit(e)
        return self.memo[e]

    def emit(self, e: ixn.Expr) -> SSAValue:
        if isinstance(e, ixn.Num):
            return self.const(e.value)
        if isinstance(e, ixn.Access):
            return self.args[e]
        if isinstance(e, ixn.BinOp):
            lhs, rhs = self.float(self(e.lhs)), self.float(self(e.rhs))
            if e.op in CMPF:
                return self.ins(arith.CmpfOp(lhs, rhs, CMPF[e.op]))
            return self.ins(ARITH[e.op](lhs, rhs))
        assert isinstance(e, ixn.Call), e
        if e.fn == "where":
            c, x, y = (self(a) for a in e.args)
            return self.ins(arith.SelectOp(self.bool(c), self.float(x), self.float(y)))
        args = [self.float(self(a)) for a in e.args]
        if e.fn in ARITH:
            return self.ins(ARITH[e.fn](*args))
        x = args[0]
        if e.fn == "relu":
            return self.ins(arith.MaximumfOp(x, self.const(0.0)))
        if e.fn == "sigmoid":  # 1 / (1 + exp(-x))
            return sigmoid_body(self.b, x, self.const(1.0))
        return self.ins(UNARY[e.fn](x))


class LowerTensorOp(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TensorOp, rewriter: PatternRewriter) -> None:
        stmt, ranges = op.statement, op.range_map
        order = list(ranges)
        dim = {n: i for i, n in enumerate(order)}
        nd = len(order)
        red = stmt.body if isinstance(stmt.body, ixn.Reduce) else None
        body = red.body if red is not None else stmt.body

        parallel = {s.plain for s in stmt.subs if s.plain is not None}
        iterators = [PARALLEL if n in parallel else REDUCTION for n in order]
        reads = list(dict.fromkeys(ixn.accesses(body)))
        inputs = [op.inputs[int(a.name[2:])] for a in reads]
        maps = [AffineMap(nd, 0, tuple(affine_expr(s, dim) for s in a.subs)) for a in reads]

        plain = {s.plain for a in reads for s in a.subs} | parallel
        missing = [n for n in order if n not in plain]
        res_t = op.result.type
        assert isinstance(res_t, TensorType)
        elem = res_t.element_type
        if missing:  # a range source for loops no operand indexes plainly (see above)
            inputs.append(empty_tensor(rewriter, TensorType(elem, [ranges[n] for n in missing])))
            maps.append(AffineMap(nd, 0, tuple(AffineDimExpr(dim[n]) for n in missing)))
        maps.append(AffineMap(nd, 0, tuple(affine_expr(s, dim) for s in stmt.subs)))

        if red is not None and isinstance(elem, IntegerType) and red.kind in INT_REDUCTIONS:
            if not isinstance(body, ixn.Access):
                raise ValueError(f"aicc.tensor_op: an integer {red.kind} reduces a plain read only, got {op.expr.data!r}")
            width = elem.width.data
            identity, combiner = INT_REDUCTIONS[red.kind](width)
            init = filled_tensor(rewriter, op, res_t, identity)
        elif red is not None:
            identity, combiner = REDUCTIONS[red.kind]
            init = filled_tensor(rewriter, op, res_t, identity)
        elif stmt.accumulate:
            combiner = arith.AddfOp
            init = filled_tensor(rewriter, op, res_t, 0.0)
        else:
            combiner = None
            init = empty_tensor(rewriter, res_t)

        def region(b: Builder, args) -> list[SSAValue]:
            emit = _Body(b, elem, {a: args[i] for i, a in enumerate(reads)})
            value = emit.float(emit(body))
            if combiner is not None:
                value = insert_result(b, combiner(args[-1], value))
            return [value]

        rewriter.replace(op, build_generic(inputs, [init], maps, iterators, region, [res_t]))


__all__ = ["LowerTensorOp", "affine_expr"]
