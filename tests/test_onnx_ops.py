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


def _sdpa_export_model(mask: np.ndarray, l: int = 7, s: int = 9, h: int = 3, e: int = 8):
    """What torch.onnx.export (TorchScript, opset 17) writes for scaled_dot_product_attention
    with a float attn_mask: q and k^T each times sqrt(scale), MatMul, Add mask, Softmax,
    Where(IsNaN(p), 0, p), MatMul v; heads split and merged by Reshape / Transpose."""
    c = np.array(np.sqrt(1 / np.sqrt(e)), np.float32)
    init = [onnx.numpy_helper.from_array(c, "c"), onnx.numpy_helper.from_array(mask, "mask"),
            onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
            onnx.numpy_helper.from_array(np.array([1, l, h, e], np.int64), "qshape"),
            onnx.numpy_helper.from_array(np.array([1, s, h, e], np.int64), "kshape"),
            onnx.numpy_helper.from_array(np.array([1, l, h * e], np.int64), "oshape")]
    n = helper.make_node
    nodes = [n("Reshape", ["q", "qshape"], ["q4"]), n("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
             n("Reshape", ["k", "kshape"], ["k4"]), n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             n("Reshape", ["v", "kshape"], ["v4"]), n("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
             n("Mul", ["qt", "c"], ["qs"]), n("Mul", ["kt", "c"], ["ks"]),
             n("MatMul", ["qs", "ks"], ["sc"]), n("Add", ["sc", "mask"], ["sm"]),
             n("Softmax", ["sm"], ["p"], axis=-1), n("IsNaN", ["p"], ["nan"]),
             n("Where", ["nan", "zero", "p"], ["pg"]), n("MatMul", ["pg", "vt"], ["o4"]),
             n("Transpose", ["o4"], ["ot"], perm=[0, 2, 1, 3]), n("Reshape", ["ot", "oshape"], ["y"])]
    graph = helper.make_graph(
        nodes, "sdpa", [helper.make_tensor_value_info("q", TP.FLOAT, [1, l, h * e]),
                        helper.make_tensor_value_info("k", TP.FLOAT, [1, s, h * e]),
                        helper.make_tensor_value_info("v", TP.FLOAT, [1, s, h * e])],
        [helper.make_tensor_value_info("y", TP.FLOAT, None)], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("kind", ["causal", "padding", "empty_row"])
def test_exported_sdpa_is_fused_unless_a_row_is_empty(kind):
    """torch.onnx.export's attention pattern against onnxruntime (odd sizes: 7 queries, 9
    keys, 3 heads of 8). A causal 0 / -inf mask becomes `causal`, a finite one an operand;
    a constant mask that drops a whole row stays unfused (the guard's zeros)."""
    ort = pytest.importorskip("onnxruntime")
    l, s = 7, 9
    if kind == "causal":
        mask = np.where(np.tril(np.ones((l, s), bool)), 0.0, -np.inf)
    elif kind == "padding":
        mask = np.where(np.arange(s) < 6, 0.0, -1e9) + np.zeros((l, 1))
    else:
        mask = np.where(np.tril(np.ones((l, s), bool), -1), 0.0, -np.inf)  # row 0: all -inf
    model = _sdpa_export_model(mask.reshape(1, 1, l, s).astype(np.float32), l, s)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, n, 24)).astype(np.float32) for n in (l, s, s))
    m = compiler.compile(model, [q, k, v], threads=1)
    ir = m.ir("tensor")
    assert ("aicc_fused.attention" in ir) == (kind != "empty_row")
    assert ("causal" in ir) == (kind == "causal")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"q": q, "k": k, "v": v})[0]
    got = m(q, k, v)
    if kind == "empty_row":
        assert np.all(want[0, 0] == 0) and np.all(got[0, 0] == 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("e", [2.0, 3.0, 2.5])
def test_pow_by_constant_two_or_three_is_multiplies(e):
    """GELU's tanh form cubes its input with Pow(x, 3): multiplies, not powf (2.5 stays pow)."""
    ort = pytest.importorskip("onnxruntime")
    exponent = onnx.numpy_helper.from_array(np.array(e, np.float32), "e")
    graph = helper.make_graph([helper.make_node("Pow", ["x", "e"], ["y"])], "pow",
                              [helper.make_tensor_value_info("x", TP.FLOAT, [5, 7])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)], [exponent])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(4).uniform(0.1, 3, (5, 7)).astype(np.float32)
    x[0] = -x[0]
    m = compiler.compile(model, [x])
    assert ("aicc.pow" in m.ir("tensor")) == (e == 2.5)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = m(x)
    if e == 2.5:
        assert np.all(np.isnan(got[0])) and np.all(np.isnan(want[0]))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)


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
