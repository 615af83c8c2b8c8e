"""map-to-gpu: wrap the top-level loop nests of loop IR in `gpu_map.kernel` ops saying how each
maps onto a CUDA grid (see compiler/dialects/gpu_map.py for the kinds). The loop IR inside is
unchanged: a kernel whose body holds several nests runs them in order, and the emitter maps them
together onto one launch.

    scf.parallel (i) { m[i] = -inf }                     gpu_map.kernel @f_k0 "row_reduce"
    scf.parallel (i) { m[i] = max_j x[i,j] }       ->      {grid = [rows], block = [256],
                                                            tile = [4]} {
    scf.parallel (i,j) { y[i,j] = exp(x[i,j]-m[i]) }       <the same three scf.parallel>
                                                         }

Host-side ops stay in the function: allocations, frees, copies, views and globals are buffer
management that the CUDA runtime performs between launches. Any other top-level op outside an
scf.parallel (a rank-0 reduction's scf.for, a scalar store) goes into a one-thread `single`
kernel. Grouping, in this order:
  - matmul: the C[b..,i,j] += A[b..,i,k] B[b..,k,j] nest (either loop order linalg-to-loops
    emits), with the fill of C before it and point-wise epilogues after it (bias, relu);
  - col_reduce: a nest reducing over outer loops into C[p..,j] (j contiguous), with its fill and
    epilogues, like a matmul;
  - row_reduce: a row reduction with its neighbours over the same rows (softmax's six nests,
    layer norm's), when a row fits in the block's registers; else the reduction alone;
  - elementwise: any other band (inner loops then run sequentially in each thread).

An `aicc_fused.attention` op (on memrefs: the CUDA pipeline runs fuse-attention but not
lower-attention) becomes an "attention" kernel of its own, the op kept whole inside it for the
emitter (see attention_config for the mapping). Its head dims (E of q and k, F of v) must be at
most MAX_ATTENTION_HEAD_DIM: fuse-attention leaves a larger one unfused on CUDA. A
`gpu_map.qgemm` (lower-qgemm-gpu's int8 GEMM) likewise becomes a "qgemm" kernel of its own
(qgemm_config: a block per 64 x 64 tile of C).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass

from compiler.dialects.aicc_fused import AttentionOp
from compiler.dialects.gpu_map import KernelOp, QGemmOp
from compiler.codegen.cuda.qgemm import qgemm_config
from compiler.codegen.cuda.patterns import (
    accesses,
    attention_sizes,
    analyze_row_group,
    band_ranges,
    const_int,
    epilogue_chain,
    extent,
    fill_value,
    is_index_host_op,
    match_col_reduce,
    match_matmul,
    match_row_reduce,
    may_overlap,
    row_nest,
    row_shape,
    used_after,
)
from compiler.errors import CompileError
from compiler.symbolic import Sym, ceildiv_expr, product_expr

# Ops the host runs between launches (buffer management); everything else runs on the device.
HOST_OPS = frozenset({
    "arith.constant", "memref.alloc", "memref.dealloc", "memref.copy", "memref.get_global",
    "memref.collapse_shape", "memref.expand_shape", "memref.cast", "memref.view",
    "func.return",
})
# Host ops that only define a value: a kernel grouping nests around them may move them above.
PURE_HOST_OPS = frozenset({
    "arith.constant", "memref.get_global", "memref.collapse_shape", "memref.expand_shape",
    "memref.cast", "memref.view",
})
# A dynamic size is guessed at this when a choice (a tile shape, a block size) depends on it.
DYNAMIC_SIZE_GUESS = 256

ELEMENTWISE_BLOCK = 256
# A thread of a large elementwise band runs this many points (the emitter spaces them a grid
# apart, so each step is coalesced): one 4-byte load per thread keeps too few bytes in flight to reach the
# memory's bandwidth (about 20 KB per SM are needed; 2048 threads x 4 B is 8 KB)
ELEMENTWISE_POINTS = 4
ELEMENTWISE_MANY = 1 << 20  # points from which a thread runs ELEMENTWISE_POINTS of them
MAX_REDUCE_BLOCK = 1024
ROW_ELEMS = 8  # elements of a row per thread the block size aims for
MAX_ROW_ELEMS = 16  # most elements of a row a thread keeps in registers
NUM_SMS = 132  # H100 SXM: a tile config must give at least this many blocks to be chosen
GPU_THREADS = NUM_SMS * 1024  # threads that keep every SM busy enough for a memory-bound kernel
MAX_GRID_Z = 65535
MAX_ROW_GROUP = 12  # nests on each side of a row reduction that may join its kernel
MAX_ATTENTION_HEAD_DIM = 128  # q/k/v rows an attention thread group keeps in registers
ATTENTION_ELEMS = 32  # elements of q's (and of the output's) row per thread


@dataclass(frozen=True)
class MatmulConfig:
    """A tile of C per block (bm x bn), its k step, and the threads (tx over N, ty over M);
    each thread computes (bm/ty) x (bn/tx)."""

    bm: int
    bn: int
    bk: int
    tx: int
    ty: int


# Largest first: the first whose block count fills the GPU is chosen; the last always fits.
MATMUL_CONFIGS = (
    MatmulConfig(128, 128, 8, 16, 16),  # 8x8 per thread, 256 threads
    MatmulConfig(128, 64, 8, 8, 16),  # 8x8 per thread, 128 threads
    MatmulConfig(64, 64, 16, 16, 16),  # 4x4 per thread, 256 threads
)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _guess(x: int | Sym) -> int:
    """A size to choose a launch shape by: itself, or a dynamic one at DYNAMIC_SIZE_GUESS per
    dim."""
    if isinstance(x, int):
        return x
    return max(1, x.evaluate({s: DYNAMIC_SIZE_GUESS for s in x.symbols}))


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def reduce_block(length: int | Sym) -> int:
    """Threads for a block reduction over `length` elements: a power of two in [32, 1024]
    that leaves each thread about ROW_ELEMS elements."""
    length = _guess(length)
    return min(MAX_REDUCE_BLOCK, max(32, _pow2_at_least(_cdiv(length, ROW_ELEMS))))


def row_tile(length: int | Sym) -> tuple[int, int | None]:
    """(threads, elements per thread kept in registers or None when the row does not fit; a
    row of dynamic length is never kept in registers)."""
    t = reduce_block(length)
    if isinstance(length, Sym):
        return t, None
    e = _cdiv(length, t)
    return t, (e if e <= MAX_ROW_ELEMS else None)


def matmul_config(m: int | Sym, n: int | Sym, batch: int | Sym) -> MatmulConfig:
    m, n, batch = _guess(m), _guess(n), _guess(batch)
    for cfg in MATMUL_CONFIGS:
        if _cdiv(m, cfg.bm) * _cdiv(n, cfg.bn) * batch >= NUM_SMS:
            return cfg
    return MATMUL_CONFIGS[-1]


def col_block(n: int | Sym, points: int | Sym, reduced: int | Sym, splittable: bool
              ) -> tuple[int, int]:
    """(threads over the kept contiguous dim, threads splitting the reduced dims): a split
    when the outputs alone leave the GPU short of threads."""
    n, points, reduced = _guess(n), _guess(points), _guess(reduced)
    outputs = n * points
    if not splittable or outputs >= GPU_THREADS:
        return min(256, max(32, _pow2_at_least(n))), 1
    bx = min(32, _pow2_at_least(n))
    by = 1
    while by * 2 * bx <= 1024 and by * 2 <= reduced and outputs * by < GPU_THREADS:
        by *= 2
    return bx, by


def elementwise_launch(par: scf.ParallelOp) -> tuple[tuple, tuple]:
    ranges = band_ranges(par)
    if ranges is None:
        raise CompileError("map-to-gpu: scf.parallel bounds must be constants or dynamic sizes "
                           "(from 0, step 1)")
    points = prod(extent(*r) for r in ranges)
    if isinstance(points, Sym):
        return (ceildiv_expr(points, ELEMENTWISE_BLOCK),), (ELEMENTWISE_BLOCK,)
    block = min(ELEMENTWISE_BLOCK, max(32, _cdiv(points, 32) * 32))
    per_thread = ELEMENTWISE_POINTS if points >= ELEMENTWISE_MANY else 1
    return (max(1, _cdiv(points, block * per_thread)),), (block,)


def attention_config(op: AttentionOp) -> tuple[tuple, tuple, tuple]:
    """(grid, block, tile = [BQ, KB, T]) of the flash-attention kernel for `op`.

    T threads (1, 2 or 4) share a query row, each holding at most ATTENTION_ELEMS of its q and
    output elements in registers; a block runs BQ rows (64, or 32 for a short sequence), so
    BQ * T threads, and stages KB keys of k and v at a time in shared memory (64, or 32 for
    head dims over 64: 32 KB at most; fewer for a short S). One block per (batch entry, BQ
    query rows): the grid is flat, the emitter splits blockIdx.x."""
    batch, L, S, E, F = attention_sizes(op)
    if isinstance(E, Sym) or isinstance(F, Sym):
        raise CompileError("map-to-gpu: attention with a dynamic head dim (the kernel keeps a "
                           "row of q in registers): give the head dims static sizes")
    d = max(E, F)
    if d > MAX_ATTENTION_HEAD_DIM:
        raise CompileError(f"map-to-gpu: attention head dim {d} is over "
                           f"{MAX_ATTENTION_HEAD_DIM} (fuse-attention leaves it unfused on CUDA)")
    t = 1
    while d > t * ATTENTION_ELEMS:
        t *= 2
    bq = 64 if _guess(L) > 32 else 32
    kb = min(64 if d <= 64 else 32, _cdiv(_guess(S), 16) * 16)  # a multiple of the emitter's 16-key step
    return (product_expr(prod(batch), ceildiv_expr(L, bq)),), (bq * t,), (bq, kb, t)


def _wrap(ops: list[Operation], name: str, kind: str, grid, block, tile=None) -> KernelOp:
    body = Block()
    kernel = KernelOp(name, kind, grid, block, Region(body), tile=tile)
    ops[0].parent_block().insert_op_before(kernel, ops[0])
    for o in ops:
        o.detach()
        body.add_op(o)
    return kernel


# ------------------------------------------------------------------------------ grouping


@dataclass
class Group:
    kind: str
    nests: list[Operation]
    grid: tuple = ()
    block: tuple = ()
    tile: tuple | None = None
    private: frozenset = frozenset()  # arena views that get memory of their own


def _extend_epilogues(nests: list[Operation], at: int, used: list[bool], out: SSAValue,
                      reads: set[SSAValue]) -> int:
    """Index one past the last nest after `at` that runs point-wise after `out` is final."""
    free = at + 1
    while free < len(nests) and not used[free]:
        free += 1
    return at + 1 + epilogue_chain(nests[at + 1:free], out, reads)


def _main_group(nests: list[Operation], at: int, used: list[bool]) -> Group | None:
    """A matmul or column reduction at `at`, with the fill before it and epilogues after."""
    nest = nests[at]
    mm = match_matmul(nest)
    if mm is not None and (isinstance(mm.batch_size, Sym) or mm.batch_size <= MAX_GRID_Z):
        out = mm.c
    else:
        mm = None
        cr = match_col_reduce(nest)
        if cr is None:
            return None
        out = cr.c
    reads = {a.mem for a in accesses(nest) if a.mem is not out}
    start = at
    if at > 0 and not used[at - 1] and fill_value(nests[at - 1], out) is not None:
        start = at - 1
    end = _extend_epilogues(nests, at, used, out, reads)
    if mm is not None:
        cfg = matmul_config(mm.m, mm.n, mm.batch_size)
        grid = (ceildiv_expr(mm.n, cfg.bn), ceildiv_expr(mm.m, cfg.bm), mm.batch_size)
        return Group("matmul", nests[start:end], grid, (cfg.tx, cfg.ty), (cfg.bm, cfg.bn, cfg.bk))
    bx, by = col_block(cr.n, cr.points, cr.reduced, cr.combiner is not None)
    grid = (product_expr(ceildiv_expr(cr.n, bx), cr.points),)
    return Group("col_reduce", nests[start:end], grid, (bx, by) if by > 1 else (bx,))


def _row_group(nests: list[Operation], at: int, used: list[bool]) -> Group:
    """The largest run of free nests around row reduction `at` that one block per row can run
    (a window, since a fill before a reduction makes the reduction's read-modify-write of its
    accumulator safe to fuse where the reduction alone would not be)."""
    par = nests[at]
    rows, n = row_shape(par) or (None, None)
    if rows is None:  # bounds that are not 0..n step 1: the reduction alone
        rr = match_row_reduce(par)
        length = _cdiv(const_int(rr.loop.ub) - const_int(rr.loop.lb), const_int(rr.loop.step))
        points = prod(_cdiv(ub - lb, st) for lb, ub, st in band_ranges(par))
        return Group("row_reduce", [par], (points,), (reduce_block(length),))
    threads, elems = row_tile(n)
    lo, hi = at, at + 1  # the free nests around `at` over the same rows: the windows to try
    while lo > 0 and not used[lo - 1] and at - lo < MAX_ROW_GROUP \
            and row_nest(nests[lo - 1], rows, n) is not None:
        lo -= 1
    while hi < len(nests) and not used[hi] and hi - at < MAX_ROW_GROUP \
            and row_nest(nests[hi], rows, n) is not None:
        hi += 1
    for size in range(hi - lo, 0, -1):
        for a in range(max(lo, at - size + 1), min(at, hi - size) + 1):
            window = nests[a:a + size]
            tail = window[-1]
            live = lambda v, t=tail: used_after(v, t)  # noqa: E731
            private = _privatizable(window, live)
            for priv in (frozenset(), private) if private else (frozenset(),):
                if analyze_row_group(window, live, elems is not None, priv) is not None:
                    return Group("row_reduce", window, (prod(rows),), (threads,),
                                 (elems,) if elems is not None else None, priv)
    return Group("row_reduce", [par], (prod(rows),), (threads,))


def _privatizable(window: list[Operation], live) -> frozenset:
    """Arena views the window writes and later kernels read: given memory of their own, they
    cannot overlap an arena buffer another block of the kernel still reads."""
    acc = [a for par in window for a in accesses(par)]
    out = set()
    for a in acc:
        v = a.mem
        if a.store and isinstance(v, OpResult) and v.op.name == "memref.view" and live(v) \
                and any(b.mem is not v and may_overlap(b.mem, v) for b in acc):
            out.add(v)
    return frozenset(out)


def _privatize(view: SSAValue) -> Operation:
    """Replace arena view `view` by an allocation of its own, freed before the return."""
    op = view.op
    block = op.parent_block()
    alloc = memref.AllocOp.get(view.type.element_type, shape=view.type.get_shape(),
                               dynamic_sizes=list(op.sizes))
    block.insert_op_before(alloc, op)
    view.replace_all_uses_with(alloc.memref)
    op.detach()
    op.erase()
    block.insert_op_before(memref.DeallocOp.get(alloc.memref), block.last_op)
    return alloc


def group_nests(nests: list[Operation]) -> list[Group]:
    """Partition consecutive nests (no buffer management between them) into kernels."""
    used = [False] * len(nests)
    groups: list[tuple[int, Group]] = []

    def take(g: Group):
        first = next(i for i, n in enumerate(nests) if n is g.nests[0])
        for k in range(first, first + len(g.nests)):
            used[k] = True
        groups.append((first, g))

    for i in range(len(nests)):
        if not used[i]:
            g = _main_group(nests, i, used)
            if g is not None:
                take(g)
    for i in range(len(nests)):
        if not used[i] and match_row_reduce(nests[i]) is not None \
                and band_ranges(nests[i]) is not None:
            take(_row_group(nests, i, used))
    for i, n in enumerate(nests):
        if not used[i]:
            if isinstance(n, scf.ParallelOp):
                grid, block = elementwise_launch(n)
                take(Group("elementwise", [n], grid, block))
            else:
                take(Group("single", [n], (1,), (1,)))
    return [g for _, g in sorted(groups, key=lambda x: x[0])]


# ------------------------------------------------------------------------------ the pass


def map_function(f: func.FuncOp) -> None:
    if not f.body.blocks:
        return
    fname = f.sym_name.data
    block = f.body.block
    n = 0
    pending: list[Operation] = []  # straight-line device code, for a `single` kernel
    consts: list[Operation] = []  # constants met among pending ops: they move above the kernel
    run: list[Operation] = []  # nests with only pure host ops between them
    between: list[Operation] = []  # those pure host ops

    def flush_single():
        nonlocal n, pending, consts
        if pending:
            for c in consts:
                c.detach()
                block.insert_op_before(c, pending[0])
            _wrap(pending, f"{fname}_k{n}", "single", (1,), (1,))
            n += 1
            pending, consts = [], []

    def flush_run():
        nonlocal n, run, between
        if not run:
            return
        for g in group_nests(run):
            for v in g.private:
                at = next((k for k, o in enumerate(between) if o is v.op), None)
                alloc = _privatize(v)
                if at is not None:
                    between[at] = alloc
            first = g.nests[0]
            # pure host ops among a kernel's nests move above it, in order
            pos = {id(o): k for k, o in enumerate(block.ops)}
            lo, hi = pos[id(first)], pos[id(g.nests[-1])]
            for o in between:
                if o.parent_block() is block and lo < pos[id(o)] < hi:
                    o.detach()
                    block.insert_op_before(o, first)
            _wrap(g.nests, f"{fname}_k{n}", g.kind, g.grid, g.block, g.tile)
            n += 1
        run, between = [], []

    for op in list(block.ops):
        if isinstance(op, KernelOp):
            flush_single()
            flush_run()
            n += 1
        elif isinstance(op, AttentionOp):
            flush_single()
            flush_run()
            _wrap([op], f"{fname}_k{n}", "attention", *attention_config(op))
            n += 1
        elif isinstance(op, QGemmOp):
            flush_single()
            flush_run()
            _wrap([op], f"{fname}_k{n}", "qgemm", *qgemm_config(op))
            n += 1
        elif isinstance(op, scf.ParallelOp) or (
                isinstance(op, scf.ForOp) and match_col_reduce(op) is not None):
            flush_single()
            run.append(op)
        elif op.name in HOST_OPS or is_index_host_op(op):
            if op.name == "arith.constant" and pending:
                consts.append(op)
            elif op.name in PURE_HOST_OPS or is_index_host_op(op):
                flush_single()
                if run:
                    between.append(op)
            else:
                # buffer management may not be reordered
                flush_single()
                flush_run()
        else:
            flush_run()
            pending.append(op)
    flush_single()
    flush_run()


@dataclass(frozen=True)
class MapToGpu(ModulePass):
    """Wrap the top-level loop nests in gpu_map.kernel ops with their grid/block/tile mapping."""

    name = "map-to-gpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp):
                map_function(f)
