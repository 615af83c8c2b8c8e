"""Import a torch.nn.Module into the aicc tensor dialect through torch.export.

    prog = import_torch(model, (torch.randn(1, 3, 32, 32),))
    print(prog.module)

The module is exported in eval mode with `torch.export.export` on the example inputs (static
shapes), then `run_decompositions` applies the core-ATen decomposition table minus every op
that has a handler below: ops that map well onto aicc ops (linear, conv2d, layer_norm, softmax,
gelu, scaled_dot_product_attention, ...) stay whole, everything else is decomposed into the
core ATen ops that it is built from, and functionalization removes in-place ops.

The graph is then walked once in order. A value is a NumPy array when it is known at compile
time (a parameter, a buffer, a lifted constant, or any node whose tensor inputs are all known,
which torch itself evaluates: weight transposes, masks built with torch.triu, position tables,
...), a Python scalar, or an SSA value of the function being built. Every other node goes to
the handler registered for its ATen overload (`aten.add.Tensor`, ...), which emits aicc ops
through the GraphBuilder shared with the ONNX importer. Each result is checked against the
shape and dtype torch recorded for the node.

Before any IR is built, the graph is checked and every unsupported op type is reported in one
UnsupportedOpError, with its count and the first node's name. An argument value a handler does
not support is an UnsupportedOpError naming the node and the user's source line.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import operator
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.fx.node import map_aggregate
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue

from compiler.dialects import aicc, aicc_nn
from compiler.errors import CompileError, ShapeError, UnsupportedOpError
from frontends.graph_builder import GraphBuilder, TracedProgram, pad_by_index

__all__ = ["import_torch", "SUPPORTED_OPS", "to_torch_inputs"]

# Element types aicc compiles for tensors computed at run time.
_TORCH_TO_NP = {
    torch.float32: np.dtype(np.float32),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.bool: np.dtype(np.bool_),
}
# Dtypes that may appear in values known at compile time (they are cast before use).
_CONST_DTYPES = {
    **_TORCH_TO_NP,
    torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
}

Handler = Callable[["TorchImporter", dict], Any]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str):
    def reg(fn: Handler) -> Handler:
        for n in names:
            HANDLERS[n] = fn
        return fn

    return reg


def _op_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.add.Tensor"
    return getattr(target, "__name__", str(target))


# Ops whose result depends only on the shape and dtype of their tensor operands.
_SHAPE_ONLY = {
    "aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
    "aten.empty_like.default", "aten.new_zeros.default", "aten.new_ones.default",
    "aten.new_full.default", "aten.new_empty.default",
}
# Ops that only check things at run time in eager mode; nothing to compute.
_NO_OPS = {
    "aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
    "aten._assert_async.msg", "aten._assert_async.default",
    "aten.sym_constrain_range_for_size.default", "aten.sym_constrain_range.default",
}


# ---------------------------------------------------------------------------------------------
# Inputs, export and decomposition
# ---------------------------------------------------------------------------------------------


def to_torch_inputs(example_inputs: Sequence[Any]) -> tuple:
    """Example inputs as CPU torch tensors; NumPy arrays are converted, other values refused."""
    out = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            t = x.detach()
            if t.device.type != "cpu":
                t = t.cpu()
        elif isinstance(x, np.ndarray | np.generic):
            t = torch.from_numpy(np.array(x))
        else:
            raise CompileError(
                f"example input {i} is a {type(x).__name__}; a torch.nn.Module is compiled for "
                "tensor inputs (torch tensors or NumPy arrays)"
            )
        if t.dtype not in _TORCH_TO_NP:
            hint = " (call .float() on the module and the input)" if t.is_floating_point() else ""
            raise CompileError(
                f"example input {i} has dtype {str(t.dtype).removeprefix('torch.')}; aicc compiles "
                f"float32, int32, int64 and bool tensors{hint}"
            )
        out.append(t)
    return tuple(out)


@contextlib.contextmanager
def _quiet():
    """torch.export prints partial graphs and logs warnings on failure; the error says enough."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _user_line(e: BaseException) -> str | None:
    """'file:line' of the user's code that torch.export names in its message, if any."""
    hits = re.findall(r'File "([^"]+)", line (\d+)', str(e))
    torch_dir = os.path.dirname(torch.__file__)
    for path, line in reversed(hits):
        if not os.path.abspath(path).startswith(torch_dir):
            return f"{path}:{line}"
    return None


def _symbolic(node) -> bool:
    """Does torch give the node a shape that depends on data (an unbacked SymInt)?"""
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
        return True
    return any(not isinstance(d, int) for v in _fakes(val) for d in v.shape)


def _first_line(e: BaseException) -> str:
    for line in str(e).splitlines():
        if line.strip():
            return line.strip()
    return type(e).__name__


def export_module(module: torch.nn.Module, inputs: tuple):
    """torch.export in eval mode (the caller's train/eval flags are restored); one-line errors."""
    name = type(module).__name__
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with _quiet():
            ep = torch.export.export(module, inputs)
    except Exception as e:
        raise CompileError(
            f"torch.export could not export {name}: {type(e).__name__}: {_first_line(e)}",
            location=_user_line(e),
        ) from None
    finally:
        for m, training in modes:
            m.training = training
    if not _needs_decomposition(ep):
        return ep
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if _op_name(op) in HANDLERS:
            table.pop(op)
    try:
        with _quiet():
            return ep.run_decompositions(table)
    except Exception as e:
        raise CompileError(
            f"decomposing the exported graph of {name} failed: {type(e).__name__}: {_first_line(e)}"
        ) from None


def _needs_decomposition(ep) -> bool:
    """Would run_decompositions change anything the importer cares about? Not when every op
    is handled or only computes constants, and none mutates its inputs (functionalization)."""
    static = TorchImporter.static_nodes(ep.graph, set(_constant_sources(ep)))
    for node in ep.graph.nodes:
        if node.op in ("placeholder", "output") or node.target is operator.getitem:
            continue
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            return True
        if node.target._schema.is_mutable:
            return True
        name = _op_name(node.target)
        if name not in HANDLERS and name not in _NO_OPS and node not in static:
            return True
    return False


def _constant_sources(ep) -> dict[str, str]:
    """Placeholder name -> fully qualified name of each parameter, buffer and lifted constant."""
    sig = ep.graph_signature
    return {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}


# ---------------------------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------------------------


def _location(node) -> str | None:
    """'file:line' of the innermost forward() frame torch recorded for the node that is not
    torch's own code (a Conv2d inside the user's Sequential: the user's line)."""
    trace = node.meta.get("stack_trace") or ""
    hits = re.findall(r'File "([^"]+)", line (\d+)', trace)
    torch_dir = os.path.dirname(torch.__file__)
    user = [h for h in hits if not os.path.abspath(h[0]).startswith(torch_dir)]
    path, line = (user or hits or [(None, None)])[-1]
    return f"{path}:{line}" if path else None


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


def _is_nondeterministic(target) -> bool:
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


