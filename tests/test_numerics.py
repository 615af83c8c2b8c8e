"""Every traced op through the whole pipeline (tensor -> linalg -> memref -> loops -> LLVM -> run)
against NumPy.

The reference is the same function evaluated by NumPy in float64 on the float32 inputs
(`x.astype(np.float64)`), so it is the exact answer the float32 result should approximate.
Tolerances (|got - want| <= atol + rtol * |want|):

    elementwise (+ - * / max min neg abs, selects)      rtol=1e-5, atol=1e-6   (a few float32 ulps)
    transcendental (exp log tanh sqrt rsqrt pow erf,    rtol=1e-5, atol=1e-6   (aicc's polynomial
      gelu sigmoid softmax)                                                      exp/tanh/erf)
    reductions and matmul over K elements               rtol=1e-4, atol=1e-5*sqrt(K)
                                                         (float32 accumulation in another order)
    comparisons, bool masks, special values, threads    exact (bitwise / same NaN positions)
"""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler import jit, ops

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

ELEM = dict(rtol=1e-5, atol=1e-6)
TRANS = dict(rtol=1e-5, atol=1e-6)
STAGES = ("tensor", "linalg", "memref", "loops", "llvm", "asm")


def red_tol(k: int) -> dict:
    return dict(rtol=1e-4, atol=1e-5 * math.sqrt(max(k, 1)))


def rand(*shape: int, lo: float | None = None, hi: float | None = None, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    if lo is None:
        x = rng.standard_normal(shape)
    else:
        x = rng.uniform(lo, hi, shape)
    return np.asarray(x, dtype=np.float32)


def nonzero(*shape: int, seed: int = 0) -> np.ndarray:
    x = rand(*shape, seed=seed)
    return np.asarray(np.where(x >= 0, x + 0.5, x - 0.5), dtype=np.float32)


def run(fn, *inputs, **compile_kw):
    """Compile fn for inputs, run it, and return (got, reference in float64)."""
    m = compiler.compile(fn, inputs, **compile_kw)
    got = m(*inputs)
    with np.errstate(all="ignore"):
        want = fn(*(x.astype(np.float64) for x in inputs))
    return got, want


def check(fn, *inputs, tol=ELEM):
    got, want = run(fn, *inputs)
    want = np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.shape == want.shape
    if want.dtype == np.bool_:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)
    else:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.astype(np.float64), want, **tol)
    return got


# ------------------------------------------------------------------------------ elementwise

SHAPES = [(), (1,), (7,), (129,), (3, 5), (2, 3, 4, 5)]

# name -> (function, input range or None for standard normal, tolerance)
UNARY = {
    "neg": (lambda x: -x, None, ELEM),
    "np.negative": (np.negative, None, ELEM),
    "abs": (np.abs, None, ELEM),
    "exp": (np.exp, (-10.0, 10.0), TRANS),
    "log": (np.log, (1e-3, 100.0), TRANS),
    "tanh": (np.tanh, (-6.0, 6.0), TRANS),
    "sqrt": (np.sqrt, (0.0, 100.0), TRANS),
    "rsqrt": (ops.rsqrt, (1e-2, 100.0), TRANS),
    "square": (np.square, None, ELEM),
    "x**2": (lambda x: x**2, None, ELEM),
    "x**0.5": (lambda x: x**0.5, (0.0, 50.0), TRANS),
    "2**x": (lambda x: 2.0**x, (-10.0, 10.0), TRANS),
    "reciprocal": (np.reciprocal, (0.1, 10.0), ELEM),
    "relu": (ops.relu, None, ELEM),
    "gelu": (ops.gelu, (-6.0, 6.0), TRANS),
    "gelu_tanh": (lambda x: ops.gelu(x, approximate="tanh"), (-6.0, 6.0), TRANS),
    "sigmoid": (ops.sigmoid, (-20.0, 20.0), TRANS),
    "erf": (ops.erf, (-4.0, 4.0), TRANS),
    "scalar_affine": (lambda x: 3.0 * x - 1.5, None, ELEM),
    "rdiv": (lambda x: 1.0 / x, (0.5, 4.0), ELEM),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
    fn, domain, tol = UNARY[name]
    x = rand(*shape) if domain is None else rand(*shape, lo=domain[0], hi=domain[1])
    check(fn, x, tol=tol)


BINARY = {
    "add": (np.add, False),
    "sub": (lambda a, b: a - b, False),
    "mul": (lambda a, b: a * b, False),
    "div": (lambda a, b: a / b, True),
    "maximum": (np.maximum, False),
    "minimum": (np.minimum, False),
    "pow": (lambda a, b: np.abs(a) ** b, False),
}

BINARY_SHAPES = [
    ((), ()),
    ((7,), (7,)),
    ((129,), (1,)),
    ((4, 1), (1, 5)),
    ((3, 5), ()),
    ((), (3, 5)),
    ((2, 3, 4, 5), (4, 5)),
    ((5, 7), (7,)),
]


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes):
    fn, nonzero_b = BINARY[name]
    a = rand(*shapes[0], seed=1)
    if name == "pow":
        a = np.abs(a) + np.float32(0.1)
        b = rand(*shapes[1], lo=-2.0, hi=2.0, seed=2)
    else:
        b = nonzero(*shapes[1], seed=2) if nonzero_b else rand(*shapes[1], seed=2)
    check(fn, a, b, tol=TRANS if name == "pow" else ELEM)


