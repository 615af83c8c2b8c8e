"""The pretrained-architecture models that ship in the onnx wheel (onnx/backend/test/data/light).

Each is an opset-9 model whose weights are made at run time by ConstantOfShape nodes. Two checks:

* the shipped case, exactly as onnx's own backend test runs it: the input is
  `arange(n).reshape(shape) / n` and the output is compared with the shipped
  `light_<name>_output_0.pb` at the case's own rtol/atol (collect_testcases);
* the same architecture with random weights (the ConstantOfShape nodes replaced by seeded
  random constants), against onnxruntime. The shipped weights are constant fills, so their
  outputs are nearly uniform; random weights make wrong indexing show.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import compiler  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
# (model, rtol, atol) as onnx.backend.test.case.model.collect_testcases states them
CASES = [
    ("bvlc_alexnet", 1e-3, 1e-7),
    ("densenet121", 2e-3, 1e-7),
    ("inception_v1", 1e-3, 1e-7),
    ("inception_v2", 1e-3, 1e-7),
    ("resnet50", 1e-3, 1e-7),
    ("shufflenet", 1e-3, 1e-7),
    ("squeezenet", 1e-3, 1e-7),
    ("vgg19", 1e-3, 1e-7),
    ("zfnet512", 1e-3, 1e-7),
]
# random weights against onnxruntime: float32 sums over thousands of terms in a different order
RANDOM_RTOL, RANDOM_ATOL = 1e-3, 1e-5


def _load(name: str):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not in this onnx wheel")
    return onnx.load(path)


def _input(model) -> np.ndarray:
    init = {t.name for t in model.graph.initializer}
    (vi,) = [vi for vi in model.graph.input if vi.name not in init]
    shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def _expected(name: str) -> np.ndarray:
    t = onnx.TensorProto()
    with open(os.path.join(LIGHT, f"light_{name}_output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def _randomized(model, seed: int = 0):
    """The model with each ConstantOfShape weight replaced by a seeded random Constant: He-scaled
    normal for weights (rank >= 2), uniform [0.5, 1.5) for per-channel vectors (so batch-norm
    variances stay positive)."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    shapes = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    nodes = []
    for node in m.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            shape = tuple(int(d) for d in shapes[node.input[0]])
            if len(shape) >= 2:
                fan_in = int(np.prod(shape[1:]))
                value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
            else:
                value = rng.uniform(0.5, 1.5, shape)
            node = helper.make_node("Constant", [], list(node.output), name=node.name,
                                    value=numpy_helper.from_array(value.astype(np.float32)))
        nodes.append(node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


@pytest.mark.parametrize("name,rtol,atol", CASES, ids=[c[0] for c in CASES])
def test_light_model_shipped_output(name, rtol, atol):
    model = _load(name)
    m = compiler.compile(model, threads=1)
    got = m(_input(model))
    got = got[0] if isinstance(got, tuple) else got
    np.testing.assert_allclose(got, _expected(name), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["resnet50", "squeezenet", "shufflenet", "inception_v1"])
def test_light_model_random_weights_vs_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    model = _randomized(_load(name))
    x = np.random.default_rng(1).uniform(0, 1, _input(model).shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {sess.get_inputs()[0].name: x})
    got = compiler.compile(model)(x)
    got = got[0] if isinstance(got, tuple) else got
    assert want.std() > 1e-4  # the outputs are not uniform, so the comparison has teeth
    np.testing.assert_allclose(got, want, rtol=RANDOM_RTOL, atol=RANDOM_ATOL * float(np.abs(want).max()))


def test_old_opset_is_upgraded_not_refused():
    """An opset-9 model (Unsqueeze with attribute axes, Softmax's 2-D coercion) imports."""
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
        helper.make_node("Softmax", ["u"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 8
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got = compiler.compile(model)(x)
    # opset 9 Softmax(axis=1) on (1, 3, 4): coerced to 2-D (1, 12), one softmax over all 12
    e = np.exp(x - x.max())
    np.testing.assert_allclose(got, (e / e.sum())[None], rtol=1e-5, atol=1e-6)
