"""Neural-network ops of the `aicc` dialect that need their own lowering (they are registered
in the same `aicc` Dialect, see compiler/dialects/aicc.py).

    %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f64} : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
    %y = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x10x10xf32>, tensor<16x3x3x3xf32> -> tensor<1x16x8x8xf32>
    %t = aicc.conv_transpose2d %y, %w2 {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1>} : tensor<1x16x8x8xf32>, tensor<16x4x3x3xf32> -> tensor<1x4x15x15xf32>
    %m = aicc.pool2d %y {kind = "max", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x16x8x8xf32> -> tensor<1x16x4x4xf32>
    %c = aicc.concat %a, %b {axis = 1 : i64} : (tensor<1x2xf32>, tensor<1x3xf32>) -> tensor<1x5xf32>
    %s = aicc.slice %x {starts = array<i64: 0, 7>, steps = array<i64: 1, -2>} : tensor<4x8xf32> -> tensor<4x4xf32>
    %g = aicc.gather %table, %ids {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
    %e = aicc.gather_elements %x, %ids2 {axis = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
    %a = aicc.argmax %x {axis = 1 : i64, keepdims = true, select_last_index = false} : tensor<4x8xf32> -> tensor<4x1xi64>
    %s = aicc.cumsum %x {axis = 1 : i64, exclusive = false, reverse = true} : tensor<4x8xf32>
    %r = aicc.resample %x {axis = 1 : i64, indices = array<i64: 0, 0, 1, 1, ...>, weights = array<f64: ...>} : tensor<4x8xf32> -> tensor<4x16xf32>

Convolution and pooling take NCHW inputs that are already padded (frontends insert aicc.pad),
so their lowerings never test bounds. Shape inference is in the `*_shape` helpers, shared by
the builders, the verifiers and the frontends, like in aicc.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from compiler.symbolic import Sym
from compiler.dialects.shapes import (
    tensor_type,
    Shape,
    check_shape,
    fmt_shape,
    require_float,
    require_numeric,
    require_result,
    element_type_of,
    shape_of,
)


def int_values(attr: DenseArrayBase) -> tuple[int, ...]:
    return tuple(int(v) for v in attr.get_values())


def _arr(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


# -- shape helpers -------------------------------------------------------------------------------


def pad_shape(op: str, shape: Sequence[int], low: Sequence[int], high: Sequence[int]) -> Shape:
    if len(low) != len(shape) or len(high) != len(shape):
        raise ValueError(f"{op}: {len(shape)} pads expected on each side for {fmt_shape(shape)}")
    if any(p < 0 for p in (*low, *high)):
        raise ValueError(f"{op}: negative padding {tuple(low)} / {tuple(high)}")
    return tuple(d + lo + hi for d, lo, hi in zip(shape, low, high))


def window_out(op: str, size: int, k: int, stride: int, dilation: int) -> int:
    span = dilation * (k - 1) + 1
    if size < span:
        raise ValueError(f"{op}: window of {span} elements does not fit in a dim of size {size}")
    return (size - span) // stride + 1


def conv2d_shape(op: str, x: Sequence[int], w: Sequence[int], strides, dilations, groups: int) -> Shape:
    if len(x) != 4 or len(w) != 4:
        raise ValueError(f"{op}: expected NCHW input and OIHW weight, got {fmt_shape(x)} and {fmt_shape(w)}")
    if groups < 1 or x[1] % groups or w[0] % groups or x[1] // groups != w[1]:
        raise ValueError(
            f"{op}: input channels {x[1]}, weight {fmt_shape(w)} and groups {groups} do not agree"
        )
    oh = window_out(op, x[2], w[2], strides[0], dilations[0])
    ow = window_out(op, x[3], w[3], strides[1], dilations[1])
    return (x[0], w[0], oh, ow)


def pool2d_shape(op: str, x: Sequence[int], kernel, strides, dilations) -> Shape:
    if len(x) != 4:
        raise ValueError(f"{op}: expected an NCHW input, got {fmt_shape(x)}")
    return (x[0], x[1], *(window_out(op, x[2 + i], kernel[i], strides[i], dilations[i]) for i in range(2)))


def concat_shape(op: str, shapes: Sequence[Sequence[int]], axis: int) -> Shape:
    if not shapes:
        raise ValueError(f"{op}: no operands")
    rank = len(shapes[0])
    if not 0 <= axis < rank:
        raise ValueError(f"{op}: axis {axis} out of range for rank {rank}")
    for s in shapes:
        if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis):
            raise ValueError(f"{op}: shapes {', '.join(fmt_shape(s) for s in shapes)} differ off axis {axis}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out)


def _provably(question) -> bool:
    """A comparison of dims that holds for every value of their symbols (False when it does
    not, or depends on them)."""
    try:
        return bool(question())
    except ValueError:  # SymbolicError
        return False


def slice_check(op: str, shape: Sequence[int], starts, steps, out: Sequence[int]) -> Shape:
    if not len(shape) == len(starts) == len(steps) == len(out):
        raise ValueError(f"{op}: starts/steps/result rank differ from {fmt_shape(shape)}")
    for d, s, st, n in zip(shape, starts, steps, out):
        if isinstance(n, Sym) and n != d:
            # a symbolic count from a static dim (x[:, :seq]): the frontend bounds the symbol
            # (seq <= size - start), checked on every call
            if isinstance(d, Sym) or st != 1 or not 0 <= s < d:
                raise ValueError(f"{op}: a slice of {n} elements from {s} step {st} of a dim of size {d}")
            continue
        if isinstance(d, Sym):  # the whole dynamic dim, or a static count provably inside it
            if (n == d and s == 0 and st == 1) or (isinstance(n, int) and n > 0 and st > 0
                                                    and s >= 0 and _provably(lambda: d > s + (n - 1) * st)):
                continue
            raise ValueError(f"{op}: slice start {s} step {st} count {n} of a dynamic dim {d}")
        if st == 0 or n < 0 or (n > 0 and not (0 <= s < d and 0 <= s + (n - 1) * st < d)):
            raise ValueError(f"{op}: slice start {s} step {st} count {n} is outside a dim of size {d}")
    return tuple(out)


def gather_shape(op: str, data: Sequence[int], indices: Sequence[int], axis: int) -> Shape:
    if not 0 <= axis < len(data):
        raise ValueError(f"{op}: axis {axis} out of range for {fmt_shape(data)}")
    return (*data[:axis], *indices, *data[axis + 1:])


# -- ops -----------------------------------------------------------------------------------------


@irdl_op_definition
class PadOp(IRDLOperation):
    """Constant padding: `low[i]` / `high[i]` elements of `value` before / after dim i."""

    name = "aicc.pad"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    low = attr_def(DenseArrayBase)
    high = attr_def(DenseArrayBase)
    value = attr_def(FloatAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, low: Sequence[int], high: Sequence[int], value: float = 0.0):
        shape = pad_shape(self.name, shape_of(input), low, high)
        super().__init__(
            operands=[input],
            result_types=[tensor_type(element_type_of(input), shape)],
            attributes={"low": _arr(low), "high": _arr(high), "value": FloatAttr(float(value), f64)},
        )

    def verify_(self) -> None:
        shape = check_shape(pad_shape, self.name, shape_of(self.input), int_values(self.low), int_values(self.high))
        require_result(self, shape, element_type_of(self.input))


@irdl_op_definition
class Conv2dOp(IRDLOperation):
    """2-D convolution (cross-correlation), NCHW input, (OC, IC/groups, KH, KW) weight, no padding."""

    name = "aicc.conv2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    strides = attr_def(DenseArrayBase)
    dilations = attr_def(DenseArrayBase)
    groups = attr_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)"

    def __init__(self, input: SSAValue, weight: SSAValue, strides=(1, 1), dilations=(1, 1), groups: int = 1):
        shape = conv2d_shape(self.name, shape_of(input), shape_of(weight), strides, dilations, groups)
        super().__init__(
            operands=[input, weight],
            result_types=[tensor_type(element_type_of(input), shape)],
            attributes={"strides": _arr(strides), "dilations": _arr(dilations), "groups": IntegerAttr(groups, i64)},
        )

    def verify_(self) -> None:
        require_float(self, self.input, self.weight)
        shape = check_shape(conv2d_shape, self.name, shape_of(self.input), shape_of(self.weight),
                       int_values(self.strides), int_values(self.dilations), self.groups.value.data)
        require_result(self, shape, element_type_of(self.input))


def conv_transpose2d_check(op: str, x: Sequence[int], w: Sequence[int], out: Sequence[int], groups: int) -> Shape:
    if len(x) != 4 or len(w) != 4 or len(out) != 4:
        raise ValueError(f"{op}: expected NCHW input, (C, OC/groups, KH, KW) weight and NCHW result, "
                         f"got {fmt_shape(x)}, {fmt_shape(w)} and {fmt_shape(out)}")
    if groups < 1 or x[1] % groups or w[0] != x[1]:
        raise ValueError(f"{op}: input channels {x[1]}, weight {fmt_shape(w)} and groups {groups} do not agree")
    if out[0] != x[0] or out[1] != w[1] * groups or out[2] < 1 or out[3] < 1:
        raise ValueError(f"{op}: result {fmt_shape(out)} does not fit input {fmt_shape(x)}, weight {fmt_shape(w)}, groups {groups}")
    return tuple(out)


def conv_transpose_full(size: int, k: int, stride: int, dilation: int) -> int:
    """The length of a transposed convolution's output before any padding is cropped."""
    return (size - 1) * stride + dilation * (k - 1) + 1


