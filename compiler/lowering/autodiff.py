"""autodiff: reverse-mode automatic differentiation of a function of the aicc dialect.

The function must return one float tensor, the value to differentiate (a scalar for a loss;
any shape works and means the gradient of its sum). The pass keeps the forward ops, appends
the backward ops, and returns the value followed by one gradient per argument in `wrt`:

    func.func @f(%x: tensor<3xf32>) -> tensor<f32> {                 // before
      %e = aicc.exp %x : tensor<3xf32>
      %s = aicc.reduce_sum %e {axes = array<i64: 0>, keepdims = false} : ...
      func.return %s : tensor<f32>
    }
    func.func @f(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) { // after autodiff{wrt=0}
      ... forward ...
      %one = aicc.constant dense<1.0> : tensor<f32>
      %g = aicc.broadcast_to %one ... -> tensor<3xf32>                 // VJP of reduce_sum
      %dx = aicc.mul %g, %e : ...                                      // VJP of exp
      func.return %s, %dx : tensor<f32>, tensor<3xf32>
    }

The backward graph is ordinary aicc IR, so the graph passes, fusion, tiling and every target
apply to it unchanged. Each op's vector-Jacobian product is a rule in `VJP_RULES` (see
compiler/lowering/vjp_rules.py), written with aicc ops through a `VJPBuilder`. Ops that are
not differentiable (comparisons, argmax, integer arithmetic) pass no gradient: values of
integer or bool type never carry one. A float op with no rule on the path from an argument
in `wrt` to the result is an UnsupportedOpError naming it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import AnyFloat, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from compiler.dialects import aicc
from compiler.dialects.shapes import element_type_of, shape_of
from compiler.errors import CompileError, UnsupportedOpError

Grad = SSAValue | None
Rule = Callable[["VJPBuilder", Operation, SSAValue], Sequence[Grad]]

VJP_RULES: dict[type[Operation], Rule] = {}
# Modules whose import registers rules (with @vjp); loaded on the pass's first use.
_RULE_MODULES = ("compiler.lowering.vjp_rules", "compiler.lowering.vjp_tensor_op")


def vjp(*op_types: type[Operation]) -> Callable[[Rule], Rule]:
    """Register `rule(b, op, g) -> [gradient per operand]` as the VJP of each of `op_types`.

    `g` is the cotangent of the op's result (same type); the rule returns, for each operand,
    its contribution to that operand's gradient (exactly the operand's type) or None where the
    operand gets no gradient (an index, a condition, a constant-like operand)."""

    def register(rule: Rule) -> Rule:
        for t in op_types:
            if t in VJP_RULES:
                raise ValueError(f"{t.name} has two VJP rules")
            VJP_RULES[t] = rule
        return rule

    return register


@functools.cache
def _load_rules() -> None:
    for module in _RULE_MODULES:
        importlib.import_module(module)


def rule_for(op: Operation) -> Rule | None:
    _load_rules()
    for t in type(op).__mro__:
        if t in VJP_RULES:
            return VJP_RULES[t]
    return None


def differentiable(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and isinstance(element_type_of(v), AnyFloat)


class VJPBuilder:
    """Emits backward ops at one insertion point, with the helpers every rule needs."""

    def __init__(self, builder: Builder):
        self.builder = builder

    def emit(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    def constant(self, value: float | np.ndarray, like: SSAValue, shape: Sequence[int] = ()) -> SSAValue:
        """A constant of `like`'s element type (a 0-d scalar unless `shape`, which broadcasts)."""
        dtype = aicc.numpy_dtype(element_type_of(like))
        return self.emit(aicc.ConstantOp.from_array(np.broadcast_to(np.asarray(value, dtype), shape).copy()))

    def unbroadcast(self, g: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`g` summed over the dims NumPy broadcasting added to reach its shape from `shape`."""
        gs = shape_of(g)
        shape = tuple(shape)
        if gs == shape:
            return g
        lead = len(gs) - len(shape)
        axes = [i for i in range(len(gs)) if i < lead or (shape[i - lead] == 1 and gs[i] != 1)]
        if axes:
            g = self.emit(aicc.ReduceSumOp(g, axes, keepdims=True))
        if shape_of(g) != shape:
            g = self.emit(aicc.ReshapeOp(g, shape))
        return g

    def broadcast(self, g: SSAValue, shape: Sequence[int]) -> SSAValue:
        return g if shape_of(g) == tuple(shape) else self.emit(aicc.BroadcastToOp(g, shape))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(aicc.AddOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(aicc.SubOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(aicc.MulOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(aicc.DivOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.emit(aicc.NegOp(a))

    def scale(self, a: SSAValue, factor: float) -> SSAValue:
        return self.mul(a, self.constant(factor, a))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(aicc.SelectOp(cond, a, b))

    def compare(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(aicc.CompareOp(predicate, a, b))

    def zeros(self, like: SSAValue) -> SSAValue:
        return self.constant(0.0, like, shape_of(like))


def _check_wrt(idx: Sequence[int], n_args: int) -> list[int]:
    if not idx:
        raise CompileError("autodiff: wrt names no argument")
    for i in idx:
        if not 0 <= i < n_args:
            raise CompileError(f"autodiff: argument {i} out of range: the function has {n_args} arguments")
    return list(idx)


def differentiate(fop: func.FuncOp, wrt: Sequence[int]) -> None:
    """Append the backward pass to `fop` (in place) and return its gradients after the value."""
    block = fop.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    if len(ret.arguments) != 1:
        raise CompileError(
            f"autodiff: the function must return one array to differentiate, it returns {len(ret.arguments)}"
        )
    out = ret.arguments[0]
    args = [block.args[i] for i in wrt]
    for i, a in zip(wrt, args):
        if not differentiable(a):
            raise CompileError(f"autodiff: argument {i} is {a.type}, not a float tensor: it has no gradient")
    if not differentiable(out):
        raise CompileError(f"autodiff: the result is {out.type}, not a float tensor: it has no gradient")

    # The ops on a path from an argument in `wrt` to the result need a cotangent.
    active: set[SSAValue] = set(args)
    forward = [op for op in block.ops if op is not ret]
    for op in forward:
        if any(v in active for v in op.operands):
            active.update(r for r in op.results if differentiable(r))

    b = VJPBuilder(Builder(InsertPoint.before(ret)))
    cotangent: dict[SSAValue, SSAValue] = {}
    if out in active:
        cotangent[out] = b.constant(1.0, out, shape_of(out))
    for op in reversed(forward):
        gs = [cotangent.get(r) for r in op.results]
        if all(g is None for g in gs):
            continue
        if len(op.results) != 1:
            raise UnsupportedOpError(op.name, f"autodiff: no gradient rule for {op.name} (several results)")
        rule = rule_for(op)
        if rule is None:
            raise UnsupportedOpError(op.name, f"autodiff: no gradient rule for {op.name}")
        grads = rule(b, op, gs[0])
        if len(grads) != len(op.operands):
            raise CompileError(f"autodiff: the rule of {op.name} returned {len(grads)} gradients "
                               f"for {len(op.operands)} operands")
        for v, g in zip(op.operands, grads):
            if g is None or v not in active:
                continue
            if g.type != v.type:
                raise CompileError(f"autodiff: the rule of {op.name} gave a gradient of type {g.type} "
                                   f"for an operand of type {v.type}")
            prev = cotangent.get(v)
            cotangent[v] = g if prev is None else b.add(prev, g)
    grads = [cotangent[a] if a in cotangent else b.zeros(a) for a in args]
    ret.operands = [out, *grads]
    fop.function_type = func.FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in ret.operands]
    )


@dataclass(frozen=True)
class ReverseModeAD(ModulePass):
    """Differentiate `func` (default: the module's only function) with respect to the arguments
    numbered in `wrt` (`autodiff{wrt=0,1}`); the function then returns (value, *gradients)."""

    name = "autodiff"

    wrt: tuple[int, ...] = (0,)
    func: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        funcs = [f for f in op.ops if isinstance(f, func.FuncOp)]
        if self.func:
            funcs = [f for f in funcs if f.sym_name.data == self.func]
            if not funcs:
                raise CompileError(f"autodiff: no function named {self.func}")
        elif len(funcs) != 1:
            raise CompileError(f"autodiff: the module has {len(funcs)} functions: name one with func=")
        fop = funcs[0]
        differentiate(fop, _check_wrt(self.wrt, len(fop.body.block.args)))


__all__ = ["ReverseModeAD", "VJPBuilder", "VJP_RULES", "differentiate", "rule_for", "vjp"]
