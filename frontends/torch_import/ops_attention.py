"""Handler of scaled_dot_product_attention: matmuls and a softmax, with the mask, causal mask,
grouped-query heads and torch's safe softmax for fully masked rows.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input
from frontends.torch_import.ops_norm import zero_fully_masked

HANDLERS = HandlerTable()
handles = HANDLERS.handles


@handles("aten.scaled_dot_product_attention.default")
def _sdpa(imp, a):
    g = imp.g
    q, k, v = (float_input(imp, a[n]) for n in ("query", "key", "value"))
    if a.get("dropout_p", 0.0):
        raise imp.unsupported("attention dropout (dropout_p > 0)")
    sq, sk = g.shape(q), g.shape(k)
    if a.get("enable_gqa") and len(sq) >= 3 and sq[-3] != sk[-3]:
        rep = sq[-3] // sk[-3]

        def repeat_heads(t):  # repeat_interleave along the head dim
            s = g.shape(t)
            t = g.broadcast_to(g.reshape(t, (*s[:-2], 1, *s[-2:])), (*s[:-2], rep, *s[-2:]))
            return g.reshape(t, (*s[:-3], s[-3] * rep, *s[-2:]))

        k, v = repeat_heads(k), repeat_heads(v)
    L, S, E = sq[-2], g.shape(k)[-2], sq[-1]
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    rank = len(g.shape(k))
    kt = g.transpose(k, [*range(rank - 2), rank - 1, rank - 2])
    scores = g.mul(g.matmul(q, kt), g.scalar(scale, q))
    mask = a.get("attn_mask")
    maybe_empty_rows = False
    if a.get("is_causal"):
        mask = np.tril(np.ones((L, S), np.bool_))
    if mask is not None:
        if g.dtype(mask) == np.bool_:
            scores = g.select(mask, scores, g.scalar(-math.inf, scores))
            maybe_empty_rows = not isinstance(mask, np.ndarray) or not np.all(mask.any(axis=-1))
        else:
            mask = imp.operand(mask, g.dtype(scores))
            scores = g.add(scores, mask)
            maybe_empty_rows = not isinstance(mask, np.ndarray) or bool(np.any(np.all(np.isneginf(mask), axis=-1)))
    p = g.emit(lambda t: aicc.SoftmaxOp(t, len(g.shape(t)) - 1), scores)
    if maybe_empty_rows:
        p = zero_fully_masked(g, scores, p, len(g.shape(scores)) - 1)
    return g.matmul(p, v)