@pytest.mark.parametrize(
    "fn",
    [lambda x: x + 2, lambda x: 2 - x, lambda x: x * np.float32(0.5), lambda x: 4.0 / (x * x + 1.0),
     lambda x: np.maximum(x, 0.0), lambda x: np.minimum(1.0, x), lambda x: np.clip(x, -0.5, 0.5)],
    ids=["x+2", "2-x", "x*f32", "4/(x*x+1)", "max(x,0)", "min(1,x)", "clip"],
)
def test_python_scalars(fn):
    check(fn, rand(7, 3))


COMPARISONS = {
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


def _with_ties(shape_a, shape_b):
    a = rand(*shape_a, seed=3)
    b = rand(*shape_b, seed=4)
    if shape_a == shape_b:
        b = np.where(rand(*shape_a, seed=5) > 0, a, b).astype(np.float32)
    return a, b


@pytest.mark.parametrize("shapes", [((7,), (7,)), ((4, 1), (1, 5)), ((2, 3, 4), ())], ids=str)
@pytest.mark.parametrize("pred", list(COMPARISONS))
def test_comparison(pred, shapes):
    a, b = _with_ties(*shapes)
    check(COMPARISONS[pred], a, b)


@pytest.mark.parametrize("shapes", [((7,), (7,)), ((4, 1), (1, 5)), ((3, 5), ())], ids=str)
def test_where(shapes):
    a, b = _with_ties(*shapes)
    check(lambda a, b: np.where(a > b, a, b * 2.0), a, b)
    check(lambda a, b: np.where(a <= 0.0, 0.0, b), a, b)
    check(lambda a, b: np.where(a >= b, 1.0, -1.0) * b, a, b)


def test_bool_mask_astype():
    a, b = _with_ties((4, 6), (4, 6))
    check(lambda a, b: (a > b).astype(np.float32) * b, a, b)
    check(lambda a, b: (a == b).astype(np.float32), a, b)
    check(lambda a, b: (a > 0.0).astype(np.float32) + (b < 0.0).astype(np.float32), a, b)


def test_bool_in_arithmetic():
    a, b = _with_ties((3, 5), (3, 5))
    check(lambda a, b: (a > b) * a + (a <= b) * b, a, b)


# ------------------------------------------------------------------------------ reductions

AXES = [None, 0, 1, -1, (0, 2), (-1, -3), (0, 1, 2)]
REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name, axis, keepdims):
    x = rand(3, 7, 5)
    axes = range(3) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    k = int(np.prod([x.shape[a] for a in axes]))
    check(lambda x: REDUCTIONS[name](x, axis=axis, keepdims=keepdims), x, tol=red_tol(k))


