"""Trace a NumPy-style Python function into the aicc tensor dialect.

The function runs once on `Tracer` objects, one per example input. A Tracer holds an SSA value
and its static shape; NumPy hands every ufunc call (`np.exp(x)`, `x + 1`) to
`Tracer.__array_ufunc__` and every array function (`np.sum(x)`) to `Tracer.__array_function__`,
each of which appends one aicc op to the function being built. Whatever cannot be expressed
(an unknown NumPy function, Python control flow on traced values, indexing) raises
UnsupportedOpError naming the construct and the user's `file:line`.

    prog = trace(lambda x, w: np.maximum(x @ w, 0), (x, w))
    print(prog.module)
"""

from __future__ import annotations

import importlib.util
import inspect
import operator
import os
import sys
import sysconfig
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float32Type,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.shapes import fmt_shape
from compiler.errors import CompileError, ShapeError, UnsupportedOpError
from compiler.symbolic import Sym
from frontends.graph_builder import TracedProgram

__all__ = ["TracedProgram", "Tracer", "trace"]

F32 = Float32Type()
_FLOAT32 = np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)
_NoValue = getattr(np, "_NoValue", object())


# ---------------------------------------------------------------------------------------------
# Where in the user's code are we?
# ---------------------------------------------------------------------------------------------


def _compiler_dirs() -> list[str]:
    """The directories of the `compiler` package, found without importing it: frontends never
    import the package's public API (compiler/__init__ imports compiler.api, which imports
    the frontends)."""
    spec = importlib.util.find_spec("compiler")
    return list(spec.submodule_search_locations or []) if spec is not None else []


def _internal_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    import xdsl

    pkg_dirs = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(np.__file__),
                os.path.dirname(xdsl.__file__)]
    pkg_dirs += [os.path.abspath(p) for p in _compiler_dirs()]
    paths = sysconfig.get_paths()
    std_dirs = {paths["stdlib"], paths["platstdlib"]}
    return (
        tuple(os.path.join(os.path.realpath(d), "") for d in pkg_dirs),
        tuple(os.path.join(os.path.realpath(d), "") for d in std_dirs),
    )


_INTERNAL: tuple[tuple[str, ...], tuple[str, ...]] | None = None
_FILE_CACHE: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    try:
        return _FILE_CACHE[filename]
    except KeyError:
        pass
    global _INTERNAL
    if _INTERNAL is None:
        _INTERNAL = _internal_dirs()
    pkg_dirs, std_dirs = _INTERNAL
    if filename.startswith("<frozen"):
        internal = True
    elif filename.startswith("<"):  # <stdin>, <string>: code the user typed or exec'd
        internal = False
    else:
        path = os.path.realpath(filename)
        in_site = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
        internal = path.startswith(pkg_dirs) or (path.startswith(std_dirs) and not in_site)
    _FILE_CACHE[filename] = internal
    return internal