class TorchImporter:
    def __init__(self, module: torch.nn.Module, example_inputs: Sequence[Any]):
        self.module = module
        self.name = type(module).__name__
        self.inputs = to_torch_inputs(example_inputs)
        self.node = None
        self.loc: str | None = None

    # -- checks before any IR exists --------------------------------------------------------------
    def constants(self, ep) -> dict[str, np.ndarray]:
        sig = ep.graph_signature
        if sig.buffers_to_mutate:
            names = ", ".join(sorted(set(sig.buffers_to_mutate.values())))
            raise UnsupportedOpError(
                "buffer mutation", f"{self.name} writes to its buffers ({names}) in eval mode; "
                "aicc compiles stateless forward passes"
            )
        sources = _constant_sources(ep)
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
                    _op_name(node.target), f"{self.name}: node '{node.name}' ({_op_name(node.target)}) "
                    "has a shape that depends on the data (e.g. boolean-mask indexing); aicc compiles "
                    "static shapes", location=_location(node))
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for node in graph.nodes:
            if node.op == "call_function":
                name = _op_name(node.target)
                if node in static or name in HANDLERS or name in _NO_OPS or name == "getitem":
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
            for v in _fakes(node.meta.get("val")):
                if v.dtype not in _TORCH_TO_NP:
                    raise UnsupportedOpError(
                        "dtype", f"node '{node.name}' ({_op_name(node.target)}) computes "
                        f"{str(v.dtype).removeprefix('torch.')} tensors; aicc compiles float32, int32, "
                        "int64 and bool (call .float() on the module)",
                        location=_location(node),
                    )

    @staticmethod
    def static_nodes(graph, constants) -> set:
        """The nodes whose values are known at compile time (`constants`: placeholder names)."""
        static = set()
        for node in graph.nodes:
            if node.op == "placeholder":
                if node.name in constants:
                    static.add(node)
            elif node.op == "call_function" and not _is_nondeterministic(node.target):
                if _op_name(node.target) in _SHAPE_ONLY or all(n in static for n in node.all_input_nodes):
                    static.add(node)
        return static

    # -- values ----------------------------------------------------------------------------------
    def to_numpy(self, t, what: str):
        if isinstance(t, torch.Tensor):
            if t.dtype not in _CONST_DTYPES:
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
            return torch.zeros(aicc.shape_of(v), dtype=_np_to_torch(self.g.dtype(v)))
        return v

    def fold(self, node, env):
        args = map_aggregate(node.args, lambda a: self.to_torch(env[a]) if isinstance(a, torch.fx.Node) else a)
        kwargs = map_aggregate(node.kwargs, lambda a: self.to_torch(env[a]) if isinstance(a, torch.fx.Node) else a)
        try:
            with torch.no_grad():
                out = node.target(*args, **kwargs)
        except Exception as e:
            raise CompileError(f"{self.where}: evaluating a constant failed: {_first_line(e)}",
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
        return tuple(int(d) for d in self.out_meta(i).shape)

    def out_dtype(self, i: int | None = None) -> np.dtype:
        return _CONST_DTYPES[self.out_meta(i).dtype]

    def compute_dtype(self, x, y) -> np.dtype:
        """torch's type promotion of two operands (0-d tensors and scalars count less)."""

        def probe(v):
            if isinstance(v, bool | int | float):
                return v
            return torch.empty((0,) if self.g.shape(v) else (), dtype=_np_to_torch(self.g.dtype(v)))

        return _CONST_DTYPES[torch.result_type(probe(x), probe(y))]

    def unsupported(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(_op_name(self.node.target), f"{self.where}: {what} is not supported",
                                  location=self.loc)

    def require_float(self, *vals) -> None:
        for v in vals:
            if not isinstance(v, np.ndarray | bool | int | float) and self.g.dtype(v).kind != "f":
                raise self.unsupported(f"a computed {self.g.dtype(v)} tensor as input (aicc computes "
                                       "this op in floating point only)")

    # -- the walk --------------------------------------------------------------------------------
    def run(self, exported=None) -> TracedProgram:
        """Import the module; `exported` is its export_module() result when already made."""
        ep = exported if exported is not None else export_module(self.module, self.inputs)
        graph = ep.graph_module.graph
        constants = self.constants(ep)
        static = self.static_nodes(graph, constants)
        self.check(graph, static)
        sig = ep.graph_signature

        arg_types = [TensorType(aicc.mlir_element_type(_TORCH_TO_NP[t.dtype]), tuple(t.shape))
                     for t in self.inputs]
        block = Block(arg_types=arg_types)
        g = self.g = GraphBuilder(block)
        locations: dict[Operation, str] = {}
        env: dict[Any, Any] = {}
        user_inputs = iter(block.args)
        for node in graph.nodes:
            self.node = node
            loc = self.loc = _location(node)
            self.where = f"node '{node.name}' ({_op_name(node.target)})"
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
            if node in static:
                env[node] = self.fold(node, env)
            elif node.target is operator.getitem:
                env[node] = env[node.args[0]][node.args[1]]
                if (env[node] is None or isinstance(env[node], Refused)) and node.users:
                    src = node.args[0]
                    why = f" ({env[node].why})" if env[node] is not None else ""
                    raise UnsupportedOpError(
                        _op_name(src.target), f"{self.where}: result {node.args[1]} of node "
                        f"'{src.name}' ({_op_name(src.target)}) is not supported{why}", location=loc)
            elif _op_name(node.target) in _NO_OPS:
                env[node] = None
            else:
                a = map_aggregate(_bind(node), lambda v: env[v] if isinstance(v, torch.fx.Node) else v)
                try:
                    out = HANDLERS[_op_name(node.target)](self, a)
                except ValueError as e:  # a shape helper refused the operands
                    raise ShapeError(f"{self.where}: {e}", location=loc) from None
                env[node] = self.checked(node, out)
            if loc is not None:
                op = last.next_op if last is not None else block.first_op
                while op is not None:
                    locations[op] = loc
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
            if isinstance(value, np.ndarray) and value.dtype not in _TORCH_TO_NP.values():
                value = value.astype(np.float32 if value.dtype.kind == "f" else np.int64)
            outputs.append(value)
        ret = g.finish(outputs)
        fop = func.FuncOp("forward", (arg_types, [v.type for v in ret]), Region(block))
        module = ModuleOp([fop])
        module.verify()
        types = [(tuple(t.shape), _TORCH_TO_NP[t.dtype]) for t in self.inputs]
        return TracedProgram(module, "forward", types, not ep.call_spec.out_spec.is_leaf(), locations)

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
        shape = tuple(int(d) for d in fake.shape)
        if isinstance(out, np.ndarray):
            if out.shape != shape:
                raise RuntimeError(f"aicc bug: {self.where} folded to shape {out.shape}, torch has {shape}")
            dt = _CONST_DTYPES.get(fake.dtype)
            return out.astype(dt) if dt is not None and out.dtype != dt else out
        if isinstance(out, SSAValue):
            if aicc.shape_of(out) != shape or self.g.dtype(out) != _TORCH_TO_NP[fake.dtype]:
                raise RuntimeError(
                    f"aicc bug: {self.where} imported as {out.type}, torch computes "
                    f"{tuple(shape)} {fake.dtype}"
                )
        return out


class Refused:
    """A result of a node that the importer does not compute (the indices of max pooling);
    a node that uses it is refused with `why`."""

    def __init__(self, why: str):
        self.why = why


_POOL_INDICES = Refused("the indices of max pooling, which only max_unpool (a scatter) reads; "
                        "aicc computes the pooled values")


def _fakes(val):
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, list | tuple):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return []


def _np_to_torch(dt) -> torch.dtype:
    return {np.dtype(v): k for k, v in _CONST_DTYPES.items()}[np.dtype(dt)]


def import_torch(module: torch.nn.Module, example_inputs: Sequence[Any]) -> TracedProgram:
    """Export `module` in eval mode on `example_inputs` (torch tensors or NumPy arrays) and
    import it; parameters, buffers and lifted constants become aicc.constant ops."""
    return TorchImporter(module, example_inputs).run()


# ---------------------------------------------------------------------------------------------
# Handlers. Each takes (importer, bound arguments) and returns a value or a list of values.
# ---------------------------------------------------------------------------------------------


def _dims(dim, rank: int) -> list[int]:
    """A reduction's dims: None or [] means all."""
    if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    return [d % max(rank, 1) for d in dim]


def _pair(v, n: int = 2) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


# -- pass-through and casts ------------------------------------------------------------------------


@handles("aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.detach.default",
         "aten.lift_fresh_copy.default", "aten.dropout.default", "aten.feature_dropout.default",
         "aten.alpha_dropout.default", "aten.native_dropout.default")
def _identity(imp, a):
    if a.get("train") and a.get("p", 0) > 0:
        raise imp.unsupported("dropout in training mode")
    if _op_name(imp.node.target) == "aten.native_dropout.default":
        return [a["input"], None]
    return a["input"]


@handles("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
         "aten.to.other", "aten.type_as.default")
def _to(imp, a):
    return imp.g.cast(a["input"], imp.out_dtype())


# -- elementwise ----------------------------------------------------------------------------------


def _require_arith(imp, cls, *vals) -> None:
    """Float operands, or integer ones too for the ops the dialect computes on i32 / i64."""
    if not getattr(cls, "INTEGER_OK", False):
        imp.require_float(*vals)
        return
    for v in vals:
        if not isinstance(v, np.ndarray | bool | int | float) and imp.g.dtype(v).kind not in "fiu":
            raise imp.unsupported(f"{imp.g.dtype(v)} arithmetic on a computed tensor")


# bool arithmetic, as torch computes it: in integers, then != 0 (add and max are `or`, mul and
# min are `and`)
_BOOL_ARITH = (aicc.AddOp, aicc.MulOp, aicc.MaximumOp, aicc.MinimumOp)


def _arith(imp, cls, x, y):
    """`cls` on x and y cast to the node's result dtype (torch's promotion)."""
    g, dt = imp.g, imp.out_dtype()
    if dt == np.bool_ and cls in _BOOL_ARITH:
        r = g.binary(cls, imp.operand(x, np.int32), imp.operand(y, np.int32))
        return g.compare("ne", r, np.array(0, np.int32))
    x, y = imp.operand(x, dt), imp.operand(y, dt)
    _require_arith(imp, cls, x, y)
    return g.binary(cls, x, y)


@handles("aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar")
def _add(imp, a):
    y = a["other"]
    if a.get("alpha", 1) != 1:
        y = _arith(imp, aicc.MulOp, y, a["alpha"])
    cls = aicc.AddOp if ".add." in _op_name(imp.node.target) else aicc.SubOp
    return _arith(imp, cls, a["input"], y)


@handles("aten.rsub.Scalar", "aten.rsub.Tensor")
def _rsub(imp, a):
    x = a["input"]
    if a.get("alpha", 1) != 1:
        x = _arith(imp, aicc.MulOp, x, a["alpha"])
    return _arith(imp, aicc.SubOp, a["other"], x)


@handles("aten.mul.Tensor", "aten.mul.Scalar")
def _mul(imp, a):
    return _arith(imp, aicc.MulOp, a["input"], a["other"])


def _trunc(g, x):
    """Round toward zero: ceil below 0, floor elsewhere (NaN and inf stay)."""
    return g.select(g.compare("lt", x, g.scalar(0.0, x)), g.unary(aicc.CeilOp, x), g.unary(aicc.FloorOp, x))


def _and(g, p, q):
    return g.select(p, q, np.array(False))


def _int_floor_div(g, x, y):
    """Floored division of integers as torch computes it (div_floor_integer): the truncated
    quotient, less one where the remainder is not 0 and the signs of remainder and divisor
    differ. A zero divisor gives 0 (torch raises ZeroDivisionError)."""
    q = g.div(x, y)
    r = g.binary(aicc.FModOp, x, y)
    zero = np.array(0, g.dtype(x))
    fix = _and(g, g.compare("ne", r, zero), g.compare("ne", g.compare("lt", r, zero), g.compare("lt", y, zero)))
    return g.sub(q, g.cast(fix, g.dtype(q)))


def _float_floor_div(g, x, y):
    """Floored division of floats as torch computes it (div_floor_floating, the same as Python's
    //): from the exact remainder, so that 1 // 0.1 is 9 where floor(1 / 0.1) is 10."""
    q = g.div(x, y)
    s = lambda v: g.scalar(v, q)  # noqa: E731
    mod = g.binary(aicc.FModOp, x, y)
    div = g.div(g.sub(x, mod), y)
    neg = g.compare("ne", g.compare("lt", y, s(0.0)), g.compare("lt", mod, s(0.0)))
    div = g.sub(div, g.cast(_and(g, g.compare("ne", mod, s(0.0)), neg), g.dtype(q)))
    fl = g.unary(aicc.FloorOp, div)
    fl = g.add(fl, g.cast(g.compare("gt", g.sub(div, fl), s(0.5)), g.dtype(q)))
    fl = g.select(g.compare("eq", div, s(0.0)), g.mul(q, s(0.0)), fl)  # a zero keeps the sign of x / y
    return g.select(g.compare("eq", y, s(0.0)), q, fl)  # x / 0: inf or NaN, as IEEE division


def _rounded_div(imp, x, y, mode):
    g, dt = imp.g, imp.out_dtype()
    if mode is None:
        return _arith(imp, aicc.DivOp, x, y)
    if mode not in ("trunc", "floor"):
        raise imp.unsupported(f"rounding_mode='{mode}'")
    x, y = imp.operand(x, dt), imp.operand(y, dt)
    _require_arith(imp, aicc.DivOp, x, y)
    if dt.kind in "iu":
        return g.div(x, y) if mode == "trunc" else _int_floor_div(g, x, y)
    return _trunc(g, g.div(x, y)) if mode == "trunc" else _float_floor_div(g, x, y)


@handles("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div(imp, a):
    return _rounded_div(imp, a["input"], a["other"], a.get("rounding_mode"))


@handles("aten.floor_divide.default", "aten.floor_divide.Scalar")
def _floor_divide(imp, a):
    return _rounded_div(imp, a["input"], a["other"], "floor")


@handles("aten.remainder.Tensor", "aten.remainder.Scalar", "aten.remainder.Scalar_Tensor")
def _remainder(imp, a):  # Python's %: the sign of the divisor
    return _arith(imp, aicc.ModOp, a["input"], a["other"])


@handles("aten.fmod.Tensor", "aten.fmod.Scalar")
def _fmod(imp, a):  # C's fmod: the sign of the dividend
    return _arith(imp, aicc.FModOp, a["input"], a["other"])


@handles("aten.floor.default", "aten.trunc.default", "aten.ceil.default", "aten.round.default",
         "aten.frac.default", "aten.fix.default")
def _rounding(imp, a):
    g, x = imp.g, a["input"]
    name = _op_name(imp.node.target).split(".")[1]
    if g.dtype(x).kind != "f":
        if name == "frac":
            raise imp.unsupported("frac of an integer tensor")
        return x  # torch rounds integers to themselves
    if name in ("trunc", "fix"):
        return _trunc(g, x)
    if name == "frac":  # x - trunc(x), as torch
        return g.sub(x, _trunc(g, x))
    return g.unary({"floor": aicc.FloorOp, "ceil": aicc.CeilOp, "round": aicc.RoundOp}[name], x)


@handles("aten.round.decimals")
def _round_decimals(imp, a):
    """torch's rounding to `decimals` places: round(x * 10^d) / 10^d (for d < 0,
    round(x / 10^-d) * 10^-d), half to even."""
    g, x, d = imp.g, a["input"], int(a["decimals"])
    if g.dtype(x).kind != "f":
        raise imp.unsupported("round(decimals=...) of an integer tensor")
    if d == 0:
        return g.unary(aicc.RoundOp, x)
    p = g.scalar(10.0 ** abs(d), x)
    if d > 0:
        return g.div(g.unary(aicc.RoundOp, g.mul(x, p)), p)
    return g.mul(g.unary(aicc.RoundOp, g.div(x, p)), p)


@handles("aten.maximum.default", "aten.minimum.default")
def _max_min(imp, a):
    cls = aicc.MaximumOp if "max" in _op_name(imp.node.target) else aicc.MinimumOp
    return _arith(imp, cls, a["input"], a["other"])


def _int_power(g, x, e: int):
    """x ** e for an integer e >= 0 by repeated squaring (at most 2 log2(e) multiplies)."""
    result, base = None, x
    while True:
        if e & 1:
            result = base if result is None else g.mul(result, base)
        e >>= 1
        if not e:
            break
        base = g.mul(base, base)
    return np.ones((), g.dtype(x)) if result is None else result


@handles("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def _pow(imp, a):
    g, dt = imp.g, imp.out_dtype()
    x, e = a["input"], a["exponent"]
    if isinstance(e, int | float) and not isinstance(e, bool):
        x = imp.operand(x, dt)
        if dt.kind in "iu":
            if not float(e).is_integer() or e < 0:
                raise imp.unsupported(f"an integer tensor to the power {e}")
            return g.broadcast_to(_int_power(g, x, int(e)), g.shape(x))
        imp.require_float(x)
        special = {1.0: lambda: x, 2.0: lambda: g.mul(x, x), 3.0: lambda: g.mul(g.mul(x, x), x),
                   0.5: lambda: g.unary(aicc.SqrtOp, x), -0.5: lambda: g.unary(aicc.RsqrtOp, x),
                   -1.0: lambda: g.div(g.scalar(1.0, x), x)}
        if float(e) in special:
            return special[float(e)]()
    return _arith(imp, aicc.PowOp, x, e)


_UNARY = {
    "aten.neg.default": aicc.NegOp, "aten.abs.default": aicc.AbsOp, "aten.exp.default": aicc.ExpOp,
    "aten.log.default": aicc.LogOp, "aten.tanh.default": aicc.TanhOp, "aten.erf.default": aicc.ErfOp,
    "aten.sqrt.default": aicc.SqrtOp, "aten.rsqrt.default": aicc.RsqrtOp, "aten.relu.default": aicc.ReluOp,
    "aten.sigmoid.default": aicc.SigmoidOp, "aten.sin.default": aicc.SinOp, "aten.cos.default": aicc.CosOp,
    "aten.tan.default": aicc.TanOp, "aten.asin.default": aicc.AsinOp, "aten.acos.default": aicc.AcosOp,
    "aten.atan.default": aicc.AtanOp, "aten.sinh.default": aicc.SinhOp, "aten.cosh.default": aicc.CoshOp,
}


def _float_input(imp, x):
    """The input of a float-valued op: integer tensors convert to the result dtype, as in torch."""
    x = imp.operand(x, imp.out_dtype()) if imp.out_dtype().kind == "f" else x
    imp.require_float(x)
    return x


@handles(*_UNARY)
def _unary(imp, a):
    cls = _UNARY[_op_name(imp.node.target)]
    x = a["input"]
    if cls.INTEGER_OK and imp.out_dtype().kind in "iu":  # neg, abs of integers
        return imp.g.unary(cls, x)
    if cls is aicc.ReluOp and imp.out_dtype().kind in "iu":
        return imp.g.emit(aicc.MaximumOp, x, np.zeros((), imp.g.dtype(x)))
    return imp.g.unary(cls, _float_input(imp, x))


@handles("aten.reciprocal.default", "aten.square.default", "aten.log2.default", "aten.log10.default",
         "aten.log1p.default", "aten.expm1.default", "aten.exp2.default", "aten.sign.default")
def _unary_composite(imp, a):
    g = imp.g
    name = _op_name(imp.node.target).split(".")[1]
    integer = name in ("square", "sign") and imp.out_dtype().kind in "iu"
    x = imp.operand(a["input"], imp.out_dtype()) if integer else _float_input(imp, a["input"])
    s = lambda v: g.scalar(v, x)  # noqa: E731
    if name == "reciprocal":
        return g.div(s(1.0), x)
    if name == "square":
        return g.mul(x, x)
    if name in ("log2", "log10"):
        return g.mul(g.unary(aicc.LogOp, x), s(1.0 / math.log(2.0 if name == "log2" else 10.0)))
    if name == "log1p":
        return g.unary(aicc.LogOp, g.add(x, s(1.0)))
    if name == "expm1":
        return g.sub(g.unary(aicc.ExpOp, x), s(1.0))
    if name == "exp2":
        return g.unary(aicc.ExpOp, g.mul(x, s(math.log(2.0))))
    neg = g.select(g.compare("lt", x, s(0.0)), s(-1.0), s(0.0))
    return g.select(g.compare("gt", x, s(0.0)), s(1.0), neg)


@handles("aten.gelu.default")
def _gelu(imp, a):
    approx = a.get("approximate") or "none"
    if approx not in ("none", "tanh"):
        raise imp.unsupported(f"gelu approximate='{approx}'")
    return imp.g.emit(lambda v: aicc.GeluOp(v, approx), _float_input(imp, a["input"]))


@handles("aten.silu.default")
def _silu(imp, a):
    x = _float_input(imp, a["input"])
    return imp.g.mul(x, imp.g.unary(aicc.SigmoidOp, x))


def _clamp(imp, x, lo, hi):
    g = imp.g
    dt = imp.out_dtype()
    x = imp.operand(x, dt)
    _require_arith(imp, aicc.MaximumOp, x)
    if lo is not None:
        x = g.emit(aicc.MaximumOp, x, imp.operand(lo, dt))
    if hi is not None:
        x = g.emit(aicc.MinimumOp, x, imp.operand(hi, dt))
    return x


@handles("aten.clamp.default", "aten.clamp.Tensor")
def _clamp_op(imp, a):
    return _clamp(imp, a["input"], a.get("min"), a.get("max"))


@handles("aten.clamp_min.default", "aten.clamp_min.Tensor")
def _clamp_min(imp, a):
    return _clamp(imp, a["input"], a["min"], None)


@handles("aten.clamp_max.default", "aten.clamp_max.Tensor")
def _clamp_max(imp, a):
    return _clamp(imp, a["input"], None, a["max"])


@handles("aten.hardtanh.default")
def _hardtanh(imp, a):
    return _clamp(imp, a["input"], a["min_val"], a["max_val"])


@handles("aten.relu6.default")
def _relu6(imp, a):
    return _clamp(imp, a["input"], 0.0, 6.0)


def _hardsigmoid(imp, x):  # relu6(x + 3) / 6, as torch computes it
    g = imp.g
    y = _clamp(imp, g.add(x, g.scalar(3.0, x)), 0.0, 6.0)
    return g.div(y, g.scalar(6.0, x))


@handles("aten.hardsigmoid.default")
def _hardsigmoid_op(imp, a):
    return _hardsigmoid(imp, _float_input(imp, a["input"]))


@handles("aten.hardswish.default")
def _hardswish(imp, a):
    x = _float_input(imp, a["input"])
    return imp.g.mul(x, _hardsigmoid(imp, x))


@handles("aten.leaky_relu.default")
def _leaky_relu(imp, a):
    g, x = imp.g, _float_input(imp, a["input"])
    return g.select(g.compare("gt", x, g.scalar(0.0, x)), x, g.mul(x, g.scalar(a["negative_slope"], x)))


@handles("aten.elu.default")
def _elu(imp, a):
    g, x = imp.g, _float_input(imp, a["input"])
    alpha, scale, input_scale = float(a["alpha"]), float(a["scale"]), float(a["input_scale"])
    xs = g.mul(x, g.scalar(input_scale, x)) if input_scale != 1.0 else x
    neg = g.mul(g.sub(g.unary(aicc.ExpOp, xs), g.scalar(1.0, x)), g.scalar(alpha * scale, x))
    pos = g.mul(x, g.scalar(scale, x)) if scale != 1.0 else x
    return g.select(g.compare("gt", x, g.scalar(0.0, x)), pos, neg)


def _softplus(g, x):  # log(1 + exp(x))
    return g.unary(aicc.LogOp, g.add(g.unary(aicc.ExpOp, x), g.scalar(1.0, x)))


@handles("aten.softplus.default")
def _softplus_op(imp, a):
    g, x = imp.g, _float_input(imp, a["input"])
    beta, threshold = float(a["beta"]), float(a["threshold"])
    bx = g.mul(x, g.scalar(beta, x)) if beta != 1.0 else x
    sp = _softplus(g, bx)
    if beta != 1.0:
        sp = g.div(sp, g.scalar(beta, x))
    return g.select(g.compare("gt", bx, g.scalar(threshold, x)), x, sp)


@handles("aten.mish.default")
def _mish(imp, a):
    g, x = imp.g, _float_input(imp, a["input"])
    return g.mul(x, g.unary(aicc.TanhOp, _softplus(g, x)))


@handles("aten.log_sigmoid_forward.default")
def _log_sigmoid(imp, a):
    g, x = imp.g, _float_input(imp, a["input"])  # min(x, 0) - log(1 + exp(-|x|))
    m = g.emit(aicc.MinimumOp, x, g.scalar(0.0, x))
    y = g.sub(m, _softplus(g, g.unary(aicc.NegOp, g.unary(aicc.AbsOp, x))))
    return [y, None]


# -- compare, logic, select ------------------------------------------------------------------------

_COMPARE = {"eq": "eq", "ne": "ne", "gt": "gt", "ge": "ge", "lt": "lt", "le": "le"}


@handles(*(f"aten.{p}.{o}" for p in _COMPARE for o in ("Tensor", "Scalar")))
def _compare(imp, a):
    x, y = a["input"], a["other"]
    dt = imp.compute_dtype(x, y)
    pred = _COMPARE[_op_name(imp.node.target).split(".")[1]]
    return imp.g.compare(pred, imp.operand(x, dt), imp.operand(y, dt))


def _as_bool(imp, v):
    return imp.operand(v, np.bool_)


@handles("aten.logical_not.default", "aten.bitwise_not.default")
def _logical_not(imp, a):
    x = a["input"]
    if _op_name(imp.node.target).startswith("aten.bitwise") and imp.g.dtype(x) != np.bool_:
        raise imp.unsupported("bitwise not of an integer tensor")
    return imp.g.compare("eq", _as_bool(imp, x), np.array(False))


@handles("aten.logical_and.default", "aten.logical_or.default", "aten.logical_xor.default",
         "aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor")
def _logical(imp, a):
    name = _op_name(imp.node.target)
    if name.startswith("aten.bitwise") and imp.out_dtype() != np.bool_:
        raise imp.unsupported("bitwise logic on integer tensors")
    g = imp.g
    x, y = _as_bool(imp, a["input"]), _as_bool(imp, a["other"])
    kind = name.split(".")[1].split("_")[1]  # logical_and -> and
    if kind == "and":
        return g.select(x, y, np.array(False))
    if kind == "or":
        return g.select(x, np.array(True), y)
    return g.compare("ne", x, y)


@handles("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(imp, a):
    dt = imp.out_dtype()
    return imp.g.select(_as_bool(imp, a["condition"]), imp.operand(a["input"], dt), imp.operand(a["other"], dt))


@handles("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(imp, a):
    dt = imp.out_dtype()
    return imp.g.select(_as_bool(imp, a["mask"]), imp.operand(a["value"], dt), imp.operand(a["input"], dt))


# -- matmul -----------------------------------------------------------------------------------------


def _matmul(imp, x, y):
    g = imp.g
    dt = imp.out_dtype()
    x, y = imp.operand(x, dt), imp.operand(y, dt)
    imp.require_float(x, y)
    sx, sy = g.shape(x), g.shape(y)
    if len(sx) > 2 and len(sy) == 2:  # fold the batch into rows: a 2-D matmul (linalg.matmul)
        rows = g.reshape(x, (math.prod(sx[:-1]), sx[-1]))
        return g.reshape(g.emit(aicc.MatmulOp, rows, y), (*sx[:-1], sy[-1]))
    return g.matmul(x, y)


@handles("aten.mm.default", "aten.bmm.default", "aten.matmul.default", "aten.dot.default",
         "aten.mv.default")
def _mm(imp, a):
    other = a.get("mat2", a.get("other", a.get("vec", a.get("tensor"))))
    return _matmul(imp, a["input"], other)


@handles("aten.linear.default")
def _linear(imp, a):
    g, w = imp.g, a["weight"]
    wt = g.transpose(w, (1, 0)) if len(g.shape(w)) == 2 else w
    y = _matmul(imp, a["input"], wt)
    if a.get("bias") is not None:
        y = g.add(y, imp.operand(a["bias"], g.dtype(y)))
    return y


def _scaled(imp, v, factor):
    return v if factor == 1 else imp.g.mul(v, imp.g.scalar(factor, v))


@handles("aten.addmm.default", "aten.baddbmm.default", "aten.addmv.default")
def _addmm(imp, a):
    g = imp.g
    m1 = a.get("mat1", a.get("batch1", a.get("mat")))
    m2 = a.get("mat2", a.get("batch2", a.get("vec")))
    y = _scaled(imp, _matmul(imp, m1, m2), a["alpha"])
    if a["beta"] == 0:
        return y
    return g.add(y, _scaled(imp, imp.operand(a["input"], g.dtype(y)), a["beta"]))


# -- reductions -------------------------------------------------------------------------------------


def _reduce(imp, cls, x, dim, keepdim: bool):
    g, dt = imp.g, imp.out_dtype()
    axes = _dims(dim, len(g.shape(x)))
    if dt == np.bool_ and cls in (aicc.ReduceMaxOp, aicc.ReduceMinOp):  # max / min of bools
        r = g.reduce(cls, imp.operand(x, np.int32), axes, bool(keepdim))
        return g.compare("ne", r, np.array(0, np.int32))
    if cls.INTEGER_OK and dt.kind in "iu":
        x = imp.operand(x, dt)  # torch sums and multiplies integers and bools in int64
    else:
        x = _float_input(imp, x)
    return g.reduce(cls, x, axes, bool(keepdim))


@handles("aten.sum.dim_IntList", "aten.sum.default")
def _sum(imp, a):
    return _reduce(imp, aicc.ReduceSumOp, a["input"], a.get("dim"), a.get("keepdim", False))


@handles("aten.prod.dim_int", "aten.prod.default")
def _prod(imp, a):
    return _reduce(imp, aicc.ReduceProdOp, a["input"], a.get("dim"), a.get("keepdim", False))


@handles("aten.mean.dim", "aten.mean.default")
def _mean(imp, a):
    return _reduce(imp, aicc.ReduceMeanOp, a["input"], a.get("dim"), a.get("keepdim", False))


@handles("aten.amax.default", "aten.amin.default", "aten.max.default", "aten.min.default")
def _amax(imp, a):
    cls = aicc.ReduceMaxOp if "max" in _op_name(imp.node.target) else aicc.ReduceMinOp
    return _reduce(imp, cls, a["input"], a.get("dim"), a.get("keepdim", False))


def _arg_reduce(imp, cls, x, axis: int, keepdim: bool):
    """aicc.argmax / argmin of x along `axis` (the first extreme element; NaN counts as the
    extreme, as torch)."""
    g = imp.g
    if not g.shape(x):
        return np.zeros((), np.int64)
    if g.dtype(x) == np.bool_:
        x = g.cast(x, np.int32)
    _require_arith(imp, aicc.MaximumOp, x)
    if 0 in g.shape(x):
        raise imp.unsupported("the index of the extreme element of an empty tensor")
    return g.emit(lambda v: cls(v, axis, keepdim, False), x)


@handles("aten.max.dim", "aten.min.dim")
def _max_dim(imp, a):
    """(values, indices): a reduction and an argmax / argmin; unused indices are dead code."""
    g, x = imp.g, a["input"]
    is_max = ".max." in _op_name(imp.node.target)
    values = _reduce(imp, aicc.ReduceMaxOp if is_max else aicc.ReduceMinOp, x, a["dim"], a["keepdim"])
    axis = a["dim"] % max(len(g.shape(x)), 1)
    cls = aicc_nn.ArgMaxOp if is_max else aicc_nn.ArgMinOp
    return [values, g.reshape(_arg_reduce(imp, cls, x, axis, bool(a["keepdim"])), imp.out_shape(1))]


@handles("aten.argmax.default", "aten.argmin.default")
def _argmax(imp, a):
    """The index along `dim`, or (dim=None) into the flattened tensor."""
    g, x = imp.g, a["input"]
    cls = aicc_nn.ArgMaxOp if "argmax" in _op_name(imp.node.target) else aicc_nn.ArgMinOp
    if a.get("dim") is None:
        y = _arg_reduce(imp, cls, g.reshape(x, (math.prod(g.shape(x)),)), 0, False)
    else:
        y = _arg_reduce(imp, cls, x, a["dim"] % max(len(g.shape(x)), 1), bool(a.get("keepdim")))
    return g.reshape(y, imp.out_shape())


@handles("aten.cumsum.default")
def _cumsum(imp, a):
    """aicc.cumsum in the result dtype (integers and bools sum in int64, as torch)."""
    g = imp.g
    x = imp.operand(a["input"], imp.out_dtype())
    _require_arith(imp, aicc.AddOp, x)
    shape = g.shape(x)
    if not shape:
        return x
    if 0 in shape:
        return np.zeros(shape, g.dtype(x))
    axis = a["dim"] % len(shape)
    return g.emit(lambda v: aicc_nn.CumSumOp(v, axis), x)


def _var(imp, x, dim, correction, keepdim):
    g = imp.g
    x = _float_input(imp, x)
    axes = _dims(dim, len(g.shape(x)))
    n = math.prod(g.shape(x)[d] for d in axes)
    mean = g.reduce(aicc.ReduceMeanOp, x, axes, True)
    d = g.sub(x, mean)
    s = g.reduce(aicc.ReduceSumOp, g.mul(d, d), axes, bool(keepdim))
    var = g.div(s, g.scalar(max(n - correction, 0), x))
    return var, mean if keepdim else g.reshape(mean, g.shape(var))


def _correction(a) -> float:
    if "unbiased" in a:
        return 1.0 if a["unbiased"] else 0.0
    c = a.get("correction")
    return 1.0 if c is None else float(c)


@handles("aten.var.correction", "aten.var.dim", "aten.std.correction", "aten.std.dim",
         "aten.var_mean.correction", "aten.std_mean.correction")
def _var_op(imp, a):
    var, mean = _var(imp, a["input"], a.get("dim"), _correction(a), a.get("keepdim", False))
    name = _op_name(imp.node.target)
    out = imp.g.unary(aicc.SqrtOp, var) if ".std" in name else var
    return [out, mean] if "_mean" in name else out


@handles("aten.logsumexp.default")
def _logsumexp(imp, a):
    g = imp.g
    x = _float_input(imp, a["input"])
    axes, keep = _dims(a["dim"], len(g.shape(x))), bool(a["keepdim"])
    m = g.reduce(aicc.ReduceMaxOp, x, axes, True)
    s = g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, g.sub(x, m)), axes, keep)
    return g.add(g.unary(aicc.LogOp, s), m if keep else g.reshape(m, g.shape(s)))


@handles("aten.linalg_vector_norm.default")
def _vector_norm(imp, a):
    g = imp.g
    x = _float_input(imp, a["input"])
    if a.get("dtype") is not None:
        x = g.cast(x, imp.out_dtype())
    ord_, dim, keep = float(a["ord"]), a.get("dim"), bool(a["keepdim"])
    ax = g.unary(aicc.AbsOp, x)
    if ord_ == math.inf:
        return _reduce(imp, aicc.ReduceMaxOp, ax, dim, keep)
    if ord_ == -math.inf:
        return _reduce(imp, aicc.ReduceMinOp, ax, dim, keep)
    if ord_ == 1.0:
        return _reduce(imp, aicc.ReduceSumOp, ax, dim, keep)
    if ord_ == 2.0:
        return g.unary(aicc.SqrtOp, _reduce(imp, aicc.ReduceSumOp, g.mul(x, x), dim, keep))
    if ord_ <= 0:
        raise imp.unsupported(f"a vector norm of order {ord_}")
    s = _reduce(imp, aicc.ReduceSumOp, g.emit(aicc.PowOp, ax, g.scalar(ord_, x)), dim, keep)
    return g.emit(aicc.PowOp, s, g.scalar(1.0 / ord_, x))


@handles("aten.any.default", "aten.any.dim", "aten.any.dims", "aten.all.default", "aten.all.dim",
         "aten.all.dims")
def _any_all(imp, a):
    g = imp.g
    x = a["input"]
    f = g.cast(_as_bool(imp, x), np.float32)
    cls = aicc.ReduceMaxOp if ".any." in _op_name(imp.node.target) else aicc.ReduceMinOp
    r = g.reduce(cls, f, _dims(a.get("dim"), len(g.shape(f))), bool(a.get("keepdim", False)))
    return g.compare("gt", r, np.array(0.0, np.float32))


# -- softmax and normalization ----------------------------------------------------------------------


def _softmax(imp, x, dim):
    g = imp.g
    x = _float_input(imp, x)
    if not g.shape(x):
        return np.ones((), g.dtype(x))  # softmax of one element
    axis = dim % len(g.shape(x))
    return g.emit(lambda v: aicc.SoftmaxOp(v, axis), x)


def _zero_fully_masked(g, scores, p, axis: int):
    """torch's safe softmax: rows whose scores are all -inf become 0 instead of NaN."""
    m = g.reduce(aicc.ReduceMaxOp, scores, [axis], True)
    valid = g.compare("gt", m, g.scalar(-math.inf, scores))
    return g.select(valid, p, g.scalar(0.0, p))


@handles("aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default")
def _softmax_op(imp, a):
    x = a["input"]
    if a.get("dtype") is not None:
        x = imp.g.cast(x, imp.out_dtype())
    p = _softmax(imp, x, a["dim"])
    if "_safe" in _op_name(imp.node.target) and imp.g.shape(x):
        p = _zero_fully_masked(imp.g, x, p, a["dim"] % len(imp.g.shape(x)))
    return p


@handles("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(imp, a):
    g = imp.g
    x = a["input"]
    if a.get("dtype") is not None:
        x = g.cast(x, imp.out_dtype())
    x = _float_input(imp, x)
    axis = a["dim"] % max(len(g.shape(x)), 1)
    m = g.reduce(aicc.ReduceMaxOp, x, [axis], True)
    s = g.sub(x, m)
    return g.sub(s, g.unary(aicc.LogOp, g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, s), [axis], True)))


def _normalize(g, x, axes, eps):
    mean = g.reduce(aicc.ReduceMeanOp, x, axes, True)
    d = g.sub(x, mean)
    var = g.reduce(aicc.ReduceMeanOp, g.mul(d, d), axes, True)
    rstd = g.unary(aicc.RsqrtOp, g.add(var, g.scalar(eps, x)))
    return g.mul(d, rstd), mean, rstd


def _affine(imp, y, weight, bias, shape):
    g = imp.g
    if weight is not None:
        y = g.mul(y, g.reshape(imp.operand(weight, g.dtype(y)), shape))
    if bias is not None:
        y = g.add(y, g.reshape(imp.operand(bias, g.dtype(y)), shape))
    return y


@handles("aten.layer_norm.default", "aten.native_layer_norm.default")
def _layer_norm(imp, a):
    g = imp.g
    x = _float_input(imp, a["input"])
    shape = g.shape(x)
    k = len(a["normalized_shape"])
    axes = list(range(len(shape) - k, len(shape)))
    y, mean, rstd = _normalize(g, x, axes, float(a["eps"]))
    y = _affine(imp, y, a["weight"], a["bias"], shape[len(shape) - k:])
    return [y, mean, rstd] if "native" in _op_name(imp.node.target) else y


@handles("aten.rms_norm.default")
def _rms_norm(imp, a):
    g = imp.g
    x = _float_input(imp, a["input"])
    shape = g.shape(x)
    k = len(a["normalized_shape"])
    eps = a.get("eps")
    eps = float(np.finfo(g.dtype(x)).eps) if eps is None else float(eps)
    ms = g.reduce(aicc.ReduceMeanOp, g.mul(x, x), list(range(len(shape) - k, len(shape))), True)
    y = g.mul(x, g.unary(aicc.RsqrtOp, g.add(ms, g.scalar(eps, x))))
    return _affine(imp, y, a["weight"], None, shape[len(shape) - k:])


@handles("aten.batch_norm.default", "aten._native_batch_norm_legit_no_training.default",
         "aten.native_batch_norm.default", "aten._native_batch_norm_legit.default",
         "aten._native_batch_norm_legit.no_stats")
def _batch_norm(imp, a):
    g = imp.g
    name = _op_name(imp.node.target)
    x = _float_input(imp, a["input"])
    shape = g.shape(x)
    mean, var = a.get("running_mean"), a.get("running_var")
    cshape = (shape[1],) + (1,) * (len(shape) - 2)
    eps = float(a["eps"])
    if a.get("training") and mean is not None:
        raise imp.unsupported("batch norm in training mode")
    if mean is None:  # no running statistics: normalize with the batch's own (as eager torch does)
        y, _, _ = _normalize(g, x, [d for d in range(len(shape)) if d != 1], eps)
        y = _affine(imp, y, a["weight"], a["bias"], cshape)
    else:
        dt = g.dtype(x)
        mean, var = g.reshape(imp.operand(mean, dt), cshape), g.reshape(imp.operand(var, dt), cshape)
        inv = g.unary(aicc.RsqrtOp, g.add(var, g.scalar(eps, x)))  # folded for constant statistics
        if a["weight"] is not None:
            inv = g.mul(inv, g.reshape(imp.operand(a["weight"], dt), cshape))
        shift = g.unary(aicc.NegOp, g.mul(mean, inv))
        if a["bias"] is not None:
            shift = g.add(shift, g.reshape(imp.operand(a["bias"], dt), cshape))
        y = g.add(g.mul(x, inv), shift)
    return y if name == "aten.batch_norm.default" else [y, None, None]


@handles("aten.group_norm.default", "aten.native_group_norm.default")
def _group_norm(imp, a):
    g = imp.g
    x = _float_input(imp, a["input"])
    shape = g.shape(x)
    n, c = shape[0], shape[1]
    groups = a.get("num_groups", a.get("group"))
    xg = g.reshape(x, (n, groups, c // groups * math.prod(shape[2:])))
    y, mean, rstd = _normalize(g, xg, [2], float(a["eps"]))
    y = _affine(imp, g.reshape(y, shape), a["weight"], a["bias"], (c,) + (1,) * (len(shape) - 2))
    if "native" in _op_name(imp.node.target):
        return [y, g.reshape(mean, (n, groups)), g.reshape(rstd, (n, groups))]
    return y


# -- convolution and pooling ------------------------------------------------------------------------


def _pad(g, x, low, high, value):
    if not any(low) and not any(high):
        return x
    return g.emit(lambda v: aicc_nn.PadOp(v, list(low), list(high), value), x)


def _slice(g, x, starts, steps, counts):
    if list(counts) == list(g.shape(x)) and not any(starts) and all(s == 1 for s in steps):
        return x
    if isinstance(x, np.ndarray):
        idx = tuple(s + np.arange(n) * st for s, st, n in zip(starts, steps, counts))
        return np.ascontiguousarray(x[np.ix_(*idx)]) if idx else x
    return g.emit(lambda v: aicc_nn.SliceOp(v, list(starts), list(steps), list(counts)), x)


def _slice_dim(g, x, dim, start, step, count):
    shape = g.shape(x)
    starts, steps, counts = [0] * len(shape), [1] * len(shape), list(shape)
    starts[dim], steps[dim], counts[dim] = start, step, count
    return _slice(g, x, starts, steps, counts)


def _lift_2d(imp, x, nd: int):
    """An input with `nd` spatial dims (1 or 2), batched or not, as NCHW; and the way back."""
    g = imp.g
    shape = g.shape(x)
    if nd not in (1, 2) or len(shape) not in (nd + 1, nd + 2):
        raise imp.unsupported(f"a rank-{len(shape)} input with {nd} spatial dims (aicc has 1-D and 2-D)")
    lead = shape[: len(shape) - nd]
    if len(lead) == 1:
        lead = (1, *lead)
    spatial = shape[len(shape) - nd:]
    x4 = g.reshape(x, (*lead, *((1,) * (2 - nd)), *spatial))
    return x4, (lambda y: g.reshape(y, imp.out_shape()))


@handles("aten.conv2d.default", "aten.conv2d.padding", "aten.conv1d.default", "aten.conv1d.padding",
         "aten.convolution.default", "aten._convolution.default")
def _conv(imp, a):
    g = imp.g
    x, w, b = _float_input(imp, a["input"]), a["weight"], a.get("bias")
    nd = len(g.shape(w)) - 2
    if nd not in (1, 2):
        raise imp.unsupported(f"{nd}-D convolution")
    x4, back = _lift_2d(imp, x, nd)
    w = imp.operand(w, g.dtype(x))
    if nd == 1:
        ws = g.shape(w)
        w = g.reshape(w, (ws[0], ws[1], 1, ws[2]))
    lift = (lambda v, unit=1: [unit, *_pair(v, 1)]) if nd == 1 else (lambda v, unit=1: _pair(v))
    stride, dilation = lift(a["stride"]), lift(a["dilation"])
    if a.get("transposed"):
        # (C, OC/groups, KH, KW) weights, as aicc's; padding crops the full output at the start,
        # and output_padding (like the rest of the end) is just the result size torch recorded
        out_hw = [1, imp.out_shape()[-1]] if nd == 1 else list(imp.out_shape()[-2:])
        pads = lift(a["padding"], 0)
        y = g.emit(lambda v, ww: aicc_nn.ConvTranspose2dOp(v, ww, out_hw, stride, dilation, int(a["groups"]), pads),
                   x4, w)
        if b is not None:
            y = g.add(y, g.reshape(imp.operand(b, g.dtype(y)), (g.shape(b)[0], 1, 1)))
        return back(y)
    k = g.shape(w)[2:]
    padding = a["padding"]
    if isinstance(padding, str):
        if padding == "valid":
            low = high = [0, 0]
        elif padding == "same":
            total = [d * (kk - 1) for d, kk in zip(dilation, k)]
            low = [t // 2 for t in total]
            high = [t - lo for t, lo in zip(total, low)]
        else:
            raise imp.unsupported(f"padding='{padding}'")
    else:
        low = high = lift(padding, 0)
    x4 = _pad(g, x4, [0, 0, *low], [0, 0, *high], 0.0)
    y = g.emit(lambda v, ww: aicc_nn.Conv2dOp(v, ww, stride, dilation, int(a["groups"])), x4, w)
    if b is not None:
        y = g.add(y, g.reshape(imp.operand(b, g.dtype(y)), (g.shape(b)[0], 1, 1)))
    return back(y)


def _pool_windows(imp, x4, nd, kernel, stride, padding, dilation, value, kind):
    """Pool2d over `x4` padded by `padding` before and as far as the last window needs after;
    the output size is the one torch recorded (ceil_mode included)."""
    g = imp.g
    out = [1, *imp.out_shape()[-1:]] if nd == 1 else list(imp.out_shape()[-2:])
    hw = g.shape(x4)[2:]
    high = [max(0, (o - 1) * s + d * (k - 1) + 1 - n - p)
            for o, s, d, k, n, p in zip(out, stride, dilation, kernel, hw, padding)]
    padded = _pad(g, x4, [0, 0, *padding], [0, 0, *high], value)
    y = g.emit(lambda v: aicc_nn.Pool2dOp(v, kind, kernel, stride, dilation), padded)
    ys = g.shape(y)
    if tuple(ys[2:]) != tuple(out):
        y = _slice(g, y, [0] * 4, [1] * 4, [*ys[:2], *out])
    return y, out


@handles("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default", "aten.max_pool1d.default",
         "aten.max_pool1d_with_indices.default")
def _max_pool(imp, a):
    g = imp.g
    name = _op_name(imp.node.target)
    nd = 1 if "1d" in name else 2
    x4, back = _lift_2d(imp, _float_input(imp, a["input"]), nd)
    lift = (lambda v: [1, *_pair(v, 1)]) if nd == 1 else _pair
    kernel = lift(a["kernel_size"])
    stride = lift(a["stride"]) if a["stride"] else kernel
    pad_ = [0, *_pair(a["padding"], 1)] if nd == 1 else _pair(a["padding"])
    y, _ = _pool_windows(imp, x4, nd, kernel, stride, pad_, lift(a["dilation"]), -math.inf, "max")
    if "with_indices" in name:
        return [g.reshape(y, imp.out_shape(0)), _POOL_INDICES]
    return back(y)


@handles("aten.avg_pool2d.default", "aten.avg_pool1d.default")
def _avg_pool(imp, a):
    g = imp.g
    nd = 1 if "1d" in _op_name(imp.node.target) else 2
    x4, back = _lift_2d(imp, _float_input(imp, a["input"]), nd)
    lift = (lambda v: [1, *_pair(v, 1)]) if nd == 1 else _pair
    kernel = lift(a["kernel_size"])
    stride = lift(a["stride"]) if a["stride"] else kernel
    pad_ = [0, *_pair(a["padding"], 1)] if nd == 1 else _pair(a["padding"])
    y, out = _pool_windows(imp, x4, nd, kernel, stride, pad_, [1, 1], 0.0, "sum")
    divisor = a.get("divisor_override")
    if divisor:
        return back(g.div(y, g.scalar(float(divisor), y)))
    counts = _pool_counts(out, stride, kernel, pad_, g.shape(x4)[2:], a.get("count_include_pad", True))
    table = (1.0 / np.outer(counts[0], counts[1])).astype(g.dtype(y))
    return back(g.mul(y, table))


def _pool_counts(out, stride, kernel, padding, sizes, include_pad: bool) -> list[np.ndarray]:
    """Per dim, the number of elements torch's average pooling divides each window by."""
    counts = []
    for o, s, k, p, n in zip(out, stride, kernel, padding, sizes):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if not include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        counts.append(end - start)
    return counts


@handles("aten.max_pool3d.default", "aten.max_pool3d_with_indices.default", "aten.avg_pool3d.default")
def _pool3d(imp, a):
    """3-D pooling is separable: an H x W pool2d with D as the channels, then a D x 1 pool2d
    over (D, H*W); padded with -inf (max) or 0 (sum) as far as the last window torch records
    needs. Average pooling divides by the product of the three dims' counts."""
    g = imp.g
    name = _op_name(imp.node.target)
    is_max = "max" in name
    x = _float_input(imp, a["input"])
    shape = g.shape(x)
    if len(shape) not in (4, 5):
        raise imp.unsupported(f"3-D pooling of a rank-{len(shape)} input")
    lead, sizes = shape[:-3], list(shape[-3:])
    n = math.prod(lead)
    kernel = _pair(a["kernel_size"], 3)
    stride = _pair(a["stride"], 3) if a["stride"] else kernel
    pad_ = _pair(a["padding"], 3)
    dil = _pair(a.get("dilation", 1), 3)
    out = list(imp.out_shape(0 if "with_indices" in name else None)[-3:])
    high = [max(0, (o - 1) * s + d * (k - 1) + 1 - sz - p)
            for o, s, d, k, sz, p in zip(out, stride, dil, kernel, sizes, pad_)]
    kind = "max" if is_max else "sum"
    y = _pad(g, g.reshape(x, (n, *sizes)), [0, *pad_], [0, *high], -math.inf if is_max else 0.0)
    y = g.emit(lambda v: aicc_nn.Pool2dOp(v, kind, kernel[1:], stride[1:], dil[1:]), y)
    ys = g.shape(y)
    y = _slice(g, y, [0] * 4, [1] * 4, [*ys[:2], *out[1:]])
    y = g.reshape(y, (n, 1, ys[1], out[1] * out[2]))
    y = g.emit(lambda v: aicc_nn.Pool2dOp(v, kind, (kernel[0], 1), (stride[0], 1), (dil[0], 1)), y)
    ys = g.shape(y)
    y = g.reshape(_slice(g, y, [0] * 4, [1] * 4, [*ys[:2], out[0], ys[3]]), (*lead, *out))
    if is_max:
        return [y, _POOL_INDICES] if "with_indices" in name else y
    if a.get("divisor_override"):
        return g.div(y, g.scalar(float(a["divisor_override"]), y))
    cd, ch, cw = _pool_counts(out, stride, kernel, pad_, sizes, a.get("count_include_pad", True))
    table = 1.0 / (cd[:, None, None] * ch[None, :, None] * cw[None, None, :])
    return g.mul(y, table.astype(g.dtype(y)))


def _adaptive_matrix(n: int, o: int) -> np.ndarray:
    """(o, n) averaging matrix of adaptive pooling: row i averages [floor(i*n/o), ceil((i+1)*n/o))."""
    m = np.zeros((o, n), np.float64)
    for i in range(o):
        s, e = (i * n) // o, -((-(i + 1) * n) // o)
        m[i, s:e] = 1.0 / (e - s)
    return m


@handles("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
         "aten.adaptive_avg_pool1d.default", "aten.adaptive_max_pool2d.default",
         "aten.adaptive_max_pool1d.default")
def _adaptive_pool(imp, a):
    g = imp.g
    name = _op_name(imp.node.target)
    is_max = "max" in name
    nd = 1 if "1d" in name else 2
    x4, back = _lift_2d(imp, _float_input(imp, a["input"]), nd)
    hw = g.shape(x4)[2:]
    out = list(imp.out_shape()[-nd:])
    out = [1, *out] if nd == 1 else out
    if all(n % o == 0 for n, o in zip(hw, out)):
        k = [n // o for n, o in zip(hw, out)]
        if out == [1, 1]:
            y = g.reduce(aicc.ReduceMaxOp if is_max else aicc.ReduceMeanOp, x4, [2, 3], True)
        else:
            y = g.emit(lambda v: aicc_nn.Pool2dOp(v, "max" if is_max else "sum", k, k), x4)
            if not is_max:
                y = g.div(y, g.scalar(float(k[0] * k[1]), y))
        return [back(y), _POOL_INDICES] if is_max else back(y)
    if is_max:
        raise imp.unsupported(f"adaptive max pooling from {tuple(hw)} to {tuple(out)} (not a whole "
                              "number of windows)")
    dt = g.dtype(x4)
    y = g.matmul(_adaptive_matrix(hw[0], out[0]).astype(dt), x4) if hw[0] != out[0] else x4
    if hw[1] != out[1]:
        y = _matmul(imp, y, np.ascontiguousarray(_adaptive_matrix(hw[1], out[1]).T.astype(dt)))
    return back(y)


# torch's padding modes as np.pad's, which frontends.graph_builder.pad_by_index takes
_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@handles("aten.constant_pad_nd.default", "aten.pad.default", "aten.reflection_pad1d.default",
         "aten.reflection_pad2d.default", "aten.reflection_pad3d.default",
         "aten.replication_pad1d.default", "aten.replication_pad2d.default",
         "aten.replication_pad3d.default", "aten._pad_circular.default")
def _pad_op(imp, a):
    """Constant padding is aicc.pad; reflect, replicate and circular are one aicc.resample (a
    gather with a constant index table) per padded dim, as ONNX Pad's modes. Negative pads crop."""
    g = imp.g
    x = a["input"]
    name = _op_name(imp.node.target)
    if "reflection" in name or "replication" in name:
        mode, pads = ("reflect" if "reflection" in name else "replicate"), list(a["padding"])
    else:
        mode, pads = ("circular" if "circular" in name else a.get("mode") or "constant"), list(a["pad"])
    if mode != "constant" and mode not in _PAD_MODES:
        raise imp.unsupported(f"mode='{mode}' padding")
    shape = g.shape(x)
    rank = len(shape)
    low, high = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        low[rank - 1 - i], high[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    if any(p < 0 for p in low + high):  # negative padding crops
        x = _slice(g, x, [max(-p, 0) for p in low], [1] * rank,
                   [d - max(-lo, 0) - max(-hi, 0) for d, lo, hi in zip(shape, low, high)])
        low, high = [max(p, 0) for p in low], [max(p, 0) for p in high]
    if not any(low) and not any(high):
        return x
    if mode != "constant":
        limit = {"reflect": lambda n: n - 1, "replicate": lambda n: math.inf, "circular": lambda n: n}[mode]
        for d, lo, hi in zip(g.shape(x), low, high):
            if (lo or hi) and (d == 0 or max(lo, hi) > limit(d)):
                raise imp.unsupported(f"{mode} padding by {max(lo, hi)} of a dim of size {d}")
        return pad_by_index(g, x, low, high, _PAD_MODES[mode])
    value = a.get("value")
    value = 0.0 if value is None else float(value)
    if g.dtype(x).kind == "b" or (g.dtype(x).kind in "iu" and not value.is_integer()):
        raise imp.unsupported(f"padding a {g.dtype(x)} tensor with {value}")
    return _pad(g, x, low, high, value)


# -- interpolation ------------------------------------------------------------------------------
# One aicc.resample per resized dim (interpolation is separable), as the ONNX importer's Resize.
# The tap tables are torch's own (aten/src/ATen/native/UpSample.h and cpu/UpSampleKernel.cpp),
# computed in float32 as torch computes them: the source index of output i is
#     nearest         floor(i * s)                   (ONNX: asymmetric + floor)
#     nearest-exact   floor((i + 0.5) * s - 0.5 + 0.5)  (ONNX: half_pixel + round_prefer_ceil)
#     linear, cubic   (i + 0.5) * s - 0.5, or i * s with align_corners  (ONNX: pytorch_half_pixel
#                     / align_corners, with a cubic coefficient of -0.75)
# with s = 1 / scale_factor when the caller gave one, in / out otherwise ((in-1) / (out-1) with
# align_corners). ONNX's reference computes these in float64, which picks another source pixel
# where float32 rounds across an integer (nearest from 6 to 74 pixels: output 37 reads pixel 2
# in torch, 3 in float64), and gives an output of size 1 its first pixel rather than torch's
# centre; hence torch's arithmetic here.

_F32 = np.float32


def _upsample_scale(n_in: int, n_out: int, align_corners: bool, scale) -> np.float32:
    """torch's area_pixel_compute_scale, in float32."""
    if align_corners:
        return _F32(n_in - 1) / _F32(n_out - 1) if n_out > 1 else _F32(0.0)
    if scale is not None and scale > 0:
        return _F32(1.0 / scale)
    return _F32(n_in) / _F32(n_out)


def upsample_taps(kind: str, n_in: int, n_out: int, align_corners: bool = False, scale=None):
    """(indices, weights) of torch's interpolation of one dim from n_in to n_out elements:
    `kind` is nearest, nearest_exact, linear or cubic; indices (n_out,) and weights None for
    the nearest modes (and for linear with n_out == n_in, an identity), else (n_out, taps)."""
    i = np.arange(n_out).astype(_F32)
    if kind in ("nearest", "nearest_exact"):
        s = _upsample_scale(n_in, n_out, False, scale)
        if kind == "nearest":
            src = np.floor(s * i)
        else:
            src = np.floor(np.maximum(s * (i + _F32(0.5)) - _F32(0.5), _F32(0.0)) + _F32(0.5))
        return np.minimum(src.astype(np.int64), n_in - 1), None
    if kind == "linear" and n_out == n_in and not align_corners:
        return np.arange(n_out), None
    s = _upsample_scale(n_in, n_out, align_corners, scale)
    if align_corners:
        real = s * i
    else:
        real = s * (i + _F32(0.5)) - _F32(0.5)
        if kind == "linear":
            real = np.maximum(real, _F32(0.0))
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    t = np.clip(real - i0.astype(_F32), _F32(0.0), _F32(1.0))
    if kind == "linear":
        i1 = np.where(i0 < n_in - 1, i0 + 1, i0)
        return np.stack([i0, i1], 1), np.stack([_F32(1.0) - t, t], 1)
    a = _F32(-0.75)  # torch's cubic convolution coefficient

    def near(x):  # |x| <= 1
        return ((a + _F32(2)) * x - (a + _F32(3))) * x * x + _F32(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - _F32(5) * a) * x + _F32(8) * a) * x - _F32(4) * a

    w = np.stack([far(t + _F32(1)), near(t), near(_F32(1) - t), far((_F32(1) - t) + _F32(1))], 1)
    return np.clip(i0[:, None] - 1 + np.arange(4)[None, :], 0, n_in - 1), w


_UPSAMPLE_KINDS = {"upsample_nearest": "nearest", "_upsample_nearest_exact": "nearest_exact",
                   "upsample_linear": "linear", "upsample_bilinear": "linear",
                   "upsample_trilinear": "linear", "upsample_bicubic": "cubic"}
_UPSAMPLE_OPS = [f"aten.{base}{nd}d.{overload}"
                 for base, nds in (("upsample_nearest", "123"), ("_upsample_nearest_exact", "123"),
                                   ("upsample_linear", "1"), ("upsample_bilinear", "2"),
                                   ("upsample_trilinear", "3"), ("upsample_bicubic", "2"))
                 for nd in nds for overload in ("vec", "default")]


@handles(*_UPSAMPLE_OPS)
def _upsample(imp, a):
    """F.interpolate: one aicc.resample per resized spatial dim, with torch's tap tables."""
    g, x = imp.g, a["input"]
    name = _op_name(imp.node.target).split(".")[1]  # upsample_bilinear2d
    kind, nd = _UPSAMPLE_KINDS[name[:-2]], int(name[-2])
    shape = g.shape(x)
    if len(shape) != nd + 2 or 0 in shape:
        raise imp.unsupported(f"interpolating a tensor of shape {shape}")
    if "scale_factors" in a:
        scales = list(a["scale_factors"] or [None] * nd)
    else:  # scales / scales_h, scales_w / scales_d, scales_h, scales_w, in schema order
        scales = [v for k, v in a.items() if k.startswith("scales")]
    align = bool(a.get("align_corners") or False)
    if kind != "nearest" and kind != "nearest_exact":
        x = _float_input(imp, x)
    out = imp.out_shape()[-nd:]
    for d in range(nd):
        axis = 2 + d
        idx, w = upsample_taps(kind, shape[axis], out[d], align, scales[d])
        if w is None and np.array_equal(idx, np.arange(shape[axis])):
            continue
        x = g.emit(lambda v, axis=axis, idx=idx, w=w: aicc_nn.ResampleOp(v, axis, idx, w), x)
    return x


# -- shapes ------------------------------------------------------------------------------------------


@handles("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
         "aten.flatten.using_ints", "aten.unflatten.int", "aten.unsqueeze.default",
         "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.view_as.default",
         "aten.reshape_as.default")
def _reshape(imp, a):
    return imp.g.reshape(a["input"], imp.out_shape())


@handles("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(imp, a):
    g, x = imp.g, a["input"]
    out = imp.out_shape()
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(np.broadcast_to(x, out))
    return g.broadcast_to(x, out)


@handles("aten.permute.default")
def _permute(imp, a):
    rank = len(imp.g.shape(a["input"]))
    return imp.g.transpose(a["input"], [d % rank for d in a["dims"]])


@handles("aten.transpose.int", "aten.t.default", "aten.numpy_T.default")
def _transpose(imp, a):
    g, x = imp.g, a["input"]
    rank = len(g.shape(x))
    if rank < 2:
        return x
    name = _op_name(imp.node.target)
    if name == "aten.numpy_T.default":
        return g.transpose(x, list(range(rank))[::-1])
    d0, d1 = (a["dim0"] % rank, a["dim1"] % rank) if name == "aten.transpose.int" else (0, 1)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return g.transpose(x, perm)


@handles("aten.repeat.default")
def _repeat(imp, a):
    g = imp.g
    reps = list(a["repeats"])
    x = a["input"]
    shape = (1,) * (len(reps) - len(g.shape(x))) + g.shape(x)
    x = g.reshape(x, shape)
    if isinstance(x, np.ndarray):
        return np.tile(x, reps)
    inter = [v for d in shape for v in (1, d)]  # x as (1, d0, 1, d1, ...) broadcast to (r0, d0, ...)
    target = [v for r, d in zip(reps, shape) for v in (r, d)]
    return g.reshape(g.broadcast_to(g.reshape(x, inter), target), imp.out_shape())


def _concat(imp, vals, axis):
    g = imp.g
    dt = imp.out_dtype()
    vals = [imp.operand(v, dt) for v in vals if math.prod(g.shape(v)) or len(g.shape(v)) != 1]
    vals = [v for v in vals if g.shape(v)[axis]] or vals[:1]
    if all(isinstance(v, np.ndarray) for v in vals):
        return np.concatenate(vals, axis=axis)
    if len(vals) == 1:
        return vals[0]
    return g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), axis), *vals)


@handles("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(imp, a):
    rank = len(imp.out_shape())
    return _concat(imp, a["tensors"], a["dim"] % rank)


@handles("aten.stack.default")
def _stack(imp, a):
    g = imp.g
    rank = len(imp.out_shape())
    axis = a["dim"] % rank
    vals = []
    for v in a["tensors"]:
        s = list(g.shape(v))
        s.insert(axis, 1)
        vals.append(g.reshape(v, s))
    return _concat(imp, vals, axis)


@handles("aten.slice.Tensor")
def _slice_op(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    r = range(*slice(a["start"], a["end"], a["step"]).indices(shape[dim]))
    if len(r) == 0:
        raise imp.unsupported("a slice with no elements")
    return _slice_dim(g, x, dim, r.start, r.step, len(r))


@handles("aten.narrow.default")
def _narrow(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    return _slice_dim(g, x, dim, int(a["start"]) % shape[dim], 1, int(a["length"]))


@handles("aten.select.int")
def _select(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    return g.reshape(_slice_dim(g, x, dim, a["index"] % shape[dim], 1, 1), imp.out_shape())


@handles("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
         "aten.unbind.int", "aten.tensor_split.sections", "aten.split.sizes")
def _split(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a.get("dim", 0) % len(shape)
    outs, offset = [], 0
    for fake in imp.node.meta["val"]:
        n = int(fake.shape[dim]) if len(fake.shape) == len(shape) else 1
        part = _slice_dim(g, x, dim, offset, 1, n) if n else None
        if part is None:
            raise imp.unsupported("a split with an empty part")
        outs.append(g.reshape(part, tuple(int(d) for d in fake.shape)))
        offset += n
    return outs


@handles("aten.copy.default")
def _copy(imp, a):  # the functional copy_: src cast and broadcast to the destination's type
    src = imp.operand(a["src"], imp.out_dtype())
    if isinstance(src, np.ndarray):
        return np.ascontiguousarray(np.broadcast_to(src, imp.out_shape()))
    return imp.g.broadcast_to(src, imp.out_shape())


@handles("aten.slice_scatter.default", "aten.select_scatter.default")
def _slice_scatter(imp, a):
    """`input` with a slice along `dim` replaced by `src`: the pieces around it, concatenated."""
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    src = imp.operand(a["src"], imp.out_dtype())
    if "select" in _op_name(imp.node.target):
        start = a["index"] % shape[dim]
        end = start + 1
        src = g.reshape(src, shape[:dim] + (1,) + shape[dim + 1:])
    else:
        r = range(*slice(a["start"], a["end"], a["step"]).indices(shape[dim]))
        if len(r) == 0:
            return x
        if r.step != 1:
            raise imp.unsupported("a strided slice assignment")
        start, end = r.start, r.stop
    parts = [_slice_dim(g, x, dim, 0, 1, start) if start else None, src,
             _slice_dim(g, x, dim, end, 1, shape[dim] - end) if end < shape[dim] else None]
    return _concat(imp, [p for p in parts if p is not None], dim)


@handles("aten.flip.default")
def _flip(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dims = {d % len(shape) for d in a["dims"]}
    starts = [shape[i] - 1 if i in dims else 0 for i in range(len(shape))]
    steps = [-1 if i in dims else 1 for i in range(len(shape))]
    return _slice(g, x, starts, steps, list(shape))


@handles("aten.roll.default")
def _roll(imp, a):
    g, x = imp.g, a["input"]
    shifts, dims = list(a["shifts"]), list(a["dims"])
    if not dims:  # roll of the flattened tensor
        flat = g.reshape(x, (math.prod(g.shape(x)),))
        return g.reshape(_roll_dim(imp, flat, 0, shifts[0]), imp.out_shape())
    for s, d in zip(shifts, dims):
        x = _roll_dim(imp, x, d % len(g.shape(x)), s)
    return x


def _roll_dim(imp, x, dim, shift):
    g = imp.g
    n = g.shape(x)[dim]
    s = shift % n
    if s == 0:
        return x
    return _concat(imp, [_slice_dim(g, x, dim, n - s, 1, s), _slice_dim(g, x, dim, 0, 1, n - s)], dim)


@handles("aten.tril.default", "aten.triu.default")
def _tri(imp, a):
    g, x = imp.g, a["input"]
    rows, cols = g.shape(x)[-2:]
    fn = np.tril if "tril" in _op_name(imp.node.target) else np.triu
    keep = fn(np.ones((rows, cols), np.bool_), a["diagonal"])
    return g.select(keep, x, np.zeros((), g.dtype(x)))


def _index(imp, x, idx, axis):
    g = imp.g
    size = g.shape(x)[axis]
    if isinstance(idx, np.ndarray):
        if np.any((idx < -size) | (idx >= size)):
            raise imp.unsupported("out-of-range indices")
        idx = np.where(idx < 0, idx + size, idx).astype(np.int64)
        if isinstance(x, np.ndarray):
            return np.take(x, idx, axis=axis)
    elif g.dtype(idx).kind not in "iu":
        raise imp.unsupported(f"indices of dtype {g.dtype(idx)}")
    return g.emit(lambda d, i: aicc_nn.GatherOp(d, i, axis), x, idx)


@handles("aten.embedding.default")
def _embedding(imp, a):
    return _index(imp, a["weight"], a["indices"], 0)


@handles("aten.index_select.default")
def _index_select(imp, a):
    return _index(imp, a["input"], a["index"], a["dim"] % len(imp.g.shape(a["input"])))


@handles("aten.index.Tensor")
def _index_tensor(imp, a):
    g, x = imp.g, a["input"]
    idx = list(a["indices"])
    used = [i for i, v in enumerate(idx) if v is not None]
    if len(used) != 1:
        raise imp.unsupported("indexing with more than one index tensor")
    v = idx[used[0]]
    if g.dtype(v) == np.bool_:
        raise imp.unsupported("indexing with a boolean mask")
    return _index(imp, x, v, used[0])


@handles("aten.gather.default")
def _gather(imp, a):
    """torch.gather: constant indices are one take from the flattened input; computed ones an
    aicc.gather_elements (an index outside the dim is not checked at run time)."""
    g, x, idx = imp.g, a["input"], a["index"]
    shape = g.shape(x)
    if not shape:
        return g.reshape(x, imp.out_shape())
    dim = a["dim"] % len(shape)
    if 0 in g.shape(idx):
        return np.zeros(g.shape(idx), imp.out_dtype())
    if not isinstance(idx, np.ndarray):
        return g.emit(lambda d, i: aicc_nn.GatherElementsOp(d, i, dim), x, idx)
    grid = list(np.indices(idx.shape))
    grid[dim] = np.where(idx < 0, idx + shape[dim], idx)
    flat = np.ravel_multi_index(tuple(grid), shape).astype(np.int64)  # one take from the flat tensor
    return _index(imp, g.reshape(x, (math.prod(shape),)), flat, 0)


# -- attention ---------------------------------------------------------------------------------------


@handles("aten.scaled_dot_product_attention.default")
def _sdpa(imp, a):
    g = imp.g
    q, k, v = (_float_input(imp, a[n]) for n in ("query", "key", "value"))
    if a.get("dropout_p", 0.0):
        raise imp.unsupported("attention dropout (dropout_p > 0)")
    sq, sk = g.shape(q), g.shape(k)
    if a.get("enable_gqa") and len(sq) >= 3 and sq[-3] != sk[-3]:
        rep = sq[-3] // sk[-3]

        def repeat_heads(t):  # repeat_interleave along the head dim
            s = g.shape(t)
            t = g.broadcast_to(g.reshape(t, (*s[:-2], 1, *s[-2:])), (*s[:-2], rep, *s[-2:]))
            return g.reshape(t, (*s[:-3], s[-3] * rep, *s[-2:]))

        k, v = repeat_heads(k), repeat_heads(v)
    L, S, E = sq[-2], g.shape(k)[-2], sq[-1]
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    rank = len(g.shape(k))
    kt = g.transpose(k, [*range(rank - 2), rank - 1, rank - 2])
    scores = g.mul(g.matmul(q, kt), g.scalar(scale, q))
    mask = a.get("attn_mask")
    maybe_empty_rows = False
    if a.get("is_causal"):
        mask = np.tril(np.ones((L, S), np.bool_))
    if mask is not None:
        if g.dtype(mask) == np.bool_:
            scores = g.select(mask, scores, g.scalar(-math.inf, scores))
            maybe_empty_rows = not isinstance(mask, np.ndarray) or not np.all(mask.any(axis=-1))
        else:
            mask = imp.operand(mask, g.dtype(scores))
            scores = g.add(scores, mask)
            maybe_empty_rows = not isinstance(mask, np.ndarray) or bool(np.any(np.all(np.isneginf(mask), axis=-1)))
    p = g.emit(lambda t: aicc.SoftmaxOp(t, len(g.shape(t)) - 1), scores)
    if maybe_empty_rows:
        p = _zero_fully_masked(g, scores, p, len(g.shape(scores)) - 1)
    return g.matmul(p, v)


SUPPORTED_OPS = HANDLERS
