"""int8 quantization: the quantize / dequantize / matmul_integer ops against NumPy (rounding
half to even, saturation, per-axis parameters, zero points, odd shapes) on the CPU and the
CUDA emulator; the quantize-matmul rewrite; and `compiler.quantize` (calibration methods,
accuracy against float, a trained digits classifier, torch modules, the report, errors)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

import compiler
from compiler.pipeline import CompileOptions, compile_module, make_context
from compiler.reference import run_reference
from compiler.targets.cpu.machine import cpu_machine

RNG = np.random.default_rng(0)


def _compile(text: str, name: str, target: str = "cpu"):
    module = Parser(make_context(), text).parse_module()
    options = CompileOptions("cpu", target_cpu="x86-64") if target == "cpu-generic" else CompileOptions(target)
    m = compile_module(module.clone(), name, output_is_tuple=True, options=options, use_cache=False)
    if target.startswith("cpu") and "aicc.matmul_integer" in text and "transpose_rhs" in text:
        assert ("aicc_cpu.qgemm" in m.ir("loops")) == (target == "cpu")
    return m, module


def _arr(values, dtype="f64"):
    return f"array<{dtype}: {', '.join(str(v) for v in values)}>"


def np_quantize(x, scale, zp):
    return np.clip(np.rint(x.astype(np.float32) / np.float32(scale)) + zp, -128, 127).astype(np.int8)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
@pytest.mark.parametrize("shape,axis", [((7,), -1), ((1, 129), -1), ((3, 5), 0), ((2, 7, 3), 2)])
def test_quantize_dequantize(target, shape, axis):
    n = 1 if axis == -1 else shape[axis]
    scale = list(np.round(RNG.uniform(0.01, 0.2, n), 4))
    zp = list(RNG.integers(-20, 20, n))
    ty = "x".join(map(str, shape))
    text = f"""
func.func @qdq(%x: tensor<{ty}xf32>) -> (tensor<{ty}xi8>, tensor<{ty}xf32>) {{
  %q = aicc.quantize %x {{scale = {_arr(scale)}, zero_point = {_arr(zp, 'i64')}, axis = {axis} : i64}} : tensor<{ty}xf32> -> tensor<{ty}xi8>
  %d = aicc.dequantize %q {{scale = {_arr(scale)}, zero_point = {_arr(zp, 'i64')}, axis = {axis} : i64}} : tensor<{ty}xi8> -> tensor<{ty}xf32>
  func.return %q, %d : tensor<{ty}xi8>, tensor<{ty}xf32>
}}"""
    m, module = _compile(text, "qdq", target)
    x = (RNG.standard_normal(shape) * 8).astype(np.float32)
    x.reshape(-1)[:3] = [np.float32(scale[0]) * 2.5, -np.float32(scale[0]) * 1e4, np.float32(scale[0]) * 1e4]
    along = [1] * len(shape)
    if axis != -1:
        along[axis] = -1
    s, z = np.array(scale, np.float32).reshape(along), np.array(zp).reshape(along)
    q_expect = np.clip(np.rint(x / s) + z, -128, 127).astype(np.int8)
    q, d = m(x)
    np.testing.assert_array_equal(q, q_expect)
    np.testing.assert_allclose(d, (q_expect.astype(np.float32) - z) * s, rtol=1e-6)
    for got, ref in zip((q, d), run_reference(module, [x], "qdq")):
        np.testing.assert_array_equal(got, ref)


def test_rounding_half_to_even_and_saturation():
    text = """
func.func @q(%x: tensor<8xf32>) -> tensor<8xi8> {
  %q = aicc.quantize %x {scale = array<f64: 1.0>, zero_point = array<i64: 1>, axis = -1 : i64} : tensor<8xf32> -> tensor<8xi8>
  func.return %q : tensor<8xi8>
}"""
    m, _ = _compile(text, "q")
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 126.4, 500.0, -500.0], np.float32)
    np.testing.assert_array_equal(m(x)[0], [1, 3, 3, 1, -1, 127, 127, -128])


MM_CASES = [(1, 7, 3, 0, True, ()), (7, 129, 5, -3, True, ()), (4, 16, 9, 12, False, ()),
            (3, 5, 2, 7, True, (2,)), (2, 32, 8, -128, True, ()), (33, 300, 17, 127, True, ())]


@pytest.mark.parametrize("target", ["cpu", "cpu-generic", "cuda-emu"])
@pytest.mark.parametrize("m_,k,n,zp,trans,batch", MM_CASES)
def test_matmul_integer(target, m_, k, n, zp, trans, batch):
    """cpu: the qgemm kernel (2 x 4 tiles of vpmaddwd dot products, edges of every kind);
    cpu-generic: the vectorized loop nest, for a CPU without AVX2; cuda-emu: the GPU kernel."""
    if target == "cuda-emu" and m_ * n * k > 5000:
        pytest.skip("the emulator is slow")
    a_t, b_t = "x".join(map(str, (*batch, m_, k))), (f"{n}x{k}" if trans else f"{k}x{n}")
    o_t = "x".join(map(str, (*batch, m_, n)))
    text = f"""
