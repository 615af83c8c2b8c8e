"""The NumPy reference interpreter of the aicc dialect, on hand-written IR.

Tolerances: rtol=1e-5, atol=1e-6 against independent NumPy / math formulas.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from compiler import ops
from compiler.dialects import aicc
from compiler.errors import CompileError, UnsupportedOpError
from compiler.reference import evaluate_op, run_reference

RTOL, ATOL = 1e-5, 1e-6
rng = np.random.default_rng(7)


def parse(text: str):
    ctx = Context()
    for d in (Builtin, Func, Arith, aicc.AICC):
        ctx.load_dialect(d)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def erf64(x):
    return np.vectorize(math.erf)(np.asarray(x, dtype=np.float64))


UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "exp": np.exp,
    "log": lambda x: np.log(x),
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x.astype(np.float64)),
    "erf": erf64,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x.astype(np.float64))),
    "gelu": lambda x: 0.5 * x * (1 + erf64(x / np.sqrt(2.0))),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    m = parse(f"""
    func.func @main(%x: tensor<3x129xf32>) -> tensor<3x129xf32> {{
      %0 = aicc.{name} %x : tensor<3x129xf32>
      func.return %0 : tensor<3x129xf32>
    }}""")
    x = rand(3, 129)
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + np.float32(0.1)
    (y,) = run_reference(m, [x])
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, UNARY[name](x), rtol=RTOL, atol=ATOL)


def test_gelu_tanh():
    m = parse("""
    func.func @main(%x: tensor<7xf32>) -> tensor<7xf32> {
      %0 = aicc.gelu %x {approximate = "tanh"} : tensor<7xf32>
      func.return %0 : tensor<7xf32>
    }""")
    x = rand(7).astype(np.float64)
    want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(run_reference(m, [x.astype(np.float32)])[0], want, rtol=RTOL, atol=ATOL)


BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "pow": lambda a, b: np.power(np.abs(a), b),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcast(name):
    m = parse(f"""
    func.func @main(%a: tensor<4x1xf32>, %b: tensor<1x5xf32>) -> tensor<4x5xf32> {{
      %0 = aicc.{name} %a, %b : tensor<4x1xf32>, tensor<1x5xf32> -> tensor<4x5xf32>
      func.return %0 : tensor<4x5xf32>
    }}""")
    a, b = rand(4, 1), rand(1, 5)
    if name == "pow":
        a = np.abs(a)
    (y,) = run_reference(m, [a, b])
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, BINARY[name](a, b), rtol=RTOL, atol=ATOL)


def test_compare_select_cast_constant():
    m = parse("""
    func.func @main(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>) {
      %zero = aicc.constant dense<0.0> : tensor<f32>
      %half = aicc.constant dense<[0.5, 1.5, 2.5]> : tensor<3xf32>
      %m = aicc.compare "gt", %a, %zero : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
      %s = aicc.select %m, %a, %half : tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
      %c = aicc.cast %m : tensor<2x3xi1> -> tensor<2x3xf32>
      func.return %s, %c, %m : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>
    }""")
    a = rand(2, 3)
    s, c, mask = run_reference(m, [a])
    np.testing.assert_array_equal(mask, a > 0)
    np.testing.assert_array_equal(c, (a > 0).astype(np.float32))
    np.testing.assert_allclose(s, np.where(a > 0, a, [0.5, 1.5, 2.5]), rtol=RTOL, atol=ATOL)
    assert mask.dtype == np.bool_ and c.dtype == np.float32


@pytest.mark.parametrize("pred,fn", [("gt", np.greater), ("ge", np.greater_equal), ("lt", np.less),
                                     ("le", np.less_equal), ("eq", np.equal), ("ne", np.not_equal)])
def test_compare_predicates(pred, fn):
    m = parse(f"""
    func.func @main(%a: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<5xi1> {{
      %m = aicc.compare "{pred}", %a, %b : tensor<5xf32>, tensor<5xf32> -> tensor<5xi1>
      func.return %m : tensor<5xi1>
    }}""")
    a, b = rand(5), rand(5)
    b[2] = a[2]
    np.testing.assert_array_equal(run_reference(m, [a, b])[0], fn(a, b))


@pytest.mark.parametrize("name,fn", [("reduce_sum", np.sum), ("reduce_mean", np.mean),
                                     ("reduce_max", np.max), ("reduce_min", np.min)])
def test_reductions(name, fn):
    m = parse(f"""
    func.func @main(%x: tensor<3x4x5xf32>) -> (tensor<4xf32>, tensor<3x1x1xf32>) {{
      %0 = aicc.{name} %x {{axes = array<i64: 0, 2>, keepdims = false}} : tensor<3x4x5xf32> -> tensor<4xf32>
      %1 = aicc.{name} %x {{axes = array<i64: 1, 2>, keepdims = true}} : tensor<3x4x5xf32> -> tensor<3x1x1xf32>
      func.return %0, %1 : tensor<4xf32>, tensor<3x1x1xf32>
    }}""")
    x = rand(3, 4, 5)
    y0, y1 = run_reference(m, [x])
    np.testing.assert_allclose(y0, fn(x, axis=(0, 2)), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y1, fn(x, axis=(1, 2), keepdims=True), rtol=RTOL, atol=ATOL)


def test_matmul_softmax_layout():
    m = parse("""
    func.func @main(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> (tensor<5x3x2xf32>, tensor<30xf32>, tensor<2x2x3x5xf32>) {
      %0 = aicc.matmul %a, %b : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
      %1 = aicc.softmax %0 {axis = 1 : i64} : tensor<2x3x5xf32>
      %2 = aicc.transpose %1 {permutation = array<i64: 2, 1, 0>} : tensor<2x3x5xf32> -> tensor<5x3x2xf32>
      %3 = aicc.reshape %1 : tensor<2x3x5xf32> -> tensor<30xf32>
      %4 = aicc.broadcast_to %1 : tensor<2x3x5xf32> -> tensor<2x2x3x5xf32>
      func.return %2, %3, %4 : tensor<5x3x2xf32>, tensor<30xf32>, tensor<2x2x3x5xf32>
    }""")
    a, b = rand(2, 3, 4), rand(4, 5)
    t, r, bc = run_reference(m, [a, b])
    mm = (a.astype(np.float64) @ b).astype(np.float64)
    e = np.exp(mm - mm.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(t, sm.transpose(2, 1, 0), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(r, sm.reshape(30), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(bc, np.broadcast_to(sm, (2, 2, 3, 5)), rtol=RTOL, atol=ATOL)
    assert bc.flags.writeable and bc.flags.c_contiguous


def test_outputs_are_copies_and_other_func_names():
    m = parse("""
    func.func @other(%x: tensor<3xf32>) -> tensor<3xf32> {
      func.return %x : tensor<3xf32>
    }""")
    x = rand(3)
    (y,) = run_reference(m, [x], func_name="other")
    y[0] = 42
    assert x[0] != 42
    with pytest.raises(CompileError, match="no function @main"):
        run_reference(m, [x])


def test_input_mismatch():
    m = parse("""
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      func.return %x : tensor<3xf32>
    }""")
    with pytest.raises(CompileError, match="takes 1 inputs"):
        run_reference(m, [])
    with pytest.raises(CompileError, match=r"shape \(4,\)"):
        run_reference(m, [rand(4)])


def test_unknown_op():
    m = parse("""
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = arith.addf %x, %x : tensor<3xf32>
      func.return %0 : tensor<3xf32>
    }""")
    with pytest.raises(UnsupportedOpError, match="arith.addf"):
        run_reference(m, [rand(3)])


def test_evaluate_op_and_no_warnings():
    x = np.array([-1000.0, -1.0, 0.0, 1.0, 1000.0], dtype=np.float32)
    m = parse("""
    func.func @main(%x: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
      %0 = aicc.sigmoid %x : tensor<5xf32>
      %1 = aicc.log %x : tensor<5xf32>
      func.return %0, %1 : tensor<5xf32>, tensor<5xf32>
    }""")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s, lg = run_reference(m, [x])
    np.testing.assert_allclose(s, [0.0, 1 / (1 + math.e), 0.5, 1 / (1 + 1 / math.e), 1.0], rtol=RTOL, atol=ATOL)
    assert np.isnan(lg[0]) and lg[2] == -np.inf
    op = next(o for o in m.walk() if isinstance(o, aicc.SigmoidOp))
    (v,) = evaluate_op(op, [x])
    np.testing.assert_array_equal(v, s)


def test_nn_ops_eager_dtypes():
    x = rand(4, 6)
    for fn in (ops.relu, ops.gelu, ops.sigmoid, ops.softmax, ops.rsqrt, ops.erf):
        assert fn(x).dtype == np.float32
    np.testing.assert_allclose(ops.softmax(x, axis=0).sum(axis=0), 1.0, rtol=RTOL)
    with pytest.raises(ValueError):
        ops.gelu(x, approximate="fast")
