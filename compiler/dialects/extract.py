"""One op of a tensor-level function as a module of its own: its tensor operands become the
function's arguments, the constants it reads come along, and so do the producers named by
`keep_producer` (a transpose that a matmul reads in place, say). The numerics check compiles
a failing kernel alone this way, and the autotuner measures a matmul's schedules on it."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from compiler.dialects import aicc


def op_module(op: Operation, name: str = "main",
              keep_producer: Callable[[Operation], bool] | None = None) -> ModuleOp:
    """A module whose function `name` computes `op`'s results from its operands."""
    ops: list[Operation] = []  # op and the producers it keeps, in program order
    args: list[SSAValue] = []

    def visit(o: Operation) -> None:
        for v in o.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner not in ops and (
                    isinstance(owner, aicc.ConstantOp)
                    or (keep_producer is not None and keep_producer(owner))):
                visit(owner)
            elif not (isinstance(owner, Operation) and owner in ops) and v not in args:
                args.append(v)
        ops.append(o)

    visit(op)
    block = Block(arg_types=[v.type for v in args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(args, block.args))
    last = None
    for o in ops:
        last = o.clone(value_mapper=mapping)
        block.add_op(last)
    block.add_op(func.ReturnOp(*last.results))
    f = func.FuncOp(name, ([v.type for v in args], [r.type for r in op.results]), Region(block))
    return ModuleOp([f])


__all__ = ["op_module"]
