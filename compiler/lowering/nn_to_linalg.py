"""The NN ops of compiler/dialects/aicc_nn.py to linalg on tensors (part of tensor-to-linalg).

Windows and offsets live in the indexing maps, as affine expressions of the loop dims:
  * pad:     fill the result with the pad value, then a generic copies the input in through
             the output map (d0 + low0, d1 + low1, ...);
  * conv2d:  one of the lowerings, chosen per op (`conv_lowering`): its
             `aicc.conv_lowering = "direct" | "im2col" | "matmul" | "packed" | "winograd" |
             "winograd4"` attribute, else the pass
             option `tensor-to-linalg{conv-lowering=...}`, else $AICC_CONV_LOWERING, else
             `choose_conv_lowering` in conv_lowering.py on the conv's shape (depthwise-like, tiny K
             or tiny convs direct; 1x1 stride-1 matmul; the rest im2col):
             - direct: loops (n, g, oc, oh, ow | ic, kh, kw) over the input viewed as
               (N, G, IC/G, H, W) read at (n, g, ic, oh*sh + kh*dh, ow*sw + kw*dw), the weight
               viewed as (G, OC/G, IC/G, KH, KW); the (N, G, OC/G, OH, OW) result reshaped back;
               "packed" is that generic, marked (a 1x1 stride-1 conv of one group with its
               image viewed as one row, (N, 1, IC, 1, H*W), for the kernel's columns to span
               rows);
             - im2col: a copy generic col[n, g, ic, kh, kw, oh, ow] = x[n, g, ic, oh*sh + kh*dh,
               ow*sw + kw*dw], viewed as (N, G, K, OH*OW) with K = IC/G*KH*KW, then a batched
               matmul generic out[n, g] = W[g] (OC/G x K) @ col[n, g] that choose-schedule and
               tile-matmul take (loops (n, g, m, p | k); the g dims are left out when there
               are no groups, so the weight is a matrix broadcast over the batch);
             - matmul: for 1x1 stride-1 convs, the same matmul on the input itself, viewed as
               (N, G, IC/G, H*W) (asked of any other conv, it means im2col);
             - winograd, winograd4: F(2x2, 3x3), F(4x4, 3x3) for 3x3 stride-1 convs
               (winograd.py): input transforms, 16 or 36 matmuls with the weight transformed
               at compile time, output transforms; the heuristic takes them where
               `winograd_wins` (given the target's vector width), F(4x4) where
               `winograd_tile` says, and asked of a conv they do not apply to, they mean the
               heuristic's choice.
             A per-channel bias added to the conv (its only use: conv + b with b of shape
             (1, OC, 1, 1), (OC, 1, 1), ...) is lowered with it as the accumulator's start, a
             broadcast copy in place of the zero fill;
  * conv_transpose2d: the input scattered with stride s (zeros between, a generic writing at
             h*s + offset into a filled tensor) and padded by d*(k-1) - pads, then a conv2d of
             stride 1 with the weight flipped and its channel dims swapped per group (s^2 more
             multiply-adds than a direct scatter, all of them affine);
  * pool2d:  loops (n, c, oh, ow | kh, kw), a max or add reduction from -inf or 0;
  * concat:  one copy generic per operand into the same destination, offset along the axis;
  * slice:   a generic reading the input at (start + d * step);
  * gather:  over an axis of more than GATHER_SELECT_MAX entries (an embedding table), an
             aicc_fused.gather: one load at the run-time index per element, which
             linalg-to-loops lowers; over a short axis, a reduction over the gathered axis k
             that selects data[.., k, ..] where indices == k (or k - size, for negative
             indices), with k read from an iota constant: a generic that fuses with its
             neighbours;
  * gather_elements: the same two ways (aicc_fused.gather_elements; or the select-reduction,
             with the indices read at the result's index);
  * argmax / argmin: reduce_max / reduce_min (keepdims), then a reduction over the axis that
             keeps the smallest (largest, for the last index) k where x == max (or x is NaN);
  * resample: the constant (index, weight) tables split into pieces, each a run of output
             positions o = o0 + p*i (one residue class of a period p) whose taps read the input
             at s_t + q_t*i with constant weights: one generic per piece, the index arithmetic
             in its affine maps (an upsampling by 2 is 2 pieces per axis, plus the edges). When
             no period gives few pieces, a constant gather per tap (select-reduction) instead;
  * cumsum:  log2(n) rounds of y += y shifted by 1, 2, 4, ... along the axis (Hillis-Steele),
             each round two generics (the shifted sum, and the copied first k); reverse shifts
             the other way, exclusive shifts once more. O(N log n) work, and float sums with
             O(log n) rounding error.
Reshapes are emitted as aicc.reshape, which the same pattern walk then lowers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, Float32Type, StringAttr, TensorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from compiler.dialects import aicc, aicc_fused, aicc_nn
from compiler.errors import CompileError
from compiler.lowering.conv_lowering import (
    CONV_LOWERING_ATTR,
    CONV_LOWERINGS,
    CONV_SCHEDULE_ATTR,
    PACKED_1X1_RULES,
    WINOGRAD4_MIN_TILES,
    choose_conv_lowering,
)
from compiler.lowering.winograd import WINOGRAD_TILES, lower_winograd, winograd_applies
from compiler.lowering.utils import (
    PARALLEL,
    REDUCTION,
    plus,
    reshape,
    broadcast_map,
    build_generic,
    empty_tensor,
    filled_tensor,
    insert_result,
    scalar_constant,
)

CONV_LOWERING_ENV = "AICC_CONV_LOWERING"
# "0": the heuristic never picks "packed", even where the target has the kernel (A/B timings)
CONV_PACKED_ENV = "AICC_CONV_PACKED"
# "0": 1x1 convs stay matmuls where the heuristic would pack them, strided ones too; all,
# small or none: that rule for unstrided ones instead of the target's (A/B timings)
CONV_PACKED_1X1_ENV = "AICC_CONV_PACKED_1X1"
# "0": the heuristic never picks "winograd" (A/B timings)
CONV_WINOGRAD_ENV = "AICC_CONV_WINOGRAD"


def _d(i: int) -> AffineDimExpr:
    return AffineDimExpr(i)


class LowerPad(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.PadOp, rewriter: PatternRewriter) -> None:
        low = aicc_nn.int_values(op.low)
        rank = len(low)
        acc = filled_tensor(rewriter, op, op.result.type, op.value.value.data)
        out_map = AffineMap(rank, 0, tuple(plus(_d(i), lo) for i, lo in enumerate(low)))
        generic = build_generic(
            [op.input], [acc], [AffineMap.identity(rank), out_map], [PARALLEL] * rank,
            lambda b, a: [a[0]], [op.result.type],
        )
        rewriter.replace(op, generic)


def conv_lowering(op: aicc_nn.Conv2dOp, forced: str = "", packed: bool = False,
                  vector_bits: int = 0, packed_1x1: str = "all",
                  winograd4_min_tiles: int = WINOGRAD4_MIN_TILES) -> str:
    """The lowering of `op`: its `aicc.conv_lowering` attribute, else `forced` (the pass
    option), else $AICC_CONV_LOWERING, else `choose_conv_lowering` on its shape (`packed`: the
    target has the packed kernel, which takes f32 convs with a static batch, and packs a
    weight known only at run time before the conv; `vector_bits`: its vector width, for
    where Winograd's F(2x2, 3x3) wins, 0 for never; `packed_1x1`: which of the heuristic's
    rules the machine keeps for unstrided 1x1 convs, see choose_conv_lowering;
    `winograd4_min_tiles`: from how many 4x4 tiles an image takes F(4x4, 3x3)). "matmul" on
    a conv that needs the im2col copy means "im2col"; "packed" on a dynamic batch means
    "direct"; "winograd" on a conv it does not apply to (winograd.py) means the heuristic's
    choice without it."""
    attr = op.attributes.get(CONV_LOWERING_ATTR)
    mode = attr.data if isinstance(attr, StringAttr) else (forced or os.environ.get(CONV_LOWERING_ENV, ""))
    n, _, _, _ = aicc.shape_of(op.input)
    kh, kw = aicc.shape_of(op.weight)[2:]
    strides = tuple(aicc_nn.int_values(op.strides))
    if mode in ("", "auto"):  # a dynamic batch: chosen as for one image
        mode = _heuristic(op, packed, vector_bits, packed_1x1, winograd4_min_tiles)
    if mode not in CONV_LOWERINGS:
        raise CompileError(f"conv lowering '{mode}': expected one of {', '.join(CONV_LOWERINGS)} (or auto)")
    if mode == "matmul" and ((kh, kw) != (1, 1) or strides != (1, 1)):
        mode = "im2col"
    if mode == "packed" and not isinstance(n, int):
        mode = "direct"
    if mode in WINOGRAD_TILES and not winograd_applies(op):
        mode = _heuristic(op, packed, 0, packed_1x1, winograd4_min_tiles)
    return mode


def _heuristic(op: aicc_nn.Conv2dOp, packed: bool, vector_bits: int, packed_1x1: str,
               winograd4_min_tiles: int = WINOGRAD4_MIN_TILES) -> str:
    n, c, _, _ = aicc.shape_of(op.input)
    oc, _, kh, kw = aicc.shape_of(op.weight)
    _, _, oh, ow = aicc.shape_of(op.result)
    strides = tuple(aicc_nn.int_values(op.strides))
    kernel = (packed and isinstance(n, int)
              and isinstance(aicc.element_type_of(op.input), Float32Type)
              and os.environ.get(CONV_PACKED_ENV, "") != "0")
    if os.environ.get(CONV_PACKED_1X1_ENV) in PACKED_1X1_RULES:
        packed_1x1 = os.environ[CONV_PACKED_1X1_ENV]
    mode = choose_conv_lowering(n if isinstance(n, int) else 1, c, oc, op.groups.value.data,
                                (oh, ow), (kh, kw), strides, packed=kernel,
                                winograd_bits=vector_bits if kernel and winograd_applies(op)
                                and os.environ.get(CONV_WINOGRAD_ENV, "") != "0" else 0,
                                packed_1x1=packed_1x1, winograd4_min_tiles=winograd4_min_tiles)
    if mode == "packed" and (kh, kw) == (1, 1) and os.environ.get(CONV_PACKED_1X1_ENV) == "0":
        mode = "matmul" if strides == (1, 1) else "im2col"
    return mode


def _channel_bias(conv: aicc_nn.Conv2dOp) -> tuple[aicc.AddOp, SSAValue] | None:
    """conv(x, W) + b, with b one value per output channel (or one for all) and the add the
    conv's only use, in the same block: (the add, b). The bias then starts the accumulator."""
    if not conv.result.has_one_use():
        return None
    add = conv.result.first_use.operation
    if not isinstance(add, aicc.AddOp) or add.parent_block() is not conv.parent_block():
        return None
    if add.result.type != conv.result.type:
        return None
    bias = add.rhs if add.lhs is conv.result else add.lhs
    shape = aicc.shape_of(bias)
    oc = aicc.shape_of(conv.result)[1]
    full = (1,) * (4 - len(shape)) + tuple(shape)
    if (bias is conv.result or len(shape) > 4 or any(d != 1 for i, d in enumerate(full) if i != 1)
            or full[1] not in (1, oc)):
        return None
    return add, bias