func.func @mm(%a: tensor<{a_t}xi8>, %b: tensor<{b_t}xi8>) -> tensor<{o_t}xi32> {{
  %y = aicc.matmul_integer %a, %b {{lhs_zero_point = {zp} : i64{', transpose_rhs' if trans else ''}}} : tensor<{a_t}xi8>, tensor<{b_t}xi8> -> tensor<{o_t}xi32>
  func.return %y : tensor<{o_t}xi32>
}}"""
    m, _ = _compile(text, "mm", target)
    a = RNG.integers(-128, 128, (*batch, m_, k)).astype(np.int8)
    b = RNG.integers(-128, 128, (n, k) if trans else (k, n)).astype(np.int8)
    expect = (a.astype(np.int64) - zp) @ (b.T if trans else b).astype(np.int64)
    np.testing.assert_array_equal(m(a, b)[0], expect.astype(np.int32))


@pytest.mark.parametrize("m_,k,n", [(1, 7, 3), (7, 27, 32), (9, 129, 5), (33, 300, 17), (2, 32, 4),
                                    (11, 2, 24), (6, 1, 9)], ids=str)
@pytest.mark.parametrize("zp", [-128, 9, 127])
def test_matmul_integer_constant_weight(m_, k, n, zp):
    """A constant 8-bit weight is packed for the broadcast kernel (pairs of k, groups of 8
    columns, zeros beyond n and k): tiles of 1 to 4 rows, 8 or 16 columns, a masked store of
    the last n % 8 columns, blocks of 8 rows and their rest. Exact all the same."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    w[0, :] = -128
    dense = "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in w) + "]"
    m, _ = _compile(f"""
func.func @mm(%a: tensor<{m_}x{k}xi8>) -> tensor<{m_}x{n}xi32> {{
  %w = aicc.constant dense<{dense}> : tensor<{n}x{k}xi8>
  %y = aicc.matmul_integer %a, %w {{lhs_zero_point = {zp} : i64, transpose_rhs}} : tensor<{m_}x{k}xi8>, tensor<{n}x{k}xi8> -> tensor<{m_}x{n}xi32>
  func.return %y : tensor<{m_}x{n}xi32>
}}""", "mm")
    # a target CPU with VNNI (AICC_TARGET_CPU or the host) packs the weight by quads for
    # vpdpbusd instead (tests/test_qgemm_vnni.py)
    assert ("_vnni" if cpu_machine().vnni_bits else "_packed") in m.ir("loops")
    for a in (RNG.integers(-128, 128, (m_, k)), np.full((m_, k), 127), np.full((m_, k), -128)):
        a = a.astype(np.int8)
        np.testing.assert_array_equal(m(a)[0], (a.astype(np.int64) - zp) @ w.T.astype(np.int64))


@pytest.mark.parametrize("batch,m_,k,n", [((), 9, 27, 3), ((2,), 5, 40, 17), ((), 33, 288, 64)], ids=str)
def test_matmul_integer_scaled_in_the_kernel(batch, m_, k, n):
    """float(matmul_integer(a, w)) * s[j], an int8 conv's epilogue, runs in the packed kernel
    as it stores (`col_scale`): the same float32 products as NumPy's, masked for n % 8."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    sc = (RNG.random(n) + 0.5).astype(np.float32) / 1000
    dense = "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in w) + "]"
    a_t, o_t = "x".join(map(str, (*batch, m_, k))), "x".join(map(str, (*batch, m_, n)))
    m, _ = _compile(f"""
