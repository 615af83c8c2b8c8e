"""ONNX handlers for the recurrent ops: RNN, GRU and LSTM, unrolled over the static sequence.

The input projection of every time step is one matmul (X viewed as (seq * batch, input) times
W^T, plus W's bias); each step then adds h @ R^T and R's bias and applies the cell, whose
elementwise ops the fusion passes merge. Directions: forward, reverse and bidirectional (the
two directions unrolled side by side); layout 0 and 1. Activations: Sigmoid, Tanh and Relu
(others, and LSTM's input_forget, are refused). sequence_lens must be known at compile time
(an initializer, or a graph input specialized on its example value) and give every sequence
the full length.
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.onnx_common import const, unsupported
from frontends.onnx_nn import slice_tensor
from frontends.registry import HandlerTable

__all__ = ["HANDLERS"]

HANDLERS = HandlerTable()
handles = HANDLERS.handles

_ACTS = {"sigmoid": aicc.SigmoidOp, "tanh": aicc.TanhOp, "relu": aicc.ReluOp}


def _opt(ins, i):
    return ins[i] if len(ins) > i and ins[i] is not None else None


def _cols(g, x, start, count):
    """x[:, start:start + count] of a 2-D x."""
    rows = g.shape(x)[0]
    return slice_tensor(g, x, [0, start], [1, 1], [rows, count])


def _row(g, x, d):
    """x[d] of a tensor whose first dim is the direction."""
    s = g.shape(x)
    return g.reshape(slice_tensor(g, x, [d] + [0] * (len(s) - 1), [1] * len(s), [1, *s[1:]]), s[1:])


class _Cell:
    """What the three ops share: operands per direction, activations, clip, outputs."""

    def __init__(self, imp, node, ins, at, n_gates, default_acts):
        g = self.g = imp.g
        self.imp, self.node = imp, node
        x, w, r = ins[0], ins[1], ins[2]
        g.require_float(node.op_type, x, w, r)
        self.layout = int(at.get("layout", 0))
        if self.layout:
            x = g.transpose(x, (1, 0, 2))
        self.x = x
        self.seq, self.batch, self.inp = g.shape(x)
        self.hidden = int(at["hidden_size"])
        direction = at.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise unsupported(imp, node, f"direction='{direction}'")
        self.dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        acts = [a.lower() for a in at.get("activations", default_acts * len(self.dirs))]
        if at.get("activation_alpha") or at.get("activation_beta"):
            raise unsupported(imp, node, "activation_alpha / activation_beta")
        for a in acts:
            if a not in _ACTS:
                raise unsupported(imp, node, f"activation '{a}'")
        n = len(default_acts)
        self.acts = [acts[i * n:(i + 1) * n] for i in range(len(self.dirs))]
        self.clip = at.get("clip")
        self.w, self.r, self.n_gates = w, r, n_gates
        self.b = _opt(ins, 3)
        lens = _opt(ins, 4)
        if lens is not None:
            lens = const(imp, node, lens, "sequence_lens input").reshape(-1)
            if np.any(lens != self.seq):
                raise unsupported(imp, node, "sequence_lens shorter than the sequence")
        self.h0 = _opt(ins, 5)

    def act(self, d, i, v):
        if self.clip is not None:
            c = float(self.clip)
            v = self.g.emit(aicc.MinimumOp, self.g.emit(aicc.MaximumOp, v, np.array(-c, np.float32)),
                            np.array(c, np.float32))
        return self.g.unary(_ACTS[self.acts[d][i]], v)

    def projections(self, d):
        """[x_t @ W^T + Wb for t in range(seq)] and (R^T, Rb) of direction d."""
        g, gh = self.g, self.n_gates * self.hidden
        w_t = g.transpose(_row(g, self.w, d), (1, 0))  # (input, G * H)
        xp = g.matmul(g.reshape(self.x, (self.seq * self.batch, self.inp)), w_t)
        rb = None
        if self.b is not None:
            bd = _row(g, self.b, d)
            xp = g.add(xp, g.reshape(slice_tensor(g, bd, [0], [1], [gh]), (1, gh)))
            rb = g.reshape(slice_tensor(g, bd, [gh], [1], [gh]), (1, gh))
        steps = [slice_tensor(g, xp, [t * self.batch, 0], [1, 1], [self.batch, gh]) for t in range(self.seq)]
        return steps, g.transpose(_row(g, self.r, d), (1, 0)), rb

    def initial(self, v, d):
        if v is None:
            return np.zeros((self.batch, self.hidden), np.float32)
        return _row(self.g, v, d)

    def order(self, d):
        return range(self.seq) if self.dirs[d] == "forward" else range(self.seq - 1, -1, -1)

    def outputs(self, ys, finals):
        """Y (seq, dirs, batch, H) from ys[d][t], and each of finals as (dirs, batch, H)."""
        g = self.g
        nd, b, h = len(self.dirs), self.batch, self.hidden

        def cat(vals, axis):
            vals = list(vals)
            return vals[0] if len(vals) == 1 else g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), axis), *vals)

        y = cat((cat((g.reshape(ys[d][t], (1, 1, b, h)) for d in range(nd)), 1) for t in range(self.seq)), 0)
        outs = [y] + [cat((g.reshape(f[d], (1, b, h)) for d in range(nd)), 0) for f in finals]
        if self.layout:
            outs = [g.transpose(outs[0], (2, 0, 1, 3))] + [g.transpose(o, (1, 0, 2)) for o in outs[1:]]
        return outs[: len(self.node.output)]


def _mm(g, h, r_t):
    return g.matmul(h, r_t)


@handles("RNN")
def _op_rnn(imp, node, ins, at):
    c = _Cell(imp, node, ins, at, 1, ["Tanh"])
    g = c.g
    ys, finals = [], []
    for d in range(len(c.dirs)):
        xs, r_t, rb = c.projections(d)
        h = c.initial(c.h0, d)
        y = [None] * c.seq
        for t in c.order(d):
            pre = g.add(xs[t], _mm(g, h, r_t))
            if rb is not None:
                pre = g.add(pre, rb)
            h = y[t] = c.act(d, 0, pre)
        ys.append(y)
        finals.append(h)
    return c.outputs(ys, [finals])


@handles("GRU")
def _op_gru(imp, node, ins, at):
    c = _Cell(imp, node, ins, at, 3, ["Sigmoid", "Tanh"])
    g, hs = c.g, c.hidden
    lbr = bool(at.get("linear_before_reset", 0))
    ys, finals = [], []
    for d in range(len(c.dirs)):
        xs, r_t, rb = c.projections(d)
        r_zr, r_h = _cols(g, r_t, 0, 2 * hs), _cols(g, r_t, 2 * hs, hs)
        rb_zr = rb_h = None
        if rb is not None:
            rb_zr, rb_h = _cols(g, rb, 0, 2 * hs), _cols(g, rb, 2 * hs, hs)
        h = c.initial(c.h0, d)
        y = [None] * c.seq
        for t in c.order(d):
            zr = g.add(_cols(g, xs[t], 0, 2 * hs), _mm(g, h, r_zr))
            if rb_zr is not None:
                zr = g.add(zr, rb_zr)
            z = c.act(d, 0, _cols(g, zr, 0, hs))
            r = c.act(d, 0, _cols(g, zr, hs, hs))
            xh = _cols(g, xs[t], 2 * hs, hs)
            if lbr:
                hr = _mm(g, h, r_h)
                if rb_h is not None:
                    hr = g.add(hr, rb_h)
                pre = g.add(xh, g.mul(r, hr))
            else:
                pre = g.add(xh, _mm(g, g.mul(r, h), r_h))
                if rb_h is not None:
                    pre = g.add(pre, rb_h)
            hh = c.act(d, 1, pre)
            one = np.array(1.0, np.float32)
            h = y[t] = g.add(g.mul(g.sub(one, z), hh), g.mul(z, h))
        ys.append(y)
        finals.append(h)
    return c.outputs(ys, [finals])


@handles("LSTM")
def _op_lstm(imp, node, ins, at):
    c = _Cell(imp, node, ins, at, 4, ["Sigmoid", "Tanh", "Tanh"])
    g, hs = c.g, c.hidden
    if at.get("input_forget", 0):
        raise unsupported(imp, node, "input_forget=1")
    c0, peep = _opt(ins, 6), _opt(ins, 7)
    ys, hf, cf = [], [], []
    for d in range(len(c.dirs)):
        xs, r_t, rb = c.projections(d)
        p = None
        if peep is not None:
            pd = _row(g, peep, d)
            p = [g.reshape(slice_tensor(g, pd, [k * hs], [1], [hs]), (1, hs)) for k in range(3)]  # i, o, f
        h, cell = c.initial(c.h0, d), c.initial(c0, d)
        y = [None] * c.seq
        for t in c.order(d):
            pre = g.add(xs[t], _mm(g, h, r_t))
            if rb is not None:
                pre = g.add(pre, rb)
            gi, go, gf, gc = (_cols(g, pre, k * hs, hs) for k in range(4))
            if p is not None:
                gi = g.add(gi, g.mul(p[0], cell))
                gf = g.add(gf, g.mul(p[2], cell))
            i = c.act(d, 0, gi)
            f = c.act(d, 0, gf)
            cell = g.add(g.mul(f, cell), g.mul(i, c.act(d, 1, gc)))
            if p is not None:
                go = g.add(go, g.mul(p[1], cell))
            o = c.act(d, 0, go)
            h = y[t] = g.mul(o, c.act(d, 2, cell))
        ys.append(y)
        hf.append(h)
        cf.append(cell)
    return c.outputs(ys, [hf, cf])
