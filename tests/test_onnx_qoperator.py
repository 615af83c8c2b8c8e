"""ONNX's QOperator-format int8 ops (frontends/onnx_qop.py) against ONNX Runtime.

Each op is a one-node graph with (u)int8 inputs and outputs (the compiled model takes and
returns uint8 arrays as they are), run by ONNX Runtime and by aicc; integer outputs must be
equal. Every expected value is also checked against an exact NumPy reference of the ONNX
definition (int64 sums, float32 requantization as ONNX Runtime computes it), because ONNX
Runtime itself is not always exact: its uint8 x int8 GEMM on AVX2 sums pairs of products in
int16 (vpmaddubsw), which saturates when both activations are large, so the uint8 x int8 cases
compared with it keep the weights within 7 bits (as its quantizer's reduce_range does), and a
full-range case is checked against the NumPy reference alone. Where ONNX Runtime rounds by its
own formula (QLinearAdd's fused multiply-adds, QLinearSigmoid's approximate logistic), results
may differ by one unit; those tests bound the count.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import compiler  # noqa: E402
from compiler.errors import UnsupportedOpError  # noqa: E402

RNG = np.random.default_rng(0)
ONNX_TYPE = {np.dtype(np.uint8): TP.UINT8, np.dtype(np.int8): TP.INT8, np.dtype(np.float32): TP.FLOAT,
             np.dtype(np.int32): TP.INT32}


def _model(nodes, inputs, outputs, inits=(), ms=False, opset=21):
    """inputs / outputs: (name, dtype, shape); inits: name -> array."""
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE[np.dtype(d)], s) for n, d, s in inputs],
        [helper.make_tensor_value_info(n, ONNX_TYPE[np.dtype(d)], s) for n, d, s in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()] if isinstance(inits, dict) else [])
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 10
    return m


def _ort(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _aicc(model, feeds):
    m = compiler.compile(model, example_inputs=tuple(feeds.values()))
    out = m(*feeds.values())
    return (list(out) if isinstance(out, tuple) else [out]), m


def _ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


def _scalar(dtype, lo=None, hi=None):
    return _ints(dtype, (), lo, hi)


def _requant_ref(acc, mult, zy, dtype):
    """ONNX Runtime's requantization (MlasRequantizeOutput) of int32 sums."""
    info = np.iinfo(dtype)
    f = acc.astype(np.int32).astype(np.float32) * np.asarray(mult, np.float32)
    return np.clip(np.round(f) + int(zy), info.min, info.max).astype(dtype)


def _check(got, expected, ref=None):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if ref is not None:
        np.testing.assert_array_equal(got, ref)


# ---------------------------------------------------------------------------------------------
# QLinearMatMul, MatMulInteger
# ---------------------------------------------------------------------------------------------

TYPES = [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)]
SHAPES = [((1, 7), (7, 1)), ((7, 129), (129, 5)), ((2, 3, 16), (16, 33)), ((129,), (129, 7)), ((4, 9), (9,))]


def _weights(tb, ta, shape):
    # uint8 x int8 within 7 bits: ONNX Runtime's AVX2 kernel would saturate beyond (see above)
    return _ints(tb, shape, -64, 63) if (ta, tb) == (np.uint8, np.int8) else _ints(tb, shape)


@pytest.mark.parametrize("ta,tb", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])) + "@" + "x".join(map(str, s[1])))
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_column"])
def test_qlinear_matmul(ta, tb, shapes, per_channel):
    sa_shape, sb_shape = shapes
    n = sb_shape[-1] if len(sb_shape) == 2 else 1
    if per_channel and len(sb_shape) == 1:
        pytest.skip("a 1-D B has one column")
    a, b = _ints(ta, sa_shape), _weights(tb, ta, sb_shape)
    nb = (n,) if per_channel else ()
    p = {"sa": np.float32(0.02), "za": _scalar(ta), "b": b,
         "sb": (RNG.random(nb) * 0.01 + 0.001).astype(np.float32),
         "zb": _ints(tb, nb, -20, 20) if tb == np.int8 else _ints(tb, nb, 100, 150),
         "sy": np.float32(0.37), "zy": _scalar(ta)}
    out_shape = np.matmul(np.zeros(sa_shape), np.zeros(sb_shape)).shape
    m = _model([helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], name="qmm")],
               [("a", ta, sa_shape)], [("y", ta, out_shape)], {k: v for k, v in p.items() if k != "a"})
    (expected,) = _ort(m, {"a": a})
    (got,), cm = _aicc(m, {"a": a})
    zb = p["zb"].astype(np.int64)
    acc = np.matmul(a.astype(np.int64) - int(p["za"]), b.astype(np.int64) - (zb if b.ndim == 2 else zb.reshape(())))
    ref = _requant_ref(acc, (p["sa"] * p["sb"]) / p["sy"], p["zy"], ta)
    _check(got, expected, ref)
    assert cm.ir("tensor").count("aicc.matmul_integer") >= 1


