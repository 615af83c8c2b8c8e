"""Per-model statistics (`CompiledModel.stats`, `aicc MODEL --stats`), read off the IR.

Counted on the memref stage, after fusion, bufferization and plan-memory, where each linalg op
is exactly one loop nest that linalg-to-loops will emit (one GPU kernel under map-to-gpu), and
each loop nest that a fusion pass already emitted carries `aicc.kernel = "<kind>"`
(fuse-rows' "rows"):

    kernels             linalg ops (generic, matmul, fill, ...) and fused nests: loop nests the
                        program runs; a matmul that tile-matmul (CPU) already tiled counts as
                        one, its zero fill or bias copy folded into it
    kernel_ops          those counts per op name (a fused nest by its kind, e.g. "rows"; a
                        tiled matmul by the linalg op it replaced)
    copies              memref.copy ops that bufferize inserted (memcpy, not counted as kernels)
    flops               sum over linalg ops of (iteration-space size) x (floating-point ops in
                        the scalar body): 2*M*N*K for an MxK @ KxN matmul; for a fused nest,
                        each float op times the trip counts of the loops around it. Every arith float op
                        and math op counts 1 (exp, erf, tanh too); compares, selects, casts and
                        the zero fill count 0.
    intermediate_bytes  the workspace arena that plan-memory sizes (bytes of temporaries live
                        at once, after reusing memory by liveness), plus any temporary it did
                        not place
    intermediate_bytes_before_reuse
                        the sum of every temporary's own size, as if none shared memory
    intermediate_buffers
                        the number of temporaries

and on the tensor stage, after the graph passes:

    tensor_ops          aicc ops per op name (constants excluded)
    quantized_ops       the int8 matmuls and convolutions (ops marked `aicc.quantized` by
                        quantize-matmul, quantize_dynamic and compiler.quantize)
"""

from __future__ import annotations

from collections import Counter

from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import AnyFloat, MemRefType, ModuleOp, ShapedType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Operation
from xdsl.ir.affine import AffineDimExpr

from compiler.lowering.plan_memory import WORKSPACE_ATTR, byte_size

NOT_FLOPS = (arith.ConstantOp, arith.SelectOp, arith.CmpfOp, arith.ExtFOp, arith.TruncFOp,
             arith.SIToFPOp, arith.UIToFPOp, arith.FPToSIOp, arith.BitcastOp)


def is_flop(op: Operation) -> bool:
    """A floating-point arithmetic op of a scalar body."""
    if isinstance(op, NOT_FLOPS) or op.dialect_name() not in ("arith", "math"):
        return False
    return any(isinstance(r.type, AnyFloat) for r in op.results)


def iteration_space(op: LinalgStructuredOperation) -> int:
    """The number of points of the op's loop nest (product of its loop ranges)."""
    maps = [m.data for m in op.get_indexing_maps()]
    ranges: dict[int, int] = {}
    for value, m in zip(op.operands, maps):
        if isinstance(value.type, ShapedType):
            for size, expr in zip(value.type.get_shape(), m.results):
                if isinstance(expr, AffineDimExpr) and size >= 0:  # a dynamic dim counts 1
                    ranges.setdefault(expr.position, size)
    points = 1
    for d in range(op.get_num_loops()):
        points *= ranges.get(d, 1)
    return points


def flops(op: LinalgStructuredOperation) -> int:
    body_flops = sum(1 for o in op.body.walk() if is_flop(o))
    return iteration_space(op) * body_flops


KERNEL_ATTR = "aicc.kernel"  # on a loop nest a fusion pass emitted: its kind
# On the outermost tile loop of a tiled matmul: {op = "matmul", flops = 2*M*N*K*batch}, the
# linalg op it replaced (without the dialect prefix: the loop IR holds no linalg), so that
# statistics that count linalg ops count it.
TILED_ATTR = "aicc.tiled"


def _const_index(v) -> int | None:
    owner = getattr(v, "owner", None)
    if isinstance(owner, arith.ConstantOp) and hasattr(owner.value, "value"):
        return owner.value.value.data
    return None


