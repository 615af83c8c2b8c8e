"""Symbolic dimensions: the sizes of a model's dynamic dims as polynomials over named symbols.

A dynamic dim is a `Sym`: a polynomial with integer coefficients over symbol names (`batch`,
`seq`), kept canonical so that two dims are the same exactly when their expressions are equal
(`batch*seq` from a reshape of `[batch, seq, 768]` into `[-1, 768]` is the same dim wherever it
appears). Shape functions (compiler/dialects/shapes.py) compute with Syms as with ints: sums
(concat), products (reshape), exact division (a reshape's -1); a question they cannot answer for
every value of the symbols (is `batch` divisible by 3?) raises `SymbolicError`, and the frontend
turns it into a CompileError naming the op.

Every symbol stands for a size >= 1. In the IR, a Sym dim is `?` in the tensor type and its
expression is written, with those of the type's other dynamic dims, in the type's encoding:

    tensor<?x?x768xf32, "batch,seq">     tensor<?x768xf32, "batch*seq">
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence

from compiler.errors import CompileError

__all__ = ["Sym", "SymbolicError", "ceildiv_expr", "evaluate_size", "exact_div", "format_dims", "parse_dim",
           "parse_dims", "prod", "product_expr"]


class SymbolicError(CompileError, ValueError):
    """A question about symbolic dims that has no single answer for all values of the symbols
    (a ValueError too, so that shape functions report it like any other shape mismatch)."""


Monomial = tuple[str, ...]  # sorted symbol names, repeated for powers; () is the constant term


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    return tuple(sorted(a + b))


class Sym:
    """An integer polynomial over symbol names; immutable and hashable."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int]):
        self.terms: dict[Monomial, int] = {m: c for m, c in sorted(terms.items()) if c}
        self._hash = hash(tuple(self.terms.items()))

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def var(name: str) -> Sym:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SymbolicError(f"'{name}' is not a valid dimension name (letters, digits, _)")
        return Sym({(name,): 1})

    @staticmethod
    def lift(x) -> Sym:
        if isinstance(x, Sym):
            return x
        if isinstance(x, bool) or not isinstance(x, int):
            try:
                x = int(x)  # numpy integers
            except (TypeError, ValueError):
                raise SymbolicError(f"{x!r} is not a dimension") from None
        return Sym({(): x})

    @staticmethod
    def simplify(x: int | Sym) -> int | Sym:
        """A constant Sym as a plain int; anything else unchanged."""
        if isinstance(x, Sym) and x.is_constant():
            return x.terms.get((), 0)
        return x

    # -- queries ------------------------------------------------------------------------------
    def is_constant(self) -> bool:
        return all(m == () for m in self.terms)

    @property
    def name(self) -> str | None:
        """The symbol's name when this is a plain symbol (`batch`), else None (`batch*2`)."""
        if len(self.terms) == 1:
            ((mono, coef),) = self.terms.items()
            if coef == 1 and len(mono) == 1:
                return mono[0]
        return None

    @property
    def symbols(self) -> set[str]:
        return {s for m in self.terms for s in m}

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = 0
        for m, c in self.terms.items():
            v = c
            for s in m:
                if s not in env:
                    raise SymbolicError(f"no value for the dimension '{s}'")
                v *= int(env[s])
            total += v
        return total

    def lower_bound(self) -> int | None:
        """The least value over symbols >= 1 when every coefficient is >= 0 (else None)."""
        if any(c < 0 for m, c in self.terms.items() if m):
            return None
        return sum(self.terms.values())

    # -- arithmetic -----------------------------------------------------------------------------
    def __add__(self, other) -> int | Sym:
        o = Sym.lift(other)
        terms = dict(self.terms)
        for m, c in o.terms.items():
            terms[m] = terms.get(m, 0) + c
        return Sym.simplify(Sym(terms))

    __radd__ = __add__

    def __neg__(self) -> int | Sym:
        return Sym.simplify(Sym({m: -c for m, c in self.terms.items()}))

    def __sub__(self, other) -> int | Sym:
        return self + (-Sym.lift(other))

    def __rsub__(self, other) -> int | Sym:
        return Sym.lift(other) + (-self)

    def __mul__(self, other) -> int | Sym:
        o = Sym.lift(other)
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = _mono_mul(m1, m2)
                terms[m] = terms.get(m, 0) + c1 * c2
        return Sym.simplify(Sym(terms))

    __rmul__ = __mul__

    def __floordiv__(self, other) -> int | Sym:
        q = exact_div(self, other)
        if q is None:
            raise SymbolicError(f"{self} // {other} is not exact for every value of {', '.join(sorted(self.symbols))}")
        return q

    def __rfloordiv__(self, other) -> int | Sym:
        q = exact_div(other, self)
        if q is None:
            raise SymbolicError(f"{other} // {self} depends on the value of {', '.join(sorted(self.symbols))}")
        return q

    def __mod__(self, other) -> int:
        if exact_div(self, other) is not None:
            return 0
        raise SymbolicError(f"{self} % {other} depends on the value of {', '.join(sorted(self.symbols))}")

    def __rmod__(self, other) -> int:
        if exact_div(other, self) is not None:
            return 0
        raise SymbolicError(f"{other} % {self} depends on the value of {', '.join(sorted(self.symbols))}")

    # -- comparison ---------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if isinstance(other, Sym):
            return self.terms == other.terms
        try:
            return self.terms == Sym.lift(other).terms
        except SymbolicError:
            return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return self._hash

    def _compare(self, other, op: str) -> bool:
        d = self - other  # d op 0
        if not isinstance(d, Sym):
            return {"<": d < 0, "<=": d <= 0, ">": d > 0, ">=": d >= 0}[op]
        lo = d.lower_bound()
        if lo is not None:  # d >= lo for all values, and d is unbounded above
            if op in (">", ">=") and (lo > 0 or (op == ">=" and lo >= 0)):
                return True
            if op in ("<", "<=") and (lo > 0 or (op == "<" and lo >= 0)):
                return False
        hi = (-d).lower_bound() if isinstance(-d, Sym) else None
        if hi is not None:  # d <= -hi for all values, and d is unbounded below
            hi = -hi
            if op in ("<", "<=") and (hi < 0 or (op == "<=" and hi <= 0)):
                return True
            if op in (">", ">=") and (hi < 0 or (op == ">" and hi <= 0)):
                return False
        raise SymbolicError(f"whether {self} {op} {other} depends on the value of "
                            f"{', '.join(sorted(self.symbols | Sym.lift(other).symbols))}")

    def __lt__(self, other) -> bool:
        return self._compare(other, "<")

    def __le__(self, other) -> bool:
        return self._compare(other, "<=")

    def __gt__(self, other) -> bool:
        return self._compare(other, ">")

    def __ge__(self, other) -> bool:
        return self._compare(other, ">=")

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __int__(self) -> int:
        raise SymbolicError(f"the dimension {self} has no single value at compile time")

    __index__ = __int__

    # -- text ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda mc: (-len(mc[0]), mc[0])):
            names = "*".join(m)
            if not m:
                body = str(abs(c))
            elif abs(c) == 1:
                body = names
            else:
                body = f"{names}*{abs(c)}"
            sign = "-" if c < 0 else "+"
            parts.append((sign, body))
        if not parts:
            return "0"
        text = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        for sign, body in parts[1:]:
            text += f" {sign} {body}"
        return text.replace(" ", "")

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        """As an operand in generated code (f-strings): a sum in parentheses, so `x - {d}`
        subtracts all of `seq+1`."""
        return str(self) if len(self.terms) == 1 else "(" + str(self) + ")"

    def rename(self, fn) -> Sym:
        """The same polynomial over the symbols `fn(name)`."""
        return Sym({_mono_mul((), tuple(fn(n) for n in m)): c for m, c in self.terms.items()})


