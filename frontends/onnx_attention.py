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
    if precision not in (None, 1, 11):  # float32, float64
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
    if precision == 11:  # the softmax in float64, its result rounded back
        p = g.cast(g.emit(lambda x: aicc.SoftmaxOp(x, len(g.shape(t)) - 1), g.cast(t, np.float64)), np.float32)
    else:
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


@handles("SwiGLU")
def _op_swiglu(imp, node, ins, at):
    """a * sigmoid(alpha * a) * b."""
    g, a, b = imp.g, ins[0], ins[1]
    g.require_float(node.op_type, a, b)
    if g.shape(a) != g.shape(b):
        raise unsupported(imp, node, "inputs of different shapes")
    alpha = float(at.get("alpha", 1.0))
    z = a if alpha == 1.0 else g.mul(a, np.array(alpha, g.dtype(a)))
    return [g.mul(g.mul(a, g.unary(aicc.SigmoidOp, z)), b)]


@handles("CausalConvWithState")
def _op_causal_conv_with_state(imp, node, ins, at):
    """A depthwise 1-D convolution over [past_state (or zeros), input] (run as a 2-D one on a
    height-1 view), optionally SiLU; the new state is the last k - 1 positions."""
    g, x, w = imp.g, ins[0], ins[1]
    bias, past = _opt(ins, 2), _opt(ins, 3)
    g.require_float(node.op_type, x, w)
    act = at.get("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise unsupported(imp, node, f"activation='{act}'")
    shape = g.shape(x)
    if len(shape) != 3 or len(g.shape(w)) != 3 or g.shape(w)[1] != 1:
        raise unsupported(imp, node, f"input {shape} with weight {g.shape(w)}")
    b, c, n = shape
    k = g.shape(w)[2]
    if past is None:
        past = np.zeros((b, c, k - 1), g.dtype(x))
    padded = x if k == 1 else g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 2), past, x)
    y = g.emit(lambda v, f: aicc_nn.Conv2dOp(v, f, (1, 1), (1, 1), c),
               g.reshape(padded, (b, c, 1, n + k - 1)), g.reshape(w, (c, 1, 1, k)))
    y = g.reshape(y, (b, c, n))
    if bias is not None:
        y = g.add(y, g.reshape(g.cast_like(bias, y), (c, 1)))
    if act != "none":
        y = g.mul(y, g.unary(aicc.SigmoidOp, y))
    if k == 1:
        state = np.zeros((b, c, 0), g.dtype(x))
    else:
        state = g.emit(lambda v: aicc_nn.SliceOp(v, [0, 0, n], [1, 1, 1], [b, c, k - 1]), padded) \
            if not isinstance(padded, np.ndarray) else padded[:, :, n:]
    return [y, state][: len(node.output)]


@handles("LinearAttention")
def _op_linear_attention(imp, node, ins, at):
    """The recurrent state (B, H_kv, d_k, d_v) updated once per time step, unrolled over the
    static sequence: decay (gated), the delta rule's correction beta * (v - k @ S), the rank-1
    update k^T v, and the read q @ S (key / value heads repeated for GQA), as the reference."""
    g = imp.g
    q, k, v = ins[0], ins[1], ins[2]
    past, decay, beta = _opt(ins, 3), _opt(ins, 4), _opt(ins, 5)
    rule = at.get("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise unsupported(imp, node, f"update_rule='{rule}'")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise unsupported(imp, node, f"update_rule='{rule}' with these decay / beta inputs")
    g.require_float(node.op_type, q, k, v)
    if any(g.dtype(x) != np.float32 for x in (q, k, v)) or any(len(g.shape(x)) != 3 for x in (q, k, v)):
        raise unsupported(imp, node, "inputs other than rank-3 float32")
    hq, hkv = int(at["q_num_heads"]), int(at["kv_num_heads"])
    if hq % hkv:
        raise unsupported(imp, node, f"{hq} query heads over {hkv} key / value heads")
    b, t, _ = g.shape(q)
    q4, k4, v4 = _split_heads(g, q, hq), _split_heads(g, k, hkv), _split_heads(g, v, hkv)
    dk, dv = g.shape(q4)[3], g.shape(v4)[3]
    scale = at.get("scale")
    scale = 1.0 / math.sqrt(dk) if not scale else float(scale)

    def step(x, i):  # x[:, :, i:i+1, :] of a (B, H, T, D) tensor
        s = g.shape(x)
        return g.emit(lambda y: aicc_nn.SliceOp(y, [0, 0, i, 0], [1, 1, 1, 1], [s[0], s[1], 1, s[3]]), x) \
            if not isinstance(x, np.ndarray) else x[:, :, i:i + 1, :]

    if decay is not None:
        last = g.shape(decay)[-1]
        if last == hkv:
            decay4 = g.transpose(g.reshape(decay, (b, t, hkv, 1)), (0, 2, 1, 3))
        elif last == hkv * dk:
            decay4 = _split_heads(g, decay, hkv)
        else:
            raise unsupported(imp, node, f"a decay of shape {g.shape(decay)}")
    if beta is not None:
        last = g.shape(beta)[-1]
        if last not in (hkv, 1):
            raise unsupported(imp, node, f"a beta of shape {g.shape(beta)}")
        beta4 = g.transpose(g.reshape(beta, (b, t, last, 1)), (0, 2, 1, 3))
    state = g.cast(past, np.float32) if past is not None else np.zeros((b, hkv, dk, dv), np.float32)
    r = hq // hkv
    outs = []
    for i in range(t):
        q_t, k_t, v_t = step(q4, i), step(k4, i), step(v4, i)  # (B, H, 1, D)
        if gating:
            d_t = step(decay4, i)  # (B, H_kv, 1, 1 | d_k)
            d_t = g.reshape(d_t, (b, hkv, g.shape(d_t)[3], 1))
            state = g.mul(state, g.unary(aicc.ExpOp, d_t))
        if delta:
            retrieved = g.matmul(k_t, state)  # (B, H_kv, 1, d_v)
            v_t = g.mul(step(beta4, i), g.sub(v_t, retrieved))
        state = g.add(state, g.mul(g.reshape(k_t, (b, hkv, dk, 1)), v_t))
        read = state
        if r > 1:
            read = g.reshape(g.broadcast_to(g.reshape(state, (b, hkv, 1, dk, dv)), (b, hkv, r, dk, dv)),
                             (b, hq, dk, dv))
        outs.append(g.mul(g.matmul(q_t, read), np.array(scale, np.float32)))  # (B, H_q, 1, d_v)
    y = outs[0] if t == 1 else g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), 2), *outs)
    y = g.reshape(g.transpose(y, (0, 2, 1, 3)), (b, t, hq * dv))
    if past is not None:
        state = g.cast(state, g.dtype(past))
    return [y, state][: len(node.output)]
