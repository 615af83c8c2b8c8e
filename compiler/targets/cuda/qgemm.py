"""lower-qgemm-gpu: an int8 matmul generic becomes one `gpu_map.qgemm`, the CUDA dp4a kernel.

    linalg.fill ins(%c0 : i32) outs(%c : memref<7x5xi32>)
    linalg.generic {aicc.qgemm = -3 : i64} ins(%a, %b : memref<7x129xi8>, memref<5x129xi8>)
                                           outs(%c : memref<7x5xi32>)      // i32 dot products
  ==>
    gpu_map.qgemm %a, %b, %c {zp = -3 : i64} : memref<7x129xi8>, memref<5x129xi8>, memref<7x5xi32>

matmul_integer's lowering (compiler/lowering/quant_to_linalg.py) marks its generic with the
lhs zero point when the rhs is read as (N, K); dynamic_matmul_integer's (`aicc.qgemm_dynamic`,
a float lhs and its run-time [scale, zero point]) becomes `gpu_map.qgemm ... quantize %params`.
map-to-gpu gives the op a kernel of its own ("qgemm"), which compiler/codegen/cuda/qgemm.py
writes with `__dp4a`. The kernel stores every element of C, so the fill before it goes. A
generic with dynamic dims (which the int8 ops refuse today, before this pass) would stay a loop
nest (a thread per element of C, its k loop in int32).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.dialects.linalg import ops as linalg
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.gpu_map import QGemmOp
from compiler.lowering.quant_to_linalg import QGEMM_ATTR, QGEMM_DYNAMIC_ATTR


def _lower(op: linalg.GenericOp) -> None:
    dynamic = QGEMM_DYNAMIC_ATTR in op.attributes
    a, b, *params = op.inputs
    (c,) = op.outputs
    values = (a, b, c, *params)
    if not all(isinstance(v.type, MemRefType) for v in values) \
            or any(d < 0 for v in values for d in v.type.get_shape()):
        return  # tensors (not bufferized) or dynamic dims: the generic loop nest stays
    zp = op.attributes[QGEMM_ATTR].value.data
    fill = op.prev_op
    Rewriter.insert_op(QGemmOp(a, b, c, zp, params[0] if dynamic else None), InsertPoint.before(op))
    if isinstance(fill, linalg.FillOp) and tuple(fill.outputs) == (c,):  # the kernel stores every C
        Rewriter.erase_op(fill)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class LowerQGemmGpu(ModulePass):
    """Replace marked int8 matmul generics (on memrefs) by gpu_map.qgemm ops."""

    name = "lower-qgemm-gpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for g in [o for o in op.walk() if isinstance(o, linalg.GenericOp) and QGEMM_ATTR in o.attributes]:
            _lower(g)