func.func @mm(%a: tensor<{a_t}xi8>) -> tensor<{o_t}xf32> {{
  %w = aicc.constant dense<{dense}> : tensor<{n}x{k}xi8>
  %s = aicc.constant dense<[{", ".join(repr(float(v)) for v in sc)}]> : tensor<{n}xf32>
  %y = aicc.matmul_integer %a, %w {{lhs_zero_point = -5 : i64, transpose_rhs}} : tensor<{a_t}xi8>, tensor<{n}x{k}xi8> -> tensor<{o_t}xi32>
  %f = aicc.cast %y : tensor<{o_t}xi32> -> tensor<{o_t}xf32>
  %z = aicc.mul %f, %s : tensor<{o_t}xf32>, tensor<{n}xf32> -> tensor<{o_t}xf32>
  func.return %z : tensor<{o_t}xf32>
}}""", "mm")
    assert "col_scale" in m.ir("loops")
    a = RNG.integers(-128, 128, (*batch, m_, k)).astype(np.int8)
    acc = (a.astype(np.int64) + 5) @ w.T.astype(np.int64)
    np.testing.assert_array_equal(m(a)[0], acc.astype(np.float32) * sc)


@pytest.mark.parametrize("m_,k,n,bias,relu,zp", [(1, 7, 3, True, True, -128), (9, 27, 13, False, False, 5),
                                                  (33, 129, 16, True, False, 127), (7, 300, 64, True, True, 0),
                                                  (7, 40, 17, True, True, -128), (5, 33, 33, False, False, 3)])
def test_matmul_integer_requantized_in_the_kernel(m_, k, n, bias, relu, zp):
    """ONNX Runtime's requantization after an int8 matmul, clamp(rne(float32(acc + b[j]) *
    s[j]) + zp, -128, 127) (after max(., 0) with a relu): the packed kernel computes it as it
    stores and writes the i8 result (`out_zp`), value for value NumPy's, masked for n % 8;
    scales put many results beyond the int8 range (saturation) and on halves. n = 17 and 33
    leave one column in the last group of 8 or 16: on AVX-512 LLVM once stored that lane as a
    whole i32, over the next row's first bytes."""
    w = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    sc = (RNG.choice([0.5, 0.25, 1 / 64], n) * RNG.uniform(0.5, 2, n)).astype(np.float32) / k
    sc[: n // 2] = np.float32(0.5)  # exact halves: round half to even decides
    b = RNG.integers(-5000, 5000, n).astype(np.int32)
    dense = "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in w) + "]"
    acc = "%yb" if bias else "%y"
    relu_line = f"  %r = aicc.relu %z : tensor<{m_}x{n}xf32>\n" if relu else ""
    m, _ = _compile(f"""
func.func @mm(%a: tensor<{m_}x{k}xi8>) -> tensor<{m_}x{n}xi8> {{
  %w = aicc.constant dense<{dense}> : tensor<{n}x{k}xi8>
  %b = aicc.constant dense<[{", ".join(map(str, b))}]> : tensor<{n}xi32>
  %s = aicc.constant dense<[{", ".join(repr(float(v)) for v in sc)}]> : tensor<{n}xf32>
  %y = aicc.matmul_integer %a, %w {{lhs_zero_point = -3 : i64, transpose_rhs}} : tensor<{m_}x{k}xi8>, tensor<{n}x{k}xi8> -> tensor<{m_}x{n}xi32>
  %yb = aicc.add %y, %b : tensor<{m_}x{n}xi32>, tensor<{n}xi32> -> tensor<{m_}x{n}xi32>
  %f = aicc.cast {acc} : tensor<{m_}x{n}xi32> -> tensor<{m_}x{n}xf32>
  %z = aicc.mul %f, %s : tensor<{m_}x{n}xf32>, tensor<{n}xf32> -> tensor<{m_}x{n}xf32>
{relu_line}  %q = aicc.quantize {"%r" if relu else "%z"} {{scale = array<f64: 1.0>, zero_point = array<i64: {zp}>, axis = -1 : i64}} : tensor<{m_}x{n}xf32> -> tensor<{m_}x{n}xi8>
  func.return %q : tensor<{m_}x{n}xi8>
}}""", "mm")
    loops = m.ir("loops")
    assert f"out_zp = {zp} : i64" in loops and ("col_bias" in loops) == bias and ("relu = true" in loops) == relu
    a = RNG.integers(-128, 128, (m_, k)).astype(np.int8)
    acc = (a.astype(np.int64) + 3) @ w.T.astype(np.int64) + (b if bias else 0)
    y = acc.astype(np.float32) * sc
    if relu:
        y = np.maximum(y, np.float32(0))
    want = np.clip(np.rint(y) + zp, -128, 127).astype(np.int8)
    assert np.mean(np.abs(np.rint(y) + zp) > 127) > 0.01  # saturation is exercised
    np.testing.assert_array_equal(m(a)[0], want)


def test_quantize_matmul_rewrite_is_exact():
    """quantize-matmul changes the order of the float operations only: the integer model
    matches the float dequantize-matmul graph it replaced to float rounding."""
    qw = RNG.integers(-127, 128, (16, 5))
    text = f"""
func.func @lin(%x: tensor<3x16xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {{
  %q = aicc.quantize %x {{scale = array<f64: 0.03>, zero_point = array<i64: 4>, axis = -1 : i64}} : tensor<3x16xf32> -> tensor<3x16xi8>
  %a = aicc.dequantize %q {{scale = array<f64: 0.03>, zero_point = array<i64: 4>, axis = -1 : i64}} : tensor<3x16xi8> -> tensor<3x16xf32>
  %qw = aicc.constant dense<{qw.tolist()}> : tensor<16x5xi8>
  %w = aicc.dequantize %qw {{scale = {_arr([0.1, 0.2, 0.3, 0.05, 0.01])}, zero_point = array<i64: 0, 0, 0, 0, 0>, axis = 1 : i64}} : tensor<16x5xi8> -> tensor<16x5xf32>
  %y = aicc.matmul %a, %w : tensor<3x16xf32>, tensor<16x5xf32> -> tensor<3x5xf32>
  %z = aicc.add %y, %b : tensor<3x5xf32>, tensor<5xf32> -> tensor<3x5xf32>
  func.return %z : tensor<3x5xf32>
}}"""
    m, module = _compile(text, "lin")
    assert "aicc.matmul_integer" in m.ir("tensor")
    x, b = (RNG.standard_normal((3, 16)) * 2).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    expect = run_reference(module, [x, b], "lin")[0]
    np.testing.assert_allclose(m(x, b)[0], expect, rtol=1e-5, atol=1e-5)


# -- compiler.quantize --------------------------------------------------------------------------

W1 = (RNG.standard_normal((64, 96)) / 8).astype(np.float32)
B1 = (RNG.standard_normal(96) * 0.1).astype(np.float32)
W2 = (RNG.standard_normal((96, 10)) / 10).astype(np.float32)


def mlp(x):
    return np.maximum(x @ W1 + B1, 0.0) @ W2


