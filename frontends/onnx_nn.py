"""ONNX handlers for the ops that use the NN ops of compiler/dialects/aicc_nn.py.

frontends/onnx_import.py merges this module's HANDLERS table into its own. Padding of Conv and
the pools becomes an explicit aicc.pad (with -inf for MaxPool), so the window ops never test
bounds; AveragePool is a sum pool times a constant table of 1 / (elements counted per window),
which covers count_include_pad and ceil_mode alike. 1-D convolutions and pools run as 2-D ones
on a height-1 view.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from compiler.symbolic import Sym
from frontends.graph_builder import pad_by_index, pad_indices
from frontends.onnx_common import ONNX_DTYPES, const, dtype_name, int8_value, is_uint8, unsupported
from frontends.registry import HandlerTable

# pad_indices and pad_by_index live in frontends/graph_builder.py (the PyTorch importer uses
# them too); they are part of this module's API as well.
__all__ = ["HANDLERS", "conv_geometry", "pad_by_index", "pad_indices", "resize", "resize_taps", "slice_tensor",
           "to_2d"]

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _pads_for(imp, node, at, in_hw, k_eff, strides):
    """(begin, end) padding per spatial dim from pads / auto_pad."""
    n = len(in_hw)
    auto = at.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(at.get("pads", [0] * 2 * n))
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s in zip(in_hw, k_eff, strides):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return begin, end
    raise unsupported(imp, node, f"auto_pad='{auto}'")


def to_2d(imp, node, x):
    """An NCW input as NC1W (1-D ops run as 2-D); rank other than 3 or 4 is unsupported."""
    rank = len(imp.g.shape(x))
    if rank == 4:
        return x, False
    if rank == 3:
        s = imp.g.shape(x)
        return imp.g.reshape(x, (s[0], s[1], 1, s[2])), True
    raise unsupported(imp, node, f"a rank-{rank} input (aicc has 1-D and 2-D {node.op_type})")


def _conv_operands(imp, node, ins):
    """(x, w, bias or None, one_d) of a Conv / ConvTranspose: float operands, a 1-D input and
    weight viewed as 2-D with height 1."""
    g = imp.g
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    g.require_float(node.op_type, x, w)
    x, one_d = to_2d(imp, node, x)
    if one_d:
        ws = g.shape(w)
        w = g.reshape(w, (ws[0], ws[1], 1, ws[2]))
    return x, w, b, one_d


def _lift(values, one_d, fill):
    return [fill, *values] if one_d else list(values)


def _pad(g, x, begin, end, value):
    if not any(begin) and not any(end):
        return x
    low = [0, 0, *begin]
    high = [0, 0, *end]
    return g.emit(lambda v: aicc_nn.PadOp(v, low, high, value), x)


def conv_geometry(imp, node, at, in_hw, k, one_d):
    """(strides, dilations, pads begin, pads end) of a Conv-like node over the (H, W) input
    `in_hw` with kernel `k`, a 1-D node's attributes lifted to 2-D (height 1)."""
    strides = _lift(at.get("strides", [1] * (2 - one_d)), one_d, 1)
    dil = _lift(at.get("dilations", [1] * (2 - one_d)), one_d, 1)
    k_eff = [(kk - 1) * d + 1 for kk, d in zip(k, dil)]
    begin, end = _pads_for(imp, node, {**at, **({"pads": [0, *at["pads"][:1], 0, *at["pads"][1:]]} if one_d and "pads" in at else {})},
                           in_hw, k_eff, strides)
    if any(p < 0 for p in begin + end):
        raise unsupported(imp, node, "negative pads")
    return strides, dil, begin, end


@handles("Conv")
def _op_conv(imp, node, ins, at):
    g = imp.g
    x, w, b, one_d = _conv_operands(imp, node, ins)
    strides, dil, begin, end = conv_geometry(imp, node, at, g.shape(x)[2:], g.shape(w)[2:], one_d)
    x = _pad(g, x, begin, end, 0.0)
    groups = at.get("group", 1)
    y = g.emit(lambda a, c: aicc_nn.Conv2dOp(a, c, strides, dil, groups), x, w)
    if b is not None:
        y = g.add(y, g.reshape(g.cast_like(b, y), (g.shape(b)[0], 1, 1)))
    if one_d:
        s = g.shape(y)
        y = g.reshape(y, (s[0], s[1], s[3]))
    return [y]


def _pool_geometry(imp, node, at, in_hw, one_d):
    kernel = _lift(at["kernel_shape"], one_d, 1)
    strides = _lift(at.get("strides", [1] * len(at["kernel_shape"])), one_d, 1)
    dil = _lift(at.get("dilations", [1] * len(at["kernel_shape"])), one_d, 1)
    pads_at = dict(at)
    if one_d and "pads" in at:
        pads_at["pads"] = [0, at["pads"][0], 0, at["pads"][1]]
    k_eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    begin, end = _pads_for(imp, node, pads_at, in_hw, k_eff, strides)
    ceil = bool(at.get("ceil_mode", 0))
    out, extra = [], []
    for size, ke, s, pb, pe in zip(in_hw, k_eff, strides, begin, end):
        span = size + pb + pe - ke
        if span < 0:
            raise unsupported(imp, node, "a window larger than the padded input")
        o = (-(-span // s) if ceil else span // s) + 1
        if ceil and (o - 1) * s >= size + pb:  # the last window must start inside the input
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s + ke - (size + pb + pe)))
    return kernel, strides, dil, begin, end, out, extra