def user_location() -> str | None:
    """`file.py:LINE` of the innermost frame outside aicc, NumPy, xDSL and the standard library."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal(filename):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _unsupported(op: str, message: str | None = None) -> UnsupportedOpError:
    message = message or f"{op} is not supported by aicc's NumPy tracer"
    return UnsupportedOpError(op, message, location=user_location())


# ---------------------------------------------------------------------------------------------
# The program being built
# ---------------------------------------------------------------------------------------------


class _Trace:
    """The function under construction: its block, builder, constants and op locations."""

    def __init__(self, block: Block):
        self.block = block
        self.builder = Builder(InsertPoint.at_end(block))
        self.locations: dict[Operation, str] = {}
        self.scalars: dict[tuple[str, bytes], Tracer] = {}
        # id(array) -> (array, tracer); holding the array keeps its id from being reused.
        self.arrays: dict[int, tuple[np.ndarray, Tracer]] = {}
        self.active = True

    def emit(self, make: Callable[..., Operation], *args: Any) -> Tracer:
        location = user_location()
        try:
            op = make(*args)
        except ValueError as e:  # the dialect's shape helpers
            raise ShapeError(str(e), location=location) from None
        self.builder.insert(op)
        if location is not None:
            self.locations[op] = location
        return Tracer(self, op.results[0])

    def constant(self, array: np.ndarray) -> Tracer:
        return self.emit(_constant_op, array)

    def lift(self, x: Any) -> Tracer:
        """An operand as a Tracer: Python/NumPy scalars and captured arrays become constants."""
        if isinstance(x, Tracer):
            if x._trace is not self:
                raise CompileError(
                    "a traced array from another (finished) trace was used here",
                    location=user_location(),
                )
            return x
        if isinstance(x, (bool, np.bool_)):
            return self._scalar(np.array(bool(x)))
        if isinstance(x, (int, float, np.integer, np.floating)):
            # Scalars in the model's code are float32, whatever Python's type for them.
            return self._scalar(np.array(x, dtype=np.float32))
        if isinstance(x, (list, tuple)):
            x = np.asarray(x)
        if isinstance(x, np.ndarray):
            if x.ndim == 0:
                return self.lift(x[()])
            cached = self.arrays.get(id(x))
            if cached is not None and cached[0] is x:
                return cached[1]
            if x.dtype == _BOOL:
                value = x
            elif np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer):
                # Captured arrays are the user's weights, not inputs: float64 (NumPy's default)
                # weights are converted to float32 rather than rejected.
                value = x.astype(np.float32)
            else:
                raise CompileError(
                    f"cannot capture an array of dtype {x.dtype}; aicc compiles float32",
                    location=user_location(),
                )
            t = self.constant(value)
            self.arrays[id(x)] = (x, t)
            return t
        raise CompileError(
            f"cannot use a value of type {type(x).__name__} as an array", location=user_location()
        )

    def _scalar(self, value: np.ndarray) -> Tracer:
        key = (value.dtype.str, value.tobytes())
        t = self.scalars.get(key)
        if t is None:
            t = self.scalars[key] = self.constant(value)
        return t


def _constant_op(array: np.ndarray) -> aicc.ConstantOp:
    if array.ndim == 0:
        # aicc.dense_from_numpy goes through np.ascontiguousarray, which turns a 0-d array into
        # shape (1,); scalars must stay tensor<f32> so they broadcast without changing shapes.
        elem = aicc.mlir_element_type(array.dtype)
        data = array.astype(np.int8) if array.dtype == _BOOL else array
        return aicc.ConstantOp(
            DenseIntOrFPElementsAttr(TensorType(elem, ()), BytesAttr(np.asarray(data).tobytes()))
        )
    return aicc.ConstantOp.from_array(array)


_ACTIVE: list[_Trace] = []


def _current() -> _Trace:
    if not _ACTIVE:
        raise CompileError("a traced array was used outside of its trace", location=user_location())
    return _ACTIVE[-1]


# ---------------------------------------------------------------------------------------------
# Op builders on Tracers (operands may be scalars or captured arrays)
# ---------------------------------------------------------------------------------------------


def _float(t: Tracer) -> Tracer:
    """Bool tensors take part in arithmetic as 0.0 / 1.0, as in NumPy."""
    if t.dtype == _BOOL:
        return t._trace.emit(aicc.CastOp, t.value, F32)
    return t


def _unary(cls: type[Operation]) -> Callable[[Any], Tracer]:
    def build(x: Any) -> Tracer:
        x = _float(_current().lift(x))
        return x._trace.emit(cls, x.value)

    return build


def _binary(cls: type[Operation]) -> Callable[[Any, Any], Tracer]:
    def build(a: Any, b: Any) -> Tracer:
        tr = _current()
        a, b = _float(tr.lift(a)), _float(tr.lift(b))
        return tr.emit(cls, a.value, b.value)

    return build


def _compare(predicate: str) -> Callable[[Any, Any], Tracer]:
    def build(a: Any, b: Any) -> Tracer:
        tr = _current()
        a, b = _float(tr.lift(a)), _float(tr.lift(b))
        return tr.emit(aicc.CompareOp, predicate, a.value, b.value)

    return build


def _square(x: Any) -> Tracer:
    x = _float(_current().lift(x))
    return x._trace.emit(aicc.MulOp, x.value, x.value)


def _reciprocal(x: Any) -> Tracer:
    return _binary(aicc.DivOp)(1.0, x)


def _positive(x: Any) -> Tracer:
    return _float(_current().lift(x))


def _where(condition: Any, x: Any = _NoValue, y: Any = _NoValue) -> Tracer:
    if x is _NoValue or y is _NoValue:
        raise _unsupported("np.where", "np.where with one argument (nonzero indices) is not supported")
    tr = _current()
    c = tr.lift(condition)
    if c.dtype != _BOOL:
        c = tr.emit(aicc.CompareOp, "ne", c.value, tr.lift(0.0).value)
    a, b = _float(tr.lift(x)), _float(tr.lift(y))
    return tr.emit(aicc.SelectOp, c.value, a.value, b.value)


def _axes(axis: Any) -> Any:
    if axis is None or axis is _NoValue:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(operator.index(a) for a in axis)
    return operator.index(axis)


def _reduction(cls: type[Operation], np_name: str) -> Callable[..., Tracer]:
    def build(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
              keepdims: Any = False, **extra: Any) -> Tracer:
        if out is not None:
            raise _unsupported(np_name, f"{np_name} with out= is not supported")
        if dtype is not None and np.dtype(dtype) != _FLOAT32:
            raise _unsupported(np_name, f"{np_name} with dtype={np.dtype(dtype)}; aicc computes float32")
        extra = {k: v for k, v in extra.items() if v is not _NoValue}
        if extra:
            raise _unsupported(np_name, f"{np_name} with {', '.join(f'{k}=' for k in extra)} is not supported")
        keep = False if keepdims is _NoValue else bool(keepdims)
        x = _float(_current().lift(a))
        return x._trace.emit(cls, x.value, _axes(axis), keep)

    return build


# np.sum(a, axis, dtype, out, keepdims, ...) vs np.max(a, axis, out, keepdims, ...): no dtype.
def _max_like(cls: type[Operation], np_name: str) -> Callable[..., Tracer]:
    reduce = _reduction(cls, np_name)

    def build(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, **extra: Any) -> Tracer:
        return reduce(a, axis, None, out, keepdims, **extra)

    return build


_sum = _reduction(aicc.ReduceSumOp, "np.sum")
_mean = _reduction(aicc.ReduceMeanOp, "np.mean")
_prod = _reduction(aicc.ReduceProdOp, "np.prod")
_max = _max_like(aicc.ReduceMaxOp, "np.max")
_min = _max_like(aicc.ReduceMinOp, "np.min")


def _moment(np_name: str, root: bool) -> Callable[..., Tracer]:
    """np.var / np.std as mean((x - mean(x))**2): no aicc op of their own."""

    def build(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
              keepdims: Any = False, **extra: Any) -> Tracer:
        correction = extra.pop("correction", _NoValue)
        if correction is not _NoValue:
            ddof = correction
        if extra.get("mean", _NoValue) is not _NoValue:
            raise _unsupported(np_name, f"{np_name} with mean= is not supported")
        extra.pop("mean", None)
        x = _float(_current().lift(a))
        centered = _binary(aicc.SubOp)(x, _mean(x, axis, dtype, out, True, **extra))
        var = _mean(_square(centered), axis, None, None, keepdims)
        if ddof:
            axes = aicc.normalize_axes(np_name, _axes(axis), x.ndim)  # already checked by _mean
            n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
            var = _binary(aicc.MulOp)(var, n / (n - float(ddof)))
        return _unary(aicc.SqrtOp)(var) if root else var

    return build


_var = _moment("np.var", root=False)
_std = _moment("np.std", root=True)


def _clip(a: Any, a_min: Any = _NoValue, a_max: Any = _NoValue, out: Any = None, *,
          min: Any = _NoValue, max: Any = _NoValue, **extra: Any) -> Tracer:
    if out is not None or extra:
        raise _unsupported("np.clip", f"np.clip with {', '.join(f'{k}=' for k in (['out'] if out is not None else []) + list(extra))} is not supported")
    lo = a_min if a_min is not _NoValue else min
    hi = a_max if a_max is not _NoValue else max
    x = _float(_current().lift(a))
    if lo is not None and lo is not _NoValue:
        x = _binary(aicc.MaximumOp)(x, lo)
    if hi is not None and hi is not _NoValue:
        x = _binary(aicc.MinimumOp)(x, hi)
    return x


def _reshape_to(x: Tracer, shape: Sequence[int]) -> Tracer:
    if tuple(shape) == x.shape:
        return x
    return x._trace.emit(aicc.ReshapeOp, x.value, tuple(shape))


def _matmul(a: Any, b: Any) -> Tracer:
    """np.matmul: 1-D operands are lifted to 2-D and the added dimension removed afterwards."""
    tr = _current()
    a, b = _float(tr.lift(a)), _float(tr.lift(b))
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        raise ShapeError(
            f"aicc.matmul: operands must have rank >= 1, got {fmt_shape(sa)} and {fmt_shape(sb)}",
            location=user_location(),
        )
    if len(sa) == 1 or len(sb) == 1:
        k_b = sb[0] if len(sb) == 1 else sb[-2]
        if sa[-1] != k_b:
            raise ShapeError(
                f"aicc.matmul: contraction dimensions differ: {fmt_shape(sa)} @ {fmt_shape(sb)} "
                f"({sa[-1]} != {k_b})",
                location=user_location(),
            )
    a2 = _reshape_to(a, (1, sa[0])) if len(sa) == 1 else a
    b2 = _reshape_to(b, (sb[0], 1)) if len(sb) == 1 else b
    r = tr.emit(aicc.MatmulOp, a2.value, b2.value)
    shape = list(r.shape)
    if len(sb) == 1:
        shape.pop(-1)
    if len(sa) == 1:
        shape.pop(-2 if len(sb) != 1 else -1)
    return _reshape_to(r, shape)


def _dot(a: Any, b: Any, out: Any = None) -> Tracer:
    if out is not None:
        raise _unsupported("np.dot", "np.dot with out= is not supported")
    tr = _current()
    ta, tb = tr.lift(a), tr.lift(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return _binary(aicc.MulOp)(ta, tb)
    if ta.ndim > 2 or tb.ndim > 2:
        raise _unsupported("np.dot", "np.dot of arrays of rank > 2 is not supported; use np.matmul")
    return _matmul(ta, tb)


def _transpose(a: Any, axes: Any = None) -> Tracer:
    x = _current().lift(a)
    rank = x.ndim
    if axes is None:
        perm = tuple(reversed(range(rank)))
    else:
        perm = tuple(operator.index(p) for p in axes)
        perm = tuple(p % rank if rank and -rank <= p < rank else p for p in perm)
    if perm == tuple(range(rank)):
        return x
    return x._trace.emit(aicc.TransposeOp, x.value, perm)


def _swapaxes(a: Any, axis1: Any, axis2: Any) -> Tracer:
    x = _current().lift(a)
    (i,), (j,) = (aicc.normalize_axes("np.swapaxes", operator.index(ax), x.ndim) for ax in (axis1, axis2))
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return _transpose(x, perm)


def _shape_arg(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (tuple, list)):
        return tuple(d if isinstance(d, Sym) else operator.index(d) for d in shape)
    return (operator.index(shape),)


def _reshape(a: Any, shape: Any = None, order: str = "C", *, copy: Any = None, **extra: Any) -> Tracer:
    if "newshape" in extra and shape is None:
        shape = extra.pop("newshape")
    if extra:
        raise _unsupported("np.reshape", f"np.reshape with {', '.join(f'{k}=' for k in extra)} is not supported")
    if order != "C":
        raise _unsupported("np.reshape", f"np.reshape with order={order!r} is not supported (only 'C')")
    x = _current().lift(a)
    new = _shape_arg(shape)
    # Resolve -1 through the dialect's helper so a bad shape reports as aicc.reshape.
    try:
        resolved = aicc.reshape_shape("aicc.reshape", x.shape, new)
    except ValueError as e:
        raise ShapeError(str(e), location=user_location()) from None
    return _reshape_to(x, resolved)


def _broadcast_to(array: Any, shape: Any, subok: bool = False) -> Tracer:
    x = _current().lift(array)
    new = _shape_arg(shape)
    if new == x.shape:
        return x
    return x._trace.emit(aicc.BroadcastToOp, x.value, new)


def _getitem(x: Tracer, key: Any) -> Tracer:
    """Basic indexing (ints, slices with steps, None, ...) as one aicc.slice and a reshape;
    an integer array (a constant: traced values are float) as aicc.gather on the first axis."""
    tr = x._trace
    if isinstance(key, (np.ndarray, list)) and np.asarray(key).dtype.kind in "iu":
        idx = np.asarray(key, dtype=np.int64)
        if not x.ndim:
            raise ShapeError("indexing a 0-d array with an index array", location=user_location())
        if idx.size and (idx.max() >= x.shape[0] or idx.min() < -x.shape[0]):
            raise ShapeError(f"index out of range for axis 0 of size {x.shape[0]}", location=user_location())
        return tr.emit(aicc_nn.GatherOp, x.value, tr.constant(idx).value, 0)
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise _unsupported("indexing (x[...])", "an index can only have a single ellipsis")
    n_real = sum(1 for k in items if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise ShapeError(f"too many indices ({n_real}) for an array of rank {x.ndim}", location=user_location())
    at = next((i for i, k in enumerate(items) if k is Ellipsis), len(items))
    items[at:at + 1] = [slice(None)] * (x.ndim - n_real)
    starts, steps, sizes, out_shape = [], [], [], []
    dim = 0
    for k in items:
        if k is None:
            out_shape.append(1)
            continue
        d = x.shape[dim]
        dim += 1
        if isinstance(k, slice):
            start, stop, step = k.indices(d)
            n = len(range(start, stop, step))
            starts.append(start if n else 0)
            steps.append(step)
            sizes.append(n)
            out_shape.append(n)
        elif isinstance(k, (int, np.integer)):
            i = operator.index(k)
            if not -d <= i < d:
                raise ShapeError(f"index {i} is out of bounds for an axis of size {d}", location=user_location())
            starts.append(i % d)
            steps.append(1)
            sizes.append(1)
        else:
            raise _unsupported("indexing (x[...])", f"indexing with a {type(k).__name__} is not supported "
                               "(ints, slices, None, ... and one constant integer array are)")
    y = x
    if tuple(sizes) != x.shape or any(s != 1 for s in steps):
        y = tr.emit(aicc_nn.SliceOp, x.value, starts, steps, sizes)
    return _reshape_to(y, out_shape)


def _concatenate(arrays: Any, axis: Any = 0, out: Any = None, **extra: Any) -> Tracer:
    if out is not None or any(v is not None for v in extra.values()):
        raise _unsupported("np.concatenate", "np.concatenate with out=/dtype= is not supported")
    tr = _current()
    xs = [_float(tr.lift(a)) for a in arrays]
    if axis is None:
        xs, axis = [_reshape_to(x, (x.size,)) for x in xs], 0
    rank = xs[0].ndim if xs else 0
    (ax,) = aicc.normalize_axes("np.concatenate", operator.index(axis), rank) if rank else (0,)
    return tr.emit(aicc_nn.ConcatOp, [x.value for x in xs], ax) if len(xs) != 1 else xs[0]


def _stack(arrays: Any, axis: Any = 0, out: Any = None, **extra: Any) -> Tracer:
    tr = _current()
    xs = [_float(tr.lift(a)) for a in arrays]
    if not xs:
        raise ShapeError("np.stack needs at least one array", location=user_location())
    rank = xs[0].ndim + 1
    (ax,) = aicc.normalize_axes("np.stack", operator.index(axis), rank)
    xs = [_reshape_to(x, (*x.shape[:ax], 1, *x.shape[ax:])) for x in xs]
    return _concatenate(xs, ax, out, **extra)


def _index_constant(indices: Any, what: str) -> np.ndarray:
    if isinstance(indices, Tracer):
        raise _unsupported(what, f"{what} with traced indices is not supported: indices are constants")
    return np.asarray(indices, dtype=np.int64)


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    tr = _current()
    x = _float(tr.lift(a))
    if axis is None:
        x, axis = _reshape_to(x, (x.size,)), 0
    (ax,) = aicc.normalize_axes("np.take", operator.index(axis), x.ndim)
    idx = _index_constant(indices, "np.take")
    return tr.emit(aicc_nn.GatherOp, x.value, tr.constant(idx).value, ax)


def _take_along_axis(arr: Any, indices: Any, axis: Any) -> Tracer:
    tr = _current()
    x = _float(tr.lift(arr))
    (ax,) = aicc.normalize_axes("np.take_along_axis", operator.index(axis), x.ndim)
    idx = _index_constant(indices, "np.take_along_axis")
    return tr.emit(aicc_nn.GatherElementsOp, x.value, tr.constant(idx).value, ax)


def _cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Tracer:
    tr = _current()
    x = _float(tr.lift(a))
    if axis is None:
        x, axis = _reshape_to(x, (x.size,)), 0
    (ax,) = aicc.normalize_axes("np.cumsum", operator.index(axis), x.ndim)
    return tr.emit(aicc_nn.CumSumOp, x.value, ax)


def _pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Tracer:
    if mode != "constant" or set(kwargs) - {"constant_values"}:
        raise _unsupported("np.pad", f"np.pad with mode={mode!r} is not supported (only 'constant')")
    value = kwargs.get("constant_values", 0.0)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise _unsupported("np.pad", "np.pad with per-axis constant_values is not supported")
    tr = _current()
    x = _float(tr.lift(array))
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    return tr.emit(aicc_nn.PadOp, x.value, widths[:, 0].tolist(), widths[:, 1].tolist(), float(value))


_UFUNCS: dict[np.ufunc, Callable[..., Tracer]] = {
    np.exp: _unary(aicc.ExpOp),
    np.log: _unary(aicc.LogOp),
    np.tanh: _unary(aicc.TanhOp),
    np.sqrt: _unary(aicc.SqrtOp),
    np.absolute: _unary(aicc.AbsOp),
    np.negative: _unary(aicc.NegOp),
    np.floor: _unary(aicc.FloorOp),
    np.ceil: _unary(aicc.CeilOp),
    np.rint: _unary(aicc.RoundOp),
    np.sin: _unary(aicc.SinOp),
    np.cos: _unary(aicc.CosOp),
    np.tan: _unary(aicc.TanOp),
    np.arcsin: _unary(aicc.AsinOp),
    np.arccos: _unary(aicc.AcosOp),
    np.arctan: _unary(aicc.AtanOp),
    np.sinh: _unary(aicc.SinhOp),
    np.cosh: _unary(aicc.CoshOp),
    np.remainder: _binary(aicc.ModOp),
    np.fmod: _binary(aicc.FModOp),
    np.positive: _positive,
    np.square: _square,
    np.reciprocal: _reciprocal,
    np.add: _binary(aicc.AddOp),
    np.subtract: _binary(aicc.SubOp),
    np.multiply: _binary(aicc.MulOp),
    np.divide: _binary(aicc.DivOp),
    np.true_divide: _binary(aicc.DivOp),
    np.power: _binary(aicc.PowOp),
    np.maximum: _binary(aicc.MaximumOp),
    np.minimum: _binary(aicc.MinimumOp),
    np.greater: _compare("gt"),
    np.greater_equal: _compare("ge"),
    np.less: _compare("lt"),
    np.less_equal: _compare("le"),
    np.equal: _compare("eq"),
    np.not_equal: _compare("ne"),
    np.matmul: _matmul,
}

_FUNCTIONS: dict[Callable[..., Any], Callable[..., Tracer]] = {
    np.where: _where,
    np.sum: _sum,
    np.mean: _mean,
    np.prod: _prod,
    np.max: _max,
    np.amax: _max,
    np.min: _min,
    np.amin: _min,
    np.transpose: _transpose,
    np.swapaxes: _swapaxes,
    np.reshape: _reshape,
    np.broadcast_to: _broadcast_to,
    np.dot: _dot,
    np.var: _var,
    np.std: _std,
    np.clip: _clip,
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.take: _take,
    np.take_along_axis: _take_along_axis,
    np.cumsum: _cumsum,
    np.pad: _pad,
}


def _np_name(fn: Any) -> str:
    name = getattr(fn, "__name__", repr(fn))
    module = getattr(fn, "__module__", None) or "numpy"
    if module == "numpy" or not module.startswith("numpy"):
        return f"np.{name}"
    return "np." + ".".join(p for p in module.split(".")[1:] if not p.startswith("_")) + f".{name}"


# Hooks of compiler.ops: name -> builder(x, **kwargs).
def _gelu(x: Any, approximate: str = "none") -> Tracer:
    if approximate not in ("none", "tanh"):
        raise CompileError(
            f'gelu: approximate must be "none" or "tanh", got {approximate!r}', location=user_location()
        )
    x = _float(_current().lift(x))
    return x._trace.emit(aicc.GeluOp, x.value, approximate)


def _softmax(x: Any, axis: int = -1) -> Tracer:
    x = _float(_current().lift(x))
    return x._trace.emit(aicc.SoftmaxOp, x.value, operator.index(axis))


def _tensor_op(fn: Any, *args: Any) -> Tracer:
    """compiler.tensor_op on traced values: `fn.build` (frontends/tensor_op.py) makes the
    aicc.tensor_op chain; its errors get the user's line."""
    tr = _current()
    xs = [_float(tr.lift(a)) for a in args]
    try:
        ops = fn.build([x.value for x in xs])
    except CompileError as e:
        if e.location is not None or type(e) not in (CompileError, ShapeError):
            raise
        raise type(e)(str(e), location=user_location()) from None
    result = xs[0] if xs else None
    for op in ops:
        result = tr.emit(lambda op=op: op)
    assert result is not None
    return result


