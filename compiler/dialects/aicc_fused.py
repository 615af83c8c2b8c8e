"""The `aicc_fused` dialect: kernels that are no scalar body over an iteration space, so no
linalg.generic: those fusion passes form out of several aicc ops, and gathers.

    %o = aicc_fused.attention ins(%q, %k, %v : tensor<8x1024x64xf32>, tensor<8x1024x64xf32>,
             tensor<8x1024x64xf32>) outs(%init : tensor<8x1024x64xf32>) {scale = 0.125 : f64, causal}
             -> tensor<8x1024x64xf32>

`aicc_fused.attention` is softmax(scale * q @ k^T, masked) @ v, in destination-passing style like
a linalg op (ins: q, k, v and an optional mask; outs: the result), on tensors or on memrefs, so
that bufferize treats it as it treats linalg. Its region is empty: the op is not a scalar body
over an iteration space, and lower-attention emits its loop nest.

Logical shapes (after each operand's permutation, below): q (B..., L, E), k (B..., S, E),
v (B..., S, F), result (B..., L, F); the batch dims B... broadcast as in np.matmul.

    scale      f64: scores are scale * (q @ k^T)
    causal     unit: only scores with s <= l take part (top-left aligned, as torch's is_causal)
    mask       "keep" (boolean, true keeps the score), "drop" (boolean, true masks it) or "add"
               (added to the scores); the mask operand broadcasts to (B..., L, S)
    fill       f64: what a score masked by a boolean mask becomes (-inf unless the program said
               otherwise)
    q_perm, k_perm, v_perm, out_perm
               i64 arrays: the logical operand is np.transpose(stored operand, perm), so an
               attention that reads heads out of a (L, H, E) layout, or writes its result in
               one, needs no transpose kernel. Absent: identity.

A row whose scores are all masked has no softmax (0/0): its result is NaN, as the unfused
softmax gives.

    %r = aicc_fused.gather ins(%table, %ids : tensor<50257x768xf32>, tensor<1x7xi64>)
             outs(%init : tensor<1x7x768xf32>) {axis = 0 : i64} -> tensor<1x7x768xf32>

`aicc_fused.gather` is np.take(data, indices, axis) as a load at a run-time index: the result
is data with its dim `axis` replaced by the indices' dims; a negative index counts from the end
(as in ONNX); an index out of range reads 0 (the data is never read out of bounds). Its
iteration space is the result's dims, all parallel; its indexing map for the data shows the
gathered axis as 0 (that index is a value, not an affine expression). linalg-to-loops lowers
it for every target. A linalg.generic could only gather by a select over the whole axis,
O(vocabulary) per embedding lookup. `aicc_fused.gather_elements` is np.take_along_axis in the
same way: the result has the indices' shape and reads the data at its own index off the axis.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ShapedType,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.irdl import AttrSizedOperandSegments, attr_def, irdl_op_definition, opt_attr_def, traits_def
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from compiler.dialects.shapes import broadcast_shapes, shape_of

MASK_KINDS = ("keep", "drop", "add")


def _perm(attr: DenseArrayBase | None, rank: int) -> list[int]:
    return list(attr.get_values()) if attr is not None else list(range(rank))


def logical_shape(shape: Sequence[int], perm: Sequence[int]) -> list[int]:
    return [shape[p] for p in perm]


class _DestinationOp(LinalgStructuredOperation):
    """A linalg-like op with an empty region: ins(...) outs(...) {attributes} [-> results], so
    that bufferize treats it as it treats linalg (it rebuilds it as `type(op)(ins, outs, [])`
    and copies the attributes)."""

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(NoTerminator())

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        res: Sequence[Attribute] | None = None,
        attributes: dict[str, Attribute] | None = None,
    ):
        if res is None:
            res = [o.type for o in outputs]
        super().__init__(
            operands=[inputs, outputs],
            result_types=[res],
            attributes=attributes or {},
            regions=[Region(Block())],
        )

    @property
    def out(self) -> SSAValue:
        """The one destination (its buffer on memrefs)."""
        return self.outputs[0]

    def print(self, printer: Printer) -> None:
        for keyword, values in (("ins", self.inputs), ("outs", self.outputs)):
            printer.print_string(f" {keyword}(")
            printer.print_list(values, printer.print_ssa_value)
            printer.print_string(" : ")
            printer.print_list(values.types, printer.print_attribute)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        if self.res:
            printer.print_string(" -> ")
            printer.print_list(self.res.types, printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> _DestinationOp:
        groups = []
        for keyword in ("ins", "outs"):
            pos = parser.pos
            parser.parse_characters(keyword)
            parser.parse_punctuation("(")
            names = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_unresolved_operand)
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
            parser.parse_punctuation(")")
            groups.append(parser.resolve_operands(names, types, pos))
        attrs = parser.parse_optional_attr_dict()
        res = []
        if parser.parse_optional_punctuation("->"):
            res = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        return cls(groups[0], groups[1], res, attrs)


@irdl_op_definition
class AttentionOp(_DestinationOp):
    """softmax(scale * q @ k^T [masked]) @ v as one kernel (see the module docstring)."""

    name = "aicc_fused.attention"

    scale = opt_attr_def(FloatAttr)
    causal = opt_attr_def(UnitAttr)
    mask = opt_attr_def(StringAttr)
    fill = opt_attr_def(FloatAttr)
    q_perm = opt_attr_def(DenseArrayBase)
    k_perm = opt_attr_def(DenseArrayBase)
    v_perm = opt_attr_def(DenseArrayBase)
    out_perm = opt_attr_def(DenseArrayBase)

    @staticmethod
    def make_attributes(scale: float, causal: bool = False, mask: str | None = None,
                        fill: float = -math.inf, perms: dict[str, Sequence[int]] | None = None
                        ) -> dict[str, Attribute]:
        attrs: dict[str, Attribute] = {"scale": FloatAttr(scale, Float64Type())}
        if causal:
            attrs["causal"] = UnitAttr()
        if mask is not None:
            attrs["mask"] = StringAttr(mask)
            if mask != "add":
                attrs["fill"] = FloatAttr(fill, Float64Type())
        for name, p in (perms or {}).items():
            if list(p) != list(range(len(p))):
                attrs[f"{name}_perm"] = DenseArrayBase.from_list(i64, list(p))
        return attrs

    # -- the operands, logically

    @property
    def q(self) -> SSAValue:
        return self.inputs[0]

    @property
    def k(self) -> SSAValue:
        return self.inputs[1]

    @property
    def v(self) -> SSAValue:
        return self.inputs[2]

    @property
    def mask_value(self) -> SSAValue | None:
        return self.inputs[3] if len(self.inputs) > 3 else None

    @property
    def scale_value(self) -> float:
        return self.scale.value.data if self.scale is not None else 1.0

    @property
    def fill_value(self) -> float:
        return self.fill.value.data if self.fill is not None else -math.inf

    @property
    def mask_kind(self) -> str | None:
        return self.mask.data if self.mask is not None else None

    def perm(self, which: str) -> list[int]:
        value = {"q": self.q, "k": self.k, "v": self.v, "out": self.out}[which]
        return _perm(getattr(self, f"{which}_perm"), len(value.type.get_shape()))

    def shape(self, which: str) -> list[int]:
        """The logical shape; on tensors a dynamic dim is its Sym, on memrefs DYNAMIC_INDEX."""
        value = {"q": self.q, "k": self.k, "v": self.v, "out": self.out}[which]
        dims = shape_of(value) if isinstance(value.type, TensorType) else value.type.get_shape()
        return logical_shape(dims, self.perm(which))

    def sizes(self) -> tuple[list[int], int, int, int, int]:
        """(batch shape, L, S, E, F)."""
        out, k = self.shape("out"), self.shape("k")
        return out[:-2], out[-2], k[-2], k[-1], out[-1]

    def kept_pairs(self) -> int:
        """(l, s) score pairs per batch entry that take part (all of them unless causal)."""
        _, L, S, _, _ = self.sizes()
        if self.causal is None:
            return L * S
        return sum(min(S, l + 1) for l in range(L))

    def flop_count(self) -> int:
        """q @ k^T and p @ v (2 flops a multiply-add), the scale, the mask add and softmax's
        max, subtract, exp, sum and divide, over the score pairs that take part."""
        batch, _, _, E, F = self.sizes()
        per_pair = 2 * E + 2 * F + 5 + (1 if self.scale_value != 1.0 else 0)
        per_pair += 1 if self.mask_kind == "add" else 0
        if any(not isinstance(d, int) or d < 0 for d in (*batch, *self.sizes()[1:3])):
            return per_pair  # dynamic sizes: per (batch entry, score pair)
        return math.prod(batch) * self.kept_pairs() * per_pair

    # -- LinalgStructuredOperation: the iteration space (batch..., l, s, e, f)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        batch, *_ = self.sizes()
        nb = len(batch)
        n = nb + 4
        l, s, e, f = (AffineExpr.dimension(nb + i) for i in range(4))

        def operand_map(value: SSAValue, which: str, last: tuple) -> AffineMap:
            rank = len(value.type.get_shape())
            logical = self.shape(which)
            b = [AffineExpr.constant(0) if logical[i] == 1 and batch[i - rank + 2 + nb] != 1
                 else AffineExpr.dimension(i - rank + 2 + nb) for i in range(rank - 2)]
            exprs = [*b, *last]
            perm = self.perm(which)
            stored = [exprs[perm.index(i)] for i in range(rank)]
            return AffineMap(n, 0, tuple(stored))

        maps = [operand_map(self.q, "q", (l, e)), operand_map(self.k, "k", (s, e)),
                operand_map(self.v, "v", (s, f))]
        if self.mask_value is not None:
            shape = self.mask_value.type.get_shape()
            full = [*batch, 0, 0]
            dims = [*(AffineExpr.dimension(i) for i in range(nb)), l, s]
            exprs = [AffineExpr.constant(0) if size == 1 and full[i - len(shape) + len(full)] != 1
                     else dims[i - len(shape) + len(full)] for i, size in enumerate(shape)]
            maps.append(AffineMap(n, 0, tuple(exprs)))
        maps.append(operand_map(self.out, "out", (l, f)))
        return ArrayAttr(AffineMapAttr(m) for m in maps)

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        batch, *_ = self.sizes()
        par, red = IteratorTypeAttr.parallel(), IteratorTypeAttr.reduction()
        return ArrayAttr([par] * len(batch) + [par, red, red, par])

    def verify_(self) -> None:
        if len(self.inputs) not in (3, 4) or len(self.outputs) != 1:
            raise VerifyException("aicc_fused.attention: expects ins(q, k, v[, mask]) and one out")
        if (self.mask_value is None) != (self.mask is None):
            raise VerifyException("aicc_fused.attention: a mask operand and a mask kind go together")
        if self.mask is not None and self.mask.data not in MASK_KINDS:
            raise VerifyException(f"aicc_fused.attention: mask kind must be one of {MASK_KINDS}")
        for which in ("q", "k", "v", "out"):
            value = {"q": self.q, "k": self.k, "v": self.v, "out": self.out}[which]
            if not isinstance(value.type, ShapedType) or len(value.type.get_shape()) < 2:
                raise VerifyException(f"aicc_fused.attention: {which} must have rank >= 2")
            if sorted(self.perm(which)) != list(range(len(value.type.get_shape()))):
                raise VerifyException(f"aicc_fused.attention: {which}_perm is not a permutation")
        q, k, v, out = (self.shape(w) for w in ("q", "k", "v", "out"))
        if q[-1] != k[-1] or k[-2] != v[-2] or out[-2:] != [q[-2], v[-1]]:
            raise VerifyException(
                f"aicc_fused.attention: shapes q {q}, k {k}, v {v}, out {out} do not compose")
        try:
            batch = broadcast_shapes(self.name, tuple(q[:-2]), tuple(k[:-2]), tuple(v[:-2]))
            if list(batch) != list(out[:-2]):
                raise ValueError
            if self.mask_value is not None:
                mt = self.mask_value.type
                mshape = shape_of(mt) if isinstance(mt, TensorType) else mt.get_shape()
                target = (*out[:-2], q[-2], k[-2])
                if broadcast_shapes(self.name, tuple(mshape), target) != target:
                    raise ValueError
        except ValueError:
            raise VerifyException(
                f"aicc_fused.attention: batch dims of q {q}, k {k}, v {v} and the mask do not "
                f"broadcast to the result {out}") from None


class _GatherBase(_DestinationOp):
    """ins(data, indices) outs(out) {axis}: loads of `data` at run-time indices along `axis`,
    one per element of the result, all loops parallel."""

    axis = attr_def(IntegerAttr)

    @staticmethod
    def make_attributes(axis: int) -> dict[str, Attribute]:
        return {"axis": IntegerAttr(axis, i64)}

    @property
    def data(self) -> SSAValue:
        return self.inputs[0]

    @property
    def indices(self) -> SSAValue:
        return self.inputs[1]

    @property
    def axis_value(self) -> int:
        return self.axis.value.data

    @abstractmethod
    def index_dims(self) -> list[int]:
        """The result's dims that address the indices, in order."""

    @abstractmethod
    def data_dims(self) -> list[int | None]:
        """For each dim of the data, the result's dim that addresses it (None: the axis, read
        at the run-time index)."""

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        n, d = len(self.out.type.get_shape()), AffineExpr.dimension
        data = tuple(AffineExpr.constant(0) if i is None else d(i) for i in self.data_dims())
        maps = [AffineMap(n, 0, data), AffineMap(n, 0, tuple(d(i) for i in self.index_dims())),
                AffineMap.identity(n)]
        return ArrayAttr(AffineMapAttr(m) for m in maps)

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        return ArrayAttr([IteratorTypeAttr.parallel()] * len(self.out.type.get_shape()))

    @abstractmethod
    def result_shape(self) -> list[int] | None:
        """The result shape the data and indices give; None when they do not fit."""

    def verify_(self) -> None:
        if len(self.inputs) != 2 or len(self.outputs) != 1:
            raise VerifyException(f"{self.name}: expects ins(data, indices) and one out")
        if not isinstance(self.indices.type.get_element_type(), IntegerType):
            raise VerifyException(f"{self.name}: indices must be integers, got {self.indices.type}")
        data, idx, out = (list(v.type.get_shape()) for v in (self.data, self.indices, self.out))
        axis = self.axis_value
        if not 0 <= axis < len(data) or self.result_shape() != out:
            raise VerifyException(f"{self.name}: data {data} gathered on axis {axis} by "
                                  f"indices {idx} is not the result {out}")


