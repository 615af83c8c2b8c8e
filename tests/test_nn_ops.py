"""The operators of issue 4, each through the whole CPU pipeline against NumPy.

Every test builds a small aicc module (or an ONNX model, for the operators that are
compositions in the importer), compiles it, and compares the result with an independent NumPy
formula on odd shapes (1, 7, 129, non-square). The same module also runs through
compiler/reference.py, so the reference kernel is checked against the same formula.

Tolerances: integer and index results are exact; elementwise float results rtol=1e-5,
atol=1e-6; sums over K elements (cumsum, conv_transpose, lrn, resize) rtol=1e-4,
atol=1e-5*sqrt(K).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Region
from xdsl.rewriter import InsertPoint

from compiler.dialects import aicc, aicc_nn
from compiler.pipeline import CompileOptions, compile_module
from compiler.reference import run_reference

ELEM = dict(rtol=1e-5, atol=1e-6)


def red_tol(k: int) -> dict:
    return dict(rtol=1e-4, atol=1e-5 * math.sqrt(max(k, 1)))


def tensor(shape, dtype=np.float32) -> TensorType:
    return TensorType(aicc.mlir_element_type(np.dtype(dtype)), tuple(shape))


def build(inputs, body) -> ModuleOp:
    """A module with one @main(inputs...) whose results are `body(builder, *args)`, where
    `inputs` are example arrays (their shapes and dtypes give the argument types)."""
    types = [tensor(x.shape, x.dtype) for x in inputs]
    block = Block(arg_types=types)
    b = Builder(InsertPoint.at_end(block))
    outs = body(b, *block.args)
    outs = outs if isinstance(outs, list | tuple) else [outs]
    results = [o.results[0] if hasattr(o, "results") else o for o in outs]
    b.insert(func.ReturnOp(*results))
    module = ModuleOp([func.FuncOp("main", (types, [r.type for r in results]), Region(block))])
    module.verify()
    return module


def op(cls, *args, **kw):
    """A builder body that inserts one `cls(*block_args, *args, **kw)`."""
    def body(b, *vals):
        return b.insert(cls(*vals, *args, **kw))
    return body


def check(body, inputs, want, tol=ELEM):
    """The compiled module and the reference interpreter both give `want`."""
    module = build(inputs, body)
    ref = run_reference(module, inputs)[0]
    got = compile_module(module, "main")(*inputs)
    want = np.asarray(want)
    for name, out in (("reference", ref), ("compiled", got)):
        assert out.shape == want.shape, (name, out.shape, want.shape)
        assert out.dtype == want.dtype, (name, out.dtype, want.dtype)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(out, want, err_msg=name, **tol)
        else:
            np.testing.assert_array_equal(out, want, err_msg=name)
    return got


def rand(*shape, seed=0, lo=-3.0, hi=3.0, dtype=np.float32):
    rng = np.random.default_rng(seed + 31 * len(shape) + sum(shape))
    return rng.uniform(lo, hi, shape).astype(dtype)


def rint(*shape, seed=0, lo=-50, hi=50, dtype=np.int64):
    rng = np.random.default_rng(seed + 17 * len(shape) + sum(shape))
    return rng.integers(lo, hi, shape).astype(dtype)


SHAPES = [(1,), (129,), (2, 7, 3)]


# ------------------------------------------------------------------- rounding, trigonometry

UNARY = [
    (aicc.FloorOp, np.floor, None),
    (aicc.CeilOp, np.ceil, None),
    (aicc.RoundOp, np.round, None),
    (aicc.SinOp, np.sin, None),
    (aicc.CosOp, np.cos, None),
    (aicc.TanOp, np.tan, (-1.4, 1.4)),
    (aicc.AsinOp, np.arcsin, (-1.0, 1.0)),
    (aicc.AcosOp, np.arccos, (-1.0, 1.0)),
    (aicc.AtanOp, np.arctan, None),
    (aicc.SinhOp, np.sinh, None),
    (aicc.CoshOp, np.cosh, None),
]


@pytest.mark.parametrize("cls,fn,rng", UNARY, ids=[c.name for c, _, _ in UNARY])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_float_unary(cls, fn, rng, shape):
    lo, hi = rng or (-4.0, 4.0)
    x = rand(*shape, lo=lo, hi=hi)
    check(op(cls), [x], fn(x.astype(np.float64)).astype(np.float32))


def test_round_half_to_even_and_specials():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49999, np.inf, -np.inf, np.nan, -0.0], np.float32)
    got = check(op(aicc.RoundOp), [x], np.round(x))
    assert np.array_equal(np.signbit(got), np.signbit(np.round(x)))
    check(op(aicc.FloorOp), [x], np.floor(x))
    check(op(aicc.CeilOp), [x], np.ceil(x))


# ------------------------------------------------------------------- integer arithmetic


def _trunc_div(a, b):
    """C division (toward zero), x / 0 = 0, in Python integers."""
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape), dtype=a.dtype)
    for idx in np.ndindex(out.shape):
        x, d = int(np.broadcast_to(a, out.shape)[idx]), int(np.broadcast_to(b, out.shape)[idx])
        out[idx] = 0 if d == 0 else (abs(x) // abs(d)) * (1 if (x < 0) == (d < 0) else -1)
    return out


INT_BINARY = [
    (aicc.AddOp, np.add),
    (aicc.SubOp, np.subtract),
    (aicc.MulOp, np.multiply),
    (aicc.DivOp, _trunc_div),
    (aicc.MaximumOp, np.maximum),
    (aicc.MinimumOp, np.minimum),
    (aicc.ModOp, np.mod),
    (aicc.FModOp, np.fmod),
]


@pytest.mark.parametrize("cls,fn", INT_BINARY, ids=[c.name for c, _ in INT_BINARY])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shapes", [((1,), (1,)), ((3, 129), (129,)), ((5, 1), (1, 7))], ids=str)
def test_integer_binary(cls, fn, dtype, shapes):
    a = rint(*shapes[0], dtype=dtype)
    b = rint(*shapes[1], seed=1, lo=-6, hi=7, dtype=dtype)
    with np.errstate(all="ignore"):
        want = fn(a, b).astype(dtype)
    check(op(cls), [a, b], want)


def test_integer_division_edge_cases():
    a = np.array([7, -7, 7, -7, 0, 5, np.iinfo(np.int32).min, np.iinfo(np.int32).min], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, -1, 1], np.int32)
    check(op(aicc.DivOp), [a, b], np.array([3, -3, -3, 3, 0, 0, np.iinfo(np.int32).min, np.iinfo(np.int32).min], np.int32))
    check(op(aicc.ModOp), [a, b], np.array([1, 1, -1, -1, 0, 0, 0, 0], np.int32))
    check(op(aicc.FModOp), [a, b], np.array([1, -1, 1, -1, 0, 0, 0, 0], np.int32))


@pytest.mark.parametrize("cls,fn", [(aicc.NegOp, np.negative), (aicc.AbsOp, np.abs)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_unary(cls, fn, dtype):
    x = rint(7, 129, dtype=dtype)
    x[0, 0] = np.iinfo(dtype).min  # wraps, as in NumPy
    with np.errstate(all="ignore"):
        check(op(cls), [x], fn(x))


@pytest.mark.parametrize("cls,fn", [(aicc.ModOp, np.mod), (aicc.FModOp, np.fmod)])
def test_float_mod(cls, fn):
    a = rand(7, 129, lo=-20, hi=20)
    b = rand(129, seed=3, lo=-4, hi=4)
    b[:4] = [0.0, np.inf, -np.inf, 2.0]
    a[0, 3] = -4.0  # an exact multiple: a zero with the sign of the divisor (mod) / dividend (fmod)
    with np.errstate(all="ignore"):
        want = fn(a, b)
    got = check(op(cls), [a, b], want, tol=dict(rtol=0, atol=0))
    finite = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


@pytest.mark.parametrize("cls,fn", [(aicc.ReduceSumOp, np.sum), (aicc.ReduceMaxOp, np.max),
                                    (aicc.ReduceMinOp, np.min), (aicc.ReduceProdOp, np.prod)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions(cls, fn, dtype):
    x = rint(7, 3, 5, lo=-4, hi=5, dtype=dtype)
    check(op(cls, [0, 2], False), [x], fn(x, axis=(0, 2)).astype(dtype))
    check(op(cls, [1], True), [x], fn(x, axis=1, keepdims=True).astype(dtype))


@pytest.mark.parametrize("shape,axes", [((129,), [0]), ((7, 5), [1]), ((3, 7, 5), [0, 2])], ids=str)
def test_float_reduce_prod(shape, axes):
    x = rand(*shape, lo=0.5, hi=1.5)
    check(op(aicc.ReduceProdOp, axes, False), [x], np.prod(x.astype(np.float64), axis=tuple(axes)).astype(np.float32),
          tol=dict(rtol=1e-4, atol=1e-6))


# ------------------------------------------------------------------- argmax / argmin


def _np_arg(fn, x, axis, keep, last):
    if last:
        idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
    else:
        idx = fn(x, axis=axis)
    return np.expand_dims(idx, axis) if keep else idx


@pytest.mark.parametrize("cls,fn", [(aicc_nn.ArgMaxOp, np.argmax), (aicc_nn.ArgMinOp, np.argmin)])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((129,), 0), ((7, 5), 0), ((3, 7, 4), 1)], ids=str)
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("last", [False, True])
def test_arg_reduce(cls, fn, shape, axis, keep, last):
    x = np.round(rand(*shape)).astype(np.float32)  # rounded: repeated values, so first / last matter
    want = _np_arg(fn, x, axis, keep, last).astype(np.int64)
    check(op(cls, axis, keep, last), [x], want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_arg_reduce_integers(dtype):
    x = rint(7, 129, lo=-3, hi=3, dtype=dtype)
    check(op(aicc_nn.ArgMaxOp, 1, False, True), [x], _np_arg(np.argmax, x, 1, False, True).astype(np.int64))
    check(op(aicc_nn.ArgMinOp, 0, True, False), [x], _np_arg(np.argmin, x, 0, True, False).astype(np.int64))


def test_arg_reduce_nan_is_extreme():
    x = np.array([[1.0, np.nan, 5.0, np.nan], [np.inf, 2.0, np.inf, -np.inf]], np.float32)
    check(op(aicc_nn.ArgMaxOp, 1, False, False), [x], np.argmax(x, axis=1))
    check(op(aicc_nn.ArgMinOp, 1, False, False), [x], np.argmin(x, axis=1))
    check(op(aicc_nn.ArgMaxOp, 1, False, True), [x], np.array([3, 2]))


# ------------------------------------------------------------------- cumsum


def _np_cumsum(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y.astype(np.float64) if x.dtype.kind == "f" else y, axis=axis)
    if exclusive:
        c = c - (y.astype(np.float64) if x.dtype.kind == "f" else y)
    c = np.flip(c, axis) if reverse else c
    return c.astype(x.dtype)


@pytest.mark.parametrize("shape,axis", [((1,), 0), ((129,), 0), ((5, 7), 0), ((2, 9, 3), 1)], ids=str)
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(shape, axis, exclusive, reverse):
    x = rand(*shape)
    check(op(aicc_nn.CumSumOp, axis, exclusive, reverse), [x], _np_cumsum(x, axis, exclusive, reverse),
          tol=red_tol(shape[axis]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cumsum_integers(dtype):
    x = rint(4, 129, dtype=dtype)
    for exclusive, reverse in ((False, False), (True, True)):
        check(op(aicc_nn.CumSumOp, 1, exclusive, reverse), [x], _np_cumsum(x, 1, exclusive, reverse))


# ------------------------------------------------------------------- gather


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
@pytest.mark.parametrize("dshape,ishape,axis,dtype", [
    ((1000, 7), (2, 129), 0, np.int64),  # an embedding table: aicc_fused.gather's loads
    ((3, 129, 5), (7,), 1, np.int32),
    ((4, 17), (1,), 1, np.int64),  # the last axis, just above the select-reduction's limit
    ((129,), (), 0, np.int32),  # a scalar index
    ((16, 3), (2, 5), 0, np.int64),  # short axis: the select-reduction
], ids=str)
def test_gather(target, dshape, ishape, axis, dtype):
    data = rand(*dshape)
    size = dshape[axis]
    idx = rint(*ishape, lo=-size, hi=size, dtype=dtype)  # negative indices count from the end
    want = np.take(data, np.where(idx < 0, idx + size, idx), axis=axis)
    module = build([data, idx], op(aicc_nn.GatherOp, axis))
    got = compile_module(module, "main", options=CompileOptions(target=target))(data, idx)
    np.testing.assert_array_equal(got, want)


def test_gather_integer_table_and_out_of_range():
    """An int64 table; an index out of range reads no memory and gives 0 (ONNX leaves it
    undefined, torch raises), never a neighbour's row."""
    table = rint(300, 4, lo=-1000, hi=1000)
    idx = np.array([[0, 299, -300, 300, -301, 1 << 40]], np.int64)
    module = build([table, idx], op(aicc_nn.GatherOp, 0))
    got = compile_module(module, "main")(table, idx)
    want = np.take(table, np.clip(np.where(idx < 0, idx + 300, idx), 0, 299), axis=0)
    want[:, 3:] = 0
    np.testing.assert_array_equal(got, want)


