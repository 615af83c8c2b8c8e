"""Shape and type inference for the aicc dialects, shared by the ops' builders and verifiers
and by the frontends. Each inference function raises ValueError with a message that names
the op and the shapes involved; `check_shape` turns that into a VerifyException inside a
verifier, and the frontends turn it into a CompileError that names the user's line."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, AnyFloat, IntegerType, StringAttr, TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from compiler.symbolic import Sym, exact_div, format_dims, parse_dims, prod

Dim = int | Sym
Shape = tuple[Dim, ...]


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(op: str, *shapes: Sequence[int]) -> Shape:
    """NumPy broadcasting of several shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ValueError(
                f"{op}: shapes {' and '.join(fmt_shape(s) for s in shapes)} cannot be broadcast together"
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axes(op: str, axes: Sequence[int] | int | None, rank: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank))
    if isinstance(axes, int):
        axes = (axes,)
    out = []
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"{op}: axis {a} is out of range for a tensor of rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


def reduce_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def matmul_shape(op: str, a: Sequence[int], b: Sequence[int]) -> Shape:
    """Shapes of np.matmul for operands of rank >= 2 (frontends lift 1-D operands first)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"{op}: operands must have rank >= 2, got {fmt_shape(a)} and {fmt_shape(b)}")
    if a[-1] != b[-2]:
        raise ValueError(
            f"{op}: contraction dimensions differ: {fmt_shape(a)} @ {fmt_shape(b)} ({a[-1]} != {b[-2]})"
        )
    try:
        batch = broadcast_shapes(op, a[:-2], b[:-2])
    except ValueError:
        raise ValueError(
            f"{op}: batch dimensions of {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast together"
        ) from None
    return (*batch, a[-2], b[-1])


def gemm_shape(
    op: str, a: Sequence[int], b: Sequence[int], bias: Sequence[int] | None,
    transpose_a: bool = False, transpose_b: bool = False,
) -> Shape:
    """matmul_shape of the operands as read (last two dims swapped when transposed); a bias
    must broadcast to that result without enlarging it."""
    swap = lambda s, t: (*s[:-2], s[-1], s[-2]) if t and len(s) >= 2 else tuple(s)  # noqa: E731
    out = matmul_shape(op, swap(a, transpose_a), swap(b, transpose_b))
    if bias is not None and broadcast_shapes(op, bias, out) != out:
        raise ValueError(f"{op}: bias {fmt_shape(bias)} does not broadcast to the result {fmt_shape(out)}")
    return out


def transpose_shape(op: str, shape: Sequence[int], perm: Sequence[int]) -> Shape:
    if sorted(perm) != list(range(len(shape))):
        raise ValueError(f"{op}: {tuple(perm)} is not a permutation of the axes of {fmt_shape(shape)}")
    return tuple(shape[p] for p in perm)


def reshape_shape(op: str, shape: Sequence[Dim], new: Sequence[Dim]) -> Shape:
    new = [Sym.simplify(d) for d in new]
    size = prod(shape)
    if new.count(-1) > 1:
        raise ValueError(f"{op}: more than one -1 in {tuple(new)}")
    if -1 in new:
        rest = prod(d for d in new if not (isinstance(d, int) and d == -1))
        q = exact_div(size, rest) if not (isinstance(rest, int) and rest == 0) else None
        if q is None:
            raise ValueError(f"{op}: cannot reshape {fmt_shape(shape)} into {fmt_shape(new)}")
        new[new.index(-1)] = q
    if any(isinstance(d, int) and d < 0 for d in new) or prod(new) != size:
        raise ValueError(f"{op}: cannot reshape {fmt_shape(shape)} ({size} elements) into {fmt_shape(new)}")
    return tuple(new)


def broadcast_to_shape(op: str, shape: Sequence[int], target: Sequence[int]) -> Shape:
    if broadcast_shapes(op, shape, target) != tuple(target):
        raise ValueError(f"{op}: cannot broadcast {fmt_shape(shape)} to {fmt_shape(target)}")
    return tuple(target)


def shape_of(value: SSAValue | Attribute) -> Shape:
    """A tensor's shape: ints, and for each dynamic (`?`) dim the Sym its type's encoding
    names (`tensor<?x768xf32, "batch*seq">`)."""
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if DYNAMIC_INDEX not in shape:
        return shape
    enc = t.encoding
    syms = parse_dims(enc.data) if isinstance(enc, StringAttr) else []
    if len(syms) != shape.count(DYNAMIC_INDEX):
        raise VerifyException(f"{t}: a tensor with dynamic dims names them in its encoding, one "
                              "expression per '?' (tensor<?x8xf32, \"batch\">)")
    it = iter(syms)
    return tuple(next(it) if d == DYNAMIC_INDEX else d for d in shape)


def tensor_type(elem: Attribute, shape: Sequence[Dim]) -> TensorType:
    """The tensor type of a shape whose dims may be Syms: `?` for each, named in the encoding."""
    shape = [Sym.simplify(d) for d in shape]
    dyn = [d for d in shape if isinstance(d, Sym)]
    if not dyn:
        return TensorType(elem, shape)
    return TensorType(elem, [DYNAMIC_INDEX if isinstance(d, Sym) else d for d in shape],
                      StringAttr(format_dims(dyn)))


def is_dynamic(t: Attribute) -> bool:
    """A shaped type with at least one `?` dim."""
    return hasattr(t, "get_shape") and DYNAMIC_INDEX in tuple(t.get_shape())


def element_type_of(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType)
    return value.type.element_type


def check_shape(fn, *args):
    """Run a shape helper inside a verifier: ValueError (SymbolicError too) becomes
    VerifyException."""
    try:
        return fn(*args)
    except ValueError as e:
        raise VerifyException(str(e)) from None


def require_float(op: IRDLOperation, *values: SSAValue) -> None:
    for v in values:
        if not isinstance(element_type_of(v), AnyFloat):
            raise VerifyException(f"{op.name}: expected a floating-point tensor, got {v.type}")


def require_numeric(op: IRDLOperation, *values: SSAValue) -> None:
    """Float or integer (not i1) element types: the ops that also compute on i32 / i64."""
    for v in values:
        e = element_type_of(v)
        if not isinstance(e, AnyFloat) and not (isinstance(e, IntegerType) and e.width.data > 1):
            raise VerifyException(f"{op.name}: expected a float or integer tensor, got {v.type}")


def require_result(op: IRDLOperation, shape: Shape, elem: Attribute) -> None:
    res = op.results[0].type
    assert isinstance(res, TensorType)
    if shape_of(res) != tuple(shape) or res.element_type != elem:
        raise VerifyException(
            f"{op.name}: result type {res} does not match the inferred {tensor_type(elem, shape)}"
        )