def prod(dims: Iterable[int | Sym]) -> int | Sym:
    out: int | Sym = 1
    for d in dims:
        out = out * d
    return out


def exact_div(a, b) -> int | Sym | None:
    """a / b when it is a polynomial with integer coefficients for every value of the symbols
    (b a nonzero int or a single monomial times an int); None when it is not."""
    a, b = Sym.lift(a), Sym.lift(b)
    if len(b.terms) != 1:
        if a == b:
            return 1
        # a = k * b for an integer k?
        (m0, c0), = list(b.terms.items())[:1]
        if m0 in a.terms and a.terms[m0] % c0 == 0:
            k = a.terms[m0] // c0
            if (a - b * k) == 0:
                return k
        return None
    (bm, bc), = b.terms.items()
    if bc == 0:
        return None
    terms: dict[Monomial, int] = {}
    for m, c in a.terms.items():
        rest = list(m)
        for s in bm:
            if s not in rest:
                return None
            rest.remove(s)
        if c % bc:
            return None
        terms[tuple(rest)] = c // bc
    return Sym.simplify(Sym(terms))


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv,
            ast.USub, ast.Name, ast.Constant, ast.Load)


def parse_dim(text: str) -> int | Sym:
    """`batch*seq*2 + 1` as a Sym (an int when it has no symbol)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise SymbolicError(f"'{text}' is not a dimension expression") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Constant)
                                               and not isinstance(node.value, int)):
            raise SymbolicError(f"'{text}' is not a dimension expression")

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return Sym.var(n.id)
        if isinstance(n, ast.UnaryOp):
            return -ev(n.operand)
        a, b = ev(n.left), ev(n.right)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        return a // b

    return Sym.simplify(Sym.lift(ev(tree)))


def ceildiv_expr(num: int | Sym | str, den: int) -> int | str:
    """ceil(num / den) as an int, or as the text of a launch-size expression (`ceildiv(x, 256)`)
    that evaluate_size computes once the symbols are known."""
    if isinstance(num, int):
        return -(-num // den)
    return str(num) if den == 1 else f"ceildiv({num}, {den})"


def product_expr(a: int | Sym | str, b: int | Sym | str) -> int | Sym | str:
    """a * b for sizes that may be launch-size expressions."""
    if a == 1 or b == 1:
        return b if a == 1 else a
    return f"{a}*{b}" if isinstance(a, str) or isinstance(b, str) else a * b


def evaluate_size(text: str | int, env: Mapping[str, int]) -> int:
    """The value of a size expression (symbols, + - * //, ceildiv(a, b)) for the symbols' values
    `env`."""
    if isinstance(text, int):
        return text

    def ev(n) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in env:
                raise SymbolicError(f"no value for the dimension '{n.id}'")
            return int(env[n.id])
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "ceildiv" \
                and len(n.args) == 2:
            return -(-ev(n.args[0]) // ev(n.args[1]))
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult,
                                                          ast.FloorDiv)):
            a, b = ev(n.left), ev(n.right)
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(n.op)) \
                if not isinstance(n.op, ast.FloorDiv) else a // b
        raise SymbolicError(f"'{text}' is not a size expression")

    return ev(ast.parse(text, mode="eval"))


def parse_dims(text: str) -> list[int | Sym]:
    """The comma-separated dims of a type's encoding."""
    return [parse_dim(t) for t in text.split(",")] if text.strip() else []


def format_dims(dims: Sequence[int | Sym]) -> str:
    return ",".join(str(d) for d in dims)
