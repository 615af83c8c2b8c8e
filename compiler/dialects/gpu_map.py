"""The `gpu_map` dialect: how a loop nest is mapped onto a CUDA grid.

`map-to-gpu` wraps every top-level loop nest of a loop-IR function in one `gpu_map.kernel`.
The body keeps the loop IR unchanged (an `scf.parallel` band, or straight-line code for a
single-thread kernel); the attributes say how `CudaEmitter` maps it:

    gpu_map.kernel @model_k2 "row_reduce" {grid = array<i64: 256>, block = array<i64: 256>} {
      "scf.parallel"(...) ({ ... scf.for ... iter_args ... })
    }

kind         how the band is mapped
elementwise  band flattened over `grid` x `block` threads, one point per thread, guarded
row_reduce   one block per band point; the inner scf.for with one iter_arg is strided over the
             block's threads and combined with warp shuffles + shared memory
matmul       C[i,j] += A[i,k] B[k,j] tiled through shared memory: `tile` = [BM, BN, BK],
             `block` threads each computing a (BM/block[1]) x (BN/block[0]) register tile
single       straight-line code outside any scf.parallel: one thread

The region may use values defined above it (memrefs, constants): the emitter turns the memrefs
into kernel parameters and folds the constants.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, StringAttr, i64
from xdsl.ir import Dialect, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

KINDS = ("elementwise", "row_reduce", "matmul", "single")


@irdl_op_definition
class KernelOp(IRDLOperation):
    name = "gpu_map.kernel"

    sym_name = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    tile = opt_prop_def(DenseArrayBase)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$sym_name $kind attr-dict-with-keyword $body"

    def __init__(self, name: str, kind: str, grid, block, body: Region, tile=None):
        props = {
            "sym_name": StringAttr(name),
            "kind": StringAttr(kind),
            "grid": DenseArrayBase.from_list(i64, list(grid)),
            "block": DenseArrayBase.from_list(i64, list(block)),
        }
        if tile is not None:
            props["tile"] = DenseArrayBase.from_list(i64, list(tile))
        super().__init__(properties=props, regions=[body])

    def verify_(self) -> None:
        if self.kind.data not in KINDS:
            raise VerifyException(
                f"gpu_map.kernel: kind '{self.kind.data}' is not one of {', '.join(KINDS)}")
        for what in ("grid", "block"):
            dims = getattr(self, what).get_values()
            if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
                raise VerifyException(f"gpu_map.kernel: {what} must be 1 to 3 positive sizes")
        if self.kind.data == "matmul" and (self.tile is None or len(self.tile.get_values()) != 3):
            raise VerifyException("gpu_map.kernel: a matmul kernel needs tile = [BM, BN, BK]")

    @property
    def grid_dims(self) -> tuple[int, ...]:
        return tuple(self.grid.get_values())

    @property
    def block_dims(self) -> tuple[int, ...]:
        return tuple(self.block.get_values())

    @property
    def tile_dims(self) -> tuple[int, ...] | None:
        return tuple(self.tile.get_values()) if self.tile is not None else None


GPUMap = Dialect("gpu_map", [KernelOp], [])


# ------------------------------------------------------------------------------------------
# Structural queries on loop IR, shared by map-to-gpu (to choose a kind) and CudaEmitter (to
# emit it): both must agree on what a row reduction and a matmul look like.
# ------------------------------------------------------------------------------------------

from dataclasses import dataclass  # noqa: E402

from xdsl.dialects import arith, builtin, memref, scf  # noqa: E402
from xdsl.ir import Operation, OpResult, SSAValue  # noqa: E402

# combiner -> (C expression template, identity as a C literal for f32/f64)
COMBINERS: dict[str, tuple[str, str]] = {
    "arith.addf": ("({a} + {b})", "0"),
    "arith.mulf": ("({a} * {b})", "1"),
    "arith.maximumf": ("fmaxf({a}, {b})", "-INFINITY"),
    "arith.maxnumf": ("fmaxf({a}, {b})", "-INFINITY"),
    "arith.minimumf": ("fminf({a}, {b})", "INFINITY"),
    "arith.minnumf": ("fminf({a}, {b})", "INFINITY"),
}
_PURE_PREFIXES = ("arith.", "math.")


def const_int(v: SSAValue) -> int | None:
    if isinstance(v, OpResult) and isinstance(v.op, arith.ConstantOp):
        attr = v.op.value
        if isinstance(attr, builtin.IntegerAttr):
            return attr.value.data
    return None


def band_ranges(par: scf.ParallelOp) -> list[tuple[int, int, int]] | None:
    """(lb, ub, step) of each dim of the band, when all are constants."""
    out = []
    for lb, ub, st in zip(par.lowerBound, par.upperBound, par.step):
        vals = (const_int(lb), const_int(ub), const_int(st))
        if any(v is None for v in vals) or vals[2] <= 0:
            return None
        out.append(vals)  # type: ignore[arg-type]
    return out


def _body_ops(block) -> list[Operation]:
    return [o for o in block.ops if not isinstance(o, scf.ReduceOp | scf.YieldOp)]


@dataclass
class RowReduce:
    loop: scf.ForOp
    combiner: Operation  # the op combining the iter_arg with one element


def match_row_reduce(par: scf.ParallelOp) -> RowReduce | None:
    """band { pure pre-ops; r = scf.for iter_args(acc) { pure; acc' = combine(acc, v) }; post }"""
    if band_ranges(par) is None:
        return None
    ops = _body_ops(par.body.block)
    loops = [o for o in ops if isinstance(o, scf.ForOp)]
    if len(loops) != 1 or any(o.regions for o in ops if o is not loops[0]):
        return None
    loop = loops[0]
    for o in ops[: ops.index(loop)]:
        if not (o.name.startswith(_PURE_PREFIXES) or isinstance(o, memref.LoadOp)):
            return None
    if len(loop.iter_args) != 1 or None in (const_int(loop.lb), const_int(loop.ub), const_int(loop.step)):
        return None
    if not isinstance(loop.iter_args[0].type, builtin.Float32Type | builtin.Float64Type):
        return None
    inner = list(loop.body.block.ops)
    for o in inner[:-1]:
        if o.regions or not (o.name.startswith(_PURE_PREFIXES) or isinstance(o, memref.LoadOp)):
            return None
    acc = loop.body.block.args[1]
    yielded = inner[-1].operands[0]
    if not isinstance(yielded, OpResult) or yielded.op.name not in COMBINERS:
        return None
    comb = yielded.op
    if len(list(acc.uses)) != 1 or acc not in comb.operands or comb.operands[0] is comb.operands[1]:
        return None
    return RowReduce(loop, comb)


@dataclass
class Matmul:
    a: SSAValue
    b: SSAValue
    c: SSAValue
    m: int
    n: int
    k: int


def _unit_loop(lb, ub, step) -> int | None:
    if const_int(lb) == 0 and const_int(step) == 1:
        return const_int(ub)
    return None


def _match_mac(ops, acc_in, i, j, k) -> tuple[SSAValue, SSAValue, OpResult] | None:
    """loads A[i,k], B[k,j]; s = (A*B) + acc_in  ->  (A, B, s)"""
    loads = [o for o in ops if isinstance(o, memref.LoadOp)]
    muls = [o for o in ops if isinstance(o, arith.MulfOp)]
    adds = [o for o in ops if isinstance(o, arith.AddfOp)]
    if len(muls) != 1 or len(adds) != 1:
        return None
    a = next((l for l in loads if list(l.indices) == [i, k]), None)
    b = next((l for l in loads if list(l.indices) == [k, j]), None)
    if a is None or b is None or a is b:
        return None
    mul, add = muls[0], adds[0]
    if set(mul.operands) != {a.res, b.res} or set(add.operands) != {mul.result, acc_in}:
        return None
    for l in (a, b):
        t = l.memref.type
        if not isinstance(t, builtin.MemRefType) or len(t.get_shape()) != 2 \
                or not isinstance(t.element_type, builtin.Float32Type):
            return None
    return a.memref, b.memref, add.result


def match_matmul(par: scf.ParallelOp) -> Matmul | None:
    """C[i,j] += A[i,k] * B[k,j], as linalg-to-loops emits it: the (i){k{j}} or the (i,j){k acc} nest."""
    block = par.body.block
    ops = _body_ops(block)
    ranges = band_ranges(par)
    if ranges is None or any(lb != 0 or st != 1 for lb, _, st in ranges):
        return None
    if len(block.args) == 1 and len(ops) == 1 and isinstance(ops[0], scf.ForOp):
        kloop = ops[0]
        kops = _body_ops(kloop.body.block)
        if kloop.iter_args or len(kops) != 1 or not isinstance(kops[0], scf.ForOp):
            return None
        jloop = kops[0]
        K, N = _unit_loop(kloop.lb, kloop.ub, kloop.step), _unit_loop(jloop.lb, jloop.ub, jloop.step)
        if K is None or N is None or jloop.iter_args:
            return None
        i, k, j = block.args[0], kloop.body.block.args[0], jloop.body.block.args[0]
        inner = _body_ops(jloop.body.block)
        loads = [o for o in inner if isinstance(o, memref.LoadOp)]
        stores = [o for o in inner if isinstance(o, memref.StoreOp)]
        c = next((l for l in loads if list(l.indices) == [i, j]), None)
        if len(inner) != 6 or len(stores) != 1 or c is None:
            return None
        mac = _match_mac(inner, c.res, i, j, k)
        st = stores[0]
        if mac is None or st.value is not mac[2] or st.memref is not c.memref or list(st.indices) != [i, j]:
            return None
        A, B, C = mac[0], mac[1], c.memref
    elif len(block.args) == 2 and len(ops) == 3 and isinstance(ops[1], scf.ForOp):
        init, kloop, st = ops
        i, j = block.args
        K = _unit_loop(kloop.lb, kloop.ub, kloop.step)
        if not (isinstance(init, memref.LoadOp) and isinstance(st, memref.StoreOp)) or K is None:
            return None
        if list(init.indices) != [i, j] or list(st.indices) != [i, j] or st.memref is not init.memref:
            return None
        if len(kloop.iter_args) != 1 or kloop.iter_args[0] is not init.res or st.value is not kloop.res[0]:
            return None
        k, acc = kloop.body.block.args
        inner = list(kloop.body.block.ops)
        if len(inner) != 5:
            return None
        mac = _match_mac(inner[:-1], acc, i, j, k)
        if mac is None or inner[-1].operands[0] is not mac[2]:
            return None
        A, B, C = mac[0], mac[1], init.memref
        N = ranges[1][1]
    else:
        return None
    M = ranges[0][1]
    if C in (A, B) or C.type.get_shape() != (M, N) or A.type.get_shape() != (M, K) \
            or B.type.get_shape() != (K, N):
        return None
    return Matmul(A, B, C, M, N, K)
