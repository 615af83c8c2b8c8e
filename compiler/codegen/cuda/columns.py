"""The col_reduce kernel kind: a reduction over the leading dims of a buffer, whose kept
contiguous dim runs across threads.

    col_reduce   threads over the kept contiguous dim, each looping over the reduced dims;
                 threadIdx.y splits the loop when there are few outputs

A fill before the reduction becomes its start value, and elementwise nests after it (the
group's epilogues) run on each output in registers (KernelWriter.finish_point).
"""

from __future__ import annotations

from xdsl.ir import Operation

from compiler.codegen.cuda.common import KernelWriter, c_type
from compiler.codegen.cuda.patterns import bound, match_col_reduce, split_main_group
from compiler.symbolic import ceildiv_expr


def emit_col_reduce(w: KernelWriter, ops: list[Operation]) -> None:
    """Thread (x, y) of block b: output j = (b % nblocks) * blockDim.x + x of band point
    b / nblocks; it reduces over the reduced dims (all of them, or every blockDim.y-th with
    the partials summed through __shared__), then finishes the point with the epilogues."""
    found = split_main_group(w.loop_nests(ops), match_col_reduce, lambda cr: cr.c)
    if found is None:
        w.fail("its nests are not [fill] column-reduction [epilogues]")
    cr, group = found
    bx = w.k.block_dims[0]
    by = w.k.block_dims[1] if len(w.k.block_dims) > 1 else 1
    if by > 1 and (cr.combiner is None or by & (by - 1)):
        w.fail("splitting the reduction over threadIdx.y needs a combiner and a power of 2")
    I, L = w.idx, w.line
    n = cr.n
    nblocks = ceildiv_expr(n, bx)
    L(f"// each output C[p, j] reduces over {cr.reduced} values; threadIdx.x walks j "
      f"(coalesced){f', threadIdx.y splits the reduction {by} ways' if by > 1 else ''}")
    band = w.split_linear(f"(blockIdx.x / {nblocks})", cr.band_extents) if cr.band else []
    for a, name in zip(cr.band, band):
        w.names[a] = name
    j = w.fresh("j")
    L(f"const {I} {j} = (blockIdx.x % {nblocks}) * {bx} + threadIdx.x;")
    w.names[cr.jloop.body.block.args[0]] = j
    index = [w.val(x) for x in cr.store.indices]
    t = cr.store.value.type
    ct = c_type(t)
    acc = w.fresh("acc")
    init = w.val(group.fill) if group.fill is not None else None

    def load(op):
        return acc if op is cr.c_load else None

    def store(op, value):
        if op is cr.store:
            w.line(f"{acc} = {value};")
            return True
        return False

    def body(rl_names: list[str]) -> None:
        for r, name in zip(cr.rloops, rl_names):
            w.names[r.body.block.args[0]] = name
        w.load_hook, w.store_hook = load, store
        w.emit_ops(cr.jloop.body.block.ops)
        w.load_hook = w.store_hook = None

    extents = [bound(r.ub) for r in cr.rloops]
    if by == 1:
        L(f"if ({j} >= {n}) return;")
        L(f"{ct} {acc} = {init if init is not None else w.addr(cr.c, index)};")
        names = []
        for ext in extents:
            iv = w.fresh("r")
            L(f"for ({I} {iv} = 0; {iv} < {ext}; ++{iv}) {{")
            w.ind += 1
            names.append(iv)
        body(names)
        for _ in extents:
            w.ind -= 1
            L("}")
        w.finish_point(cr.c, acc, index, group.epilogues)
        return
    _, expr, ident = w.combiner(cr.combiner, t)
    f = lambda a, b: expr.format(a=a, b=b)  # noqa: E731
    L(f"__shared__ {ct} part[{by}][{bx}];")
    L(f"{ct} {acc} = {ident};")
    L(f"if ({j} < {n}) {{")
    w.ind += 1
    rl = w.fresh("rl")
    L(f"for ({I} {rl} = threadIdx.y; {rl} < {cr.reduced}; {rl} += {by}) {{")
    w.ind += 1
    body(w.split_linear(rl, extents))
    w.ind -= 1
    L("}")
    w.ind -= 1
    L("}")
    L(f"part[threadIdx.y][threadIdx.x] = {acc};")
    L("__syncthreads();")
    L("#pragma unroll")
    L(f"for (int s = {by // 2}; s > 0; s >>= 1) {{")
    L(f"  if (threadIdx.y < s) part[threadIdx.y][threadIdx.x] = "
      f"{f('part[threadIdx.y][threadIdx.x]', 'part[threadIdx.y + s][threadIdx.x]')};")
    L("  __syncthreads();")
    L("}")
    L(f"if (threadIdx.y != 0 || {j} >= {n}) return;")
    start = init if init is not None else w.addr(cr.c, index)
    total = w.fresh("v")
    L(f"const {ct} {total} = {f(start, 'part[0][threadIdx.x]')};")
    w.finish_point(cr.c, total, index, group.epilogues)
