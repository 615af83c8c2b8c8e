"""Neural-network operators NumPy lacks, usable eagerly and while tracing.

On NumPy arrays each function computes its result in NumPy (floating input keeps its dtype, so
float32 in is float32 out), which lets a model run eagerly as its own reference. While tracing,
an argument carries a `__aicc_trace_op__(name, args, kwargs)` hook (frontends' Tracer implements
it) and the call becomes one aicc op. Dispatching through that hook keeps compiler/ free of any
import of frontends/.

Transcendental parts are evaluated in float64 and rounded once, so these are also the reference
semantics of the aicc ops (compiler/reference.py calls them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["relu", "gelu", "sigmoid", "softmax", "rsqrt", "erf", "conv2d", "conv_transpose2d", "max_pool2d",
           "avg_pool2d", "layer_norm", "attention"]


def _traced(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
    for a in (*args, *kwargs.values()):
        hook = getattr(type(a), "__aicc_trace_op__", None)
        if hook is not None:
            return True, hook(a, name, args, kwargs)
    return False, None


def _as_float(x: Any) -> tuple[np.ndarray, np.dtype]:
    """The input as an array and the dtype of the result (NumPy's: non-floats become float64)."""
    x = np.asarray(x)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.float64)
    return x, dtype


# math.erf is correctly rounded in double precision; vectorizing it avoids a scipy dependency.
_erf_object = np.frompyfunc(math.erf, 1, 1)


def _erf64(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.asarray(_erf_object(x), dtype=np.float64).reshape(x.shape)


def relu(x: Any) -> Any:
    """max(x, 0)."""
    done, out = _traced("relu", (x,), {})
    if done:
        return out
    x, dtype = _as_float(x)
    return np.maximum(x, 0).astype(dtype, copy=False)


def gelu(x: Any, approximate: str = "none") -> Any:
    """x * Phi(x); `approximate="tanh"` is the tanh form used by GPT-2 and friends."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f'gelu: approximate must be "none" or "tanh", got {approximate!r}')
    done, out = _traced("gelu", (x,), {"approximate": approximate})
    if done:
        return out
    x, dtype = _as_float(x)
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)
        y = 0.5 * x64 * (1.0 + np.tanh(inner))
    else:
        y = 0.5 * x64 * (1.0 + _erf64(x64 / math.sqrt(2.0)))
    return y.astype(dtype)


def sigmoid(x: Any) -> Any:
    """1 / (1 + exp(-x)), without overflow for large |x|."""
    done, out = _traced("sigmoid", (x,), {})
    if done:
        return out
    x, dtype = _as_float(x)
    x64 = x.astype(np.float64)
    e = np.exp(-np.abs(x64))
    y = np.where(x64 >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return y.astype(dtype)


def softmax(x: Any, axis: int = -1) -> Any:
    """exp(x - max) / sum(exp(x - max)) along `axis`."""
    done, out = _traced("softmax", (x,), {"axis": axis})
    if done:
        return out
    x, dtype = _as_float(x)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - np.max(x64, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(dtype)


def rsqrt(x: Any) -> Any:
    """1 / sqrt(x)."""
    done, out = _traced("rsqrt", (x,), {})
    if done:
        return out
    x, dtype = _as_float(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1.0 / np.sqrt(x.astype(np.float64))).astype(dtype)


def erf(x: Any) -> Any:
    """The error function."""
    done, out = _traced("erf", (x,), {})
    if done:
        return out
    x, dtype = _as_float(x)
    return _erf64(x).astype(dtype)


def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if np.isscalar(v) else tuple(int(a) for a in v)  # type: ignore[return-value]


def _windows(x: np.ndarray, kernel, stride, dilation) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) windows of an NCHW array (already padded)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh = (x.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] - dw * (kw - 1) - 1) // sw + 1
    rows = (np.arange(oh) * sh)[:, None] + (np.arange(kh) * dh)[None, :]
    cols = (np.arange(ow) * sw)[:, None] + (np.arange(kw) * dw)[None, :]
    return x[:, :, rows[:, None, :, None], cols[None, :, None, :]]


def _pad_hw(x: np.ndarray, padding: tuple[int, int], value: float) -> np.ndarray:
    ph, pw = padding
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def conv2d(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Any:
    """2-D convolution as torch.nn.functional.conv2d: NCHW input, (O, C/groups, KH, KW)
    weight, optional (O,) bias, symmetric zero padding."""
    kw = {"bias": bias, "stride": _pair(stride), "padding": _pair(padding),
          "dilation": _pair(dilation), "groups": int(groups)}
    done, out = _traced("conv2d", (x, weight), kw)
    if done:
        return out
    x, w = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    win = _windows(_pad_hw(x, kw["padding"], 0.0), w.shape[2:], kw["stride"], kw["dilation"])
    n, c, oh, ow = win.shape[:4]
    g = kw["groups"]
    y = np.einsum("ngchwij,gocij->ngohw", win.reshape(n, g, c // g, oh, ow, *w.shape[2:]),
                  w.reshape(g, w.shape[0] // g, c // g, *w.shape[2:])).reshape(n, w.shape[0], oh, ow)
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def conv_transpose2d(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """Transposed 2-D convolution as torch.nn.functional.conv_transpose2d: NCHW input,
    (C, O/groups, KH, KW) weight, optional (O,) bias."""
    kw = {"bias": bias, "stride": _pair(stride), "padding": _pair(padding),
          "output_padding": _pair(output_padding), "groups": int(groups), "dilation": _pair(dilation)}
    done, out = _traced("conv_transpose2d", (x, weight), kw)
    if done:
        return out
    x, w = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    (ph, pw), (oph, opw) = kw["padding"], kw["output_padding"]
    full = conv_transpose_full(x, w, kw["groups"], kw["stride"], kw["dilation"])
    full = np.pad(full, ((0, 0), (0, 0), (0, oph), (0, opw)))  # output_padding: zeros at the end
    fh, fw = full.shape[2:]
    # padding crops the full output at both ends; output_padding rows were added at the end
    y = full[:, :, ph: fh - ph, pw: fw - pw]
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def conv_transpose_full(x: np.ndarray, w: np.ndarray, groups: int, strides, dilations) -> np.ndarray:
    """The transposed convolution before any crop, in float64: every input pixel (h, w) times
    the kernel, added at (h s + i d, w s + j d); (N, O, (H-1) s + d (KH-1) + 1, ...)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    fh, fw = (h - 1) * sh + dh * (kh - 1) + 1, (wd - 1) * sw + dw * (kw - 1) + 1
    full = np.zeros((n, groups, og, fh, fw))
    xg, wg = x.reshape(n, groups, c // groups, h, wd), w.reshape(groups, c // groups, og, kh, kw)
    for i in range(kh):
        for j in range(kw):
            full[:, :, :, i * dh: i * dh + (h - 1) * sh + 1: sh, j * dw: j * dw + (wd - 1) * sw + 1: sw] += \
                np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, i, j])
    return full.reshape(n, groups * og, fh, fw)


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1) -> Any:
    """Max pooling as torch.nn.functional.max_pool2d (padding counts as -inf)."""
    kw = {"kernel_size": _pair(kernel_size), "stride": _pair(stride if stride is not None else kernel_size),
          "padding": _pair(padding), "dilation": _pair(dilation)}
    done, out = _traced("max_pool2d", (x,), kw)
    if done:
        return out
    x = np.asarray(x)
    win = _windows(_pad_hw(x, kw["padding"], -np.inf), kw["kernel_size"], kw["stride"], kw["dilation"])
    return win.max(axis=(4, 5)).astype(np.float32)