@irdl_op_definition
class ConvTranspose2dOp(IRDLOperation):
    """Transposed 2-D convolution (the gradient of conv2d), NCHW input, (C, OC/groups, KH, KW)
    weight: input pixel (h, w) adds x * weight[kh, kw] to output position
    (h*sh + kh*dh - pads[0], w*sw + kw*dw - pads[1]); the result's spatial size (its type) keeps
    the positions that land in it, so end padding, output_padding and output_shape are all just
    the result size. `pads` may be negative (zeros in front)."""

    name = "aicc.conv_transpose2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    strides = attr_def(DenseArrayBase)
    dilations = attr_def(DenseArrayBase)
    groups = attr_def(IntegerAttr)
    pads = attr_def(DenseArrayBase)
    traits = traits_def(Pure())
    assembly_format = "$input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)"

    def __init__(self, input: SSAValue, weight: SSAValue, out_hw: Sequence[int], strides=(1, 1),
                 dilations=(1, 1), groups: int = 1, pads=(0, 0)):
        x, w = shape_of(input), shape_of(weight)
        out = (x[0], w[1] * groups, *out_hw) if len(x) == 4 and len(w) == 4 else tuple(out_hw)
        conv_transpose2d_check(self.name, x, w, out, groups)
        super().__init__(
            operands=[input, weight],
            result_types=[tensor_type(element_type_of(input), out)],
            attributes={"strides": _arr(strides), "dilations": _arr(dilations),
                        "groups": IntegerAttr(groups, i64), "pads": _arr(pads)},
        )

    def verify_(self) -> None:
        require_float(self, self.input, self.weight)
        if len(int_values(self.strides)) != 2 or len(int_values(self.dilations)) != 2 or len(int_values(self.pads)) != 2:
            raise VerifyException(f"{self.name}: strides, dilations and pads need 2 values each")
        if min(int_values(self.strides) + int_values(self.dilations)) < 1:
            raise VerifyException(f"{self.name}: strides and dilations must be positive")
        shape = check_shape(conv_transpose2d_check, self.name, shape_of(self.input), shape_of(self.weight),
                       shape_of(self.result), self.groups.value.data)
        require_result(self, shape, element_type_of(self.input))


