"""The kernel kinds that run a loop body as it is written.

    elementwise  gid = blockIdx.x * blockDim.x + threadIdx.x, guarded, split into the band ivs
    single       one thread runs the body
"""

from __future__ import annotations

import math

from xdsl.ir import Operation

from compiler.codegen.cuda.common import KernelWriter
from compiler.codegen.cuda.patterns import band_ranges, extent


def emit_elementwise(w: KernelWriter, ops: list[Operation]) -> None:
    """One thread per point of the kernel's scf.parallel band: the linear thread id, a guard
    past the last point, the band's ivs split out of it, then the body."""
    par = w.loop_nests(ops, one_parallel=True)[0]
    ranges = band_ranges(par)
    if ranges is None:
        w.fail("scf.parallel bounds must be constants or dynamic sizes")
    total = math.prod(extent(*r) for r in ranges)
    wide = "(long long)" if w.idx == "long long" else ""
    w.line(f"const {w.idx} gid = {wide}blockIdx.x * blockDim.x + threadIdx.x;")
    w.line(f"if (gid >= {total:}) return;")
    w.band_ivs(par, "gid")
    w.emit_ops(par.body.block.ops)


def emit_single(w: KernelWriter, ops: list[Operation]) -> None:
    """Every thread but the first of the first block returns; that one runs the ops."""
    w.line("if (blockIdx.x != 0 || threadIdx.x != 0) return;")
    w.emit_ops(ops)
