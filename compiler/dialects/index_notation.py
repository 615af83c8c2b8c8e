"""Index notation: the language of `aicc.tensor_op` and `compiler.tensor_op`.

    out[i, j] = sum[k](a[i, k] * b[k, j])                 # matmul
    out[i] = sum[k](x[i + k] * w[k])                      # 1-D convolution
    out[c, i] = max[k](x[c, 2 * i + k])                   # max-pooling, stride 2
    out[i, j] = exp(x[i, j] - max[k](x[i, k]))            # softmax numerator

One statement: the output with plain index subscripts, `=`, and an expression of tensor
accesses with affine subscripts (`x[i + k, 2 * j - 1]`), scalars (0-d inputs written bare, and
literals), `+ - * /`, comparisons, calls (`exp log tanh sqrt rsqrt abs sigmoid relu sin cos
erf`, `max(a, b)` / `min(a, b)`, `where(cond, a, b)`) and reductions `sum[k](...)`,
`max[k](...)`, `min[k](...)`, `prod[k, l](...)`. `out[f(i, k)] += expr` is the scatter form
(affine output subscripts, a zero-initialized output, every iteration adds its value); the
gradients of shifted and strided accesses use it.

This module holds the grammar's parser (index_notation.lark), the AST (frozen dataclasses),
a printer back to canonical text, range inference, a NumPy evaluator (the reference
semantics), the split of nested reductions into simple statements, and symbolic
differentiation, which the VJP of aicc.tensor_op is derived from. Errors are CompileErrors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.errors import CompileError, ShapeError

__all__ = [
    "Access", "Affine", "Call", "BinOp", "Expr", "Num", "Reduce", "Statement",
    "parse", "infer_ranges", "evaluate", "split", "derivative", "accesses", "input_names",
    "index_order", "UNARY_FNS", "REDUCERS", "COMPARISONS",
]

UNARY_FNS = ("neg", "exp", "log", "tanh", "sqrt", "rsqrt", "abs", "sigmoid", "relu", "sin", "cos", "erf")
BINARY_FNS = ("max", "min")
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
ARITH = ("+", "-", "*", "/")
REDUCERS = ("sum", "max", "min", "prod")


# ---------------------------------------------------------------------------------------------
# AST
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Affine:
    """sum(coeff * index) + const, the terms in order of first appearance, no zero coefficient."""

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def index(name: str) -> Affine:
        return Affine(((name, 1),))

    @property
    def plain(self) -> str | None:
        """The index when the subscript is just an index."""
        if self.const == 0 and len(self.terms) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0]
        return None

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.terms)

    def __add__(self, other: Affine) -> Affine:
        coeffs = dict(self.terms)
        for n, c in other.terms:
            coeffs[n] = coeffs.get(n, 0) + c
        return Affine(tuple((n, c) for n, c in coeffs.items() if c), self.const + other.const)

    def scaled(self, k: int) -> Affine:
        return Affine(tuple((n, c * k) for n, c in self.terms if c * k), self.const * k)

    def bounds(self, ranges: Mapping[str, int]) -> tuple[int, int]:
        """(min, max) over the domain."""
        lo = hi = self.const
        for n, c in self.terms:
            lo += min(0, c * (ranges[n] - 1))
            hi += max(0, c * (ranges[n] - 1))
        return lo, hi

    def __str__(self) -> str:
        parts: list[str] = []
        for n, c in self.terms:
            mag = n if abs(c) == 1 else f"{abs(c)} * {n}"
            parts.append(("- " if c < 0 else "+ ") + mag if parts else ("-" if c < 0 else "") + mag)
        if self.const or not parts:
            if parts:
                parts.append(f"{'-' if self.const < 0 else '+'} {abs(self.const)}")
            else:
                parts.append(str(self.const))
        return " ".join(parts)


class Expr:
    """An expression node (Num, Access, Call, BinOp, Reduce)."""


@dataclass(frozen=True)
class Num(Expr):
    value: float


@dataclass(frozen=True)
class Access(Expr):
    """`x[i, k + 1]`; a scalar (0-d input) is an Access with no subscripts, written bare."""

    name: str
    subs: tuple[Affine, ...] = ()


@dataclass(frozen=True)
class Call(Expr):
    """A unary function (UNARY_FNS), `max` / `min` of two values, or `where(c, a, b)`."""

    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    """+ - * / and the comparisons (which give a boolean)."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Reduce(Expr):
    kind: str  # sum, max, min, prod
    indices: tuple[str, ...]
    body: Expr