def test_embedding_lookup_is_a_load_not_a_scan():
    """A 50,000-row table costs a load per element: the kernel's loop IR reads the table once
    per output element (no loop over the rows)."""
    table, idx = rand(50000, 8), rint(3, lo=0, hi=50000)
    module = build([table, idx], op(aicc_nn.GatherOp, 0))
    m = compile_module(module, "main")
    np.testing.assert_array_equal(m(table, idx), table[idx])
    loops = m.ir("loops")
    assert "aicc_fused.gather" not in loops and "scf.for" not in loops
    assert loops.count("memref.load") == 2  # the index and the table


# ------------------------------------------------------------------- gather_elements


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
@pytest.mark.parametrize("dshape,ishape,axis", [
    ((1,), (1,), 0), ((7, 5), (3, 5), 0), ((7, 5), (7, 9), 1), ((4, 6, 5), (3, 2, 5), 1),  # select
    ((129,), (7,), 0), ((3, 7, 129), (2, 7, 200), 2), ((40, 6), (41, 5), 0),  # loads (axis > 16)
], ids=str)
def test_gather_elements(target, dshape, ishape, axis):
    data = rand(*dshape)
    size = dshape[axis]
    idx = rint(*ishape, lo=-size, hi=size)  # negative indices count from the end
    lead = data[tuple(slice(0, n) if i != axis else slice(None) for i, n in enumerate(ishape))]
    want = np.take_along_axis(lead, np.where(idx < 0, idx + size, idx), axis=axis)
    module = build([data, idx], op(aicc_nn.GatherElementsOp, axis))
    np.testing.assert_array_equal(run_reference(module, [data, idx])[0], want)
    got = compile_module(module, "main", options=CompileOptions(target=target))(data, idx)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------- resample (Resize, Pad modes)