def _accumulator(rewriter: PatternRewriter, op: Operation, out_t: TensorType, bias: SSAValue | None,
                 view: tuple[int, ...]) -> SSAValue:
    """The conv's accumulator: zeros, or the per-channel bias broadcast into it, viewed as
    `view` (the channel dims of the output, aligned right; 1 where it broadcasts)."""
    if bias is None:
        return filled_tensor(rewriter, op, out_t, 0.0)
    out_shape = out_t.get_shape()
    if math.prod(aicc.shape_of(bias)) == 1:
        view = (1,) * len(view)
    b = reshape(rewriter, bias, view)
    copy = build_generic([b], [empty_tensor(rewriter, out_t)],
                         [broadcast_map(view, out_shape), AffineMap.identity(len(out_shape))],
                         [PARALLEL] * len(out_shape), lambda bld, a: [a[0]], [out_t])
    return insert_result(rewriter, copy)


def _mac(b: Builder, a) -> list[SSAValue]:
    """acc + x * w: the body of the conv generics (the matmul form that match_matmul knows)."""
    return [insert_result(b, arith.AddfOp(a[2], insert_result(b, arith.MulfOp(a[0], a[1]))))]


def lower_conv2d(op: aicc_nn.Conv2dOp, bias: SSAValue | None, mode: str,
                 rewriter: PatternRewriter, vector_bits: int = 0) -> SSAValue:
    """The linalg form of conv2d(op) [+ bias], inserted at the rewriter's point; returns the
    (N, OC, OH, OW) result. `vector_bits`: the target's vector width (for "winograd4")."""
    if mode in WINOGRAD_TILES:
        return lower_winograd(op, bias, rewriter, mode, vector_bits)
    n, c, h, w = aicc.shape_of(op.input)
    oc, icg, kh, kw = aicc.shape_of(op.weight)
    _, _, oh, ow = aicc.shape_of(op.result)
    g = op.groups.value.data
    ocg = oc // g
    (sh, sw), (dh, dw) = aicc_nn.int_values(op.strides), aicc_nn.int_values(op.dilations)
    elem = aicc.element_type_of(op.input)
    flat = (mode == "packed" and (kh, kw) == (1, 1) and (sh, sw) == (1, 1) and g == 1
            and (h, w) == (oh, ow))
    if flat:  # a 1x1 conv: the image as one row, so that the kernel's columns span rows
        h, w, oh, ow = 1, h * w, 1, oh * ow
    x = reshape(rewriter, op.input, (n, g, icg, h, w))
    if mode in ("direct", "packed"):
        wt = reshape(rewriter, op.weight, (g, ocg, icg, kh, kw))
        out_t = aicc.tensor_type(elem, (n, g, ocg, oh, ow))
        acc = _accumulator(rewriter, op, out_t, bias, (g, ocg, 1, 1))
        # loops: 0 n, 1 g, 2 oc, 3 oh, 4 ow, 5 ic, 6 kh, 7 kw
        maps = [
            AffineMap(8, 0, (_d(0), _d(1), _d(5), _d(3) * sh + _d(6) * dh, _d(4) * sw + _d(7) * dw)),
            AffineMap(8, 0, (_d(1), _d(2), _d(5), _d(6), _d(7))),
            AffineMap(8, 0, (_d(0), _d(1), _d(2), _d(3), _d(4))),
        ]
        generic = build_generic([x, wt], [acc], maps, [PARALLEL] * 5 + [REDUCTION] * 3, _mac, [out_t])
        if mode == "packed":  # for the target's blocked kernel (cpu: tile-conv)
            generic.attributes[CONV_LOWERING_ATTR] = StringAttr(mode)
            if CONV_SCHEDULE_ATTR in op.attributes:
                generic.attributes[CONV_SCHEDULE_ATTR] = op.attributes[CONV_SCHEDULE_ATTR]
        return reshape(rewriter, insert_result(rewriter, generic), aicc.shape_of(op.result))
    k, p = icg * kh * kw, oh * ow
    if mode == "matmul":  # 1x1, stride 1: the input is the matrix
        col = x
    else:
        # im2col: col[n, g, ic, kh, kw, oh, ow] = x[n, g, ic, oh*sh + kh*dh, ow*sw + kw*dw]
        col_t = aicc.tensor_type(elem, (n, g, icg, kh, kw, oh, ow))
        read = AffineMap(7, 0, (_d(0), _d(1), _d(2), _d(5) * sh + _d(3) * dh, _d(6) * sw + _d(4) * dw))
        col = insert_result(rewriter, build_generic(
            [x], [empty_tensor(rewriter, col_t)], [read, AffineMap.identity(7)], [PARALLEL] * 7,
            lambda b, a: [a[0]], [col_t]))
    # out[n, g] (OC/G x OH*OW) = W[g] (OC/G x K) @ col[n, g] (K x OH*OW); without groups the
    # g dims are dropped, so the weight is a plain matrix broadcast over the batch.
    grouped = g > 1
    gs = (g,) if grouped else ()
    col = reshape(rewriter, col, (n, *gs, k, p))
    wt = reshape(rewriter, op.weight, (*gs, ocg, k))
    nb = 1 + grouped  # loops: batch (n [, g]), m, n, k
    bat = [_d(i) for i in range(nb)]
    dm, dn, dk = _d(nb), _d(nb + 1), _d(nb + 2)
    out_t = aicc.tensor_type(elem, (n, *gs, ocg, p))
    acc = _accumulator(rewriter, op, out_t, bias, (*gs, ocg, 1))
    maps = [AffineMap(nb + 3, 0, (*bat[1:], dm, dk)), AffineMap(nb + 3, 0, (*bat, dk, dn)),
            AffineMap(nb + 3, 0, (*bat, dm, dn))]
    generic = build_generic([wt, col], [acc], maps, [PARALLEL] * (nb + 2) + [REDUCTION], _mac, [out_t])
    generic.attributes[CONV_LOWERING_ATTR] = StringAttr(mode)  # for choose-schedule
    return reshape(rewriter, insert_result(rewriter, generic), (n, oc, oh, ow))


