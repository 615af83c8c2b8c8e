"""compiler.tensor_op: custom operators in index notation, against NumPy and torch.

Forward results go through the whole pipeline (cpu, and cuda-emu on small shapes); gradients
come from the autodiff pass with the VJP derived from the notation, checked against torch's
autograd or float64 central differences of the NumPy evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

import compiler
from compiler import CompileError
from compiler.dialects import index_notation as ixn
from compiler.lowering.autodiff import ReverseModeAD
from compiler.pipeline import CompileOptions, compile_module
from compiler.reference import run_reference
from frontends.numpy_trace import trace

RNG = np.random.default_rng(18)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


MATMUL = "out[i, j] = sum[k](a[i, k] * b[k, j])"
CONV1D = "out[i] = sum[k](x[i + k] * w[k])"
MAXPOOL = "out[c, i] = max[k](x[c, 2 * i + k])"
SOFTMAX_NUM = "out[i, j] = exp(x[i, j] - max[k](x[i, k]))"


# --- forward, on the CPU --------------------------------------------------------------------


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 129, 5), (129, 7, 1)])
def test_matmul(m, k, n):
    mm = compiler.tensor_op(MATMUL)
    a, b = rand(m, k), rand(k, n)
    close(mm(a, b), a @ b)
    close(mm(b=b, a=a), a @ b)  # inputs by name too


@pytest.mark.parametrize("n,k", [(7, 1), (129, 7), (7, 7)])
def test_conv1d_inferred_ranges(n, k):
    conv = compiler.tensor_op(CONV1D)
    x, w = rand(n), rand(k)
    y = conv(x, w)
    assert y.shape == (n - k + 1,)  # i: the largest range keeping x[i + k] in bounds
    close(y, np.convolve(x, w[::-1], "valid"))


@pytest.mark.parametrize("c,n", [(1, 2), (3, 7), (2, 129)])
def test_strided_maxpool(c, n):
    pool = compiler.tensor_op(MAXPOOL, ranges={"k": 2})
    x = rand(c, n)
    m = (n - 2) // 2 + 1
    close(pool(x), x[:, : 2 * m].reshape(c, m, 2).max(-1))


@pytest.mark.parametrize("shape", [(1, 1), (7, 129), (3, 7)])
def test_softmax_numerator(shape):
    op = compiler.tensor_op(SOFTMAX_NUM)
    x = rand(*shape) * 10
    close(op(x), np.exp(x - x.max(1, keepdims=True)))


def test_scalar_input_elementwise():
    op = compiler.tensor_op("out[i, j] = tanh(x[i, j] * s) + 1.5")
    x = rand(7, 129)
    close(op(x, np.float32(0.25)), np.tanh(x * 0.25) + 1.5)
    close(op(x, 2.0), np.tanh(x * 2.0) + 1.5)  # a Python number is a 0-d input
    close(op(np.ones((1, 1), np.float32), np.array(3.0, np.float32)), np.tanh([[3.0]]) + 1.5)


def test_where_and_comparison():
    op = compiler.tensor_op("out[i] = where(x[i] > y[i], x[i] - y[i], max(x[i], 0.0) * (y[i] <= 0.5))")
    x, y = rand(129), rand(129)
    close(op(x, y), np.where(x > y, x - y, np.maximum(x, 0) * (y <= 0.5)))


def test_math_functions_and_reductions():
    op = compiler.tensor_op(
        "out[i] = sum[k](sigmoid(x[i, k]) * sqrt(abs(x[i, k])) + relu(-x[i, k]) / (1 + exp(x[i, k])))"
        " + prod[k](cos(x[i, k])) - min[k](log(abs(x[i, k]) + 1))")
    x = rand(7, 5)
    want = (np.sum(1 / (1 + np.exp(-x)) * np.sqrt(np.abs(x)) + np.maximum(-x, 0) / (1 + np.exp(x)), 1)
            + np.prod(np.cos(x), 1) - np.min(np.log(np.abs(x) + 1), 1))
    close(op(x), want)


def test_inside_jit_with_numpy_ops():
    conv = compiler.tensor_op(CONV1D)
    num = compiler.tensor_op(SOFTMAX_NUM)

    @compiler.jit
    def f(x, w, z):
        y = np.maximum(conv(x * 2.0, w), 0.0)
        e = num(z)
        return y + 1.0, e / e.sum(axis=1, keepdims=True)

    x, w, z = rand(129), rand(7), rand(7, 9)
    y, s = f(x, w, z)
    close(y, np.maximum(np.convolve(2 * x, w[::-1], "valid"), 0) + 1)
    e = np.exp(z - z.max(1, keepdims=True))
    close(s, e / e.sum(1, keepdims=True))
    tensor_ir = f.ir("tensor")
    # the nested reduction became a chain of two simple ops
    assert tensor_ir.count("aicc.tensor_op") == 3
    assert '"out[i] = max[k](in0[i, k])"' in tensor_ir


def test_reference_interpreter_agrees():
    pool = compiler.tensor_op(MAXPOOL, ranges={"k": 3})
    x = rand(2, 11)
    prog = trace(lambda x: pool(x), (x,))
    (ref,) = run_reference(prog.module, [x], prog.func_name)
    close(ref, pool(x))
    close(ref, np.stack([x[:, 2 * i:2 * i + 3].max(1) for i in range(5)], 1))


# --- forward, on the CUDA emulator ----------------------------------------------------------


@pytest.mark.parametrize("src,ranges,make,want", [
    (MATMUL, None, lambda: (rand(7, 5), rand(5, 3)), lambda a, b: a @ b),
    (CONV1D, None, lambda: (rand(9), rand(3)), lambda x, w: np.convolve(x, w[::-1], "valid")),
    (MAXPOOL, {"k": 2}, lambda: (rand(3, 7),), lambda x: x[:, :6].reshape(3, 3, 2).max(-1)),
    (SOFTMAX_NUM, None, lambda: (rand(3, 5),), lambda x: np.exp(x - x.max(1, keepdims=True))),
    ("out[i] = x[i] * s - 1", None, lambda: (rand(7), np.float32(3)), lambda x, s: x * s - 1),
])
def test_cuda_emu(src, ranges, make, want):
    op = compiler.tensor_op(src, ranges, target="cuda-emu")
    args = make()
    close(op(*args), want(*args))


# --- errors ---------------------------------------------------------------------------------


def test_syntax_error_line_column_caret():
    with pytest.raises(CompileError) as e:
        compiler.tensor_op("out[i] =\n    x[i] * * 2")
    msg = str(e.value)
    assert "line 2, column 12" in msg
    lines = msg.splitlines()
    assert lines[1] == "      x[i] * * 2"
    assert lines[2] == "  " + " " * 11 + "^"


def test_semantic_errors_with_position():
    with pytest.raises(CompileError, match=r"unknown function 'foo'.*line 1, column 10"):
        compiler.tensor_op("out[i] = foo(x[i])")
    with pytest.raises(CompileError, match=r"'i \* j' is not affine"):
        compiler.tensor_op("out[i, j] = x[i * j]")


def test_ambiguous_range_names_the_index():
    pool = compiler.tensor_op(MAXPOOL)  # no range for k: neither i nor k is determined
    with pytest.raises(CompileError, match=r"cannot infer the range of index 'i' \(nor those of 'k'\)"):
        pool(rand(3, 8))
    with pytest.raises(CompileError, match=r"ranges names 'q'"):
        compiler.tensor_op(MAXPOOL, ranges={"q": 2})


def test_conflicting_sizes_name_the_index():
    mm = compiler.tensor_op(MATMUL)
    with pytest.raises(CompileError, match=r"index 'k' has size 4 from 'a' dim 1 but size 5 from 'b' dim 0"):
        mm(rand(3, 4), rand(5, 2))
    conv = compiler.tensor_op(CONV1D, ranges={"k": 4})
    with pytest.raises(CompileError, match=r"index 'k' has size 4 from ranges= but size 3 from 'w' dim 0"):
        conv(rand(9), rand(3))


def test_shape_mismatch_names_the_operand():
    mm = compiler.tensor_op(MATMUL)
    with pytest.raises(CompileError, match=r"operand 'b' has shape \(4,\) but is read with 2 subscripts"):
        mm(rand(3, 4), rand(4))
    op = compiler.tensor_op("out[i] = x[i] * s")
    with pytest.raises(CompileError, match=r"operand 's' has shape \(3,\) but is read as a scalar"):
        op(rand(3), rand(3))


def test_out_of_bounds_and_binding_errors():
    op = compiler.tensor_op("out[i] = x[i + 1] + y[i]")
    with pytest.raises(CompileError, match=r"subscript 'i \+ 1' of 'x' \(dim 0, size 4\) reaches 4"):
        op(rand(4), rand(4))
    with pytest.raises(CompileError, match=r"no input named 'z'"):
        op(rand(5), z=rand(4))
    with pytest.raises(CompileError, match=r"missing input y"):
        op(rand(5))


def test_error_inside_jit_names_user_line():
    mm = compiler.tensor_op(MATMUL)

    @compiler.jit
    def f(a, b):
        return mm(a, b)

    with pytest.raises(CompileError, match=r"test_tensor_op.py:\d+: tensor_op: index 'k'"):
        f(rand(2, 3), rand(4, 2))


# --- printing -------------------------------------------------------------------------------


@pytest.mark.parametrize("src", [MATMUL, CONV1D, MAXPOOL, SOFTMAX_NUM,
                                 "o[i] = -x[i] * -2.0 - (a - b) / (c * d) + where(x[i] >= 0.0, x[i], 1e-05)",
                                 "o[i + 2 * j - 1] += x[i] * y[j]"])
def test_canonical_text_round_trips(src):
    text = ixn.to_text(ixn.parse(src))
    assert ixn.to_text(ixn.parse(text)) == text
    assert ixn.parse(text) == ixn.parse(src)


# --- gradients ------------------------------------------------------------------------------


def _grads(fn, inputs, target="cpu"):
    """fn's value and its gradients with respect to every input, through the whole pipeline."""
    prog = trace(fn, tuple(inputs))
    ReverseModeAD(wrt=tuple(range(len(inputs)))).apply(Context(), prog.module)
    m = compile_module(prog.module, prog.func_name, output_is_tuple=True, options=CompileOptions(target))
    out = m(*inputs)
    return out[0], out[1:]


