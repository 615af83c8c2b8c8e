"""Weights of 64 KiB or more stay out of the LLVM IR text (external globals bound at load time),
and stage IR is printed only when asked for: what keeps VGG-sized models compiling in seconds."""

import numpy as np

import compiler
from compiler.codegen.llvm import EXTERNAL_DATA_MIN_BYTES


def _model(w):
    def f(x):
        return np.maximum(x @ w, 0.0) + w[0]
    return f


def test_large_weight_is_external_and_correct():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 129)).astype(np.float32)  # 132 KiB
    assert w.nbytes >= EXTERNAL_DATA_MIN_BYTES
    x = rng.standard_normal((7, 256)).astype(np.float32)
    m = compiler.compile(_model(w), (x,))
    np.testing.assert_allclose(m(x), np.maximum(x @ w, 0) + w[0], rtol=1e-5, atol=1e-4)
    llvm_ir = m.ir("llvm")
    assert "external constant" in llvm_ir
    assert len(llvm_ir) < w.nbytes  # the bytes are not spelled out


def test_two_models_with_same_global_names_keep_their_own_weights():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    ws = [rng.standard_normal((256, 70)).astype(np.float32) for _ in range(2)]
    ms = [compiler.compile(_model(w), (x,)) for w in ws]
    for m, w in zip(ms, ws):
        np.testing.assert_allclose(m(x), np.maximum(x @ w, 0) + w[0], rtol=1e-5, atol=1e-4)


def test_small_weight_stays_inline():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = np.ones((2, 3), np.float32)
    m = compiler.compile(_model(w), (x,))
    np.testing.assert_allclose(m(x), np.maximum(x @ w, 0) + w[0])
    assert "external constant" not in m.ir("llvm")
