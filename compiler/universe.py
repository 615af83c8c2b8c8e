"""aicc's dialects and passes for xDSL's plugin discovery (`xdsl-opt` and `aicc-opt` see them)."""

from xdsl.universe import Universe


def _aicc_dialect():
    from compiler.dialects.aicc import AICC

    return AICC


def _pass(module: str, cls: str):
    def load():
        import importlib

        return getattr(importlib.import_module(f"compiler.lowering.{module}"), cls)

    return load


AICC_PASSES = {
    "fold-constants": _pass("fold_constants", "FoldConstants"),
    "simplify": _pass("simplify", "Simplify"),
    "fold-conv-bn": _pass("fold_conv_bn", "FoldConvBatchNorm"),
    "fuse-linear-bias": _pass("fuse_linear_bias", "FuseLinearBias"),
    "fuse-attention": _pass("fuse_attention", "FuseAttention"),
    "tensor-to-linalg": _pass("tensor_to_linalg", "TensorToLinalg"),
    "fuse-elementwise": _pass("fuse_elementwise", "FuseElementwise"),
    "bufferize": _pass("bufferize", "Bufferize"),
    "fuse-rows": _pass("fuse_rows", "FuseRows"),
    "plan-memory": _pass("plan_memory", "PlanMemory"),
    "lower-attention": _pass("lower_attention", "LowerAttention"),
    "linalg-to-loops": _pass("linalg_to_loops", "LinalgToLoops"),
    "choose-schedule": _pass("choose_schedule", "ChooseSchedule"),
    "tile-matmul": _pass("tile_matmul", "TileMatmul"),
    "map-to-gpu": _pass("map_to_gpu", "MapToGpu"),
}

def _aicc_fused_dialect():
    from compiler.dialects.aicc_fused import AICC_FUSED

    return AICC_FUSED


def _gpu_map_dialect():
    from compiler.dialects.gpu_map import GPUMap

    return GPUMap


def _aicc_cpu_dialect():
    from compiler.dialects.aicc_cpu import AICCCPU

    return AICCCPU


AICC_UNIVERSE = Universe(
    all_dialects={"aicc": _aicc_dialect, "aicc_fused": _aicc_fused_dialect,
                  "gpu_map": _gpu_map_dialect, "aicc_cpu": _aicc_cpu_dialect},
    all_passes=AICC_PASSES,
)
