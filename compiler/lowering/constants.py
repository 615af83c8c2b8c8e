"""Reading and building `aicc.constant`s, for the graph passes (fold-constants, simplify,
fold-conv-bn).

A splat is a dense attribute that stores one element for a whole shape (`dense<1.0> :
tensor<64x64xf32>`); the folder keeps splats as splats, so a broadcast scalar costs one element.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, SSAValue

from compiler.dialects import aicc

# A stored (non-splat) constant this small is checked element by element for being a splat.
SMALL = 4096


def constant_attr(value: SSAValue) -> DenseIntOrFPElementsAttr | None:
    owner = value.owner
    return owner.value if isinstance(owner, aicc.ConstantOp) else None


def constant_value(value: SSAValue) -> np.ndarray | None:
    """The array of an aicc.constant result, else None."""
    attr = constant_attr(value)
    return None if attr is None else aicc.numpy_from_dense(attr)


def stored_elements(attr: DenseIntOrFPElementsAttr) -> int:
    """Elements the attribute stores: 1 for a splat."""
    return 1 if attr.is_splat() else max(1, int(np.prod(attr.get_type().get_shape())))


def splat_value(value: SSAValue) -> float | int | bool | None:
    """The one value of every element of a constant (stored as a splat, or small and uniform)."""
    attr = constant_attr(value)
    if attr is None:
        return None
    if attr.is_splat() or stored_elements(attr) <= SMALL:
        array = aicc.numpy_from_dense(attr)
        if array.size == 0:
            return None
        first = array.flat[0]
        if attr.is_splat() or bool(np.all(array == first)):
            return first.item()
    return None


def splat_attr(scalar, type: TensorType) -> DenseIntOrFPElementsAttr:
    """A splat of `scalar` with tensor type `type` (one element stored)."""
    array = np.asarray(scalar, dtype=aicc.numpy_dtype(type.element_type))
    if array.dtype == np.bool_:
        array = array.astype(np.int8)
    return DenseIntOrFPElementsAttr(type, BytesAttr(array.reshape(()).tobytes()))


def splat_constant(scalar, type: Attribute) -> aicc.ConstantOp:
    assert isinstance(type, TensorType)
    return aicc.ConstantOp(splat_attr(scalar, type))


def array_constant(array: np.ndarray, type: Attribute) -> aicc.ConstantOp:
    """`array` (any shape broadcastable to `type`) as a constant of `type`; a uniform array
    becomes a splat."""
    assert isinstance(type, TensorType)
    array = np.asarray(array, dtype=aicc.numpy_dtype(type.element_type))
    if array.size and bool(np.all(array == array.flat[0])):
        return splat_constant(array.flat[0], type)
    return aicc.ConstantOp(aicc.dense_from_numpy(np.broadcast_to(array, type.get_shape()).copy()))