def _np_resample(x, axis, idx, w):
    idx = idx.reshape(len(idx), -1)
    if w is None:
        return np.take(x, idx[:, 0], axis=axis)
    w = w.reshape(len(idx), -1)
    along = (-1,) + (1,) * (x.ndim - 1 - axis)
    out = np.zeros(np.take(x, idx[:, 0], axis=axis).shape)
    for t in range(idx.shape[1]):
        wt = w[:, t].reshape(along)
        with np.errstate(invalid="ignore"):
            out += np.where(wt != 0, wt * np.take(x.astype(np.float64), idx[:, t], axis=axis), 0.0)
    return out.astype(x.dtype)


def _linear_taps(n_in, n_out):
    """Bilinear, half_pixel, clamped at the edges: (indices, weights) of shape (n_out, 2)."""
    x = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
    lo = np.floor(x).astype(np.int64)
    frac = x - lo
    idx = np.stack([np.clip(lo, 0, n_in - 1), np.clip(lo + 1, 0, n_in - 1)], axis=1)
    return idx, np.stack([1 - frac, frac], axis=1)


@pytest.mark.parametrize("shape,axis,n_out", [((1,), 0, 1), ((7,), 0, 14), ((3, 129), 1, 64), ((2, 7, 5), 1, 9), ((1, 3, 5, 7), 2, 10)], ids=str)
def test_resample_linear(shape, axis, n_out):
    x = rand(*shape)
    idx, w = _linear_taps(shape[axis], n_out)
    check(op(aicc_nn.ResampleOp, axis, idx, w), [x], _np_resample(x, axis, idx, w))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("n_in,n_out", [(1, 7), (129, 258), (7, 3), (13, 20)], ids=str)