@pytest.mark.parametrize(
    "fn, shape",
    [
        (lambda x: x.sum(), (129,)),
        (lambda x: x.mean(axis=-1), (7, 129)),
        (lambda x: x.max(axis=0, keepdims=True), (129, 7)),
        (lambda x: x.min(axis=(1, 3)), (2, 3, 4, 5)),
        (lambda x: np.sum(x, axis=(-4, -1), keepdims=True), (2, 3, 4, 5)),
        (lambda x: np.mean(x), (2, 3, 4, 5)),
        (lambda x: np.sum(x), ()),
        (lambda x: np.max(x, axis=0), (1,)),
        (lambda x: np.var(x, axis=-1), (4, 33)),
        (lambda x: np.std(x, axis=0, keepdims=True), (33, 4)),
    ],
    ids=["sum129", "mean-1", "max0keep", "min13", "sum-4-1keep", "mean4d", "sum0d", "max1", "var", "std"],
)
def test_reduction_shapes(fn, shape):
    check(fn, rand(*shape), tol=red_tol(max(shape, default=1) * 4))


def test_reduction_of_expression():
    x = rand(9, 17)
    check(lambda x: np.sum(np.exp(x) * 2.0 - x, axis=1) / np.max(np.abs(x)), x, tol=red_tol(17))


# ------------------------------------------------------------------------------ matmul

MATMULS = [
    ((7, 5), (5, 3)),
    ((1, 1), (1, 1)),
    ((129, 7), (7, 33)),
    ((3, 129), (129, 2)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (4, 5)),
    ((4, 5), (3, 5, 2)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((4,), (4, 3)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 4, 3)),
]


@pytest.mark.parametrize("shapes", MATMULS, ids=str)
def test_matmul(shapes):
    a, b = rand(*shapes[0], seed=1), rand(*shapes[1], seed=2)
    check(lambda a, b: a @ b, a, b, tol=red_tol(shapes[0][-1]))


def test_matmul_np_functions():
    a, b = rand(6, 5, seed=1), rand(5, 4, seed=2)
    check(lambda a, b: np.matmul(a, b), a, b, tol=red_tol(5))
    check(lambda a, b: np.dot(a, b), a, b, tol=red_tol(5))
    check(lambda a, b: (a @ b).T @ a, a, b, tol=red_tol(6 * 5))


# ------------------------------------------------------------------------------ layout

@pytest.mark.parametrize(
    "fn, shape",
    [
        (lambda x: x.T, (3, 5)),
        (lambda x: x.T, (2, 3, 4)),
        (lambda x: np.transpose(x), (7, 1)),
        (lambda x: np.transpose(x, (1, 0, 2)), (2, 3, 4)),
        (lambda x: x.transpose(2, 0, 1), (2, 3, 4)),
        (lambda x: np.transpose(x, (0, 2, 1)), (2, 3, 4)),
        (lambda x: np.transpose(x, (3, 1, 0, 2)), (2, 3, 4, 5)),
        (lambda x: np.transpose(x, (-1, 0, -2)), (2, 3, 4)),
        (lambda x: x.T + 1.0, (129, 3)),
        (lambda x: x.reshape(-1), (3, 5)),
        (lambda x: x.reshape(5, -1), (3, 5)),
        (lambda x: x.reshape((2, 3, 4, 5)).sum(axis=1), (6, 20)),
        (lambda x: np.reshape(x, (-1, 4)) * 2.0, (2, 3, 4)),
        (lambda x: x.reshape(()), (1, 1)),
        (lambda x: x.reshape(1, 1, 1), ()),
        (lambda x: x.T.reshape(-1), (3, 4)),
        (lambda x: np.broadcast_to(x, (3, 5)), (5,)),
        (lambda x: np.broadcast_to(x, (4, 6)), (4, 1)),
        (lambda x: np.broadcast_to(x, (2, 3)), ()),
        (lambda x: np.broadcast_to(x, (2, 3, 4, 5)) - x, (3, 1, 5)),
    ],
    ids=["T2", "T3", "transpose-default", "perm102", "perm201", "perm021", "perm3102", "perm-neg",
         "T+1", "reshape-1", "reshape5,-1", "reshape4d-sum", "np.reshape", "reshape0d",
         "reshape-from-0d", "T-reshape", "bcast5", "bcast41", "bcast0d", "bcast4d"],
)
def test_layout(fn, shape):
    check(fn, rand(*shape))