def _check_torch(src, ranges, torch_fn, inputs, target="cpu"):
    torch = pytest.importorskip("torch")
    op = compiler.tensor_op(src, ranges)
    tin = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in inputs]
    ty = torch_fn(*tin)
    w = RNG.standard_normal(tuple(ty.shape)).astype(np.float32)
    (ty * torch.tensor(w, dtype=torch.float64)).sum().backward()
    idx = ", ".join("abcdef"[: w.ndim])
    # the loss is a tensor_op too: a weighted sum of the output
    loss = compiler.tensor_op(f"l[] = sum[{idx}](y[{idx}] * w[{idx}])")
    value, grads = _grads(lambda *xs: loss(op(*xs), w), inputs, target)
    close(value, float((ty * torch.tensor(w, dtype=torch.float64)).sum().detach()), 1e-4)
    for g, t in zip(grads, tin):
        close(g, t.grad.numpy(), 1e-4)


def test_grad_matmul():
    _check_torch(MATMUL, None, lambda a, b: a @ b, [rand(7, 5), rand(5, 3)])


def test_grad_conv1d():
    F = pytest.importorskip("torch.nn.functional")
    _check_torch(CONV1D, None, lambda x, w: F.conv1d(x[None, None], w[None, None])[0, 0], [rand(20), rand(4)])


