"""aicc's dialects and passes for xDSL's plugin discovery (`xdsl-opt` and `aicc-opt` see them):
the shared passes by name, and each registered target's own (compiler/targets)."""

from xdsl.universe import Universe


def _dialect(module: str, name: str):
    def load():
        import importlib

        return getattr(importlib.import_module(f"compiler.dialects.{module}"), name)

    return load


def _pass(module: str, cls: str):
    def load():
        import importlib

        return getattr(importlib.import_module(f"compiler.lowering.{module}"), cls)

    return load


SHARED_PASSES = {
    "autodiff": _pass("autodiff", "ReverseModeAD"),
    "fold-constants": _pass("fold_constants", "FoldConstants"),
    "quantize-matmul": _pass("quantize_matmul", "QuantizeMatmul"),
    "dynamic-quantize-matmul": _pass("dynamic_quantize", "DynamicQuantizeMatmul"),
    "simplify": _pass("simplify", "Simplify"),
    "fold-conv-bn": _pass("fold_conv_bn", "FoldConvBatchNorm"),
    "fuse-linear-bias": _pass("fuse_linear_bias", "FuseLinearBias"),
    "fold-conv-input-scale": _pass("fold_conv_input_scale", "FoldConvInputScale"),
    "fuse-attention": _pass("fuse_attention", "FuseAttention"),
    "tensor-to-linalg": _pass("tensor_to_linalg", "TensorToLinalg"),
    "fuse-elementwise": _pass("fuse_elementwise", "FuseElementwise"),
    "bufferize": _pass("bufferize", "Bufferize"),
    "forward-copies": _pass("forward_copies", "ForwardCopies"),
    "plan-memory": _pass("plan_memory", "PlanMemory"),
    "collapse-dims": _pass("collapse_dims", "CollapseDims"),
    "fill-border": _pass("fill_border", "FillBorder"),
    "linalg-to-loops": _pass("linalg_to_loops", "LinalgToLoops"),
}


def _target_pass(target: str, name: str):
    def load():
        from compiler.targets import get_target

        return get_target(target).passes()[name]()

    return load


def target_passes() -> dict:
    """Pass name -> loader, over every registered target (the first target to name a pass wins).
    Loading a target's object is cheap: its passes import when loaded."""
    from compiler.targets import available_targets, get_target

    found: dict = {}
    for target in available_targets():
        try:
            names = get_target(target).passes()
        except Exception:  # noqa: BLE001 - a broken third-party target must not break aicc-opt
            continue
        for name in names:
            found.setdefault(name, _target_pass(target, name))
    return found


AICC_PASSES = {**SHARED_PASSES, **target_passes()}

AICC_UNIVERSE = Universe(
    all_dialects={"aicc": _dialect("aicc", "AICC"),
                  "aicc_fused": _dialect("aicc_fused", "AICC_FUSED"),
                  "gpu_map": _dialect("gpu_map", "GPUMap"),
                  "aicc_cpu": _dialect("aicc_cpu", "AICCCPU")},
    all_passes=AICC_PASSES,
)