def test_rank4_chain():
    x, y = rand(2, 3, 4, 5, seed=1), rand(1, 3, 1, 5, seed=2)
    check(lambda x, y: np.tanh(x * y + 1.0) - np.maximum(x, y) / 2.0, x, y, tol=TRANS)


# ------------------------------------------------------------------------------ threads

def test_threads_bitwise_elementwise():
    x, y = rand(1023, 1531, seed=1), rand(1023, 1531, seed=2)  # odd sizes: uneven chunks

    def fn(x, y):
        return np.exp(np.tanh(x) * y) + np.maximum(x, y) / (1.0 + y * y)

    outs = [compiler.compile(fn, (x, y), threads=n)(x, y) for n in (1, 2)]
    assert outs[0].tobytes() == outs[1].tobytes()
    np.testing.assert_allclose(outs[0], fn(x.astype(np.float64), y.astype(np.float64)), **TRANS)


@pytest.mark.parametrize("axis", [None, -1, 0])
def test_threads_bitwise_reduction(axis):
    x = rand(1021, 2053, seed=3)

    def fn(x):
        return np.sum(x * 1.5, axis=axis)

    outs = [compiler.compile(fn, (x,), threads=n)(x) for n in (1, 2)]
    assert outs[0].tobytes() == outs[1].tobytes()
    k = x.size if axis is None else x.shape[axis]
    np.testing.assert_allclose(outs[0], fn(x.astype(np.float64)), **red_tol(k))


def test_threads_setter_same_result():
    a, b = rand(96, 300, seed=1), rand(300, 200, seed=2)
    m = compiler.compile(lambda a, b: a @ b, (a, b), threads=1)
    first = m(a, b)
    m.threads = 2
    assert m.threads == 2
    assert m(a, b).tobytes() == first.tobytes()


_POOL_STARTUP = """
import numpy as np, compiler
a = np.ones((96, 300), np.float32); b = np.ones((300, 200), np.float32)
m = compiler.compile(lambda a, b: a @ b, (a, b), threads=1)
for t in range(1, 17):
    m.threads = t   # each new thread count starts one more pool worker
    assert (m(a, b) == 300.0).all()
print("done")
"""


def test_thread_pool_startup_does_not_hang():
    import subprocess
    import sys

    try:
        r = subprocess.run([sys.executable, "-c", _POOL_STARTUP], cwd=ROOT, capture_output=True,
                           text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("compiled call hung while the thread pool grew from 1 to 16 threads")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "done" in r.stdout


# ------------------------------------------------------------------------------ special values

SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 3.0e38, -1.5e38, 1e-40],
                   dtype=np.float32)


def _exact(fn, *inputs):
    got, want = run(fn, *inputs)
    want = np.asarray(want).astype(got.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "fn",
    [ops.relu, lambda x: np.maximum(x, 0.0), lambda x: np.minimum(x, 0.0), lambda x: np.abs(x),
     lambda x: -x, lambda x: x > 0.0, lambda x: x < 0.0, lambda x: x == x, lambda x: x != x,
     lambda x: x >= 1.0, lambda x: np.where(x > 0.0, x, 0.0)],
    ids=["relu", "maximum0", "minimum0", "abs", "neg", "gt", "lt", "eq-self", "ne-self", "ge1", "where"],
)
def test_special_values_exact(fn):
    _exact(fn, SPECIAL)


def test_special_values_maximum_propagates_nan():
    a = np.array([np.nan, 1.0, np.nan, -np.inf, np.inf, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, np.inf, -np.inf, -2.0], np.float32)
    _exact(np.maximum, a, b)
    _exact(np.minimum, a, b)


def test_special_values_max_reduction_propagates_nan():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 0.0, np.inf]], np.float32)
    _exact(lambda x: np.max(x, axis=1), x)
    _exact(lambda x: np.min(x, axis=1), x)