def _pad_hw(x: Tracer, padding: tuple[int, int], value: float) -> Tracer:
    if not any(padding):
        return x
    ph, pw = padding
    return x._trace.emit(aicc_nn.PadOp, x.value, (0, 0, ph, pw), (0, 0, ph, pw), value)


def _conv2d(x: Any, weight: Any, bias: Any, stride, padding, dilation, groups) -> Tracer:
    tr = _current()
    x, w = _float(tr.lift(x)), _float(tr.lift(weight))
    y = tr.emit(aicc_nn.Conv2dOp, _pad_hw(x, padding, 0.0).value, w.value, stride, dilation, groups)
    if bias is not None:
        b = _float(tr.lift(bias))
        y = _binary(aicc.AddOp)(y, _reshape_to(b, (b.size, 1, 1)))
    return y


def _conv_transpose2d(x: Any, weight: Any, bias: Any, stride, padding, output_padding, groups,
                      dilation) -> Tracer:
    tr = _current()
    x, w = _float(tr.lift(x)), _float(tr.lift(weight))
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeError(f"conv_transpose2d: expected NCHW input and (C, O/groups, KH, KW) weight, got "
                         f"{fmt_shape(x.shape)} and {fmt_shape(w.shape)}", location=user_location())
    out_hw = [(x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w.shape[2 + i] - 1)
              + output_padding[i] + 1 for i in range(2)]
    y = tr.emit(aicc_nn.ConvTranspose2dOp, x.value, w.value, out_hw, stride, dilation, groups, padding)
    if bias is not None:
        b = _float(tr.lift(bias))
        y = _binary(aicc.AddOp)(y, _reshape_to(b, (b.size, 1, 1)))
    return y


