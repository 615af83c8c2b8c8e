"""Property test: random small NumPy-style programs (elementwise math with broadcasting,
reductions, softmax, matmul, reshape, transpose, strided slices, concat, where, conv2d and
pooling), traced, compiled for the CPU and compared with the reference interpreter
(compiler/reference.py) on the traced IR. Shapes are drawn from {1, 2, 3, 5, 7}, so 1 and odd
sizes and broadcasts are the norm.

CI runs AICC_FUZZ_EXAMPLES examples (default 40); a long run:
    AICC_FUZZ_EXAMPLES=2000 python -m pytest -q -p no:xdist tests/fuzz
A failure prints the program (hypothesis shrinks it) and, for a pass bug, the reproducer that
InternalError names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from compiler import ops
from compiler.pipeline import CompileOptions, compile_module
from compiler.reference import run_reference

EXAMPLES = int(os.environ.get("AICC_FUZZ_EXAMPLES", "40"))
DIMS = (1, 2, 3, 5, 7)

UNARY = {
    "tanh": np.tanh, "sigmoid": ops.sigmoid, "relu": ops.relu, "abs": np.abs, "neg": np.negative,
    "sin": np.sin, "gelu": ops.gelu, "exp_tanh": lambda x: np.exp(np.tanh(x)),
    "sqrt_abs": lambda x: np.sqrt(np.abs(x) + 0.1), "log_abs": lambda x: np.log(np.abs(x) + 1.0),
    "square": lambda x: x * x, "floor": np.floor, "clip": lambda x: np.clip(x, -0.5, 0.7),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "div": lambda a, b: a / (np.abs(b) + 1.0), "where": lambda a, b: np.where(a > b, a, b * 0.5),
}


@dataclass(frozen=True)
class Step:
    kind: str
    args: tuple[int, ...]  # indices into the values so far
    param: object = None

    def __repr__(self):
        return f"{self.kind}{self.args}" + (f"[{self.param!r}]" if self.param is not None else "")


def apply(step: Step, values: list):
    a = values[step.args[0]]
    p = step.param
    k = step.kind
    if k in UNARY:
        return UNARY[k](a)
    if k in BINARY:
        return BINARY[k](a, values[step.args[1]])
    if k == "reduce":
        fn, axis, keep = p
        return {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[fn](a, axis=axis, keepdims=keep)
    if k == "softmax":
        return ops.softmax(a, axis=p)
    if k == "matmul":
        return a @ np.asarray(p, np.float32)
    if k == "matmul2":
        return a @ values[step.args[1]]
    if k == "transpose":
        return np.transpose(a, p)
    if k == "reshape":
        return a.reshape(p)
    if k == "slice":
        return a[p]
    if k == "concat":
        return np.concatenate([a, values[step.args[1]]], axis=p)
    if k == "newaxis":
        return a[None]
    if k == "conv":
        w, stride, pad, groups = p
        return ops.conv2d(a, np.asarray(w, np.float32), stride=stride, padding=pad, groups=groups)
    if k == "pool":
        kind, size, stride = p
        return (ops.max_pool2d if kind == "max" else ops.avg_pool2d)(a, size, stride)
    raise AssertionError(k)


def _factorizations(n: int) -> list[tuple[int, ...]]:
    out = [(n,), (1, n), (n, 1)]
    out += [(d, n // d) for d in range(2, n) if n % d == 0]
    return out


@st.composite
def programs(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    n_inputs = draw(st.integers(1, 2))
    shapes = [tuple(draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=4))) for _ in range(n_inputs)]
    if draw(st.booleans()):  # an image-like input for conv / pool
        shapes[0] = (draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 2, 3))),
                     draw(st.sampled_from((5, 7, 8))), draw(st.sampled_from((5, 7))))
    values = [np.zeros(s, np.float32) for s in shapes]
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 7))):
        i = draw(st.integers(0, len(values) - 1))
        a = values[i]
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "softmax", "matmul", "transpose",
                                     "reshape", "slice", "concat", "newaxis", "conv", "pool"]))
        step = None
        if kind == "unary":
            step = Step(draw(st.sampled_from(sorted(UNARY))), (i,))
        elif kind == "binary":
            j = draw(st.integers(0, len(values) - 1))
            try:
                np.broadcast_shapes(a.shape, values[j].shape)
            except ValueError:
                j = i
            step = Step(draw(st.sampled_from(sorted(BINARY))), (i, j) if draw(st.booleans()) else (j, i))
        elif kind == "reduce" and a.ndim:
            axis = draw(st.integers(-a.ndim, a.ndim - 1))
            step = Step("reduce", (i,), (draw(st.sampled_from(["sum", "mean", "max", "min"])), axis, draw(st.booleans())))
        elif kind == "softmax" and a.ndim:
            step = Step("softmax", (i,), draw(st.integers(-a.ndim, a.ndim - 1)))
        elif kind == "matmul" and a.ndim >= 1:
            others = [j for j, v in enumerate(values) if v.ndim >= 2 and v.shape[-2] == a.shape[-1]
                      and (a.ndim < 2 or _batch_ok(a.shape[:-2], v.shape[:-2]))]
            if others and draw(st.booleans()):
                step = Step("matmul2", (i, draw(st.sampled_from(others))))
            else:
                w = rng.standard_normal((a.shape[-1], draw(st.sampled_from(DIMS)))) / np.sqrt(a.shape[-1])
                step = Step("matmul", (i,), w.astype(np.float32))
        elif kind == "transpose" and a.ndim >= 2:
            step = Step("transpose", (i,), tuple(draw(st.permutations(range(a.ndim)))))
        elif kind == "reshape":
            step = Step("reshape", (i,), draw(st.sampled_from(_factorizations(a.size))))
        elif kind == "slice" and a.ndim:
            key = []
            for d in a.shape:
                step = draw(st.sampled_from([1, 1, 2, -1]))
                start = draw(st.integers(0, d - 1))
                stop = draw(st.integers(start + 1, d)) if step > 0 else None
                key.append(slice(start, stop, step))
            step = Step("slice", (i,), tuple(key))
        elif kind == "concat" and a.ndim:
            axis = draw(st.integers(0, a.ndim - 1))
            others = [j for j, v in enumerate(values) if v.ndim == a.ndim
                      and all(x == y for n, (x, y) in enumerate(zip(v.shape, a.shape)) if n != axis)]
            step = Step("concat", (i, draw(st.sampled_from(others))), axis)
        elif kind == "newaxis" and a.ndim < 4:
            step = Step("newaxis", (i,))
        elif kind == "conv" and a.ndim == 4:
            c = a.shape[1]
            groups = c if draw(st.booleans()) else 1
            o = groups * draw(st.integers(1, 2))
            k = draw(st.sampled_from((1, 3)))
            pad = draw(st.integers(0, 1))
            if a.shape[2] + 2 * pad >= k and a.shape[3] + 2 * pad >= k:
                w = rng.standard_normal((o, c // groups, k, k)) / k
                step = Step("conv", (i,), (w.astype(np.float32), draw(st.sampled_from((1, 2))), pad, groups))
        elif kind == "pool" and a.ndim == 4 and min(a.shape[2:]) >= 2:
            step = Step("pool", (i,), (draw(st.sampled_from(("max", "avg"))), 2, draw(st.sampled_from((1, 2)))))
        if step is None:
            continue
        values.append(np.asarray(apply(step, values), np.float32))
        steps.append(step)
    outputs = sorted({len(values) - 1, draw(st.integers(0, len(values) - 1))})
    return shapes, steps, outputs


def _batch_ok(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def build(steps, outputs, n_inputs):
    def program(*inputs):
        values = list(inputs)
        for s in steps:
            values.append(apply(s, values))
        return tuple(values[i] for i in outputs)

    program.__name__ = "fuzz"
    return program


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_program_matches_reference(prog, seed):
    from frontends.numpy_trace import trace

    shapes, steps, outputs = prog
    rng = np.random.default_rng(seed)
    inputs = tuple(rng.standard_normal(s).astype(np.float32) for s in shapes)
    traced = trace(build(steps, outputs, len(shapes)), inputs)
    expected = run_reference(traced.module, inputs, traced.func_name)
    old = os.environ.get("AICC_CACHE")
    os.environ["AICC_CACHE"] = "0"
    try:
        m = compile_module(traced.module.clone(), traced.func_name, output_is_tuple=True,
                           options=CompileOptions("cpu", threads=1))
    finally:
        os.environ.pop("AICC_CACHE") if old is None else os.environ.__setitem__("AICC_CACHE", old)
    got = m(*inputs)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        scale = max(1.0, float(np.abs(e).max(initial=0.0)))
        np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-4 * scale, err_msg=f"steps {steps}")