def test_grad_strided_maxpool():
    F = pytest.importorskip("torch.nn.functional")
    _check_torch(MAXPOOL, {"k": 2}, lambda x: F.max_pool1d(x[None], 2, 2)[0], [rand(3, 9)])


def test_grad_softmax_numerator():
    _check_torch(SOFTMAX_NUM, None, lambda x: (x - x.max(1, keepdim=True).values).exp(), [rand(4, 6)])


def test_grad_prod_min_and_scalar():
    _check_torch("out[i] = prod[k](x[i, k]) + min[k](x[i, k] * s)", None,
                 lambda x, s: x.prod(1) + (x * s).min(1).values, [rand(4, 5), np.float32(1.5)])


def test_grad_where_and_functions():
    torch = pytest.importorskip("torch")
    _check_torch("out[i] = where(x[i] > 0, x[i] * x[i], sigmoid(x[i]) / (1 + abs(y[i]))) + tanh(y[i]) * log(1 + x[i] * x[i])",
                 None, lambda x, y: torch.where(x > 0, x * x, torch.sigmoid(x) / (1 + y.abs()))
                 + torch.tanh(y) * torch.log(1 + x * x), [rand(7), rand(7)])


def test_grad_cuda_emu():
    F = pytest.importorskip("torch.nn.functional")
    _check_torch(CONV1D, None, lambda x, w: F.conv1d(x[None, None], w[None, None])[0, 0], [rand(9), rand(3)], "cuda-emu")
    _check_torch(MAXPOOL, {"k": 3}, lambda x: F.max_pool1d(x[None], 3, 2)[0], [rand(2, 9)], "cuda-emu")


def test_grad_scatter_forms_against_finite_differences():
    """Strided, repeated and constant subscripts (the scatter-add gradients), and an index the
    body never reads (its range multiplies), against float64 central differences."""
    src = "out[i, j] = sum[k](x[2 * i + k, j] * y[i, j] + x[0, j] * w[k] + z[i, i + j])"
    op = compiler.tensor_op(src, {"k": 3})
    inputs = [rand(9, 4), rand(4, 4), rand(3), rand(4, 7)]
    stmt = ixn.parse(src)
    names = ixn.input_names(stmt)
    ranges = ixn.infer_ranges(stmt, {n: a.shape for n, a in zip(names, inputs)}, {"k": 3})
    g = RNG.standard_normal(ixn.result_shape(stmt, ranges)).astype(np.float32)
    loss = compiler.tensor_op("l[] = sum[a, b](y[a, b] * g[a, b])")
    _, grads = _grads(lambda *xs: loss(op(*xs), g), inputs)

    def f(*arrays):
        return float(np.sum(ixn.evaluate(stmt, dict(zip(names, arrays)), ranges) * g))

    eps = 1e-6
    base = [a.astype(np.float64) for a in inputs]
    for which, arr in enumerate(base):
        num = np.zeros(arr.shape)
        for pos in np.ndindex(arr.shape):
            hi, lo = [b.copy() for b in base], [b.copy() for b in base]
            hi[which][pos] += eps
            lo[which][pos] -= eps
            num[pos] = (f(*hi) - f(*lo)) / (2 * eps)
        close(grads[which], num, 1e-4)