@handles("MaxPool", "AveragePool")
def _op_pool(imp, node, ins, at):
    g, x = imp.g, ins[0]
    int8 = node.op_type == "MaxPool" and not isinstance(x, np.ndarray) and g.dtype(x) == np.int8
    if int8:  # (u)int8 values are exact in float32, and the max of v - 128 is max(v) - 128
        x = g.cast(x, np.float32)
    g.require_float(node.op_type, x)
    if len([o for o in node.output if o]) > 1:
        raise unsupported(imp, node, "the Indices output")
    if at.get("storage_order", 0):
        raise unsupported(imp, node, "storage_order=1")
    y = _pool(imp, node, x, at, node.op_type == "MaxPool")
    return [g.cast(y, np.int8) if int8 else y]


@handles("LpPool")
def _op_lp_pool(imp, node, ins, at):
    """(sum of |x|^p over the window, padding counting 0)^(1/p), as the ONNX test data."""
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    p = float(at.get("p", 2))
    ax = g.unary(aicc.AbsOp, x)
    xp = g.mul(ax, ax) if p == 2.0 else g.emit(aicc.PowOp, ax, g.scalar(p, x))
    y = _pool(imp, node, xp, at, False, average=False)
    return [g.unary(aicc.SqrtOp, y) if p == 2.0 else g.emit(aicc.PowOp, y, g.scalar(1.0 / p, x))]


def _pool(imp, node, x, at, is_max: bool, average: bool = True):
    """Max or average (or, with average=False, sum) pooling of an NCW / NCHW x with ONNX's pads,
    auto_pad, ceil_mode and count_include_pad. NCDHW pools are separable: a 2-D pool over
    (H, W), then one over D (the windows' counts are products of per-dim counts)."""
    g = imp.g
    if len(g.shape(x)) == 5:
        return _pool3d(imp, node, x, at, is_max, average)
    x, one_d = to_2d(imp, node, x)
    in_hw = g.shape(x)[2:]
    kernel, strides, dil, begin, end, out, extra = _pool_geometry(imp, node, at, in_hw, one_d)
    padded = _pad(g, x, begin, [e + x_ for e, x_ in zip(end, extra)], -math.inf if is_max else 0.0)
    y = g.emit(lambda v: aicc_nn.Pool2dOp(v, "max" if is_max else "sum", kernel, strides, dil), padded)
    if not is_max and average:
        include = bool(at.get("count_include_pad", 0))
        counts = []
        for size, k, s, d, pb, pe, o in zip(in_hw, kernel, strides, dil, begin, end, out):
            pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - pb  # input coordinate
            lo, hi = (-pb, size + pe) if include else (0, size)
            counts.append(((pos >= lo) & (pos < hi)).sum(axis=1))
        table = (1.0 / np.outer(counts[0], counts[1])).astype(g.dtype(y))
        y = g.mul(y, table)
    if one_d:
        s = g.shape(y)
        y = g.reshape(y, (s[0], s[1], s[3]))
    return y


def _pool3d(imp, node, x, at, is_max: bool, average: bool):
    g = imp.g
    n, c, d, h, w = g.shape(x)
    k = list(at["kernel_shape"])
    strides = list(at.get("strides", [1] * 3))
    dil = list(at.get("dilations", [1] * 3))
    pads = at.get("pads")
    at_hw = {**at, "kernel_shape": k[1:], "strides": strides[1:], "dilations": dil[1:]}
    at_d = {**at, "kernel_shape": [k[0], 1], "strides": [strides[0], 1], "dilations": [dil[0], 1]}
    if pads is not None:
        at_hw["pads"] = [pads[1], pads[2], pads[4], pads[5]]
        at_d["pads"] = [pads[0], 0, pads[3], 0]
    y = _pool(imp, node, g.reshape(x, (n, c * d, h, w)), at_hw, is_max, average)
    h2, w2 = g.shape(y)[2:]
    y = _pool(imp, node, g.reshape(y, (n, c, d, h2 * w2)), at_d, is_max, average)
    return g.reshape(y, (n, c, g.shape(y)[2], h2, w2))


