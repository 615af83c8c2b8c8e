"""The row_reduce kernel kind: rows of a group of loop nests (softmax, layernorm, a row sum)
that one block finishes on its own.

    row_reduce   one block per row runs all the group's nests; thread t holds the row's
                 elements t + blockDim.x * e in registers (one read of the input, one write of
                 the output); reductions combine with __shfl_xor_sync and a __shared__ array

A row too long for registers (no tile) takes threads striding over it instead, and a lone
reduction that is no row group (see patterns.analyze_row_group) the strided form of its loop.
"""

from __future__ import annotations

from xdsl.dialects import builtin
from xdsl.ir import Operation, OpResult, SSAValue

from compiler.codegen.cuda.common import KernelWriter, c_type
from compiler.codegen.cuda.patterns import accesses, analyze_row_group, match_row_reduce


def emit_row_reduce(w: KernelWriter, ops: list[Operation]) -> None:
    """One block per row of the group: the group's nests in order, each over the row's
    elements (registers with a tile, a strided loop without), reductions combined over the
    block; a lone reduction that forms no group goes to emit_row_reduce_strided."""
    nests = w.loop_nests(ops)
    tile = w.k.tile_dims
    nthreads = w.k.block_dims[0]
    group = analyze_row_group(nests, w.live_out, registers=tile is not None,
                              private=frozenset(private_buffers(nests)))
    if group is None:
        if tile is None and len(nests) == 1 and match_row_reduce(nests[0]) is not None:
            return emit_row_reduce_strided(w, nests[0], nthreads)
        w.fail("its nests do not form a row group (see analyze_row_group)")
    elems = tile[0] if tile is not None else None
    n = group.n
    if nthreads % 32 or (elems is not None and elems * nthreads < n):
        w.fail(f"block {nthreads} x tile {elems} does not cover rows of {n}")
    L = w.line
    if elems is not None:
        L(f"// one block per row of {n}: thread t holds elements t + {nthreads} * e, "
          f"e < {elems}, in registers")
    else:
        L(f"// one block per row of {n}: threads stride over the row")
    if any(x.role == "reduce" for x in group.nests) and nthreads > 32:
        L("__shared__ float red[2][32];" if not any(
            isinstance(x.reduce.loop.iter_args[0].type, builtin.Float64Type)
            for x in group.nests if x.reduce) else "__shared__ double red[2][32];")
    rows = w.split_linear("blockIdx.x", group.rows)
    _register_hooks(w, group, elems)
    slot = 0
    for nest in group.nests:
        args = nest.par.body.block.args
        for a, name in zip(args, rows):
            w.names[a] = name
        for z in nest.zeros:
            w.names[z] = "0"
        L(f"// {nest.role}")
        if nest.role == "scalar":
            w.emit_ops(nest.par.body.block.ops)
        elif nest.role == "map":
            open_elements(w, nest.col, n, nthreads, elems)
            w.emit_ops(nest.par.body.block.ops)
            close_elements(w, n, nthreads, elems)
        else:
            _emit_reduce_nest(w, nest, n, nthreads, elems, slot)
            slot ^= 1
    w.load_hook = w.store_hook = None


def _register_hooks(w: KernelWriter, group, elems: int | None) -> None:
    """Declare the registers of the group's row buffers (`elems` per thread) and of the
    scalars it writes, and point w's load/store hooks at them: a row is read from memory
    once, and a value reaches memory only when it is read after the kernel."""
    L = w.line
    regs: dict[SSAValue, str] = {}
    for mem, kind in group.kind.items():
        if kind == "row" and elems is not None:
            regs[mem] = w.fresh("row")
            L(f"{c_type(mem.type.element_type)} {regs[mem]}[{elems}];")
        elif kind == "scalar" and mem in group.written:
            regs[mem] = w.fresh("s")
            L(f"{c_type(mem.type.element_type)} {regs[mem]};")
    have: set[SSAValue] = set()  # row buffers whose registers hold the values
    live = {m: w.live_out(m) for m in group.written}

    def load(op):
        mem = op.memref
        kind = group.kind.get(mem)
        if kind == "row" and elems is None:
            return None  # strided: read from memory every time
        if kind == "row":
            ref = f"{regs[mem]}[e]"
            if mem not in have:  # the first read: from memory, once
                L(f"{ref} = {w.addr(mem, op.indices)};")
                have.add(mem)
            return ref
        if kind == "scalar" and mem in have:
            return regs[mem]
        return None  # read from memory

    def store(op, value):
        mem = op.memref
        kind = group.kind[mem]
        have.add(mem)
        if kind == "row":
            L(f"{regs[mem]}[e] = {value};")
            if live[mem]:
                L(f"{w.addr(mem, op.indices)} = {value};")
        else:
            L(f"{regs[mem]} = {value};")
            if live[mem]:
                L(f"if (threadIdx.x == 0) {w.addr(mem, op.indices)} = {value};")
        return True

    w.load_hook, w.store_hook = load, store


