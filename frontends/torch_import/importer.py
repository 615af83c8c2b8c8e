"""The walk over an exported graph that builds the aicc function (see the package docstring)."""

from __future__ import annotations

import operator
import os
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.fx.node import map_aggregate
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from compiler.dialects import aicc
from compiler.errors import CompileError, ShapeError, UnsupportedOpError
from compiler.symbolic import SymbolicError, parse_dim
from frontends.graph_builder import GraphBuilder, TracedProgram, narrow_range
from frontends.torch_import.common import (
    CONST_DTYPES,
    NO_OPS,
    TORCH_TO_NP,
    Refused,
    constant_sources,
    fakes,
    first_line,
    np_to_torch,
    op_name,
    static_nodes,
)
from frontends.torch_import.export import export_module, to_torch_inputs
from frontends.torch_import.handlers import HANDLERS

__all__ = ["TorchImporter", "import_torch"]


def _finite(bound) -> int | None:
    """A range bound of torch's value ranges as an int; None for an infinite one."""
    try:
        return int(bound)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def _unbacked(x) -> bool:
    """A SymInt of a size that depends on data (torch's unbacked symbols, u0, u1, ...), not a
    dynamic input dim of `dynamic_shapes` (s0, s1, ...)."""
    return any(str(s).startswith("u") for s in x.node.expr.free_symbols)


def _symbolic(node) -> bool:
    """Does torch give the node a shape that depends on data (an unbacked SymInt)?"""
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
        return _unbacked(val)
    return any(not isinstance(d, int) and _unbacked(d) for v in fakes(val) for d in v.shape)


def _location(node) -> str | None:
    """'file:line' of the innermost forward() frame torch recorded for the node that is not
    torch's own code (a Conv2d inside the user's Sequential: the user's line)."""
    trace = node.meta.get("stack_trace") or ""
    hits = re.findall(r'File "([^"]+)", line (\d+)', trace)
    torch_dir = os.path.dirname(torch.__file__)
    user = [h for h in hits if not os.path.abspath(h[0]).startswith(torch_dir)]
    path, line = (user or hits or [(None, None)])[-1]
    return f"{path}:{line}" if path else None


def _origin(node, loc: str | None) -> str:
    """Where an op came from, for the numerics check: the user's line and the submodule
    that ran it (`model.py:15 2.a:Conv2d`), else the node's name."""
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    path, kind = stack[-1] if stack else ("", "")
    module = f"{path}:{str(getattr(kind, '__name__', kind)).rsplit('.', 1)[-1]}" if path else ""
    if loc and os.path.abspath(loc.rsplit(":", 1)[0]).startswith(os.path.dirname(torch.__file__)):
        loc = None  # torch's own code: the submodule says more
    return " ".join(p for p in (loc, module) if p) or f"torch node {node.name}"


def _bind(node) -> dict[str, Any]:
    """The node's arguments by schema name ('self' is 'input'), defaults filled in."""
    schema = node.target._schema
    out = {}
    for i, a in enumerate(schema.arguments):
        name = "input" if a.name == "self" else a.name
        if i < len(node.args) and not a.kwarg_only:
            out[name] = node.args[i]
        elif a.name in node.kwargs:
            out[name] = node.kwargs[a.name]
        elif a.has_default_value():
            out[name] = a.default_value
        else:
            out[name] = None
    return out