@dataclass(frozen=True)
class Statement:
    out: str
    subs: tuple[Affine, ...]
    body: Expr
    accumulate: bool = False  # `+=`: the scatter form

    def __str__(self) -> str:
        return to_text(self)


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


def _caret(src: str, line: int, column: int) -> str:
    text = src.splitlines()[line - 1] if 0 < line <= len(src.splitlines()) else ""
    return f"\n  {text}\n  {' ' * (column - 1)}^"


def _error(src: str, line: int, column: int, message: str) -> CompileError:
    return CompileError(f"tensor_op: {message} at line {line}, column {column}{_caret(src, line, column)}")


@functools.cache
def _parser():
    from lark import Lark

    grammar = (Path(__file__).with_name("index_notation.lark")).read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def parse(src: str) -> Statement:
    """The statement in `src`; a syntax error names its line and column and shows a caret."""
    from lark import Token, Tree
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

    if not isinstance(src, str):
        raise CompileError(f"tensor_op: the expression must be a string, got {type(src).__name__}")
    try:
        tree = _parser().parse(src)
    except UnexpectedEOF:
        lines = src.splitlines() or [""]
        raise _error(src, len(lines), len(lines[-1]) + 1,
                     "syntax error: unexpected end of input") from None
    except UnexpectedToken as e:
        what = "end of input" if e.token.type == "$END" else repr(str(e.token))
        line, col = e.line, e.column
        if e.token.type == "$END":
            lines = src.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
        raise _error(src, line, col, f"syntax error: unexpected {what}") from None
    except UnexpectedCharacters as e:
        raise _error(src, e.line, e.column, f"syntax error: unexpected character {src[e.pos_in_stream]!r}") from None
    except UnexpectedInput as e:  # any other lark input error
        raise _error(src, e.line, e.column, "syntax error") from None

    def at(node) -> tuple[int, int]:
        if isinstance(node, Token):
            return node.line, node.column
        return node.meta.line, node.meta.column

    def affine(t) -> Affine:
        if isinstance(t, Token):
            raise AssertionError(t)
        kind = t.data
        if kind == "aff_index":
            return Affine.index(str(t.children[0]))
        if kind == "aff_const":
            text = str(t.children[0])
            if not text.isdigit():
                raise _error(src, *at(t), f"subscript constant {text} is not an integer")
            return Affine((), int(text))
        if kind == "aff_neg":
            return affine(t.children[0]).scaled(-1)
        a, b = affine(t.children[0]), affine(t.children[1])
        if kind == "aff_add":
            return a + b
        if kind == "aff_sub":
            return a + b.scaled(-1)
        if kind == "aff_mul":
            if not a.terms:
                return b.scaled(a.const)
            if not b.terms:
                return a.scaled(b.const)
            raise _error(src, *at(t), f"subscript '{a} * {b}' is not affine (a product of indices)")
        raise AssertionError(kind)

    def subscripts(t) -> tuple[Affine, ...]:
        return () if t is None else tuple(affine(c) for c in t.children)

    def expr(t) -> Expr:
        if isinstance(t, Token):  # a bare NUMBER never comes alone (rules wrap it)
            raise AssertionError(t)
        kind, ch = t.data, t.children
        if kind == "number":
            return Num(float(str(ch[0])))
        if kind == "scalar":
            return Access(str(ch[0]))
        if kind == "access":
            return Access(str(ch[0]), subscripts(ch[1]))
        if kind == "neg":
            inner = expr(ch[0])
            return Num(-inner.value) if isinstance(inner, Num) else Call("neg", (inner,))
        if kind in ("add", "sub", "mul", "div"):
            return BinOp({"add": "+", "sub": "-", "mul": "*", "div": "/"}[kind], expr(ch[0]), expr(ch[1]))
        if kind == "compare":
            return BinOp(str(ch[1]), expr(ch[0]), expr(ch[2]))
        if kind == "call":
            fn, args = str(ch[0]), tuple(expr(c) for c in ch[1:])
            want = 1 if fn in UNARY_FNS and fn != "neg" else 2 if fn in BINARY_FNS else 3 if fn == "where" else None
            if want is None:
                known = ", ".join([*UNARY_FNS[1:], "max", "min", "where"])
                raise _error(src, *at(t), f"unknown function '{fn}' (known: {known})")
            if len(args) != want:
                raise _error(src, *at(t), f"{fn} takes {want} argument{'s' if want > 1 else ''}, got {len(args)}")
            return Call(fn, args)
        if kind == "reduce":
            names = tuple(str(c) for c in ch[1:-1])
            if len(set(names)) != len(names):
                raise _error(src, *at(t), f"{ch[0]}[...] lists an index twice")
            return Reduce(str(ch[0]), names, expr(ch[-1]))
        raise AssertionError(kind)

    assert isinstance(tree, Tree)
    out_tok, subs_tree, assign, body_tree = tree.children
    subs = subscripts(subs_tree)
    accumulate = str(assign) == "+="
    if not accumulate:
        plain = [s.plain for s in subs]
        for s, p in zip(subs, plain):
            if p is None:
                raise _error(src, *at(out_tok), f"output subscript '{s}' must be a single index "
                             "(only `+=` writes through affine subscripts)")
        if len(set(plain)) != len(plain):
            raise _error(src, *at(out_tok), "an index appears twice in the output subscripts")
    stmt = Statement(str(out_tok), subs, expr(body_tree), accumulate)
    if any(a.name == stmt.out for a in accesses(stmt.body)):
        raise _error(src, *at(out_tok), f"the output '{stmt.out}' is also read in the expression")
    if accumulate and any(isinstance(e, Reduce) for e in walk(stmt.body)):
        raise _error(src, *at(out_tok), "`+=` statements take no reductions")
    idx = set(all_indices(stmt))
    for a in accesses(stmt.body):
        if not a.subs and a.name in idx:
            raise CompileError(f"tensor_op: index '{a.name}' is used as a value")
        if a.subs and a.name in idx:
            raise CompileError(f"tensor_op: '{a.name}' is both an index and a tensor")
    return stmt


