"""Handlers of interpolation (F.interpolate's upsample ops).

One aicc.resample per resized dim (interpolation is separable), as the ONNX importer's Resize.
The tap tables are torch's own (aten/src/ATen/native/UpSample.h and cpu/UpSampleKernel.cpp),
computed in float32 as torch computes them: the source index of output i is
    nearest         floor(i * s)                   (ONNX: asymmetric + floor)
    nearest-exact   floor((i + 0.5) * s - 0.5 + 0.5)  (ONNX: half_pixel + round_prefer_ceil)
    linear, cubic   (i + 0.5) * s - 0.5, or i * s with align_corners  (ONNX: pytorch_half_pixel
                    / align_corners, with a cubic coefficient of -0.75)
with s = 1 / scale_factor when the caller gave one, in / out otherwise ((in-1) / (out-1) with
align_corners). ONNX's reference computes these in float64, which picks another source pixel
where float32 rounds across an integer (nearest from 6 to 74 pixels: output 37 reads pixel 2
in torch, 3 in float64), and gives an output of size 1 its first pixel rather than torch's
centre; hence torch's arithmetic here.
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input, op_name

HANDLERS = HandlerTable()
handles = HANDLERS.handles


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
    name = op_name(imp.node.target).split(".")[1]  # upsample_bilinear2d
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
        x = float_input(imp, x)
    out = imp.out_shape()[-nd:]
    for d in range(nd):
        axis = 2 + d
        idx, w = upsample_taps(kind, shape[axis], out[d], align, scales[d])
        if w is None and np.array_equal(idx, np.arange(shape[axis])):
            continue
        x = g.emit(lambda v, axis=axis, idx=idx, w=w: aicc_nn.ResampleOp(v, axis, idx, w), x)
    return x
