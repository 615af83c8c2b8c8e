"""ONNX QuantizeLinear / DequantizeLinear (QDQ models, as onnxruntime's quantize_static writes
them) onto aicc's quantize / dequantize.

aicc's int8 is signed. A uint8 tensor v of zero point z is held as the int8 tensor v - 128 of
zero point z - 128: quantize(x) = clamp(round(x / s) + z, 0, 255) - 128
= clamp(round(x / s) + (z - 128), -128, 127), and dequantize reads (v - 128) - (z - 128) = v - z,
so the shift is exact; the zero point's element type says which kind a node has. The
`quantize-matmul` pass then turns DequantizeLinear -> MatMul <- DequantizeLinear(weights)
into an int8 matmul. Values that leave the graph in (u)int8 are refused (aicc computes and
returns float, int and bool tensors).
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc
from compiler.dialects.aicc_quant import DequantizeOp, QuantizeOp
from frontends.onnx_common import const, is_uint8, set_int8_kind, unsupported
from frontends.registry import HandlerTable

HANDLERS = HandlerTable()
handles = HANDLERS.handles

# initializers of these types are read for the quantization ops (see onnx_import._tensor_to_numpy)
QUANT_DTYPES = {3: np.int8, 2: np.uint8}


def _params(imp, node, ins, at, shape):
    """(scales, int8 zero points, axis or -1, whether the node's integers are uint8)."""
    if at.get("block_size", 0):
        raise unsupported(imp, node, "blocked quantization (block_size)")
    scale = np.asarray(const(imp, node, ins[1], "scale"), np.float64).reshape(-1)
    zp_in = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if zp_in is None:
        if node.op_type == "DequantizeLinear":  # the input's type
            unsigned = is_uint8(imp, node, ins[0]) if not (isinstance(ins[0], np.ndarray)
                                                           and ins[0].dtype == np.int32) else False
        else:
            out_type = at.get("output_dtype", 0)
            if out_type not in (0, 2, 3):
                raise unsupported(imp, node, f"output_dtype {out_type} (int8 and uint8 are)")
            unsigned = out_type in (0, 2)  # ONNX's default without a zero point is uint8
        zp = np.zeros(scale.shape, np.int64)
    else:
        zp_arr = const(imp, node, zp_in, "zero point")
        if zp_arr.dtype not in (np.int8, np.uint8):
            raise unsupported(imp, node, f"a {zp_arr.dtype} zero point (int8 and uint8 are)")
        unsigned = zp_arr.dtype == np.uint8
        zp = np.asarray(zp_arr, np.int64).reshape(-1)
    if unsigned:
        zp = zp - 128
    if scale.size == 1:
        axis = -1
    else:
        axis = int(at.get("axis", 1)) % len(shape)
    zp = np.broadcast_to(zp, scale.shape)
    return scale, zp, axis, unsigned


@handles("QuantizeLinear")
def _quantize(imp, node, ins, at):
    g, x = imp.g, ins[0]
    if at.get("saturate", 1) != 1:
        raise unsupported(imp, node, "saturate = 0")
    scale, zp, axis, unsigned = _params(imp, node, ins, at, g.shape(x))
    x = g.cast(x, np.float32)
    q = g.emit(lambda v: QuantizeOp(v, list(scale), list(zp), axis), x, fold=False)
    return [set_int8_kind(imp, q, unsigned)]


@handles("DequantizeLinear")
def _dequantize(imp, node, ins, at):
    g, q = imp.g, ins[0]
    if isinstance(q, np.ndarray) and q.dtype == np.int32:  # a bias quantized to int32: fold it
        scale = np.asarray(const(imp, node, ins[1], "scale"), np.float32)
        zp = const(imp, node, ins[2], "zero point") if len(ins) > 2 and ins[2] is not None else 0
        axis = int(at.get("axis", 1)) % max(q.ndim, 1) if scale.size > 1 else None
        if axis is not None:
            shape = [1] * q.ndim
            shape[axis] = -1
            scale = scale.reshape(shape)
            zp = np.asarray(zp).reshape(shape) if np.size(zp) > 1 else zp
        return [((q.astype(np.int64) - np.asarray(zp, np.int64)) * scale).astype(np.float32)]
    scale, zp, axis, unsigned = _params(imp, node, ins, at, g.shape(q))
    if isinstance(q, np.ndarray):  # a quantized initializer (weights)
        if q.dtype not in (np.int8, np.uint8):
            raise unsupported(imp, node, f"dequantizing a {q.dtype} tensor (int8 and uint8 are)")
        q = (q.astype(np.int16) - 128).astype(np.int8) if q.dtype == np.uint8 else q
        q = imp.g.ssa(q)
    elif g.dtype(q) != np.int8:
        raise unsupported(imp, node, f"dequantizing a {g.dtype(q)} tensor (int8 and uint8 are)")
    return [g.emit(lambda v: DequantizeOp(v, list(scale), list(zp), axis), q, fold=False)]


__all__ = ["HANDLERS", "QUANT_DTYPES", "aicc"]