def test_qlinear_matmul_uint8_int8_full_range():
    """Full-range uint8 x int8: aicc is exact; ONNX Runtime's AVX2 kernel saturates pairs of
    products in int16 and so is only compared where it is exact."""
    a, b = _ints(np.uint8, (5, 64), 200, 255), _ints(np.int8, (64, 9), 100, 127)
    p = {"sa": np.float32(0.01), "za": np.uint8(0), "b": b, "sb": np.float32(0.01), "zb": np.int8(0),
         "sy": np.float32(40.0), "zy": np.uint8(0)}
    m = _model([helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])],
               [("a", np.uint8, (5, 64))], [("y", np.uint8, (5, 9))], {k: v for k, v in p.items() if k != "a"})
    (got,), _ = _aicc(m, {"a": a})
    acc = a.astype(np.int64) @ b.astype(np.int64)
    _check(got, _requant_ref(acc, np.float32(0.01) * np.float32(0.01) / np.float32(40.0), 0, np.uint8))


@pytest.mark.parametrize("ta,tb", [*TYPES, (np.int8, np.uint8)], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("zero_points", ["none", "a", "both", "per_column"])
def test_matmul_integer(ta, tb, zero_points):
    a_shape, b_shape = (3, 7, 33), (33, 129)
    a, b = _ints(ta, a_shape), _weights(tb, ta, b_shape)
    inits, names = {"b": b}, ["a", "b"]
    za, zb = 0, np.zeros(1, np.int64)
    if zero_points != "none":
        inits["za"] = za = _scalar(ta)
        names.append("za")
    if zero_points in ("both", "per_column"):
        inits["zb"] = _ints(tb, (129,) if zero_points == "per_column" else (), -9, 9) if tb == np.int8 else \
            _ints(tb, (129,) if zero_points == "per_column" else (), 120, 135)
        zb = inits["zb"].astype(np.int64)
        names.append("zb")
    m = _model([helper.make_node("MatMulInteger", names, ["y"])], [("a", ta, a_shape)],
               [("y", np.int32, (3, 7, 129))], inits)
    (got,), cm = _aicc(m, {"a": a})
    ref = ((a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb)).astype(np.int32)
    np.testing.assert_array_equal(got, ref)
    assert cm.ir("tensor").count("aicc.matmul_integer") == 1
    if (ta, tb) != (np.int8, np.uint8):  # ONNX Runtime has no int8 x uint8 kernel
        (expected,) = _ort(m, {"a": a})
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("shapes", [((2, 3, 16), (2, 16, 5)), ((3, 1, 4, 8), (2, 8, 5)), ((8,), (2, 8, 3))],
                         ids=["batched", "broadcast", "vector"])
def test_matmul_integer_batched_b(shapes):
    """A B with batch dims: one int8 matmul per batch index."""
    (sa, sb), out = shapes, np.matmul(np.zeros(shapes[0]), np.zeros(shapes[1])).shape
    a, b = _ints(np.uint8, sa), _ints(np.uint8, sb)
    m = _model([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
               [("a", np.uint8, sa), ("b", np.uint8, sb)], [("y", np.int32, out)],
               {"za": np.uint8(3), "zb": np.uint8(200)})
    (got,), cm = _aicc(m, {"a": a, "b": b})
    (expected,) = _ort(m, {"a": a, "b": b})
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.matmul(a.astype(np.int64) - 3, b.astype(np.int64) - 200))
    assert cm.ir("tensor").count("aicc.matmul_integer") == int(np.prod(out[:-2 if len(sa) > 1 else -1]))


def test_matmul_integer_dynamic_b():
    """Both operands are graph inputs: B is transposed at run time, its zero point corrected."""
    a, b = _ints(np.uint8, (6, 20)), _ints(np.uint8, (20, 11))
    m = _model([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
               [("a", np.uint8, (6, 20)), ("b", np.uint8, (20, 11))], [("y", np.int32, (6, 11))],
               {"za": np.uint8(131), "zb": np.uint8(77)})
    (got,), _ = _aicc(m, {"a": a, "b": b})
    (expected,) = _ort(m, {"a": a, "b": b})
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, (a.astype(np.int64) - 131) @ (b.astype(np.int64) - 77))


# ---------------------------------------------------------------------------------------------
# DynamicQuantizeLinear, and the dynamic zero point it gives MatMulInteger / ConvInteger
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["normal", "positive", "negative", "zeros", "one", "tiny"])
def test_dynamic_quantize_linear(kind):
    shape = {"one": (1,), "tiny": (3, 5)}.get(kind, (7, 129))
    x = RNG.standard_normal(shape).astype(np.float32) * 3
    if kind == "positive":
        x = np.abs(x) + 0.5
    elif kind == "negative":
        x = -np.abs(x) - 0.25
    elif kind == "zeros":
        x = np.zeros(shape, np.float32)
    elif kind == "tiny":
        x = x * 1e-30
    m = _model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], [("x", np.float32, shape)],
               [("y", np.uint8, shape), ("s", np.float32, ()), ("z", np.uint8, ())])
    expected = _ort(m, {"x": x})
    got, _ = _aicc(m, {"x": x})
    for g_, e_ in zip(got, expected):
        assert g_.dtype == e_.dtype and g_.shape == e_.shape
        np.testing.assert_array_equal(g_, e_)
    # the ONNX definition: the range always includes 0, y_zero_point within [0, 255]
    lo, hi = min(x.min(), 0), max(x.max(), 0)
    if hi > lo:
        assert got[1] == np.float32(np.float32(hi - lo) / np.float32(255))
        assert got[0][x == 0].size == 0 or np.all(got[0][x == 0] == got[2])


