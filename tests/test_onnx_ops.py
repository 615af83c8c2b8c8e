"""The ONNX importer's behaviour that the onnx package's node test cases do not cover:
specialization of shape-like graph inputs on the example inputs (and its guard), the fusion of
Attention, refusals with UnsupportedOpError, and regressions found through the node cases."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402

import compiler  # noqa: E402


def _model(nodes, inputs, outputs, opset=18):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _topk_model():
    return _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)],
                  [("x", TP.FLOAT, [3, 5]), ("k", TP.INT64, [1])],
                  [("v", TP.FLOAT, None), ("i", TP.INT64, None)])


def test_shape_input_specialized_on_example_and_guarded():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    k = np.array([2], np.int64)
    m = compiler.compile(_topk_model(), [x, k])
    assert m.guards and m.guards[0][1] == "k"
    v, i = m(x, k)
    ref = np.argsort(-x, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(i, ref)
    np.testing.assert_array_equal(v, np.take_along_axis(x, ref, 1))
    with pytest.raises(compiler.SpecializationError, match=r"input 1 \('k'\).*\[2\].*\[3\]") as e:
        m(x, np.array([3], np.int64))
    assert isinstance(e.value, compiler.CompileError) and e.value.input_name == "k"


def test_shape_input_without_example_is_refused():
    with pytest.raises(compiler.UnsupportedOpError, match="non-constant k input"):
        compiler.compile(_topk_model(), input_shapes={"x": (3, 5), "k": (1,)})


def test_input_reaching_a_shape_through_other_ops_is_specialized():
    """A Reshape whose shape is computed from a graph input (Add of two inputs): the import
    starts again with that input specialized, and the guard checks it."""
    nodes = [helper.make_node("Add", ["s", "one"], ["s1"]),
             helper.make_node("Reshape", ["x", "s1"], ["y"])]
    model = _model(nodes, [("x", TP.FLOAT, [2, 6]), ("s", TP.INT64, [2]), ("one", TP.INT64, [2])],
                   [("y", TP.FLOAT, None)])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    s, one = np.array([2, 3], np.int64), np.array([1, 1], np.int64)
    m = compiler.compile(model, [x, s, one])
    np.testing.assert_array_equal(m(x, s, one), x.reshape(3, 4))
    assert sorted(n for _, n, _ in m.guards) == ["one", "s"]
    with pytest.raises(compiler.SpecializationError, match="'s'"):
        m(x, np.array([1, 5], np.int64), one)


def test_attention_node_is_fused():
    q = np.random.default_rng(1).standard_normal((1, 2, 8, 16)).astype(np.float32)
    model = _model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
                   [(n, TP.FLOAT, [1, 2, 8, 16]) for n in "qkv"], [("y", TP.FLOAT, None)], opset=23)
    m = compiler.compile(model, [q, q, q])
    assert "aicc_fused.attention" in m.ir("tensor")
    s = q @ q.transpose(0, 1, 3, 2) / 4.0
    s = np.where(np.tril(np.ones((8, 8), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(m(q, q, q), (p / p.sum(-1, keepdims=True)) @ q, rtol=1e-4, atol=1e-5)


def test_non_max_suppression_refused_by_name():
    model = _model([helper.make_node("NonMaxSuppression", ["b", "s"], ["y"])],
                   [("b", TP.FLOAT, [1, 4, 4]), ("s", TP.FLOAT, [1, 1, 4])], [("y", TP.INT64, None)])
    with pytest.raises(compiler.UnsupportedOpError, match="NonMaxSuppression.*depends on the input values"):
        compiler.compile(model, input_shapes={})


def test_scatter_nd_duplicate_indices_last_write_wins():
    model = _model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"])],
                   [("d", TP.FLOAT, [4]), ("i", TP.INT64, [3, 1]), ("u", TP.FLOAT, [3])],
                   [("y", TP.FLOAT, None)])
    d, i, u = np.zeros(4, np.float32), np.array([[1], [3], [1]], np.int64), np.array([5, 6, 7], np.float32)
    m = compiler.compile(model, [d, i, u])
    np.testing.assert_array_equal(m(d, i, u), [0, 7, 0, 6])


def test_matmul_bias_read_through_a_view_stays_live():
    """tile-matmul folded a bias that is a view of a temporary (a slice of a row, reshaped) into
    the kernels' init and left the temporary's dealloc before the kernel: the packing buffer
    reused its memory (found by GRU's bias)."""
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 3), (15, 3), (1, 30)))

    def f(x, w, b):
        return x @ w.T + b[0, :15]

    np.testing.assert_allclose(compiler.compile(f, (x, w, b))(x, w, b), f(x, w, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 2)]),
    ("i,i", [(5,), (5,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
])
def test_einsum_matches_numpy(eq, shapes):
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{i}" for i in range(len(xs))]
    model = _model([helper.make_node("Einsum", names, ["y"], equation=eq)],
                   [(n, TP.FLOAT, list(s)) for n, s in zip(names, shapes)], [("y", TP.FLOAT, None)], opset=12 + 6)
    out = compiler.compile(model, xs)(*xs)
    np.testing.assert_allclose(out, np.einsum(eq, *xs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_long_rows_by_selection(largest):
    """Rows longer than TOPK_RANK_MAX_N take k selection passes: ties to the lower index,
    infinities included, as the reference's stable sort."""
    rng = np.random.default_rng(4)
    x = rng.integers(-5, 5, size=(3, 300)).astype(np.float32)
    x[0, 10] = x[0, 20] = np.inf
    x[1, :] = -np.inf
    x[1, 7] = x[2, 250] = -np.inf
    model = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)],
                   [("x", TP.FLOAT, [3, 300]), ("k", TP.INT64, [1])],
                   [("v", TP.FLOAT, None), ("i", TP.INT64, None)])
    k = np.array([5], np.int64)
    v, i = compiler.compile(model, [x, k])(x, k)
    ref = np.argsort(-x if largest else x, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(i, ref)
    np.testing.assert_array_equal(v, np.take_along_axis(x, ref, 1))