def _max_pool2d(x: Any, kernel_size, stride, padding, dilation) -> Tracer:
    x = _float(_current().lift(x))
    return x._trace.emit(aicc_nn.Pool2dOp, _pad_hw(x, padding, -np.inf).value, "max", kernel_size,
                         stride, dilation)


def _avg_pool2d(x: Any, kernel_size, stride, padding) -> Tracer:
    x = _float(_current().lift(x))
    s = x._trace.emit(aicc_nn.Pool2dOp, _pad_hw(x, padding, 0.0).value, "sum", kernel_size, stride, (1, 1))
    return _binary(aicc.MulOp)(s, 1.0 / (kernel_size[0] * kernel_size[1]))


def _layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5, axis: Any = -1) -> Tracer:
    x = _float(_current().lift(x))
    centered = _binary(aicc.SubOp)(x, _mean(x, _axes(axis), None, None, True))
    var = _mean(_square(centered), _axes(axis), None, None, True)
    y = _binary(aicc.MulOp)(centered, _unary(aicc.RsqrtOp)(_binary(aicc.AddOp)(var, float(eps))))
    if weight is not None:
        y = _binary(aicc.MulOp)(y, weight)
    if bias is not None:
        y = _binary(aicc.AddOp)(y, bias)
    return y


def _attention(q: Any, k: Any, v: Any, mask: Any = None, causal: bool = False,
               scale: float | None = None) -> Tracer:
    from compiler.ops import causal_mask

    tr = _current()
    q, k, v = (_float(tr.lift(a)) for a in (q, k, v))
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ShapeError(f"attention: q, k and v need the same rank >= 2, got {fmt_shape(q.shape)}, "
                         f"{fmt_shape(k.shape)} and {fmt_shape(v.shape)}", location=user_location())
    s = tr.emit(aicc.MatmulOp, q.value, k.value, None, False, True)
    s = _binary(aicc.MulOp)(s, float(scale) if scale is not None else 1.0 / float(np.sqrt(q.shape[-1])))
    if mask is not None:
        s = _binary(aicc.AddOp)(s, mask)
    if causal:
        s = _binary(aicc.AddOp)(s, causal_mask(s.shape[-2], s.shape[-1]))
    return _matmul(_softmax(s, -1), v)