def test_dynamic_quantized_matmul():
    """DynamicQuantizeLinear -> MatMulInteger (a run-time A zero point) -> Cast -> Mul, as
    onnxruntime.quantization.quantize_dynamic writes a MatMul (7-bit weights: see the module)."""
    k, n = 129, 17
    w = _ints(np.int8, (k, n), -64, 63)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TP.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("Mul", ["accf", "s"], ["y"])]
    for wz in (np.int8(0), np.int8(-7)):
        m = _model(nodes, [("x", np.float32, (5, k))], [("y", np.float32, (5, n)), ("acc", np.int32, (5, n))],
                   {"w": w, "wz": wz, "ws": np.float32(0.013)})
        x = RNG.standard_normal((5, k)).astype(np.float32)
        expected = _ort(m, {"x": x})
        got, _ = _aicc(m, {"x": x})
        np.testing.assert_array_equal(got[1], expected[1])
        np.testing.assert_array_equal(got[0], expected[0])
        xq, xs, xz = _ort(_model(nodes[:1], [("x", np.float32, (5, k))],
                                 [("xq", np.uint8, (5, k)), ("xs", np.float32, ()), ("xz", np.uint8, ())]), {"x": x})
        np.testing.assert_array_equal(got[1], (xq.astype(np.int64) - int(xz)) @ (w.astype(np.int64) - int(wz)))


# ---------------------------------------------------------------------------------------------
# ConvInteger, QLinearConv
# ---------------------------------------------------------------------------------------------