def test_special_values_exp_log():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -200.0, 200.0, 88.0, -88.0], np.float32)
    got, want = run(np.exp, x)
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)  # exp(200) overflows float32: inf is the right answer
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want32)], want32[np.isinf(want32)])
    finite = np.isfinite(want32)
    np.testing.assert_allclose(got[finite], want[finite], **TRANS)

    y = np.array([np.inf, 0.0, -0.0, -1.0, np.nan, 1.0, 1e-30], np.float32)
    got, want = run(np.log, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], **TRANS)


def test_exp_within_two_ulp_over_its_whole_range():
    """exp over [-104, 89], denormal results and the overflow edge included, and NaN in every
    lane position (the NaN runs through the arithmetic: no select puts it back)."""
    x = np.concatenate([np.linspace(-104.0, 89.0, 40_001, dtype=np.float32),
                        np.float32([88.72, 88.73, -87.33, -103.9, -1e-8, 1e-8])])
    got, _ = run(np.exp, x)
    want = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want32))
    finite = np.isfinite(want32)
    ulp = np.spacing(np.abs(want32[finite])).astype(np.float64)
    assert np.max(np.abs(got[finite] - want[finite]) / ulp) <= 2.0
    y = np.full(19, 1.0, np.float32)
    y[[0, 7, 8, 18]] = np.nan
    got, _ = run(np.exp, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(y))


@pytest.mark.parametrize("target_cpu", [None, "x86-64-v3"], ids=["host", "avx2"])
def test_softmax_entries_far_below_the_row_max(target_cpu):
    """Softmax's exp is marked afn: where the target has no vscalefps (AVX2 code) its results
    below 2^-126 may be 0. Entries 0 to 110 below the row max, rows of 7 and 129: those of
    2^-126 or more within 4e-7 of float64 softmax, the smaller ones within 2^-126 of it."""
    rng = np.random.default_rng(3)
    for n in (7, 129):
        x = rng.uniform(-110.0, 0.0, (64, n)).astype(np.float32)
        x[:, 0] = 0.0
        got, want = run(lambda x: ops.softmax(x, axis=-1), x, target_cpu=target_cpu)
        want = np.exp(x.astype(np.float64)) / np.exp(x.astype(np.float64)).sum(-1, keepdims=True)
        big = want >= np.finfo(np.float32).tiny
        assert (~big).sum() > 50
        np.testing.assert_allclose(got[big], want[big], rtol=4e-7)
        assert np.all(np.abs(got[~big] - want[~big]) <= np.finfo(np.float32).tiny)


@pytest.mark.parametrize("target_cpu", [None, "x86-64-v3"], ids=["host", "avx2"])
def test_softmax_rows_with_nan_and_minus_inf(target_cpu):
    """A row holding a NaN is NaN wherever the NaN is (the row's max ignores it, nnan, but the
    sum carries it to every entry), a row of -inf is NaN (as NumPy's -inf - -inf), a row with
    +inf is NaN (inf - inf), and -inf entries of other rows give exact zeros; rows of 1, 7,
    129 and 133 entries (a NaN in the last, partial vector)."""
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    for n in (1, 7, 129, 133):
        x = rand(7, n) * 3.0
        x[1, n // 2] = np.nan
        x[2, :] = -np.inf
        if n > 1:
            x[3, 0] = -np.inf
        x[4, 0] = np.nan
        x[5, n - 1] = np.nan
        x[6, n // 3] = np.inf
        with np.errstate(invalid="ignore"):
            got, want = run(softmax, x, target_cpu=target_cpu)
        assert np.isnan(want[[1, 2, 4, 5, 6]]).all()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], **TRANS)
        assert (got[ok][want[ok] == 0] == 0).all()


def test_special_values_tanh_sigmoid_saturate():
    x = np.array([np.inf, -np.inf, 50.0, -50.0, 0.0], np.float32)
    _exact(np.tanh, x)
    got, want = run(ops.sigmoid, x)
    np.testing.assert_allclose(got, want, **TRANS)


