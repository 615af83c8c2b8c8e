"""The "winograd" and "winograd4" lowerings of a 3x3 stride-1 conv2d: Winograd's minimal
filtering F(2x2, 3x3) and F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
Neural Networks", 2016), as linalg on tensors.

The output is cut into m x m tiles (m = 2 or 4); tile (ty, tx) of every output channel needs
the (m+2) x (m+2) window d of the (already padded) input at rows m*ty.., columns m*tx... A
tile is At [ sum_c (G g[k, c] Gt) * (Bt d[c] B) ] A: (m+2)^2 products per tile and channel
pair where the direct conv takes 9 m^2, 2.25x fewer for m = 2 and 4x fewer for m = 4. For
F(2x2, 3x3)

    Bt = [1  0 -1  0]     G = [1    0    0 ]     At = [1  1  1  0]
         [0  1  1  0]         [1/2  1/2  1/2]          [0  1 -1 -1]
         [0 -1  1  0]         [1/2 -1/2  1/2]
         [0  1  0 -1]         [0    0    1 ]

and for F(4x4, 3x3) the 6x6, 6x3 and 4x6 matrices BT4, G4 and AT4 below (interpolation
points 0, 1, -1, 2, -2 and infinity). Both lowerings emit

  * the weight transform at compile time: U[a, b] = (G g Gt)[a, b], (m+2)^2 constant (OC, IC)
    matrices (the weight must be a constant);
  * the input transform (below) into V[ab, n, c, ty, tx], one (m+2)^2 x N x C x TH x TW tensor;
  * one matmul M[ab, n] (OC x T) = U[ab] (OC x IC) @ V[ab, n] (IC x T), T = the tiles of an
    image, batched over the (m+2)^2 (a, b) and the images: a matmul generic that
    choose-schedule and tile-matmul take like a 1x1 conv's (marked aicc.conv_lowering =
    "winograd" or "winograd4"; the constant U is packed at compile time), whose batch entries
    the threads share (as 16 or 36 matmuls of their own, each too small to split, they ran
    on one thread: resnet18 at 2 threads, Sapphire Rapids-class Xeon, 13.7 -> 11.8 ms);
  * the output transform (below) into the planes P[r, s] (one per position of a tile) of one
    (m, m, N, OC, TH, TW) tensor, then one copy generic interleaving the planes into the
    output viewed as (N, OC, TH, m, TW, m).

The transforms stream all (m+2)^2 slices of V or M at once, one slice N x C x T (or N x OC x T)
apart; where that is a multiple of 4 KiB (64 channels at 32x32: 64 tiles, 16 KiB) every
stream falls in the same L1 set and they evict each other (as separate buffers, plan-memory
staggered them). So each slice gets a few rows more than its channels (`stagger_rows`): M's
extra rows are products of zero rows of U that nothing reads (`d + 0` in the output
transform's maps, the range read from the planes), V's (F(4x4) only: F(2x2)'s input
transform writes each slice with a generic of its own) are zeros written before the
transform, times zero columns of U.

F(2x2, 3x3) transforms with one generic per matrix element: V[ab] = the sum of the 4 input
elements x[n, c, 2ty + i, 2tx + j] with Bt[a, i] * Bt[b, j] = +-1 (the maps read the input in
place, stride 2), and P[r, s] = bias + the sum of +-M_ab over the 9 (a, b) with At[r, a] *
At[s, b] != 0, written into its slice of the planes (offset output maps, as concat's).
F(4x4, 3x3)'s products have 16 and 25 terms, so its transforms are factored, each one generic
with many results: the input transform reads the 36 elements of a tile's window and yields
the 36 V_ab (Bt d, then (Bt d) B), copied into their slices of V; the output transform reads
the 36 M_ab and yields the 16 P[r, s] (At M, then (At M) A), copied into their slices of the
planes (forward-copies, after bufferize, has the transforms write there themselves). Its input transform
reads the input at stride 4, which LLVM's cost model leaves scalar without gathers; where
that was measured to pay (WINOGRAD4_VECTORIZE_TILES) it is marked `aicc.vectorize` so that
LLVM vectorizes it 4 lanes wide all the same. An output whose height or width
is not a multiple of 4 is computed on the input padded with zeros to whole tiles, and the
extra rows and columns dropped.

Every generic is plain linalg, so the pipeline stays printable and any target runs it. It is
asked for per op (`aicc.conv_lowering = "winograd"` or `"winograd4"`), per compile
(`tensor-to-linalg{conv-lowering=winograd4}`, AICC_CONV_LOWERING=winograd4), or picked by the
heuristic where it was measured to beat the packed direct kernel (conv_lowering.py,
`winograd_wins`, `winograd_tile`).

The arithmetic differs from the direct sum by rounding only. F(2x2, 3x3)'s transforms add and
subtract (and halve) f32 values, so the error stays within a few units of the sum's
magnitude in the last place; F(4x4, 3x3)'s multiply by up to 25 (input) and 64 (output) and
divide by up to 576 (weight), which costs about 3 more bits (relative error about 1e-5 of
the output's magnitude; both checked against torch in float64 in tests/test_winograd.py).
"""

