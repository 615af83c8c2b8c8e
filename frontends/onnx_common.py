"""What the ONNX handler modules share: element types, and the errors and checks of handlers.

frontends/onnx_import.py (the importer and the tensor ops) and frontends/onnx_nn.py (the ops
of the NN dialect) both import this module; neither imports the other's internals. A handler
takes (importer, node, inputs, attrs) and returns the node's output values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.errors import UnsupportedOpError

__all__ = ["Handler", "ONNX_DTYPES", "const", "dtype_name", "int8_value", "is_uint8", "set_int8_kind",
           "unsupported"]

Handler = Callable[[Any, Any, list, dict], list]

# ONNX TensorProto element types aicc can hold (others are rejected at import).
ONNX_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


def dtype_name(code: int) -> str:
    """The name of an ONNX element type code ('float16'), or the code."""
    try:
        from onnx import TensorProto

        return TensorProto.DataType.Name(code).lower()
    except Exception:
        return str(code)


def unsupported(imp, node, what: str) -> UnsupportedOpError:
    """The error for a node whose `what` (an attribute value, an input kind) aicc lacks."""
    return UnsupportedOpError(node.op_type, f"ONNX {node.op_type} node '{node.name}': {what} is not supported")


def const(imp, node, v, what: str) -> np.ndarray:
    """`v`, an input that must be known at compile time (a shape, axes, pads). A graph input
    with an example value is specialized on that value: the importer records a guard that the
    compiled model checks on every call."""
    if not isinstance(v, np.ndarray):
        special = getattr(imp, "specialize", None)
        value = special(v) if special is not None else None
        if value is not None:
            return value
        e = unsupported(imp, node, f"a non-constant {what}")
        # which graph value it is, so a caller can supply it as a constant (an initializer)
        env = getattr(imp, "env", {})
        e.input_name = next((n for n in node.input if n and env.get(n) is v), None)
        raise e
    return v


# ---------------------------------------------------------------------------------------------
# (u)int8 tensors. aicc's int8 is signed: a uint8 tensor v is held as the int8 tensor v - 128 (its
# zero point z as z - 128), so an i8 SSA value alone does not say which ONNX type it has. The
# importer records it per value (`imp.int8_kinds`): the quantization ops set it, graph inputs
# set it, and the layout ops (Reshape, Transpose, MaxPool, ...) pass it on to their results.
# ---------------------------------------------------------------------------------------------


def set_int8_kind(imp, v, unsigned: bool):
    """Record that the i8 SSA value `v` holds uint8 (shifted by -128) or int8 values; `v`."""
    if not isinstance(v, np.ndarray):
        imp.int8_kinds[v] = bool(unsigned)
    return v


def is_uint8(imp, node, v) -> bool:
    """Whether `v` (a (u)int8 array, or an i8 SSA value with a recorded kind) is ONNX uint8."""
    if isinstance(v, np.ndarray):
        if v.dtype not in (np.int8, np.uint8):
            raise unsupported(imp, node, f"a {v.dtype} operand where int8 or uint8 is expected")
        return v.dtype == np.uint8
    kinds = getattr(imp, "int8_kinds", {})
    if v not in kinds:
        raise unsupported(imp, node, f"an operand of type {v.type} where int8 or uint8 is expected")
    return kinds[v]


def int8_value(imp, node, v):
    """(`v` as aicc holds it, whether it is uint8): a uint8 array becomes the int8 array v - 128."""
    unsigned = is_uint8(imp, node, v)
    if isinstance(v, np.ndarray) and unsigned:
        v = np.asarray(v.astype(np.int16) - 128).astype(np.int8)
    return v, unsigned