POOL_KINDS = ("max", "sum")


@irdl_op_definition
class Pool2dOp(IRDLOperation):
    """Max or sum over 2-D windows of an NCHW input (average = sum / count, in the frontend)."""

    name = "aicc.pool2d"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    kind = attr_def(StringAttr)
    kernel = attr_def(DenseArrayBase)
    strides = attr_def(DenseArrayBase)
    dilations = attr_def(DenseArrayBase)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, kind: str, kernel, strides=(1, 1), dilations=(1, 1)):
        shape = pool2d_shape(self.name, shape_of(input), kernel, strides, dilations)
        super().__init__(
            operands=[input],
            result_types=[tensor_type(element_type_of(input), shape)],
            attributes={"kind": StringAttr(kind), "kernel": _arr(kernel), "strides": _arr(strides),
                        "dilations": _arr(dilations)},
        )

    def verify_(self) -> None:
        require_float(self, self.input)
        if self.kind.data not in POOL_KINDS:
            raise VerifyException(f"aicc.pool2d: kind must be one of {POOL_KINDS}, got \"{self.kind.data}\"")
        shape = check_shape(pool2d_shape, self.name, shape_of(self.input), int_values(self.kernel),
                       int_values(self.strides), int_values(self.dilations))
        require_result(self, shape, element_type_of(self.input))


