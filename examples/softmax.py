"""Numerically stable softmax over rows, in NumPy."""

import numpy as np


def model(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


example_inputs = (np.random.default_rng(0).standard_normal((256, 1000)).astype(np.float32),)