@dataclass
class LowerConv2d(RewritePattern):
    """conv2d (but one that LowerConv2dBias lowers with its bias add, when `with_bias`),
    lowered as `conv_lowering` says."""

    lowering: str = ""  # the pass option: direct, im2col, matmul, packed, or "" (auto)
    with_bias: bool = True
    packed: bool = False  # the target has the packed kernel (see choose_conv_lowering)
    vector_bits: int = 0  # its vector width, for Winograd (0: never)
    packed_1x1: str = "all"  # the packed kernel's rules kept for unstrided 1x1 convs
    winograd4_min_tiles: int = WINOGRAD4_MIN_TILES  # F(4x4, 3x3) from this many 4x4 tiles

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.Conv2dOp, rewriter: PatternRewriter) -> None:
        if self.with_bias and _channel_bias(op) is not None:
            return  # lowered with its add
        mode = conv_lowering(op, self.lowering, self.packed, self.vector_bits, self.packed_1x1,
                             self.winograd4_min_tiles)
        rewriter.replace(op, [], [lower_conv2d(op, None, mode, rewriter, self.vector_bits)])


@dataclass
class LowerConv2dBias(RewritePattern):
    """conv2d(x, W) + b with a per-channel b: one lowering whose accumulator starts at b (so
    the add is no separate pass), inserted at the add, where b is defined. Runs before the
    elementwise patterns, which would otherwise lower the add alone."""

    lowering: str = ""
    packed: bool = False
    vector_bits: int = 0
    packed_1x1: str = "all"
    winograd4_min_tiles: int = WINOGRAD4_MIN_TILES

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.AddOp, rewriter: PatternRewriter) -> None:
        for v in (op.lhs, op.rhs):
            conv = v.owner
            if isinstance(conv, aicc_nn.Conv2dOp) and (found := _channel_bias(conv)) and found[0] is op:
                mode = conv_lowering(conv, self.lowering, self.packed, self.vector_bits,
                                     self.packed_1x1, self.winograd4_min_tiles)
                out = lower_conv2d(conv, found[1], mode, rewriter, self.vector_bits)
                rewriter.replace(op, [], [out])
                rewriter.erase(conv)
                return


