"""The target-independent part of every pipeline: the context with aicc's dialects, the
tensor-level graph passes, cleanup, and the four shared stages (tensor, linalg, memref,
loops) into which a target slots its own passes (`StageHooks`).

A target assembles its pipeline as `shared_stages(fuse, hooks)` plus any stages of its own
(the cuda target appends "gpu"); see compiler/targets/.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, linalg, math, memref, scf, tensor
from xdsl.passes import ModulePass
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from compiler.dialects.aicc import AICC
from compiler.dialects.aicc_cpu import AICCCPU
from compiler.dialects.aicc_fused import AICC_FUSED
from compiler.dialects.gpu_map import GPUMap
from compiler.lowering.conv_lowering import WINOGRAD4_MIN_TILES
from compiler.lowering.bufferize import Bufferize
from compiler.lowering.fold_constants import FoldConstants
from compiler.lowering.fold_conv_bn import FoldConvBatchNorm
from compiler.lowering.forward_copies import ForwardCopies
from compiler.lowering.fuse_elementwise import FuseElementwise
from compiler.lowering.linalg_to_loops import LinalgToLoops
from compiler.lowering.plan_memory import PlanMemory
from compiler.lowering.quantize_matmul import QuantizeMatmul
from compiler.lowering.simplify import Simplify
from compiler.lowering.tensor_to_linalg import TensorToLinalg

DIALECTS = (builtin.Builtin, func.Func, arith.Arith, math.Math, tensor.Tensor, linalg.Linalg,
            memref.MemRef, scf.Scf, AICC, AICCCPU, AICC_FUSED, GPUMap)


def make_context() -> Context:
    ctx = Context()
    for d in DIALECTS:
        ctx.load_dialect(d)
    return ctx


def cleanup() -> list[ModulePass]:
    return [CanonicalizePass(), CommonSubexpressionElimination(), DeadCodeElimination()]


def graph_passes() -> list[ModulePass]:
    """The tensor-level graph passes every target runs, before its own and before cleanup.
    quantize-matmul comes first: folding would turn its dequantized weights back into floats.
    Simplify after folding sees the folded constants; fold-conv-bn (and a target's
    fuse-linear-bias), which rewrite an op only when it has one use, run after CSE, so that
    they never split a shared matmul or conv into two."""
    return [QuantizeMatmul(), FoldConstants(), Simplify(), CommonSubexpressionElimination(),
            FoldConvBatchNorm()]


@dataclass(frozen=True)
class StageHooks:
    """What a target adds to the shared stages, each list in pipeline order."""

    graph: tuple[ModulePass, ...] = ()  # after the shared graph passes, before cleanup
    tensor: tuple[ModulePass, ...] = ()  # after cleanup: the last of the tensor stage
    conv_bias: bool = True  # tensor-to-linalg starts a conv's accumulator from its bias
    conv_packed: bool = False  # the target lowers "packed" convs with a blocked kernel
    conv_vector_bits: int = 0  # its vector width, for the heuristic's Winograd choice
    conv_packed_1x1: str = "all"  # the packed kernel's rules kept for unstrided 1x1 convs
    conv_winograd4_min_tiles: int = WINOGRAD4_MIN_TILES  # F(4x4, 3x3) from this many 4x4 tiles
    linalg: tuple[ModulePass, ...] = ()  # after fuse-elementwise and cleanup
    memref: tuple[ModulePass, ...] = ()  # between bufferize and plan-memory
    # forward-copies' permuted_min_bytes: copies in another order forwarded above this size
    forward_permuted_min_bytes: int = 0
    loops: tuple[ModulePass, ...] = ()  # before linalg-to-loops
    transpose_tile: int = 0  # linalg-to-loops' block size for transposes (0: none)
    window_inner: bool = False  # linalg-to-loops' window-inner (small windows in registers)


def shared_stages(fuse: bool, hooks: StageHooks) -> list[tuple[str, list[ModulePass]]]:
    """The tensor, linalg, memref and loops stages, as (stage whose IR it produces, passes)."""
    return [
        ("tensor", [*graph_passes(), *hooks.graph, *cleanup(), *hooks.tensor]),
        ("linalg", [TensorToLinalg(conv_bias=hooks.conv_bias, conv_packed=hooks.conv_packed,
                                   conv_vector_bits=hooks.conv_vector_bits,
                                   conv_packed_1x1=hooks.conv_packed_1x1,
                                   conv_winograd4_min_tiles=hooks.conv_winograd4_min_tiles),
                    *([FuseElementwise()] if fuse else []), *cleanup(), *hooks.linalg]),
        ("memref", [Bufferize(), ForwardCopies(permuted_min_bytes=hooks.forward_permuted_min_bytes),
                    *hooks.memref, PlanMemory(workspace_arg=True)]),
        ("loops", [*hooks.loops, LinalgToLoops(transpose_tile=hooks.transpose_tile,
                                                   window_inner=hooks.window_inner),
                   CanonicalizePass(), CommonSubexpressionElimination()]),
    ]


__all__ = ["DIALECTS", "StageHooks", "cleanup", "graph_passes", "make_context", "shared_stages"]