@irdl_op_definition
class ConcatOp(IRDLOperation):
    name = "aicc.concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = attr_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$inputs attr-dict `:` `(` type($inputs) `)` `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        shape = concat_shape(self.name, [shape_of(v) for v in inputs], axis)
        super().__init__(
            operands=[list(inputs)],
            result_types=[tensor_type(element_type_of(inputs[0]), shape)],
            attributes={"axis": IntegerAttr(axis, i64)},
        )

    def verify_(self) -> None:
        elems = {element_type_of(v) for v in self.inputs}
        if len(elems) != 1:
            raise VerifyException("aicc.concat: operand element types differ")
        shape = check_shape(concat_shape, self.name, [shape_of(v) for v in self.inputs], self.axis.value.data)
        require_result(self, shape, element_type_of(self.inputs[0]))


@irdl_op_definition
class SliceOp(IRDLOperation):
    """Strided slice: result[i...] = input[starts + i * steps] (steps may be negative)."""

    name = "aicc.slice"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    starts = attr_def(DenseArrayBase)
    steps = attr_def(DenseArrayBase)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, starts: Sequence[int], steps: Sequence[int], shape: Sequence[int]):
        shape = slice_check(self.name, shape_of(input), starts, steps, shape)
        super().__init__(
            operands=[input],
            result_types=[tensor_type(element_type_of(input), shape)],
            attributes={"starts": _arr(starts), "steps": _arr(steps)},
        )

    def verify_(self) -> None:
        shape = check_shape(slice_check, self.name, shape_of(self.input), int_values(self.starts),
                       int_values(self.steps), shape_of(self.result))
        require_result(self, shape, element_type_of(self.input))


class _GatherBase(IRDLOperation):
    """data, integer indices and an axis; `SHAPE_FN(op, data, indices, axis)` gives the result
    shape (and raises ValueError naming the op)."""

    SHAPE_FN: ClassVar[Callable[[str, Sequence[int], Sequence[int], int], Shape]]

    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    axis = attr_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$data `,` $indices attr-dict `:` type($data) `,` type($indices) `->` type($result)"

    def __init__(self, data: SSAValue, indices: SSAValue, axis: int):
        shape = type(self).SHAPE_FN(self.name, shape_of(data), shape_of(indices), axis)
        super().__init__(
            operands=[data, indices],
            result_types=[tensor_type(element_type_of(data), shape)],
            attributes={"axis": IntegerAttr(axis, i64)},
        )

    def verify_(self) -> None:
        if not isinstance(element_type_of(self.indices), IntegerType):
            raise VerifyException(f"{self.name}: indices must be integers, got {self.indices.type}")
        shape = check_shape(type(self).SHAPE_FN, self.name, shape_of(self.data), shape_of(self.indices),
                       self.axis.value.data)
        require_result(self, shape, element_type_of(self.data))