@pytest.mark.parametrize("target_cpu", [None, "x86-64-v3"], ids=["host", "avx2"])
def test_sigmoid_over_its_whole_range(target_cpu):
    """Sigmoid's exp(-x) is marked afn (flushes below 2^-126; +inf where x <= -88.38): over
    [-110, 110] and odd shapes, every result of 2^-126 or more within 4e-7 relative of float64
    (2 ulp: the exp's and the division's roundings), the smaller ones (x < -87.3) within
    2^-126 of it; inf, -inf, NaN and zeros as NumPy's."""
    for shape in ((1,), (7,), (129, 7)):
        x = np.random.default_rng(shape[0]).uniform(-110.0, 110.0, shape).astype(np.float32)
        x.flat[0] = -88.5  # exp(88.5) is finite; its flushed form is +inf
        got, _ = run(ops.sigmoid, x, target_cpu=target_cpu)
        want = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
        big = want >= np.finfo(np.float32).tiny
        np.testing.assert_allclose(got[big], want[big], rtol=4e-7)
        assert np.all(np.abs(got[~big] - want[~big]) <= np.finfo(np.float32).tiny)
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -87.0, 87.0], np.float32)
    got, _ = run(ops.sigmoid, x, target_cpu=target_cpu)
    with np.errstate(over="ignore"):
        want = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=4e-7)


# ------------------------------------------------------------------------------ nn ops

@pytest.mark.parametrize(
    "axis, shape", [(-1, (7,)), (-1, (4, 129)), (0, (5, 3)), (1, (2, 3, 4)), (-2, (2, 3, 4))], ids=str
)
def test_softmax(axis, shape):
    x = rand(*shape) * 3.0
    got = check(lambda x: ops.softmax(x, axis=axis), x, tol=TRANS)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-5)


def test_softmax_large_inputs_stable():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0]], np.float32)
    check(lambda x: ops.softmax(x), x, tol=TRANS)


# ------------------------------------------------------------------------------ API behaviour

def test_jit_plain_recompiles_per_shape():
    @jit
    def f(x, y):
        return np.tanh(x) * y + 1.0

    for shape in [(3, 4), (3, 4), (5,), (3, 4), (5,), (2, 2, 2)]:
        x, y = rand(*shape, seed=1), rand(*shape, seed=2)
        np.testing.assert_allclose(f(x, y), np.tanh(x.astype(np.float64)) * y + 1.0, **TRANS)
    assert len(f.cache) == 3
    assert "aicc." in f.ir("tensor")


def test_jit_with_arguments():
    @jit(threads=1)
    def g(x):
        return np.sum(x * x, axis=0)

    assert isinstance(g, compiler.JitFunction)
    x = rand(6, 3)
    np.testing.assert_allclose(g(x), np.sum(x.astype(np.float64) ** 2, axis=0), **red_tol(6))
    assert len(g.cache) == 1
    assert g.compiled_for(x).threads == 1
    g(rand(6, 3, seed=9))
    assert len(g.cache) == 1


def test_compile_without_inputs_is_jit():
    f = compiler.compile(lambda x: x * 2.0)
    x = rand(4)
    np.testing.assert_array_equal(f(x), x * 2)
    assert len(f.cache) == 1


def test_tuple_outputs():
    a, b = rand(3, 4, seed=1), rand(3, 4, seed=2)
    m = compiler.compile(lambda a, b: (a + b, a * b, np.sum(a, axis=1)), (a, b))
    out = m(a, b)
    assert isinstance(out, tuple) and len(out) == 3
    np.testing.assert_allclose(out[0], a + b, **ELEM)
    np.testing.assert_allclose(out[1], a * b, **ELEM)
    np.testing.assert_allclose(out[2], a.astype(np.float64).sum(axis=1), **red_tol(4))


def test_return_input_unchanged():
    x = rand(5, 3)
    m = compiler.compile(lambda x: x, (x,))
    out = m(x)
    np.testing.assert_array_equal(out, x)
    assert out is not x
    out[...] = 0.0  # the result is a copy, not a view of the argument
    assert np.any(x != 0)


