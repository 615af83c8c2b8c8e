"""Structural queries on loop IR, shared by map-to-gpu (to choose how a nest maps onto a CUDA
grid) and CudaEmitter (to emit it): both must agree on what a matmul, a row reduction, a column
reduction and a fusable neighbour look like.

Vocabulary:
  band        the ivs of a top-level scf.parallel (lb 0, step 1 wherever a matcher needs it)
  point nest  an scf.parallel whose body is straight-line: pure arith/math, loads and stores
  fill        a point nest storing one value defined outside it at each point of a buffer
  epilogue    a point nest over an output's shape that reads the output only at its own point,
              so the thread that finishes that output element can run it (bias, relu, ...)
  row group   consecutive nests over the same rows, each either per-row (scalar), per-element
              of the row (map) or reducing the row (reduce): one CUDA block per row runs them all
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, builtin, memref, scf
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from compiler.lowering.dims import index_symbol, memref_dims
from compiler.symbolic import Sym

# combiner -> (C expression template, identity as a C literal for f32/f64). aicc_max/aicc_min
# propagate NaN like arith.maximumf/minimumf (LLVM's llvm.maximum, NumPy's np.maximum);
# fmaxf/fminf ignore it, like arith.maxnumf/minnumf.
COMBINERS: dict[str, tuple[str, str]] = {
    "arith.addf": ("({a} + {b})", "0"),
    "arith.mulf": ("({a} * {b})", "1"),
    "arith.maximumf": ("aicc_max({a}, {b})", "-INFINITY"),
    "arith.maxnumf": ("fmaxf({a}, {b})", "-INFINITY"),
    "arith.minimumf": ("aicc_min({a}, {b})", "INFINITY"),
    "arith.minnumf": ("fminf({a}, {b})", "INFINITY"),
}
_PURE_PREFIXES = ("arith.", "math.")
_ALIAS_OPS = ("memref.collapse_shape", "memref.expand_shape", "memref.cast")


def const_int(v: SSAValue) -> int | None:
    if isinstance(v, OpResult) and isinstance(v.op, arith.ConstantOp):
        attr = v.op.value
        if isinstance(attr, builtin.IntegerAttr):
            return attr.value.data
    return None


# A dynamic dim `batch` is the kernel parameter `d_batch`: the prefix keeps the function's dim
# names apart from the names of a kernel's locals (and from C's).
DIM_PREFIX = "d_"


def kernel_dim(x: int | Sym) -> int | Sym:
    """A size as kernels see it: a Sym over the kernel parameters of its dims."""
    return x.rename(lambda n: DIM_PREFIX + n) if isinstance(x, Sym) else x


def bound(v: SSAValue) -> int | Sym | None:
    """A loop bound or size: a constant, or the Sym of a size the host computes from the
    function's dynamic dims (kernel_dim names); None for anything else (a value computed in a
    loop)."""
    c = const_int(v)
    if c is not None:
        return c
    if not isinstance(v.type, builtin.IndexType):
        return None
    s = index_symbol(v)
    return kernel_dim(s) if s is not None else None


def band_ranges(par: scf.ParallelOp) -> list[tuple[int, int | Sym, int]] | None:
    """(lb, ub, step) of each dim of the band, when lb and step are constants and ub is a
    constant or a dynamic size (then lb is 0 and the step 1)."""
    out = []
    for lb, ub, st in zip(par.lowerBound, par.upperBound, par.step):
        vals = (const_int(lb), bound(ub), const_int(st))
        if any(v is None for v in vals) or vals[2] <= 0:
            return None
        if isinstance(vals[1], Sym) and (vals[0], vals[2]) != (0, 1):
            return None
        out.append(vals)  # type: ignore[arg-type]
    return out


# Dynamic dims: the host computes sizes from the inputs' shapes (memref.dim and index
# arithmetic at the top level); kernels receive the dims they need as parameters.
INDEX_HOST_OPS = frozenset({
    "memref.dim", "arith.muli", "arith.addi", "arith.subi", "arith.index_cast",
})


def is_index_host_op(op: Operation) -> bool:
    """Index arithmetic the host runs (dynamic sizes), not a kernel."""
    return op.name in INDEX_HOST_OPS and all(isinstance(r.type, builtin.IndexType)
                                             for r in op.results)


def extent(lb: int, ub: int | Sym, st: int) -> int | Sym:
    """The number of points of lb..ub step st (a dynamic ub has lb 0 and step 1)."""
    return ub if isinstance(ub, Sym) else -(-(ub - lb) // st)


def unit_extents(par: scf.ParallelOp) -> tuple[int, ...] | None:
    """The band's extents when every dim starts at 0 with step 1."""
    ranges = band_ranges(par)
    if ranges is None or any(lb != 0 or st != 1 for lb, _, st in ranges):
        return None
    return tuple(ub for _, ub, _ in ranges)


