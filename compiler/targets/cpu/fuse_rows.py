"""fuse-rows: row-wise kernels (softmax, log-softmax, layer norm, RMS norm, ...) as one loop nest
per row.

Runs on linalg on memrefs, after bufferize and before plan-memory. A softmax reaches it as a
chain of linalg ops (fills, reductions over the last axis, elementwise ops that read the row's
reduced values broadcast), each of which linalg-to-loops would turn into its own loop nest over
the whole tensor, with full-size temporaries between them. All of them share a leading band of
parallel dims, the rows, and each reads what the others write only at its own row. This pass
emits such a run of ops as ONE scf.parallel over the rows:

    scf.parallel (%r) = (0) to (256) {                 // one row per iteration: threads on the CPU
      %m = memref.alloca() : memref<1xf32>              // per-row temporaries: a scalar ...
      %e = memref.alloca() : memref<1000xf32>           // ... or one row, which stays in L1
      max over the row; exp, store and sum in one pass; divide
    } {aicc.kernel = "rows"}

Grouping. A run of consecutive linalg ops (only allocs, constants, globals, reshape views and
deallocs may sit between them; they move out of the way) forms a group when
  * each op's output maps lead with parallel loop dims (its row dims); the group's rows are the
    longest prefix on which all its ops' row ranges agree (at least one dim);
  * a buffer written in the group is read and written only at the accessing op's own row (the
    first k results of every map are its row dims, in order), and only through the same SSA
    value, not a reshaped view;
  * no op is a contraction (a reduction dim read by two inputs: a matmul), whose schedule is
    linalg-to-loops' business;
and it is rewritten when it has two ops or more and one of them reduces.

Inside a row, ops run in program order, except that ops with no loop of their own inside the
row (the fill of a row's accumulator) move up as far as dependences allow. Consecutive ops that
loop over one and the same dim j share a loop when each reads what the earlier ones wrote at the
same j and none reads a reduction that loop is still computing ("exp into sum": e = exp(x - m)
is stored and summed in one pass, the sum taking the value without a reload). A reduction over
j carries its accumulator in iter_args with its combiner marked reassoc, as linalg-to-loops
does, so that LLVM vectorizes it. A temporary that only the group uses shrinks to its row: a
memref.alloca of the dims after the row dims (at most ROW_BUFFER_BYTES; a larger one keeps its
full buffer); its stores are dropped when every read of it takes the stored value directly.

The result is bit-for-bit the arithmetic of the unfused loops except for the order in which
reductions add up (reassoc, as before), so it matches the unfused pipeline to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, FloatAttr, IndexType, IntegerAttr, MemRefType, ModuleOp, StringAttr, TensorType
from xdsl.dialects.linalg import abstract_ops, ops as linalg
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.lowering.dims import dim_symbol, dim_value
from compiler.lowering.linalg_to_loops import REASSOCIABLE, combiner_flags
from compiler.lowering.loop_builder import IndexBuilder, for_loop, index_product
from compiler.lowering.plan_memory import byte_size
from compiler.lowering.utils import view_root

ROW_BUFFER_BYTES = 64 * 1024
KERNEL_ATTR = "aicc.kernel"
VIEWS = (memref.CollapseShapeOp, memref.ExpandShapeOp)
MOVABLE = (arith.ConstantOp, memref.AllocOp, memref.GetGlobalOp, *VIEWS)

@dataclass(eq=False)
class RowOp:
    """A linalg op on memrefs seen as a candidate member of a row group."""

    op: abstract_ops.LinalgStructuredOperation
    maps: list[AffineMap]
    parallel: list[bool]
    ranges: list[int]
    rows: list[int]  # the parallel dims its output maps lead with, outermost first

    @property
    def n_in(self) -> int:
        return len(self.op.inputs)

    def reads(self) -> list[tuple[SSAValue, AffineMap]]:
        return [(v, m) for v, m in zip(self.op.inputs, self.maps) if isinstance(v.type, MemRefType)]

    def writes(self) -> list[tuple[SSAValue, AffineMap]]:
        return list(zip(self.op.outputs, self.maps[self.n_in:]))

    def read_roots(self) -> set[SSAValue]:
        return {view_root(v) for v, _ in self.reads()}

    def write_roots(self) -> set[SSAValue]:
        return {view_root(v) for v, _ in self.writes()}

    def inner(self, k: int) -> list[int]:
        """The dims that loop inside a row: not row dims, range above one."""
        return [d for d, r in enumerate(self.ranges) if d not in self.rows[:k] and r > 1]

    def reduces(self) -> bool:
        return not all(self.parallel)


def analyze(op: Operation) -> RowOp | None:
    if not isinstance(op, linalg.GenericOp | linalg.FillOp):
        return None
    if op.res or any(isinstance(v.type, TensorType) for v in op.operands):
        return None
    maps = [m.data for m in op.get_indexing_maps()]
    if any(m.num_symbols for m in maps):
        return None
    parallel = [it.data == IteratorType.PARALLEL for it in op.get_iterator_types()]
    ranges: list[int | None] = [None] * len(parallel)
    for v, m in zip(op.operands, maps):
        if isinstance(v.type, MemRefType):
            for pos, (size, e) in enumerate(zip(v.type.get_shape(), m.results)):
                if not isinstance(e, AffineDimExpr):
                    continue
                if size == DYNAMIC_INDEX:
                    key = dim_symbol(v, pos)
                    if key is None:
                        return None  # a dynamic dim whose size we cannot name
                    size = DynRange(v, pos, key)
                if ranges[e.position] is None or (isinstance(ranges[e.position], DynRange)
                                                  and not isinstance(size, DynRange)):
                    ranges[e.position] = size
    if any(r is None for r in ranges):
        return None
    n_in = len(op.inputs)
    for d, par in enumerate(parallel):
        if not par and sum(d in m.used_dims() for m in maps[:n_in]) >= 2:
            return None  # a contraction
    rows: list[int] | None = None
    for m in maps[n_in:]:
        prefix: list[int] = []
        for e in m.results:
            if not isinstance(e, AffineDimExpr) or not parallel[e.position] or e.position in prefix:
                break
            prefix.append(e.position)
        if rows is None:
            rows = prefix
        else:
            n = 0
            while n < min(len(rows), len(prefix)) and rows[n] == prefix[n]:
                n += 1
            rows = rows[:n]
    if not rows:
        return None
    if any(isinstance(r, DynRange) for d, r in enumerate(ranges) if d not in rows):
        return None  # only the row dims may be dynamic: a row's length is static
    return RowOp(op, maps, parallel, ranges, rows)  # type: ignore[arg-type]


@dataclass(frozen=True)
class DynRange:
    """A dynamic loop range: dim `pos` of `memref`, the same as any other whose size is the
    same symbolic expression `key`."""

    memref: SSAValue = field(compare=False)
    pos: int = field(compare=False)
    key: object = None

    def __gt__(self, other) -> bool:  # more than one row: as a large static range
        return True

    def __lt__(self, other) -> bool:
        return False


def _dyn_size(b: Builder, d: DynRange) -> SSAValue:
    """A dynamic range's size: an allocation's own size operand (the allocation may become a
    row buffer and go), else a memref.dim."""
    owner = d.memref.owner
    if isinstance(owner, memref.AllocOp):
        k = list(d.memref.type.get_shape()[:d.pos + 1]).count(DYNAMIC_INDEX) - 1
        return owner.dynamic_sizes[k]
    return dim_value(b, d.memref, d.pos)


def row_local(m: AffineMap, rows: list[int], k: int) -> bool:
    return len(m.results) >= k and all(m.results[t] == AffineDimExpr(rows[t]) for t in range(k))


@dataclass
class RowGroup:
    ops: list[RowOp]
    k: int = 0
    shape: list[int] = field(default_factory=list)

    def __post_init__(self):
        first = self.ops[0]
        self.k = len(first.rows)
        self.shape = [first.ranges[d] for d in first.rows]

    def try_add(self, x: RowOp) -> bool:
        x_shape = [x.ranges[d] for d in x.rows]
        k = 0
        while k < min(self.k, len(x_shape)) and x_shape[k] == self.shape[k]:
            k += 1
        if k < 1:
            return False
        if any(isinstance(o.ranges[d], DynRange) for o in (*self.ops, x) for d in o.rows[k:]):
            return False  # a dynamic dim would become a loop inside the row
        written = {v for o in self.ops for v in o.op.outputs}
        written_roots = {view_root(v) for v in written}
        for v, m in x.reads():
            if view_root(v) in written_roots and (v not in written or not row_local(m, x.rows, k)):
                return False
        for v, _ in x.writes():
            r = view_root(v)
            if r in written_roots and v not in written:
                return False
            for o in self.ops:
                for u, mu in o.reads():
                    if view_root(u) == r and (u != v or not row_local(mu, o.rows, k)):
                        return False
        self.ops.append(x)
        self.k, self.shape = k, self.shape[:k]
        return True

    def worth_fusing(self) -> bool:
        return len(self.ops) >= 2 and any(o.reduces() for o in self.ops)


def find_groups(block: Block) -> list[RowGroup]:
    groups: list[RowGroup] = []
    current: RowGroup | None = None
    for op in block.ops:
        if isinstance(op, (*MOVABLE, memref.DeallocOp)):
            continue
        x = analyze(op)
        if x is not None and current is not None and current.try_add(x):
            continue
        if current is not None and current.worth_fusing():
            groups.append(current)
        current = RowGroup([x]) if x is not None else None
    if current is not None and current.worth_fusing():
        groups.append(current)
    return groups


def _independent(a: RowOp, b: RowOp) -> bool:
    """May b (after a) run before a?"""
    aw, bw = a.write_roots(), b.write_roots()
    return not (bw & (a.read_roots() | aw)) and not (b.read_roots() & aw)


@dataclass
class _Stage:
    ops: list[RowOp]
    kind: str  # "point": no loop in the row; "line": one loop over j; "nest": several loops


class _NestBuilder:
    """Emits one group as an scf.parallel over rows."""

    def __init__(self, group: RowGroup, order: list[RowOp], internal: set[SSAValue],
                 local: list[SSAValue], alias: dict[SSAValue, SSAValue]):
        self.g = group
        self.order = order  # the group's ops in the order the row runs them
        self.k = group.k
        self.internal = internal  # buffers only the group uses
        self.local_values = local  # of those, the ones that shrink to a row
        self.alias = alias  # of those, the ones that live in another buffer
        self.local: dict[SSAValue, SSAValue] = {}
        self.recips: dict[SSAValue, SSAValue] = {}  # a row-invariant divisor -> 1 / it
        self.idx: IndexBuilder | None = None

    # -- accesses

    def dims_of(self, x: RowOp, row_ivs: list[SSAValue]) -> dict[int, SSAValue]:
        assert self.idx is not None
        dims = {d: self.idx.const(0) for d, r in enumerate(x.ranges) if r == 1}
        dims.update({x.rows[t]: row_ivs[t] for t in range(self.k)})
        return dims

    def access(self, b: Builder, v: SSAValue, m: AffineMap, dims) -> tuple[SSAValue, list[SSAValue]]:
        assert self.idx is not None
        while v in self.alias:
            v = self.alias[v]
        if v in self.local:
            exprs = m.results[self.k:] or (AffineConstantExpr(0),)
            return self.local[v], [self.idx.expr(b, e, dims) for e in exprs]
        return v, self.idx.indices(b, m, dims)

    def load(self, b: Builder, v: SSAValue, m: AffineMap, dims) -> SSAValue:
        buf, ix = self.access(b, v, m, dims)
        return b.insert(memref.LoadOp.get(buf, ix)).res

    def store(self, b: Builder, value: SSAValue, v: SSAValue, m: AffineMap, dims) -> None:
        buf, ix = self.access(b, v, m, dims)
        b.insert(memref.StoreOp.get(value, buf, ix))

    def canon(self, x: RowOp, m: AffineMap) -> AffineMap:
        """`m` over canonical dims: the row dims 0..k-1, x's loop dim in the row as k, unit dims 0."""
        inner = x.inner(self.k)
        new: list[AffineExpr] = []
        for d in range(len(x.ranges)):
            if d in x.rows[: self.k]:
                new.append(AffineExpr.dimension(x.rows.index(d)))
            elif d in inner:
                new.append(AffineExpr.dimension(self.k + inner.index(d)))
            else:
                new.append(AffineExpr.constant(0))
        return m.replace_dims_and_symbols(new, [], self.k + len(inner), 0)

    # -- one op at one point of its iteration space

    def emit_body(self, b: Builder, x: RowOp, dims, carried: dict[int, SSAValue],
                  fwd: dict | None, skip_store: set[SSAValue]) -> dict[int, SSAValue]:
        block = x.op.body.block
        mapping: dict[SSAValue, SSAValue] = {}
        for i, (v, m) in enumerate(zip(x.op.inputs, x.maps)):
            arg = block.args[i]
            if not isinstance(v.type, MemRefType):
                mapping[arg] = v
            elif arg.uses:
                key = (v, self.canon(x, m))
                mapping[arg] = fwd[key] if fwd is not None and key in fwd else self.load(b, v, m, dims)
        for j, (v, m) in enumerate(x.writes()):
            arg = block.args[x.n_in + j]
            if j in carried:
                mapping[arg] = carried[j]
            elif arg.uses:
                mapping[arg] = self.load(b, v, m, dims)
        *body, yield_op = list(block.ops)
        accs = set(carried.values())
        for o in body:
            if isinstance(o, linalg.IndexOp):
                mapping[o.result] = dims[o.dim.value.data]
                continue
            if isinstance(o, arith.DivfOp) and mapping.get(o.rhs) in self.recips:
                clone = arith.MulfOp(mapping.get(o.lhs, o.lhs), self.recips[mapping[o.rhs]],
                                     flags=o.fastmath)
                mapping[o.result] = clone.result
                b.insert(clone)
                continue
            clone = o.clone(value_mapper=mapping)
            if accs and isinstance(clone, REASSOCIABLE) and any(v in accs for v in clone.operands):
                clone.fastmath = combiner_flags(clone)
            b.insert(clone)
        results: dict[int, SSAValue] = {}
        for j, (v, m) in enumerate(x.writes()):
            value = mapping.get(yield_op.operands[j], yield_op.operands[j])
            if j in carried:
                results[j] = value
                continue
            if v not in skip_store:
                self.store(b, value, v, m, dims)
            if fwd is not None:
                fwd[(v, self.canon(x, m))] = value
        return results

    # -- stages

    def stages(self) -> list[_Stage]:
        k = self.k
        stages: list[_Stage] = []
        for x in self.order:
            inner = x.inner(k)
            kind = "point" if not inner else "line" if len(inner) == 1 else "nest"
            if kind == "line" and stages and stages[-1].kind == "line" and self.can_share(stages[-1], x):
                stages[-1].ops.append(x)
            else:
                stages.append(_Stage([x], kind))
        return stages

    def can_share(self, stage: _Stage, x: RowOp) -> bool:
        """May x run in the same loop over j as the ops of `stage`, after them?"""
        first = stage.ops[0]
        if first.ranges[first.inner(self.k)[0]] != x.ranges[x.inner(self.k)[0]]:
            return False
        writes = {v: (w, m) for w in stage.ops for v, m in w.writes()}
        write_roots = {view_root(v) for v in writes}
        read_roots = set().union(*(w.read_roots() for w in stage.ops))
        for v, m in x.reads():
            if view_root(v) not in write_roots:
                continue
            if v not in writes:
                return False
            w, wm = writes[v]
            j = w.inner(self.k)[0]
            if j not in wm.used_dims() or self.canon(w, wm) != self.canon(x, m):
                return False  # a reduction still running, or another element
        return not (x.write_roots() & (write_roots | read_roots))

    def emit_stage(self, b: Builder, stage: _Stage, row_ivs, later: list[RowOp]) -> None:
        assert self.idx is not None
        if stage.kind == "nest":
            self.emit_nest(b, stage.ops[0], row_ivs)
            return
        if stage.kind == "point":
            x = stage.ops[0]
            self.emit_body(b, x, self.dims_of(x, row_ivs), {}, None, set())
            return
        # one loop over j: outputs that do not depend on j accumulate in iter_args
        slots: list[tuple[RowOp, int]] = []
        inits: list[SSAValue] = []
        for x in stage.ops:
            j = x.inner(self.k)[0]
            for jj, (v, m) in enumerate(x.writes()):
                if j not in m.used_dims():
                    slots.append((x, jj))
                    inits.append(self.load(b, v, m, self.dims_of(x, row_ivs)))
        skip = self.dead_stores(stage, later)
        n = stage.ops[0].ranges[stage.ops[0].inner(self.k)[0]]
        hoisted = self.hoist_invariant_reads(b, stage, row_ivs)

        def body(bb: Builder, iv: SSAValue, carried) -> list[SSAValue]:
            fwd: dict = dict(hoisted)
            nexts: list[SSAValue] = []
            for x in stage.ops:
                dims = self.dims_of(x, row_ivs) | {x.inner(self.k)[0]: iv}
                mine = {jj: carried[s] for s, (y, jj) in enumerate(slots) if y is x}
                out = self.emit_body(bb, x, dims, mine, fwd, skip)
                nexts += [out[jj] for y, jj in slots if y is x]
            return nexts

        results = for_loop(b, self.idx.const(0), self.idx.const(n), self.idx.const(1), inits, body)
        for (x, jj), value in zip(slots, results):
            v, m = x.writes()[jj]
            self.store(b, value, v, m, self.dims_of(x, row_ivs))

    def hoist_invariant_reads(self, b: Builder, stage: _Stage, row_ivs) -> dict:
        """Reads that do not depend on the loop's j (a row's max, sum or variance), loaded once
        before the loop; keyed as `emit_body`'s forwarded values. A division by one of them
        becomes a multiplication by its reciprocal, computed here once per row (as ONNX Runtime's
        and PyTorch's softmax kernels do: one divide per row instead of one per element, within
        1.5 ulp of the quotient)."""
        writes = set().union(*(w.write_roots() for w in stage.ops))
        hoisted: dict = {}
        for x in stage.ops:
            block = x.op.body.block
            for i, (v, m) in enumerate(zip(x.op.inputs, x.maps)):
                arg = block.args[i]
                if not isinstance(v.type, MemRefType) or not arg.uses or view_root(v) in writes:
                    continue
                key = (v, self.canon(x, m))
                if self.k in key[1].used_dims():
                    continue
                if key not in hoisted:
                    hoisted[key] = self.load(b, v, m, self.dims_of(x, row_ivs))
                value = hoisted[key]
                if value not in self.recips and any(
                    isinstance(u.operation, arith.DivfOp) and u.index == 1 for u in arg.uses
                ):
                    one = b.insert(arith.ConstantOp(FloatAttr(1.0, value.type))).result
                    self.recips[value] = b.insert(arith.DivfOp(one, value)).result
        return hoisted

    def dead_stores(self, stage: _Stage, later: list[RowOp]) -> set[SSAValue]:
        """Temporaries written in this loop whose every read is a later op of the same loop."""
        dead = set()
        for i, x in enumerate(stage.ops):
            for v, m in x.writes():
                if v not in self.internal or x.inner(self.k)[0] not in m.used_dims():
                    continue
                if x.op.body.block.args[x.n_in + x.op.outputs.index(v)].uses:
                    continue
                others = [o for o in stage.ops if o is not x] + later
                if any(v in o.op.outputs for o in others):
                    continue
                if any(v == u for o in later for u, _ in o.reads()):
                    continue
                dead.add(v)
        return dead

    def emit_nest(self, b: Builder, x: RowOp, row_ivs) -> None:
        """One op with several loops inside the row, ordered as linalg-to-loops orders them."""
        assert self.idx is not None
        inner = x.inner(self.k)
        score = {d: 0 for d in inner}
        for i, (v, m) in enumerate(zip(x.op.operands, x.maps)):
            if isinstance(v.type, MemRefType) and m.results and isinstance(m.results[-1], AffineDimExpr):
                d = m.results[-1].position
                if d in score:
                    score[d] += max(1, v.type.element_count()) * (2 if i >= x.n_in else 1)
        last = max(reversed(inner), key=lambda d: score[d])
        rest = [d for d in inner if d != last]
        order = [d for d in rest if x.parallel[d]] + [d for d in rest if not x.parallel[d]] + [last]
        reg_acc = not x.parallel[last] and all(last not in m.used_dims() for _, m in x.writes())
        base = self.dims_of(x, row_ivs)

        def level(bb: Builder, i: int, dims) -> None:
            if i == len(order) - 1 and reg_acc:
                inits = [self.load(bb, v, m, dims) for v, m in x.writes()]

                def body(b2, iv, carried):
                    out = self.emit_body(b2, x, dims | {last: iv}, dict(enumerate(carried)), None, set())
                    return [out[j] for j in range(len(carried))]

                results = for_loop(bb, self.idx.const(0), self.idx.const(x.ranges[last]),
                                   self.idx.const(1), inits, body)
                for value, (v, m) in zip(results, x.writes()):
                    self.store(bb, value, v, m, dims)
                return
            if i == len(order):
                self.emit_body(bb, x, dims, {}, None, set())
                return
            d = order[i]

            def body(b2, iv, _):
                level(b2, i + 1, dims | {d: iv})
                return []

            for_loop(bb, self.idx.const(0), self.idx.const(x.ranges[d]), self.idx.const(1), [], body)

        level(b, 0, base)

    # -- the nest

    def build(self, before: Operation) -> scf.ParallelOp:
        k = self.k
        outer = Builder(InsertPoint.before(before))
        # the row dims' sizes: ints, or (dynamic) index values read before the nest
        shape = [d if not isinstance(d, DynRange) else _dyn_size(outer, d) for d in self.g.shape]
        zero = outer.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
        count = index_product(outer, shape)
        c = [zero, count, outer.insert(arith.ConstantOp(IntegerAttr(1, IndexType()))).result]
        body = Block(arg_types=[IndexType()])
        par = scf.ParallelOp([c[0]], [c[1]], [c[2]], Region(body))
        par.attributes[KERNEL_ATTR] = StringAttr("rows")
        outer.insert(par)
        body.add_op(scf.ReduceOp())
        self.idx = IndexBuilder(Builder(InsertPoint.before(par)))
        b = Builder(InsertPoint.before(body.last_op))

        # the row's index in each row dim, from the one parallel iv
        row_ivs = [self.idx.const(0)] * k
        nonunit = [t for t in range(k) if self.g.shape[t] > 1]
        rest = body.args[0]
        for t in reversed(nonunit[1:]):
            size = self.idx.const(shape[t]) if isinstance(shape[t], int) else shape[t]
            row_ivs[t] = b.insert(arith.RemUIOp(rest, size)).result
            rest = b.insert(arith.DivUIOp(rest, size)).result
        if nonunit:
            row_ivs[nonunit[0]] = rest

        for v in self.local_values:
            t = v.type
            assert isinstance(t, MemRefType)
            row_shape = list(t.get_shape()[k:]) or [1]
            self.local[v] = b.insert(memref.AllocaOp.get(t.element_type, 64, row_shape)).memref
        stages = self.stages()
        for i, stage in enumerate(stages):
            later = [o for s in stages[i + 1:] for o in s.ops]
            self.emit_stage(b, stage, row_ivs, later)
        for buf in self.local.values():  # a row whose every read was forwarded
            if not buf.uses:
                Rewriter.erase_op(buf.owner)
        return par