# ---------------------------------------------------------------------------------------------
# Traversal and printing
# ---------------------------------------------------------------------------------------------


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order, left to right (the order of the text)."""
    yield e
    if isinstance(e, Call):
        for a in e.args:
            yield from walk(a)
    elif isinstance(e, BinOp):
        yield from walk(e.lhs)
        yield from walk(e.rhs)
    elif isinstance(e, Reduce):
        yield from walk(e.body)


def accesses(e: Expr) -> list[Access]:
    return [x for x in walk(e) if isinstance(x, Access)]


def input_names(stmt: Statement) -> list[str]:
    """The tensors read, in order of first appearance: the positional inputs' order."""
    return list(dict.fromkeys(a.name for a in accesses(stmt.body)))


def all_indices(stmt: Statement) -> list[str]:
    """Every index, in order of first appearance in the text."""
    names: list[str] = []
    for s in stmt.subs:
        names += s.indices
    for x in walk(stmt.body):
        if isinstance(x, Access):
            for s in x.subs:
                names += s.indices
        elif isinstance(x, Reduce):
            names += x.indices
    return list(dict.fromkeys(names))


def index_order(stmt: Statement) -> list[str]:
    """The iteration domain's dims: the output's indices first (`=`), then the others."""
    if stmt.accumulate:
        return all_indices(stmt)
    out = [s.plain for s in stmt.subs]
    return out + [n for n in all_indices(stmt) if n not in out]


_PREC = {"<": 1, "<=": 1, ">": 1, ">=": 1, "==": 1, "!=": 1, "+": 2, "-": 2, "*": 3, "/": 3}


