"""collapse-dims end to end: elementwise ops on odd shapes and broadcasts, compiled for the
CPU, against NumPy in float64; each case also checks the loop nest the pass left (how many
dims the op's scf.parallel has), so none passes without the pass having fired.

Tolerance: RTOL = ATOL = 2e-6 relative to max(1, max |ref|): float32 exp/tanh, a few ulps.
The collapsed loop computes each element with the same operations as before, so the result
also equals the uncollapsed pipeline's bit for bit (checked with the pass switched off).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.parser import Parser

import compiler
from compiler import ops
from compiler.lowering.pipeline import make_context
from compiler.pipeline import compile_module

TOL = 2e-6
rng = np.random.default_rng(5)


def randn(*shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


# (name, function, NumPy float64 reference, input shapes, dims of the op's loop nest after)
CASES = [
    ("silu_nchw", lambda x: x * ops.sigmoid(x), lambda x: x * sigmoid64(x),
     [(1, 96, 28, 28)], 1),
    ("silu_odd", lambda x: x * ops.sigmoid(x), lambda x: x * sigmoid64(x), [(7, 1, 129)], 1),
    ("tanh_3d", np.tanh, lambda x: np.tanh(x.astype(np.float64)), [(8, 197, 3)], 1),
    # all dims of range 1: no loop at all, one element computed straight
    ("one_element", lambda x: np.exp(x), lambda x: np.exp(x.astype(np.float64)), [(1, 1, 1)], 0),
    # per-channel scale: the batch dim drops, H and W merge, the channel dim stays
    ("channel_broadcast", lambda x, s: ops.sigmoid(x * s) + x,
     lambda x, s: sigmoid64(x.astype(np.float64) * s) + x, [(1, 7, 9, 13), (7, 1, 1)], 2),
    # a row vector broadcast over rows: rows and columns stay apart
    ("row_broadcast", lambda x, b: np.tanh(x + b), lambda x, b: np.tanh(x.astype(np.float64) + b),
     [(129, 7), (7,)], 2),
    # broadcast over the middle dim of three: nothing merges (the batch of 2 stays)
    ("middle_broadcast", lambda x, b: x * b, lambda x, b: x.astype(np.float64) * b,
     [(2, 5, 33), (2, 1, 33)], 3),
]


def par_dims(loops_ir: str) -> list[int]:
    """The number of induction variables of each scf.parallel in the loops IR."""
    return [len(m.group(1).split(",")) for m in re.finditer(r"\^bb\d+\(([^)]*)\):", loops_ir)
            if "index" in m.group(1)]


@pytest.mark.parametrize("name,fn,ref,shapes,dims", CASES, ids=[c[0] for c in CASES])
def test_collapsed_elementwise_matches_numpy(name, fn, ref, shapes, dims, monkeypatch):
    args = tuple(randn(*s) for s in shapes)
    m = compiler.compile(fn, args, threads=1)
    loops = m.ir("loops")
    assert par_dims(loops) == ([dims] if dims else []), loops
    out = m(*args)
    expect = ref(*args)
    assert out.shape == expect.shape
    assert np.max(np.abs(out - expect)) <= TOL * max(1.0, float(np.max(np.abs(expect))))
    monkeypatch.setenv("AICC_COLLAPSE", "0")
    plain = compiler.compile(fn, args, threads=1)
    assert par_dims(plain.ir("loops")) == ([len(shapes[0])] if dims < len(shapes[0]) else [dims])
    np.testing.assert_array_equal(plain(*args), out)


def test_dynamic_dim_merges():
    """A dynamic batch merges with the static dim after it ((?, 7, 9) times a (1, 9) row: a
    (?*7, 9) nest), its size the product at run time; every batch size matches NumPy."""
    src = """
func.func @f(%x: tensor<?x7x9xf32, "n">, %b: tensor<1x9xf32>) -> tensor<?x7x9xf32, "n"> {
  %0 = aicc.exp %x : tensor<?x7x9xf32, "n">
  %1 = aicc.mul %0, %b : tensor<?x7x9xf32, "n">, tensor<1x9xf32> -> tensor<?x7x9xf32, "n">
  func.return %1 : tensor<?x7x9xf32, "n">
}"""
    m = compile_module(Parser(make_context(), src).parse_module(), "f", use_cache=False)
    loops = m.ir("loops")
    assert "memref<?x7x9xf32> into memref<?x9xf32>" in loops and par_dims(loops) == [2], loops
    b = randn(1, 9)
    for n in (1, 3, 17):
        x = randn(n, 7, 9)
        expect = np.exp(x.astype(np.float64)) * b
        assert np.max(np.abs(m(x, b) - expect)) <= TOL * max(1.0, float(np.max(np.abs(expect))))


def test_threads_split_the_collapsed_loop():
    """Two threads over the one merged dim give the one-thread result."""
    x = randn(3, 50, 41)
    one = compiler.compile(lambda x: x * ops.sigmoid(x), (x,), threads=1)
    two = compiler.compile(lambda x: x * ops.sigmoid(x), (x,), threads=2)
    np.testing.assert_array_equal(one(x), two(x))