@handles("Pad")
def _op_pad(imp, node, ins, at):
    """Constant mode is aicc.pad; reflect, edge and wrap are compositions of aicc.resample."""
    g, x = imp.g, ins[0]
    mode = at.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise unsupported(imp, node, f"mode='{mode}'")
    rank = len(g.shape(x))
    pads = [int(p) for p in const(imp, node, ins[1], "pads input").reshape(-1)]
    value = ins[2] if len(ins) > 2 and ins[2] is not None else np.array(0, g.dtype(x))
    value = float(np.asarray(const(imp, node, value, "constant_value input")).reshape(-1)[0]) if np.size(value) else 0.0
    if not isinstance(x, np.ndarray) and g.dtype(x) == np.int8 and is_uint8(imp, node, x):
        value -= 128  # a uint8 tensor is held as v - 128
    axes = list(range(rank))
    if len(ins) > 3 and ins[3] is not None:
        axes = [int(a) % rank for a in const(imp, node, ins[3], "axes input").reshape(-1)]
    low, high = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        low[a], high[a] = pads[i], pads[len(axes) + i]
    if isinstance(x, np.ndarray):
        neg = [slice(-lo if lo < 0 else None, (x.shape[i] + hi) if hi < 0 else None) for i, (lo, hi) in enumerate(zip(low, high))]
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)]
        if mode != "constant":
            return [np.pad(x[tuple(neg)], widths, mode=mode)]
        return [np.pad(x[tuple(neg)], widths, constant_values=value)]
    if any(p < 0 for p in low + high):  # negative pads crop
        shape = g.shape(x)
        x = slice_tensor(g, x, [max(-lo, 0) for lo in low], [1] * rank,
                   [d - max(-lo, 0) - max(-hi, 0) for d, lo, hi in zip(shape, low, high)])
        low, high = [max(p, 0) for p in low], [max(p, 0) for p in high]
    if not any(low) and not any(high):
        return [x]
    if 0 in g.shape(x):
        raise unsupported(imp, node, "padding an empty tensor")
    if mode != "constant":
        return [pad_by_index(g, x, low, high, mode)]
    if g.dtype(x).kind != "f" and value != int(value):
        raise unsupported(imp, node, "a fractional pad value for an integer tensor")
    return [g.emit(lambda v: aicc_nn.PadOp(v, low, high, value), x)]


@handles("Concat")
def _op_concat(imp, node, ins, at):
    g = imp.g
    vals = [v for v in ins if v is not None]
    rank = len(g.shape(vals[0]))
    axis = at["axis"] % rank
    if all(isinstance(v, np.ndarray) for v in vals):
        return [np.concatenate(vals, axis=axis)]
    dt = next(g.dtype(v) for v in vals if not isinstance(v, np.ndarray))
    if dt == np.int8:  # uint8 arrays as aicc holds uint8 tensors
        vals = [int8_value(imp, node, v)[0] if isinstance(v, np.ndarray) and v.dtype == np.uint8 else v
                for v in vals]
    vals = [g.cast(v, dt) if isinstance(v, np.ndarray) else v for v in vals]
    vals = [v for v in vals if g.shape(v)[axis]] or vals[:1]
    if len(vals) == 1:
        return [vals[0]]
    return [g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), axis), *vals)]


def slice_tensor(g, x, starts, steps, counts):
    if 0 in counts:  # an empty tensor has no values to compute: a constant
        return np.zeros(counts, dtype=g.dtype(x))
    if isinstance(x, np.ndarray) and any(isinstance(n, Sym) for n in counts):
        x = g.ssa(x)  # a symbolic-length prefix of a constant (position ids[:, :seq]): an op
    if isinstance(x, np.ndarray):
        idx = tuple(s + np.arange(n) * st for s, st, n in zip(starts, steps, counts))
        return x[np.ix_(*idx)] if idx else x
    if list(counts) == list(g.shape(x)) and all(s == 0 for s in starts) and all(st == 1 for st in steps):
        return x
    return g.emit(lambda v: aicc_nn.SliceOp(v, starts, steps, counts), x)