class LowerPool2d(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.Pool2dOp, rewriter: PatternRewriter) -> None:
        (kh, kw), (sh, sw), (dh, dw) = (aicc_nn.int_values(a) for a in (op.kernel, op.strides, op.dilations))
        is_max = op.kind.data == "max"
        acc = filled_tensor(rewriter, op, op.result.type, -math.inf if is_max else 0.0)
        # A (KH, KW) operand gives the kernel loops their ranges; its values are unused.
        window = aicc.ConstantOp.from_array(np.zeros((kh, kw), dtype=np.float32))
        rewriter.insert(window)
        # loops: 0 n, 1 c, 2 oh, 3 ow, 4 kh, 5 kw
        maps = [
            AffineMap(6, 0, (_d(0), _d(1), _d(2) * sh + _d(4) * dh, _d(3) * sw + _d(5) * dw)),
            AffineMap(6, 0, (_d(4), _d(5))),
            AffineMap(6, 0, (_d(0), _d(1), _d(2), _d(3))),
        ]
        combiner = arith.MaximumfOp if is_max else arith.AddfOp
        generic = build_generic(
            [op.input, window.result], [acc], maps, [PARALLEL] * 4 + [REDUCTION] * 2,
            lambda b, a: [insert_result(b, combiner(a[2], a[0]))], [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerConcat(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.ConcatOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        res_t = op.result.type
        rank = len(aicc.shape_of(op.result))
        acc = empty_tensor(rewriter, res_t)
        offset = 0
        for v in op.inputs:
            size = aicc.shape_of(v)[axis]
            if size:
                out_map = AffineMap(rank, 0, tuple(
                    plus(_d(i), offset) if i == axis else _d(i) for i in range(rank)))
                generic = build_generic(
                    [v], [acc], [AffineMap.identity(rank), out_map], [PARALLEL] * rank,
                    lambda b, a: [a[0]], [res_t],
                )
                rewriter.insert(generic)
                acc = generic.results[0]
            offset += size
        rewriter.replace(op, [], [acc])


class LowerSlice(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.SliceOp, rewriter: PatternRewriter) -> None:
        starts, steps = aicc_nn.int_values(op.starts), aicc_nn.int_values(op.steps)
        rank = len(starts)
        exprs = []
        for i, (s, st) in enumerate(zip(starts, steps)):
            exprs.append(plus(_d(i) * st if st != 1 else _d(i), s))
        init = empty_tensor(rewriter, op.result.type)

        generic = build_generic(
            [op.input], [init], [AffineMap(rank, 0, tuple(exprs)), AffineMap.identity(rank)],
            [PARALLEL] * rank, lambda b, a: [a[0]], [op.result.type],
        )
        rewriter.replace(op, generic)


# The longest axis gathered by a select-reduction (O(axis) work per element, but fusable).
GATHER_SELECT_MAX = 16


class LowerGather(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.GatherOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        dshape, ishape = aicc.shape_of(op.data), aicc.shape_of(op.indices)
        size = dshape[axis]
        if size > GATHER_SELECT_MAX:
            _replace_by_loads(rewriter, op, aicc_fused.GatherOp)
            return
        iota, iota_neg = _iotas(rewriter, size, aicc.element_type_of(op.indices))
        rank_out = len(dshape) - 1 + len(ishape)
        k = _d(rank_out)  # the reduction loop over the gathered axis
        n_loops = rank_out + 1
        data_map = AffineMap(n_loops, 0, (
            *(_d(i) for i in range(axis)), k,
            *(_d(axis + len(ishape) + j) for j in range(len(dshape) - axis - 1)),
        ))
        idx_map = AffineMap(n_loops, 0, tuple(_d(axis + j) for j in range(len(ishape))) or ())
        k_map = AffineMap(n_loops, 0, (k,))
        out_map = AffineMap(n_loops, 0, tuple(_d(i) for i in range(rank_out)))
        acc = filled_tensor(rewriter, op, op.result.type, 0.0)
        generic = build_generic(
            [op.data, op.indices, iota, iota_neg], [acc],
            [data_map, idx_map, k_map, k_map, out_map],
            [PARALLEL] * rank_out + [REDUCTION], _select_matching, [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerGatherElements(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.GatherElementsOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        size = aicc.shape_of(op.data)[axis]
        if size > GATHER_SELECT_MAX:
            _replace_by_loads(rewriter, op, aicc_fused.GatherElementsOp)
            return
        rank = len(aicc.shape_of(op.result))
        iota, iota_neg = _iotas(rewriter, size, aicc.element_type_of(op.indices))
        k = _d(rank)  # the reduction loop over the data's axis
        # Off the axis the data is read at the result's index; `+ 0` keeps its (possibly larger)
        # dims from setting the loop ranges, which the indices and the result give.
        data_map = AffineMap(rank + 1, 0, tuple(k if i == axis else plus(_d(i), 0) for i in range(rank)))
        res_map = AffineMap(rank + 1, 0, tuple(_d(i) for i in range(rank)))
        k_map = AffineMap(rank + 1, 0, (k,))
        acc = filled_tensor(rewriter, op, op.result.type, 0.0)
        generic = build_generic(
            [op.data, op.indices, iota, iota_neg], [acc], [data_map, res_map, k_map, k_map, res_map],
            [PARALLEL] * rank + [REDUCTION], _select_matching, [op.result.type],
        )
        rewriter.replace(op, generic)


def _replace_by_loads(rewriter: PatternRewriter, op: aicc_nn.GatherOp | aicc_nn.GatherElementsOp,
                      cls: type[aicc_fused.GatherOp | aicc_fused.GatherElementsOp]) -> None:
    init = empty_tensor(rewriter, op.result.type)
    rewriter.replace(op, cls([op.data, op.indices], [init], [op.result.type],
                             cls.make_attributes(op.axis.value.data)))


def _iotas(rewriter: PatternRewriter, size: int, elem) -> tuple[SSAValue, SSAValue]:
    """Constants [0, size) and [-size, 0) of the index type."""
    dt = aicc.numpy_dtype(elem)
    ops = [aicc.ConstantOp.from_array(np.arange(size, dtype=dt)),
           aicc.ConstantOp.from_array(np.arange(size, dtype=dt) - size)]
    rewriter.insert(ops)
    return ops[0].result, ops[1].result


def _select_matching(b: Builder, a):
    """data where index == k or index == k - size, else the accumulator."""
    data, idx, kk, kneg, out = a
    hit = insert_result(b, arith.OrIOp(insert_result(b, arith.CmpiOp(idx, kk, "eq")),
                                       insert_result(b, arith.CmpiOp(idx, kneg, "eq"))))
    return [insert_result(b, arith.SelectOp(hit, data, out))]


class LowerArgReduce(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.ArgReduceOp, rewriter: PatternRewriter) -> None:
        axis, last = op.axis.value.data, op.last
        shape = aicc.shape_of(op.input)
        rank, size = len(shape), shape[axis]
        cls = aicc.ReduceMaxOp if isinstance(op, aicc_nn.ArgMaxOp) else aicc.ReduceMinOp
        extreme = cls(op.input, [axis], keepdims=True)
        iota = aicc.ConstantOp.from_array(np.arange(size, dtype=np.int64))
        rewriter.insert([extreme, iota])
        acc = filled_tensor(rewriter, op, op.result.type, -1 if last else size)
        is_float = isinstance(aicc.element_type_of(op.input), AnyFloat)
        in_map = AffineMap.identity(rank)
        ext_map = AffineMap(rank, 0, tuple(AffineConstantExpr(0) if i == axis else _d(i) for i in range(rank)))
        out_map = AffineMap(rank, 0, tuple(
            AffineConstantExpr(0) if i == axis else _d(i) for i in range(rank) if op.keep or i != axis))

        def body(b: Builder, a):
            x, m, k, out = a
            if is_float:  # x == extreme, or x is NaN (then so is the extreme, as in np.argmax)
                hit = insert_result(b, arith.OrIOp(insert_result(b, arith.CmpfOp(x, m, "oeq")),
                                                   insert_result(b, arith.CmpfOp(x, x, "uno"))))
            else:
                hit = insert_result(b, arith.CmpiOp(x, m, "eq"))
            # a min (max) reduction of k or the neutral sentinel, which LLVM vectorizes
            cand = insert_result(b, arith.SelectOp(hit, k, scalar_constant(b, -1 if last else size, i64)))
            return [insert_result(b, (arith.MaxSIOp if last else arith.MinSIOp)(out, cand))]

        generic = build_generic(
            [op.input, extreme.result, iota.result], [acc],
            [in_map, ext_map, AffineMap(rank, 0, (_d(axis),)), out_map],
            [REDUCTION if i == axis else PARALLEL for i in range(rank)], body, [op.result.type],
        )
        rewriter.replace(op, generic)


class LowerCumSum(RewritePattern):
    """Round k adds y shifted by k along the axis: out[i] = y[i] + y[i - k] for i >= k and
    out[i] = y[i] below (reversed: y[i + k], for i < n - k), each part one generic whose axis
    loop runs over a run of positions at an offset."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.CumSumOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        shape = aicc.shape_of(op.input)
        rank, n = len(shape), shape[axis]
        res_t = op.result.type
        reverse = op.reverse.value.data
        add = arith.AddfOp if isinstance(aicc.element_type_of(op.input), AnyFloat) else arith.AddiOp

        def part(acc, length: int, out_at: int, reads: list[tuple[SSAValue, int]]):
            """out[out_at + d] = sum of v[at + d] over reads, for d < length along the axis."""
            span = aicc.ConstantOp.from_array(np.zeros(length, dtype=np.bool_))
            rewriter.insert(span)

            def axis_map(offset: int) -> AffineMap:
                return AffineMap(rank, 0, tuple(plus(_d(i), offset) if i == axis else _d(i) for i in range(rank)))

            def body(b: Builder, a):
                total = a[0]
                for v in a[1:len(reads)]:
                    total = insert_result(b, add(total, v))
                return [total]

            generic = build_generic(
                [v for v, _ in reads] + [span.result], [acc],
                [axis_map(at) for _, at in reads] + [AffineMap(rank, 0, (_d(axis),)), axis_map(out_at)],
                [PARALLEL] * rank, body, [res_t],
            )
            rewriter.insert(generic)
            return generic.results[0]

        y = op.input
        k = 1
        while k < n:
            acc = empty_tensor(rewriter, res_t)
            if reverse:
                acc = part(acc, n - k, 0, [(y, 0), (y, k)])
                y = part(acc, k, n - k, [(y, n - k)])
            else:
                acc = part(acc, n - k, k, [(y, k), (y, 0)])
                y = part(acc, k, 0, [(y, 0)])
            k *= 2
        if op.exclusive.value.data:  # shifted by one more, a zero at the start (end)
            acc = filled_tensor(rewriter, op, res_t, 0)
            if n > 1:
                acc = part(acc, n - 1, 0, [(y, 1)]) if reverse else part(acc, n - 1, 1, [(y, 0)])
            y = acc
        rewriter.replace(op, [], [y])


MAX_PIECES = 32


@dataclass
class _Piece:
    start: int  # the first output position
    period: int  # output positions start + period * i, i < length
    length: int
    taps: list[tuple[int, int, float]]  # (first input index, step, weight)


def _rows(idx: np.ndarray, w: np.ndarray | None) -> list[tuple[tuple[int, float], ...]]:
    """Per output position, its (index, weight) taps; taps of weight 0 are dropped."""
    if w is None:
        return [((int(i), 1.0),) for i in idx[:, 0]]
    return [tuple((int(i), float(x)) for i, x in zip(ir, wr) if x != 0.0) for ir, wr in zip(idx, w)]


def _pieces(rows, period: int, limit: int) -> list[_Piece] | None:
    """Split the output positions into pieces for `period`; None beyond `limit` pieces."""
    out: list[_Piece] = []
    for r in range(min(period, len(rows))):
        seq = range(r, len(rows), period)
        j = 0
        while j < len(seq):
            first = rows[seq[j]]
            weights = [x for _, x in first]
            steps = None
            k = j + 1
            while k < len(seq):
                row, prev = rows[seq[k]], rows[seq[k - 1]]
                if len(row) != len(first) or [x for _, x in row] != weights:
                    break
                st = [a[0] - b[0] for a, b in zip(row, prev)]
                if steps is not None and st != steps:
                    break
                steps = st
                k += 1
            steps = steps or [0] * len(first)
            out.append(_Piece(seq[j], period, k - j, [(i, q, x) for (i, x), q in zip(first, steps)]))
            if len(out) > limit:
                return None
            j = k
    return out


def resample_pieces(idx: np.ndarray, w: np.ndarray | None, in_size: int) -> list[_Piece] | None:
    """The fewest pieces over a few candidate periods (1..8 and the period of the size ratio)."""
    rows = _rows(idx, w)
    n = len(rows)
    natural = n // math.gcd(n, in_size)
    best = None
    for period in sorted({*range(1, 9), natural, 2 * natural}):
        if period > n:
            continue
        got = _pieces(rows, period, MAX_PIECES if best is None else min(MAX_PIECES, len(best) - 1))
        if got is not None and (best is None or len(got) < len(best)):
            best = got
    return best


class LowerResample(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.ResampleOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        shape = aicc.shape_of(op.input)
        idx, w = op.tables()
        pieces = resample_pieces(idx, w, shape[axis])
        if pieces is None:
            self.by_gathers(op, rewriter, idx, w)
            return
        rank = len(shape)
        res_t = op.result.type
        elem = aicc.element_type_of(op.input)
        acc = empty_tensor(rewriter, res_t)
        for piece in pieces:
            # A bool operand of the piece's length gives the axis loop its range.
            span = aicc.ConstantOp.from_array(np.zeros(piece.length, dtype=np.bool_))
            rewriter.insert(span)
            d = _d(axis)

            def at(first: int, step: int) -> AffineExpr:
                if step == 0:
                    return AffineConstantExpr(first)
                return plus(d * step if step != 1 else d, first)

            def axis_map(e: AffineExpr) -> AffineMap:
                return AffineMap(rank, 0, tuple(e if i == axis else _d(i) for i in range(rank)))

            maps = [axis_map(at(i, q)) for i, q, _ in piece.taps]
            maps += [AffineMap(rank, 0, (d,)), axis_map(at(piece.start, piece.period))]
            weights = [x for _, _, x in piece.taps]

            def body(b: Builder, a, weights=weights):
                if not weights:
                    return [scalar_constant(b, 0, elem)]
                total = None
                for v, x in zip(a, weights):
                    if w is not None and x != 1.0:
                        v = insert_result(b, arith.MulfOp(v, scalar_constant(b, x, elem)))
                    total = v if total is None else insert_result(b, arith.AddfOp(total, v))
                return [total]

            generic = build_generic(
                [op.input] * len(piece.taps) + [span.result], [acc], maps, [PARALLEL] * rank, body, [res_t],
            )
            rewriter.insert(generic)
            acc = generic.results[0]
        rewriter.replace(op, [], [acc])

    @staticmethod
    def by_gathers(op: aicc_nn.ResampleOp, rewriter: PatternRewriter, idx: np.ndarray, w: np.ndarray | None):
        """sum over taps t of select(w_t != 0, w_t * gather(input, indices_t), 0)."""
        axis = op.axis.value.data
        rank = len(aicc.shape_of(op.input))
        dt = aicc.numpy_dtype(aicc.element_type_of(op.input))
        new, total = [], None

        def emit(o):
            new.append(o)
            return o.results[0]

        along = (-1,) + (1,) * (rank - 1 - axis)  # a per-output-position table, broadcast
        for t in range(idx.shape[1]):
            g = emit(aicc_nn.GatherOp(op.input, emit(aicc.ConstantOp.from_array(idx[:, t].copy())), axis))
            if w is not None:
                wt = emit(aicc.ConstantOp.from_array(w[:, t].astype(dt).reshape(along)))
                g = emit(aicc.MulOp(g, wt))
                if np.any(w[:, t] == 0):
                    keep = emit(aicc.ConstantOp.from_array((w[:, t] != 0).reshape(along)))
                    g = emit(aicc.SelectOp(keep, g, emit(aicc.ConstantOp.from_array(np.zeros((), dt)))))
            total = g if total is None else emit(aicc.AddOp(total, g))
        rewriter.insert(new)
        rewriter.replace(op, [], [total])


class LowerConvTranspose2d(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.ConvTranspose2dOp, rewriter: PatternRewriter) -> None:
        n, c, *in_hw = aicc.shape_of(op.input)
        _, ocg, kh, kw = aicc.shape_of(op.weight)
        _, oc, *out_hw = aicc.shape_of(op.result)
        g = op.groups.value.data
        strides, dils, pads = (aicc_nn.int_values(a) for a in (op.strides, op.dilations, op.pads))
        elem = aicc.element_type_of(op.input)
        new: list = []

        def emit(o):
            new.append(o)
            return o.results[0]

        # Per spatial dim: which input rows land in the scattered buffer of length
        # out + d*(k-1), and at what offset (rows before `first` or from `last` fall outside).
        starts, counts, offsets, lengths = [0, 0], [n, c], [0, 0], [n, c]
        for size, k, s, d, p, o in zip(in_hw, (kh, kw), strides, dils, pads, out_hw):
            length = o + d * (k - 1)
            lo = d * (k - 1) - p  # where input row 0 goes
            first = max(0, -(-(-lo) // s))
            last = min(size, -(-(length - lo) // s))  # rows with h*s + lo < length
            starts.append(first)
            counts.append(last - first)
            offsets.append(first * s + lo)
            lengths.append(length)
        if min(counts) <= 0:  # no input lands in the result
            zeros = np.zeros(aicc.shape_of(op.result), dtype=aicc.numpy_dtype(elem))
            rewriter.replace(op, aicc.ConstantOp.from_array(zeros))
            return
        x = op.input
        if counts[2:] != list(in_hw):
            x = emit(aicc_nn.SliceOp(x, starts, [1, 1, 1, 1], counts))
        buf_t = TensorType(elem, lengths)
        rewriter.insert(new)
        new.clear()
        acc = filled_tensor(rewriter, op, buf_t, 0.0)
        out_map = AffineMap(4, 0, (_d(0), _d(1), *(plus(_d(2 + i) * strides[i], offsets[2 + i]) for i in range(2))))
        scatter = build_generic([x], [acc], [AffineMap.identity(4), out_map], [PARALLEL] * 4,
                                lambda b, a: [a[0]], [buf_t])
        rewriter.insert(scatter)
        # weight (C, OC/g, KH, KW) -> (OC, C/g, KH, KW), flipped in KH and KW
        cg = c // g
        wt = emit(aicc.ReshapeOp(op.weight, (g, cg, ocg, kh, kw)))
        wt = emit(aicc.TransposeOp(wt, (0, 2, 1, 3, 4)))
        wt = emit(aicc.ReshapeOp(wt, (oc, cg, kh, kw)))
        wt = emit(aicc_nn.SliceOp(wt, [0, 0, kh - 1, kw - 1], [1, 1, -1, -1], [oc, cg, kh, kw]))
        rewriter.insert(new)
        rewriter.replace(op, aicc_nn.Conv2dOp(scatter.results[0], wt, (1, 1), dils, g))


def nn_patterns(conv_lowering: str = "", conv_bias: bool = True,
                conv_packed: bool = False, conv_vector_bits: int = 0,
                conv_packed_1x1: str = "all",
                conv_winograd4_min_tiles: int = WINOGRAD4_MIN_TILES) -> list[RewritePattern]:
    """The NN lowerings, but for LowerConv2dBias (used when `conv_bias`), which goes before
    the elementwise ones."""
    return [LowerConvTranspose2d(), LowerResample(), LowerPad(),
            LowerConv2d(conv_lowering, conv_bias, conv_packed, conv_vector_bits, conv_packed_1x1,
                        conv_winograd4_min_tiles),
            LowerPool2d(), LowerConcat(), LowerSlice(), LowerGather(),
            LowerGatherElements(), LowerArgReduce(), LowerCumSum()]