def _num(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        raise CompileError(f"tensor_op: the literal {v} has no index-notation spelling")
    return repr(float(v))


def expr_text(e: Expr, prec: int = 0) -> str:
    """Canonical text; parenthesized only where precedence needs it."""
    if isinstance(e, Num):
        s = _num(e.value)
        return f"({s})" if e.value < 0 and prec > 4 else s
    if isinstance(e, Access):
        return f"{e.name}[{', '.join(map(str, e.subs))}]" if e.subs else e.name
    if isinstance(e, Call):
        if e.fn == "neg":
            s = "-" + expr_text(e.args[0], 5)
            return f"({s})" if prec > 4 else s
        return f"{e.fn}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, BinOp):
        p = _PREC[e.op]
        # left-associative; comparisons do not chain
        s = f"{expr_text(e.lhs, p + (p == 1))} {e.op} {expr_text(e.rhs, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Reduce):
        return f"{e.kind}[{', '.join(e.indices)}]({expr_text(e.body)})"
    raise AssertionError(e)


def to_text(stmt: Statement) -> str:
    return f"{stmt.out}[{', '.join(map(str, stmt.subs))}] {'+=' if stmt.accumulate else '='} {expr_text(stmt.body)}"


def rename(e: Expr, names: Mapping[str, str]) -> Expr:
    """`e` with tensors renamed."""
    if isinstance(e, Access):
        return Access(names.get(e.name, e.name), e.subs)
    if isinstance(e, Call):
        return Call(e.fn, tuple(rename(a, names) for a in e.args))
    if isinstance(e, BinOp):
        return BinOp(e.op, rename(e.lhs, names), rename(e.rhs, names))
    if isinstance(e, Reduce):
        return Reduce(e.kind, e.indices, rename(e.body, names))
    return e


# ---------------------------------------------------------------------------------------------
# Checks and range inference
# ---------------------------------------------------------------------------------------------


def _check_reductions(stmt: Statement) -> None:
    """Reduction indices are fresh (no output index, no enclosing reduction's), and every index
    outside the output is reduced."""
    out = set() if stmt.accumulate else {s.plain for s in stmt.subs}

    def visit(e: Expr, bound: set[str]) -> None:
        if isinstance(e, Reduce):
            for k in e.indices:
                if k in bound:
                    raise CompileError(f"tensor_op: index '{k}' of {e.kind}[...] is already bound outside it")
            visit(e.body, bound | set(e.indices))
            return
        if isinstance(e, Access) and not stmt.accumulate:
            for s in e.subs:
                for n in s.indices:
                    if n not in bound:
                        raise CompileError(
                            f"tensor_op: index '{n}' is neither an output index nor reduced: "
                            f"add it to the output or to a reduction")
        for c in (e.args if isinstance(e, Call) else (e.lhs, e.rhs) if isinstance(e, BinOp) else ()):
            visit(c, bound)

    visit(stmt.body, set(out))


def infer_ranges(stmt: Statement, shapes: Mapping[str, Sequence[int]],
                 given: Mapping[str, int] | None = None,
                 out_shape: Sequence[int] | None = None) -> dict[str, int]:
    """The range of every index, from the operands' shapes and `given`.

    An index used alone as a subscript takes that dim's size (all such uses must agree); one
    used only in compound subscripts takes the largest range that keeps every such access in
    bounds once the other indices there are known (as Tensor Comprehensions infer ranges).
    Then every access is checked to stay in bounds. Errors name the index or the operand."""
    _check_reductions(stmt)
    given = dict(given or {})
    names = all_indices(stmt)
    for k, v in given.items():
        if k not in names:
            raise CompileError(f"tensor_op: ranges names '{k}', which is not an index of the expression")
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise CompileError(f"tensor_op: the range of index '{k}' must be a positive integer, got {v!r}")
    reads: list[tuple[str, tuple[Affine, ...], tuple[int, ...]]] = []
    for a in accesses(stmt.body):
        if a.name not in shapes:
            raise CompileError(f"tensor_op: no input named '{a.name}'")
        shape = tuple(int(d) for d in shapes[a.name])
        if len(a.subs) != len(shape):
            what = "as a scalar (written bare)" if not a.subs else f"with {len(a.subs)} subscripts"
            raise ShapeError(f"tensor_op: operand '{a.name}' has shape {shape} but is read {what}")
        reads.append((a.name, a.subs, shape))
    if stmt.accumulate:
        if out_shape is None or len(out_shape) != len(stmt.subs):
            raise ShapeError(f"tensor_op: the `+=` output '{stmt.out}' needs a shape of rank {len(stmt.subs)}")
        reads.append((stmt.out, stmt.subs, tuple(out_shape)))

    ranges: dict[str, int] = {k: int(v) for k, v in given.items()}
    source: dict[str, str] = {k: "ranges=" for k in given}
    for name, subs, shape in reads:
        for d, (s, n) in enumerate(zip(subs, shape)):
            i = s.plain
            if i is None:
                continue
            here = f"'{name}' dim {d}"
            if i in ranges and ranges[i] != n:
                raise ShapeError(f"tensor_op: index '{i}' has size {ranges[i]} from {source[i]} "
                                 f"but size {n} from {here}")
            ranges.setdefault(i, n)
            source.setdefault(i, here)
    # Compound subscripts: the largest range that stays in bounds, one unknown at a time.
    while True:
        found: dict[str, int] = {}
        for name, subs, shape in reads:
            for s, n in zip(subs, shape):
                unknown = [x for x in s.indices if x not in ranges]
                if len(unknown) != 1:
                    continue
                u = unknown[0]
                c = dict(s.terms)[u]
                rest = Affine(tuple(t for t in s.terms if t[0] != u), s.const)
                lo, hi = rest.bounds(ranges)
                # c > 0: hi + c (R - 1) <= n - 1; c < 0: lo + c (R - 1) >= 0
                r = (n - 1 - hi) // c + 1 if c > 0 else lo // (-c) + 1
                found[u] = min(found.get(u, r), r)
        if not found:
            break
        for u, r in found.items():
            if r < 1:
                raise ShapeError(f"tensor_op: index '{u}' has an empty range: its subscripts leave no "
                                 "position in bounds")
            ranges[u] = r
            source[u] = "the bounds of its subscripts"
    unknown = [n for n in names if n not in ranges]
    if unknown:
        n = unknown[0]
        also = f" (nor those of {', '.join(repr(u) for u in unknown[1:])})" if unknown[1:] else ""
        raise CompileError(f"tensor_op: cannot infer the range of index '{n}'{also}: it is never a "
                           f"subscript on its own, and its subscripts do not bound it alone; "
                           f"give it as ranges={{'{n}': N}}")
    for name, subs, shape in reads:
        for d, (s, n) in enumerate(zip(subs, shape)):
            lo, hi = s.bounds(ranges)
            if lo < 0 or hi > n - 1:
                where = f"reaches {lo}" if lo < 0 else f"reaches {hi}"
                raise ShapeError(f"tensor_op: subscript '{s}' of '{name}' (dim {d}, size {n}) {where}, "
                                 f"out of bounds with ranges {_fmt_ranges(ranges, s.indices)}")
    return {n: ranges[n] for n in index_order(stmt)}


def _fmt_ranges(ranges: Mapping[str, int], names: Sequence[str]) -> str:
    return "{" + ", ".join(f"{n}: {ranges[n]}" for n in names) + "}"


def result_shape(stmt: Statement, ranges: Mapping[str, int]) -> tuple[int, ...]:
    """The output's shape of an `=` statement."""
    return tuple(ranges[s.plain] for s in stmt.subs)


# ---------------------------------------------------------------------------------------------
# NumPy evaluation (float64)
# ---------------------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_erf = np.frompyfunc(math.erf, 1, 1)

NUMPY_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "tanh": np.tanh, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "abs": np.abs, "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0), "sin": np.sin, "cos": np.cos,
    "erf": lambda x: np.asarray(_erf(np.asarray(x, np.float64)), np.float64),
}
NUMPY_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
                "max": np.maximum, "min": np.minimum, "<": np.less, "<=": np.less_equal,
                ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}