def test_resample_nearest_is_a_gather(dtype, n_in, n_out):
    x = rand(5, n_in).astype(dtype) if dtype == np.float32 else rint(5, n_in, dtype=dtype)
    idx = np.minimum(np.floor((np.arange(n_out) + 0.5) * n_in / n_out).astype(np.int64), n_in - 1)
    check(op(aicc_nn.ResampleOp, 1, idx), [x], np.take(x, idx, axis=1))


def test_resample_pieces_are_few_for_periodic_tables():
    from compiler.lowering.nn_to_linalg import resample_pieces

    idx, w = _linear_taps(64, 128)  # x2: two residues, plus the clamped first and last outputs
    assert len(resample_pieces(idx, w, 64)) == 4
    assert len(resample_pieces(np.repeat(np.arange(64), 2)[:, None], None, 64)) == 2
    rng = np.random.default_rng(0)
    assert resample_pieces(rng.integers(0, 64, (128, 1)), None, 64) is None  # no period: gathers


def test_resample_without_period_uses_gathers():
    """A random table, weights of 0 against inf: the taps are skipped, not multiplied."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 7, (129, 3))
    w = rng.uniform(-1, 1, (129, 3))
    w[::5, 1] = 0.0
    x = rand(4, 7)
    x[0, 3] = np.inf
    check(op(aicc_nn.ResampleOp, 1, idx, w), [x], _np_resample(x, 1, idx, w))


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize("shape,pads", [((1, 5), ((0, 0), (2, 3))), ((7,), ((3, 9),)), ((3, 129), ((1, 2), (4, 0))), ((2, 3, 4), ((0, 0), (1, 1), (5, 5)))], ids=str)
def test_pad_modes(mode, shape, pads):
    """Pad modes as compositions of aicc.resample (frontends/onnx_nn.py), pads beyond the dim included."""
    from frontends.onnx_nn import pad_indices

    x = rand(*shape)

    def body(b, v):
        for axis, (lo, hi) in enumerate(pads):
            if lo or hi:
                v = b.insert(aicc_nn.ResampleOp(v, axis, pad_indices(v.type.get_shape()[axis], lo, hi, mode))).result
        return v

    check(body, [x], np.pad(x, pads, mode=mode))


# ------------------------------------------------------------------- conv_transpose2d


def _np_conv_transpose2d(x, w, strides, dilations, groups, pads, out_hw):
    """The definition, one input pixel at a time: x[n, c, h, w] * w[c, o, i, j] lands at
    (h*sh + i*dh - ph, w*sw + j*dw - pw) when that is inside the result."""
    n, c, h, wd = x.shape
    _, ocg, kh, kw = w.shape
    out = np.zeros((n, ocg * groups, *out_hw))
    cg = c // groups
    for ci in range(c):
        grp = ci // cg
        for i in range(kh):
            for j in range(kw):
                for hh in range(h):
                    oh = hh * strides[0] + i * dilations[0] - pads[0]
                    if not 0 <= oh < out_hw[0]:
                        continue
                    for ww in range(wd):
                        ow = ww * strides[1] + j * dilations[1] - pads[1]
                        if 0 <= ow < out_hw[1]:
                            out[:, grp * ocg:(grp + 1) * ocg, oh, ow] += x[:, ci, hh, ww, None] * w[ci, :, i, j]
    return out.astype(np.float32)


CONV_T = [
    # x shape, w shape, strides, dilations, groups, pads, out_hw
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), (1, 1), 1, (0, 0), (1, 1)),
    ((1, 2, 3, 3), (2, 3, 3, 3), (1, 1), (1, 1), 1, (0, 0), (5, 5)),
    ((2, 3, 4, 5), (3, 2, 3, 2), (2, 3), (1, 1), 1, (1, 0), (8, 13)),  # strides, pads, non-square
    ((1, 4, 5, 7), (4, 3, 3, 3), (2, 2), (2, 1), 2, (1, 2), (12, 14)),  # groups, dilations, output padding
    ((1, 2, 7, 1), (2, 1, 3, 1), (3, 1), (1, 1), 1, (-1, 0), (23, 1)),  # negative pads: zeros in front
    ((1, 1, 3, 3), (1, 1, 3, 3), (2, 2), (1, 1), 1, (4, 4), (2, 2)),  # crops most of the rows
    ((1, 1, 2, 2), (1, 1, 2, 2), (1, 1), (1, 1), 1, (9, 0), (2, 2)),  # nothing lands: zeros
]


@pytest.mark.parametrize("xs,ws,strides,dils,groups,pads,out_hw", CONV_T, ids=str)
def test_conv_transpose2d(xs, ws, strides, dils, groups, pads, out_hw):
    x, w = rand(*xs), rand(*ws, seed=1)
    want = _np_conv_transpose2d(x.astype(np.float64), w.astype(np.float64), strides, dils, groups, pads, out_hw)
    check(op(aicc_nn.ConvTranspose2dOp, out_hw, strides, dils, groups, pads), [x, w], want,
          tol=red_tol(xs[1] * ws[2] * ws[3]))


# ------------------------------------------------------------------- ONNX compositions and mappings


def run_onnx(op_type, inputs, consts=(), opset=21, n_out=1, **attrs):
    """Compile a one-node ONNX model (inputs fed at run time, `consts` as initializers) and run it."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    import compiler

    names = [f"x{i}" for i in range(len(inputs))]
    cnames = [f"c{i}" for i in range(len(consts))]
    dtype = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.int64): onnx.TensorProto.INT64,
             np.dtype(np.int32): onnx.TensorProto.INT32}
    graph = helper.make_graph(
        [helper.make_node(op_type, names + [n if c is not None else "" for n, c in zip(cnames, consts)], [f"y{i}" for i in range(n_out)], **attrs)],
        "g",
        [helper.make_tensor_value_info(n, dtype[x.dtype], x.shape) for n, x in zip(names, inputs)],
        [helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.UNDEFINED, None) for i in range(n_out)],
        [numpy_helper.from_array(np.asarray(c), n) for n, c in zip(cnames, consts) if c is not None],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return compiler.compile(model, list(inputs))(*inputs)