def fuse_group(group: RowGroup) -> scf.ParallelOp:
    members = [o.op for o in group.ops]
    member_set = set(members)
    first, last = members[0], members[-1]
    block = first.parent_block()
    assert block is not None
    between: list[Operation] = []
    o = first.next_op
    while o is not None and o is not last:
        if o not in member_set:
            between.append(o)
        o = o.next_op
    for o in between:  # allocs, constants, globals and views first; frees after the nest
        if not isinstance(o, memref.DeallocOp):
            o.detach()
            block.insert_op_before(o, first)

    written = list(dict.fromkeys(v for m in members for v in m.outputs))  # program order
    internal = {
        v for v in written
        if isinstance(v.owner, memref.AllocOp)
        and all(u.operation in member_set or isinstance(u.operation, memref.DeallocOp) for u in v.uses)
    }
    order = row_order(group)
    alias = in_place(order, internal)
    local = [v for v in written if v in internal and v not in alias
             and _row_bytes(v.type, group.k) <= ROW_BUFFER_BYTES]
    nest = _NestBuilder(group, order, internal, local, alias).build(first)
    for m in members:
        Rewriter.erase_op(m)
    for v in [*local, *alias]:
        alloc = v.owner
        for u in list(v.uses):
            Rewriter.erase_op(u.operation)
        Rewriter.erase_op(alloc)
    for o in between:
        if isinstance(o, memref.DeallocOp) and o.parent is not None:
            o.detach()
            block.insert_op_after(o, nest)
    return nest


