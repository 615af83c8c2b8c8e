"""The NumPy tracer: trace -> reference-interpret -> compare with running the function eagerly.

Tolerances: rtol=1e-5, atol=1e-6 (float32; the reference interpreter evaluates the same NumPy
operations, so most results agree bit for bit).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from compiler import ops
from compiler.dialects import aicc
from compiler.errors import CompileError, ShapeError, UnsupportedOpError
from compiler.reference import run_reference
from frontends import Tracer, trace

RTOL, ATOL = 1e-5, 1e-6
rng = np.random.default_rng(1234)


def rand(*shape: int, positive: bool = False) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    return np.abs(x) + np.float32(0.25) if positive else x


def check(fn, *inputs: np.ndarray):
    """Trace fn on inputs, interpret the IR, and compare with calling fn eagerly."""
    prog = trace(fn, inputs)
    got = run_reference(prog.module, inputs, prog.func_name)
    want = fn(*inputs)
    want_list = list(want) if isinstance(want, (tuple, list)) else [want]
    assert prog.output_is_tuple == isinstance(want, (tuple, list))
    assert len(got) == len(want_list)
    for g, w in zip(got, want_list):
        w = np.asarray(w)
        assert g.shape == w.shape
        if w.dtype == np.bool_:
            assert g.dtype == np.bool_
            np.testing.assert_array_equal(g, w)
        else:
            assert g.dtype == np.float32
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return prog


SHAPES = [(), (1,), (7,), (129,), (3, 5), (2, 1, 7)]

UNARY = {
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.1),
    "tanh": np.tanh,
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "abs": np.abs,
    "absolute": np.absolute,
    "negative": np.negative,
    "square": np.square,
    "reciprocal": lambda x: np.reciprocal(np.abs(x) + 0.5),
    "neg_op": lambda x: -x,
    "pos_op": lambda x: +x,
    "abs_builtin": lambda x: abs(x),
    "relu": ops.relu,
    "gelu": ops.gelu,
    "gelu_tanh": lambda x: ops.gelu(x, approximate="tanh"),
    "sigmoid": ops.sigmoid,
    "rsqrt": lambda x: ops.rsqrt(np.abs(x) + 0.1),
    "erf": ops.erf,
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
    check(UNARY[name], rand(*shape))


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": lambda a, b: np.divide(a, np.abs(b) + 0.5),
    "true_divide": lambda a, b: np.true_divide(a, np.abs(b) + 0.5),
    "power": lambda a, b: np.power(np.abs(a) + 0.5, b),
    "maximum": np.maximum,
    "minimum": np.minimum,
    "op_add": lambda a, b: a + b,
    "op_sub": lambda a, b: a - b,
    "op_mul": lambda a, b: a * b,
    "op_div": lambda a, b: a / (abs(b) + 1),
    "op_pow": lambda a, b: (abs(a) + 1) ** b,
}
PAIRS = [((4, 1), (1, 5)), ((3, 4), (4,)), ((), (2, 3)), ((7,), ()), ((129,), (1,)), ((1,), (1,))]


@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes):
    check(BINARY[name], rand(*shapes[0]), rand(*shapes[1]))


COMPARE = {
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "op_gt": lambda a, b: a > b,
    "op_ge": lambda a, b: a >= b,
    "op_lt": lambda a, b: a < b,
    "op_le": lambda a, b: a <= b,
    "op_eq": lambda a, b: a == b,
    "op_ne": lambda a, b: a != b,
}


@pytest.mark.parametrize("name", list(COMPARE))
def test_compare(name):
    a = rand(4, 1)
    b = rand(1, 5)
    b[0, 1] = a[2, 0]  # some equal elements for eq / ne / ge / le
    check(COMPARE[name], a, b)
    check(lambda x: COMPARE[name](x, 0.0), a)


SCALAR_OPS = {
    "x+1": lambda x: x + 1,
    "1+x": lambda x: 1 + x,
    "x-1.5": lambda x: x - 1.5,
    "1-x": lambda x: 1 - x,
    "x*3": lambda x: x * 3,
    "3*x": lambda x: 3 * x,
    "x/4": lambda x: x / 4,
    "4/x": lambda x: 4 / (abs(x) + 1),
    "2**x": lambda x: 2**x,
    "x**2": lambda x: x**2,
    "x**0.5": lambda x: abs(x) ** 0.5,
    "np.float32": lambda x: np.float32(2) * x - np.float32(0.5),
    "x>0 (reflected)": lambda x: 0 < x,
    "np.maximum(x,0)": lambda x: np.maximum(x, 0.0),
}


@pytest.mark.parametrize("name", list(SCALAR_OPS))
def test_scalar_operands(name):
    check(SCALAR_OPS[name], rand(3, 7))
    check(SCALAR_OPS[name], rand())


def test_where():
    a, b = rand(4, 1), rand(1, 5)
    check(lambda x, y: np.where(x > y, x, y), a, b)
    check(lambda x: np.where(x > 0, x, 0.1 * x), a)
    check(lambda x: np.where(x < 0, 0.0, 1.0), a)
    check(lambda x, y: np.where(x, y, 2.0), a, b)  # float condition: nonzero is true


REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "max": np.max,
    "amax": np.amax,
    "min": np.min,
    "amin": np.amin,
}
AXES = [None, 0, 1, -1, (0, 2), (2, 0), ()]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name, axis, keepdims):
    x = rand(3, 4, 129)
    check(lambda x: REDUCTIONS[name](x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reduction_methods(name):
    x = rand(5, 7)
    check(lambda x: getattr(x, name)(), x)
    check(lambda x: getattr(x, name)(1), x)
    check(lambda x: getattr(x, name)(axis=0, keepdims=True), x)
    check(lambda x: getattr(np, name)(x, 1), x)
    check(lambda x: getattr(x, name)(), rand())


MATMUL = [
    ((3, 4), (4, 5)),
    ((1, 129), (129, 1)),
    ((7,), (7, 5)),
    ((3, 7), (7,)),
    ((7,), (7,)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((5,), (2, 5, 3)),
    ((2, 3, 5), (5,)),
    ((2, 1, 3, 4), (5, 4, 2)),
]


@pytest.mark.parametrize("shapes", MATMUL, ids=str)
def test_matmul(shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1])
    check(np.matmul, a, b)
    check(lambda x, y: x @ y, a, b)


def test_dot_and_rmatmul():
    w = rand(4, 3)
    check(lambda x: np.dot(x, w), rand(2, 4))
    check(lambda x: w.T @ x, rand(4, 6))  # ndarray @ Tracer


def test_layout_ops():
    x = rand(2, 3, 5)
    check(np.transpose, x)
    check(lambda x: np.transpose(x, (1, 0, 2)), x)
    check(lambda x: np.transpose(x, axes=(-1, 0, 1)), x)
    check(lambda x: x.T, x)
    check(lambda x: x.transpose(2, 0, 1), x)
    check(lambda x: x.transpose((0, 2, 1)), x)
    check(lambda x: x.transpose(), x)
    check(lambda x: np.reshape(x, (6, -1)), x)
    check(lambda x: x.reshape(5, 6), x)
    check(lambda x: x.reshape((30,)), x)
    check(lambda x: x.reshape(-1), x)
    check(lambda x: x.reshape(x.shape[0], -1) * x.ndim + x.size, x)
    check(lambda x: np.broadcast_to(x, (4, 3, 5)), rand(3, 1))
    check(lambda x: np.broadcast_to(x, 7), rand())
    check(lambda x: (x > 0).astype(np.float32) + x.astype(np.float32), x)
    check(lambda x: (x > 0) * x + (x < 0), x)  # bool in arithmetic is 0.0 / 1.0


def test_properties():
    def f(x):
        assert x.shape == (3, 5) and x.ndim == 2 and x.size == 15 and x.dtype == np.float32
        assert len(x) == 3
        return x

    prog = check(f, rand(3, 5))
    assert prog.input_types == [((3, 5), np.dtype(np.float32))]


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_op(axis):
    check(lambda x: ops.softmax(x, axis=axis), rand(4, 129))


def test_mlp_with_captured_weights():
    w1, b1, w2, b2 = rand(16, 32), rand(32), rand(32, 10), rand(10)

    def mlp(x):
        h = np.maximum(x @ w1 + b1, 0.0)
        return h @ w2 + b2

    prog = check(mlp, rand(7, 16))
    consts = [op for op in prog.module.walk() if isinstance(op, aicc.ConstantOp)]
    assert len(consts) == 5  # w1, b1, w2, b2 and 0.0


def test_mlp_with_weights_as_inputs_and_float64_capture():
    w64 = rng.standard_normal((8, 4))  # float64 weights are captured as float32

    def mlp(x, w1, b1):
        return np.maximum(x @ w1 + b1, 0) @ w64

    x, w1, b1 = rand(5, 8), rand(8, 8), rand(8)
    prog = trace(mlp, (x, w1, b1))
    (got,) = run_reference(prog.module, [x, w1, b1])
    np.testing.assert_allclose(got, mlp(x, w1, b1), rtol=1e-4, atol=1e-5)


def stable_softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def test_numpy_softmax():
    check(stable_softmax, rand(3, 129))
    check(stable_softmax, rand(1, 1))


def test_layer_norm():
    gamma, beta = rand(129), rand(129)

    def layer_norm(x, eps=1e-5):
        mean = x.mean(axis=-1, keepdims=True)
        var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * gamma + beta

    check(layer_norm, rand(7, 129))


def test_attention():
    d = 16

    def attention(q, k, v):
        scores = q @ k.T / np.sqrt(np.float32(d))
        return stable_softmax(scores) @ v

    check(attention, rand(7, d), rand(9, d), rand(9, 5))


def test_multiple_outputs_and_passthrough():
    c = rand(3)
    prog = check(lambda x, y: (x, x + y, c), rand(3), rand(3))
    assert prog.output_is_tuple
    prog = check(lambda x: [x * 2], rand(3))
    assert prog.output_is_tuple


def test_scalar_constants_are_deduplicated_and_0d():
    prog = trace(lambda x: x * 2 + 2 * x + np.float32(2.0) + 2.0, (rand(3),))
    consts = [op for op in prog.module.walk() if isinstance(op, aicc.ConstantOp)]
    assert len(consts) == 1
    assert aicc.shape_of(consts[0].result) == ()


def test_locations_point_at_user_code():
    line = sys._getframe().f_lineno + 1
    prog = trace(lambda x: np.exp(x) + 1, (rand(3),))
    assert prog.locations
    for op in prog.module.walk():
        if op.name.startswith("aicc."):
            assert prog.locations[op] == f"test_trace.py:{line}"


def test_ir_round_trip():
    w = rand(4, 3)

    def f(x):
        h = ops.gelu(x @ w, approximate="tanh") + ops.relu(x.sum(axis=1, keepdims=True))
        m = np.where(h > 0.5, h, 0.0)
        return ops.softmax(m, axis=0), np.broadcast_to(m.T.reshape(1, 3, 2), (2, 3, 2)), (h > 0).astype(np.float32)

    prog = trace(f, (rand(2, 4),))
    text = str(prog.module)
    ctx = Context()
    for d in (Builtin, Func, aicc.AICC):
        ctx.load_dialect(d)
    parsed = Parser(ctx, text).parse_module()
    parsed.verify()
    assert str(parsed) == text


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def _raises_at(exc_type, fn, *inputs, contains=()):
    """fn records the line of the offending call in fn.line; the message must name it."""
    with pytest.raises(exc_type) as info:
        trace(fn, inputs)
    msg = str(info.value)
    assert f"test_trace.py:{fn.line}" in msg, msg
    for s in contains:
        assert s in msg, msg
    return info.value


def _line():
    return sys._getframe(1).f_lineno + 1


def test_unsupported_function():
    def f(x):
        f.line = _line()
        return np.sort(x)

    e = _raises_at(UnsupportedOpError, f, rand(3), contains=["np.sort"])
    assert isinstance(e, CompileError)


def test_unsupported_ufuncs():
    def g(x):
        g.line = _line()
        return np.log1p(x)

    _raises_at(UnsupportedOpError, g, rand(3), contains=["np.log1p"])

    def f(x):
        f.line = _line()
        return np.add.reduce(x)

    _raises_at(UnsupportedOpError, f, rand(3), contains=["np.add.reduce"])

    def h(x):
        h.line = _line()
        return np.add(x, 1, out=x)

    _raises_at(UnsupportedOpError, h, rand(3), contains=["np.add", "out="])

    def k(x):
        k.line = _line()
        return x // 2

    _raises_at(UnsupportedOpError, k, rand(3), contains=["np.floor_divide"])

    def m(x):
        m.line = _line()
        return np.linalg.norm(x)

    _raises_at(UnsupportedOpError, m, rand(3), contains=["np.linalg.norm"])


def test_unsupported_python_constructs():
    def branch(x):
        branch.line = _line()
        if x.sum() > 0:
            return x
        return -x

    _raises_at(UnsupportedOpError, branch, rand(3), contains=["data-dependent control flow"])

    def to_float(x):
        to_float.line = _line()
        return x * float(x.sum())

    _raises_at(UnsupportedOpError, to_float, rand(3), contains=["float()"])

    def index(x):
        index.line = _line()
        return x[0.5]

    _raises_at(UnsupportedOpError, index, rand(3), contains=["indexing"])

    def iterate(x):
        iterate.line = _line()
        return sum(row for row in x)

    _raises_at(UnsupportedOpError, iterate, rand(3, 2), contains=["iterat"])

    def asarray(x):
        asarray.line = _line()
        return np.asarray(x) + 1

    _raises_at(UnsupportedOpError, asarray, rand(3))


def test_shape_mismatch():
    def f(x, y):
        f.line = _line()
        return x + y

    e = _raises_at(ShapeError, f, rand(3, 4), rand(5), contains=["aicc.add", "(3, 4)", "(5,)"])
    assert isinstance(e, CompileError) and not isinstance(e, UnsupportedOpError)

    def g(x, y):
        g.line = _line()
        return x @ y

    _raises_at(CompileError, g, rand(3, 4), rand(5, 6), contains=["aicc.matmul", "(3, 4)", "(5, 6)"])

    def h(x, y):
        h.line = _line()
        return np.matmul(x, y)

    _raises_at(CompileError, h, rand(4), rand(5, 6), contains=["aicc.matmul", "(4,)", "(5, 6)"])

    def r(x):
        r.line = _line()
        return x.reshape(7, -1)

    _raises_at(CompileError, r, rand(3, 4), contains=["aicc.reshape", "(3, 4)"])

    def s(x):
        s.line = _line()
        return x.sum(axis=2)

    _raises_at(CompileError, s, rand(3, 4), contains=["axis 2"])


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_non_float32_input(dtype):
    def f(x, weights):
        return x + weights

    with pytest.raises(CompileError) as info:
        trace(f, (rand(3), np.ones(3, dtype=dtype)))
    msg = str(info.value)
    for s in ["input 1", "weights", str(np.dtype(dtype)), "float32", ".astype(np.float32)"]:
        assert s in msg, msg


def test_bad_outputs_and_arity():
    with pytest.raises(CompileError, match="must return an array"):
        trace(lambda x: 1.0, (rand(3),))
    with pytest.raises(CompileError, match="must return an array"):
        trace(lambda x: (x, "s"), (rand(3),))
    with pytest.raises(CompileError, match="example inputs"):
        trace(lambda x, y: x, (rand(3),))


def test_tracer_escaping_its_trace():
    kept = []

    def f(x):
        kept.append(x)
        return x + 1

    trace(f, (rand(3),))
    with pytest.raises(CompileError):
        np.exp(kept[0])


def test_nn_ops_dispatch_protocol():
    class Fake:
        def __aicc_trace_op__(self, name, args, kwargs):
            return (name, kwargs)

    assert ops.gelu(Fake(), approximate="tanh") == ("gelu", {"approximate": "tanh"})
    assert ops.softmax(Fake(), axis=0) == ("softmax", {"axis": 0})
    assert ops.relu(Fake())[0] == "relu"
    assert isinstance(trace(lambda x: ops.relu(x), (rand(2),)).module, object)


def test_nn_ops_eager():
    x = rand(5, 7)
    for fn in (ops.relu, ops.gelu, ops.sigmoid, ops.softmax, ops.erf):
        assert fn(x).dtype == np.float32 and fn(x).shape == x.shape
    np.testing.assert_allclose(ops.relu(x), np.maximum(x, 0), rtol=RTOL, atol=ATOL)
    erf = np.array([[math.erf(v) for v in row] for row in x.astype(np.float64)])
    np.testing.assert_allclose(ops.erf(x), erf, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ops.gelu(x), 0.5 * x * (1 + erf_of(x / math.sqrt(2))), rtol=RTOL, atol=ATOL)
    assert isinstance(Tracer, type)


def erf_of(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


@pytest.mark.parametrize("axis", [None, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_var_std_clip(axis, keepdims):
    x = rand(3, 4, 5)
    check(lambda x: np.var(x, axis=axis, keepdims=keepdims), x)
    check(lambda x: np.std(x, axis=axis, keepdims=keepdims, ddof=1), x)
    check(lambda x: x.var(axis=axis, keepdims=keepdims) + x.std(axis, keepdims=keepdims), x)
    check(lambda x: np.clip(x, -0.5, 0.5) + x.clip(0.1) + np.clip(x, None, 0.2), x)