_NN_OPS: dict[str, Callable[..., Tracer]] = {
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "layer_norm": _layer_norm,
    "attention": _attention,
    "tensor_op": _tensor_op,
    "relu": _unary(aicc.ReluOp),
    "gelu": _gelu,
    "sigmoid": _unary(aicc.SigmoidOp),
    "softmax": _softmax,
    "rsqrt": _unary(aicc.RsqrtOp),
    "erf": _unary(aicc.ErfOp),
}


# ---------------------------------------------------------------------------------------------
# Tracer
# ---------------------------------------------------------------------------------------------


class Tracer:
    """A traced array: an SSA value of a ranked tensor type with a static shape."""

    __slots__ = ("_trace", "value")
    __hash__ = object.__hash__  # identity; __eq__ builds an op

    def __init__(self, trace: _Trace, value: SSAValue):
        self._trace = trace
        self.value = value

    # --- NumPy's protocols ---

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = f"np.{ufunc.__name__}"
        if method != "__call__":
            raise _unsupported(f"{name}.{method}")
        dtype = kwargs.pop("dtype", None)
        if dtype is not None and np.dtype(dtype) != _FLOAT32:
            raise _unsupported(name, f"{name} with dtype={np.dtype(dtype)}; aicc computes float32")
        if kwargs:
            raise _unsupported(name, f"{name} with {', '.join(f'{k}=' for k in kwargs)} is not supported")
        build = _UFUNCS.get(ufunc)
        if build is None:
            raise _unsupported(name)
        self._check_active()
        return build(*inputs)

    def __array_function__(self, fn: Any, types: Any, args: Any, kwargs: Any) -> Any:
        build = _FUNCTIONS.get(fn)
        if build is None:
            raise _unsupported(_np_name(fn))
        self._check_active()
        return build(*args, **kwargs)

    def __aicc_trace_op__(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Tracer:
        build = _NN_OPS.get(name)
        if build is None:
            raise _unsupported(name)
        self._check_active()
        return build(*args, **kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise _unsupported(
            "np.asarray",
            "converting a traced array to a NumPy array (np.asarray / np.array) is not supported "
            "while tracing",
        )

    def _check_active(self) -> None:
        if not self._trace.active or not _ACTIVE or _ACTIVE[-1] is not self._trace:
            raise CompileError("a traced array was used outside of its trace", location=user_location())

    # --- array attributes ---

    @property
    def shape(self) -> tuple[int, ...]:
        return aicc.shape_of(self.value)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return aicc.numpy_dtype(aicc.element_type_of(self.value))

    @property
    def T(self) -> Tracer:
        return _transpose(self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"

    # --- methods ---

    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> Tracer:
        self._check_active()
        dtype = np.dtype(dtype)
        if dtype != _FLOAT32:
            raise CompileError(
                f"astype({dtype}) is not supported; aicc compiles float32", location=user_location()
            )
        return _float(self)

    def reshape(self, *shape: Any, order: str = "C") -> Tracer:
        self._check_active()
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _reshape(self, shape, order)

    def transpose(self, *axes: Any) -> Tracer:
        self._check_active()
        if not axes or (len(axes) == 1 and axes[0] is None):
            return _transpose(self)
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _transpose(self, axes)

    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Tracer:
        self._check_active()
        return _sum(self, axis, dtype, out, keepdims)

    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Tracer:
        self._check_active()
        return _mean(self, axis, dtype, out, keepdims)

    def var(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
            keepdims: bool = False) -> Tracer:
        self._check_active()
        return _var(self, axis, dtype, out, ddof, keepdims)

    def std(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
            keepdims: bool = False) -> Tracer:
        self._check_active()
        return _std(self, axis, dtype, out, ddof, keepdims)

    def clip(self, min: Any = None, max: Any = None) -> Tracer:
        self._check_active()
        return _clip(self, min, max)

    def max(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tracer:
        self._check_active()
        return _max(self, axis, out, keepdims)

    def min(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Tracer:
        self._check_active()
        return _min(self, axis, out, keepdims)

    # --- operators (through the ufuncs, so `x + 1` and `np.add(x, 1)` build the same op) ---

    def __add__(self, o: Any) -> Any: return np.add(self, o)
    def __radd__(self, o: Any) -> Any: return np.add(o, self)
    def __sub__(self, o: Any) -> Any: return np.subtract(self, o)
    def __rsub__(self, o: Any) -> Any: return np.subtract(o, self)
    def __mul__(self, o: Any) -> Any: return np.multiply(self, o)
    def __rmul__(self, o: Any) -> Any: return np.multiply(o, self)
    def __truediv__(self, o: Any) -> Any: return np.divide(self, o)
    def __rtruediv__(self, o: Any) -> Any: return np.divide(o, self)
    def __floordiv__(self, o: Any) -> Any: return np.floor_divide(self, o)
    def __rfloordiv__(self, o: Any) -> Any: return np.floor_divide(o, self)
    def __mod__(self, o: Any) -> Any: return np.remainder(self, o)
    def __rmod__(self, o: Any) -> Any: return np.remainder(o, self)
    def __pow__(self, o: Any) -> Any: return np.power(self, o)
    def __rpow__(self, o: Any) -> Any: return np.power(o, self)
    def __matmul__(self, o: Any) -> Any: return np.matmul(self, o)
    def __rmatmul__(self, o: Any) -> Any: return np.matmul(o, self)
    def __and__(self, o: Any) -> Any: return np.bitwise_and(self, o)
    def __rand__(self, o: Any) -> Any: return np.bitwise_and(o, self)
    def __or__(self, o: Any) -> Any: return np.bitwise_or(self, o)
    def __ror__(self, o: Any) -> Any: return np.bitwise_or(o, self)
    def __xor__(self, o: Any) -> Any: return np.bitwise_xor(self, o)
    def __rxor__(self, o: Any) -> Any: return np.bitwise_xor(o, self)
    def __invert__(self) -> Any: return np.invert(self)
    def __neg__(self) -> Any: return np.negative(self)
    def __pos__(self) -> Any: return np.positive(self)
    def __abs__(self) -> Any: return np.absolute(self)
    def __gt__(self, o: Any) -> Any: return np.greater(self, o)
    def __ge__(self, o: Any) -> Any: return np.greater_equal(self, o)
    def __lt__(self, o: Any) -> Any: return np.less(self, o)
    def __le__(self, o: Any) -> Any: return np.less_equal(self, o)
    def __eq__(self, o: Any) -> Any: return np.equal(self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Any: return np.not_equal(self, o)  # type: ignore[override]

    # --- what a trace cannot see through ---

    def __bool__(self) -> bool:
        raise _unsupported(
            "data-dependent control flow (bool of a traced array)",
            "data-dependent control flow (bool of a traced array) is not supported: the branch "
            "would be fixed at trace time; use np.where instead",
        )

    def __float__(self) -> float:
        raise _unsupported("float() of a traced array", "float() of a traced array is not supported: "
                           "its value is not known while tracing")

    def __int__(self) -> int:
        raise _unsupported("int() of a traced array", "int() of a traced array is not supported: "
                           "its value is not known while tracing")

    def __index__(self) -> int:
        raise _unsupported("use of a traced array as an index", "a traced array cannot be used as "
                           "an index: its value is not known while tracing")

    def __getitem__(self, key: Any) -> Any:
        self._check_active()
        return _getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise _unsupported("item assignment (x[...] = v)",
                           "assigning into a traced array (x[...] = v) is not supported")

    def __iter__(self) -> Any:
        raise _unsupported("iteration over a traced array",
                           "iterating over a traced array is not supported")


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def _param_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names: list[str] = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}[{i - len(params) + 1}]")
        else:
            names.append(f"arg{i}")
    return names


def _check_inputs(fn: Callable[..., Any], example_inputs: Sequence[Any]) -> list[np.ndarray]:
    if isinstance(example_inputs, np.ndarray) or not isinstance(example_inputs, (tuple, list)):
        raise CompileError(
            f"example_inputs must be a tuple of arrays, got {type(example_inputs).__name__}"
        )
    names = _param_names(fn, len(example_inputs))
    arrays = []
    for i, (x, pname) in enumerate(zip(example_inputs, names)):
        try:
            a = np.asarray(x)
        except Exception as e:
            raise CompileError(f"input {i} ('{pname}') is not an array: {e}") from None
        if a.dtype != _FLOAT32:
            raise CompileError(
                f"input {i} ('{pname}') has dtype {a.dtype}; aicc compiles float32 "
                f"(convert it with .astype(np.float32))"
            )
        arrays.append(a)
    try:
        inspect.signature(fn).bind(*arrays)
    except TypeError as e:
        raise CompileError(
            f"{getattr(fn, '__name__', 'the function')} cannot take {len(arrays)} example inputs: {e}"
        ) from None
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    return arrays


def trace(fn: Callable[..., Any], example_inputs: tuple[np.ndarray, ...], *, name: str = "main",
          dynamic_dims: Sequence[dict[int, str]] | None = None) -> TracedProgram:
    """Run `fn` on Tracers shaped like `example_inputs` and return the aicc program it built.
    `dynamic_dims`: for each input, {dim: symbol name} of the dims to keep symbolic (the
    Tracer's shape then holds a Sym there, and the program runs for any size of it)."""
    arrays = _check_inputs(fn, example_inputs)
    shapes = [tuple(Sym.var(dynamic_dims[i][k]) if dynamic_dims and k in dynamic_dims[i] else d
                    for k, d in enumerate(a.shape)) for i, a in enumerate(arrays)]
    arg_types = [aicc.tensor_type(F32, shape) for shape in shapes]
    block = Block(arg_types=arg_types)
    tr = _Trace(block)
    _ACTIVE.append(tr)
    try:
        result = fn(*(Tracer(tr, arg) for arg in block.args))
        is_tuple = isinstance(result, (tuple, list))
        items = list(result) if is_tuple else [result]
        if not items:
            raise CompileError(f"{getattr(fn, '__name__', 'the function')} returned no arrays")
        outputs: list[SSAValue] = []
        for i, item in enumerate(items):
            if isinstance(item, np.ndarray):
                item = tr.lift(item)
            if not isinstance(item, Tracer):
                what = f"output {i}" if is_tuple else "the result"
                raise CompileError(
                    f"{getattr(fn, '__name__', 'the function')} must return an array or a tuple of "
                    f"arrays; {what} is a {type(item).__name__}"
                )
            tr.lift(item)  # same trace
            outputs.append(item.value)
        tr.builder.insert(func.ReturnOp(*outputs))
    finally:
        tr.active = False
        _ACTIVE.remove(tr)

    fop = func.FuncOp(name, (arg_types, [v.type for v in outputs]), Region(block))
    module = ModuleOp([fop])
    module.verify()
    return TracedProgram(
        module=module,
        func_name=name,
        input_types=[(shape, a.dtype) for shape, a in zip(shapes, arrays)],
        output_is_tuple=is_tuple,
        locations=tr.locations,
    )