def _cos(a, b):
    return float(np.sum(a * b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("method,cos", [("minmax", 0.99), ("percentile", 0.99), ("entropy", 0.98)])
def test_quantized_mlp_matches_float(method, cos):
    """Entropy calibration clips the tails and quantizes symmetrically (TensorRT's choice),
    trading a little of a small Gaussian test's accuracy for robustness to outliers."""
    calib = [(RNG.standard_normal((16, 64)).astype(np.float32),) for _ in range(4)]
    q = compiler.quantize(mlp, calib, method=method)
    assert q.stats["quantized_ops"] == 2
    assert q.ir("tensor").count("aicc.matmul_integer") == 2
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    assert _cos(q(x), mlp(x)) >= cos
    report = q.quant_report()
    assert f"({method}, 4 calibration batch(es))" in report and report.count("test_quantize.py") == 2
    assert all(layer.sqnr_db > 15 for layer in q.quantization.layers)


def test_report_shows_the_layer_that_hurts():
    """A hidden unit with a huge bias (whose weight in the next layer is small) stretches the
    second layer's input range: with minmax calibration that layer's SQNR falls, the first
    layer's does not."""
    b, w2 = B1.copy(), W2.copy()
    b[0], w2[0] = 300.0, w2[0] * 1e-3

    def f(x):
        return np.maximum(x @ W1 + b, 0.0) @ w2

    calib = [(RNG.standard_normal((16, 64)).astype(np.float32),) for _ in range(2)]
    first, second = compiler.quantize(f, calib).quantization.layers
    assert first.sqnr_db > 30 and second.sqnr_db < first.sqnr_db - 10, (first.sqnr_db, second.sqnr_db)


def test_per_channel_weights_beat_per_tensor():
    w = W1 * np.logspace(-2, 0, W1.shape[1], dtype=np.float32)  # columns of very different scales

    def f(x):
        return x @ w

    calib = [(RNG.standard_normal((16, 64)).astype(np.float32),)]
    s_ch, s_t = (compiler.quantize(f, calib, per_channel=pc).quantization.layers[0].sqnr_db for pc in (True, False))
    assert s_ch > s_t + 3, (s_ch, s_t)


def test_trained_digits_classifier_keeps_its_accuracy():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(x))
    tr, te = order[:1400], order[1400:]
    clf = MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=0).fit(x[tr], data.target[tr])
    (w1, w2), (b1, b2) = [c.astype(np.float32) for c in clf.coefs_], [c.astype(np.float32) for c in clf.intercepts_]

    def net(x):
        return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2

    test_x = x[te][:384]
    labels = data.target[te][:384]
    float_acc = np.mean(np.argmax(net(test_x), 1) == labels)
    calib = [(x[tr][i:i + 128],) for i in range(0, 1280, 128)]
    q = compiler.quantize(net, calib, example_inputs=(test_x,))
    int8_acc = np.mean(np.argmax(q(test_x), 1) == labels)
    assert float_acc > 0.9 and int8_acc >= float_acc - 0.01, (float_acc, int8_acc)
    del sklearn


def test_torch_module():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 33), torch.nn.GELU(), torch.nn.Linear(33, 7)).eval()
    calib = [(torch.randn(8, 20),) for _ in range(3)]
    q = compiler.quantize(model, calib)
    assert q.stats["quantized_ops"] == 2
    x = torch.randn(8, 20)
    assert _cos(q(x), model(x).detach().numpy()) >= 0.99


def test_errors():
    calib = [(np.ones((2, 64), np.float32),)]
    with pytest.raises(compiler.CompileError, match="method must be one of"):
        compiler.quantize(mlp, calib, method="kl")
    with pytest.raises(compiler.CompileError, match="calibration_data is empty"):
        compiler.quantize(mlp, [])
    with pytest.raises(compiler.CompileError, match="not quantized"):
        compiler.compile(mlp, calib[0]).quant_report()