def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Average pooling as torch.nn.functional.avg_pool2d (zero padding counted in the mean)."""
    kw = {"kernel_size": _pair(kernel_size), "stride": _pair(stride if stride is not None else kernel_size),
          "padding": _pair(padding)}
    done, out = _traced("avg_pool2d", (x,), kw)
    if done:
        return out
    x = np.asarray(x, np.float64)
    win = _windows(_pad_hw(x, kw["padding"], 0.0), kw["kernel_size"], kw["stride"], (1, 1))
    return win.mean(axis=(4, 5)).astype(np.float32)


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5, axis: Any = -1) -> Any:
    """(x - mean) / sqrt(var + eps) * weight + bias over `axis` (the last by default)."""
    done, out = _traced("layer_norm", (x,), {"weight": weight, "bias": bias, "eps": eps, "axis": axis})
    if done:
        return out
    x64 = np.asarray(x, np.float64)
    mean = x64.mean(axis=axis, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axis, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    if weight is not None:
        y = y * np.asarray(weight, np.float64)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y.astype(np.float32)


def attention(q: Any, k: Any, v: Any, mask: Any = None, causal: bool = False, scale: float | None = None) -> Any:
    """softmax(q k^T * scale + mask) v over the last two dims, as
    torch.nn.functional.scaled_dot_product_attention (scale defaults to 1/sqrt(head dim);
    `causal` masks the keys after each query)."""
    done, out = _traced("attention", (q, k, v), {"mask": mask, "causal": causal, "scale": scale})
    if done:
        return out
    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    s = (q64 @ np.swapaxes(k64, -1, -2)) * (scale if scale is not None else 1.0 / math.sqrt(q64.shape[-1]))
    if mask is not None:
        s = s + np.asarray(mask, np.float64)
    if causal:
        s = s + causal_mask(s.shape[-2], s.shape[-1])
    return (softmax(s, axis=-1) @ v64).astype(np.float32)


def causal_mask(lq: int, lk: int) -> np.ndarray:
    """0 where query i may see key j (j <= i), -inf elsewhere: torch's is_causal, aligned at
    the top left when there are more keys than queries."""
    return np.where(np.tril(np.ones((lq, lk), bool)), 0.0, -np.inf).astype(np.float32)
