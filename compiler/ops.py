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

__all__ = ["relu", "gelu", "sigmoid", "softmax", "rsqrt", "erf"]


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
