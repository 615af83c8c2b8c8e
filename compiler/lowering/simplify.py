"""simplify: algebraic rewrite rules on the aicc dialect, as a table of pattern -> replacement.

Each row of `RULES` is one xDSL RewritePattern: the op kind it applies to, a condition on the
op, and the replacement (an existing value, or new ops whose last result replaces the op),
with the identity it expresses as the comment. A replacement keeps the op's result type: where
the kept value has a smaller shape than the op's broadcast result (x + 0 with a bigger 0), it
is broadcast (aicc.broadcast_to), never returned as is.

MATMUL_RULES fold a transpose of an operand's last two dims into aicc.matmul's
`transpose_lhs` / `transpose_rhs` flags, which tensor-to-linalg reads through swapped indexing
maps, so the transpose is never materialized (`transpose-matmul=false` keeps the transposes:
the CUDA pipeline does, because map-to-gpu tiles only untransposed matmuls).

Floating-point choices (IEEE-754 with NaN and Inf, as NumPy computes):
  * RULES are exact and always run. One is exact only up to the sign of a zero, which ML
    compilers ignore: x + 0 -> x (-0 + 0 is +0).
  * x / c where every element of c is a power of two is exactly x * (1/c) (both round the same
    real number once), so that rule is in RULES.
  * x * 0 -> 0 and x - x -> 0 are wrong for x = NaN or Inf (both give NaN), and x / c ->
    x * (1/c) for other c rounds twice (within 1 ulp); they are FAST_MATH_RULES and run only
    with `fast-math=true` (the no-NaN/Inf assumption of -ffast-math). The pipeline runs
    simplify without it, so compiled code keeps NumPy's NaN and Inf results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from compiler.dialects import aicc
from compiler.lowering.constants import (
    array_constant,
    constant_attr,
    constant_value,
    splat_constant,
    splat_value,
)

Replacement = SSAValue | Operation | Sequence[Operation]


@dataclass(frozen=True)
class Rule(RewritePattern):
    """One table row: an op of `kind` for which `when(op)` holds becomes `then(op)`."""

    kind: type[Operation] | tuple[type[Operation], ...]
    when: Callable[[Any], bool]
    then: Callable[[Any], Replacement]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.kind) or not self.when(op):
            return
        new = self.then(op)
        ops: list[Operation] = [] if isinstance(new, SSAValue) else [new] if isinstance(new, Operation) else list(new)
        value = new if isinstance(new, SSAValue) else ops[-1].results[0]
        if value.type != op.results[0].type:  # x + 0 with a bigger 0: x broadcast, not x
            ops.append(aicc.BroadcastToOp(value, aicc.shape_of(op.results[0])))
            value = ops[-1].results[0]
        rewriter.replace(op, ops, [value])


# -- conditions and builders used by the table ---------------------------------------------------


def owner(value: SSAValue, kind: type[Operation]) -> Any:
    """The op of `kind` defining `value`, else None."""
    return value.owner if isinstance(value.owner, kind) else None


def is_(value: SSAValue, scalar: float) -> bool:
    """Is `value` a constant with every element equal to `scalar`?"""
    v = splat_value(value)
    return v is not None and v == scalar


def zeros(op: Operation) -> aicc.ConstantOp:
    return splat_constant(0, op.results[0].type)


def same_type(a: SSAValue, b: SSAValue) -> bool:
    return a.type == b.type


def same_element(a: SSAValue, b: SSAValue) -> bool:
    return aicc.element_type_of(a) == aicc.element_type_of(b)


def swaps_last_two(value: SSAValue) -> bool:
    """Is `value` a transpose that swaps the last two dims and keeps the others?"""
    t = owner(value, aicc.TransposeOp)
    n = len(t.perm) if t else 0
    return t is not None and n >= 2 and t.perm == (*range(n - 2), n - 1, n - 2)


def matmul_like(op: aicc.MatmulOp, lhs=None, rhs=None, t_lhs=None, t_rhs=None) -> aicc.MatmulOp:
    """`op` with some operands or transpose flags replaced."""
    return aicc.MatmulOp(
        lhs or op.lhs, rhs or op.rhs, op.bias,
        op.trans_lhs if t_lhs is None else t_lhs, op.trans_rhs if t_rhs is None else t_rhs,
    )


def compose(outer: aicc.TransposeOp) -> aicc.TransposeOp:
    """transpose(transpose(x, p), q) = transpose(x, r), r[i] = p[q[i]]."""
    inner = outer.input.owner
    return aicc.TransposeOp(inner.input, [inner.perm[q] for q in outer.perm])


def pow2_reciprocal(value: SSAValue) -> np.ndarray | None:
    """1/c when every element of the constant c is a power of two with 1/c finite, else None."""
    attr = constant_attr(value)
    if attr is None or not (attr.is_splat() or np.prod(attr.get_type().get_shape()) <= 1 << 20):
        return None
    c = constant_value(value)
    if c.dtype.kind != "f":  # integer division truncates: x / 4 is not x * 0
        return None
    with np.errstate(all="ignore"):
        recip = (1 / c).astype(c.dtype)
    mantissa, _ = np.frexp(c)
    return recip if np.all(np.abs(mantissa) == 0.5) and np.all(np.isfinite(recip)) else None


def times_reciprocal(op: aicc.DivOp, recip: np.ndarray) -> list[Operation]:
    c = array_constant(recip, op.rhs.type)
    return [c, aicc.MulOp(op.lhs, c.result)]


def reciprocal(value: SSAValue) -> np.ndarray:
    c = constant_value(value)
    with np.errstate(all="ignore"):
        return (1 / c).astype(c.dtype)


def wide_splat(op: Operation) -> int | None:
    """The operand index of a splat constant of more than one element that the op's result
    shape does not need (the other operands give it), so a rank-0 constant can replace it."""
    for i, v in enumerate(op.operands):
        attr = constant_attr(v)
        if attr is None or not attr.is_splat() or not aicc.shape_of(v):
            continue
        others = [aicc.shape_of(w) for j, w in enumerate(op.operands) if j != i]
        if aicc.broadcast_shapes(op.name, *others) == aicc.shape_of(op.results[0]):
            return i
    return None


def narrow_splat(op: Operation) -> list[Operation]:
    i = wide_splat(op)
    c = splat_constant(splat_value(op.operands[i]), TensorType(aicc.element_type_of(op.operands[i]), ()))
    new = op.clone()
    new.operands = [c.result if j == i else v for j, v in enumerate(op.operands)]
    return [c, new]


A, M = aicc, aicc.MatmulOp
ELEMENTWISE = (aicc.BinaryOp, aicc.CompareOp, aicc.SelectOp)

# pattern -> replacement, one per line; the comment is the identity.
RULES: list[Rule] = [
    Rule(A.MulOp, lambda o: is_(o.rhs, 1), lambda o: o.lhs),                                # x * 1 = x
    Rule(A.MulOp, lambda o: is_(o.lhs, 1), lambda o: o.rhs),                                # 1 * x = x
    Rule(A.AddOp, lambda o: is_(o.rhs, 0), lambda o: o.lhs),                                # x + 0 = x
    Rule(A.AddOp, lambda o: is_(o.lhs, 0), lambda o: o.rhs),                                # 0 + x = x
    Rule(A.SubOp, lambda o: is_(o.rhs, 0), lambda o: o.lhs),                                # x - 0 = x
    Rule(A.DivOp, lambda o: is_(o.rhs, 1), lambda o: o.lhs),                                # x / 1 = x
    Rule(A.DivOp, lambda o: pow2_reciprocal(o.rhs) is not None,
         lambda o: times_reciprocal(o, pow2_reciprocal(o.rhs))),                            # x / 2^k = x * 2^-k (exact)
    Rule(A.NegOp, lambda o: owner(o.input, A.NegOp), lambda o: o.input.owner.input),        # -(-x) = x
    Rule(A.PowOp, lambda o: is_(o.rhs, 1) and same_element(o.lhs, o.result), lambda o: o.lhs),     # x ** 1 = x
    Rule(A.PowOp, lambda o: is_(o.rhs, 2) and same_element(o.lhs, o.result),
         lambda o: A.MulOp(o.lhs, o.lhs)),                                                  # x ** 2 = x * x (one rounding of x², exact)
    Rule(A.TransposeOp, lambda o: o.perm == tuple(range(len(o.perm))), lambda o: o.input),  # transpose(x, id) = x
    Rule(A.TransposeOp, lambda o: owner(o.input, A.TransposeOp), compose),                  # transpose(transpose(x, p), q) = transpose(x, p∘q)
    Rule(A.ReshapeOp, lambda o: same_type(o.input, o.result), lambda o: o.input),           # reshape(x, shape(x)) = x
    Rule(A.ReshapeOp, lambda o: owner(o.input, A.ReshapeOp),
         lambda o: A.ReshapeOp(o.input.owner.input, A.shape_of(o.result))),                 # reshape(reshape(x, s), t) = reshape(x, t)
    Rule(A.BroadcastToOp, lambda o: same_type(o.input, o.result), lambda o: o.input),       # broadcast_to(x, shape(x)) = x
    Rule(A.BroadcastToOp, lambda o: splat_value(o.input) is not None,
         lambda o: splat_constant(splat_value(o.input), o.result.type)),                    # broadcast_to(c, s) = splat(c, s)
    Rule(A.CastOp, lambda o: same_type(o.input, o.result), lambda o: o.input),              # cast(x: T -> T) = x
    Rule(ELEMENTWISE, lambda o: wide_splat(o) is not None, narrow_splat),                 # x ⊙ splat(c, S) = x ⊙ c, when x alone gives the result shape
]

# Transposes read through the matmul's maps, never materialized: `transpose-matmul=true`.
MATMUL_RULES: list[Rule] = [
    Rule(M, lambda o: swaps_last_two(o.lhs),
         lambda o: matmul_like(o, lhs=o.lhs.owner.input, t_lhs=not o.trans_lhs)),           # transpose(a) @ b = matmul{transpose_lhs}(a, b)
    Rule(M, lambda o: swaps_last_two(o.rhs),
         lambda o: matmul_like(o, rhs=o.rhs.owner.input, t_rhs=not o.trans_rhs)),           # a @ transpose(b) = matmul{transpose_rhs}(a, b)
]

# Exact only without NaN and Inf, or up to one rounding: `simplify{fast-math=true}`.
FAST_MATH_RULES: list[Rule] = [
    Rule(A.SubOp, lambda o: o.lhs is o.rhs, zeros),                                         # x - x = 0   (NaN for x = ±Inf, NaN)
    Rule(A.MulOp, lambda o: is_(o.rhs, 0) or is_(o.lhs, 0), zeros),                         # x * 0 = 0 * x = 0   (NaN for x = ±Inf, NaN)
    Rule(A.DivOp, lambda o: constant_attr(o.rhs) is not None and constant_value(o.rhs).dtype.kind == "f",
         lambda o: times_reciprocal(o, reciprocal(o.rhs))),                                 # x / c = x * (1/c)   (within 1 ulp; floats)
]


def _keepdims_over(op: Operation, kind: type[Operation], axis: int) -> bool:
    return (isinstance(op, kind) and op.keepdims.value.data
            and tuple(op.axes.get_values()) == (axis,))


class RecognizeSoftmax(RewritePattern):
    """exp(x - max(x, a)) / sum(exp(x - max(x, a)), a), both reductions over the one axis a
    with keepdims, the exp read by nothing else: softmax(x, a), as NumPy code writes it
    (benchmarks/workloads.py). It then lowers as the frontends' softmax does, its exp marked
    `afn` (tensor-to-linalg's LowerSoftmax): the one change to the numbers is that entries of
    exp below 2^-126 (FLT_MIN) flush to 0, as ONNX Runtime's softmax does too; with AVX2 code
    the exp is 3 ops shorter (4096x4096 on a Zen 5: 8.68 -> 7.77 ms)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, A.DivOp):
            return
        e, s = owner(op.lhs, A.ExpOp), owner(op.rhs, A.ReduceSumOp)
        if e is None or s is None or s.input is not op.lhs \
                or [u.operation for u in op.lhs.uses] not in ([op, s], [s, op]):
            return
        d = owner(e.input, A.SubOp)
        if d is None or not A.shape_of(op.lhs) or not same_type(d.lhs, op.result) \
                or not same_type(op.lhs, op.result):
            return
        axes = tuple(s.axes.get_values())
        if len(axes) != 1 or not _keepdims_over(s, A.ReduceSumOp, axes[0]):
            return
        mx = d.rhs.owner
        if not _keepdims_over(mx, A.ReduceMaxOp, axes[0]) or mx.input is not d.lhs:
            return
        rewriter.replace(op, [A.SoftmaxOp(d.lhs, axes[0])])


@dataclass(frozen=True)
class Simplify(ModulePass):
    """Apply the algebraic rules of RULES, MATMUL_RULES unless transpose-matmul=false, and
    FAST_MATH_RULES with fast-math=true; and RecognizeSoftmax."""

    name = "simplify"

    fast_math: bool = False
    # The CUDA pipeline turns this off: map-to-gpu tiles only matmuls with untransposed
    # operands, so there a materialized transpose plus the tiled kernel is faster.
    transpose_matmul: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rules = RULES + (MATMUL_RULES if self.transpose_matmul else [])
        rules += FAST_MATH_RULES if self.fast_math else []
        rules.append(RecognizeSoftmax())
        PatternRewriteWalker(GreedyRewritePatternApplier(list(rules))).rewrite_module(op)
