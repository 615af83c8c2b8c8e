"""Quantization ops of the `aicc` dialect (registered in compiler/dialects/aicc.py).

    %q = aicc.quantize %x {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xf32> -> tensor<4x8xi8>
    %d = aicc.dequantize %w {scale = array<f64: 0.1, 0.2>, zero_point = array<i64: 0, 0>, axis = 0 : i64} : tensor<2x8xi8> -> tensor<2x8xf32>
    %a = aicc.matmul_integer %q, %w {lhs_zero_point = -3 : i64, transpose_rhs} : tensor<4x8xi8>, tensor<2x8xi8> -> tensor<4x2xi32>

int8 is signed (i8); a uint8 tensor of zero point z is the int8 tensor v - 128 of zero point
z - 128, so int8 serves both. `axis = -1` means one scale and zero point for the tensor;
otherwise one per index of that axis (per channel). quantize rounds half to even and
saturates to [-128, 127], as ONNX's QuantizeLinear; dequantize is (q - zero_point) * scale.
matmul_integer is ONNX's MatMulInteger on int8: (lhs - lhs_zero_point) @ rhs accumulated in
i32, the rhs symmetric (zero point 0) as aicc quantizes weights.

Dynamic quantization (parameters known only at run time, `compiler.quantize_dynamic` and ONNX's
DynamicQuantizeLinear):

    %p = aicc.dynamic_quant_params %x : tensor<4x8xf32> -> tensor<2xf32>
    %a = aicc.dynamic_matmul_integer %x, %w, %p : tensor<4x8xf32>, tensor<2x8xi8>, tensor<2xf32> -> tensor<4x2xi32>

dynamic_quant_params is DynamicQuantizeLinear's scale and zero point of x, [scale, zp]: with
lo = min(min(x), 0) and hi = max(max(x), 0), scale = (hi - lo) / 255 (1 when hi == lo) and
zp = rne(clamp(-lo / scale, 0, 255)) - 128, the uint8 zero point as aicc holds it (an int8
value, in float32), all in float32 as ONNX Runtime computes them. dynamic_matmul_integer
quantizes its float lhs with them (q = clamp(rne(x / scale) + zp, -128, 127), as quantize) and
returns (q - zp) @ rhs^T in i32, the rhs an int8 (N, K) matrix: a matmul_integer whose lhs
is quantized as it is read, so the int8 lhs is never stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, IntegerType, TensorType, UnitAttr, f64, i64
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, attr_def, irdl_op_definition, operand_def, opt_attr_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from compiler.dialects.shapes import (
    tensor_type,
    check_shape,
    element_type_of,
    fmt_shape,
    gemm_shape,
    require_float,
    require_result,
    shape_of,
)

I8 = IntegerType(8)
I32 = IntegerType(32)
QMIN, QMAX = -128, 127


def quant_params_check(op: str, shape: Sequence[int], scale: Sequence[float], zero_point: Sequence[int],
                       axis: int) -> None:
    n = 1 if axis == -1 else (shape[axis] if 0 <= axis < len(shape) else None)
    if n is None:
        raise ValueError(f"{op}: axis {axis} out of range for {fmt_shape(shape)}")
    if len(scale) != n or len(zero_point) != n:
        raise ValueError(f"{op}: {n} scale(s) and zero point(s) expected for axis {axis} of "
                         f"{fmt_shape(shape)}, got {len(scale)} and {len(zero_point)}")
    if any(not (s > 0 and np.isfinite(s)) for s in scale):
        raise ValueError(f"{op}: scales must be positive and finite, got {list(scale)}")
    if any(not QMIN <= z <= QMAX for z in zero_point):
        raise ValueError(f"{op}: zero points must be within [{QMIN}, {QMAX}], got {list(zero_point)}")


class _QuantBase(IRDLOperation):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    scale = attr_def(DenseArrayBase)
    zero_point = attr_def(DenseArrayBase)
    axis = attr_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, scale: Sequence[float], zero_point: Sequence[int], axis: int,
                 elem) -> None:
        shape = shape_of(input)
        axis = axis % len(shape) if axis != -1 and shape else axis
        quant_params_check(self.name, shape, [float(s) for s in scale], [int(z) for z in zero_point], axis)
        super().__init__(
            operands=[input], result_types=[tensor_type(elem, shape)],
            attributes={"scale": DenseArrayBase.from_list(f64, [float(s) for s in scale]),
                        "zero_point": DenseArrayBase.from_list(i64, [int(z) for z in zero_point]),
                        "axis": IntegerAttr(axis, i64)},
        )

    def per_tensor(self) -> tuple[float, int] | None:
        """(scale, zero point) when there is one of each (per tensor), else None."""
        scale, zp = self.scale.get_values(), self.zero_point.get_values()
        return (float(scale[0]), int(zp[0])) if len(scale) == 1 else None

    def params(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(scales, zero points, axis), the arrays shaped to broadcast against the input."""
        shape = shape_of(self.input)
        axis = self.axis.value.data
        scale = np.array(self.scale.get_values(), np.float64)
        zp = np.array(self.zero_point.get_values(), np.int64)
        if axis != -1:
            along = [1] * len(shape)
            along[axis] = -1
            scale, zp = scale.reshape(along), zp.reshape(along)
        return scale, zp, axis

    def _verify(self, src_ok, dst) -> None:
        check_shape(quant_params_check, self.name, shape_of(self.input), list(self.scale.get_values()),
                    [int(z) for z in self.zero_point.get_values()], self.axis.value.data)
        src_ok()
        require_result(self, shape_of(self.input), dst)