def test_same_computed_output_twice():
    x = rand(4)
    a, b = compiler.compile(lambda x: (lambda y: (y, y))(x + 1.0), (x,))(x)
    np.testing.assert_array_equal(a, x + 1.0)
    np.testing.assert_array_equal(b, x + 1.0)


def test_return_input_twice():
    x = rand(4)
    a, b = compiler.compile(lambda x: (x, x), (x,))(x)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, x)
    assert a is not b


def test_return_input_in_tuple():
    x, y = rand(4, seed=1), rand(4, seed=2)
    m = compiler.compile(lambda x, y: (y, x + y, x), (x, y))
    a, b, c = m(x, y)
    np.testing.assert_array_equal(a, y)
    np.testing.assert_array_equal(c, x)
    np.testing.assert_allclose(b, x + y, **ELEM)


def test_same_output_twice():
    x = rand(4)
    m = compiler.compile(lambda x: (np.exp(x), np.exp(x)), (x,))
    a, b = m(x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, np.exp(x.astype(np.float64)), **TRANS)


def test_captured_constants():
    w = rand(5, 3, seed=11)
    b = rand(3, seed=12)
    scale64 = np.linspace(0.5, 1.5, 3)  # float64 capture: converted to float32

    def fn(x):
        return np.maximum(x @ w + b, 0.0) * scale64

    x = rand(4, 5)
    got = compiler.compile(fn, (x,))(x)
    want = np.maximum(x.astype(np.float64) @ w + b, 0.0) * scale64.astype(np.float32)
    np.testing.assert_allclose(got, want, **red_tol(5))


def test_constant_only_output():
    c = rand(2, 3, seed=5)
    x = rand(2, 3)
    m = compiler.compile(lambda x: (x + c, c * 2.0), (x,))
    out = m(x)
    np.testing.assert_allclose(out[0], x + c, **ELEM)
    np.testing.assert_allclose(out[1], c * 2.0, **ELEM)


def test_repeated_calls_and_fresh_outputs():
    x = rand(8, 8)
    m = compiler.compile(lambda x: np.exp(x) + 1.0, (x,))
    first = m(x)
    second = m(x)
    assert first is not second
    np.testing.assert_array_equal(first, second)
    y = rand(8, 8, seed=3)
    np.testing.assert_allclose(m(y), np.exp(y.astype(np.float64)) + 1.0, **TRANS)


def test_non_contiguous_input():
    base = rand(6, 8)
    x = base[:, ::2]
    m = compiler.compile(lambda x: x * 2.0, (np.ascontiguousarray(x),))
    np.testing.assert_array_equal(m(x), x * 2.0)
    xt = rand(4, 3).T
    m2 = compiler.compile(lambda x: x + 1.0, (np.ascontiguousarray(xt),))
    np.testing.assert_array_equal(m2(xt), xt + 1.0)


def test_no_fuse_same_result():
    x, y = rand(7, 9, seed=1), rand(7, 9, seed=2)

    def fn(x, y):
        return np.tanh(x) * y - np.sum(x, axis=1, keepdims=True)

    a = compiler.compile(fn, (x, y))(x, y)
    b = compiler.compile(fn, (x, y), fuse=False)(x, y)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a, fn(x.astype(np.float64), y.astype(np.float64)), **red_tol(9))


def test_wrong_input_shape_raises_compile_error():
    x = rand(3, 4)
    m = compiler.compile(lambda x: x + 1.0, (x,))
    with pytest.raises(compiler.CompileError, match="input 0"):
        m(rand(4, 3))
    with pytest.raises(compiler.CompileError):
        m(x, x)
    with pytest.raises(compiler.CompileError, match="float64|dtype"):
        m(x.astype(np.float64))


def test_errors_are_compile_errors():
    x = rand(3, 4)
    with pytest.raises(compiler.UnsupportedOpError, match="np.sort"):
        compiler.compile(lambda x: np.sort(x), (x,))
    with pytest.raises(compiler.ShapeError):
        compiler.compile(lambda x, y: x + y, (x, rand(5, 4)))
    with pytest.raises(compiler.CompileError, match="target"):
        compiler.compile(lambda x: x, (x,), target="tpu")
    with pytest.raises(compiler.CompileError, match="float32"):
        compiler.compile(lambda x: x, (x.astype(np.float64),))