from __future__ import annotations

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc import VECTORIZE_ATTR, dense_from_numpy, numpy_from_dense
from compiler.lowering.conv_lowering import CONV_LOWERING_ATTR
from compiler.lowering.utils import (
    PARALLEL,
    REDUCTION,
    build_generic,
    constant_source,
    empty_tensor,
    filled_tensor,
    insert_result,
    plus,
    reshape,
)

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


# F(4x4, 3x3): interpolation points 0, 1, -1, 2, -2 and infinity
BT4 = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
G4 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64)
AT4 = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], np.float64)
# F(4x4, 3x3)'s input transform reads at stride 4, which LLVM leaves scalar without gathers;
# asked to, it vectorizes it with 4 lanes (a 4x4 transpose deinterleaves 4 tiles' columns,
# with SSE/AVX shuffles on any x86), but needs a scalar epilogue of up to 4 tiles a row (the
# window's last 2 columns are a group with gaps). Measured on a Zen 4 at one thread, one conv
# + ReLU, the same process alternately, scalar time / vectorized time, AVX-512 / AVX2 code:
# 10 tiles a row (40x40) 1.24/1.22, 12 (48x48) 1.16/1.13, 14 (56x56) 1.22/1.17, 16 (64x64)
# 1.06; but 8 (32x32) 0.70/0.74, 28 (112x112) 0.89/1.00. So 4 lanes, from 10 to 16 tiles a row.
WINOGRAD4_VECTORIZE_LANES = 4
WINOGRAD4_VECTORIZE_TILES = (10, 16)
# the lowering's name -> its tile m and (Bt, G, At)
WINOGRAD_TILES = {"winograd": (2, (BT, G, AT)), "winograd4": (4, (BT4, G4, AT4))}