def test_cli(tmp_path, capsys):
    from pathlib import Path

    from tools.aicc import main

    example = Path(__file__).resolve().parents[1] / "examples" / "mlp.py"
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=RNG.standard_normal((3, 64, 784)).astype(np.float32))
    assert main([str(example), "--quantize", str(calib), "--report", "--repeat", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 int8 matmul(s)" in out and "SQNR dB" in out and "cosine similarity with float32 0.99" in out
    assert "in 7 bits" not in out
    assert main([str(example), "--quantize", str(calib), "--report", "--reduce-range", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "weights per channel in 7 bits" in out and "cosine similarity with float32 0.99" in out
    assert main([str(example), "--quantize", str(calib), "--report", "--int8-saturation", "--target-cpu",
                 "x86-64-v3", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "pair sums may saturate" in out and "cosine similarity with float32 0.99" in out
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((2, 64, 784), np.float32), y=np.zeros((2, 3), np.float32))
    assert main([str(example), "--quantize", str(bad)]) == 1
    assert "holds 2 array(s)" in capsys.readouterr().err


def test_int8_saturation_model():
    """compiler.quantize and quantize_dynamic with int8_saturation for a CPU without VNNI: the
    8-bit weights take the vpmaddubsw kernel (whose saturated pair sums ONNX Runtime's kernel
    shares there), the outputs stay within cosine 0.99 of the exact int8 model's and of float's
    (0.995-0.99997 over six seeds: saturation does cost accuracy), and the report says so. The
    exact model keeps the vpmaddwd kernel."""
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((64, 48)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((48, 10)) / 7).astype(np.float32)

    def net(x):
        return np.maximum(x @ w1, 0) @ w2

    calib = [(rng.standard_normal((16, 64)).astype(np.float32),) for _ in range(3)]
    x = rng.standard_normal((16, 64)).astype(np.float32)
    for build in (lambda **kw: compiler.quantize(net, calib, (x,), **kw),
                  lambda **kw: compiler.quantize_dynamic(net, (x,), **kw)):
        exact = build(target_cpu="x86-64-v3")
        saturating = build(target_cpu="x86-64-v3", int8_saturation=True)
        assert "pmaddubsw" not in exact.ir("loops") and "pmaddubsw" in saturating.ir("loops")
        assert "pair sums may saturate" in saturating.quant_report()
        assert "saturate" not in exact.quant_report()
        assert _cos(saturating(x), exact(x)) >= 0.99 and _cos(saturating(x), net(x)) >= 0.99


def test_quantized_cnn_matches_float():
    """Convolutions (strided, dilated, 1x1) run as int8 im2col matmuls."""
    w1 = (RNG.standard_normal((8, 3, 3, 3)) / 5).astype(np.float32)
    b1 = (RNG.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((12, 8, 3, 3)) / 8).astype(np.float32)
    w3 = (RNG.standard_normal((6, 12, 1, 1)) / 3).astype(np.float32)
    w4 = (RNG.standard_normal((6 * 4 * 4, 5)) / 10).astype(np.float32)

    def cnn(x):
        h = compiler.ops.relu(compiler.ops.conv2d(x, w1, b1, padding=1))
        h = compiler.ops.relu(compiler.ops.conv2d(h, w2, stride=2, padding=2, dilation=2))
        h = compiler.ops.max_pool2d(compiler.ops.conv2d(h, w3), 2)
        return h.reshape(x.shape[0], -1) @ w4

    calib = [(RNG.standard_normal((4, 3, 17, 15)).astype(np.float32),) for _ in range(3)]
    x = RNG.standard_normal((4, 3, 17, 15)).astype(np.float32)
    q = compiler.quantize(cnn, calib, (x,))
    assert q.stats["quantized_ops"] == 4
    assert [layer.kind for layer in q.quantization.layers] == ["conv2d"] * 3 + ["matmul"]
    assert _cos(q(x), cnn(x)) >= 0.99
    assert all(layer.sqnr_db > 20 for layer in q.quantization.layers)


def test_quantized_cnn_requantizes_in_the_conv_kernels(monkeypatch):
    """Each quantize of a layer's input moves up to the conv before it, past the reshape,
    transpose and max pool between (which then move int8), and fuses with that conv's
    epilogue (bias as int32, relu, requantization): the kernels store int8 (out_zp). The
    output matches the graph without those rewrites within a quantization step of rounding
    (the rescale m / s rounded once, the bias in int32 units of x_scale * w_scale), and float32."""
    import importlib

    cq = importlib.import_module("compiler.quantize")  # the module (compiler.quantize is its function)

    w1 = (RNG.standard_normal((16, 3, 3, 3)) / 5).astype(np.float32)
    b1 = (RNG.standard_normal(16) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
    b2 = (RNG.standard_normal(16) * 0.1).astype(np.float32)
    w3 = (RNG.standard_normal((16 * 3 * 3, 5)) / 10).astype(np.float32)

    def cnn(x):
        h = compiler.ops.relu(compiler.ops.conv2d(x, w1, b1, padding=1))
        h = compiler.ops.max_pool2d(compiler.ops.relu(compiler.ops.conv2d(h, w2, b2, padding=1)), 2)
        return h.reshape(x.shape[0], -1) @ w3

    calib = [(RNG.standard_normal((2, 3, 7, 7)).astype(np.float32),) for _ in range(3)]
    x = RNG.standard_normal((2, 3, 7, 7)).astype(np.float32)
    monkeypatch.setenv("AICC_CACHE", "0")
    q = compiler.quantize(cnn, calib, (x,))
    tensor, loops = q.ir("tensor"), q.ir("loops")
    assert tensor.count("scale = array<f64: 1.000000e+00>") == 2  # both convs requantize
    assert "max[i, j]" in tensor and "tensor<2x3x3x16xi8>" in tensor  # the pool on int8
    if cpu_machine().has_avx2:  # the target CPU (AICC_TARGET_CPU or the host)
        assert loops.count("out_zp = -128") == 2 and loops.count("relu = true") == 2
    from compiler.lowering.quantize_matmul import RequantizeInTheGemm

    for pattern in (cq.QuantizeBeforeLayout, cq.QuantizeBeforeMaxPool, RequantizeInTheGemm):
        monkeypatch.setattr(pattern, "match_and_rewrite", lambda self, op, rewriter: None)
    _matches_unfused(q, compiler.quantize(cnn, calib, (x,)), cnn, x, w3)


def _matches_unfused(q, plain, model, x, w_last):
    """`q`, whose kernels requantize, against `plain`, the same quantization without those
    rewrites: close to it and to float32, within a few quantization steps of the last layer's
    input (one step apart moves an output by s_last * |w_last|)."""
    assert "scale = array<f64: 1.000000e+00>" not in plain.ir("tensor")
    got, want = q(x), plain(x)
    assert _cos(got, want) >= 0.9999 and _cos(got, model(x)) >= 0.99
    s_last = np.float32(q.quantization.layers[-1].act_scale)
    np.testing.assert_allclose(got, want, atol=4 * s_last * np.abs(w_last).max())



@pytest.mark.parametrize("relu", ["np.maximum", "ops.relu"])
def test_quantized_mlp_requantizes_in_the_gemm_kernels(monkeypatch, relu):
    """A NumPy MLP's hidden layers (bias and relu, written np.maximum(h, 0.0) or ops.relu)
    requantize in the GEMM kernel as the convs do: quantize-matmul's RequantizeInTheGemm
    fuses each next layer's quantize with the matmul's epilogue, so the hidden int8 GEMMs
    store int8 (out_zp), not int32 for a loop after them. Odd sizes (batch 7, 129 and 33
    features); the output matches the unfused graph within a few quantization steps of the
    last layer's input, and float32."""
    from compiler.lowering.quantize_matmul import RequantizeInTheGemm

    act = (lambda h: np.maximum(h, 0.0)) if relu == "np.maximum" else compiler.ops.relu
    rng = np.random.default_rng(0)  # its own draws, whatever ran before it in this process
    w1, w2, w3 = ((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for s in ((129, 33), (33, 40), (40, 5)))
    b1, b2 = (rng.standard_normal(33) * 0.1).astype(np.float32), (rng.standard_normal(40) * 0.1).astype(np.float32)

    def mlp(x):
        return act(act(x @ w1 + b1) @ w2 + b2) @ w3

    calib = [(rng.standard_normal((7, 129)).astype(np.float32),) for _ in range(3)]
    x = rng.standard_normal((7, 129)).astype(np.float32)
    monkeypatch.setenv("AICC_CACHE", "0")
    q = compiler.quantize(mlp, calib, (x,))
    assert q.ir("tensor").count("scale = array<f64: 1.000000e+00>") == 2
    if cpu_machine().has_avx2:
        loops = q.ir("loops")
        assert loops.count("aicc_cpu.qgemm") == 3 and loops.count("relu = true") == 2
        assert loops.count("out_zp = ") == 2
    monkeypatch.setattr(RequantizeInTheGemm, "match_and_rewrite", lambda self, op, rewriter: None)
    _matches_unfused(q, compiler.quantize(mlp, calib, (x,)), mlp, x, w3)


@pytest.mark.parametrize("batch,reduce_range", [(1, False), (3, False), (3, True)], ids=["b1", "b3", "b3_7bit"])
def test_quantized_convs_keep_nhwc_and_match_fake_quantization(batch, reduce_range, monkeypatch):
    """Consecutive int8 convs pass NHWC activations on: the bias add, relu, pads and pools
    between them run in NHWC and only the model's input and the flatten at the end transpose;
    a conv's zero padding comes after its quantize, as the zero point in int8.
    The result is the float model with each conv's input and weight fake-quantized by the
    report's parameters (odd shapes: 7 input channels, 129 channels, a non-square image, a
    padded max pool and an average pool). With `reduce_range` the weights are 7-bit, which an
    AVX2 CPU without VNNI (x86-64-v3, forced) multiplies with vpmaddubsw."""
    from compiler.lowering.dynamic_quantize import symmetric_weights

    if reduce_range:
        monkeypatch.setenv("AICC_TARGET_CPU", "x86-64-v3")
        monkeypatch.setenv("AICC_CACHE", "0")

    w1 = (RNG.standard_normal((129, 7, 3, 3)) / 8).astype(np.float32)
    b1 = (RNG.standard_normal(129) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((5, 129, 3, 2)) / 30).astype(np.float32)
    w3 = (RNG.standard_normal((5 * 2 * 1, 4)) / 5).astype(np.float32)

    def cnn(x, conv=compiler.ops.conv2d, mm=np.matmul):
        h = compiler.ops.relu(conv(x, w1, b1, padding=1))
        h = compiler.ops.max_pool2d(h, 3, stride=2, padding=1)
        h = compiler.ops.avg_pool2d(compiler.ops.relu(conv(h, w2, stride=(1, 2))), 2)
        return mm(h.reshape(x.shape[0], -1), w3)

    shape = (batch, 7, 11, 14)
    calib = [(RNG.standard_normal(shape).astype(np.float32),) for _ in range(3)]
    x = RNG.standard_normal(shape).astype(np.float32)
    q = compiler.quantize(cnn, calib, (x,), reduce_range=reduce_range)
    assert ("pmaddubsw" in q.ir("loops")) == reduce_range
    assert q.stats["tensor_ops"]["aicc.transpose"] == 2
    pads = [line for line in q.ir("tensor").splitlines() if "aicc.pad" in line]
    assert len(pads) == 2 and "xi8>" in pads[0] and "xf32>" in pads[1]  # the conv's zero padding, the pool's -inf
    layers = iter(q.quantization.layers)

    def fake(x, w, axis):
        layer = next(layers)
        s, zp = np.float32(layer.act_scale), layer.act_zero_point
        xq = (np_quantize(x, s, zp).astype(np.float64) - zp) * s
        qw, ws = symmetric_weights(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1), True, 0,
                                   63 if reduce_range else 127)
        return xq, np.moveaxis((qw * ws[:, None]).reshape(np.moveaxis(w, axis, 0).shape), 0, axis)

    def conv(x, w, b=None, **kw):
        xq, wq = fake(x, w, 0)
        return compiler.ops.conv2d(xq, wq, b, **kw)

    def mm(x, w):
        xq, wq = fake(x, w, 1)
        return xq @ wq

    want = cnn(x, conv, mm)
    got = q(x)
    assert _cos(got, want) >= 0.99999
    # The reference quantizes float64 values, the model float32 ones: a value within rounding
    # of a step's midpoint may land one step apart (seen after a 1-ulp change of a calibrated
    # scale). Allow two such steps of the last layer's input, each moving an output by at most
    # its scale times the largest weight.
    s_last = np.float32(q.quantization.layers[-1].act_scale)
    np.testing.assert_allclose(got, want, atol=max(1e-3 * np.abs(want).max(), 2 * s_last * np.abs(w3).max()))


@pytest.mark.parametrize("per_channel", [False, True])
def test_onnx_qdq_model_from_quantize_static(tmp_path, per_channel):
    """A QDQ model written by onnxruntime.quantization.quantize_static (uint8 activations,
    int8 weights, int32 biases) imports, runs its Gemms as int8 matmuls, and matches ONNX
    Runtime executing the QDQ graph as written (graph optimizations off): ONNX Runtime's own
    fused int8 kernels round differently (on this model they are further from float32 than
    the graph's own semantics, see the closing check)."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 10)).eval()
    f32, q8 = tmp_path / "m.onnx", tmp_path / "q.onnx"
    torch.onnx.export(model, (torch.randn(16, 64),), str(f32), dynamo=False, opset_version=17, input_names=["x"])
    batches = [{"x": RNG.standard_normal((16, 64)).astype(np.float32)} for _ in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(batches)

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(f32), str(q8), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    m = compiler.compile(str(q8), example_inputs=(x,))
    assert m.ir("tensor").count("aicc.matmul_integer") == 2
    out = m(x)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    as_written = ort.InferenceSession(str(q8), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    step = 0.05 * np.abs(as_written).max()  # a requantization step or two of the output
    np.testing.assert_allclose(out, as_written, atol=step)
    assert _cos(out, as_written) >= 0.999
    float_out = model(torch.tensor(x)).detach().numpy()
    assert _cos(out, float_out) >= 0.99


def _qdq_resnet(tmp_path, shape, activations, per_channel, reduce_range, depthwise):
    """A small ResNet-style CNN from torch (3x3 convs with bias and padding, relus, a padded
    3x3 max pool of stride 2 as ResNet's stem has, a residual add, a stride-2 conv, global
    average pooling, a linear head), exported to ONNX and quantized by quantize_static (QDQ) on
    4 random batches. Returns (path, model proto, an input)."""
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
            self.c3 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16 if depthwise else 1)
            self.c4 = torch.nn.Conv2d(16, 24, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(24, 10)

        def forward(self, x):
            h = torch.relu(self.c1(x))
            h = torch.nn.functional.max_pool2d(h, 3, 2, padding=1) if min(h.shape[-2:]) >= 2 else h
            r = torch.relu(self.c2(h))
            h = torch.relu(self.c3(r) + h)
            h = torch.relu(self.c4(h))
            return self.fc(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))

    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    f32, q8 = tmp_path / "f.onnx", tmp_path / "q.onnx"
    x = rng.standard_normal(shape).astype(np.float32)
    torch.onnx.export(Net().eval(), (torch.from_numpy(x),), str(f32), dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    quantize_static(str(f32), str(q8), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=getattr(QuantType, activations), weight_type=QuantType.QInt8,
                    reduce_range=reduce_range)
    return q8, onnx.load(str(q8)), x


QDQ_CNN_CASES = [  # (input shape, activations, weights per channel, 7-bit weights, depthwise)
    ((2, 3, 14, 13), "QUInt8", True, True, False),
    ((1, 3, 7, 7), "QInt8", True, True, True),
    ((3, 3, 1, 1), "QUInt8", False, True, False),
    ((2, 3, 13, 7), "QUInt8", True, False, False),
    ((1, 3, 7, 13), "QInt8", False, False, True),
]


@pytest.mark.parametrize("shape,activations,per_channel,reduce_range,depthwise", QDQ_CNN_CASES)
def test_qdq_cnn_runs_in_int8_like_onnxruntime(tmp_path, shape, activations, per_channel, reduce_range, depthwise):
    """The QDQ convs of quantize_static's ResNet-style CNN run in int8 (quantize-matmul: NHWC
    im2col matmuls, a depthwise conv as exact float32 sums of integers) with ONNX Runtime's
    requantization, int8 NHWC activations between them (the input's transpose is the only
    one left), the max pool on int8 values. With 7-bit weights ONNX Runtime's int8 kernels compute exact sums, and its
    output is aicc's, value for value; with 8-bit weights its AVX2 u8 x s8 kernel may saturate
    int16 pair sums, so there aicc's output is checked against ONNX Runtime running the QDQ
    graph as written (float32 convs between the quantize / dequantize pairs): at most one
    output step apart (aicc's sums are exact, ONNX Runtime's float32 ones are not always)."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import numpy_helper

    path, model, x = _qdq_resnet(tmp_path, shape, activations, per_channel, reduce_range, depthwise)
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 4
    m = compiler.compile(str(path), example_inputs=(x,))
    ops = m.stats["tensor_ops"]
    assert m.stats["quantized_ops"] == 5  # 4 convs and the Gemm
    assert ops["aicc.matmul_integer"] == (4 if depthwise else 5)
    assert ops.get("aicc.conv2d", 0) == (1 if depthwise else 0)
    # the input's; with the depthwise conv (NCHW) its input's, and the residual add's two
    assert ops.get("aicc.transpose", 0) == (4 if depthwise else 1)
    pools = [line for line in m.ir("tensor").splitlines() if "max[i, j]" in line]
    assert len(pools) == (1 if min(shape[2:]) >= 2 else 0) and all("xi8>) -> tensor<" in p for p in pools)  # int8
    y_scale = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "y_scale"))
    got = m(x)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    fused = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    as_written = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    steps = np.abs(got - (fused if reduce_range else as_written)) / y_scale
    assert steps.max() <= 1.001 and np.mean(steps > 0.5) <= 0.02, steps.max()
    if reduce_range:
        assert _cos(got, fused) >= 0.999
    assert _cos(got, fused) >= 0.99


def qdq_conv_relu_model(seed: int, unsigned: bool, kernel: tuple[int, int], x_shape: tuple,
                        out_hw: tuple[int, int], **conv_attrs):
    """A hand-written QDQ graph: x quantized and dequantized, a Conv of 129 output channels
    (int8 weight per channel, int32 bias), Relu, then QuantizeLinear / DequantizeLinear of the
    output (u8 or s8 activations). Returns (the checked model, an input x, the output scale)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    zdt = np.uint8 if unsigned else np.int8
    w = rng.integers(-127, 128, (129, x_shape[1], *kernel)).astype(np.int8)
    w_scale = rng.uniform(0.002, 0.01, 129).astype(np.float32)
    x_scale, y_scale = np.float32(0.03), np.float32(0.02)
    x_zp, y_zp = (np.array(128 if unsigned else 3, zdt), np.array(7 if unsigned else -9, zdt))
    bias = rng.integers(-2000, 2000, 129).astype(np.int32)
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (w, "w_q"), (w_scale, "w_scale"), (np.zeros(129, np.int8), "w_zp"), (x_scale, "x_scale"), (x_zp, "x_zp"),
        (y_scale, "y_scale"), (y_zp, "y_zp"), (bias, "b_q"), (x_scale * w_scale, "b_scale"),
        (np.zeros(129, np.int32), "b_zp")]]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["wd"], axis=0),
        helper.make_node("DequantizeLinear", ["b_q", "b_scale", "b_zp"], ["bd"], axis=0),
        helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], **conv_attrs),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "y_scale", "y_zp"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"]),
    ]
    y_shape = [x_shape[0], 129, *out_hw]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, (rng.standard_normal(x_shape) * 2).astype(np.float32), y_scale


@pytest.mark.parametrize("unsigned", [True, False])
def test_qdq_conv_relu_quantize_by_hand(unsigned):
    """A hand-written QDQ graph whose Relu stays between the Conv and the QuantizeLinear (and
    a stride-2, padded, non-square conv of 129 output channels on a 7x13 image): the kernel's
    requantization applies the relu before rounding; against ONNX Runtime running the graph
    as written (float32 conv, relu, quantize), at most one output step apart."""
    ort = pytest.importorskip("onnxruntime")
    model, x, y_scale = qdq_conv_relu_model(5, unsigned, (3, 2), (2, 5, 7, 13), (4, 7),
                                            strides=[2, 2], pads=[1, 0, 1, 1])
    m = compiler.compile(model, example_inputs=(x,))
    assert m.stats["quantized_ops"] == 1 and "aicc.conv2d" not in m.stats["tensor_ops"]
    assert "relu = true" in m.ir("loops") and "out_zp" in m.ir("loops")  # requantized in the kernel
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = m(x)
    steps = np.abs(got - want) / y_scale
    assert steps.max() <= 1.001 and np.mean(steps > 0.5) <= 0.01
    assert np.mean(got == want) > 0.99 and got.min() == 0.0 and np.mean(got == 0.0) > 0.2  # the relu clamps at 0
    assert _cos(got, want) >= 0.9999


def test_qdq_cnn_on_the_cuda_emulator(tmp_path):
    """The same int8 graph (NHWC im2col matmuls, requantization, the int8 max pool) on the
    CUDA target's kernels, run by the emulator: ONNX Runtime's int8 output (7-bit weights: its
    sums are exact; on this machine value for value)."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import numpy_helper

    path, model, x = _qdq_resnet(tmp_path, (1, 3, 7, 7), "QUInt8", True, True, False)
    m = compiler.compile(str(path), example_inputs=(x,), target="cuda-emu")
    assert m.stats["quantized_ops"] == 5
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    y_scale = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "y_scale"))
    steps = np.abs(m(x) - want) / y_scale  # ONNX Runtime's QLinearAdd may round one step apart on some CPUs
    assert steps.max() <= 1.001 and np.mean(steps > 0.5) <= 0.02, steps.max()