class TorchImporter:
    def __init__(self, module: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes=None):
        self.module = module
        self.name = type(module).__name__
        self.inputs = to_torch_inputs(example_inputs)
        self.dynamic_shapes = dynamic_shapes
        self.node = None
        self.loc: str | None = None
        self.sym_names: dict[str, str] = {}  # torch's symbol (s0) -> its Dim's name (batch)

    # -- symbolic dims ----------------------------------------------------------------------------
    def dim(self, d):
        """A dim of torch's shapes: an int, or (a SymInt of torch.export's dynamic shapes) the
        Sym of its expression, with the user's Dim names."""
        if isinstance(d, int):
            return d
        expr = d.node.expr
        if expr.is_number:
            return int(expr)
        text = re.sub(r"\b[a-z]+\d+\b", lambda m: self.sym_names.get(m.group(0), m.group(0)), str(expr))
        try:
            return parse_dim(text)
        except SymbolicError:
            raise UnsupportedOpError("dynamic shape", f"{self.where}: the dim {expr} is not a "
                                     "polynomial of the dynamic dims", location=self.loc) from None

    def bound_symbol(self, e, size: int) -> None:
        """An op needs `e <= size`: the symbol's range, checked on every call."""
        if not narrow_range(self.dim_ranges, e, size):
            raise self.unsupported(f"a bound on {e} (only a plain symbol can be bounded)")

    def _name_symbols(self, ep, placeholders) -> dict:
        """Map torch's symbols to the Dim names of `dynamic_shapes`, and read their ranges."""
        specs = self.dynamic_shapes
        if isinstance(specs, dict):
            specs = list(specs.values())
        ranges = {}
        for i, node in enumerate(placeholders):
            spec = specs[i] if specs is not None and i < len(specs) else None
            if isinstance(spec, dict):
                items = spec.items()
            elif isinstance(spec, list | tuple):
                items = enumerate(spec)
            else:
                items = ()
            shape = node.meta["val"].shape
            for k, dim in items:
                name = getattr(dim, "__name__", None)
                expr = getattr(shape[k], "node", None)
                if name and expr is not None and expr.expr.is_symbol:
                    self.sym_names[str(expr.expr)] = re.sub(r"\W", "_", name)
        for sym, vr in ep.range_constraints.items():
            name = self.sym_names.get(str(sym), str(sym))
            ranges[name] = (max(_finite(vr.lower) or 1, 1), _finite(vr.upper))
        return ranges

    # -- checks before any IR exists --------------------------------------------------------------
    def constants(self, ep) -> dict[str, np.ndarray]:
        sig = ep.graph_signature
        if sig.buffers_to_mutate:
            names = ", ".join(sorted(set(sig.buffers_to_mutate.values())))
            raise UnsupportedOpError(
                "buffer mutation", f"{self.name} writes to its buffers ({names}) in eval mode; "
                "aicc compiles stateless forward passes"
            )
        sources = constant_sources(ep)
        if sig.inputs_to_lifted_custom_objs:
            raise UnsupportedOpError("custom object", f"{self.name} uses TorchScript custom objects")
        out = {}
        for placeholder, fqn in sources.items():
            t = ep.state_dict[fqn] if fqn in ep.state_dict else ep.constants[fqn]
            out[placeholder] = self.to_numpy(t, f"parameter or buffer '{fqn}'")
        return out

    def check(self, graph, static: set) -> None:
        for node in graph.nodes:
            if node.op == "call_function" and _symbolic(node):
                raise UnsupportedOpError(
                    op_name(node.target), f"{self.name}: node '{node.name}' ({op_name(node.target)}) "
                    "has a shape that depends on the data (e.g. boolean-mask indexing); aicc compiles "
                    "static shapes", location=_location(node))
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for node in graph.nodes:
            if node.op == "call_function":
                name = op_name(node.target)
                if node in static or name in HANDLERS or name in NO_OPS or name == "getitem" \
                        or name == "aten.sym_size.int":
                    continue
            elif node.op in ("placeholder", "output"):
                continue
            else:
                name = f"{node.op} {node.target}"
            counts[name] += 1
            first.setdefault(name, node.name)
        if counts:
            parts = [f"{op} ({n} node{'s' if n > 1 else ''}, first '{first[op]}')" for op, n in counts.items()]
            e = UnsupportedOpError(
                next(iter(counts)),
                f"{self.name}: {len(counts)} unsupported PyTorch operator type"
                f"{'s' if len(counts) > 1 else ''}: " + ", ".join(parts),
            )
            e.ops = dict(counts)
            raise e
        for node in graph.nodes:
            if node.op != "call_function" or node in static:
                continue
            for v in fakes(node.meta.get("val")):
                if v.dtype not in TORCH_TO_NP:
                    raise UnsupportedOpError(
                        "dtype", f"node '{node.name}' ({op_name(node.target)}) computes "
                        f"{str(v.dtype).removeprefix('torch.')} tensors; aicc compiles float32, int32, "
                        "int64 and bool (call .float() on the module)",
                        location=_location(node),
                    )

    static_nodes = staticmethod(static_nodes)

    # -- values ----------------------------------------------------------------------------------
    def to_numpy(self, t, what: str):
        if isinstance(t, torch.Tensor):
            if t.dtype not in CONST_DTYPES:
                raise UnsupportedOpError(
                    "dtype", f"{what} has dtype {str(t.dtype).removeprefix('torch.')}, which aicc "
                    "does not support"
                )
            return np.ascontiguousarray(t.detach().cpu().numpy())
        if isinstance(t, tuple | list):
            return [self.to_numpy(v, what) for v in t]
        return t

    def to_torch(self, v):
        if isinstance(v, np.ndarray):
            return torch.from_numpy(np.array(v))
        if isinstance(v, SSAValue):  # only reached for shape-only ops
            return torch.zeros(aicc.shape_of(v), dtype=np_to_torch(self.g.dtype(v)))
        return v

    def fold(self, node, env):
        args = map_aggregate(node.args, lambda a: self.to_torch(env[a]) if isinstance(a, torch.fx.Node) else a)
        kwargs = map_aggregate(node.kwargs, lambda a: self.to_torch(env[a]) if isinstance(a, torch.fx.Node) else a)
        try:
            with torch.no_grad():
                out = node.target(*args, **kwargs)
        except Exception as e:
            raise CompileError(f"{self.where}: evaluating a constant failed: {first_line(e)}",
                               location=self.loc) from None
        return self.to_numpy(out, f"node '{node.name}'")

    def dtype(self, v) -> np.dtype:
        if isinstance(v, bool):
            return np.dtype(np.bool_)
        if isinstance(v, int):
            return np.dtype(np.int64)
        if isinstance(v, float):
            return np.dtype(np.float32)
        return self.g.dtype(v)

    def operand(self, v, dt):
        """`v` (a tensor value or a Python scalar) as a value of dtype `dt`."""
        dt = np.dtype(dt)
        if v is None or isinstance(v, bool | int | float):
            return np.array(v, dtype=dt)
        return self.g.cast(v, dt)

    def out_meta(self, i: int | None = None):
        """torch's FakeTensor for the node's result (its first result, or result i)."""
        val = self.node.meta.get("val")
        if isinstance(val, list | tuple):
            return val[i or 0]
        return val

    def out_shape(self, i: int | None = None) -> tuple[int, ...]:
        return tuple(self.dim(d) for d in self.out_meta(i).shape)

    def out_dtype(self, i: int | None = None) -> np.dtype:
        return CONST_DTYPES[self.out_meta(i).dtype]

    def compute_dtype(self, x, y) -> np.dtype:
        """torch's type promotion of two operands (0-d tensors and scalars count less)."""

        def probe(v):
            if isinstance(v, bool | int | float):
                return v
            return torch.empty((0,) if self.g.shape(v) else (), dtype=np_to_torch(self.g.dtype(v)))

        return CONST_DTYPES[torch.result_type(probe(x), probe(y))]

    def unsupported(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(op_name(self.node.target), f"{self.where}: {what} is not supported",
                                  location=self.loc)

    def require_float(self, *vals) -> None:
        for v in vals:
            if not isinstance(v, np.ndarray | bool | int | float) and self.g.dtype(v).kind != "f":
                raise self.unsupported(f"a computed {self.g.dtype(v)} tensor as input (aicc computes "
                                       "this op in floating point only)")

    # -- the walk --------------------------------------------------------------------------------
    def run(self, exported=None) -> TracedProgram:
        """Import the module; `exported` is its export_module() result when already made."""
        ep = exported if exported is not None else export_module(self.module, self.inputs,
                                                                 self.dynamic_shapes)
        graph = ep.graph_module.graph
        constants = self.constants(ep)
        sig = ep.graph_signature
        placeholders = [n for n in graph.nodes if n.op == "placeholder" and n.name in sig.user_inputs]
        self.where = self.name
        self.dim_ranges = dim_ranges = self._name_symbols(ep, placeholders)
        static = static_nodes(graph, constants)
        self.check(graph, static)

        shapes = [tuple(self.dim(d) for d in n.meta["val"].shape) for n in placeholders] \
            if len(placeholders) == len(self.inputs) else [tuple(t.shape) for t in self.inputs]
        arg_types = [aicc.tensor_type(aicc.mlir_element_type(TORCH_TO_NP[t.dtype]), shape)
                     for t, shape in zip(self.inputs, shapes)]
        block = Block(arg_types=arg_types)
        g = self.g = GraphBuilder(block)
        locations: dict[Operation, str] = {}
        env: dict[Any, Any] = {}
        user_inputs = iter(block.args)
        for node in graph.nodes:
            self.node = node
            loc = self.loc = _location(node)
            self.where = f"node '{node.name}' ({op_name(node.target)})"
            g.where = f"{loc}: {self.where}" if loc else self.where  # its ShapeErrors have no location
            if node.op == "placeholder":
                if node.name in constants:
                    env[node] = constants[node.name]
                elif node.name in sig.user_inputs:
                    env[node] = next(user_inputs, None)
                    if env[node] is None:
                        raise CompileError(f"{self.name} takes more tensor inputs than the "
                                           f"{len(self.inputs)} example inputs given")
                else:
                    raise UnsupportedOpError("input", f"{self.name}: graph input '{node.name}' is "
                                             "neither a tensor input nor a constant")
                continue
            if node.op == "output":
                break
            last = block.last_op
            if op_name(node.target) == "aten.sym_size.int":  # a dim, symbolic or not
                x, k = node.args
                env[node] = g.shape(env[x])[k]
            elif node in static:
                env[node] = self.fold(node, env)
            elif node.target is operator.getitem:
                env[node] = env[node.args[0]][node.args[1]]
                if (env[node] is None or isinstance(env[node], Refused)) and node.users:
                    src = node.args[0]
                    why = f" ({env[node].why})" if env[node] is not None else ""
                    raise UnsupportedOpError(
                        op_name(src.target), f"{self.where}: result {node.args[1]} of node "
                        f"'{src.name}' ({op_name(src.target)}) is not supported{why}", location=loc)
            elif op_name(node.target) in NO_OPS:
                env[node] = None
            else:
                a = map_aggregate(_bind(node), lambda v: env[v] if isinstance(v, torch.fx.Node) else v)
                try:
                    out = HANDLERS[op_name(node.target)](self, a)
                except ValueError as e:  # a shape helper refused the operands
                    raise ShapeError(f"{self.where}: {e}", location=loc) from None
                env[node] = self.checked(node, out)
            origin = _origin(node, loc)
            op = last.next_op if last is not None else block.first_op
            while op is not None:  # the ops this node became
                locations[op] = origin
                op = op.next_op

        outputs = []
        returned = next(n for n in graph.nodes if n.op == "output").args[0]
        for spec, ret_node in zip(sig.output_specs, returned):
            if spec.kind.name != "USER_OUTPUT":
                continue
            value = env.get(ret_node) if isinstance(ret_node, torch.fx.Node) else ret_node
            if not isinstance(value, np.ndarray | SSAValue):
                raise UnsupportedOpError("output", f"{self.name} returns a non-tensor value "
                                         f"({ret_node!r}); aicc compiles models that return tensors")
            if isinstance(value, np.ndarray) and value.dtype not in TORCH_TO_NP.values():
                value = value.astype(np.float32 if value.dtype.kind == "f" else np.int64)
            outputs.append(value)
        ret = g.finish(outputs)
        fop = func.FuncOp("forward", (arg_types, [v.type for v in ret]), Region(block))
        module = ModuleOp([fop])
        module.verify()
        types = [(shape, TORCH_TO_NP[t.dtype]) for shape, t in zip(shapes, self.inputs)]
        prog = TracedProgram(module, "forward", types, not ep.call_spec.out_spec.is_leaf(), locations)
        prog.dim_ranges = dim_ranges
        return prog

    def checked(self, node, out):
        """The handler's result, checked against the shapes and dtypes torch recorded."""
        val = node.meta.get("val")
        if isinstance(val, list | tuple):
            if not isinstance(out, list | tuple):
                raise RuntimeError(f"aicc bug: {self.where} imported as one value, torch has {len(val)}")
            return [self._check_one(o, v) for o, v in zip(out, val)]
        return self._check_one(out, val)

    def _check_one(self, out, fake):
        if out is None or isinstance(out, Refused) or not isinstance(fake, torch.Tensor):
            return out
        shape = tuple(self.dim(d) for d in fake.shape)
        if isinstance(out, np.ndarray):
            if out.shape != shape:
                raise RuntimeError(f"aicc bug: {self.where} folded to shape {out.shape}, torch has {shape}")
            dt = CONST_DTYPES.get(fake.dtype)
            return out.astype(dt) if dt is not None and out.dtype != dt else out
        if isinstance(out, SSAValue):
            if aicc.shape_of(out) != shape or self.g.dtype(out) != TORCH_TO_NP[fake.dtype]:
                raise RuntimeError(
                    f"aicc bug: {self.where} imported as {out.type}, torch computes "
                    f"{tuple(shape)} {fake.dtype}"
                )
        return out


def import_torch(module: torch.nn.Module, example_inputs: Sequence[Any],
                 dynamic_shapes=None) -> TracedProgram:
    """Export `module` in eval mode on `example_inputs` (torch tensors or NumPy arrays) and
    import it; parameters, buffers and lifted constants become aicc.constant ops.
    `dynamic_shapes` (torch.export's argument, with torch.export.Dim) keeps those dims symbolic:
    the program then runs for any size of them in their ranges."""
    return TorchImporter(module, example_inputs, dynamic_shapes).run()
