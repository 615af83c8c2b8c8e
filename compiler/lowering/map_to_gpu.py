"""map-to-gpu: wrap each top-level loop nest of loop IR in a `gpu_map.kernel` saying how it maps
onto a CUDA grid (see compiler/dialects/gpu_map.py for the kinds).

    scf.parallel (i) { acc = scf.for r iter_args(acc) { acc + x[i,r] }; store }
 -> gpu_map.kernel @f_k0 "row_reduce" {grid = [rows], block = [256]} { <the same scf.parallel> }

Host-side ops stay in the function: allocations, frees, copies, views and globals are buffer
management that the CUDA runtime performs between launches. Any other top-level op outside an
scf.parallel (a rank-0 reduction's scf.for, a scalar store) goes into a one-thread `single`
kernel. Choosing the kind:
  - matmul: the C[i,j] += A[i,k] B[k,j] nest (either loop order linalg-to-loops emits);
  - row_reduce: a band whose body reduces one value in an scf.for with one iter_arg;
  - elementwise: any other band (inner loops then run sequentially in each thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass

from compiler.dialects.gpu_map import KernelOp, band_ranges, match_matmul, match_row_reduce

# Ops the host runs between launches (buffer management); everything else runs on the device.
HOST_OPS = frozenset({
    "arith.constant", "memref.alloc", "memref.dealloc", "memref.copy", "memref.get_global",
    "memref.collapse_shape", "memref.expand_shape", "memref.cast", "memref.view",
    "func.return",
})

ELEMENTWISE_BLOCK = 256
MATMUL_TILE = (64, 64, 16)  # BM, BN, BK
MATMUL_BLOCK = (16, 16)  # threads (x over N, y over M): a 4x4 register tile each
MAX_REDUCE_BLOCK = 256


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def reduce_block(length: int) -> int:
    """Threads for a block reduction over `length` elements: a power of two in [32, 256]."""
    n = 32
    while n < MAX_REDUCE_BLOCK and n < length:
        n *= 2
    return n


def classify(par: scf.ParallelOp) -> tuple[str, tuple, tuple, tuple | None]:
    """(kind, grid, block, tile) for one top-level scf.parallel."""
    mm = match_matmul(par)
    if mm is not None:
        bm, bn, bk = MATMUL_TILE
        return "matmul", (_cdiv(mm.n, bn), _cdiv(mm.m, bm)), MATMUL_BLOCK, MATMUL_TILE
    ranges = band_ranges(par)
    points = prod(_cdiv(ub - lb, st) for lb, ub, st in ranges) if ranges is not None else None
    rr = match_row_reduce(par)
    if rr is not None and points:
        from compiler.dialects.gpu_map import const_int

        length = _cdiv(const_int(rr.loop.ub) - const_int(rr.loop.lb), const_int(rr.loop.step))
        return "row_reduce", (points,), (reduce_block(length),), None
    if points is None:
        from compiler.errors import CompileError

        raise CompileError("map-to-gpu: scf.parallel bounds must be constants")
    block = min(ELEMENTWISE_BLOCK, max(32, _cdiv(points, 32) * 32))
    return "elementwise", (max(1, _cdiv(points, block)),), (block,), None


def _wrap(ops: list[Operation], name: str, kind: str, grid, block, tile=None) -> KernelOp:
    body = Block()
    kernel = KernelOp(name, kind, grid, block, Region(body), tile=tile)
    ops[0].parent_block().insert_op_before(kernel, ops[0])
    for o in ops:
        o.detach()
        body.add_op(o)
    return kernel


def map_function(f: func.FuncOp) -> None:
    if not f.body.blocks:
        return
    fname = f.sym_name.data
    n = 0
    pending: list[Operation] = []
    consts: list[Operation] = []  # constants met among pending ops: they move above the kernel

    def flush():
        nonlocal n, pending, consts
        if pending:
            for c in consts:
                c.detach()
                pending[0].parent_block().insert_op_before(c, pending[0])
            _wrap(pending, f"{fname}_k{n}", "single", (1,), (1,))
            n += 1
            pending, consts = [], []

    for op in list(f.body.block.ops):
        if isinstance(op, KernelOp):
            flush()
            n += 1
        elif isinstance(op, scf.ParallelOp):
            flush()
            kind, grid, block, tile = classify(op)
            _wrap([op], f"{fname}_k{n}", kind, grid, block, tile)
            n += 1
        elif op.name in HOST_OPS:
            # a pure host op between device ops can wait; buffer management may not be reordered
            if op.name != "arith.constant":
                flush()
            elif pending:
                consts.append(op)
        else:
            pending.append(op)
    flush()


@dataclass(frozen=True)
class MapToGpu(ModulePass):
    """Wrap every top-level loop nest in a gpu_map.kernel with its grid/block/tile mapping."""

    name = "map-to-gpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp):
                map_function(f)