@irdl_op_definition
class GatherOp(_GatherBase):
    """np.take(data, indices, axis); negative indices count from the end, as in ONNX."""

    name = "aicc.gather"
    SHAPE_FN = staticmethod(gather_shape)


def gather_elements_shape(op: str, data: Sequence[int], indices: Sequence[int], axis: int) -> Shape:
    if len(data) != len(indices) or not 0 <= axis < len(data):
        raise ValueError(f"{op}: data {fmt_shape(data)} and indices {fmt_shape(indices)} need the same rank, axis {axis}")
    if any(i > d for j, (d, i) in enumerate(zip(data, indices)) if j != axis):
        raise ValueError(f"{op}: indices {fmt_shape(indices)} exceed data {fmt_shape(data)} off axis {axis}")
    return tuple(indices)


@irdl_op_definition
class GatherElementsOp(_GatherBase):
    """np.take_along_axis: result[i] = data[i with i[axis] replaced by indices[i]]; the result
    has the indices' shape; negative indices count from the end, as in ONNX GatherElements."""

    name = "aicc.gather_elements"
    SHAPE_FN = staticmethod(gather_elements_shape)


def axis_check(op: str, shape: Sequence[int], axis: int) -> int:
    if not 0 <= axis < len(shape):
        raise ValueError(f"{op}: axis {axis} out of range for {fmt_shape(shape)}")
    if shape[axis] == 0:
        raise ValueError(f"{op}: axis {axis} of {fmt_shape(shape)} is empty")
    return axis