def _np_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x64 = x.astype(np.float64)
    c = x.shape[1]
    s = np.zeros_like(x64)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + math.ceil((size - 1) / 2))
        s[:, ch] = (x64[:, lo:hi + 1] ** 2).sum(axis=1)
    return x64 / (bias + alpha / size * s) ** beta


@pytest.mark.parametrize("shape,size", [((1, 1, 1, 1), 1), ((2, 7, 3, 5), 3), ((1, 9, 129), 4), ((3, 5), 5)], ids=str)
def test_onnx_lrn(shape, size):
    x = rand(*shape)
    got = run_onnx("LRN", [x], size=size, alpha=0.5, beta=0.6, bias=2.0)
    np.testing.assert_allclose(got, _np_lrn(x, size, 0.5, 0.6, 2.0), **red_tol(size))


@pytest.mark.parametrize("shape,axis", [((1,), 0), ((7, 129), 1), ((7, 129), 0), ((2, 3, 5), -1)], ids=str)
@pytest.mark.parametrize("p", [1, 2])
def test_onnx_lp_normalization(shape, axis, p):
    x = rand(*shape)
    x.reshape(-1)[:1] = 0.0
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=axis, keepdims=True)
    got = run_onnx("LpNormalization", [x], axis=axis, p=p)
    with np.errstate(invalid="ignore"):
        want = np.where(norm == 0, 0.0, x / norm)
    np.testing.assert_allclose(got, want, **red_tol(shape[axis]))