EXPECTED_IN_STAGE = {
    "tensor": ["aicc."],
    "linalg": ["linalg.generic"],
    "memref": ["memref"],
    "loops": ["scf."],
    "llvm": ["define void"],
    "asm": [],
}


def test_ir_stages():
    x, w = rand(4, 6, seed=1), rand(6, 3, seed=2)
    m = compiler.compile(lambda x, w: np.exp(x @ w) + np.sum(x), (x, w))
    for stage in STAGES:
        text = m.ir(stage)
        assert isinstance(text, str) and text.strip(), stage
        for needle in EXPECTED_IN_STAGE[stage]:
            assert needle in text, (stage, needle)
    assert "aicc.matmul" in m.ir("tensor")
    assert "= aicc." not in m.ir("linalg")  # no aicc ops left (aicc.schedule attributes are)
    assert "memref.view %workspace" in m.ir("memref") or "memref.global" in m.ir("memref")
    assert "tensor<" not in m.ir("memref").split("memref.global")[-1]
    assert "scf.for" in m.ir("loops") or "scf.parallel" in m.ir("loops")
    assert "linalg." not in m.ir("loops")
    assert m.ir("asm").count("\n") > 5
    with pytest.raises(compiler.CompileError):
        m.ir("bogus")


def test_ir_loops_parallel_for_elementwise():
    x = rand(64, 64)
    m = compiler.compile(lambda x: np.exp(x) * 2.0, (x,))
    assert "scf.parallel" in m.ir("loops") or "scf.for" in m.ir("loops")


# ------------------------------------------------------------------------------ models

def _load_example(name: str):
    ns = runpy.run_path(str(EXAMPLES / name))
    inputs = ns["example_inputs"]
    if callable(inputs):
        inputs = inputs()
    return ns["model"], tuple(inputs)


@pytest.mark.parametrize(
    "name, k", [("mlp.py", 784), ("softmax.py", 1000), ("layernorm.py", 768), ("attention.py", 128)]
)
def test_example_models(name, k):
    model, inputs = _load_example(name)
    got, want = run(model, *inputs)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, **red_tol(k))
    # and against eager NumPy on the float32 inputs, as the CLI checks it
    np.testing.assert_allclose(got, model(*inputs), **red_tol(k))


def _mha(T=8, D=16, H=4, mask_value=-1e9, seed=0):
    rng = np.random.default_rng(seed)
    wq, wk, wv, wo = (rng.standard_normal((D, D)).astype(np.float32) / np.float32(np.sqrt(D))
                      for _ in range(4))
    causal = np.tril(np.ones((T, T), dtype=bool))
    dh = D // H

    def heads(t):
        return t.reshape(T, H, dh).transpose(1, 0, 2)

    def mha(x):
        q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(np.float32(dh))
        scores = np.where(causal, scores, mask_value)
        p = ops.softmax(scores, axis=-1)
        return (p @ v).transpose(1, 0, 2).reshape(T, D) @ wo

    return mha, rng.standard_normal((T, D)).astype(np.float32)


def test_multi_head_attention_causal():
    mha, x = _mha()
    got, want = run(mha, x)
    assert got.shape == (8, 16)
    np.testing.assert_allclose(got, want, **red_tol(16))


def test_multi_head_attention_causal_mask_is_causal():
    # Changing the last token must not change the outputs of the earlier ones.
    mha, x = _mha(T=6, D=8, H=2, mask_value=-np.inf, seed=1)
    m = compiler.compile(mha, (x,))
    y = x.copy()
    y[-1] += 1.0
    a, b = m(x), m(y)
    np.testing.assert_array_equal(a[:-1], b[:-1])
    assert not np.allclose(a[-1], b[-1])
    np.testing.assert_allclose(a, mha(x.astype(np.float64)), **red_tol(8))