@handles("Slice")
def _op_slice(imp, node, ins, at):
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    rank = len(shape)
    starts = [int(v) for v in const(imp, node, ins[1], "starts input").reshape(-1)]
    ends = [v if isinstance(v, Sym) else int(v) for v in const(imp, node, ins[2], "ends input").reshape(-1)]
    axes = list(range(len(starts)))
    if len(ins) > 3 and ins[3] is not None:
        axes = [int(a) % rank for a in const(imp, node, ins[3], "axes input").reshape(-1)]
    steps = [1] * len(starts)
    if len(ins) > 4 and ins[4] is not None:
        steps = [int(s) for s in const(imp, node, ins[4], "steps input").reshape(-1)]
    st_all, step_all, cnt_all = [0] * rank, [1] * rank, list(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        if isinstance(e, Sym) and e == shape[a] and s == 0 and st == 1:
            continue  # the whole dynamic dim
        if isinstance(e, Sym):  # x[..., s:n] with n a symbol: n - s elements, n <= the dim's size
            if isinstance(shape[a], Sym) or st != 1 or not 0 <= s < shape[a]:
                raise unsupported(imp, node, f"a slice {s}:{e}:{st} of a dim of size {shape[a]}")
            imp.bound_symbol(node, e, shape[a])
            st_all[a], step_all[a], cnt_all[a] = s, 1, e - s
            continue
        r = range(*slice(s, e, st).indices(shape[a]))
        st_all[a], step_all[a], cnt_all[a] = (r.start if len(r) else 0), st, len(r)
    return [slice_tensor(g, x, st_all, step_all, cnt_all)]


@handles("Gather")
def _op_gather(imp, node, ins, at):
    g, data, idx = imp.g, ins[0], ins[1]
    rank = len(g.shape(data))
    axis = at.get("axis", 0) % rank
    size = g.shape(data)[axis]
    if isinstance(idx, np.ndarray):
        if np.any((idx < -size) | (idx >= size)):
            raise unsupported(imp, node, "out-of-range indices")
        idx = np.where(idx < 0, idx + size, idx).astype(idx.dtype)
        if isinstance(data, np.ndarray):
            return [np.take(data, idx, axis=axis)]
        if idx.size == 1:  # a single index: a slice, reshaped
            out_shape = aicc_nn.gather_shape("Gather", g.shape(data), idx.shape, axis)
            starts = [0] * rank
            starts[axis] = int(idx.reshape(-1)[0])
            counts = list(g.shape(data))
            counts[axis] = 1
            return [g.reshape(slice_tensor(g, data, starts, [1] * rank, counts), out_shape)]
    if 0 in g.shape(idx) or 0 in g.shape(data):
        raise unsupported(imp, node, "an empty tensor")
    return [g.emit(lambda d, i: aicc_nn.GatherOp(d, i, axis), data, idx)]


@handles("Split")
def _op_split(imp, node, ins, at):
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    axis = at.get("axis", 0) % len(shape)
    n_out = len(node.output)
    if len(ins) > 1 and ins[1] is not None:
        sizes = [int(s) for s in const(imp, node, ins[1], "split input").reshape(-1)]
    elif "split" in at:
        sizes = list(at["split"])
    else:
        n = at.get("num_outputs", n_out)
        chunk = -(-shape[axis] // n)
        sizes = [min(chunk, shape[axis] - i * chunk) for i in range(n)]
    if sum(sizes) != shape[axis] or any(s < 0 for s in sizes):
        raise unsupported(imp, node, f"split sizes {sizes} of a dim of size {shape[axis]}")
    outs, offset = [], 0
    for s in sizes:
        starts = [0] * len(shape)
        starts[axis] = offset
        counts = list(shape)
        counts[axis] = s
        outs.append(slice_tensor(g, x, starts, [1] * len(shape), counts))
        offset += s
    return outs


@handles("Tile")
def _op_tile(imp, node, ins, at):
    g, x = imp.g, ins[0]
    reps = [int(r) for r in const(imp, node, ins[1], "repeats input").reshape(-1)]
    if isinstance(x, np.ndarray):
        return [np.tile(x, reps)]
    shape = g.shape(x)
    if 0 in reps:
        raise unsupported(imp, node, "a zero repeat")
    # x viewed as (1, d0, 1, d1, ...) broadcast to (r0, d0, r1, d1, ...), merged pairwise.
    inter = [v for d in shape for v in (1, d)]
    target = [v for r, d in zip(reps, shape) for v in (r, d)]
    y = g.broadcast_to(g.reshape(x, inter), target)
    return [g.reshape(y, [r * d for r, d in zip(reps, shape)])]



@handles("ArgMax", "ArgMin")
def _op_arg_reduce(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_numeric(node.op_type, x)
    shape = g.shape(x)
    if not shape or 0 in shape:
        raise unsupported(imp, node, "an empty or rank-0 input")
    axis = at.get("axis", 0) % len(shape)
    cls = aicc_nn.ArgMaxOp if node.op_type == "ArgMax" else aicc_nn.ArgMinOp
    x = g.cast(x, np.int32) if g.dtype(x) == np.bool_ else x
    return [g.emit(lambda v: cls(v, axis, bool(at.get("keepdims", 1)), bool(at.get("select_last_index", 0))), x)]


@handles("CumSum")
def _op_cumsum(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_numeric(node.op_type, x)
    shape = g.shape(x)
    if not shape or 0 in shape:
        raise unsupported(imp, node, "an empty or rank-0 input")
    axis = int(const(imp, node, ins[1], "axis input").reshape(-1)[0]) % len(shape)
    return [g.emit(lambda v: aicc_nn.CumSumOp(v, axis, bool(at.get("exclusive", 0)), bool(at.get("reverse", 0))), x)]


@handles("GatherElements")
def _op_gather_elements(imp, node, ins, at):
    g, data, idx = imp.g, ins[0], ins[1]
    rank = len(g.shape(data))
    axis = at.get("axis", 0) % rank
    size = g.shape(data)[axis]
    if 0 in g.shape(idx) or 0 in g.shape(data):
        raise unsupported(imp, node, "an empty tensor")
    if isinstance(idx, np.ndarray) and np.any((idx < -size) | (idx >= size)):
        raise unsupported(imp, node, "out-of-range indices")
    return [g.emit(lambda d, i: aicc_nn.GatherElementsOp(d, i, axis), data, idx)]


# -- Resize / Upsample: one aicc.resample per resized axis ------------------------------------
# The tap tables follow the ONNX reference (onnx/reference/ops/op_resize.py) step by step, in
# float64, so ties in the nearest modes and the edge clamping come out the same.


def _coeffs_fn(mode: str, nearest_mode: str, cubic_a: float, antialias: bool):
    def nearest(ratio, scale):
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        return {"round_prefer_floor": np.array([ratio <= 0.5, ratio > 0.5], np.float64),
                "round_prefer_ceil": np.array([ratio < 0.5, ratio >= 0.5], np.float64),
                "floor": np.array([1.0, 0.0]), "ceil": np.array([0.0, 1.0])}[nearest_mode]

    def linear(ratio, scale):
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, start + 2 - 2 * start) - ratio) * scale
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum()

    def cubic(ratio, scale):
        a = cubic_a
        if not antialias:
            return np.array([
                ((a * (ratio + 1) - 5 * a) * (ratio + 1) + 8 * a) * (ratio + 1) - 4 * a,
                ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
                ((a + 2) * (1 - ratio) - (a + 3)) * (1 - ratio) * (1 - ratio) + 1,
                ((a * ((1 - ratio) + 1) - 5 * a) * ((1 - ratio) + 1) + 8 * a) * ((1 - ratio) + 1) - 4 * a,
            ])
        scale = min(scale, 1.0)

        def k(x):
            x = abs(x)
            if x <= 1:
                return (a + 2) * x**3 - (a + 3) * x**2 + 1
            return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a if x < 2 else 0.0

        start = int(np.floor(-2 / scale) + 1)
        c = np.array([k(scale * (i - ratio)) for i in range(start, 2 - start)])
        return c / c.sum()

    return {"nearest": nearest, "linear": linear, "cubic": cubic}[mode]


def _tf_crop_and_resize(y, s, n, o, w, roi):
    r0, r1 = roi
    x = np.full(o, (r1 - r0) * (n - 1) / 2) if w == 1 else y * (r1 - r0) * (n - 1) / (w - 1)
    return x + r0 * (n - 1)


# coordinate_transformation_mode -> f(y, s, n, o, w, roi), the input coordinate of each output
# coordinate y for a scale s from in_size n to out_size o (w = s * n, the unrounded out_size)
_COORDINATES = {
    "align_corners": lambda y, s, n, o, w, roi: np.zeros(o) if w == 1 else y * (n - 1) / (w - 1),
    "asymmetric": lambda y, s, n, o, w, roi: y / s,
    "tf_crop_and_resize": _tf_crop_and_resize,
    "pytorch_half_pixel": lambda y, s, n, o, w, roi: np.full(o, -0.5) if w == 1 else (y + 0.5) / s - 0.5,
    "half_pixel": lambda y, s, n, o, w, roi: (y + 0.5) / s - 0.5,
    "half_pixel_symmetric": lambda y, s, n, o, w, roi: n / 2 * (1 - o / w) + (y + 0.5) / s - 0.5,
}


def resize_taps(in_size: int, out_size: int, scale: float, coeffs, coord: str, roi=None,
                exclude_outside: bool = False):
    """(indices, weights, extrapolated) for resizing one axis: indices and weights of shape
    (out_size, taps), extrapolated a bool mask of outputs outside the input (tf_crop_and_resize)
    or None."""
    out_w = scale * in_size
    y = np.arange(out_size, dtype=np.float64)
    to_input = _COORDINATES.get(coord)
    if to_input is None:
        raise ValueError(f"coordinate_transformation_mode '{coord}'")
    x = to_input(y, scale, in_size, out_size, out_w, roi)
    extrapolated = (x < 0) | (x > in_size - 1) if coord == "tf_crop_and_resize" else None
    x_int = np.floor(x).astype(np.int64)
    ratios = np.where(x == x_int, 1.0, x - x_int)
    weights = np.array([coeffs(float(r), scale) for r in ratios], dtype=np.float64)
    n = weights.shape[1]
    pad = int(np.ceil(n / 2))
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        weights = np.where((idx < 0) | (idx >= in_size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    if extrapolated is not None:
        weights = np.where(extrapolated[:, None], 0.0, weights)
    return np.clip(idx, 0, in_size - 1), weights, extrapolated


def resize(g, x, axis: int, idx, weights, extrapolated=None, extrapolation_value: float = 0.0):
    """x resized along `axis` by the tap tables of resize_taps."""
    one_hot = np.all((weights == 0) | (weights == 1)) and np.all((weights == 1).sum(axis=1) == 1)
    if one_hot:  # nearest: a gather, for any element type
        pick = idx[np.arange(len(idx)), np.argmax(weights == 1, axis=1)]
        y = g.emit(lambda v: aicc_nn.ResampleOp(v, axis, pick), x)
    else:
        g.require_float("Resize", x)
        y = g.emit(lambda v: aicc_nn.ResampleOp(v, axis, idx, weights.astype(np.float32)), x)
    if extrapolated is not None and extrapolated.any():
        rank = len(g.shape(x))
        mask = extrapolated.reshape((-1,) + (1,) * (rank - 1 - axis))
        y = g.select(mask, np.array(extrapolation_value, g.dtype(y)), y)
    return y


@handles("Resize")
def _op_resize(imp, node, ins, at):
    """A composition: one aicc.resample per resized axis, in axis order (as the reference)."""
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    rank = len(shape)
    mode = at.get("mode", "nearest")
    coord = at.get("coordinate_transformation_mode", "half_pixel")
    antialias = bool(at.get("antialias", 0))
    if mode not in ("nearest", "linear", "cubic") or (antialias and mode == "nearest"):
        raise unsupported(imp, node, f"mode='{mode}'" + (" with antialias" if antialias else ""))
    coeffs = _coeffs_fn(mode, at.get("nearest_mode", "round_prefer_floor"), at.get("cubic_coeff_a", -0.75), antialias)
    axes = [a % rank for a in at.get("axes", range(rank))]

    def opt(i, what):
        v = ins[i] if len(ins) > i and ins[i] is not None else None
        v = None if v is None else const(imp, node, v, what).reshape(-1)
        return None if v is None or v.size == 0 else v

    roi, scales, sizes = opt(1, "roi input"), opt(2, "scales input"), opt(3, "sizes input")
    full_roi = [0.0] * rank + [1.0] * rank
    if roi is not None:
        for i, a in enumerate(axes):
            full_roi[a], full_roi[rank + a] = float(roi[i]), float(roi[len(axes) + i])
    scale = [1.0] * rank
    out = list(shape)
    if sizes is not None:
        for i, a in enumerate(axes):
            out[a] = int(sizes[i])
        scale = [out[i] / shape[i] for i in range(rank)]
        policy = at.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scale[a] for a in axes)
            scale = [s if i in axes else 1.0 for i in range(rank)]
            out = [int(s * shape[i] + 0.5) if i in axes else shape[i] for i in range(rank)]
    elif scales is not None:
        for i, a in enumerate(axes):
            scale[a] = float(scales[i])
        out = [int(s * d) for s, d in zip(scale, shape)]
    else:
        raise unsupported(imp, node, "neither scales nor sizes")
    if 0 in out or 0 in shape:
        raise unsupported(imp, node, "an empty tensor")
    for a in axes:
        identity = math.isclose(scale[a], 1.0) and out[a] == shape[a] and (
            roi is None or (math.isclose(full_roi[a], 0.0) and math.isclose(full_roi[rank + a], 1.0)))
        if identity:
            continue
        idx, w, extra = resize_taps(g.shape(x)[a], out[a], scale[a], coeffs, coord,
                                    (full_roi[a], full_roi[rank + a]), bool(at.get("exclude_outside", 0)))
        x = resize(g, x, a, idx, w, extra, at.get("extrapolation_value", 0.0))
    return [x]


@handles("Upsample")
def _op_upsample(imp, node, ins, at):
    """Upsample (opsets 7-9) is Resize with asymmetric coordinates (nearest: floor)."""
    g, x = imp.g, ins[0]
    mode = at.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise unsupported(imp, node, f"mode='{mode}'")
    scales = [float(s) for s in (at["scales"] if "scales" in at else const(imp, node, ins[1], "scales input").reshape(-1))]
    coeffs = _coeffs_fn(mode, "floor", -0.75, False)
    for a, s in enumerate(scales):
        if s != 1.0:
            n = g.shape(x)[a]
            idx, w, _ = resize_taps(n, int(s * n), s, coeffs, "asymmetric")
            x = resize(g, x, a, idx, w)
    return [x]


@handles("ConvTranspose")
def _op_conv_transpose(imp, node, ins, at):
    """pads / output_padding / output_shape / auto_pad as the ONNX reference resolves them;
    1-D runs as 2-D on a height-1 view."""
    g = imp.g
    x, w, b, one_d = _conv_operands(imp, node, ins)
    nd = 1 if one_d else 2
    in_hw, k = list(g.shape(x)[2:][-nd:]), list(g.shape(w)[2:][-nd:])
    strides = list(at.get("strides", [1] * nd))
    dil = list(at.get("dilations", [1] * nd))
    out_pad = list(at.get("output_padding", [0] * nd))
    out_shape = at.get("output_shape")
    if out_shape is not None:
        out_shape = list(out_shape)[-nd:]
    auto = at.get("auto_pad", "NOTSET")
    pads = at.get("pads")
    if pads is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out = out_shape or [i * s for i, s in zip(in_hw, strides)]
        total = [s * (i - 1) + op + (kk - 1) * d + 1 - o
                 for i, s, op, kk, d, o in zip(in_hw, strides, out_pad, k, dil, out)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        pads = list(pads) if pads is not None else [0] * (2 * nd)
        begin, end = pads[:nd], pads[nd:]
        out = out_shape or [s * (i - 1) + op + (kk - 1) * d + 1 - pb - pe
                            for i, s, op, kk, d, pb, pe in zip(in_hw, strides, out_pad, k, dil, begin, end)]
    if min(out) < 1:
        raise unsupported(imp, node, f"an output of size {out}")
    strides, dil, begin, out = (_lift(v, one_d, fill) for v, fill in ((strides, 1), (dil, 1), (begin, 0), (out, 1)))
    groups = at.get("group", 1)
    y = g.emit(lambda a, c: aicc_nn.ConvTranspose2dOp(a, c, out, strides, dil, groups, begin), x, w)
    if b is not None:
        y = g.add(y, g.reshape(g.cast_like(b, y), (g.shape(b)[0], 1, 1)))
    if one_d:
        s = g.shape(y)
        y = g.reshape(y, (s[0], s[1], s[3]))
    return [y]


# -- normalizations that are compositions --------------------------------------------------------


@handles("LRN")
def _op_lrn(imp, node, ins, at):
    """y = x / (bias + alpha/size * sum of x^2 over a window of `size` channels)^beta: the
    window sum is a sum pool2d (kernel size x 1) over the squares viewed as (N, 1, C, rest),
    padded with floor((size-1)/2) zeros before and ceil((size-1)/2) after."""
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    shape = g.shape(x)
    if len(shape) < 2 or 0 in shape:
        raise unsupported(imp, node, f"an input of shape {shape}")
    size = int(at["size"])
    alpha, beta, bias = at.get("alpha", 1e-4), at.get("beta", 0.75), at.get("bias", 1.0)
    n, c, rest = shape[0], shape[1], math.prod(shape[2:])
    sq = g.reshape(g.mul(x, x), (n, 1, c, rest))
    sq = _pad(g, sq, [(size - 1) // 2, 0], [-(-(size - 1) // 2), 0], 0.0)
    s = g.emit(lambda v: aicc_nn.Pool2dOp(v, "sum", (size, 1)), sq)
    s = g.reshape(s, shape)
    denom = g.add(g.mul(s, g.scalar(alpha / size, x)), g.scalar(bias, x))
    if beta != 1.0:
        denom = g.emit(aicc.PowOp, denom, g.scalar(beta, x))
    return [g.div(x, denom)]


@handles("LpNormalization")
def _op_lp_normalization(imp, node, ins, at):
    """x / ||x||_p along `axis` (p = 1 or 2); where the norm is 0 the result is 0, as in the
    ONNX reference."""
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    rank = len(g.shape(x))
    axis = at.get("axis", -1) % rank
    p = at.get("p", 2)
    if p not in (1, 2):
        raise unsupported(imp, node, f"p={p}")
    if p == 1:
        norm = g.reduce(aicc.ReduceSumOp, g.unary(aicc.AbsOp, x), [axis], True)
    else:
        norm = g.unary(aicc.SqrtOp, g.reduce(aicc.ReduceSumOp, g.mul(x, x), [axis], True))
    zero = g.scalar(0.0, x)
    return [g.select(g.compare("eq", norm, zero), zero, g.div(x, norm))]


@handles("RMSNormalization")
def _op_rms_normalization(imp, node, ins, at):
    """x / sqrt(mean(x^2 over the axes from `axis` on) + epsilon) * scale."""
    g, x, scale = imp.g, ins[0], ins[1]
    g.require_float(node.op_type, x)
    if at.get("stash_type", 1) != 1:
        raise unsupported(imp, node, "stash_type other than float32")
    rank = len(g.shape(x))
    axis = at.get("axis", -1) % rank
    ms = g.reduce(aicc.ReduceMeanOp, g.mul(x, x), list(range(axis, rank)), True)
    inv = g.unary(aicc.RsqrtOp, g.add(ms, g.scalar(at.get("epsilon", 1e-5), x)))
    return [g.mul(g.mul(x, inv), g.cast_like(scale, x))]


@handles("MeanVarianceNormalization")
def _op_mvn(imp, node, ins, at):
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`, as the ONNX function body."""
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    axes = list(at.get("axes", [0, 2, 3]))
    mean = g.reduce(aicc.ReduceMeanOp, x, axes, True)
    var = g.sub(g.reduce(aicc.ReduceMeanOp, g.mul(x, x), axes, True), g.mul(mean, mean))
    std = g.add(g.unary(aicc.SqrtOp, var), g.scalar(1e-9, x))
    return [g.div(g.sub(x, mean), std)]


# -- rearrangements, masks and one-hot encodings (compositions) ----------------------------------


@handles("DepthToSpace", "SpaceToDepth")
def _op_depth_space(imp, node, ins, at):
    """A reshape to 6-D, a transpose and a reshape back (modes DCR / CRD as the reference)."""
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    if len(shape) != 4:
        raise unsupported(imp, node, f"a rank-{len(shape)} input")
    b, c, h, w = shape
    bs = int(at["blocksize"])
    mode = at.get("mode", "DCR")
    if node.op_type == "DepthToSpace":
        if mode == "DCR":
            y = g.transpose(g.reshape(x, (b, bs, bs, c // (bs * bs), h, w)), (0, 3, 4, 1, 5, 2))
        else:
            y = g.transpose(g.reshape(x, (b, c // (bs * bs), bs, bs, h, w)), (0, 1, 4, 2, 5, 3))
        return [g.reshape(y, (b, c // (bs * bs), h * bs, w * bs))]
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    y = g.transpose(g.reshape(x, (b, c, h // bs, bs, w // bs, bs)), perm)
    return [g.reshape(y, (b, c * bs * bs, h // bs, w // bs))]


@handles("Trilu")
def _op_trilu(imp, node, ins, at):
    """A select with a constant triangular mask over the last two dims."""
    g, x = imp.g, ins[0]
    k = int(const(imp, node, ins[1], "k input").reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
    shape = g.shape(x)
    if len(shape) < 2:
        raise unsupported(imp, node, "a rank below 2")
    ones = np.ones(shape[-2:], np.bool_)
    mask = np.triu(ones, k) if at.get("upper", 1) else np.tril(ones, k)
    if isinstance(x, np.ndarray):
        return [np.where(mask, x, np.zeros((), x.dtype))]
    return [g.select(mask, x, np.zeros((), g.dtype(x)))]


@handles("Hardmax")
def _op_hardmax(imp, node, ins, at):
    """1 at the first maximum along `axis`, 0 elsewhere: argmax compared with the positions."""
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    shape = g.shape(x)
    if not shape or 0 in shape:
        raise unsupported(imp, node, "an empty or rank-0 input")
    axis = at.get("axis", -1) % len(shape)
    idx = g.emit(lambda v: aicc_nn.ArgMaxOp(v, axis, True, False), x)
    pos = np.arange(shape[axis], dtype=np.int64).reshape((-1,) + (1,) * (len(shape) - 1 - axis))
    return [g.cast(g.compare("eq", idx, pos), g.dtype(x))]


@handles("OneHot")
def _op_one_hot(imp, node, ins, at):
    """values[1] where (indices, negative ones + depth) equals the position along the new axis."""
    g, idx = imp.g, ins[0]
    depth = int(const(imp, node, ins[1], "depth input").reshape(-1)[0])
    values = const(imp, node, ins[2], "values input").reshape(-1)
    shape = g.shape(idx)
    axis = at.get("axis", -1) % (len(shape) + 1)
    g.require_numeric(node.op_type, idx)
    if g.dtype(idx).kind == "f":  # ONNX casts float indices to integers
        idx = g.cast(idx, np.int64)
    idx = g.reshape(idx, (*shape[:axis], 1, *shape[axis:]))
    pos = np.arange(depth).reshape((-1,) + (1,) * (len(shape) - axis)).astype(g.dtype(idx))
    wrapped = g.select(g.compare("lt", idx, np.zeros((), g.dtype(idx))), g.add(idx, np.array(depth, g.dtype(idx))), idx)
    return [g.select(g.compare("eq", wrapped, pos), values[1:2].reshape(()), values[0:1].reshape(()))]


@handles("EyeLike")
def _op_eye_like(imp, node, ins, at):
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    if len(shape) != 2:
        raise unsupported(imp, node, f"a rank-{len(shape)} input")
    dt = g.dtype(x)
    if "dtype" in at:
        if at["dtype"] not in ONNX_DTYPES:
            raise unsupported(imp, node, f"dtype {dtype_name(at['dtype'])}")
        dt = ONNX_DTYPES[at["dtype"]]
    return [np.eye(shape[0], shape[1], k=at.get("k", 0), dtype=dt)]


@handles("CenterCropPad")
def _op_center_crop_pad(imp, node, ins, at):
    """Each axis cropped (a slice) or padded with zeros around the centre, as the reference."""
    g, x = imp.g, ins[0]
    target = [int(v) for v in const(imp, node, ins[1], "shape input").reshape(-1)]
    shape = g.shape(x)
    rank = len(shape)
    axes = [a % rank for a in at.get("axes", range(rank))]
    starts, counts, low, high = [0] * rank, list(shape), [0] * rank, [0] * rank
    for a, size in zip(axes, target):
        d = abs(size - shape[a])
        if size < shape[a]:
            starts[a], counts[a] = d // 2, size
        elif size > shape[a]:
            low[a], high[a] = d // 2, d - d // 2
    x = slice_tensor(g, x, starts, [1] * rank, counts)
    if any(low) or any(high):
        if isinstance(x, np.ndarray):
            return [np.pad(x, list(zip(low, high)))]
        x = g.emit(lambda v: aicc_nn.PadOp(v, low, high, 0.0), x)
    return [x]