def _conv_ref(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """int64 cross-correlation of NCHW x (already minus its zero point, padded with 0) and w."""
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (wd - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    og = o // group
    y = np.zeros((n, o, oh, ow), np.int64)
    for gi in range(group):
        xs = x[:, gi * cg:(gi + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * dilations[0]:i * dilations[0] + strides[0] * (oh - 1) + 1:strides[0],
                         j * dilations[1]:j * dilations[1] + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", win, w[gi * og:(gi + 1) * og, :, i, j])
    return y


CONVS = {  # name: (x shape, weight shape, attributes)
    "3x3_pad": ((2, 3, 9, 7), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    "stride2_asym_pad": ((1, 5, 11, 12), (6, 5, 3, 2), {"strides": [2, 2], "pads": [2, 0, 1, 1]}),
    "dilated": ((1, 4, 13, 13), (7, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "1x1": ((3, 16, 5, 5), (33, 16, 1, 1), {}),
    "depthwise": ((2, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    "groups2": ((1, 6, 8, 8), (4, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    "same_upper": ((1, 3, 10, 9), (5, 3, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "conv1d": ((2, 4, 17), (6, 4, 5), {"pads": [2, 1], "strides": [2]}),
}


def _conv_attrs(at, w_shape):
    """ONNX attributes, and the 2-D strides / pads / dilations / group for the reference."""
    one_d = len(w_shape) == 3
    k = list(w_shape[2:])
    strides = at.get("strides", [1] * len(k))
    dil = at.get("dilations", [1] * len(k))
    pads = at.get("pads", [0] * 2 * len(k))
    if at.get("auto_pad") == "SAME_UPPER":
        return at, None  # the reference takes the output of ONNX Runtime's pads
    if one_d:
        return at, ((1, strides[0]), (0, pads[0], 0, pads[1]), (1, dil[0]), at.get("group", 1))
    return at, (tuple(strides), tuple(pads), tuple(dil), at.get("group", 1))


def _conv_ref_nd(x, w, geometry):
    strides, pads, dil, group = geometry
    if x.ndim == 3:
        return _conv_ref(x[:, :, None], w[:, :, None], strides, pads, dil, group)[:, :, 0]
    return _conv_ref(x, w, strides, pads, dil, group)


def _conv_out_shape(x_shape, w_shape, at):
    """The output shape ONNX Runtime gives a float Conv of these shapes and attributes."""
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], **at)], [("x", np.float32, x_shape)],
               [("y", np.float32, None)], {"w": np.zeros(w_shape, np.float32)})
    return _ort(m, {"x": np.zeros(x_shape, np.float32)})[0].shape


@pytest.mark.parametrize("conv", list(CONVS))
@pytest.mark.parametrize("tx,tw", TYPES, ids=lambda t: np.dtype(t).name)
def test_qlinear_conv(conv, tx, tw):
    x_shape, w_shape, at = CONVS[conv]
    o = w_shape[0]
    x = _ints(tx, x_shape)
    w = _weights(tw, tx, w_shape)
    p = {"sx": np.float32(0.05), "zx": _scalar(tx), "w": w,
         "sw": (RNG.random(o) * 0.02 + 0.002).astype(np.float32),
         # ONNX Runtime takes one weight zero point for all channels (per-channel ones must be equal)
         "zw": np.full(o, _scalar(tw, -10, 10) if tw == np.int8 else _scalar(tw, 120, 136), tw),
         "sy": np.float32(0.9), "zy": _scalar(tx), "b": RNG.integers(-3000, 3000, o).astype(np.int32)}
    y_shape = _conv_out_shape(x_shape, w_shape, at)
    m = _model([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"],
                                 name="qconv", **at)],
               [("x", tx, x_shape)], [("y", tx, y_shape)], {k: v for k, v in p.items() if k != "x"})
    (expected,) = _ort(m, {"x": x})
    (got,), cm = _aicc(m, {"x": x})
    _, geometry = _conv_attrs(at, w_shape)
    ref = None
    if geometry is not None:
        acc = _conv_ref_nd(x.astype(np.int64) - int(p["zx"]), w.astype(np.int64) - p["zw"].astype(np.int64).reshape(
            (-1,) + (1,) * (w.ndim - 1)), geometry)
        along = (-1,) + (1,) * (acc.ndim - 2)
        ref = _requant_ref(acc + p["b"].reshape(along), ((p["sx"] * p["sw"]) / p["sy"]).reshape(along), p["zy"], tx)
    _check(got, expected, ref)
    if at.get("group", 1) == 1:
        assert cm.ir("tensor").count("aicc.matmul_integer") == 1


@pytest.mark.parametrize("conv", ["3x3_pad", "stride2_asym_pad", "depthwise", "groups2", "conv1d"])
@pytest.mark.parametrize("tx,tw", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("per_channel_zw", [False, True], ids=["zw", "zw_per_channel"])
def test_conv_integer(conv, tx, tw, per_channel_zw):
    x_shape, w_shape, at = CONVS[conv]
    o = w_shape[0]
    x, w = _ints(tx, x_shape), _weights(tw, tx, w_shape)
    zx = _scalar(tx)
    zw = (_ints(tw, (o,), -5, 5) if tw == np.int8 else _ints(tw, (o,), 125, 131)) if per_channel_zw else \
        (_scalar(tw, -5, 5) if tw == np.int8 else _scalar(tw, 125, 131))
    y_shape = _conv_out_shape(x_shape, w_shape, at)
    m = _model([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], **at)],
               [("x", tx, x_shape)], [("y", np.int32, y_shape)], {"w": w, "zx": zx, "zw": zw})
    (got,), _ = _aicc(m, {"x": x})
    _, geometry = _conv_attrs(at, w_shape)
    ref = _conv_ref_nd(x.astype(np.int64) - int(zx), w.astype(np.int64) - np.asarray(zw, np.int64).reshape(
        (-1,) + (1,) * (w.ndim - 1) if per_channel_zw else ()), geometry)
    np.testing.assert_array_equal(got, ref.astype(np.int32))
    if not per_channel_zw and (tx, tw) == (np.uint8, np.uint8):  # ONNX Runtime: uint8 x, one zero point
        (expected,) = _ort(m, {"x": x})
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("conv", ["3x3_pad", "stride2_asym_pad", "depthwise", "conv1d"])
def test_dynamic_quantized_conv(conv):
    """DynamicQuantizeLinear -> ConvInteger: the input's zero point is known at run time only,
    so the padding is corrected for (the taps inside the image), as quantize_dynamic's convs."""
    x_shape, w_shape, at = CONVS[conv]
    w = _ints(np.uint8, w_shape)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["y"], **at)]
    m = _model(nodes, [("x", np.float32, x_shape)], [("y", np.int32, _conv_out_shape(x_shape, w_shape, at))],
               {"w": w, "wz": np.uint8(119)})
    x = (RNG.standard_normal(x_shape) + 0.7).astype(np.float32)
    (expected,) = _ort(m, {"x": x})
    (got,), _ = _aicc(m, {"x": x})
    np.testing.assert_array_equal(got, expected)


def test_grouped_conv_beyond_float_range_stays_integer():
    """A grouped conv whose sums could pass 2^24 (here they do: 1440 products near 128 * 128)
    runs as integer matmuls per group, not as a float32 conv: bit-exact."""
    x = _ints(np.int8, (1, 320, 3, 3), -128, -120)
    w = _ints(np.int8, (4, 160, 3, 3), -128, -120)
    m = _model([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], group=2, pads=[1, 1, 1, 1])],
               [("x", np.int8, x.shape)], [("y", np.int32, (1, 4, 3, 3))], {"w": w, "zx": np.int8(0), "zw": np.int8(0)})
    (got,), cm = _aicc(m, {"x": x})
    ref = _conv_ref(x.astype(np.int64), w.astype(np.int64), pads=(1, 1, 1, 1), group=2)
    assert ref.max() > 1 << 24
    np.testing.assert_array_equal(got, ref)
    assert cm.ir("tensor").count("aicc.matmul_integer") == 2


# ---------------------------------------------------------------------------------------------
# com.microsoft ops of onnxruntime's QOperator format
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", [np.uint8, np.int8], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape_b", [(7, 129), (129,), ()], ids=["same", "row", "scalar"])
def test_qlinear_add_mul(t, shape_b):
    a, b = _ints(t, (7, 129)), _ints(t, shape_b)
    p = {"sa": np.float32(0.031), "za": _scalar(t), "sb": np.float32(0.017), "zb": _scalar(t),
         "sc": np.float32(0.05), "zc": _scalar(t)}
    for op in ("QLinearAdd", "QLinearMul"):
        m = _model([helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"], domain="com.microsoft")],
                   [("a", t, (7, 129)), ("b", t, shape_b)], [("c", t, (7, 129))], p, ms=True)
        (expected,) = _ort(m, {"a": a, "b": b})
        (got,), _ = _aicc(m, {"a": a, "b": b})
        info = np.iinfo(t)
        fa = np.float32(p["sa"]) * (a.astype(np.int32) - int(p["za"])).astype(np.float32)
        fb = np.float32(p["sb"]) * (b.astype(np.int32) - int(p["zb"])).astype(np.float32)
        if op == "QLinearMul":
            prod = (a.astype(np.int32) - int(p["za"])) * (b.astype(np.int32) - int(p["zb"]))
            ref = _requant_ref(prod, p["sa"] * p["sb"] / p["sc"], p["zc"], t)
            _check(got, expected, ref)
        else:  # the definition in float32 (ONNX Runtime's portable kernel); its AVX2 kernel folds
            # the zero points into one constant and sums with fused multiply-adds, its NEON one
            # is fixed-point: each rounds a value near a half its own way
            ref = np.clip(np.round((fa + fb) / p["sc"]) + int(p["zc"]), info.min, info.max).astype(t)
            np.testing.assert_array_equal(got, ref)
            diff = np.abs(got.astype(int) - expected.astype(int))
            assert diff.max() <= 1 and (diff > 0).mean() < 0.03


@pytest.mark.parametrize("t", [np.uint8, np.int8], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_qlinear_lookup_ops(t, op):
    x = np.arange(np.iinfo(t).min, np.iinfo(t).max + 1).astype(t).reshape(16, 16)  # every value
    p = {"sx": np.float32(0.061), "zx": _scalar(t), "sy": np.float32(0.0043 if op == "QLinearSigmoid" else 0.05),
         "zy": _scalar(t)}
    attrs = {"alpha": 0.13} if op == "QLinearLeakyRelu" else {}
    m = _model([helper.make_node(op, ["x", "sx", "zx", "sy", "zy"], ["y"], domain="com.microsoft", **attrs)],
               [("x", t, (16, 16))], [("y", t, (16, 16))], p, ms=True)
    (expected,) = _ort(m, {"x": x})
    (got,), _ = _aicc(m, {"x": x})
    if op == "QLinearLeakyRelu":
        _check(got, expected)
    else:  # ONNX Runtime's logistic is a rational approximation: a value may round one step away
        diff = np.abs(got.astype(int) - expected.astype(int))
        assert got.dtype == expected.dtype and diff.max() <= 1 and (diff > 0).sum() <= 3


@pytest.mark.parametrize("t", [np.uint8, np.int8], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(t, channels_last):
    shape = (2, 5, 7, 3) if channels_last else (2, 3, 5, 7)
    x = _ints(t, shape)
    p = {"sx": np.float32(0.05), "zx": _scalar(t), "sy": np.float32(0.03), "zy": _scalar(t)}
    y_shape = (2, 1, 1, 3) if channels_last else (2, 3, 1, 1)
    m = _model([helper.make_node("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"],
                                 domain="com.microsoft", channels_last=channels_last)],
               [("x", t, shape)], [("y", t, y_shape)], p, ms=True)
    (expected,) = _ort(m, {"x": x})
    (got,), _ = _aicc(m, {"x": x})
    axes = (1, 2) if channels_last else (2, 3)
    acc = (x.astype(np.int64) - int(p["zx"])).sum(axes, keepdims=True)
    _check(got, expected, _requant_ref(acc, np.float32(0.05) / (np.float32(0.03) * np.float32(35)), p["zy"], t))


@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)],
                         ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("quantized_output", [True, False], ids=["y_q", "y_float"])
def test_qgemm(ta, tb, quantized_output):
    m_, k, n = 5, 33, 9
    a, b = _ints(ta, (m_, k)), _weights(tb, ta, (n, k))  # transB
    p = {"sa": np.float32(0.02), "za": _scalar(ta), "b": b, "sb": (RNG.random(n) * 0.01 + 0.001).astype(np.float32),
         "zb": np.zeros(n, tb) if tb == np.int8 else _ints(tb, (n,), 120, 136),
         "c": RNG.integers(-500, 500, n).astype(np.int32)}
    names = ["a", "sa", "za", "b", "sb", "zb", "c"]
    if quantized_output:
        p.update({"sy": np.float32(0.3), "zy": _scalar(ta)})
        names += ["sy", "zy"]
    m = _model([helper.make_node("QGemm", names, ["y"], domain="com.microsoft", transB=1, alpha=0.75)],
               [("a", ta, (m_, k))], [("y", ta if quantized_output else np.float32, (m_, n))],
               {k_: v for k_, v in p.items() if k_ != "a"}, ms=True)
    (expected,) = _ort(m, {"a": a})
    (got,), cm = _aicc(m, {"a": a})
    acc = (a.astype(np.int64) - int(p["za"])) @ (b.astype(np.int64) - p["zb"].astype(np.int64)[:, None]).T + p["c"]
    mult = np.float32(0.75) * p["sa"] * p["sb"]
    if quantized_output:
        _check(got, expected, _requant_ref(acc, mult / p["sy"], p["zy"], ta))
    else:
        _check(got, expected, acc.astype(np.int32).astype(np.float32) * mult)
    assert cm.ir("tensor").count("aicc.matmul_integer") == 1


# ---------------------------------------------------------------------------------------------
# What is refused, and uint8 values elsewhere in the graph
# ---------------------------------------------------------------------------------------------


def test_refused_with_the_node_named():
    a = ("a", np.uint8, (4, 8))
    per_row = _model([helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"], name="mm_rows")], [a],
                     [("y", np.int32, (4, 3))], {"b": _ints(np.uint8, (8, 3)), "za": _ints(np.uint8, (4,))})
    with pytest.raises(UnsupportedOpError, match="MatMulInteger node 'mm_rows'.*zero point per row"):
        compiler.compile(per_row)
    batched = _model([helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mm_batched")], [a],
                     [("y", np.int32, (300, 4, 3))], {"b": _ints(np.uint8, (300, 8, 3))})
    with pytest.raises(UnsupportedOpError, match="'mm_batched'.*B with 300 batches"):
        compiler.compile(batched)
    dyn_w = _model([helper.make_node("ConvInteger", ["x", "w"], ["y"], name="conv_w")],
                   [("x", np.uint8, (1, 2, 5, 5)), ("w", np.uint8, (3, 2, 3, 3))], [("y", np.int32, (1, 3, 3, 3))])
    with pytest.raises(UnsupportedOpError, match="'conv_w'.*non-constant weight"):
        compiler.compile(dyn_w)
    add = _model([helper.make_node("Add", ["a", "a"], ["y"], name="add_u8")], [a], [("y", np.uint8, (4, 8))])
    with pytest.raises(UnsupportedOpError, match="Add node 'add_u8'.*uint8 input"):
        compiler.compile(add)


def test_uint8_through_layout_ops_and_cast():
    """uint8 values pass through Reshape / Transpose / MaxPool / Pad / Concat and Cast to int32 and
    float32 as their values (aicc holds them as v - 128)."""
    x = _ints(np.uint8, (1, 2, 4, 6))
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Pad", ["p", "pads", "pv"], ["pp"]),
             helper.make_node("Transpose", ["pp"], ["t"], perm=[0, 1, 3, 2]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Concat", ["r", "k"], ["c"], axis=1),
             helper.make_node("Cast", ["c"], ["ci"], to=TP.INT32),
             helper.make_node("Cast", ["c"], ["cf"], to=TP.FLOAT)]
    inits = {"pads": np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64), "pv": np.uint8(200),
             "shape": np.array([1, -1], np.int64), "k": np.array([[0, 255, 128]], np.uint8)}
    m = _model(nodes, [("x", np.uint8, x.shape)],
               [("c", np.uint8, (1, 27)), ("ci", np.int32, (1, 27)), ("cf", np.float32, (1, 27))], inits)
    expected = _ort(m, {"x": x})
    got, _ = _aicc(m, {"x": x})
    for g_, e_ in zip(got, expected):
        _check(g_, e_)


def test_uint8_model_check_numerics_and_export(tmp_path):
    """check_numerics feeds the kernels uint8 inputs in their int8 form, and compares the uint8
    output in it; export refuses uint8 inputs and outputs (its C interface has no such form)."""
    x = _ints(np.uint8, (2, 3, 9, 7))
    m = _model([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1])],
               [("x", np.uint8, x.shape)], [("y", np.uint8, (2, 8, 9, 7))],
               {"sx": np.float32(0.05), "zx": np.uint8(7), "w": _ints(np.uint8, (8, 3, 3, 3)), "sw": np.float32(0.01),
                "zw": np.uint8(130), "sy": np.float32(0.5), "zy": np.uint8(9)})
    cm = compiler.compile(m, example_inputs=(x,))
    report = cm.check_numerics(x)
    assert report.ok and all(o[0] == 0 for o in report.outputs)
    with pytest.raises(compiler.CompileError, match="uint8 inputs or outputs"):
        cm.export(tmp_path)


# ---------------------------------------------------------------------------------------------
# Models quantized by onnxruntime.quantization
# ---------------------------------------------------------------------------------------------


def _float_cnn(path):
    """A small CNN + MLP in float32 (conv, relu, max pool, depthwise conv, residual add, leaky
    relu, mul, global average pool, matmul, sigmoid, gemm) with an IR version ORT reads."""
    rng = np.random.default_rng(1)

    def w(*shape, s=0.3):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    inits = {"w1": w(8, 3, 3, 3), "b1": w(8, s=0.1), "w2": w(8, 1, 3, 3), "b2": w(8, s=0.1),
             "wm": w(8, 5), "bm": w(5, s=0.1), "wg": w(5, 4), "bg": w(4, s=0.1)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("Add", ["c2", "p1"], ["a2"]),
             helper.make_node("LeakyRelu", ["a2"], ["l2"], alpha=0.1),
             helper.make_node("Mul", ["l2", "p1"], ["m2"]),
             helper.make_node("GlobalAveragePool", ["m2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "wm"], ["mm"]),
             helper.make_node("Add", ["mm", "bm"], ["mb"]),
             helper.make_node("Sigmoid", ["mb"], ["s"]),
             helper.make_node("Gemm", ["s", "wg", "bg"], ["y"])]
    m = _model(nodes, [("x", np.float32, (2, 3, 9, 9))], [("y", np.float32, (2, 4))], inits, opset=17)
    m.ir_version = 8
    onnx.save(m, str(path))
    return [rng.standard_normal((2, 3, 9, 9)).astype(np.float32) for _ in range(6)]


def _reader(batches):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": b} for b in batches])

        def get_next(self):
            return next(self.it, None)

    return Reader()


@pytest.mark.parametrize("activations", ["QUInt8", "QInt8"])
def test_quantize_static_qoperator_model(tmp_path, activations):
    """onnxruntime.quantization.quantize_static(QOperator): QuantizeLinear, QLinearConv (a
    depthwise one too), MaxPool and Flatten on (u)int8, QLinearAdd / LeakyRelu / Mul /
    GlobalAveragePool / Sigmoid, QLinearMatMul, QGemm, DequantizeLinear, compared with ONNX
    Runtime running the graph as written. uint8 activations get 7-bit weights (reduce_range):
    with full-range ones ONNX Runtime's AVX2 kernel saturates (see the module) and lands up to
    ten output steps away. The output may differ by one step where ONNX Runtime rounds by its
    own formula (QLinearAdd, QLinearSigmoid); on this data it does not differ at all."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    f32, q8 = tmp_path / "m.onnx", tmp_path / "q.onnx"
    batches = _float_cnn(f32)
    quantize_static(str(f32), str(q8), _reader(batches[:4]), quant_format=QuantFormat.QOperator,
                    per_channel=True, activation_type=getattr(QuantType, activations),
                    weight_type=QuantType.QInt8, reduce_range=activations == "QUInt8")
    model = onnx.load(str(q8))
    ops = {n.op_type for n in model.graph.node}
    assert {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearSigmoid", "MaxPool"} <= ops
    m = compiler.compile(str(q8), example_inputs=(batches[4],))
    assert m.ir("tensor").count("aicc.matmul_integer") >= 3
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the graph as written
    sess = ort.InferenceSession(str(q8), so, providers=["CPUExecutionProvider"])
    y_scale = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "y_scale"))
    for x in batches[4:]:
        steps = np.abs(m(x) - sess.run(None, {"x": x})[0]) / y_scale
        assert steps.max() <= 1.001 and np.mean(steps > 0.5) <= 0.25


@pytest.mark.parametrize("reduce_range", [False, True])
def test_quantize_dynamic_model(tmp_path, reduce_range):
    """onnxruntime.quantization.quantize_dynamic: DynamicQuantizeLinear feeding ConvInteger
    and MatMulInteger with run-time zero points, Cast, Mul: integer paths throughout. aicc
    matches ONNX's reference evaluator (exact integer ops, the same float32 ops) to the bit;
    ONNX Runtime too with 7-bit weights (reduce_range), while with full-range int8 weights its
    AVX2 uint8 x int8 kernel saturates (see the module) and lands a few percent away."""
    from onnx.reference import ReferenceEvaluator
    from onnxruntime.quantization import quantize_dynamic

    f32, q8 = tmp_path / "m.onnx", tmp_path / "q.onnx"
    batches = _float_cnn(f32)
    quantize_dynamic(str(f32), str(q8), reduce_range=reduce_range)
    ops = {n.op_type for n in onnx.load(str(q8)).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"} <= ops
    m = compiler.compile(str(q8), example_inputs=(batches[0],))
    tensor_ir = m.ir("tensor")  # the convs' im2col in matmul_integer, the MatMul quantizing as it reads
    assert tensor_ir.count("aicc.matmul_integer") >= 1 and tensor_ir.count("aicc.dynamic_matmul_integer") >= 1
    reference = ReferenceEvaluator(str(q8))
    sess = ort.InferenceSession(str(q8), providers=["CPUExecutionProvider"])
    for x in batches[:3]:
        got = m(x)
        np.testing.assert_array_equal(got, reference.run(None, {"x": x})[0])
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-6, atol=1e-6 if reduce_range else 0.1)
