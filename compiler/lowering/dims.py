"""Dynamic dims below the tensor level.

At the tensor level a dynamic dim is `?` with its symbolic expression in the type's encoding
(`tensor<?x768xf32, "batch*seq">`, see compiler/symbolic.py); nothing else is needed, since
the types themselves say how every size derives from the function's symbols. Bufferization
turns each dynamic dim into index arithmetic: each symbol is read once, at function entry, as a
`memref.dim` of an argument that has it as a dim of its own, and every allocation's dynamic
sizes are computed from those symbols. The symbolic dims of the arguments (inputs, then the
out-parameters) stay on the function as `aicc.arg_dims`, which the runtime reads to bind the
symbols from the inputs' shapes and to size the outputs.

Passes below bufferization read a dynamic dim of a memref with `memref.dim` (`dim_value`);
the LLVM emitter knows every memref's sizes (arguments' from the trailing size parameters the
runtime passes, allocations' and views' from their operands).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint

from compiler.dialects.shapes import shape_of
from compiler.errors import CompileError
from compiler.symbolic import Sym, format_dims, parse_dim, parse_dims, prod

ARG_DIMS_ATTR = "aicc.arg_dims"

__all__ = ["ARG_DIMS_ATTR", "DimMaterializer", "arg_dims", "dim_symbol", "dim_value", "index_symbol",
           "memref_dims", "record_arg_dims"]


def record_arg_dims(fn: func.FuncOp) -> None:
    """Keep the symbolic dims of the tensor signature (inputs, then results) on the function,
    before bufferization drops the encodings; nothing for a static function."""
    types = [*fn.function_type.inputs, *fn.function_type.outputs]
    encs = []
    for t in types:
        dyn = [d for d in shape_of(t) if isinstance(d, Sym)] if isinstance(t, TensorType) else []
        encs.append(format_dims(dyn))
    if any(encs):
        fn.attributes[ARG_DIMS_ATTR] = ArrayAttr([StringAttr(e) for e in encs])


def arg_dims(fn: func.FuncOp) -> list[list[int | Sym]] | None:
    """The dynamic dims' expressions of each argument of a bufferized function (inputs, then
    out-parameters), or None for a static function."""
    attr = fn.attributes.get(ARG_DIMS_ATTR)
    if attr is None:
        return None
    return [parse_dims(a.data) for a in attr.data]


class DimMaterializer:
    """Symbolic sizes of a bufferized function as index values."""

    def __init__(self, fn: func.FuncOp, args: Sequence[SSAValue] | None = None):
        self.fn = fn
        self.args = list(args if args is not None else fn.body.block.args)
        self.dims = arg_dims(fn) or []
        self.symbols: dict[str, SSAValue] = {}

    def _symbol(self, name: str) -> SSAValue:
        if name in self.symbols:
            return self.symbols[name]
        for arg, dyn in zip(self.args, self.dims):
            shape = arg.type.get_shape()
            it = iter(dyn)
            for i, d in enumerate(shape):
                if d != DYNAMIC_INDEX:
                    continue
                if next(it) == Sym.var(name):
                    self.symbols[name] = v = self._read(arg, i, name)
                    return v
        raise CompileError(f"@{self.fn.sym_name.data}: the dimension '{name}' is not a dim of any "
                           "input, so no call can give its value")

    def _read(self, arg: SSAValue, i: int, name: str) -> SSAValue:
        """`memref.dim arg, i` at function entry: the one an earlier pass (bufferize, for
        plan-memory) put there, else a new one."""
        for op in self.fn.body.block.ops:  # the entry's leading reads only: they dominate all
            if not isinstance(op, memref.DimOp | arith.ConstantOp):
                break
            if isinstance(op, memref.DimOp) and op.source is arg and index_symbol(op.index) == i:
                return op.result
        b = Builder(InsertPoint.at_start(self.fn.body.block))
        idx = b.insert(arith.ConstantOp(IntegerAttr(i, IndexType()))).result
        v = b.insert(memref.DimOp(arg, idx)).result
        v.name_hint = name
        return v

    def value(self, b: Builder, d: int | Sym) -> SSAValue:
        """`d` computed before `b`'s insertion point."""
        def const(c: int) -> SSAValue:
            return b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result

        if not isinstance(d, Sym):
            return const(d)
        total: SSAValue | None = None
        for mono, coef in d.terms.items():
            term: SSAValue | None = None
            for s in mono:
                v = self._symbol(s)
                term = v if term is None else b.insert(arith.MuliOp(term, v)).result
            if term is None:
                term = const(coef)
            elif coef != 1:
                term = b.insert(arith.MuliOp(term, const(coef))).result
            total = term if total is None else b.insert(arith.AddiOp(total, term)).result
        return total if total is not None else const(0)

    def sizes(self, b: Builder, shape: Sequence[int | Sym]) -> list[SSAValue]:
        """The dynamic sizes (one per Sym dim, in order) of an allocation of `shape`."""
        return [self.value(b, d) for d in shape if isinstance(d, Sym)]