@irdl_op_definition
class QuantizeOp(_QuantBase):
    name = "aicc.quantize"

    def __init__(self, input: SSAValue, scale: Sequence[float], zero_point: Sequence[int], axis: int = -1):
        super().__init__(input, scale, zero_point, axis, I8)

    def verify_(self) -> None:
        self._verify(lambda: require_float(self, self.input), I8)


@irdl_op_definition
class DequantizeOp(_QuantBase):
    name = "aicc.dequantize"

    def __init__(self, input: SSAValue, scale: Sequence[float], zero_point: Sequence[int], axis: int = -1,
                 elem=None):
        from xdsl.dialects.builtin import f32

        super().__init__(input, scale, zero_point, axis, elem or f32)

    def verify_(self) -> None:
        def src_ok():
            if element_type_of(self.input) != I8:
                raise VerifyException(f"aicc.dequantize: expected a tensor of i8, got {self.input.type}")
        self._verify(src_ok, element_type_of(self.result))
        require_float(self, self.result)


@irdl_op_definition
class MatmulIntegerOp(IRDLOperation):
    """(lhs - lhs_zero_point) @ rhs on i8 operands, accumulated in i32 (rank >= 2, batch dims
    of the lhs only; `transpose_rhs` reads the rhs as (N, K))."""

    name = "aicc.matmul_integer"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    lhs_zero_point = attr_def(IntegerAttr)
    transpose_rhs = opt_attr_def(UnitAttr)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, lhs_zero_point: int = 0, transpose_rhs: bool = False):
        shape = self.shape(shape_of(lhs), shape_of(rhs), transpose_rhs)
        attrs = {"lhs_zero_point": IntegerAttr(int(lhs_zero_point), i64)}
        if transpose_rhs:
            attrs["transpose_rhs"] = UnitAttr()
        super().__init__(operands=[lhs, rhs], result_types=[tensor_type(I32, shape)], attributes=attrs)

    @staticmethod
    def shape(a: Sequence[int], b: Sequence[int], trans_rhs: bool):
        if len(b) != 2:
            raise ValueError(f"aicc.matmul_integer: the rhs must be 2-D, got {fmt_shape(b)}")
        return gemm_shape("aicc.matmul_integer", a, b, None, False, trans_rhs)

    @property
    def trans_rhs(self) -> bool:
        return self.transpose_rhs is not None

    def verify_(self) -> None:
        for v in (self.lhs, self.rhs):
            if element_type_of(v) != I8:
                raise VerifyException(f"aicc.matmul_integer: expected i8 operands, got {v.type}")
        if not QMIN <= self.lhs_zero_point.value.data <= QMAX:
            raise VerifyException(f"aicc.matmul_integer: lhs_zero_point {self.lhs_zero_point.value.data} "
                                  f"is not an int8")
        shape = check_shape(self.shape, shape_of(self.lhs), shape_of(self.rhs), self.trans_rhs)
        require_result(self, shape, I32)


@irdl_op_definition
class DynamicQuantParamsOp(IRDLOperation):
    """[scale, zero point] of a per-tensor uint8 quantization of x from its range (see the module)."""

    name = "aicc.dynamic_quant_params"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue):
        from xdsl.dialects.builtin import f32

        super().__init__(operands=[input], result_types=[tensor_type(f32, (2,))])

    def verify_(self) -> None:
        from xdsl.dialects.builtin import f32

        if element_type_of(self.input) != f32:
            raise VerifyException(f"aicc.dynamic_quant_params: expected a tensor of f32, got {self.input.type}")
        if any(isinstance(d, int) and d == 0 for d in shape_of(self.input)):
            raise VerifyException(f"aicc.dynamic_quant_params: expected a non-empty tensor, got {self.input.type}")
        require_result(self, (2,), f32)


@irdl_op_definition
class DynamicMatmulIntegerOp(IRDLOperation):
    """(quantize(lhs; params) - zp) @ rhs^T in i32: the float lhs (rank >= 2) quantized per
    tensor with the run-time [scale, zp] of `params` as it is read, the rhs int8 (N, K)."""

    name = "aicc.dynamic_matmul_integer"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    params = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = ("$lhs `,` $rhs `,` $params attr-dict `:` type($lhs) `,` type($rhs) `,` type($params) "
                       "`->` type($result)")

    def __init__(self, lhs: SSAValue, rhs: SSAValue, params: SSAValue):
        shape = self.shape(shape_of(lhs), shape_of(rhs))
        super().__init__(operands=[lhs, rhs, params], result_types=[tensor_type(I32, shape)])

    @staticmethod
    def shape(a: Sequence[int], b: Sequence[int]):
        if len(b) != 2 or len(a) < 2:
            raise ValueError(f"aicc.dynamic_matmul_integer: expected an lhs of rank >= 2 and a 2-D rhs, got "
                             f"{fmt_shape(a)} and {fmt_shape(b)}")
        return gemm_shape("aicc.dynamic_matmul_integer", a, b, None, False, True)

    def verify_(self) -> None:
        from xdsl.dialects.builtin import f32

        if element_type_of(self.lhs) != f32 or element_type_of(self.rhs) != I8:
            raise VerifyException(f"aicc.dynamic_matmul_integer: expected an f32 lhs and an i8 rhs, got "
                                  f"{self.lhs.type} and {self.rhs.type}")
        if element_type_of(self.params) != f32 or shape_of(self.params) != (2,):
            raise VerifyException(f"aicc.dynamic_matmul_integer: params must be a tensor<2xf32>, got "
                                  f"{self.params.type}")
        shape = check_shape(self.shape, shape_of(self.lhs), shape_of(self.rhs))
        require_result(self, shape, I32)


QUANT_OPS = [QuantizeOp, DequantizeOp, MatmulIntegerOp, DynamicQuantParamsOp, DynamicMatmulIntegerOp]
