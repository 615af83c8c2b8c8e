"""Single-head scaled dot-product attention, in NumPy (uses compiler.ops.softmax)."""

import numpy as np

from compiler import ops

rng = np.random.default_rng(0)
SEQ, D = 128, 64


def model(q, k, v):
    scores = q @ k.T / np.sqrt(np.float32(D))
    return ops.softmax(scores, axis=-1) @ v


def example_inputs():
    return tuple(rng.standard_normal((SEQ, D)).astype(np.float32) for _ in range(3))
