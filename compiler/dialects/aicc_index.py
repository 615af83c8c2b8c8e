"""`aicc.tensor_op`: a custom operator written in index notation (see index_notation.py).

    %r = aicc.tensor_op "out[i, j] = sum[k](in0[i, k] * in1[k, j])"(%a, %b)
           {ranges = {i = 4 : i64, j = 5 : i64, k = 3 : i64}}
           : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>

The expression is kept as canonical text: the operands are `in0`, `in1`, ... by position (a
0-d operand is written bare), the result is `out`, and `ranges` gives every index's range.
The op is always simple (a reduction-free body, optionally under one top-level reduction),
so it lowers to one linalg.generic; frontends split nested reductions into a chain of
tensor_ops first (index_notation.split). Registered in the `aicc` Dialect (aicc.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import AnyFloat, DictionaryAttr, Float32Type, IntegerAttr, IntegerType, StringAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, attr_def, irdl_op_definition, result_def, traits_def, var_operand_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from compiler.dialects import index_notation as ixn
from compiler.dialects.shapes import element_type_of, shape_of
from compiler.errors import CompileError

_OPERAND = re.compile(r"in\d+")


@functools.lru_cache(maxsize=1024)
def parse_cached(text: str) -> ixn.Statement:
    return ixn.parse(text)


@irdl_op_definition
class TensorOp(IRDLOperation):
    name = "aicc.tensor_op"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    expr = attr_def(StringAttr)
    ranges = attr_def(DictionaryAttr)
    traits = traits_def(Pure())
    assembly_format = "$expr `(` $inputs `)` attr-dict `:` functional-type($inputs, $result)"

    def __init__(self, text: str, inputs: Sequence[SSAValue], ranges: Mapping[str, int], result_type: Attribute):
        super().__init__(
            operands=[list(inputs)],
            result_types=[result_type],
            attributes={
                "expr": StringAttr(text),
                "ranges": DictionaryAttr({k: IntegerAttr(int(v), i64) for k, v in ranges.items()}),
            },
        )

    @staticmethod
    def from_statement(stmt: ixn.Statement, values: Mapping[str, SSAValue], ranges: Mapping[str, int],
              result_type: Attribute | None = None) -> TensorOp:
        """The op computing the simple statement `stmt`, whose tensors are `values` (by name);
        operands are ordered by first appearance. `result_type` is needed for `+=` only."""
        names = ixn.input_names(stmt)
        to_pos = {n: f"in{i}" for i, n in enumerate(names)}
        indices = ixn.all_indices(stmt)
        # An index spelled like an operand would read as one: rename it apart.
        taken = set(to_pos.values()) | {"out"} | set(indices)
        idx_names: dict[str, str] = {}
        for n in indices:
            if _OPERAND.fullmatch(n) or n == "out":
                new = n + "_"
                while new in taken:
                    new += "_"
                taken.add(new)
                idx_names[n] = new
        body = _rename_indices(ixn.rename(stmt.body, to_pos), idx_names)
        subs = tuple(_rename_affine(s, idx_names) for s in stmt.subs)
        canon = ixn.Statement("out", subs, body, stmt.accumulate)
        order = ixn.index_order(canon)
        rng = {idx_names.get(n, n): int(ranges[n]) for n in indices}
        rng = {n: rng[n] for n in order}
        if result_type is None:
            elem = element_type_of(values[names[0]]) if names else Float32Type()
            result_type = TensorType(elem, ixn.result_shape(canon, rng))
        return TensorOp(ixn.to_text(canon), [values[n] for n in names], rng, result_type)

    @property
    def statement(self) -> ixn.Statement:
        return parse_cached(self.expr.data)

    @property
    def range_map(self) -> dict[str, int]:
        r = {k: v.value.data for k, v in self.ranges.data.items()}  # type: ignore[union-attr]
        return {n: r[n] for n in ixn.index_order(self.statement)}

    def operand_shapes(self) -> dict[str, tuple[int, ...]]:
        return {f"in{i}": shape_of(v) for i, v in enumerate(self.inputs)}

    def verify_(self) -> None:
        try:
            stmt = self.statement
        except CompileError as e:
            raise VerifyException(f"aicc.tensor_op: {str(e).removeprefix('tensor_op: ')}") from None
        if stmt.out != "out":
            raise VerifyException(f"aicc.tensor_op: the output must be named 'out', not '{stmt.out}'")
        if not ixn.is_simple(stmt):
            raise VerifyException("aicc.tensor_op: nested reductions must be split into a chain of tensor_ops")
        names = ixn.input_names(stmt)
        if names != [f"in{i}" for i in range(len(self.inputs))]:
            raise VerifyException(f"aicc.tensor_op: the expression reads {', '.join(names) or 'nothing'}; "
                                  f"it must read in0 .. in{len(self.inputs) - 1} in order of first appearance")
        elem = element_type_of(self.result)
        copy = isinstance(stmt.body, ixn.Access) and not stmt.accumulate  # a gather: any element type
        extreme = (isinstance(stmt.body, ixn.Reduce) and stmt.body.kind in ("max", "min")
                   and isinstance(stmt.body.body, ixn.Access) and not stmt.accumulate)  # an int8 max pool
        if not isinstance(elem, AnyFloat) and not copy and not (extreme and isinstance(elem, IntegerType)):
            raise VerifyException(f"aicc.tensor_op: the result must be a float tensor (or the expression a "
                                  f"plain read, out[...] = in0[...], or the max or min of one), got {self.result.type}")
        for i, v in enumerate(self.inputs):
            if element_type_of(v) != elem:
                raise VerifyException(f"aicc.tensor_op: operand in{i} is {v.type}, the result's element type is {elem}")
        r = {k: v.value.data for k, v in self.ranges.data.items() if isinstance(v, IntegerAttr)}
        if len(r) != len(self.ranges.data) or set(r) != set(ixn.all_indices(stmt)):
            raise VerifyException("aicc.tensor_op: ranges must give an integer range for every index, and only those")
        out_shape = shape_of(self.result)
        try:
            inferred = ixn.infer_ranges(stmt, self.operand_shapes(), r,
                                        out_shape if stmt.accumulate else None)
        except CompileError as e:
            raise VerifyException(f"aicc.tensor_op: {str(e).removeprefix('tensor_op: ')}") from None
        if not stmt.accumulate and ixn.result_shape(stmt, inferred) != out_shape:
            raise VerifyException(f"aicc.tensor_op: the result has shape {out_shape}, the output indices "
                                  f"range over {ixn.result_shape(stmt, inferred)}")


def _rename_affine(a: ixn.Affine, names: Mapping[str, str]) -> ixn.Affine:
    return ixn.Affine(tuple((names.get(n, n), c) for n, c in a.terms), a.const) if names else a


def _rename_indices(e: ixn.Expr, names: Mapping[str, str]) -> ixn.Expr:
    if not names:
        return e
    if isinstance(e, ixn.Access):
        return ixn.Access(e.name, tuple(_rename_affine(s, names) for s in e.subs))
    if isinstance(e, ixn.Call):
        return ixn.Call(e.fn, tuple(_rename_indices(a, names) for a in e.args))
    if isinstance(e, ixn.BinOp):
        return ixn.BinOp(e.op, _rename_indices(e.lhs, names), _rename_indices(e.rhs, names))
    if isinstance(e, ixn.Reduce):
        return ixn.Reduce(e.kind, tuple(names.get(n, n) for n in e.indices), _rename_indices(e.body, names))
    return e


INDEX_OPS = [TensorOp]