def test_onnx_lp_normalization_zero_norm_is_zero():
    x = np.zeros((3, 4), np.float32)
    x[1] = [3, 0, 4, 0]
    got = run_onnx("LpNormalization", [x], axis=1, p=2)
    np.testing.assert_array_equal(got, np.array([[0] * 4, [0.6, 0, 0.8, 0], [0] * 4], np.float32))


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap", "constant"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_onnx_pad_modes(mode, dtype):
    x = rand(2, 7, 5).astype(dtype) if dtype == np.float32 else rint(2, 7, 5)
    pads = np.array([0, 3, 1, 1, 9, -2], np.int64)  # begin (0, 3, 1), end (1, 9, -2): a crop too
    got = run_onnx("Pad", [x], [pads], mode=mode)
    want = np.pad(x[:, :, :3], [(0, 1), (3, 9), (1, 0)], mode=mode)
    np.testing.assert_array_equal(got, want)


def _np_bilinear_half_pixel(x, out_hw):
    """Separable linear interpolation over the last two axes (half_pixel, clamped)."""
    y = x.astype(np.float64)
    for axis, n_out in zip((2, 3), out_hw):
        n_in = y.shape[axis]
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        f = (pos - lo).reshape((-1,) + (1,) * (y.ndim - 1 - axis))
        y = np.take(y, lo, axis=axis) * (1 - f) + np.take(y, hi, axis=axis) * f
    return y


@pytest.mark.parametrize("shape,out_hw", [((1, 1, 1, 1), (3, 1)), ((1, 3, 5, 7), (10, 14)), ((2, 2, 129, 7), (64, 9))], ids=str)
def test_onnx_resize_linear(shape, out_hw):
    x = rand(*shape)
    sizes = np.array([*shape[:2], *out_hw], np.int64)
    got = run_onnx("Resize", [x], [None, None, sizes], mode="linear")
    np.testing.assert_allclose(got, _np_bilinear_half_pixel(x, out_hw), **ELEM)


