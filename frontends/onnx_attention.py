"""ONNX handlers for the transformer ops: Attention (opsets 23-25) and RotaryEmbedding.

Attention is emitted as the unfused ops, matmul -> scale -> (additive mask) -> softmax ->
matmul, which the `fuse-attention` pass turns into one `aicc_fused.attention` (a causal mask
that is a constant 0 / -inf table becomes its `causal` flag). The masks follow the ONNX
reference (onnx/reference/ops/op_attention.py): a bool mask keeps where true, a mask shorter
than the keys is padded with -inf, `is_causal` and the sliding window are aligned bottom-right
(offset by the past keys, or per batch by `nonpad_kv_seqlen`), and a query row whose bias masks
every key gives zeros. GQA repeats each key / value head (h0, h0, h1, h1, ...).
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.onnx_common import unsupported
from frontends.registry import HandlerTable

__all__ = ["HANDLERS"]

HANDLERS = HandlerTable()
handles = HANDLERS.handles

_NEG_INF = np.array(-np.inf, np.float32)
_ZERO = np.array(0.0, np.float32)


def _opt(ins, i):
    return ins[i] if len(ins) > i and ins[i] is not None else None


def _split_heads(g, x, heads):
    """(b, s, heads * d) -> (b, heads, s, d)."""
    b, s, hidden = g.shape(x)
    return g.transpose(g.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _as_bias(g, mask):
    """A bool keep-mask as an additive 0 / -inf bias; a float mask as it is."""
    if g.dtype(mask) == np.bool_:
        return g.select(mask, _ZERO, _NEG_INF)
    return g.cast(mask, np.float32)


def _allowed_diff(g, sq, skv, offset):
    """i - j + offset for query i and key j: an int64 (sq, skv) array for a static offset, or
    an SSA value of shape (b, 1, sq, skv) for a per-batch offset (a runtime (b,) vector)."""
    base = np.arange(sq, dtype=np.int64)[:, None] - np.arange(skv, dtype=np.int64)[None, :]
    if isinstance(offset, int):
        return base + offset
    b = g.shape(offset)[0]
    return g.add(base.reshape(1, 1, sq, skv), g.reshape(offset, (b, 1, 1, 1)))


@handles("Attention")
def _op_attention(imp, node, ins, at):
    g = imp.g
    q, k, v = ins[0], ins[1], ins[2]
    mask, past_k, past_v, nonpad = _opt(ins, 3), _opt(ins, 4), _opt(ins, 5), _opt(ins, 6)
    g.require_float(node.op_type, q, k, v)
    if any(g.dtype(x) != np.float32 for x in (q, k, v)):
        raise unsupported(imp, node, "Q / K / V other than float32")
    precision = at.get("softmax_precision")
    if precision not in (None, 1):  # 1: float32
        raise unsupported(imp, node, f"softmax_precision={precision}")
    if (past_k is None) != (past_v is None):
        raise unsupported(imp, node, "past_key without past_value (or the reverse)")
    if nonpad is not None and past_k is not None:
        raise unsupported(imp, node, "nonpad_kv_seqlen with past_key / past_value")
    rank = len(g.shape(q))
    if rank == 3:
        if "q_num_heads" not in at or "kv_num_heads" not in at:
            raise unsupported(imp, node, "3-D inputs without q_num_heads / kv_num_heads")
        q = _split_heads(g, q, at["q_num_heads"])
        k = _split_heads(g, k, at["kv_num_heads"])
        v = _split_heads(g, v, at["kv_num_heads"])
    elif rank != 4:
        raise unsupported(imp, node, f"rank-{rank} inputs")
    b, qh, sq, dq = g.shape(q)
    scale = at.get("scale")
    if scale is None:
        scale = 1 / math.sqrt(dq)
    # the reference scales q and k by sqrt(scale) each, rounded to float32
    s = np.float32(math.sqrt(scale))
    scale = float(np.float32(s) * np.float32(s))
    if past_k is not None:
        k = g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 2), past_k, k)
        v = g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 2), past_v, v)
    present_k, present_v = k, v
    kvh, skv = g.shape(k)[1], g.shape(k)[2]
    past = g.shape(past_k)[2] if past_k is not None else 0

    # the additive bias: mask, causal, window, padding
    bias = None
    if mask is not None:
        ms = g.shape(mask)
        if ms[-1] < skv:  # a shorter mask is padded with "masked"
            pad_value = 0.0 if g.dtype(mask) == np.bool_ else -math.inf
            rank_m = len(ms)
            mask = g.emit(lambda x: aicc_nn.PadOp(x, [0] * rank_m, [0] * (rank_m - 1) + [skv - ms[-1]], pad_value), mask) \
                if not isinstance(mask, np.ndarray) else np.pad(
                    mask, [(0, 0)] * (rank_m - 1) + [(0, skv - ms[-1])], constant_values=pad_value)
        bias = _as_bias(g, mask)
    left, right = at.get("left_window_size", -1), at.get("right_window_size", -1)
    causal = bool(at.get("is_causal", 0))
    if causal or left >= 0 or right >= 0:
        offset = past
        if past_k is None and nonpad is not None:
            offset = g.sub(g.cast(nonpad, np.int64), np.array(sq, np.int64))
        diff = _allowed_diff(g, sq, skv, offset)
        conds = []
        if causal:
            conds.append(g.compare("ge", diff, np.array(0, np.int64)))
        if left >= 0:
            conds.append(g.compare("le", diff, np.array(left, np.int64)))
        if right >= 0:
            conds.append(g.compare("ge", diff, np.array(-right, np.int64)))
        allowed = conds[0]
        for c in conds[1:]:
            allowed = g.select(allowed, c, np.array(False))
        extra = g.select(allowed, _ZERO, _NEG_INF)
        bias = extra if bias is None else g.add(bias, extra)
    if nonpad is not None:
        keep = g.compare("lt", np.arange(skv, dtype=np.int64).reshape(1, 1, 1, skv),
                         g.reshape(g.cast(nonpad, np.int64), (b, 1, 1, 1)))
        extra = g.select(keep, _ZERO, _NEG_INF)
        bias = extra if bias is None else g.add(bias, extra)

    if qh != kvh:  # grouped-query attention: each kv head serves qh / kvh query heads
        if qh % kvh:
            raise unsupported(imp, node, f"{qh} query heads over {kvh} key / value heads")
        r = qh // kvh

        def repeat(x):
            _, _, n, d = g.shape(x)
            y = g.broadcast_to(g.reshape(x, (b, kvh, 1, n, d)), (b, kvh, r, n, d))
            return g.reshape(y, (b, qh, n, d))

        k, v = repeat(k), repeat(v)

    scores = g.mul(g.matmul(q, g.transpose(k, (0, 1, 3, 2))), np.array(scale, np.float32))
    softcap = float(at.get("softcap", 0.0) or 0.0)
    if softcap > 0:
        c = np.array(softcap, np.float32)
        scores = g.mul(g.unary(aicc.TanhOp, g.div(scores, c)), c)
    mode = int(at.get("qk_matmul_output_mode", 0))
    qk_out = scores
    t = scores if bias is None else g.add(scores, bias)
    if mode == 2:
        qk_out = t
    p = g.emit(lambda x: aicc.SoftmaxOp(x, len(g.shape(t)) - 1), t)
    if bias is not None:  # a row whose bias masks every key gives zeros, not NaN
        if isinstance(bias, np.ndarray):
            dead = np.isneginf(np.max(bias, axis=-1, keepdims=True))
            if dead.any():
                p = g.select(dead, _ZERO, p)
        else:
            dead = g.compare("eq", g.reduce(aicc.ReduceMaxOp, bias, [len(g.shape(bias)) - 1], True), _NEG_INF)
            p = g.select(dead, _ZERO, p)
    if mode == 3:
        qk_out = p
    elif mode not in (0, 1, 2):
        raise unsupported(imp, node, f"qk_matmul_output_mode={mode}")
    y = g.matmul(p, v)
    if rank == 3:
        y = g.transpose(y, (0, 2, 1, 3))
        y = g.reshape(y, (b, sq, qh * g.shape(y)[3]))
    if len(g.shape(qk_out)) == 4 and g.shape(qk_out) != (b, qh, sq, skv):
        qk_out = g.broadcast_to(qk_out, (b, qh, sq, skv))
    return [y, present_k, present_v, qk_out][: len(node.output)]


@handles("RotaryEmbedding")
def _op_rotary_embedding(imp, node, ins, at):
    """x * cos + rotate(x) * sin on the first rotary_embedding_dim features of each head, with
    the caches gathered at position_ids (or given per batch and position)."""
    g, x, cos, sin = imp.g, ins[0], ins[1], ins[2]
    pos = _opt(ins, 3)
    g.require_float(node.op_type, x, cos, sin)
    shape = g.shape(x)
    if len(shape) == 4:  # (b, heads, s, d) -> (b, s, heads, d)
        x4 = g.transpose(x, (0, 2, 1, 3))
    elif len(shape) == 3:
        heads = at.get("num_heads", 0)
        if not heads:
            raise unsupported(imp, node, "a 3-D input without num_heads")
        x4 = g.reshape(x, (shape[0], shape[1], heads, shape[2] // heads))
    else:
        raise unsupported(imp, node, f"a rank-{len(shape)} input")
    bsz, seq, heads, d = g.shape(x4)
    rd = at.get("rotary_embedding_dim", 0) or d
    half = rd // 2
    if pos is not None:
        cos = g.emit(lambda c, i: aicc_nn.GatherOp(c, i, 0), cos, pos) if not (
            isinstance(cos, np.ndarray) and isinstance(pos, np.ndarray)) else cos[pos]
        sin = g.emit(lambda c, i: aicc_nn.GatherOp(c, i, 0), sin, pos) if not (
            isinstance(sin, np.ndarray) and isinstance(pos, np.ndarray)) else sin[pos]
    if g.shape(cos)[-1] != half or g.shape(sin)[-1] != half:
        raise unsupported(imp, node, "caches whose last dim is not rotary_embedding_dim / 2")
    cos = g.reshape(cos, (bsz, seq, 1, half))
    sin = g.reshape(sin, (bsz, seq, 1, half))

    def part(start, step, count):
        return g.emit(lambda v: aicc_nn.SliceOp(v, [0, 0, 0, start], [1, 1, 1, step], [bsz, seq, heads, count]), x4)

    if at.get("interleaved", 0):
        x1, x2 = part(0, 2, half), part(1, 2, half)
    else:
        x1, x2 = part(0, 1, half), part(half, 1, half)
    real = g.sub(g.mul(cos, x1), g.mul(sin, x2))
    imag = g.add(g.mul(sin, x1), g.mul(cos, x2))
    if at.get("interleaved", 0):
        pair = (bsz, seq, heads, half, 1)
        rot = g.emit(lambda a, c: aicc_nn.ConcatOp([a, c], 4), g.reshape(real, pair), g.reshape(imag, pair))
        rot = g.reshape(rot, (bsz, seq, heads, rd))
    else:
        rot = g.emit(lambda a, c: aicc_nn.ConcatOp([a, c], 3), real, imag)
    if rd < d:
        rot = g.emit(lambda a, c: aicc_nn.ConcatOp([a, c], 3), rot, part(rd, 1, d - rd))
    if len(shape) == 3:
        return [g.reshape(rot, shape)]
    return [g.transpose(rot, (0, 2, 1, 3))]