def row_order(group: RowGroup) -> list[RowOp]:
    """The group's ops in program order, except that ops without a loop of their own in the
    row (fills of an accumulator, a row's scalar arithmetic) move up as far as dependences
    allow, so that the loops around them can share a pass."""
    order = list(group.ops)
    for i in range(len(order)):
        if order[i].inner(group.k):
            continue
        j = i
        while j > 0 and _independent(order[j - 1], order[j]):
            order[j - 1], order[j] = order[j], order[j - 1]
            j -= 1
    return order


def in_place(ops: list[RowOp], internal: set[SSAValue]) -> dict[SSAValue, SSAValue]:
    """Temporaries that can live in the buffer of the op that reads them last: t -> o when
    that op reads t[idx] and writes o[idx] at the same point, each element once, and o has t's
    type and is touched by no other op of the group. `ops` are in the order the row runs them
    (row_order), so "last" is last in that order. Softmax's exp(x - max) then lives in the
    output row, which the division rewrites in place: one row less in L1, and a row too long
    for a stack buffer needs no full-size temporary."""
    alias: dict[SSAValue, SSAValue] = {}
    for t in [v for o in ops for v in o.op.outputs if v in internal]:  # program order
        writers = [o for o in ops if t in o.op.outputs]
        users = [o for o in ops if t in o.op.operands]
        if len(writers) != 1 or not users:
            continue
        b = users[-1]
        reads = [m for v, m in b.reads() if v == t]
        if t in b.op.outputs or len(reads) != 1 or len(b.writes()) != 1:
            continue
        o, mo = b.writes()[0]
        if o.type != t.type or reads[0] != mo or o in alias.values():
            continue
        if any(r > 1 and d not in mo.used_dims() for d, r in enumerate(b.ranges)):
            continue  # b would read an element of t after writing it
        if b.op.body.block.args[b.n_in].uses:
            continue  # b reads its output (a reduction)
        if any(view_root(v) == view_root(o) for x in ops if x is not b for v in x.op.operands):
            continue
        alias[t] = o
    return alias


def _row_bytes(t, k: int) -> int:
    return byte_size(MemRefType(t.element_type, list(t.get_shape()[k:]) or [1]))


@dataclass(frozen=True)
class FuseRows(ModulePass):
    """Runs of row-wise linalg ops on memrefs become one scf.parallel over rows each."""

    name = "fuse-rows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                for group in find_groups(f.body.block):
                    fuse_group(group)


__all__ = ["FuseRows", "KERNEL_ATTR", "ROW_BUFFER_BYTES", "find_groups", "fuse_group"]