def _trips(lbs, ubs, steps) -> int:
    n = 1
    for lb, ub, st in zip(lbs, ubs, steps):
        lo, hi, s = _const_index(lb), _const_index(ub), _const_index(st)
        if hi is None and lo is not None and s:
            continue  # a dynamic bound (a dim of a dynamic shape): counted once, per unit
        if lo is None or hi is None or not s:
            raise ValueError("loop bounds are not constants")
        n *= max(0, -(-(hi - lo) // s))
    return n


def loop_flops(op: Operation) -> int:
    """Float ops an op executes, counting each op inside loops once per iteration."""
    if is_flop(op):
        return 1
    inner = sum(loop_flops(o) for r in op.regions for b in r.blocks for o in b.ops)
    if isinstance(op, scf.ForOp):
        return inner * _trips([op.lb], [op.ub], [op.step])
    if isinstance(op, scf.ParallelOp):
        return inner * _trips(op.lowerBound, op.upperBound, op.step)
    return inner


def _linalg_ops(module: ModuleOp) -> list[LinalgStructuredOperation]:
    return [o for o in module.walk() if isinstance(o, LinalgStructuredOperation)
            and not isinstance(o.parent_op(), LinalgStructuredOperation)]


def _fused_nests(module: ModuleOp) -> list[Operation]:
    tiled = TILED_ATTR
    return [o for o in module.walk() if KERNEL_ATTR in o.attributes or tiled in o.attributes]


def _kernel_name(op: Operation) -> str:
    tiled = op.attributes.get(TILED_ATTR)
    if tiled is not None:
        return "linalg." + tiled.data["op"].data
    return op.attributes[KERNEL_ATTR].data if KERNEL_ATTR in op.attributes else op.name


def _kernel_flops(op: Operation) -> int:
    tiled = op.attributes.get(TILED_ATTR)
    if tiled is not None:  # its bounds are not all constants: tile-matmul recorded them
        return tiled.data["flops"].value.data
    if isinstance(op, LinalgStructuredOperation):
        own = getattr(op, "flop_count", None)  # an op whose body is not its semantics
        return own() if own is not None else flops(op)
    return loop_flops(op)


def memref_stats(module: ModuleOp) -> dict:
    """Kernels, flops and temporaries of a module at the memref stage."""
    kernels = _linalg_ops(module) + _fused_nests(module)
    fns = [o for o in module.ops if isinstance(o, func.FuncOp)]
    views = [o for o in module.walk() if isinstance(o, memref.ViewOp)]
    arenas = {v.source for v in views}  # plan-memory's arena: an argument or one alloc
    allocs = [o.memref for o in module.walk() if isinstance(o, memref.AllocOp) and o.memref not in arenas]
    temps = [v.result for v in views] + allocs
    arena = sum(f.attributes[WORKSPACE_ATTR].value.data for f in fns if WORKSPACE_ATTR in f.attributes)
    arena += sum(byte_size(a.type) for a in arenas if isinstance(a.owner, memref.AllocOp))
    unplanned = sum(byte_size(a.type) for a in allocs if isinstance(a.type, MemRefType))
    return {
        "kernels": len(kernels),
        "kernel_ops": dict(sorted(Counter(_kernel_name(o) for o in kernels).items())),
        "copies": sum(1 for o in module.walk() if isinstance(o, memref.CopyOp)),
        "flops": sum(_kernel_flops(o) for o in kernels),
        "intermediate_bytes": arena + unplanned,
        "intermediate_bytes_before_reuse": sum(byte_size(t.type) for t in temps if isinstance(t.type, MemRefType)),
        "intermediate_buffers": len(temps),
    }


def tensor_stats(module: ModuleOp) -> dict:
    """aicc ops per name at the tensor stage."""
    ops = Counter(o.name for o in module.walk()
                  if o.dialect_name() in ("aicc", "aicc_fused") and o.name != "aicc.constant")
    quantized = sum(1 for o in module.walk() if "aicc.quantized" in o.attributes)
    return {"tensor_ops": dict(sorted(ops.items())), "quantized_ops": quantized}


def linalg_stats(module: ModuleOp) -> dict:
    """Matmuls whose schedule came from a tuning record (choose-schedule marks them)."""
    return {"tuned": sum(1 for o in module.walk() if "aicc.tuned" in o.attributes)}


STAGE_STATS = {"tensor": tensor_stats, "linalg": linalg_stats, "memref": memref_stats}


def stage_stats(stage: str, module: ModuleOp) -> dict:
    """The statistics read at `stage` (empty for stages that give none)."""
    fn = STAGE_STATS.get(stage)
    return fn(module) if fn else {}


__all__ = ["format_stats", "linalg_stats", "memref_stats", "tensor_stats", "stage_stats", "flops", "iteration_space",
           "loop_flops"]


def format_stats(stats: dict) -> str:
    """The statistics as the lines `aicc --stats` prints."""
    def kinds(counts: dict) -> str:
        return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"

    head = "stats (fused):" if stats.get("fused", True) else "stats (not fused, --no-fuse):"
    return "\n".join([
        head,
        f"  kernels             {stats['kernels']:>14,}  ({kinds(stats['kernel_ops'])})",
        f"  flops               {stats['flops']:>14,}",
        f"  intermediate bytes  {stats['intermediate_bytes']:>14,}  (arena, reused by liveness; "
        f"{stats['intermediate_bytes_before_reuse']:,} before reuse, "
        f"{stats['intermediate_buffers']} buffers)",
        f"  copies              {stats['copies']:>14,}",
        f"  tensor ops          {kinds(stats.get('tensor_ops', {}))}",
    ])
