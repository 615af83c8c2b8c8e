"""`compiler.tensor_op(src, ranges=None)`: a custom operator written in index notation.

    matmul = compiler.tensor_op("out[i, j] = sum[k](a[i, k] * b[k, j])")
    y = matmul(a, b)                      # NumPy in, NumPy out: compiled once per shapes

Inputs are the tensors of the expression in order of first appearance (here a, b): the
callable takes them positionally, or by name as keywords. A 0-d input (a scalar) is written
bare (`out[i] = x[i] * s`); Python numbers are accepted for it. The result is float32.

Inside a traced function (`@jit`, `compiler.compile`, gradients) the call emits a chain of
`aicc.tensor_op` ops instead: the expression's nested reductions are split into simple ops
(index_notation.split), each lowered to one linalg.generic. The tracer dispatches here through
`__aicc_trace_op__("tensor_op", ...)` (numpy_trace's `_NN_OPS`), like compiler.ops does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation, SSAValue

from compiler.dialects import index_notation as ixn
from compiler.dialects.aicc_index import TensorOp
from compiler.dialects.shapes import element_type_of, shape_of
from compiler.errors import CompileError


class TensorOpFunction:
    """The callable `compiler.tensor_op` returns (see the module's docstring)."""

    def __init__(self, src: str, ranges: Mapping[str, int] | None = None, *,
                 compile: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None):
        self.src = src
        self.statement = ixn.parse(src)
        if self.statement.accumulate:
            raise CompileError("tensor_op: `+=` (the scatter form) is for generated gradient ops; "
                               "write `out[...] = ...`")
        self.inputs = ixn.input_names(self.statement)
        if ranges is not None and not isinstance(ranges, Mapping):
            raise CompileError(f"tensor_op: ranges must be a dict of index -> size, got {type(ranges).__name__}")
        self.ranges = dict(ranges or {})
        indices = ixn.all_indices(self.statement)
        for k in self.ranges:
            if k not in indices:
                raise CompileError(f"tensor_op: ranges names '{k}', which is not an index of the expression")
        self._compile = compile
        self._compiled: Callable[..., Any] | None = None

    def __repr__(self) -> str:
        return f"tensor_op({ixn.to_text(self.statement)!r})"

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        """The inputs in order, from positional and keyword arguments."""
        if len(args) > len(self.inputs):
            raise CompileError(f"tensor_op: takes {len(self.inputs)} inputs "
                               f"({', '.join(self.inputs)}), got {len(args)}")
        values: dict[str, Any] = dict(zip(self.inputs, args))
        for k, v in kwargs.items():
            if k not in self.inputs:
                raise CompileError(f"tensor_op: no input named '{k}' (inputs: {', '.join(self.inputs)})")
            if k in values:
                raise CompileError(f"tensor_op: input '{k}' given twice")
            values[k] = v
        missing = [n for n in self.inputs if n not in values]
        if missing:
            raise CompileError(f"tensor_op: missing input{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        return [values[n] for n in self.inputs]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = self.bind(args, kwargs)
        for v in values:
            hook = getattr(type(v), "__aicc_trace_op__", None)
            if hook is not None:
                return hook(v, "tensor_op", (self, *values), {})
        if self._compile is None:
            raise CompileError("tensor_op: this operator has no compiler to run on arrays: "
                               "make it with compiler.tensor_op")
        arrays = [np.asarray(v, dtype=np.float32) if isinstance(v, (int, float, np.number)) else v
                  for v in values]
        if self._compiled is None:
            def run(*xs: Any) -> Any:
                return self(*xs)

            run.__name__ = "tensor_op"
            self._compiled = self._compile(run)  # compiled once per input shapes
        return self._compiled(*arrays)

    def build(self, values: Sequence[SSAValue]) -> list[Operation]:
        """The aicc.tensor_op chain computing the operator on `values` (the inputs in order)."""
        for name, v in zip(self.inputs, values):
            if element_type_of(v) != Float32Type():
                raise CompileError(f"tensor_op: input '{name}' is {v.type}; tensor_op computes float32")
        env: dict[str, SSAValue] = dict(zip(self.inputs, values))
        shapes = {n: shape_of(v) for n, v in env.items()}
        ranges = ixn.infer_ranges(self.statement, shapes, self.ranges)
        ops: list[Operation] = []
        for stmt in ixn.split(self.statement, ranges):
            op = TensorOp.from_statement(stmt, env, ranges)
            env[stmt.out] = op.result
            ops.append(op)
        return ops


__all__ = ["TensorOpFunction"]
