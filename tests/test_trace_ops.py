"""The NumPy tracer's indexing, joining and gathering, and compiler.ops' NN functions
(conv2d, pooling, layer norm, attention): compiled results against NumPy and torch."""

from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler import ops

RNG = np.random.default_rng(1)


def r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


INDEXING = {
    "basic": lambda x: x[1:, ::2] * 2 + x[-1, None, ::2],
    "negative_step": lambda x: x[::-1, 3:0:-2],
    "ellipsis_int": lambda x: x[..., 2, None] + x[0],
    "index_array": lambda x: x[np.array([3, 0, 0, -1])],
    "concat_stack": lambda x: np.concatenate([x, x[:2] * 3], axis=0)[None] + np.stack([x[0]] * 6, axis=0)[:, None, :7][:, 0],
    "take": lambda x: np.take(x, np.array([[6, 0], [1, 1]]), axis=1) + np.take_along_axis(x, np.array([[0, 1], [2, 3], [6, 6], [1, 1]]), axis=1)[:, None, :],
    "cumsum_pad_prod": lambda x: np.pad(np.cumsum(x, axis=1), ((1, 2), (0, 1)), constant_values=0.5) * np.prod(x[:, :3]),
}


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing_and_joining_match_numpy(name):
    fn = INDEXING[name]
    x = r(4, 7)
    np.testing.assert_allclose(compiler.jit(fn)(x), fn(x), rtol=1e-5, atol=1e-6)


def test_indexing_errors():
    with pytest.raises(compiler.ShapeError, match="out of bounds"):
        compiler.jit(lambda x: x[5])(r(4))
    with pytest.raises(compiler.ShapeError, match="too many indices"):
        compiler.jit(lambda x: x[0, 0])(r(4))
    with pytest.raises(compiler.UnsupportedOpError, match="test_trace_ops.py"):
        compiler.jit(lambda x: x[1.5])(r(4))


torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.mark.parametrize("shape,w,kw", [
    ((1, 3, 7, 7), (5, 3, 3, 3), {"stride": 2, "padding": 1}),
    ((2, 4, 9, 6), (8, 1, 3, 3), {"padding": 2, "dilation": 2, "groups": 4}),
    ((1, 1, 1, 1), (3, 1, 1, 1), {}),
])
def test_conv2d_matches_torch(shape, w, kw):
    x, wt, b = r(*shape), r(*w), r(w[0])
    expect = F.conv2d(torch.tensor(x), torch.tensor(wt), torch.tensor(b), **kw).numpy()
    np.testing.assert_allclose(ops.conv2d(x, wt, b, **kw), expect, rtol=1e-4, atol=1e-5)  # eager
    got = compiler.jit(lambda x, wt, b: ops.conv2d(x, wt, b, **kw))(x, wt, b)
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,w,kw", [
    ((2, 4, 5, 4), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((1, 4, 3, 7), (4, 1, 2, 2), {"groups": 2, "dilation": 2}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"padding": 2}),
])
def test_conv_transpose2d_matches_torch(shape, w, kw):
    x, wt = r(*shape), r(*w)
    b = r(w[1] * kw.get("groups", 1))
    expect = F.conv_transpose2d(torch.tensor(x), torch.tensor(wt), torch.tensor(b), **kw).numpy()
    np.testing.assert_allclose(ops.conv_transpose2d(x, wt, b, **kw), expect, rtol=1e-4, atol=1e-5)
    got = compiler.jit(lambda x, wt, b: ops.conv_transpose2d(x, wt, b, **kw))(x, wt, b)
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)


def test_pooling_layer_norm_attention_match_torch():
    x = r(2, 3, 9, 7)
    t = torch.tensor(x)
    mp = compiler.jit(lambda x: ops.max_pool2d(x, 3, 2, padding=1))(x)
    np.testing.assert_allclose(mp, F.max_pool2d(t, 3, 2, padding=1).numpy(), rtol=1e-6)
    ap = compiler.jit(lambda x: ops.avg_pool2d(x, 2, 1, padding=1))(x)
    np.testing.assert_allclose(ap, F.avg_pool2d(t, 2, 1, padding=1).numpy(), rtol=1e-5, atol=1e-6)
    h, w, b = r(4, 129), r(129), r(129)
    ln = compiler.jit(lambda h, w, b: ops.layer_norm(h, w, b))(h, w, b)
    expect = F.layer_norm(torch.tensor(h), (129,), torch.tensor(w), torch.tensor(b)).numpy()
    np.testing.assert_allclose(ln, expect, rtol=1e-4, atol=1e-5)
    q, k, v = r(2, 5, 16), r(2, 7, 16), r(2, 7, 16)
    at = compiler.jit(lambda q, k, v: ops.attention(q, k, v, causal=True))(q, k, v)
    expect = F.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), is_causal=True).numpy()
    np.testing.assert_allclose(at, expect, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ops.attention(q, k, v, causal=True), expect, rtol=1e-4, atol=1e-5)
