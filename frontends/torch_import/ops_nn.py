"""Handlers of convolution, pooling and padding (aicc_nn's conv2d, pool2d, pad and resample).

1-D ops run as 2-D ones on a height-1 view; 3-D pooling is two separable 2-D pools.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.graph_builder import pad_by_index
from frontends.registry import HandlerTable
from frontends.torch_import.common import Refused, float_input, op_name
from frontends.torch_import.ops_linalg import matmul
from frontends.torch_import.ops_shape import slice_tensor

HANDLERS = HandlerTable()
handles = HANDLERS.handles


_POOL_INDICES = Refused("the indices of adaptive and 3-D max pooling, which only max_unpool reads; "
                        "aicc computes the pooled values")


def _pair(v, n: int = 2) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _pad(g, x, low, high, value):
    if not any(low) and not any(high):
        return x
    return g.emit(lambda v: aicc_nn.PadOp(v, list(low), list(high), value), x)


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


# -- convolution ------------------------------------------------------------------------------


@handles("aten.conv2d.default", "aten.conv2d.padding", "aten.conv1d.default", "aten.conv1d.padding",
         "aten.convolution.default", "aten._convolution.default")
def _conv(imp, a):
    g = imp.g
    x, w, b = float_input(imp, a["input"]), a["weight"], a.get("bias")
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


# -- pooling ----------------------------------------------------------------------------------


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
        y = slice_tensor(g, y, [0] * 4, [1] * 4, [*ys[:2], *out])
    return y, out


@handles("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default", "aten.max_pool1d.default",
         "aten.max_pool1d_with_indices.default")
def _max_pool(imp, a):
    g = imp.g
    name = op_name(imp.node.target)
    nd = 1 if "1d" in name else 2
    x4, back = _lift_2d(imp, float_input(imp, a["input"]), nd)
    lift = (lambda v: [1, *_pair(v, 1)]) if nd == 1 else _pair
    kernel = lift(a["kernel_size"])
    stride = lift(a["stride"]) if a["stride"] else kernel
    pad_ = [0, *_pair(a["padding"], 1)] if nd == 1 else _pair(a["padding"])
    y, out = _pool_windows(imp, x4, nd, kernel, stride, pad_, lift(a["dilation"]), -math.inf, "max")
    if "with_indices" in name:
        used = any(u.target is operator.getitem and u.args[1] == 1 and u.users for u in imp.node.users)
        idx = _POOL_INDICES
        if used:
            idx = g.reshape(_pool_indices(imp, x4, kernel, stride, pad_, lift(a["dilation"]), out), imp.out_shape(1))
        return [g.reshape(y, imp.out_shape(0)), idx]
    return back(y)


def _pool_indices(imp, x4, kernel, stride, padding, dilation, out):
    """The indices max_pool2d returns (read by max_unpool): for each window the flat index
    (row * W + col in the unpadded input) of its first maximum, in torch's scan order. The
    K = kh x kw window taps are K strided slices of the padded input side by side; the first
    tap equal to the window's maximum picks its entry of a constant table of positions."""
    g = imp.g
    n, c, h, w = g.shape(x4)
    high = [max(0, (o - 1) * s + d * (k - 1) + 1 - m - p)
            for o, s, d, k, m, p in zip(out, stride, dilation, kernel, (h, w), padding)]
    padded = _pad(g, x4, [0, 0, *padding], [0, 0, *high], -math.inf)
    (kh, kw), (sh, sw), (dh, dw), (ph, pw), (oh, ow) = kernel, stride, dilation, padding, out
    taps = [g.reshape(slice_tensor(g, padded, [0, 0, i * dh, j * dw], [1, 1, sh, sw], [n, c, oh, ow]), (n, c, oh, ow, 1))
            for i in range(kh) for j in range(kw)]
    k = len(taps)
    win = taps[0] if k == 1 else g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 4), *taps)
    top = g.reduce(aicc.ReduceMaxOp, win, [4], True)
    ks = np.arange(k, dtype=np.int64)
    first = g.reduce(aicc.ReduceMinOp, g.select(g.compare("eq", win, top), ks, np.array(k, np.int64)), [4], True)
    rows = (np.arange(oh)[:, None, None] * sh - ph + (ks // kw)[None, None, :] * dh)
    cols = (np.arange(ow)[None, :, None] * sw - pw + (ks % kw)[None, None, :] * dw)
    table = (rows * w + cols).astype(np.int64)  # (oh, ow, K)
    return g.reduce(aicc.ReduceSumOp, g.select(g.compare("eq", first, ks), table, np.array(0, np.int64)), [4], False)


@handles("aten.avg_pool2d.default", "aten.avg_pool1d.default")
def _avg_pool(imp, a):
    g = imp.g
    nd = 1 if "1d" in op_name(imp.node.target) else 2
    x4, back = _lift_2d(imp, float_input(imp, a["input"]), nd)
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
    name = op_name(imp.node.target)
    is_max = "max" in name
    x = float_input(imp, a["input"])
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
    y = slice_tensor(g, y, [0] * 4, [1] * 4, [*ys[:2], *out[1:]])
    y = g.reshape(y, (n, 1, ys[1], out[1] * out[2]))
    y = g.emit(lambda v: aicc_nn.Pool2dOp(v, kind, (kernel[0], 1), (stride[0], 1), (dil[0], 1)), y)
    ys = g.shape(y)
    y = g.reshape(slice_tensor(g, y, [0] * 4, [1] * 4, [*ys[:2], out[0], ys[3]]), (*lead, *out))
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
    name = op_name(imp.node.target)
    is_max = "max" in name
    nd = 1 if "1d" in name else 2
    x4, back = _lift_2d(imp, float_input(imp, a["input"]), nd)
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
        y = matmul(imp, y, np.ascontiguousarray(_adaptive_matrix(hw[1], out[1]).T.astype(dt)))
    return back(y)


# -- padding ----------------------------------------------------------------------------------


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
    name = op_name(imp.node.target)
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
        x = slice_tensor(g, x, [max(-p, 0) for p in low], [1] * rank,
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