NUMPY_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def _as_float(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float64) if v.dtype == np.bool_ else v


def evaluate(stmt: Statement, arrays: Mapping[str, np.ndarray], ranges: Mapping[str, int],
             out_shape: Sequence[int] | None = None) -> np.ndarray:
    """The statement's value in float64, computed over the iteration domain with broadcasting."""
    order = index_order(stmt)
    axis = {n: i for i, n in enumerate(order)}
    full = tuple(ranges[n] for n in order)
    nd = len(order)

    def grid(s: Affine) -> np.ndarray:
        v = np.full((1,) * nd, s.const, dtype=np.int64)
        for n, c in s.terms:
            shape = [1] * nd
            shape[axis[n]] = ranges[n]
            v = v + c * np.arange(ranges[n], dtype=np.int64).reshape(shape)
        return v

    def ev(e: Expr) -> np.ndarray:
        if isinstance(e, Num):
            return np.full((1,) * nd, e.value)
        if isinstance(e, Access):
            x = np.asarray(arrays[e.name], dtype=np.float64)
            if not e.subs:
                return x.reshape((1,) * nd)
            idx = np.broadcast_arrays(*(grid(s) for s in e.subs))
            return x[tuple(idx)]
        if isinstance(e, Call):
            args = [ev(a) for a in e.args]
            if e.fn == "where":
                return np.where(args[0] if args[0].dtype == np.bool_ else args[0] != 0,
                                _as_float(args[1]), _as_float(args[2]))
            if e.fn in NUMPY_BINARY:
                return NUMPY_BINARY[e.fn](_as_float(args[0]), _as_float(args[1]))
            return NUMPY_UNARY[e.fn](_as_float(args[0]))
        if isinstance(e, BinOp):
            lhs, rhs = ev(e.lhs), ev(e.rhs)
            return NUMPY_BINARY[e.op](_as_float(lhs), _as_float(rhs))
        if isinstance(e, Reduce):
            body = _as_float(ev(e.body))
            axes = tuple(axis[k] for k in e.indices)
            shape = list(body.shape)
            for a in axes:
                shape[a] = full[a]
            return NUMPY_REDUCE[e.kind](np.broadcast_to(body, shape), axis=axes, keepdims=True)
        raise AssertionError(e)

    with np.errstate(all="ignore"):
        value = _as_float(ev(stmt.body))
        if stmt.accumulate:
            assert out_shape is not None
            out = np.zeros(tuple(out_shape))
            idx = np.broadcast_arrays(*(grid(s) for s in stmt.subs), np.zeros(full, np.int64))[:-1]
            np.add.at(out, tuple(idx), np.broadcast_to(value, full))
            return out
        n_out = len(stmt.subs)
        target = full[:n_out] + (1,) * (nd - n_out)
        return np.broadcast_to(value, target).reshape(full[:n_out]).copy()


