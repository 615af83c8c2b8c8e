"""The kernel kinds that run a loop body as it is written.

    elementwise  gid = blockIdx.x * blockDim.x + threadIdx.x, guarded, split into the band ivs.
                 When map-to-gpu gave fewer threads than points (a large band), each thread runs
                 several: 4 neighbours along the last dim, their float loads and stores as one
                 float4 each (16-byte accesses, when every such pointer is 16-byte aligned at run
                 time; else the same 4 points with scalar accesses), or, where the last dim is
                 not a multiple of 4, points a grid's threads apart in an unrolled loop
    single       one thread runs the body
"""

from __future__ import annotations

import math

from xdsl.dialects import builtin
from xdsl.ir import Operation, OpResult

from compiler.codegen.cuda.common import KernelWriter
from compiler.codegen.cuda.patterns import band_ranges, extent

VEC = 4  # floats in a float4
LANES = "xyzw"


def emit_elementwise(w: KernelWriter, ops: list[Operation]) -> None:
    """One thread per point of the kernel's scf.parallel band (or several, where map-to-gpu
    gave a grid of fewer threads than points): the linear point id, a guard past the last
    point, the band's ivs split out of it, then the body."""
    par = w.loop_nests(ops, one_parallel=True)[0]
    ranges = band_ranges(par)
    if ranges is None:
        w.fail("scf.parallel bounds must be constants or dynamic sizes")
    total = math.prod(extent(*r) for r in ranges)
    wide = "(long long)" if w.idx == "long long" else ""
    grid, block = w.k.grid_dims, w.k.block_dims
    threads = grid[0] * block[0] if isinstance(grid[0], int) and isinstance(total, int) else 0
    per = -(-total // threads) if threads else 1
    if per == 1:
        w.line(f"const {w.idx} gid = {wide}blockIdx.x * blockDim.x + threadIdx.x;")
        w.line(f"if (gid >= {total:}) return;")
        w.band_ivs(par, "gid")
        w.emit_ops(par.body.block.ops)
        return
    w.line(f"const {w.idx} tid = {wide}blockIdx.x * blockDim.x + threadIdx.x;")
    lb, ub, step = ranges[-1]
    access = _vector_accesses(par) if per == VEC and (lb, step) == (0, 1) and ub % VEC == 0 \
        else None
    if access is not None:
        _emit_vec4(w, par, total, *access)
        return
    w.line("#pragma unroll")
    w.line(f"for (int u = 0; u < {per}; ++u) {{")
    w.ind += 1
    w.line(f"const {w.idx} gid = tid + ({w.idx})u * {threads};")
    w.line(f"if (gid < {total}) {{")
    w.ind += 1
    w.band_ivs(par, "gid")
    w.emit_ops(par.body.block.ops)
    w.ind -= 1
    w.line("}")
    w.ind -= 1
    w.line("}")


def _vector_accesses(par) -> tuple[list, list] | None:
    """The body's float loads and stores at [other ivs or constants..., last iv] of a
    row-major buffer whose last dim is a multiple of 4, so 4 neighbouring points touch 4
    neighbouring floats, 16-byte aligned when the buffer is (None when there is none). A load
    of a buffer the body stored to before it stays scalar (it must see that store)."""
    args = par.body.block.args
    inner = args[-1]
    loads, stores, stored = [], [], set()
    for op in par.body.block.ops:
        if op.name not in ("memref.load", "memref.store"):
            continue
        idx, t = list(op.indices), op.memref.type
        ok = (idx and idx[-1] is inner and isinstance(t.element_type, builtin.Float32Type)
              and all(isinstance(d, int) and d >= 0 for d in t.get_shape())
              and t.get_shape()[-1] % VEC == 0
              and all(i is not inner and (i in args or (isinstance(i, OpResult)
                                                         and i.op.name == "arith.constant"))
                      for i in idx[:-1]))
        if op.name == "memref.store":
            stored.add(op.memref)
            if ok:
                stores.append(op)
        elif ok and op.memref not in stored:
            loads.append(op)
    return (loads, stores) if loads or stores else None


def _emit_vec4(w: KernelWriter, par, total: int, loads: list, stores: list) -> None:
    """4 neighbouring points per thread: float4 accesses when aligned, else scalar ones."""
    w.line(f"if (tid >= {total // VEC}) return;")
    w.line(f"const {w.idx} gid = tid * {VEC};")
    w.band_ivs(par, "gid")
    inner = par.body.block.args[-1]
    base = w.names[inner]
    pointers = sorted({w.val(o.memref) for o in loads + stores}, key=lambda p: int(p[1:]))
    w.line("const bool aligned = ((" + " | ".join(
        f"reinterpret_cast<unsigned long long>({p})" for p in pointers) + ") & 15) == 0;")
    w.line("if (aligned) {")
    w.ind += 1
    vectors: dict[tuple, str] = {}  # (buffer, indices) -> its float4
    for op in loads:
        key = (op.memref, tuple(op.indices))
        if key not in vectors:
            vectors[key] = w.fresh("f")
            w.line(f"const float4 {vectors[key]} = *reinterpret_cast<const float4*>("
                   f"&{w.addr(op.memref, op.indices)});")
    hoisted = {op: vectors[(op.memref, tuple(op.indices))] for op in loads}
    values: dict[Operation, list[str]] = {op: [] for op in stores}

    def load(op):
        return f"{hoisted[op]}.{LANES[lane]}" if op in hoisted else None

    def store(op, v):
        if op in values:
            values[op].append(v)
            return True
        return False

    w.load_hook, w.store_hook = load, store
    for lane in range(VEC):
        w.names[inner] = f"({base} + {lane})"
        w.emit_ops(par.body.block.ops)
    w.load_hook = w.store_hook = None
    w.names[inner] = base
    for op in stores:
        w.line(f"*reinterpret_cast<float4*>(&{w.addr(op.memref, op.indices)}) = "
               f"make_float4({', '.join(values[op])});")
    w.ind -= 1
    w.line("} else {")
    w.ind += 1
    for lane in range(VEC):
        w.names[inner] = f"({base} + {lane})"
        w.emit_ops(par.body.block.ops)
    w.names[inner] = base
    w.ind -= 1
    w.line("}")


def emit_single(w: KernelWriter, ops: list[Operation]) -> None:
    """Every thread but the first of the first block returns; that one runs the ops."""
    w.line("if (blockIdx.x != 0 || threadIdx.x != 0) return;")
    w.emit_ops(ops)