def dim_value(b: Builder, v: SSAValue, i: int) -> int | SSAValue:
    """Dim `i` of the memref `v`: an int when static, else a `memref.dim` inserted at `b`."""
    d = v.type.get_shape()[i]
    if d != DYNAMIC_INDEX:
        return d
    idx = b.insert(arith.ConstantOp(IntegerAttr(i, IndexType()))).result
    return b.insert(memref.DimOp(v, idx)).result


def dim_symbol(v: SSAValue, pos: int):
    """The symbolic size (a Sym) of the dynamic dim `pos` of the memref `v`, read from the
    function's aicc.arg_dims for an argument and from the index arithmetic of an allocation's
    size; None when neither says."""
    if isinstance(v, BlockArgument):
        fn = v.block.parent_op()
        dims = arg_dims(fn) if isinstance(fn, func.FuncOp) else None
        if not dims or v.index >= len(dims):
            return None
        k = list(v.type.get_shape()[:pos + 1]).count(DYNAMIC_INDEX) - 1
        return dims[v.index][k] if k < len(dims[v.index]) else None
    owner = v.owner
    k = list(v.type.get_shape()[:pos + 1]).count(DYNAMIC_INDEX) - 1
    if isinstance(owner, memref.AllocOp):
        return index_symbol(owner.dynamic_sizes[k])
    if isinstance(owner, memref.ViewOp):
        return index_symbol(owner.sizes[k]) if k < len(owner.sizes) else None
    if isinstance(owner, memref.ExpandShapeOp):
        return index_symbol(owner.output_shape[k]) if k < len(owner.output_shape) else None
    if isinstance(owner, memref.CollapseShapeOp):
        src = memref_dims(owner.src)
        group = owner.reassociation.data[pos].data
        return None if src is None else prod(src[i.value.data] for i in group)
    if isinstance(owner, memref.CastOp):
        src = memref_dims(owner.source)
        return None if src is None else src[pos]
    return None


def memref_dims(v: SSAValue) -> list[int | Sym] | None:
    """The sizes of memref `v`, each an int or the Sym of a dynamic dim; None when a dynamic
    dim's expression is not known (see dim_symbol). A function's `memref<?xi8>` arena argument
    (plan-memory's) has its `aicc.workspace_dynamic` bytes."""
    out: list[int | Sym] = []
    for i, d in enumerate(v.type.get_shape()):
        if d != DYNAMIC_INDEX:
            out.append(d)
            continue
        s = dim_symbol(v, i)
        if s is None and isinstance(v, BlockArgument) and i == 0:
            fn = v.block.parent_op()
            ws = fn.attributes.get("aicc.workspace_dynamic") if isinstance(fn, func.FuncOp) \
                else None
            if ws is not None and v.index == len(v.block.args) - 1:
                s = parse_dim(ws.data)
        if s is None:
            return None
        out.append(s)
    return out


def index_symbol(v: SSAValue):
    """The Sym an index value computes from the function's dims, or None."""
    o = v.owner
    if isinstance(o, arith.ConstantOp) and isinstance(o.value, IntegerAttr):
        return o.value.value.data
    if isinstance(o, memref.DimOp):
        i = index_symbol(o.index)
        return dim_symbol(o.source, i) if isinstance(i, int) else None
    if isinstance(o, arith.MuliOp | arith.AddiOp | arith.SubiOp):
        a, b = index_symbol(o.lhs), index_symbol(o.rhs)
        if a is None or b is None:
            return None
        return a * b if isinstance(o, arith.MuliOp) else a + b if isinstance(o, arith.AddiOp) \
            else a - b
    if isinstance(o, arith.IndexCastOp):
        return index_symbol(o.input)
    return None
