"""The graph passes (fold-constants, simplify, fold-conv-bn, fuse-linear-bias, CSE/DCE) and the
statistics, end to end: each model is compiled with the full pipeline and with the pass left
out, and both are compared with NumPy (or onnxruntime). Each test also checks that its pass did
fire, on the tensor-stage IR, so none passes vacuously.

Tolerances: float32 everywhere. A rewrite that only moves data (transposes, reshapes, exact
identities) must give bit-identical results, checked with array_equal. A rewrite that reorders
or rescales arithmetic (weights scaled by the batch norm, bias added first, a constant folded
in float64) must agree with the unoptimized compile to RTOL = 1e-5 / ATOL = 1e-6 relative to the
output's scale, and with NumPy to the tolerances of tests/test_numerics.py (1e-4 / 1e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType, f32
from xdsl.ir import Block, Region
from xdsl.rewriter import InsertPoint

import compiler
from compiler.dialects import aicc, aicc_nn
from compiler.lowering.fold_constants import FoldConstants
from compiler.lowering.fold_conv_bn import FoldConvBatchNorm
from compiler.lowering.fuse_linear_bias import FuseLinearBias
from compiler.lowering.simplify import Simplify
from compiler.pipeline import compile_module

RTOL, ATOL = 1e-5, 1e-6  # optimized vs unoptimized compile (scaled by max |ref|)
NP_RTOL, NP_ATOL = 1e-4, 1e-5  # compiled vs NumPy, as in tests/test_numerics.py

rng = np.random.default_rng(7)


def randn(*shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def without(monkeypatch):
    """without(PassClass): the graph passes of the pipeline minus that one, from now on."""

    def drop(*classes):
        from compiler.lowering import pipeline as shared

        full = shared.shared_stages

        def stages(fuse, hooks):
            return [(stage, [p for p in passes if not isinstance(p, classes)])
                    for stage, passes in full(fuse, hooks)]

        monkeypatch.setattr(shared, "shared_stages", stages)

    return drop


def close(a: np.ndarray, b: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> bool:
    scale = max(1.0, float(np.abs(b).max()))
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= atol * scale + rtol * np.abs(b)))


def build(arg_shapes, body) -> ModuleOp:
    """A module with func @main(args of `arg_shapes`) returning body(insert, args)."""
    types = [TensorType(f32, s) for s in arg_shapes]
    block = Block(arg_types=types)
    b = Builder(InsertPoint.at_end(block))

    def insert(op):
        b.insert(op)
        return op.results[0]

    results = body(insert, block.args)
    b.insert(func.ReturnOp(*results))
    fn = func.FuncOp("main", FunctionType.from_lists(types, [r.type for r in results]), Region(block))
    return ModuleOp([fn])


def const(insert, array):
    return insert(aicc.ConstantOp.from_array(np.asarray(array, np.float32)))


# -- fold-constants ------------------------------------------------------------------------------


def _constant_subgraphs(w, table):
    """x * (sqrt(w) * 2 + exp(-w)) + (tanh(table)^T @ ones)^T: everything but x is constant (the
    NumPy tracer computes such subgraphs eagerly, but importers and rewrites produce them)."""

    def body(insert, a):
        cw = const(insert, w)
        scale = insert(aicc.AddOp(
            insert(aicc.MulOp(insert(aicc.SqrtOp(cw)), const(insert, np.float32(2.0)))),
            insert(aicc.ExpOp(insert(aicc.NegOp(cw)))),
        ))
        t = insert(aicc.TransposeOp(insert(aicc.TanhOp(const(insert, table))), (1, 0)))
        rows = insert(aicc.MatmulOp(t, const(insert, np.ones((table.shape[0], 1)))))
        return [insert(aicc.AddOp(insert(aicc.MulOp(a[0], scale)), insert(aicc.TransposeOp(rows, (1, 0)))))]

    return build([(4, w.shape[0])], body)


def test_fold_constants_matches_unfolded(without):
    w, table = np.abs(randn(16)) + 0.5, randn(8, 16)
    folded = compile_module(_constant_subgraphs(w, table), "main")
    assert folded.stats["tensor_ops"] == {"aicc.add": 1, "aicc.mul": 1}
    without(FoldConstants)
    unfolded = compile_module(_constant_subgraphs(w, table), "main")
    assert unfolded.stats["tensor_ops"]["aicc.sqrt"] == 1
    x = randn(4, 16)
    ref = x * (np.sqrt(w) * 2 + np.exp(-w)) + (np.tanh(table).T @ np.ones((8, 1), np.float32)).T
    assert close(folded(x), unfolded(x))
    assert close(folded(x), ref, NP_RTOL, NP_ATOL)


def test_fold_constants_keeps_a_broadcast_scalar_a_splat():
    def model(x):
        big = np.broadcast_to(np.float32(3.0), (512, 512))
        return x + np.exp(big)  # exp of a 512x512 splat: one element computed and stored

    x = randn(512, 512)
    m = compiler.compile(model, (x,))
    assert "dense<20.0855" in m.ir("tensor") and "tensor<f32>" in m.ir("tensor")
    assert "0x" not in m.ir("tensor")  # no materialized hex blob of 512x512 elements
    assert close(m(x), x + np.exp(np.float32(3.0)), NP_RTOL, NP_ATOL)


# -- simplify ------------------------------------------------------------------------------------


def test_simplify_identities_are_exact(without):
    def model(x, y):
        a = (x * 1.0 + 0.0 - 0.0) / 1.0  # x
        b = -(-a)  # x
        t = np.transpose(np.transpose(b, (1, 2, 0)), (2, 0, 1))  # x
        r = t.reshape(6, 20).reshape(3, 40).reshape(3, 4, 10)  # x, as one reshape chain
        return r / 4.0 + y  # exact: x * 0.25

    x, y = randn(3, 4, 10), randn(10)
    simplified = compiler.compile(model, (x, y))
    assert simplified.stats["tensor_ops"] == {"aicc.add": 1, "aicc.mul": 1}
    without(Simplify)
    plain = compiler.compile(model, (x, y))
    assert "aicc.transpose" in plain.ir("tensor") and "aicc.div" in plain.ir("tensor")
    assert np.array_equal(simplified(x, y), plain(x, y))
    assert np.array_equal(simplified(x, y), model(x, y))


def test_simplify_keeps_nan_and_inf(without):
    def model(x):
        return x - x, x * 0.0  # NaN for Inf and NaN inputs: not folded to 0 without fast-math

    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0], np.float32)
    m = compiler.compile(model, (x,))
    with np.errstate(invalid="ignore"):
        ref = model(x)
    for got, want in zip(m(x), ref):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape, axis", [((7, 129), -1), ((1, 1), -1), ((33, 5, 3), 1),
                                         ((129, 7), 0)], ids=str)
def test_simplify_recognizes_a_numpy_softmax(without, shape, axis):
    """exp(x - max) / sum(exp(x - max)) becomes aicc.softmax and matches NumPy (and the
    unsimplified compile) to float32 rounding, -inf entries, a row of one and entries whose
    exp is below FLT_MIN (flushed to 0: within NP_ATOL) included; the same with the exp
    also returned stays as written."""
    def model(x):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    x = randn(*shape) * 4
    x.flat[0], x.flat[-1] = -np.inf, -100.0  # exp(-100 - max) is a denormal in NumPy
    m = compiler.compile(model, (x,))
    assert m.stats["tensor_ops"] == {"aicc.softmax": 1}
    want = model(x.astype(np.float64))
    assert close(m(x), want, NP_RTOL, NP_ATOL)

    def with_exp(x):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True), e

    assert "aicc.softmax" not in compiler.compile(with_exp, (x,)).ir("tensor")
    without(Simplify)
    plain = compiler.compile(model, (x,))
    assert "aicc.softmax" not in plain.ir("tensor") and close(m(x), plain(x), RTOL, ATOL)


def test_simplify_folds_transposes_into_matmul(without):
    def model(a, b, w):
        # a^T @ b and x @ w^T (torch's linear weight layout), batched
        return a.transpose(0, 2, 1) @ b, b.transpose(0, 2, 1) @ w.T

    a, b, w = randn(2, 7, 5), randn(2, 7, 9), randn(3, 7)
    folded = compiler.compile(model, (a, b, w))
    tensor_ir = folded.ir("tensor")
    assert "aicc.transpose" not in tensor_ir
    assert "{transpose_lhs}" in tensor_ir and "{transpose_lhs, transpose_rhs}" in tensor_ir
    # the transposes are read through swapped maps, never materialized
    assert "tensor<2x5x7xf32>" not in folded.ir("linalg") and "tensor<7x3xf32>" not in folded.ir("linalg")
    without(Simplify)
    plain = compiler.compile(model, (a, b, w))
    assert "aicc.transpose" in plain.ir("tensor")
    for got, unopt, ref in zip(folded(a, b, w), plain(a, b, w), model(a, b, w)):
        assert close(got, unopt)
        assert close(got, ref, NP_RTOL, NP_ATOL)


def test_transposed_matmul_on_large_shapes():
    """The transposed-operand maps with the CPU loop order and threads, at a size that uses them."""
    a, b = randn(96, 130), randn(70, 96)

    def model(a, b):
        return a.T @ b.T

    m = compiler.compile(model, (a, b))
    assert "{transpose_lhs, transpose_rhs}" in m.ir("tensor")
    assert close(m(a, b), model(a, b), NP_RTOL, NP_ATOL)


# -- fold-conv-bn --------------------------------------------------------------------------------


def _conv_bn_module(x_shape, w, bias, scale, shift, groups=1):
    def body(insert, args):
        y = insert(aicc_nn.Conv2dOp(args[0], const(insert, w), groups=groups))
        y = insert(aicc.AddOp(y, const(insert, bias.reshape(-1, 1, 1))))
        y = insert(aicc.MulOp(y, const(insert, scale.reshape(1, -1, 1, 1))))
        y = insert(aicc.AddOp(y, const(insert, shift.reshape(-1, 1, 1))))
        return [insert(aicc.ReluOp(y))]

    return build([x_shape], body)


@pytest.mark.parametrize("groups", [1, 4])
def test_fold_conv_bn_matches_unfolded(without, groups):
    oc, ic = 8, 4
    w = randn(oc, ic // groups, 3, 3)
    bias, scale, shift = randn(oc), randn(oc), randn(oc)
    x = randn(2, ic, 9, 9)
    folded = compile_module(_conv_bn_module(x.shape, w, bias, scale, shift, groups), "main")
    assert folded.stats["tensor_ops"] == {"aicc.add": 1, "aicc.conv2d": 1, "aicc.relu": 1}
    without(FoldConvBatchNorm)
    plain = compile_module(_conv_bn_module(x.shape, w, bias, scale, shift, groups), "main")
    assert plain.stats["tensor_ops"]["aicc.mul"] == 1
    from compiler.reference import run_reference

    (ref,) = run_reference(_conv_bn_module(x.shape, w, bias, scale, shift, groups), [x])
    assert close(folded(x), plain(x))
    assert close(folded(x), ref, NP_RTOL, NP_ATOL)


def test_fold_conv_bn_on_an_onnx_model():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    oc, ic = 6, 3
    inits = {
        "W": randn(oc, ic, 3, 3), "B": randn(oc),
        "scale": randn(oc), "bias": randn(oc), "mean": randn(oc), "var": np.abs(randn(oc)) + 0.1,
    }
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-3),
            helper.make_node("Relu", ["bn"], ["y"]),
        ],
        "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ic, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, 8, 8])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = randn(1, ic, 8, 8)
    m = compiler.compile(model, (x,))
    # conv + bias + batch norm: one conv2d with folded weights and one bias add
    assert m.stats["tensor_ops"] == {"aicc.add": 1, "aicc.conv2d": 1, "aicc.pad": 1, "aicc.relu": 1}
    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert close(m(x), ref, NP_RTOL, NP_ATOL)


# -- fuse-linear-bias ----------------------------------------------------------------------------


def test_fuse_linear_bias_matches_unfused(without):
    w1, b1, w2, b2, w3 = randn(33, 65), randn(65), randn(17, 65), randn(17), randn(33, 65)

    def model(x, r):
        h = np.maximum(x @ w1 + b1, 0.0)  # linear + bias
        return b2 + h @ w2.T, x @ w3 + r  # bias first, a transposed weight; a full residual

    x, r = randn(9, 33), randn(9, 65)
    fused = compiler.compile(model, (x, r))
    assert fused.ir("tensor").count(" bias %") == 3
    assert "aicc.add" not in fused.ir("tensor")
    # linalg: the bias initializes the accumulator, no zero fill
    assert "linalg.fill" not in fused.ir("linalg")
    without(FuseLinearBias)
    plain = compiler.compile(model, (x, r))
    assert " bias %" not in plain.ir("tensor")
    for got, unopt, ref in zip(fused(x, r), plain(x, r), model(x, r)):
        assert close(got, unopt)
        assert close(got, ref, NP_RTOL, NP_ATOL)
    # 2*M*N*K per matmul and the relu; the bias adds are gone from the flop count
    assert fused.stats["flops"] == 2 * (2 * 9 * 65 * 33) + 2 * 9 * 17 * 65 + 9 * 65
    assert plain.stats["flops"] == fused.stats["flops"] + 9 * 65 + 9 * 17 + 9 * 65


def test_fuse_linear_bias_never_duplicates_a_shared_matmul():
    w, b = randn(8, 16), randn(16)

    def model(x, r):
        return x @ w + b, x @ w + r  # one matmul (after CSE) with two adds: neither is its bias

    x, r = randn(4, 8), randn(4, 16)
    m = compiler.compile(model, (x, r))
    assert m.stats["tensor_ops"] == {"aicc.add": 2, "aicc.matmul": 1}
    assert m.stats["flops"] == 2 * 4 * 16 * 8 + 2 * 4 * 16
    for got, ref in zip(m(x, r), model(x, r)):
        assert close(got, ref, NP_RTOL, NP_ATOL)


# -- CSE and DCE ---------------------------------------------------------------------------------


def test_every_aicc_op_is_pure():
    """CSE and DCE apply to an op only with the Pure trait (no memory effects)."""
    from xdsl.traits import Pure

    ops = list(aicc.AICC.operations)
    assert len(ops) >= 37  # the aicc ops and aicc_nn's
    assert all(op.has_trait(Pure) for op in ops), [
        op.name for op in aicc.AICC.operations if not op.has_trait(Pure)
    ]


def test_cse_merges_and_dce_drops():
    def model(x, w):
        unused = np.exp(x @ w)  # dead: never returned  # noqa: F841
        return np.exp(x) @ w + np.exp(x) @ w

    x, w = randn(5, 6), randn(6, 7)
    m = compiler.compile(model, (x, w))
    assert m.stats["tensor_ops"] == {"aicc.add": 1, "aicc.exp": 1, "aicc.matmul": 1}
    assert close(m(x, w), model(x, w), NP_RTOL, NP_ATOL)


# -- statistics ----------------------------------------------------------------------------------


def _gelu_linear(shape):
    """gelu(x * w + b) as aicc ops: mul, add, gelu."""
    return build([shape, shape[-1:], shape[-1:]], lambda insert, a: [
        insert(aicc.GeluOp(insert(aicc.AddOp(insert(aicc.MulOp(a[0], a[1])), a[2]))))
    ])


def test_stats_fused_and_unfused():
    from compiler.pipeline import CompileOptions
    from compiler.reference import run_reference

    shape = (32, 48)
    fused = compile_module(_gelu_linear(shape), "main")
    unfused = compile_module(_gelu_linear(shape), "main", options=CompileOptions(fuse=False))
    assert fused.stats["kernels"] == 1 and fused.stats["kernel_ops"] == {"linalg.generic": 1}
    assert unfused.stats["kernels"] == 3  # mul, add, gelu
    assert fused.stats["fused"] and not unfused.stats["fused"]
    # the same arithmetic: 32*48 points of mul, add and gelu's 0.5*x*(1+erf(x/sqrt2)) (5 ops)
    assert fused.stats["flops"] == unfused.stats["flops"] == 32 * 48 * (1 + 1 + 5)
    assert fused.stats["intermediate_bytes"] == 0 and fused.stats["intermediate_buffers"] == 0
    # x*w and x*w+b are temporaries, live together while the add runs: no reuse possible
    assert unfused.stats["intermediate_buffers"] == 2
    # each in the arena with one more cache line than its 96 (an odd count: plan-memory's stagger)
    assert unfused.stats["intermediate_bytes_before_reuse"] == 2 * 32 * 48 * 4
    assert unfused.stats["intermediate_bytes"] == 2 * (32 * 48 * 4 + 64)
    x, w, b = randn(*shape), randn(48), randn(48)
    (ref,) = run_reference(_gelu_linear(shape), [x, w, b])
    assert close(fused(x, w, b), ref, NP_RTOL, NP_ATOL) and close(unfused(x, w, b), ref, NP_RTOL, NP_ATOL)


def test_stats_memory_reuse():
    def model(x):
        t1 = x * 2.0
        t2 = t1 + 1.0
        t3 = np.exp(t2)  # t1 is dead here: t3 reuses its bytes
        return t3 * 3.0

    x = randn(64, 64)
    m = compiler.compile(model, (x,), fuse=False)
    size = 64 * 64 * 4
    assert m.stats["intermediate_buffers"] == 3
    assert m.stats["intermediate_bytes_before_reuse"] == 3 * size
    assert m.stats["intermediate_bytes"] == 2 * (size + 64)  # 256 lines each, + 1: the stagger
    assert close(m(x), model(x), NP_RTOL, NP_ATOL)


@pytest.mark.parametrize("m_, n, k", [(7, 13, 29), (64, 1, 5)])
def test_stats_matmul_flops(m_, n, k):
    a, b = randn(m_, k), randn(k, n)
    m = compiler.compile(lambda a, b: a @ b, (a, b))
    assert m.stats["flops"] == 2 * m_ * n * k
    # On the CPU tile-matmul folds the zero fill into the kernels: one loop nest is left.
    assert m.stats["kernel_ops"] == {"linalg.matmul": 1}
    batched = compiler.compile(lambda a, b: a @ b, (randn(3, m_, k), b))
    assert batched.stats["flops"] == 3 * 2 * m_ * n * k


def test_cuda_folds_transpose_and_keeps_bias_as_epilogue():
    """On CUDA the transpose folds into the matmul's flag and the bias stays an add, which
    map-to-gpu fuses into the tiled matmul kernel: one kernel, no transposed copy."""
    pytest.importorskip("cuda.bindings.nvrtc")
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulation harness needs g++")
    from compiler.targets.cuda_emu.emu import run_emulated

    a, b, c = randn(37, 20), randn(45, 20), randn(45)

    def model(a, b, c):
        return np.maximum(a @ b.T + c, 0.0)

    m = compiler.compile(model, (a, b, c), target="cuda")
    assert "aicc.transpose" not in m.ir("tensor") and " bias %" not in m.ir("tensor")
    assert [k.kind for k in m.executable.program.kernels] == ["matmul"]
    assert close(run_emulated(m, a, b, c), model(a, b, c), NP_RTOL, NP_ATOL)


def test_cli_stats_fused_and_unfused():
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "AICC_NUM_THREADS": "1"}

    def kernels(*flags) -> tuple[str, int]:
        out = subprocess.run([sys.executable, "-m", "tools.aicc", "examples/softmax.py", "--stats",
                              "--repeat", "1", *flags], cwd=root, env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        head = out.stdout.splitlines()[0]
        return head, int(re.search(r"kernels\s+(\d+)", out.stdout).group(1))

    head, fused = kernels()
    assert head == "stats (fused):"
    head, unfused = kernels("--no-fuse")
    assert head == "stats (not fused, --no-fuse):"
    assert unfused > fused