@pytest.mark.parametrize("coord", ["asymmetric", "align_corners"])
def test_onnx_resize_nearest_scales(coord):
    x = rand(1, 2, 5, 7)
    scales = np.array([1, 1, 2, 3], np.float32)
    got = run_onnx("Resize", [x], [None, scales], mode="nearest", coordinate_transformation_mode=coord,
                   nearest_mode="floor")
    if coord == "asymmetric":  # floor(o / s): each input repeated
        np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    else:
        assert got.shape == (1, 2, 10, 21) and set(np.unique(got)) <= set(np.unique(x))


@pytest.mark.parametrize("dtype,exclusive,reverse", [(np.float32, 0, 0), (np.float32, 1, 1), (np.int64, 1, 0), (np.int64, 0, 1)])
def test_onnx_cumsum(dtype, exclusive, reverse):
    x = rand(7, 129).astype(dtype) if dtype == np.float32 else rint(7, 129)
    got = run_onnx("CumSum", [x], [np.array(1, np.int64)], exclusive=exclusive, reverse=reverse)
    want = _np_cumsum(x, 1, exclusive, reverse)
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, **red_tol(129))
    else:
        np.testing.assert_array_equal(got, want)


def test_onnx_conv_transpose_output_padding_and_bias():
    x, w, b = rand(1, 4, 5, 7), rand(4, 3, 3, 3, seed=1), rand(6, seed=2)
    got = run_onnx("ConvTranspose", [x], [w, b], strides=[2, 2], pads=[1, 1, 1, 0], output_padding=[1, 1], group=2)
    out_hw = (2 * 4 + 3 - 2 + 1, 2 * 6 + 3 - 1 + 1)
    want = _np_conv_transpose2d(x.astype(np.float64), w.astype(np.float64), (2, 2), (1, 1), 2, (1, 1), out_hw)
    np.testing.assert_allclose(got, want + b[None, :, None, None], **red_tol(2 * 9))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_onnx_integer_graph_at_run_time(dtype):
    """Integer tensors computed at run time: (a * b + 7) // 3 mod 5, max, then argmax."""
    a, b = rint(7, 129, dtype=dtype), rint(7, 129, seed=1, dtype=dtype)
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    import compiler

    t = onnx.TensorProto.INT32 if dtype == np.int32 else onnx.TensorProto.INT64
    nodes = [helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "seven"], ["q"]),
             helper.make_node("Div", ["q", "three"], ["d"]), helper.make_node("Mod", ["d", "five"], ["m"]),
             helper.make_node("Max", ["m", "a"], ["mx"]), helper.make_node("ArgMax", ["mx"], ["y"], axis=1)]
    inits = [numpy_helper.from_array(np.array(v, dtype), n) for n, v in (("seven", 7), ("three", 3), ("five", 5))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, [7, 129]) for n in "ab"],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.INT64, None)], inits)
    got = compiler.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), [a, b])(a, b)
    d = _trunc_div(a * b + 7, np.array(3, dtype))
    want = np.argmax(np.maximum(np.mod(d, 5), a), axis=1, keepdims=True)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------- the CUDA C emitter


def test_new_scalar_ops_through_cuda_emulation():
    """Integer division / mod / abs / max, argmax, round, sin, cos, fmod and cumsum through
    the CUDA C emitter (NVRTC compiles it; the host emulation runs it) against the reference."""
    pytest.importorskip("cuda.bindings.nvrtc")
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulation harness needs g++")
    from compiler.pipeline import CompileOptions
    from compiler.targets.cuda_emu.emu import run_emulated

    def body(b, a, d, x):
        q = b.insert(aicc.DivOp(a, d)).result
        r = b.insert(aicc.ModOp(q, d)).result
        s = b.insert(aicc.AbsOp(b.insert(aicc.SubOp(r, a)).result)).result
        mx = b.insert(aicc.ReduceMaxOp(s, [1], False)).result
        am = b.insert(aicc_nn.ArgMaxOp(x, 1, False, True)).result
        rounded = b.insert(aicc.RoundOp(b.insert(aicc.SinOp(x)).result)).result
        cs = b.insert(aicc_nn.CumSumOp(rounded, 1, True, False)).result
        fm = b.insert(aicc.FModOp(x, b.insert(aicc.CosOp(x)).result)).result
        return [mx, am, cs, fm]

    ins = [rint(7, 129, dtype=np.int32), rint(7, 129, seed=1, lo=-5, hi=6, dtype=np.int32), rand(7, 129)]
    want = run_reference(build(ins, body), ins)
    m = compile_module(build(ins, body), "main", output_is_tuple=True, options=CompileOptions(target="cuda"))
    for w, g in zip(want, run_emulated(m, *ins)):
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, **red_tol(129))
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onnx_one_hot(axis):
    idx = rint(7, 5, lo=-4, hi=6)  # in range, negative (wraps) and too large (all off)
    got = run_onnx("OneHot", [idx], [np.array(4, np.int64), np.array([-1.0, 2.5], np.float32)], axis=axis)
    wrapped = np.where(idx < 0, idx + 4, idx)
    want = np.moveaxis(np.where(wrapped[..., None] == np.arange(4), 2.5, -1.0), -1, axis % 3).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_onnx_depth_to_space_round_trip(mode):
    x = rand(2, 12, 3, 5)
    y = run_onnx("DepthToSpace", [x], blocksize=2, mode=mode)
    assert y.shape == (2, 3, 6, 10)
    np.testing.assert_array_equal(run_onnx("SpaceToDepth", [y], blocksize=2, mode=mode), x)
    if mode == "DCR":  # out[n, c, 2h + i, 2w + j] = x[n, (2i + j) * 3 + c, h, w]
        np.testing.assert_array_equal(y[:, :, 1::2, 0::2], x[:, 6:9])


