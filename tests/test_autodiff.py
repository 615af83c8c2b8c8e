"""Reverse-mode autodiff (compiler/lowering/autodiff.py, vjp_rules.py) and its API
(compiler/grad.py): every VJP rule against central finite differences in float64
(`check_grads`), random shapes through hypothesis, and whole models against torch autograd."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import compiler
from compiler import ops
from compiler.lowering.autodiff import VJP_RULES, rule_for

RNG = np.random.default_rng(0)


def r(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def pos(*shape):
    return (np.abs(RNG.standard_normal(shape)) + 0.5).astype(np.float32)


# Each case exercises one family of rules; check_grads compares every argument's gradient
# with central differences of the traced function evaluated in float64.
CASES = {
    "unary": (lambda x: np.sum(np.tanh(x) * np.sin(x) + np.cos(x) * ops.sigmoid(x) + ops.gelu(x)
                               + ops.gelu(x, approximate="tanh") + ops.erf(x) + np.arctan(x)
                               + np.sinh(x) + np.cosh(x) - np.exp(-x) + ops.relu(x) * 2), (r(3, 4),)),
    "positive": (lambda x: np.sum(np.log(x) + np.sqrt(x) + ops.rsqrt(x) + x ** 1.5 + 2.0 ** x
                                  + np.abs(x - 1.3) + np.arcsin(x / 4) + np.arccos(x / 4) + np.tan(x / 4)),
                 (pos(3, 4),)),
    "broadcast": (lambda a, b: np.sum((a * b - b / (a * a + 1.0)) ** 2 + np.maximum(a, b)
                                      + np.minimum(a, 0.2)), (r(2, 3, 4), r(3, 1))),
    "mod": (lambda a, b: np.sum(np.remainder(a, b) ** 2 + np.fmod(a, b)), (r(7, scale=3), pos(7))),
    "reduce": (lambda x: np.sum(np.max(x, axis=1) * np.mean(x, axis=0, keepdims=True).T[:, 0]) + np.min(x)
               + np.prod(x[0]) + np.sum(np.var(x, axis=1)), (r(5, 5),)),
    "softmax": (lambda x, w: np.sum(ops.softmax(x, axis=0) * w), (r(4, 5), r(4, 5))),
    "shapes": (lambda x: np.sum(np.transpose(x.reshape(2, 6, 2), (2, 0, 1))[:, 1:, ::-2]
                                * np.arange(3, dtype=np.float32)) + np.sum(np.broadcast_to(x[1], (3, 6)) ** 2),
               (r(4, 6),)),
    "concat": (lambda a, b: np.sum(np.concatenate([a, b * 2], axis=1) ** 2) + np.sum(np.stack([a, a]) * 3),
               (r(2, 3), r(2, 2))),
    "gather": (lambda t: np.sum(t[np.array([0, 2, 2, -1])] ** 2)
               + np.sum(np.take_along_axis(t, np.array([[0, 1], [2, 2], [1, 1], [0, 0]]), axis=1) * 3)
               + np.sum(np.take(t, np.array([[1, 1], [0, 2]]), axis=1) ** 2), (r(4, 3),)),
    "cumsum_pad": (lambda x: np.sum(np.cumsum(x, axis=1) ** 2) + np.sum(np.pad(x, ((1, 0), (2, 1))) ** 3),
                   (r(3, 4),)),
    "where_clip": (lambda x: np.sum(np.where(x > 0, np.exp(x), x * x) + np.floor(x) + np.ceil(x) + np.rint(x)
                                         + np.clip(x, -0.5, 0.5)),
                   (r(5, 3),)),
    "matmul": (lambda a, b, c: np.sum((a @ b) * np.tanh(c @ b)) + np.sum(np.tanh(np.transpose(a, (0, 2, 1)) @ c)),
               (r(2, 3, 4), r(4, 5), r(3, 4))),
    "conv2d": (lambda x, w, b: np.sum(ops.conv2d(x, w, b, stride=2, padding=1) ** 2),
               (r(2, 3, 7, 6), r(4, 3, 3, 3), r(4))),
    "conv2d_groups": (lambda x, w: np.sum(ops.conv2d(x, w, groups=4, padding=1, dilation=2) ** 2),
                      (r(1, 4, 7, 7), r(8, 1, 3, 3))),
    "pool2d": (lambda x: np.sum(ops.max_pool2d(x, 3, 2, padding=1) ** 2) + np.sum(ops.avg_pool2d(x, 2) ** 2),
               (r(2, 3, 7, 7),)),
    "layer_norm": (lambda x, w, b: np.sum(ops.layer_norm(x, w, b) * np.arange(5, dtype=np.float32)),
                   (r(3, 5), r(5), r(5))),
    "attention": (lambda q, k, v: np.sum(ops.attention(q, k, v, causal=True) ** 2),
                  (r(2, 4, 8), r(2, 4, 8), r(2, 4, 8))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rules_match_finite_differences(name):
    fn, args = CASES[name]
    fn.__name__ = name
    compiler.check_grads(fn, args)


def test_every_rule_is_exercised():
    """The cases above reach every registered rule (a rule nobody runs is a rule nobody checked)."""
    from compiler.lowering.autodiff import differentiate  # noqa: F401 - loads the rules
    from frontends.numpy_trace import trace

    rule_for(compiler.dialects.aicc.ConstantOp(compiler.dialects.aicc.dense_from_numpy(np.zeros(1, np.float32))))
    seen = set()
    for fn, args in CASES.values():
        for op in trace(fn, args).module.walk():
            seen.add(type(op))
    untested = {t.name for t in VJP_RULES if t not in seen}
    # resample is emitted by the ONNX/torch importers (interpolate), not by the NumPy tracer: it
    # is checked on its own below; the tracer computes float32 only, so it never emits a
    # float-to-float cast.
    assert untested <= {"aicc.resample", "aicc.cast"}, untested


def test_resample_rule():
    from compiler.dialects import aicc_nn
    from compiler.lowering.autodiff import differentiate
    from compiler.pipeline import compile_module, CompileOptions
    from compiler.reference import run_reference
    from frontends.numpy_trace import trace

    x = r(2, 5)
    prog = trace(lambda x: np.sum(x * 1.0), (x,))
    fop = prog.module.ops.first
    mul = next(op for op in fop.body.block.ops if op.name == "aicc.mul")
    idx, w = np.array([[0, 1], [1, 2], [3, 4], [4, 4]]), np.array([[0.25, 0.75], [0.5, 0.5], [1.0, 0.0], [0.3, 0.7]])
    res = aicc_nn.ResampleOp(mul.results[0], 1, idx, w)
    fop.body.block.insert_op_after(res, mul)
    red = next(op for op in fop.body.block.ops if op.name == "aicc.reduce_sum")
    sq = compiler.dialects.aicc.MulOp(res.results[0], res.results[0])
    fop.body.block.insert_op_after(sq, res)
    red.operands = [sq.results[0]]
    differentiate(fop, [0])
    m = compile_module(prog.module.clone(), prog.func_name, output_is_tuple=True, options=CompileOptions("cpu"))
    _, dx = m(x)
    y = (w * x[:, idx]).sum(-1)  # (2, 4)
    expect = np.zeros_like(x, dtype=np.float64)
    for o in range(4):
        for t in range(2):
            expect[:, idx[o, t]] += 2 * y[:, o] * w[o, t]
    np.testing.assert_allclose(dx, expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_reference(prog.module, [x], prog.func_name)[1], expect, rtol=1e-5, atol=1e-6)


# -- hypothesis: elementwise and broadcasting rules on random shapes --------------------------

_UNARY = {"exp": np.exp, "tanh": np.tanh, "sin": np.sin, "sigmoid": ops.sigmoid, "gelu": ops.gelu,
          "neg": np.negative, "atan": np.arctan, "erf": ops.erf}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum}


@st.composite
def _broadcast_pair(draw):
    shape = draw(st.lists(st.sampled_from([1, 2, 3, 7]), min_size=1, max_size=3))
    other = [d if draw(st.booleans()) else 1 for d in shape][draw(st.integers(0, len(shape) - 1)):]
    return tuple(shape), tuple(other)


@settings(max_examples=8, deadline=None)
@given(shapes=_broadcast_pair(), unary=st.sampled_from(sorted(_UNARY)), binary=st.sampled_from(sorted(_BINARY)),
       axis=st.integers(-1, 0), seed=st.integers(0, 2**16))
def test_random_shapes(shapes, unary, binary, axis, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    u, f = _UNARY[unary], _BINARY[binary]

    def fn(a, b):
        y = u(f(a, b))
        return np.sum(np.mean(y, axis=axis) ** 2)

    compiler.check_grads(fn, (a, b))


# -- whole models against torch autograd ------------------------------------------------------

torch = pytest.importorskip("torch")


def _torch_grads(fn_t, args, argnums):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=i in argnums) for i, a in enumerate(args)]
    fn_t(*ts).backward()
    return [ts[i].grad.numpy() for i in argnums]


def _compare(fn_np, fn_t, args, argnums, rtol=2e-3, atol=1e-5):
    value, grads = compiler.value_and_grad(fn_np, argnums=tuple(argnums))(*args)
    expected = _torch_grads(fn_t, args, argnums)
    for i, g, e in zip(argnums, grads, expected):
        assert g.shape == args[i].shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol * max(1.0, np.abs(e).max()),
                                   err_msg=f"gradient of argument {i}")
    return value


def test_mlp_softmax_cross_entropy():
    x, y = r(33, 20), np.eye(7, dtype=np.float32)[RNG.integers(0, 7, 33)]
    w1, b1, w2, b2 = r(20, 64, scale=0.3), r(64, scale=0.1), r(64, 7, scale=0.3), r(7, scale=0.1)

    def loss(x, y, w1, b1, w2, b2):
        h = np.maximum(x @ w1 + b1, 0.0)
        z = h @ w2 + b2
        z = z - np.max(z, axis=1, keepdims=True)
        logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        return -np.mean(np.sum(y * logp, axis=1))

    def loss_t(x, y, w1, b1, w2, b2):
        z = torch.relu(x @ w1 + b1) @ w2 + b2
        return torch.nn.functional.cross_entropy(z, y.argmax(1))

    v = _compare(loss, loss_t, (x, y, w1, b1, w2, b2), [2, 3, 4, 5])
    assert abs(float(v) - float(loss_t(*(torch.tensor(a, dtype=torch.float64) for a in (x, y, w1, b1, w2, b2))))) < 1e-4


def test_layer_norm_broadcasting_where():
    x, w, b, s = r(4, 9, 16), r(16), r(16), r(9, 1)

    def f(x, w, b, s):
        h = ops.layer_norm(x, w, b)
        h = np.where(h > 0.1, np.exp(h) * s, np.maximum(h, -0.5) * 2.0)
        return np.sum(h * h) / 10

    def f_t(x, w, b, s):
        h = torch.nn.functional.layer_norm(x, (16,), w, b)
        h = torch.where(h > 0.1, torch.exp(h) * s, torch.maximum(h, torch.tensor(-0.5, dtype=h.dtype)) * 2.0)
        return (h * h).sum() / 10

    _compare(f, f_t, (x, w, b, s), [0, 1, 2, 3])


def test_attention_transpose_reshape_chain():
    b_, t, h, d = 2, 7, 2, 8
    x, wq, wk, wv, wo = r(b_, t, h * d), r(h * d, h * d, scale=0.3), r(h * d, h * d, scale=0.3), \
        r(h * d, h * d, scale=0.3), r(h * d, h * d, scale=0.3)

    def heads(z):
        return np.transpose(z.reshape(b_, t, h, d), (0, 2, 1, 3))

    def f(x, wq, wk, wv, wo):
        a = ops.attention(heads(x @ wq), heads(x @ wk), heads(x @ wv), causal=True)
        y = np.transpose(a, (0, 2, 1, 3)).reshape(b_, t, h * d) @ wo
        return np.sum(np.tanh(y))

    def f_t(x, wq, wk, wv, wo):
        def th(z):
            return z.reshape(b_, t, h, d).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(th(x @ wq), th(x @ wk), th(x @ wv), is_causal=True)
        return torch.tanh(a.transpose(1, 2).reshape(b_, t, h * d) @ wo).sum()

    _compare(f, f_t, (x, wq, wk, wv, wo), [0, 1, 2, 3, 4])


def test_cnn_conv_pool():
    x, w1, b1, w2 = r(2, 3, 9, 9), r(8, 3, 3, 3, scale=0.3), r(8), r(8, 1, 3, 3, scale=0.3)

    def f(x, w1, b1, w2):
        h = ops.relu(ops.conv2d(x, w1, b1, stride=1, padding=1))
        h = ops.max_pool2d(h, 2)
        h = ops.conv2d(h, w2, groups=8, padding=1)
        return np.mean(ops.avg_pool2d(h, 2, stride=1) ** 2)

    def f_t(x, w1, b1, w2):
        F = torch.nn.functional
        h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
        h = F.conv2d(h, w2, groups=8, padding=1)
        return (F.avg_pool2d(h, 2, stride=1) ** 2).mean()

    _compare(f, f_t, (x, w1, b1, w2), [0, 1, 2, 3])


# -- API --------------------------------------------------------------------------------------


def test_grad_conventions_and_cache():
    def f(x, w):
        return np.sum(np.tanh(x @ w))

    x, w = r(3, 4), r(4, 2)
    g = compiler.grad(f)  # argnums=0: one array, shaped like x
    dx = g(x, w)
    assert isinstance(dx, np.ndarray) and dx.shape == x.shape
    dw = compiler.grad(f, argnums=1)(x, w)
    (dw2,) = compiler.grad(f, argnums=(1,))(x, w)
    np.testing.assert_array_equal(dw, dw2)
    value, (gx, gw) = compiler.value_and_grad(f, argnums=(0, -1))(x, w)
    np.testing.assert_allclose(value, np.sum(np.tanh(x @ w)), rtol=1e-5)
    np.testing.assert_allclose(gx, dx, rtol=1e-6)
    g(r(3, 4), w)
    g(r(5, 4), w)
    assert len(g.cache) == 2  # one compile per shapes
    assert "aicc.matmul" in g.ir("tensor")


def test_non_differentiable_paths_give_zero():
    def f(x):
        return np.sum(np.floor(x) + np.where(x > 0, 1.0, 0.0) + np.rint(x * 3))

    np.testing.assert_array_equal(compiler.grad(f)(r(4, 3)), np.zeros((4, 3), np.float32))

    def unused(x, y):
        return np.sum(x * 2)

    np.testing.assert_array_equal(compiler.grad(unused, argnums=1)(r(2), r(3)), np.zeros(3, np.float32))


def test_errors():
    with pytest.raises(compiler.CompileError, match="scalar"):
        compiler.grad(lambda x: x * 2)(r(3))
    with pytest.raises(compiler.CompileError, match="one array"):
        compiler.grad(lambda x: (np.sum(x), np.sum(x)))(r(3))
    with pytest.raises(compiler.CompileError, match="argnums names argument 2"):
        compiler.grad(lambda x, y: np.sum(x * y), argnums=2)(r(3), r(3))
    with pytest.raises(compiler.CompileError, match="repeats"):
        compiler.grad(lambda x: np.sum(x), argnums=(0, 0))


def test_check_grads_catches_a_wrong_rule(monkeypatch):
    """check_grads can fail: a sign error in the exp rule is reported with the argument."""
    from compiler.dialects import aicc
    from compiler.lowering import vjp_rules  # noqa: F401 - registered

    monkeypatch.setitem(VJP_RULES, aicc.ExpOp, lambda b, op, g: [b.neg(b.mul(g, op.results[0]))])
    with pytest.raises(AssertionError, match="argument 0"):
        compiler.check_grads(lambda x: np.sum(np.exp(x)), (r(3),))


def test_cuda_emulation_target():
    """The backward graph is ordinary IR: it runs on the CUDA backend (through the emulator)."""
    x, w = r(3, 5), r(5, 4)

    def f(x, w):
        return np.sum(ops.softmax(x @ w, axis=-1) * np.arange(4, dtype=np.float32))

    cpu = compiler.grad(f, argnums=(0, 1))(x, w)
    emu = compiler.grad(f, argnums=(0, 1), target="cuda-emu")(x, w)
    for a, b in zip(cpu, emu):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_train_mlp_example_learns_digits():
    """examples/train_mlp.py: SGD through value_and_grad; the loss falls and the test accuracy
    passes 90% within a few epochs."""
    pytest.importorskip("sklearn")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    losses, accuracies = mod.train(epochs=5, log=lambda *_: None)
    assert losses[-1] < 0.5 * losses[0], losses
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert accuracies[-1] >= 0.90, accuracies
