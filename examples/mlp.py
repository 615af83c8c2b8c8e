"""A two-layer MLP in plain NumPy: `aicc examples/mlp.py --target cpu`."""

import numpy as np

rng = np.random.default_rng(0)
D_IN, D_HIDDEN, D_OUT, BATCH = 784, 512, 10, 64
w1 = (rng.standard_normal((D_IN, D_HIDDEN)) / np.sqrt(D_IN)).astype(np.float32)
b1 = (0.1 * rng.standard_normal(D_HIDDEN)).astype(np.float32)
w2 = (rng.standard_normal((D_HIDDEN, D_OUT)) / np.sqrt(D_HIDDEN)).astype(np.float32)
b2 = (0.1 * rng.standard_normal(D_OUT)).astype(np.float32)


def model(x):
    h = np.maximum(x @ w1 + b1, 0.0)
    return h @ w2 + b2


def example_inputs():
    return (rng.standard_normal((BATCH, D_IN)).astype(np.float32),)
