"""Transposing elementwise ops are tiled on the CPU (linalg-to-loops{transpose-tile=64}):
results against NumPy for shapes that are and are not multiples of the tile, and 3-D
permutations. Below 32 KiB an operand stays in cache and the loops are not tiled.
"""

import numpy as np
import pytest

import compiler


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


CASES = [
    ("transpose", lambda x: x.T * 2.0, [(200, 130)]),
    ("transpose_add", lambda x, y: x.T + y, [(256, 192), (192, 256)]),
    ("transpose_square", lambda x: np.exp(x.T), [(128, 128)]),
    ("permute_3d", lambda x: np.transpose(x, (2, 0, 1)) + 1.0, [(30, 50, 70)]),
    ("permute_3d_inner", lambda x: np.transpose(x, (0, 2, 1)), [(3, 100, 90)]),
    ("broadcast_transpose", lambda x, b: x.T * b, [(300, 65), (300,)]),
]


@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_tiled_transposes_match_numpy(name, fn, shapes):
    inputs = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    m = compiler.compile(fn, inputs, threads=1)
    np.testing.assert_allclose(m(*inputs), fn(*inputs), rtol=1e-6, atol=1e-6)
    assert "arith.minsi" in m.ir("loops") or all(
        d % 64 == 0 for s in shapes for d in s), "expected tiled loops with edge blocks"


def test_small_transpose_is_not_tiled():
    x = rand(20, 30)
    m = compiler.compile(lambda x: x.T * 2.0, (x,))
    np.testing.assert_allclose(m(x), x.T * 2.0)
    assert "scf.for" not in m.ir("loops")


def test_cuda_pipeline_does_not_tile_transposes():
    x = rand(200, 130)
    m = compiler.compile(lambda x: x.T * 2.0, (x,), target="cuda")
    assert "scf.for" not in m.ir("loops")