def stagger_rows(slices: int, row_bytes: int, rows: int) -> int:
    """Rows to add to each of `slices` slices of `rows` rows of `row_bytes` bytes laid out
    one after another, so that the slices start on different L1 sets (a 4 KiB period): the
    transforms stream all of them at once, and slices a multiple of 4 KiB apart would evict
    each other's lines (F(4x4, 3x3) of 64 channels at 32x32: 64 tiles, 16 KiB slices)."""
    def spread(r: int) -> int:
        return len({(i * r * row_bytes) % 4096 // 64 for i in range(slices)})
    want = min(slices, 4096 // 64) // 2  # at most 2 slices a set
    return max(range(16), key=lambda e: (min(spread(rows + e), want), -e))


def _d(i: int) -> AffineDimExpr:
    return AffineDimExpr(i)


def constant_weight(v: SSAValue) -> np.ndarray | None:
    """The value of a constant (through reshapes), or None."""
    op = constant_source(v)
    return None if op is None else numpy_from_dense(op.value)


def winograd_applies(op: aicc_nn.Conv2dOp) -> bool:
    """F(2x2, 3x3) and F(4x4, 3x3) take this conv: 3x3, stride 1, no dilation, one group, an
    even output height and width, a static batch and a constant f32 weight."""
    n, _, _, _ = aicc.shape_of(op.input)
    oc, _, kh, kw = aicc.shape_of(op.weight)
    _, _, oh, ow = aicc.shape_of(op.result)
    return (isinstance(n, int) and (kh, kw) == (3, 3) and op.groups.value.data == 1
            and tuple(aicc_nn.int_values(op.strides)) == (1, 1)
            and tuple(aicc_nn.int_values(op.dilations)) == (1, 1)
            and isinstance(oh, int) and isinstance(ow, int) and oh % 2 == 0 and ow % 2 == 0
            and aicc.element_type_of(op.input) == aicc.element_type_of(op.weight)
            and str(aicc.element_type_of(op.input)) == "f32"
            and constant_source(op.weight) is not None)


def _constant(rewriter: PatternRewriter, array: np.ndarray) -> SSAValue:
    return insert_result(rewriter, arith.ConstantOp(dense_from_numpy(array)))


def _identity_copy(bld: Builder, args):
    return [args[0]]


def _combine(bld: Builder, coeffs, values, consts: dict | None = None,
             first: SSAValue | None = None) -> SSAValue:
    """first + the sum of coeffs[i] * values[i] over the nonzero coefficients: adds and
    subtracts where a coefficient is +-1, else a multiply by a constant first (one
    arith.constant per value in `consts`, the body's)."""
    acc, consts = first, {} if consts is None else consts
    for c, v in zip(coeffs, values):
        if c == 0:
            continue
        if abs(c) != 1:
            if abs(c) not in consts:
                consts[abs(c)] = insert_result(bld, arith.ConstantOp(FloatAttr(float(abs(c)), v.type)))
            v = insert_result(bld, arith.MulfOp(v, consts[abs(c)]))
        if acc is None:
            acc = v if c > 0 else insert_result(bld, arith.NegfOp(v))
        else:
            acc = insert_result(bld, arith.AddfOp(acc, v) if c > 0 else arith.SubfOp(acc, v))
    assert acc is not None
    return acc


def lower_winograd(op: aicc_nn.Conv2dOp, bias: SSAValue | None, rewriter: PatternRewriter,
                   mode: str = "winograd", vector_bits: int = 0) -> SSAValue:
    """The F(m x m, 3x3) form of conv2d(op) [+ bias], m = 2 for `mode` "winograd" and 4 for
    "winograd4" (winograd_applies(op) holds); returns the (N, OC, OH, OW) result.
    `vector_bits`: the target's vector width, for F(4x4, 3x3)'s input transform (0: left to
    LLVM's cost model)."""
    tile, (_, gm, _) = WINOGRAD_TILES[mode]
    n, c, h, w = aicc.shape_of(op.input)
    oc = aicc.shape_of(op.weight)[0]
    _, _, oh, ow = aicc.shape_of(op.result)
    th, tw = -(-oh // tile), -(-ow // tile)
    elem = aicc.element_type_of(op.input)
    g = constant_weight(op.weight).reshape(oc, c, 3, 3).astype(np.float64)
    u = np.einsum("ai,kcij,bj->abkc", gm, g, gm).astype(np.float32)  # (m+2, m+2, OC, IC)

    x = op.input
    hp, wp = tile * th + 2, tile * tw + 2
    if (hp, wp) != (h, w):  # the last tiles run past the image: zeros there
        xp_t = aicc.tensor_type(elem, (n, c, hp, wp))
        into = AffineMap(4, 0, (_d(0), _d(1), plus(_d(2), 0), plus(_d(3), 0)))
        x = insert_result(rewriter, build_generic(
            [x], [filled_tensor(rewriter, op, xp_t, 0.0)], [AffineMap.identity(4), into],
            [PARALLEL] * 4, _identity_copy, [xp_t]))

    al = tile + 2
    nab = al * al
    t = th * tw
    v_t = aicc.tensor_type(elem, (n, c, th, tw))
    if tile == 2:  # each slice of V is written by a generic of its own: no padding
        cp = c
        v = _input_transform_2(rewriter, x, v_t)
    else:  # the transform writes the 36 slices at once: staggered by zero rows (K)
        cp = c + stagger_rows(nab, n * t * 4, c)
        v = _input_transform_4(rewriter, x, v_t, cp, vector_bits)

    # one batched matmul over the (m+2)^2 (a, b) and the images:
    # M[ab, n] (OC x T) = U[ab] (OC x IC) @ V[ab, n] (IC x T)
    ocp = oc + stagger_rows(nab, n * t * 4, oc)  # rows past OC: products of zero rows, unread
    m_t = aicc.tensor_type(elem, (nab, n, ocp, t))
    # loops: 0 ab, 1 n, 2 m (oc), 3 p (tile), 4 k (ic)
    mm_maps = [AffineMap(5, 0, (_d(0), _d(2), _d(4))),
               AffineMap(5, 0, (_d(0), _d(1), _d(4), _d(3))),
               AffineMap(5, 0, (_d(0), _d(1), _d(2), _d(3)))]

    def mac(bld: Builder, args):
        prod = insert_result(bld, arith.MulfOp(args[0], args[1]))
        return [insert_result(bld, arith.AddfOp(args[2], prod))]

    up = np.zeros((nab, ocp, cp), np.float32)
    up[:, :oc, :c] = u.reshape(nab, oc, c)
    mm = build_generic([_constant(rewriter, up),
                        reshape(rewriter, v, (nab, n, cp, t))],
                       [filled_tensor(rewriter, op, m_t, 0.0)], mm_maps,
                       [PARALLEL] * 4 + [REDUCTION], mac, [m_t])
    mm.attributes[CONV_LOWERING_ATTR] = StringAttr(mode)
    ms = reshape(rewriter, insert_result(rewriter, mm), (nab, n, ocp, th, tw))

    if bias is not None:
        one = int(np.prod(aicc.shape_of(bias))) == 1
        bias = reshape(rewriter, bias, (1,) if one else (oc,))
    p_t = aicc.tensor_type(elem, (tile, tile, n, oc, th, tw))
    if tile == 2:
        planes = _output_transform_2(rewriter, ms, bias, p_t)
    else:
        planes = _output_transform_4(rewriter, ms, bias, p_t)

    # the planes interleaved into the output, viewed as (N, OC, TH, m, TW, m):
    # loops (n, k, ty, r, tx, s)
    y_t = aicc.tensor_type(elem, (n, oc, th, tile, tw, tile))
    read = AffineMap(6, 0, (_d(3), _d(5), _d(0), _d(1), _d(2), _d(4)))
    y = insert_result(rewriter, build_generic(
        [planes], [empty_tensor(rewriter, y_t)], [read, AffineMap.identity(6)],
        [PARALLEL] * 6, _identity_copy, [y_t]))
    y = reshape(rewriter, y, (n, oc, tile * th, tile * tw))
    if (tile * th, tile * tw) != (oh, ow):  # the rows and columns past the output dropped
        out_t = aicc.tensor_type(elem, (n, oc, oh, ow))
        keep = AffineMap(4, 0, (_d(0), _d(1), plus(_d(2), 0), plus(_d(3), 0)))
        y = insert_result(rewriter, build_generic(
            [y], [empty_tensor(rewriter, out_t)], [keep, AffineMap.identity(4)],
            [PARALLEL] * 4, _identity_copy, [out_t]))
    return y


def _into_slices(rewriter: PatternRewriter, parts, whole_t, lead: int = 1,
                 into: SSAValue | None = None) -> SSAValue:
    """The tensors `parts` (all of one shape) copied in order into the slices of one tensor
    of type `whole_t` (`into`, or a new one) at its first `lead` indices (forward-copies,
    after bufferize, has their producer write there itself). A dim of a slice larger than
    the part's is written from index 0."""
    shape = whole_t.get_shape()
    rank = len(shape) - lead
    whole = empty_tensor(rewriter, whole_t) if into is None else into
    part_shape = aicc.shape_of(parts[0])
    for i, p in enumerate(parts):
        at = np.unravel_index(i, shape[:lead])
        into_map = AffineMap(rank, 0, (*(AffineConstantExpr(int(j)) for j in at), *(
            _d(j) if shape[lead + j] == part_shape[j] else plus(_d(j), 0) for j in range(rank))))
        whole = insert_result(rewriter, build_generic(
            [p], [whole], [AffineMap.identity(rank), into_map], [PARALLEL] * rank,
            _identity_copy, [whole_t]))
    return whole


def _input_transform_2(rewriter: PatternRewriter, x: SSAValue, v_t) -> SSAValue:
    """F(2x2, 3x3): for each of the 16 (a, b), a generic writing V[ab, n, c, ty, tx] = the
    sum of +-x[n, c, 2ty + i, 2tx + j] over the 4 (i, j) with Bt[a, i] * Bt[b, j] != 0 into
    its slice of the (16, N, C, TH, TW) V."""
    all_t = aicc.tensor_type(v_t.element_type, (16, *v_t.get_shape()))
    v = empty_tensor(rewriter, all_t)
    for a in range(4):
        for b in range(4):
            terms = [(i, j, BT[a, i] * BT[b, j]) for i in range(4) for j in range(4)
                     if BT[a, i] * BT[b, j]]
            maps = [AffineMap(4, 0, (_d(0), _d(1), _d(2) * 2 + i, _d(3) * 2 + j))
                    for i, j, _ in terms]
            maps.append(AffineMap(4, 0, (AffineConstantExpr(4 * a + b),
                                         *(_d(i) for i in range(4)))))

            def body(bld: Builder, args, terms=terms):
                return [_combine(bld, [s for _, _, s in terms], args[:len(terms)])]

            v = insert_result(rewriter, build_generic(
                [x] * len(terms), [v], maps, [PARALLEL] * 4, body, [all_t]))
    return v


def _input_transform_4(rewriter: PatternRewriter, x: SSAValue, v_t, channels: int,
                       vector_bits: int) -> SSAValue:
    """F(4x4, 3x3): one generic reading the 36 elements x[n, c, 4ty + i, 4tx + j] of a tile's
    window d and yielding the 36 V_ab[n, c, ty, tx] = (Bt d B)[a, b], as Bt d, then (Bt d) B,
    each copied into its slice of the (36, N, `channels`, TH, TW) V, whose channels past C
    (stagger_rows) are zeros.
    On a target with vectors (`vector_bits`) and WINOGRAD4_VECTORIZE_TILES tiles a row,
    marked for LLVM to vectorize WINOGRAD4_VECTORIZE_LANES wide (see there)."""
    # V first, its zero rows written before the transform (which then writes V itself)
    n, c, th, tw = v_t.get_shape()
    all_t = aicc.tensor_type(v_t.element_type, (36, n, channels, th, tw))
    v = empty_tensor(rewriter, all_t)
    if channels > c:  # zeros in the rows past C (read by the matmul, times zero)
        pad_t = aicc.tensor_type(v_t.element_type, (36, n, channels - c, th, tw))
        into = AffineMap(5, 0, (_d(0), _d(1), plus(_d(2), c), _d(3), _d(4)))
        v = insert_result(rewriter, build_generic(
            [_constant(rewriter, np.zeros(pad_t.get_shape(), np.float32))], [v],
            [AffineMap.identity(5), into], [PARALLEL] * 5, _identity_copy, [all_t]))
    maps = [AffineMap(4, 0, (_d(0), _d(1), _d(2) * 4 + i, _d(3) * 4 + j))
            for i in range(6) for j in range(6)] + [AffineMap.identity(4)] * 36

    def body(bld: Builder, args):
        d, consts = [args[6 * i:6 * i + 6] for i in range(6)], {}
        btd = [[_combine(bld, BT4[a], [d[i][j] for i in range(6)], consts) for j in range(6)]
               for a in range(6)]
        return [_combine(bld, BT4[b], btd[a], consts) for a in range(6) for b in range(6)]

    transform = build_generic([x] * 36, [empty_tensor(rewriter, v_t) for _ in range(36)], maps,
                              [PARALLEL] * 4, body, [v_t] * 36)
    low, high = WINOGRAD4_VECTORIZE_TILES
    if vector_bits and low <= v_t.get_shape()[3] <= high:
        transform.attributes[VECTORIZE_ATTR] = IntegerAttr(WINOGRAD4_VECTORIZE_LANES, 64)
    rewriter.insert(transform)
    return _into_slices(rewriter, transform.results, all_t, into=v)


def _output_transform_2(rewriter: PatternRewriter, m: SSAValue, bias: SSAValue | None,
                        p_t) -> SSAValue:
    """F(2x2, 3x3): per position (r, s) of a tile, a generic writing plane P[r, s] = bias +
    the sum of +-M[ab] over the 9 (a, b) with At[r, a] * At[s, b] != 0 into its slice of the
    planes (M: the (16, N, OC, TH, TW) products)."""
    n, oc, th, tw = p_t.get_shape()[2:]
    planes = empty_tensor(rewriter, p_t)
    m = reshape(rewriter, m, (16, 1, 1, *aicc.shape_of(m)[1:]))
    # M's rows past OC (stagger_rows) are not read: d + 0, the range read from the planes
    k = _d(3) if aicc.shape_of(m)[4] == oc else plus(_d(3), 0)
    if bias is not None:
        one = aicc.shape_of(bias) == (1,)
        bias_map = AffineMap(6, 0, (AffineConstantExpr(0),) if one else (_d(3),))
    for r in range(2):
        for s_ in range(2):
            terms = [(ab, AT[r, ab // 4] * AT[s_, ab % 4]) for ab in range(16)
                     if AT[r, ab // 4] * AT[s_, ab % 4]]
            inputs = [m] * len(terms)
            maps = [AffineMap(6, 0, (AffineConstantExpr(ab), _d(0), _d(1), _d(2), k, _d(4),
                                     _d(5))) for ab, _ in terms]
            if bias is not None:
                inputs.append(bias)
                maps.append(bias_map)
            # kept additions (+ 0 too): the loop range comes from the M operands
            maps.append(AffineMap(6, 0, (plus(_d(0), r), plus(_d(1), s_),
                                         *(_d(i) for i in range(2, 6)))))

            def plane(bld: Builder, args, terms=terms):
                first = args[len(terms)] if bias is not None else None
                return [_combine(bld, [s for _, s in terms], args[:len(terms)], first=first)]

            planes = insert_result(rewriter, build_generic(
                inputs, [planes], maps, [PARALLEL] * 6, plane, [p_t]))
    return planes


def _output_transform_4(rewriter: PatternRewriter, m: SSAValue, bias: SSAValue | None,
                        p_t) -> SSAValue:
    """F(4x4, 3x3): one generic reading the 36 M[ab, n, k, ty, tx] (and the bias) and
    yielding the 16 planes P[r, s] = bias + (At M A)[r, s], as At M, then (At M) A; each
    plane then copied into its slice of the planes."""
    elem = p_t.element_type
    plane_t = aicc.tensor_type(elem, p_t.get_shape()[2:])
    inputs = [m] * 36
    # M's rows past OC (stagger_rows) are not read: d + 0, the range read from the planes
    k = _d(1) if aicc.shape_of(m)[2] == p_t.get_shape()[3] else plus(_d(1), 0)
    maps = [AffineMap(4, 0, (AffineConstantExpr(ab), _d(0), k, _d(2), _d(3)))
            for ab in range(36)]
    if bias is not None:
        inputs.append(bias)
        maps.append(AffineMap(4, 0, (AffineConstantExpr(0),) if aicc.shape_of(bias) == (1,)
                              else (_d(1),)))
    maps += [AffineMap.identity(4)] * 16

    def body(bld: Builder, args):
        m_, consts = [args[6 * a:6 * a + 6] for a in range(6)], {}
        atm = [[_combine(bld, AT4[r], [m_[a][b] for a in range(6)], consts) for b in range(6)]
               for r in range(4)]
        first = args[36] if bias is not None else None
        return [_combine(bld, AT4[s_], atm[r], consts, first) for r in range(4) for s_ in range(4)]

    transform = build_generic(inputs, [empty_tensor(rewriter, plane_t) for _ in range(16)],
                              maps, [PARALLEL] * 4, body, [plane_t] * 16)
    rewriter.insert(transform)
    return _into_slices(rewriter, transform.results, p_t, lead=2)


__all__ = ["WINOGRAD_TILES", "constant_weight", "lower_winograd", "winograd_applies"]