class ArgReduceOp(IRDLOperation):
    """The index (i64) of the largest / smallest element along `axis`: the first one, or the last
    one with `select_last_index`; NaN counts as the extreme value, as in np.argmax."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    axis = attr_def(IntegerAttr)
    keepdims = attr_def(BoolAttr)
    select_last_index = attr_def(BoolAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, axis: int, keepdims: bool = True, select_last_index: bool = False):
        shape = shape_of(input)
        axis_check(self.name, shape, axis)
        out = tuple(1 if i == axis else d for i, d in enumerate(shape) if keepdims or i != axis)
        super().__init__(
            operands=[input],
            result_types=[tensor_type(i64, out)],
            attributes={"axis": IntegerAttr(axis, i64), "keepdims": BoolAttr.from_bool(keepdims),
                        "select_last_index": BoolAttr.from_bool(select_last_index)},
        )

    @property
    def keep(self) -> bool:
        return bool(self.keepdims.value.data)

    @property
    def last(self) -> bool:
        return bool(self.select_last_index.value.data)

    def verify_(self) -> None:
        require_numeric(self, self.input)
        shape = shape_of(self.input)
        axis = check_shape(axis_check, self.name, shape, self.axis.value.data)
        out = tuple(1 if i == axis else d for i, d in enumerate(shape) if self.keep or i != axis)
        require_result(self, out, i64)


@irdl_op_definition
class ArgMaxOp(ArgReduceOp):
    name = "aicc.argmax"


@irdl_op_definition
class ArgMinOp(ArgReduceOp):
    name = "aicc.argmin"


@irdl_op_definition
class CumSumOp(IRDLOperation):
    """Cumulative sum along `axis`: result[i] = sum of input[j] for j <= i (j < i when
    `exclusive`; j >= i / j > i when `reverse`), as ONNX CumSum."""

    name = "aicc.cumsum"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    axis = attr_def(IntegerAttr)
    exclusive = attr_def(BoolAttr)
    reverse = attr_def(BoolAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, axis: int, exclusive: bool = False, reverse: bool = False):
        axis_check(self.name, shape_of(input), axis)
        super().__init__(
            operands=[input],
            result_types=[input.type],
            attributes={"axis": IntegerAttr(axis, i64), "exclusive": BoolAttr.from_bool(exclusive),
                        "reverse": BoolAttr.from_bool(reverse)},
        )

    def verify_(self) -> None:
        require_numeric(self, self.input)
        check_shape(axis_check, self.name, shape_of(self.input), self.axis.value.data)


def resample_check(op: str, shape: Sequence[int], out: Sequence[int], axis: int,
                   indices: Sequence[int], weights: Sequence[float] | None) -> Shape:
    if len(shape) != len(out) or not 0 <= axis < len(shape):
        raise ValueError(f"{op}: axis {axis} and result {fmt_shape(out)} do not fit the input {fmt_shape(shape)}")
    if any(a != b for i, (a, b) in enumerate(zip(shape, out)) if i != axis):
        raise ValueError(f"{op}: result {fmt_shape(out)} differs from the input {fmt_shape(shape)} off axis {axis}")
    n = out[axis]
    if n == 0 or not indices or len(indices) % n:
        raise ValueError(f"{op}: {len(indices)} indices are not a whole number of taps for {n} outputs")
    if any(not 0 <= i < shape[axis] for i in indices):
        raise ValueError(f"{op}: an index is outside [0, {shape[axis]})")
    if weights is None and len(indices) != n:
        raise ValueError(f"{op}: without weights there is one index per output")
    if weights is not None and len(weights) != len(indices):
        raise ValueError(f"{op}: {len(weights)} weights for {len(indices)} indices")
    return tuple(out)


@irdl_op_definition
class ResampleOp(IRDLOperation):
    """A fixed linear map along one axis: with T taps per output position o,

        result[.., o, ..] = sum over t of weights[o*T + t] * input[.., indices[o*T + t], ..]

    where taps of weight 0 are skipped (they contribute nothing, even against inf or NaN).
    Without weights it is a gather with constant indices (one per output, any element type).
    ONNX Resize / Upsample (every mode: one resample per resized axis, interpolation being
    separable) and Pad's reflect / edge / wrap modes are compositions of it.
    """

    name = "aicc.resample"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    axis = attr_def(IntegerAttr)
    indices = attr_def(DenseArrayBase)
    weights = opt_attr_def(DenseArrayBase)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, axis: int, indices, weights=None):
        """`indices` (and `weights`) of shape (outputs, taps) or (outputs,)."""
        idx = np.asarray(indices, dtype=np.int64)
        n = idx.shape[0] if idx.ndim else 0
        shape = list(shape_of(input))
        if not 0 <= axis < len(shape):
            raise ValueError(f"{self.name}: axis {axis} out of range for {fmt_shape(shape)}")
        shape[axis] = n
        w = None if weights is None else [float(v) for v in np.asarray(weights, np.float64).reshape(-1)]
        resample_check(self.name, shape_of(input), shape, axis, [int(i) for i in idx.reshape(-1)], w)
        attrs = {"axis": IntegerAttr(axis, i64), "indices": _arr(idx.reshape(-1))}
        if w is not None:
            attrs["weights"] = DenseArrayBase.from_list(f64, w)
        super().__init__(operands=[input], result_types=[tensor_type(element_type_of(input), shape)],
                         attributes=attrs)

    def tables(self):
        """(indices, weights or None), each of shape (outputs, taps)."""
        n = shape_of(self.result)[self.axis.value.data]
        idx = np.array(int_values(self.indices), dtype=np.int64).reshape(n, -1)
        if self.weights is None:
            return idx, None
        return idx, np.array(self.weights.get_values(), dtype=np.float64).reshape(n, -1)

    def verify_(self) -> None:
        w = None if self.weights is None else list(self.weights.get_values())
        if w is not None:
            require_float(self, self.input)
        shape = check_shape(resample_check, self.name, shape_of(self.input), shape_of(self.result),
                       self.axis.value.data, int_values(self.indices), w)
        require_result(self, shape, element_type_of(self.input))


NN_OPS = [ResampleOp, ConvTranspose2dOp, PadOp, Conv2dOp, Pool2dOp, ConcatOp, SliceOp, GatherOp, GatherElementsOp, ArgMaxOp,
          ArgMinOp, CumSumOp]