@irdl_op_definition
class GatherOp(_GatherBase):
    """np.take(data, indices, axis) by loads at run-time indices (see the module docstring)."""

    name = "aicc_fused.gather"

    def index_dims(self) -> list[int]:
        return [self.axis_value + j for j in range(len(self.indices.type.get_shape()))]

    def data_dims(self) -> list[int | None]:
        axis, rank_idx = self.axis_value, len(self.indices.type.get_shape())
        rank = len(self.data.type.get_shape())
        return [*range(axis), None, *(axis + rank_idx + j for j in range(rank - axis - 1))]

    def result_shape(self) -> list[int] | None:
        data, idx, axis = self.data.type.get_shape(), self.indices.type.get_shape(), self.axis_value
        return [*data[:axis], *idx, *data[axis + 1:]]


@irdl_op_definition
class GatherElementsOp(_GatherBase):
    """np.take_along_axis(data, indices, axis) by loads at run-time indices: the result has
    the indices' shape, and off the axis reads the data at its own index (the data may be
    larger there, as ONNX GatherElements allows)."""

    name = "aicc_fused.gather_elements"

    def index_dims(self) -> list[int]:
        return list(range(len(self.indices.type.get_shape())))

    def data_dims(self) -> list[int | None]:
        return [None if i == self.axis_value else i for i in range(len(self.data.type.get_shape()))]

    def result_shape(self) -> list[int] | None:
        data, idx = self.data.type.get_shape(), self.indices.type.get_shape()
        if len(data) != len(idx) or any(
                i != self.axis_value and n != DYNAMIC_INDEX and (m == DYNAMIC_INDEX or n > m)
                for i, (m, n) in enumerate(zip(data, idx))):
            return None
        return list(idx)


def attention_reference(q, k, v, mask=None, *, scale: float = 1.0, causal: bool = False,
                        mask_kind: str | None = None, fill: float = -math.inf) -> np.ndarray:
    """The op's semantics in NumPy (float64, logical layouts)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = scale * (q @ np.swapaxes(k, -1, -2))
    if mask_kind == "add":
        s = s + mask
    elif mask_kind in ("keep", "drop"):
        keep = np.asarray(mask, bool) if mask_kind == "keep" else ~np.asarray(mask, bool)
        s = np.where(keep, s, fill)
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v


AICC_FUSED = Dialect("aicc_fused", [AttentionOp, GatherOp, GatherElementsOp], [])

__all__ = ["AICC_FUSED", "AttentionOp", "GatherElementsOp", "GatherOp", "attention_reference", "logical_shape", "MASK_KINDS"]