# ---------------------------------------------------------------------------------------------
# Splitting nested reductions
# ---------------------------------------------------------------------------------------------


def is_simple(stmt: Statement) -> bool:
    """A reduction-free body, or one top-level reduction over a reduction-free body."""
    body = stmt.body.body if isinstance(stmt.body, Reduce) else stmt.body
    return not any(isinstance(e, Reduce) for e in walk(body))


def split(stmt: Statement, ranges: Mapping[str, int]) -> list[Statement]:
    """Simple statements computing `stmt`, the last one `stmt`'s own output: each reduction that
    is not the body's root becomes a temporary `tmpN[free indices] = red[...](...)`, read back
    as an access. Temporaries are named apart from every tensor and index in `stmt`."""
    taken = set(input_names(stmt)) | set(all_indices(stmt)) | {stmt.out}
    order = index_order(stmt)
    out: list[Statement] = []
    counter = iter(range(1 << 30))

    def fresh() -> str:
        while True:
            n = f"tmp{next(counter)}"
            if n not in taken:
                taken.add(n)
                return n

    def free(e: Expr) -> set[str]:
        used = {n for a in accesses(e) for s in a.subs for n in s.indices}
        inner = {n for x in walk(e) if isinstance(x, Reduce) for n in x.indices}
        return used - inner

    def lift(e: Expr, root: bool) -> Expr:
        if isinstance(e, Reduce):
            body = lift(e.body, False)
            node = Reduce(e.kind, e.indices, body)
            if root:
                return node
            idx = [n for n in order if n in free(node)]
            name = fresh()
            out.append(Statement(name, tuple(Affine.index(n) for n in idx), node))
            return Access(name, tuple(Affine.index(n) for n in idx))
        if isinstance(e, Call):
            return Call(e.fn, tuple(lift(a, False) for a in e.args))
        if isinstance(e, BinOp):
            return BinOp(e.op, lift(e.lhs, False), lift(e.rhs, False))
        return e

    out.append(Statement(stmt.out, stmt.subs, lift(stmt.body, True), stmt.accumulate))
    return out