@pytest.mark.parametrize("upper,k", [(1, 0), (0, 0), (1, -2), (0, 3)])
def test_onnx_trilu(upper, k):
    x = rand(3, 7, 129)
    got = run_onnx("Trilu", [x], [np.array(k, np.int64)], upper=upper)
    np.testing.assert_array_equal(got, np.triu(x, k) if upper else np.tril(x, k))


def test_onnx_hardmax():
    x = np.round(rand(7, 129))  # ties: the first maximum wins
    got = run_onnx("Hardmax", [x], axis=1)
    want = np.zeros_like(x)
    want[np.arange(7), np.argmax(x, axis=1)] = 1
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("p", [2, 3])
def test_onnx_lp_pool(p):
    x = rand(1, 2, 7, 9)
    got = run_onnx("LpPool", [x], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], p=p)
    xp = np.pad(np.abs(x.astype(np.float64)) ** p, ((0, 0), (0, 0), (1, 1), (0, 1)))
    want = np.zeros((1, 2, 4, 5))
    for i in range(4):
        for j in range(5):
            want[:, :, i, j] = xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 2].sum(axis=(2, 3)) ** (1 / p)
    np.testing.assert_allclose(got, want, **red_tol(6))


def test_onnx_empty_slices_are_constants():
    """A Split with a zero-size piece and an empty Slice: empty results are constants (nothing to
    compute), and an empty piece concatenated back disappears."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    import compiler

    x = rand(3, 8)
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
        helper.make_node("Relu", ["b"], ["rb"]),  # an op on the empty piece: still empty
        helper.make_node("Concat", ["rb", "a"], ["y"], axis=1),
        helper.make_node("Slice", ["x", "st", "en"], ["e"]),
    ]
    inits = [numpy_helper.from_array(v, n) for n, v in (
        ("sizes", np.array([8, 0], np.int64)), ("st", np.array([5], np.int64)), ("en", np.array([9], np.int64)))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 8])],
                              [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in "ye"], inits)
    y, e = compiler.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), [x])(x)
    np.testing.assert_array_equal(y, x)
    assert e.shape == (0, 8) and e.dtype == np.float32


# ------------------------------------------------------------------- the NumPy tracer


def test_traced_rounding_trigonometry_and_mod():
    import compiler

    def f(x, y):
        return np.floor(x) + np.ceil(y) * np.rint(x * 2.5) + np.sin(x) * np.cos(y) + np.mod(x, y) - np.fmod(y, x)

    x, y = rand(7, 129), rand(129, seed=1, lo=0.5, hi=2.0)
    got = compiler.compile(f, (x, y))(x, y)
    with np.errstate(all="ignore"):
        want = f(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_comparisons_and_select(dtype):
    a, b = rint(7, 129, lo=-3, hi=3, dtype=dtype), rint(129, seed=1, lo=-3, hi=3, dtype=dtype)
    for pred, fn in (("gt", np.greater), ("le", np.less_equal), ("eq", np.equal), ("ne", np.not_equal)):
        check(lambda bl, x, y, pred=pred: bl.insert(aicc.CompareOp(pred, x, y)), [a, b], fn(a, b))

    def body(bl, x, y):
        m = bl.insert(aicc.CompareOp("lt", x, y)).result
        return bl.insert(aicc.SelectOp(m, bl.insert(aicc.SubOp(y, x)).result, x))

    check(body, [a, b], np.where(a < b, b - a, a))