def body_ops(block: Block) -> list[Operation]:
    return [o for o in block.ops if not isinstance(o, scf.ReduceOp | scf.YieldOp)]


def is_pure(op: Operation) -> bool:
    return op.name.startswith(_PURE_PREFIXES) and not op.regions


def shape(v: SSAValue) -> tuple[int | Sym, ...]:
    """A memref's sizes, its dynamic ones as Syms (kernel_dim names)."""
    dims = memref_dims(v)
    if dims is None:
        return tuple(v.type.get_shape())
    return tuple(kernel_dim(d) for d in dims)


def attention_sizes(op: Operation) -> tuple[list, int | Sym, int | Sym, int | Sym, int | Sym]:
    """(batch shape, L, S, E, F) of an aicc_fused.attention on memrefs, dynamic sizes as Syms
    (kernel_dim names)."""
    from compiler.dialects.aicc_fused import logical_shape

    out = logical_shape(list(shape(op.out)), op.perm("out"))
    k = logical_shape(list(shape(op.k)), op.perm("k"))
    return out[:-2], out[-2], k[-2], k[-1], out[-1]


# ------------------------------------------------------------------------------ memory


def root(v: SSAValue) -> SSAValue:
    """The buffer a memref value is a view of, through reshapes and casts."""
    while isinstance(v, OpResult) and v.op.name in _ALIAS_OPS:
        v = v.op.operands[0]
    return v


def region(v: SSAValue) -> tuple[object, tuple, tuple] | None:
    """(what, start, end) of the memory a memref value covers, when known. Start and end are
    (part, offset) pairs ordered as the buffer is: part -1 counts bytes from its start, part g
    the g-th dynamic part of plan-memory's arena, in units of its dims' product (the view's
    `aicc.arena_slot`)."""
    v = root(v)
    whole = ((-2, 0), (1 << 62, 0))
    if isinstance(v, BlockArgument):
        return (v, *whole)
    if isinstance(v, OpResult) and v.op.name == "memref.view":
        slot = v.op.attributes.get("aicc.arena_slot")
        base = region(v.op.source)
        if base is None:
            return None
        if slot is not None:
            g, lo, hi = slot.get_values()
            return (base[0], (g, lo), (g, hi))
        off = const_int(v.op.byte_shift)
        if off is None or v.op.sizes or base[1][0] >= 0:  # within a dynamic part: unknown
            return None
        start = off + (base[1][1] if base[1][0] == -1 else 0)
        t = v.type
        size = _elem_bytes(t.element_type)
        for d in t.get_shape():
            size *= d
        return (base[0], (-1, start), (-1, start + size))
    if isinstance(v, OpResult) and v.op.name in ("memref.alloc", "memref.get_global"):
        return (v, *whole)
    return None