# ---------------------------------------------------------------------------------------------
# Symbolic differentiation (reduction-free bodies)
# ---------------------------------------------------------------------------------------------

ZERO, ONE = Num(0.0), Num(1.0)


def add(a: Expr, b: Expr) -> Expr:
    if a == ZERO:
        return b
    if b == ZERO:
        return a
    return BinOp("+", a, b)


def sub(a: Expr, b: Expr) -> Expr:
    if b == ZERO:
        return a
    if a == ZERO:
        return neg(b)
    return BinOp("-", a, b)


def mul(a: Expr, b: Expr) -> Expr:
    if ZERO in (a, b):
        return ZERO
    if a == ONE:
        return b
    if b == ONE:
        return a
    return BinOp("*", a, b)


def div(a: Expr, b: Expr) -> Expr:
    if a == ZERO:
        return ZERO
    return a if b == ONE else BinOp("/", a, b)


def neg(a: Expr) -> Expr:
    if isinstance(a, Num):
        return Num(-a.value)
    return Call("neg", (a,))


def where(c: Expr, a: Expr, b: Expr) -> Expr:
    if a == b:
        return a
    return Call("where", (c, a, b))


def derivative(e: Expr, target: Access) -> Expr:
    """d e / d target, where every occurrence of the access `target` is the same variable.
    Comparisons have zero derivative; max/min send it to the first argument on ties; abs and
    relu take derivative 0 at 0 (as torch does)."""
    if isinstance(e, Num):
        return ZERO
    if isinstance(e, Access):
        return ONE if e == target else ZERO
    if isinstance(e, Reduce):
        raise AssertionError("derivative of a reduction: split the statement first")
    if isinstance(e, BinOp):
        if e.op in COMPARISONS:
            return ZERO
        da, db = derivative(e.lhs, target), derivative(e.rhs, target)
        a, b = e.lhs, e.rhs
        if e.op == "+":
            return add(da, db)
        if e.op == "-":
            return sub(da, db)
        if e.op == "*":
            return add(mul(da, b), mul(a, db))
        # (a / b)' = a' / b - a b' / b^2
        return sub(div(da, b), div(mul(a, db), mul(b, b)))
    assert isinstance(e, Call)
    if e.fn == "where":
        c, a, b = e.args
        return where(c, derivative(a, target), derivative(b, target))
    if e.fn in ("max", "min"):
        a, b = e.args
        da, db = derivative(a, target), derivative(b, target)
        return where(BinOp(">=" if e.fn == "max" else "<=", a, b), da, db)
    u = e.args[0]
    du = derivative(u, target)
    if du == ZERO:
        return ZERO
    fn = e.fn
    if fn == "neg":
        local: Expr = Num(-1.0)
    elif fn == "exp":
        local = e
    elif fn == "log":
        return div(du, u)
    elif fn == "tanh":
        local = sub(ONE, mul(e, e))
    elif fn == "sqrt":
        return div(du, mul(Num(2.0), e))
    elif fn == "rsqrt":
        local = mul(Num(-0.5), div(e, u))
    elif fn == "abs":
        return where(BinOp(">", u, ZERO), du, where(BinOp("<", u, ZERO), neg(du), ZERO))
    elif fn == "sigmoid":
        local = mul(e, sub(ONE, e))
    elif fn == "relu":
        return where(BinOp(">", u, ZERO), du, ZERO)
    elif fn == "sin":
        local = Call("cos", (u,))
    elif fn == "cos":
        local = neg(Call("sin", (u,)))
    elif fn == "erf":
        local = mul(Num(2.0 / math.sqrt(math.pi)), Call("exp", (neg(mul(u, u)),)))
    else:
        raise AssertionError(fn)
    return mul(du, local)
