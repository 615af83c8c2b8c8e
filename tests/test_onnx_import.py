"""The ONNX frontend: numerics of built models against onnxruntime / NumPy, error messages, CLI."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

import compiler  # noqa: E402
from compiler.reference import run_reference  # noqa: E402
from frontends.onnx_import import import_onnx  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in inits],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8  # readable by every onnxruntime in the test range
    return m


def _ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _cnn():
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(8).astype(np.float32)
    dw = rng.standard_normal((8, 1, 3, 3)).astype(np.float32) * 0.3
    bn = [rng.uniform(0.5, 1.5, 8).astype(np.float32), rng.standard_normal(8).astype(np.float32),
          rng.standard_normal(8).astype(np.float32), rng.uniform(0.5, 1.5, 8).astype(np.float32)]
    fc = rng.standard_normal((10, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "dw"], ["c2"], pads=[1, 1, 1, 1], group=8, dilations=[2, 2]),
        helper.make_node("MaxPool", ["c2"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("AveragePool", ["r1"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["p1"], ["g1"]),
        helper.make_node("Flatten", ["g1"], ["f1"]),
        helper.make_node("Gemm", ["f1", "fc"], ["y"], transB=1, alpha=0.5),
        helper.make_node("Concat", ["p1", "p2"], ["cat"], axis=1),
        helper.make_node("Slice", ["cat", "st", "en", "ax", "sp"], ["z"]),
    ]
    inits = [("w1", w1), ("b1", b1), ("dw", dw), ("s", bn[0]), ("b", bn[1]), ("m", bn[2]), ("v", bn[3]),
             ("fc", fc), ("st", np.array([1, -1], np.int64)), ("en", np.array([7, -100], np.int64)),
             ("ax", np.array([1, 3], np.int64)), ("sp", np.array([2, -2], np.int64))]
    return _model(nodes, [("x", TP.FLOAT, ["N", 3, 15, 15])], ["y", "z"], inits)


def test_small_cnn_matches_onnxruntime():
    model = _cnn()
    x = np.random.default_rng(1).standard_normal((2, 3, 15, 15)).astype(np.float32)
    m = compiler.compile(model, (x,))
    y, z = m(x)
    ry, rz = _ort(model, {"x": x})
    np.testing.assert_allclose(y, ry, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(z, rz, rtol=RTOL, atol=ATOL)
    assert "aicc.conv2d" in m.ir("tensor") and "aicc.pool2d" in m.ir("tensor")


def test_reference_kernels_agree_with_onnxruntime():
    model = _cnn()
    x = np.random.default_rng(2).standard_normal((1, 3, 15, 15)).astype(np.float32)
    prog = import_onnx(model, {"x": (1, 3, 15, 15)})
    ref = run_reference(prog.module, [x], prog.func_name)
    for a, b in zip(ref, _ort(model, {"x": x})):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_embedding_gather_and_layernorm():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("LayerNormalization", ["e", "g", "b"], ["ln"], axis=-1),
        helper.make_node("MatMul", ["ln", "w"], ["h"]),
        helper.make_node("Gelu", ["h"], ["y"]),
    ]
    inits = [("table", table), ("g", np.ones(16, np.float32)), ("b", np.zeros(16, np.float32)),
             ("w", rng.standard_normal((16, 8)).astype(np.float32))]
    model = _model(nodes, [("ids", TP.INT64, [2, 5])], ["y"], inits, opset=20)
    ids = np.array([[0, 3, 49, -1, 7], [2, 2, 10, -50, 0]], np.int64)
    m = compiler.compile(model, (ids,))
    prog = import_onnx(model, {"ids": (2, 5)})
    (ref,) = run_reference(prog.module, [ids])
    np.testing.assert_allclose(m(ids), ref, rtol=RTOL, atol=ATOL)


def test_unsupported_ops_listed_in_one_message():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Unique", ["a"], ["b"], name="uniq0"),
        helper.make_node("Bernoulli", ["a"], ["c"], name="bern0"),
        helper.make_node("Bernoulli", ["c"], ["y"], name="bern1"),
    ]
    model = _model(nodes, [("x", TP.FLOAT, [2, 2])], ["y"])
    with pytest.raises(compiler.UnsupportedOpError) as e:
        compiler.compile(model)
    msg = str(e.value)
    assert "Unique (1 node, first 'uniq0')" in msg
    assert "Bernoulli (2 nodes, first 'bern0')" in msg


def test_symbolic_dim_stays_symbolic_unless_given():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", TP.FLOAT, ["batch", 4])], ["y"])
    dyn = compiler.compile(model)  # one model for every batch (tests/test_dynamic_shapes.py)
    assert dyn.is_dynamic
    for n in (1, 3, 5):
        assert dyn(np.ones((n, 4), np.float32)).shape == (n, 4)
    m = compiler.compile(model, input_shapes={"x": (3, 4)})
    assert not m.is_dynamic and m(np.ones((3, 4), np.float32)).shape == (3, 4)


def test_unsupported_attribute_is_refused_not_wrong():
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1)]
    model = _model(nodes, [("x", TP.FLOAT, [1, 1, 4, 4])], ["y"])
    with pytest.raises(compiler.UnsupportedOpError, match="storage_order=1"):
        compiler.compile(model)


def test_cli_onnx(tmp_path):
    from tools.aicc import main

    path = tmp_path / "cnn.onnx"
    onnx.save(_cnn(), str(path))
    assert main([str(path), "--input-shape", "x=1x3x15x15", "--repeat", "1"]) == 0
    # symbolic dims without --input-shape: a conv needs static sizes (a clear error, exit 1)
    assert main([str(path), "--repeat", "1"]) == 1