def _elem_bytes(t) -> int:
    if isinstance(t, builtin.IntegerType):
        return max(1, t.width.data // 8)
    if isinstance(t, builtin.IndexType | builtin.Float64Type):
        return 8
    if isinstance(t, builtin.Float16Type):
        return 2
    return 4


def may_overlap(a: SSAValue, b: SSAValue) -> bool:
    ra, rb = region(a), region(b)
    if ra is None or rb is None:
        return True
    if isinstance(ra[0], OpResult) and ra[0].op.name == "memref.get_global":
        return False  # read-only constants
    return ra[0] is rb[0] and ra[1] < rb[2] and rb[1] < ra[2]


def _top_op(op: Operation, block: Block) -> Operation | None:
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


def used_after(v: SSAValue, last: Operation) -> bool:
    """Whether memref `v` (or a view of it) may be read after top-level op `last`: always for a
    function argument; else some use by an op after `last` other than its dealloc."""
    v = root(v)
    if isinstance(v, BlockArgument):
        return True
    block = last.parent_block()
    order = {id(o): n for n, o in enumerate(block.ops)}
    at = order[id(last)]
    pending = [v]
    while pending:
        w = pending.pop()
        for use in w.uses:
            op = use.operation
            if op.name in _ALIAS_OPS or op.name == "memref.view":
                pending.append(op.results[0])
                continue
            top = _top_op(op, block)
            if top is not None and order.get(id(top), -1) > at and op.name != "memref.dealloc":
                return True
    return False


@dataclass
class Access:
    op: Operation  # memref.load or memref.store
    mem: SSAValue
    indices: list[SSAValue]
    store: bool


def accesses(op: Operation) -> list[Access]:
    out = []
    for o in op.walk():
        if isinstance(o, memref.LoadOp):
            out.append(Access(o, o.memref, list(o.indices), False))
        elif isinstance(o, memref.StoreOp):
            out.append(Access(o, o.memref, list(o.indices), True))
    return out


def _straight_line(ops: Sequence[Operation]) -> bool:
    return all(is_pure(o) or isinstance(o, memref.LoadOp | memref.StoreOp) for o in ops)


# ------------------------------------------------------------------------------ point nests


def point_nest(par: Operation) -> tuple[int, ...] | None:
    """The extents of an scf.parallel whose body is straight-line code."""
    if not isinstance(par, scf.ParallelOp):
        return None
    ext = unit_extents(par)
    if ext is None or not _straight_line(body_ops(par.body.block)):
        return None
    return ext


def fill_value(par: Operation, out: SSAValue) -> SSAValue | None:
    """The value a fill nest stores at every point of `out` (defined outside the nest)."""
    if point_nest(par) != shape(out):
        return None
    ops = body_ops(par.body.block)
    if len(ops) != 1 or not isinstance(ops[0], memref.StoreOp):
        return None
    st = ops[0]
    if st.memref is not out or list(st.indices) != list(par.body.block.args):
        return None
    v = st.value
    if isinstance(v, OpResult) and v.op.parent_op() is par:
        return None
    return v


def _epilogue_ok(par: Operation, out_shape: tuple[int, ...], point_bufs: set[SSAValue],
                 reads: dict[SSAValue, bool]) -> bool:
    """Whether nest `par` can run point-wise after the buffers in `point_bufs` (all of shape
    `out_shape`) are final: it spans that shape and reads each of them only at its own point.
    `reads` maps the buffers the kernel reads from memory so far to whether only at their own
    point; a store that may overwrite one read elsewhere is a race and rejects the nest."""
    if point_nest(par) != out_shape:
        return False
    ivs = list(par.body.block.args)
    acc = accesses(par)
    roots = {root(p) for p in point_bufs}
    mine = dict(reads)
    for a in acc:
        if a.mem in point_bufs or root(a.mem) in roots:
            if a.mem not in point_bufs or a.indices != ivs:
                return False
        elif not a.store:
            mine[a.mem] = mine.get(a.mem, True) and a.indices == ivs
    for a in acc:
        if not a.store:
            continue
        if a.indices != ivs or shape(a.mem) != out_shape:
            return False
        for r, at_point in mine.items():
            if (r is a.mem and not at_point) or (r is not a.mem and may_overlap(r, a.mem)):
                return False
    return True


def epilogue_chain(nests: Sequence[Operation], out: SSAValue, reads: set[SSAValue]) -> int:
    """How many of `nests` (in order) run point-wise after `out` is final, each thread on the
    output elements it finished. `reads`: what the main nest reads from memory."""
    point = {out}
    seen: dict[SSAValue, bool] = {r: False for r in reads}
    count = 0
    for par in nests:
        if not _epilogue_ok(par, shape(out), point, seen):
            break
        ivs = list(par.body.block.args)
        for a in accesses(par):
            if a.store:
                point.add(a.mem)
            elif a.mem not in point:
                seen[a.mem] = seen.get(a.mem, True) and a.indices == ivs
        count += 1
    return count


@dataclass
class MainGroup:
    """A kernel's nests: fills of the output, the main nest, epilogues after it."""

    fill: SSAValue | None  # the value the output starts from; None: its contents in memory
    main: Operation
    epilogues: list[Operation]


def split_main_group(ops: Sequence[Operation], match: Callable, out_of: Callable
                     ) -> tuple[object, MainGroup] | None:
    """(match(main), group) for ops = [fill?] main [epilogue...]."""
    for at, op in enumerate(ops[:2]):
        found = match(op)
        if found is None:
            continue
        out = out_of(found)
        fill = fill_value(ops[0], out) if at == 1 else None
        if at == 1 and fill is None:
            return None
        rest = list(ops[at + 1:])
        reads = {a.mem for a in accesses(op) if a.mem is not out}
        if epilogue_chain(rest, out, reads) != len(rest):
            return None
        return found, MainGroup(fill, op, rest)
    return None


# ------------------------------------------------------------------------------ matmul


@dataclass
class Operand:
    """How a matmul reads A (or B): one load of the matrix, or a computed value (a producer
    that fuse-elementwise inlined, e.g. softmax's division before P @ V): `ops` in order, loads
    indexed by batch ivs, the operand's row/column iv, k and constants only."""

    value: SSAValue
    load: memref.LoadOp | None  # the plain case: value is this load's result
    ops: list[Operation]  # the computed case: the ops producing value
    k_contig: bool  # the matrix's rows run along k: A[.., i, k] or B[.., j, k] (transposed B)

    @property
    def plain(self) -> bool:
        return self.load is not None


@dataclass
class Matmul:
    """C[b..., i, j] (+)= A[.., i, k] * B[.., k, j] over a band (b..., i) or (b..., i, j)."""

    par: scf.ParallelOp
    a: Operand
    b: Operand
    c: SSAValue
    c_init: memref.LoadOp  # the load of C the accumulation starts from
    batch: list[BlockArgument]
    batch_extents: tuple[int, ...]
    i: SSAValue
    j: SSAValue
    k: SSAValue
    m: int
    n: int
    k_ext: int

    @property
    def batch_size(self) -> int:
        out = 1
        for e in self.batch_extents:
            out *= e
        return out


def _unit_loop(loop: scf.ForOp) -> int | Sym | None:
    if const_int(loop.lb) == 0 and const_int(loop.step) == 1:
        return bound(loop.ub)
    return None


def _operand(v: SSAValue, scope: list[Block], batch, own: SSAValue, k: SSAValue
             ) -> Operand | None:
    """A's (own = i) or B's (own = j) operand: the value `v` computed in `scope` from loads
    indexed by batch ivs, `own`, k and constants."""
    allowed = {*batch, own, k}
    in_scope = {id(o) for b in scope for o in b.ops}
    found: set[int] = set()
    pending = [v]
    while pending:
        w = pending.pop()
        if not isinstance(w, OpResult):
            if w not in allowed and not isinstance(w.type, builtin.MemRefType):
                return None  # the accumulator, or the other operand's iv
            continue
        op = w.op
        if id(op) not in in_scope or id(op) in found:
            continue
        if not (is_pure(op) or isinstance(op, memref.LoadOp)):
            return None
        if isinstance(op, memref.LoadOp) and any(
                x not in allowed and const_int(x) is None for x in op.indices):
            return None
        found.add(id(op))
        pending.extend(op.operands)
    ops = [o for b in scope for o in b.ops if id(o) in found]
    if len(ops) == 1 and isinstance(ops[0], memref.LoadOp):
        l = ops[0]
        last = list(l.indices[-2:])
        if len(l.indices) >= 2 and last in ([own, k], [k, own]) \
                and all(x in batch or const_int(x) is not None for x in l.indices[:-2]) \
                and _f32_matrix(l.memref):
            return Operand(v, l, ops, last[1] is k)
    if not isinstance(v.type, builtin.Float32Type):
        return None
    k_contig = True
    for o in ops:  # lay the tile loads out for the first load reading a full tile of the matrix
        if isinstance(o, memref.LoadOp) and len(o.indices) >= 2:
            last = list(o.indices[-2:])
            if last in ([own, k], [k, own]):
                k_contig = last[1] is k
                break
    return Operand(v, None, ops, k_contig)


def _f32_matrix(v: SSAValue) -> bool:
    t = v.type
    return isinstance(t, builtin.MemRefType) and len(t.get_shape()) >= 2 \
        and isinstance(t.element_type, builtin.Float32Type)


def match_matmul(par: Operation) -> Matmul | None:
    """The (b.., i){k{j}} or the (b.., i, j){k acc} nest linalg-to-loops emits for a matmul,
    with A and B each a plain load or a value computed from loads (see Operand)."""
    if not isinstance(par, scf.ParallelOp):
        return None
    block = par.body.block
    ops = body_ops(block)
    ext = unit_extents(par)
    if ext is None:
        return None
    args = list(block.args)
    if len(ops) == 1 and isinstance(ops[0], scf.ForOp):  # (b.., i){k{j}}
        kloop = ops[0]
        kops = body_ops(kloop.body.block)
        if kloop.iter_args or not kops or not isinstance(kops[-1], scf.ForOp):
            return None
        jloop = kops[-1]
        K, N = _unit_loop(kloop), _unit_loop(jloop)
        if K is None or N is None or jloop.iter_args:
            return None
        i, k, j = args[-1], kloop.body.block.args[0], jloop.body.block.args[0]
        batch = args[:-1]
        inner = body_ops(jloop.body.block)
        if not inner or not isinstance(inner[-1], memref.StoreOp):
            return None
        st = inner[-1]
        c = next((l for l in inner if isinstance(l, memref.LoadOp) and l.memref is st.memref
                  and list(l.indices) == [*batch, i, j]), None)
        if c is None or list(st.indices) != [*batch, i, j]:
            return None
        acc, result = c.res, st.value
        scope = [kloop.body.block, jloop.body.block]
        fixed = {c, st, jloop}
        M = ext[-1]
    elif len(args) >= 2 and len(ops) == 3 and isinstance(ops[1], scf.ForOp):  # (b.., i, j){k}
        c, kloop, st = ops
        i, j = args[-2:]
        batch = args[:-2]
        K = _unit_loop(kloop)
        if not (isinstance(c, memref.LoadOp) and isinstance(st, memref.StoreOp)) or K is None:
            return None
        if list(c.indices) != [*batch, i, j] or list(st.indices) != [*batch, i, j] \
                or st.memref is not c.memref:
            return None
        if len(kloop.iter_args) != 1 or kloop.iter_args[0] is not c.res \
                or st.value is not kloop.res[0]:
            return None
        k, acc = kloop.body.block.args
        result = kloop.body.block.last_op.operands[0]
        scope = [kloop.body.block]
        fixed = {kloop.body.block.last_op}
        M, N = ext[-2], ext[-1]
    else:
        return None
    add = result.op if isinstance(result, OpResult) else None
    if not isinstance(add, arith.AddfOp) or acc not in add.operands or add.lhs is add.rhs:
        return None
    mul = (add.rhs if add.lhs is acc else add.lhs).op if isinstance(
        add.rhs if add.lhs is acc else add.lhs, OpResult) else None
    if not isinstance(mul, arith.MulfOp) or len(list(acc.uses)) != 1 \
            or len(list(mul.result.uses)) != 1:
        return None
    found = None
    for x, y in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
        a = _operand(x, scope, batch, i, k)
        b = _operand(y, scope, batch, j, k)
        if a is not None and b is not None:
            found = (a, b)
            break
    if found is None:
        return None
    a, b = found
    mine = {*a.ops, *b.ops, mul, add, *fixed}
    if any(o not in mine for sc in scope for o in body_ops(sc)):
        return None  # anything else in the loops: not a matmul
    if any(id(x) == id(y) for x in a.ops for y in b.ops):
        return None
    C = c.memref
    if not _f32_matrix(C) or shape(C) != (*ext[: len(batch)], M, N):
        return None
    for o in (*a.ops, *b.ops):
        if isinstance(o, memref.LoadOp) and (o.memref is C or may_overlap(C, o.memref)):
            return None
    for op_, ext_own in ((a, M), (b, N)):
        want = (ext_own, K) if op_.k_contig else (K, ext_own)
        if op_.plain and shape(op_.load.memref)[-2:] != want:
            return None
    return Matmul(par, a, b, C, c, batch, tuple(ext[: len(batch)]), i, j, k, M, N, K)


# ------------------------------------------------------------------------------ row reduction


@dataclass
class RowReduce:
    loop: scf.ForOp
    combiner: Operation  # the op combining the iter_arg with one element


def match_row_reduce(par: Operation) -> RowReduce | None:
    """band { pure pre-ops; r = scf.for iter_args(acc) { pure; acc' = combine(acc, v) }; post }"""
    if not isinstance(par, scf.ParallelOp) or band_ranges(par) is None:
        return None
    ops = body_ops(par.body.block)
    loops = [o for o in ops if isinstance(o, scf.ForOp)]
    if len(loops) != 1 or any(o.regions for o in ops if o is not loops[0]):
        return None
    loop = loops[0]
    for o in ops[: ops.index(loop)]:
        if not (is_pure(o) or isinstance(o, memref.LoadOp)):
            return None
    if len(loop.iter_args) != 1 \
            or None in (const_int(loop.lb), bound(loop.ub), const_int(loop.step)):
        return None
    if not isinstance(loop.iter_args[0].type, builtin.Float32Type | builtin.Float64Type):
        return None
    inner = list(loop.body.block.ops)
    for o in inner[:-1]:
        if not (is_pure(o) or isinstance(o, memref.LoadOp)):
            return None
    acc = loop.body.block.args[1]
    yielded = inner[-1].operands[0]
    if not isinstance(yielded, OpResult) or yielded.op.name not in COMBINERS:
        return None
    comb = yielded.op
    if len(list(acc.uses)) != 1 or acc not in comb.operands or comb.operands[0] is comb.operands[1]:
        return None
    return RowReduce(loop, comb)


def row_shape(par: Operation) -> tuple[tuple[int, ...], int] | None:
    """(rows, row length) of a row reduction with unit bounds."""
    rr = match_row_reduce(par)
    if rr is None:
        return None
    rows = unit_extents(par)
    n = _unit_loop(rr.loop)
    if rows is None or n is None:
        return None
    return rows, n


@dataclass
class RowNest:
    par: scf.ParallelOp
    role: str  # scalar (once per row) | map (per element of the row) | reduce
    col: SSAValue | None  # the iv walking the row
    zeros: list[SSAValue]  # band ivs of extent 1 (always 0)
    reduce: RowReduce | None = None


@dataclass
class RowGroup:
    rows: tuple[int, ...]
    n: int
    nests: list[RowNest]
    kind: dict[SSAValue, str] = field(default_factory=dict)  # buffer -> row | scalar | other
    written: set[SSAValue] = field(default_factory=set)


def row_nest(par: Operation, rows: tuple[int, ...], n: int) -> RowNest | None:
    if not isinstance(par, scf.ParallelOp):
        return None
    ext = unit_extents(par)
    if ext is None or ext[: len(rows)] != rows:
        return None
    args = list(par.body.block.args)
    extra = ext[len(rows):]
    if not extra and row_shape(par) == (rows, n):
        rr = match_row_reduce(par)
        return RowNest(par, "reduce", rr.loop.body.block.args[0], [], rr)
    if not _straight_line(body_ops(par.body.block)):
        return None
    if extra == (n,) and (isinstance(n, Sym) or n > 1):
        return RowNest(par, "map", args[-1], [])
    if all(e == 1 for e in extra):
        return RowNest(par, "scalar", None, args[len(rows):])
    return None


def _row_access_kind(a: Access, row_ivs, nest: RowNest, rows, n) -> str:
    nr = len(rows)
    idx = a.indices
    if idx[:nr] != row_ivs:
        return "other"
    rest = idx[nr:]
    if nest.col is not None and rest == [nest.col] and shape(a.mem) == (*rows, n):
        return "row"
    if all(const_int(x) == 0 or x in nest.zeros for x in rest) \
            and shape(a.mem) == (*rows, *[1] * len(rest)):
        return "scalar"
    return "other"


def analyze_row_group(pars: Sequence[Operation], live_out: Callable[[SSAValue], bool],
                      registers: bool = True, private: frozenset = frozenset()
                      ) -> RowGroup | None:
    """Whether consecutive nests `pars` (one at least a row reduction) can run as one kernel with
    one block per row and each thread holding its share of the row in registers:
      - every buffer written in the group is accessed in it at one pattern (the row's element,
        or its per-row scalar) through one value;
      - a per-row scalar read from memory before the group overwrites it is read before a block
        reduction's barrier, so no thread reads the new value early;
      - no buffer the kernel writes to memory (`live_out`) overlaps a different one it reads,
        unless it is in `private` (the caller gives it memory of its own).
    Without `registers` (a row too long for them) threads stride over the row, re-reading it
    from memory, so no row-sized buffer may be written."""
    shapes = {row_shape(p) for p in pars} - {None}
    if len(shapes) != 1:
        return None
    rows, n = shapes.pop()
    group = RowGroup(rows, n, [])
    first_store: dict[SSAValue, int] = {}  # buffer -> barrier count at its first store
    last_read: dict[SSAValue, int] = {}  # buffer -> barrier count at its last read before that
    barriers = 0
    for par in pars:
        nest = row_nest(par, rows, n)
        if nest is None:
            return None
        group.nests.append(nest)
        row_ivs = list(par.body.block.args[: len(rows)])
        post: set[Operation] = set()
        if nest.role == "reduce":
            ops = list(par.body.block.ops)
            for o in ops[ops.index(nest.reduce.loop) + 1:]:
                post.update(o.walk())
        for a in accesses(par):
            kind = _row_access_kind(a, row_ivs, nest, rows, n)
            if group.kind.setdefault(a.mem, kind) != kind:
                return None
            stamp = barriers + (a.op in post)
            if a.store:
                group.written.add(a.mem)
                first_store.setdefault(a.mem, stamp)
            elif a.mem not in first_store:
                last_read[a.mem] = stamp
        barriers += nest.role == "reduce"
    reads_mem: set[SSAValue] = set()
    for mem, kind in group.kind.items():
        if mem in group.written:
            if kind == "other" or any(m is not mem and root(m) is root(mem) for m in group.kind):
                return None
            if kind == "scalar" and mem in last_read and last_read[mem] >= first_store[mem]:
                return None
        if mem in last_read or kind == "other":
            reads_mem.add(mem)
        if not registers and kind == "row" and mem in group.written:
            return None
    for w in group.written:
        if live_out(w) and w not in private and any(
                r is not w and may_overlap(r, w) for r in reads_mem):
            return None
    return group


# ------------------------------------------------------------------------------ column reduction


@dataclass
class ColReduce:
    """band (p..) { for r.. { for j { C[p.., j] = f(C[p.., j], ...) } } }: every output element
    C[p.., j] reduces over the r loops; j walks C's contiguous dim."""

    nest: Operation  # the scf.parallel, or a top-level scf.for (an empty band)
    band: list[BlockArgument]
    band_extents: tuple[int, ...]
    rloops: list[scf.ForOp]
    jloop: scf.ForOp
    c: SSAValue
    c_load: memref.LoadOp
    store: memref.StoreOp
    combiner: Operation | None  # set when the stored value is combine(C[..], v), v free of C
    n: int

    @property
    def points(self) -> int:
        out = 1
        for e in self.band_extents:
            out *= e
        return out

    @property
    def reduced(self) -> int:
        out = 1
        for r in self.rloops:
            out *= _unit_loop(r)
        return out


def match_col_reduce(nest: Operation) -> ColReduce | None:
    if isinstance(nest, scf.ParallelOp):
        ext = unit_extents(nest)
        ops = body_ops(nest.body.block)
        band = list(nest.body.block.args)
        if ext is None or len(ops) != 1 or not isinstance(ops[0], scf.ForOp):
            return None
        loop = ops[0]
    elif isinstance(nest, scf.ForOp):
        ext, band, loop = (), [], nest
    else:
        return None
    chain = []
    while isinstance(loop, scf.ForOp):
        if loop.iter_args or _unit_loop(loop) is None:
            return None
        chain.append(loop)
        inner = body_ops(loop.body.block)
        loop = inner[0] if len(inner) == 1 and isinstance(inner[0], scf.ForOp) else None
    if len(chain) < 2:
        return None
    *rloops, jloop = chain
    ops = body_ops(jloop.body.block)
    if not _straight_line(ops):
        return None
    stores = [o for o in ops if isinstance(o, memref.StoreOp)]
    if len(stores) != 1 or ops[-1] is not stores[0]:
        return None
    st = stores[0]
    c = st.memref
    j = jloop.body.block.args[0]
    idx = list(st.indices)
    rivs = {r.body.block.args[0] for r in rloops}
    if j not in idx or idx[-1] is not j or any(b not in idx for b in band) \
            or any(x in rivs for x in idx) \
            or any(x not in band and x is not j and const_int(x) != 0 for x in idx):
        return None
    loads = [o for o in ops if isinstance(o, memref.LoadOp)]
    c_loads = [l for l in loads if l.memref is c]
    if len(c_loads) != 1 or list(c_loads[0].indices) != idx:
        return None
    for l in loads:
        if l is not c_loads[0] and may_overlap(l.memref, c):
            return None
    comb = st.value.op if isinstance(st.value, OpResult) else None
    if comb is None or comb.name not in COMBINERS or c_loads[0].res not in comb.operands \
            or len(list(c_loads[0].res.uses)) != 1 or comb.operands[0] is comb.operands[1]:
        comb = None
    return ColReduce(nest, band, tuple(ext), rloops, jloop, c, c_loads[0], st, comb,
                     _unit_loop(jloop))
