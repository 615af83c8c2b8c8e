"""The VJP of aicc.tensor_op, derived from its index notation.

For `out[I] = R[K](body)` with cotangent g, every access `x[f(I, K)]` of the body contributes
`w[I, K] * d body / d x[f(I, K)]` at x's element f(I, K), summed over the whole domain, where
the weight w is
  - no reduction or sum:  g[I]
  - max / min:            g[I] where body == out[I], else 0: every element that attains the
                          extreme gets the full cotangent (ties are not split)
  - prod:                 g[I] * out[I] / body (undefined, NaN or inf, where the body is 0)
and, for the scatter form `out[F(I)] += body`, g[F(I)].

Each contribution is itself a tensor_op: `dx[i, k] = sum[j](...)` when x's subscripts are
distinct plain indices (the other domain indices are summed), else the scatter form
`dx[2 * i + k] += ...` (shifted, strided, repeated or constant subscripts), whose lowering
runs the indices that are no plain output subscript serially, so it needs no atomics.
Several accesses of the same operand add their contributions.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from compiler.dialects import index_notation as ixn
from compiler.dialects.aicc_index import TensorOp
from compiler.lowering.autodiff import VJPBuilder, vjp


def _fresh(base: str, taken: set[str]) -> str:
    name = base
    while name in taken:
        name += "_"
    taken.add(name)
    return name


@vjp(TensorOp)
def _tensor_op_vjp(b: VJPBuilder, op: Operation, g: SSAValue) -> list[SSAValue | None]:
    assert isinstance(op, TensorOp)
    stmt, ranges = op.statement, op.range_map
    taken = set(ixn.all_indices(stmt)) | set(ixn.input_names(stmt)) | {stmt.out}
    gname, yname = _fresh("g", taken), _fresh("y", taken)
    env: dict[str, SSAValue] = {f"in{i}": v for i, v in enumerate(op.inputs)}
    env[gname], env[yname] = g, op.result

    red = stmt.body if isinstance(stmt.body, ixn.Reduce) else None
    body = red.body if red is not None else stmt.body
    cot = ixn.Access(gname, stmt.subs)
    res = ixn.Access(yname, stmt.subs)

    grads: list[SSAValue | None] = [None] * len(op.inputs)
    for access in dict.fromkeys(ixn.accesses(body)):
        d = ixn.derivative(body, access)
        if d == ixn.ZERO:
            continue
        if red is not None and red.kind in ("max", "min"):
            contrib = ixn.mul(ixn.where(ixn.BinOp("==", body, res), cot, ixn.ZERO), d)
        elif red is not None and red.kind == "prod":
            contrib = ixn.mul(ixn.div(ixn.mul(cot, res), body), d)
        else:
            contrib = ixn.mul(cot, d)
        pos = int(access.name[2:])
        plain = [s.plain for s in access.subs]
        if all(p is not None for p in plain) and len(set(plain)) == len(plain):
            rest = tuple(n for n in ranges if n not in plain)
            grad = ixn.Statement("dx", access.subs, ixn.Reduce("sum", rest, contrib) if rest else contrib)
        else:
            # `+=` has no reduction: domain indices the contribution never mentions multiply it.
            used = {n for a in ixn.accesses(contrib) for s in a.subs for n in s.indices}
            used |= {n for s in access.subs for n in s.indices}
            count = math.prod(r for n, r in ranges.items() if n not in used)
            grad = ixn.Statement("dx", access.subs, ixn.mul(contrib, ixn.Num(float(count))), accumulate=True)
        value = b.emit(TensorOp.from_statement(grad, env, ranges, result_type=op.inputs[pos].type))
        prev = grads[pos]
        grads[pos] = value if prev is None else b.add(prev, value)
    return grads