def _emit_reduce_nest(w: KernelWriter, nest, n: int, nthreads: int, elems: int | None,
                      slot: int) -> None:
    """A reducing nest: the ops before its loop, each thread's partial over its elements,
    the partials combined over the block (through `red[slot]`), then the ops after it."""
    L = w.line
    loop, comb = nest.reduce.loop, nest.reduce.combiner
    ops = list(nest.par.body.block.ops)
    at = ops.index(loop)
    w.emit_ops(ops[:at])
    ct, expr, ident = w.combiner(comb, loop.iter_args[0].type)
    acc = w.fresh("acc")
    L(f"{ct} {acc} = {ident};")
    w.names[loop.body.block.args[1]] = acc
    open_elements(w, nest.col, n, nthreads, elems)
    w.emit_ops(loop.body.block.ops)
    w.assign_yield([acc], loop.body.block)
    close_elements(w, n, nthreads, elems)
    block_reduce(w, acc, ident, expr, nthreads, slot)
    w.define(loop.results[0], expr.format(a=w.val(loop.iter_args[0]), b=acc))
    w.emit_ops(ops[at + 1:])


def private_buffers(nests) -> set[SSAValue]:
    """Buffers of their own (not arena views) that the kernel writes."""
    return {a.mem for n in nests for a in accesses(n)
            if a.store and isinstance(a.mem, OpResult) and a.mem.op.name == "memref.alloc"}


def block_reduce(w: KernelWriter, acc: str, ident: str, expr: str, nthreads: int,
                 slot: int) -> None:
    """Combine `acc` over the block: warp shuffles, the warps' partials through shared
    memory, then every warp combines the partials the same way, so every thread ends
    with the same total after one barrier."""
    f = lambda a, b: expr.format(a=a, b=b)  # noqa: E731
    L = w.line
    nw = nthreads // 32
    L(f"// block reduction: within each warp, then across the {nw} warps' partials")
    L("#pragma unroll")
    L("for (int o = 16; o > 0; o >>= 1)")
    L(f"  {acc} = {f(acc, f'__shfl_xor_sync(0xffffffffu, {acc}, o)')};")
    if nthreads <= 32:
        return
    L(f"if ((threadIdx.x & 31) == 0) red[{slot}][threadIdx.x >> 5] = {acc};")
    L("__syncthreads();")
    L(f"{acc} = " + (f"red[{slot}][threadIdx.x & 31];" if nw == 32 else
                     f"(threadIdx.x & 31) < {nw} ? red[{slot}][threadIdx.x & 31] : {ident};"))
    L("#pragma unroll")
    L("for (int o = 16; o > 0; o >>= 1)  // a full butterfly: every lane gets the total")
    L(f"  {acc} = {f(acc, f'__shfl_xor_sync(0xffffffffu, {acc}, o)')};")


def open_elements(w: KernelWriter, col: SSAValue, n: int, nthreads: int,
                  elems: int | None) -> None:
    """Open the loop over a thread's elements of the row (`col` names the element): e < elems
    unrolled over registers, guarded when the block overhangs the row; without elems, a loop
    striding by the block."""
    if elems is None:
        j = w.fresh("j")
        w.line(f"for ({w.idx} {j} = threadIdx.x; {j} < {n}; {j} += {nthreads}) {{")
        w.ind += 1
        w.names[col] = j
        return
    w.line("#pragma unroll")
    w.line(f"for (int e = 0; e < {elems}; ++e) {{")
    w.ind += 1
    j = w.fresh("j")
    w.line(f"const {w.idx} {j} = threadIdx.x + e * {nthreads};")
    w.names[col] = j
    if elems * nthreads != n:
        w.line(f"if ({j} < {n}) {{")
        w.ind += 1


def close_elements(w: KernelWriter, n: int, nthreads: int, elems: int | None) -> None:
    """Close what open_elements opened."""
    if elems is not None and elems * nthreads != n:
        w.ind -= 1
        w.line("}")
    w.ind -= 1
    w.line("}")


def emit_row_reduce_strided(w: KernelWriter, par, nthreads: int) -> None:
    """One block per row, threads striding over a row too long for registers."""
    rr = match_row_reduce(par)
    loop, comb = rr.loop, rr.combiner
    ct, expr, ident = w.combiner(comb, loop.iter_args[0].type)
    ops = list(par.body.block.ops)
    at = ops.index(loop)
    if nthreads > 32:
        w.line(f"__shared__ {ct} red[1][32];")
    w.band_ivs(par, "blockIdx.x")
    w.emit_ops(ops[:at])
    init = w.val(loop.iter_args[0])
    lb, step = w.val(loop.lb), w.val(loop.step)
    accs = w.emit_for(loop, lb=f"{lb} + threadIdx.x * {step}",
                      step=f"{nthreads} * {step}", inits=[ident])
    block_reduce(w, accs[0], ident, expr, nthreads, 0)
    w.line("if (threadIdx.x != 0) return;")
    w.define(loop.results[0], expr.format(a=init, b=accs[0]))
    w.emit_ops(ops[at + 1:])

