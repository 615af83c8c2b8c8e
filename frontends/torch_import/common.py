"""What the modules of the PyTorch importer share: dtype tables, op names, the constant
nodes of a graph, and the operand helpers of the handlers.

A handler takes (importer, bound arguments) and returns a value or a list of values; it reads
the node being imported and its recorded result through the importer (`imp.node`,
`imp.out_shape()`, `imp.out_dtype()`) and emits aicc ops through `imp.g`, a GraphBuilder.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

__all__ = [
    "CONST_DTYPES", "NO_OPS", "SHAPE_ONLY", "TORCH_TO_NP", "Refused", "as_bool", "constant_sources",
    "fakes", "first_line", "float_input", "is_nondeterministic", "np_to_torch", "op_name",
    "require_arith", "static_nodes",
]

# Element types aicc compiles for tensors computed at run time.
TORCH_TO_NP = {
    torch.float32: np.dtype(np.float32),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.bool: np.dtype(np.bool_),
}


# Dtypes that may appear in values known at compile time (they are cast before use).
CONST_DTYPES = {
    **TORCH_TO_NP,
    torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
}


def np_to_torch(dt) -> torch.dtype:
    """The torch dtype of a NumPy dtype of CONST_DTYPES."""
    return {np.dtype(v): k for k, v in CONST_DTYPES.items()}[np.dtype(dt)]


def op_name(target: Any) -> str:
    """The name a node's target has in the handler tables: 'aten.add.Tensor', 'getitem', ..."""
    if target is operator.getitem:
        return "getitem"
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.add.Tensor"
    return getattr(target, "__name__", str(target))


# Ops whose result depends only on the shape and dtype of their tensor operands.
SHAPE_ONLY = {
    "aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
    "aten.empty_like.default", "aten.new_zeros.default", "aten.new_ones.default",
    "aten.new_full.default", "aten.new_empty.default",
}


# Ops that only check things at run time in eager mode; nothing to compute.
NO_OPS = {
    "aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
    "aten._assert_async.msg", "aten._assert_async.default",
    "aten.sym_constrain_range_for_size.default", "aten.sym_constrain_range.default",
}


class Refused:
    """A result of a node that the importer does not compute (the indices of max pooling);
    a node that uses it is refused with `why`."""

    def __init__(self, why: str):
        self.why = why


def fakes(val):
    """The FakeTensors of a node's recorded value (one, or those of a tuple)."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, list | tuple):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return []


def first_line(e: BaseException) -> str:
    """The first non-blank line of an error's message (torch's run to many lines)."""
    for line in str(e).splitlines():
        if line.strip():
            return line.strip()
    return type(e).__name__


def constant_sources(ep) -> dict[str, str]:
    """Placeholder name -> fully qualified name of each parameter, buffer and lifted constant."""
    sig = ep.graph_signature
    return {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}


def is_nondeterministic(target) -> bool:
    """Ops tagged nondeterministic_seeded (torch.rand, randn, ...); never folded into constants."""
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


def static_nodes(graph, constants) -> set:
    """The nodes whose values are known at compile time (`constants`: placeholder names)."""
    static = set()
    for node in graph.nodes:
        if node.op == "placeholder":
            if node.name in constants:
                static.add(node)
        elif node.op == "call_function" and not is_nondeterministic(node.target):
            if op_name(node.target) in SHAPE_ONLY or all(n in static for n in node.all_input_nodes):
                static.add(node)
    return static


# -- operands of the handlers -----------------------------------------------------------------


def float_input(imp, x):
    """The input of a float-valued op: integer tensors convert to the result dtype, as in torch."""
    x = imp.operand(x, imp.out_dtype()) if imp.out_dtype().kind == "f" else x
    imp.require_float(x)
    return x


def require_arith(imp, cls, *vals) -> None:
    """Float operands, or integer ones too for the ops the dialect computes on i32 / i64."""
    if not getattr(cls, "INTEGER_OK", False):
        imp.require_float(*vals)
        return
    for v in vals:
        if not isinstance(v, np.ndarray | bool | int | float) and imp.g.dtype(v).kind not in "fiu":
            raise imp.unsupported(f"{imp.g.dtype(v)} arithmetic on a computed tensor")


def as_bool(imp, v):
    """`v` (a tensor or a Python scalar) as a bool value."""
    return imp.operand(v, np.bool_)
