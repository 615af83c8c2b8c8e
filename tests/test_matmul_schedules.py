"""Tiled CPU matmuls against NumPy: every schedule field, tile edges, batches, epilogues,
both vector widths, constant weights.

choose-schedule picks a schedule per matmul and tile-matmul follows it (packing, cache
blocks, micro-kernels); here schedules are forced with `compiler.compile(..., schedule=)`
so every code path runs whatever the host CPU, including AVX2-width kernels (vw = 8) on an
AVX-512 machine and 512-bit kernels (vw = 16, legalized by LLVM) on a machine without it.

Tolerance: float32 products summed in a different order than NumPy's float64 reference;
the error grows with K, so atol scales with it.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler.targets.cpu.machine import CPUMachine, cpu_machine
from compiler.targets.cpu.schedule import (
    L2PF_NARROW_COLS,
    L2PF_NARROW_MAX_M,
    MatmulSchedule,
    aliased_a_rule,
    choose_matmul_schedule,
    parse_overrides,
    rows_alias_in_l1,
)

ROOT = Path(__file__).resolve().parents[1]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def check(out, ref, k):
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-6 * max(k, 1) + 1e-6)


def matmul(a, b):
    return a @ b


def run(fn, inputs, schedule=None, threads=1):
    m = compiler.compile(fn, inputs, schedule=schedule, threads=threads)
    assert "aicc_cpu.microkernel" in m.ir("loops"), "the matmul was not tiled"
    return m, m(*inputs)


def ref_matmul(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


# ------------------------------------------------------------------------------ shapes

SHAPES = [  # (M, K, N)
    (1, 1, 1),
    (7, 7, 7),
    (129, 129, 129),
    (1000, 37, 513),
    (37, 513, 1000),
    (1, 300, 77),   # a row vector
    (300, 77, 1),   # a column
    (16, 32, 48),   # multiples of every tile
    (197, 65, 96),  # 512-bit code: 9-row tiles of 3 vectors (22 of them, the last 8 rows)
    (128, 33, 144),  # 512-bit code: 8-row tiles of 3 vectors
]


@pytest.mark.parametrize("mkn", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_default_schedule(mkn):
    M, K, N = mkn
    a, b = rand(M, K, seed=1), rand(K, N, seed=2)
    _, out = run(matmul, (a, b))
    check(out, ref_matmul(a, b), K)


# Each schedule field away from its default, on shapes that leave edges in every dim.
FORCED = [
    {"vw": 8},
    {"vw": 8, "mr": 3, "nr": 8},
    {"vw": 16, "mr": 1, "nr": 64},
    {"vw": 16, "mr": 14, "nr": 32},
    {"vw": 16, "mr": 6, "nr": 64},
    {"vw": 4, "mr": 5, "nr": 12},
    {"kc": 1},
    {"kc": 5, "ku": 3},
    {"kc": 4096},
    {"ku": 1},
    {"vw": 8, "ku": 8},  # k_unroll_rule's AVX2 loop: K = 45 leaves a remainder of 5, K = 3 all
    {"mr": 4, "mc": 4, "nr": 16, "nc": 16, "vw": 16},
    {"mc": 8, "mr": 4, "nc": 64},
    {"pack_a": True},
    {"pack_a": True, "order": "nm"},
    {"pack_b": False},
    {"pack_a": True, "pack_b": False, "order": "nm"},
    {"pack_b": False, "order": "nm"},
    {"parallel": ""},
    {"parallel": "m", "mc": 14},
    {"parallel": "n", "nc": 32},
    {"pf": 0},
    {"pf": 7},
]


@pytest.mark.parametrize("schedule", FORCED, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("mkn", [(61, 45, 77), (1, 45, 70), (33, 3, 5)], ids=lambda s: "x".join(map(str, s)))
def test_forced_schedule(schedule, mkn):
    M, K, N = mkn
    a, b = rand(M, K, seed=3), rand(K, N, seed=4)
    m, out = run(matmul, (a, b), schedule=schedule)
    check(out, ref_matmul(a, b), K)
    printed = m.ir("linalg")
    for key, value in schedule.items():
        text = f'"{value}"' if key in ("parallel", "order") else str(value).lower()
        assert f"{key} = {text}" in printed, (key, printed)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("schedule", [None, {"parallel": "mn", "mc": 14, "nc": 32}, {"vw": 8}])
@pytest.mark.parametrize("n", [150, 128])  # 128: N blocks all equal, the tiles run N-major
def test_threads(threads, schedule, n):
    a, b = rand(200, 90, seed=5), rand(90, n, seed=6)
    _, out = run(matmul, (a, b), schedule=schedule, threads=threads)
    check(out, ref_matmul(a, b), 90)


# ------------------------------------------------------------------------------ batches

BATCHED = [
    ((4, 33, 17), (4, 17, 29)),
    ((3, 1, 20, 30), (5, 30, 7)),   # broadcast batch dims on both sides
    ((6, 50, 40), (40, 70)),        # a 2-D B shared by every batch
    ((50, 40), (2, 3, 40, 9)),      # a 2-D A shared by every batch
    ((2, 1, 64), (2, 64, 1)),       # row times column
]


@pytest.mark.parametrize("shapes", BATCHED, ids=lambda s: "@".join("x".join(map(str, x)) for x in s))
@pytest.mark.parametrize("schedule", [None, {"pack_a": True, "order": "nm"}, {"pack_b": False},
                                      {"parallel": "b"}, {"vw": 8}])
def test_batched(shapes, schedule):
    sa, sb = shapes
    a, b = rand(*sa, seed=7), rand(*sb, seed=8)
    _, out = run(matmul, (a, b), schedule=schedule)
    check(out, ref_matmul(a, b), sa[-1])


# ------------------------------------------------------------------------------ epilogues, constants


W = rand(45, 70, seed=9)
BIAS = rand(70, seed=10)


def dense_relu(x):  # constant weights: packed at compile time
    return np.maximum(x @ W + BIAS, 0.0)


def dense_relu_dynamic(x, w, b):
    return np.maximum(x @ w + b, 0.0)


@pytest.mark.parametrize("schedule", [None, {"vw": 8}, {"pack_b": False}, {"kc": 7, "ku": 2}])
def test_constant_weights_with_epilogue(schedule):
    x = rand(33, 45, seed=11)
    m, out = run(dense_relu, (x,), schedule=schedule)
    ref = np.maximum(ref_matmul(x, W) + BIAS, 0.0)
    check(out, ref, 45)
    packed = schedule is None or schedule.get("pack_b", True)
    assert ("_panels" in m.ir("memref")) == packed


@pytest.mark.parametrize("schedule", [None, {"order": "nm", "pack_a": True}])
def test_dynamic_weights_with_epilogue(schedule):
    x, w, b = rand(33, 45, seed=12), rand(45, 70, seed=13), rand(70, seed=14)
    _, out = run(dense_relu_dynamic, (x, w, b), schedule=schedule)
    check(out, np.maximum(ref_matmul(x, w) + b, 0.0), 45)


INITS = [  # fuse-linear-bias starts the accumulator from these; the kernels read them
    ("bias", lambda x, b: x @ W + b, (33, 45), (70,)),
    ("bias_row", lambda x, b: x @ W + b, (33, 45), (1, 70)),
    ("residual", lambda x, r: x @ W + r, (33, 45), (33, 70)),
    ("batched_bias", lambda x, b: x @ W + b, (3, 11, 45), (70,)),
    ("batched_residual", lambda x, r: x @ W + r, (3, 11, 45), (3, 11, 70)),
    ("broadcast_residual", lambda x, r: x @ W + r, (3, 11, 45), (11, 70)),
    ("bias_first_transposed", lambda x, b: b + x @ W.T[:, :45].T, (33, 45), (70,)),
    ("column_bias", lambda x, b: x @ W + b, (33, 45), (33, 1)),  # one value per row (init_cs 0)
    ("batched_column_bias", lambda x, b: x @ W + b, (3, 11, 45), (3, 11, 1)),
]


@pytest.mark.parametrize("name, fn, sx, sb", INITS, ids=[t[0] for t in INITS])
@pytest.mark.parametrize("schedule", [None, {"kc": 7}, {"vw": 8, "mr": 5}, {"pack_b": False},
                                      {"order": "nm", "pack_a": True}])
def test_accumulator_init_folded_into_kernels(name, fn, sx, sb, schedule):
    x, b = rand(*sx, seed=22), rand(*sb, seed=23)
    m, out = run(fn, (x, b), schedule=schedule)
    check(out, fn(x.astype(np.float64), b.astype(np.float64)), 45)
    assert " init " in m.ir("loops"), m.ir("loops")
    assert ("init_cs = 0" in m.ir("loops")) == ("column" in name)
    assert m.stats["kernels"] == 1, m.stats  # the copy into C is gone


EPILOGUES = [  # elementwise consumers of C that tile-matmul runs on each tile of C
    ("relu_residual", lambda x, w, r: np.maximum(x @ w + r, 0.0), True),
    ("gelu_tanh", lambda x, w, r: 0.5 * (x @ w) * (1 + np.tanh(0.8 * (x @ w))), True),
    ("scale_residual", lambda x, w, r: (x @ w) * 0.5 + r, True),
    ("shifted_relu", lambda x, w, r: np.maximum(x @ w - 0.25, 0.0), True),
    ("reads_c_twice", lambda x, w, r: (x @ w) + np.maximum(x @ w, 0.0), True),  # one generic
    ("c_is_a_result", lambda x, w, r: (np.maximum(x @ w, 0.0), x @ w), True),  # C stays
    ("c_read_later", lambda x, w, r: (np.maximum(x @ w, 0.0), (x @ w).sum(axis=0)), False),
]


@pytest.mark.parametrize("name, fn, fused", EPILOGUES, ids=[e[0] for e in EPILOGUES])
@pytest.mark.parametrize("mkn", [(1, 7, 129), (129, 33, 7), (37, 65, 70)], ids=str)
@pytest.mark.parametrize("schedule", [None, {"kc": 8}, {"mc": 14, "nc": 32, "order": "nm"},
                                      {"pack_b": False}])
def test_epilogue_runs_on_each_tile(name, fn, fused, mkn, schedule):
    """The consumer runs once per tile after the last K block (kc=8 splits K into several
    blocks: applying it per block would be wrong). It is not taken when another op reads C
    after the matmul."""
    m_, k, n = mkn
    x, w, r = rand(m_, k, seed=31), rand(k, n, seed=32), rand(m_, n, seed=33)
    m, out = run(fn, (x, w, r), schedule=schedule)
    ref = fn(*(a.astype(np.float64) for a in (x, w, r)))
    for o, want in zip(out, ref) if isinstance(ref, tuple) else [(out, ref)]:
        check(o, want, k)
    assert ("epilogue" in m.ir("loops")) == fused
    if fused:
        assert m.stats["kernel_ops"] == {"linalg.matmul": 1}, m.stats


ACTIVATIONS = [  # epilogues of C's value alone: the micro-kernels apply them in registers
    ("silu", lambda c: c / (1.0 + np.exp(-c))),
    ("relu6", lambda c: np.minimum(np.maximum(c, 0.0), 6.0)),
    ("gelu_tanh", lambda c: 0.5 * c * (1.0 + np.tanh(0.7978845608 * (c + 0.044715 * c * c * c)))),
    ("sigmoid", lambda c: 1.0 / (1.0 + np.exp(-c))),
]


@pytest.mark.parametrize("name, act", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
@pytest.mark.parametrize("mkn", [(1, 7, 129), (129, 33, 7), (37, 65, 70)], ids=str)
@pytest.mark.parametrize("schedule, in_kernel", [(None, True), ({"vw": 8, "mr": 5}, True),
                                                  ({"kc": 4}, False)], ids=str)
def test_activation_epilogue_in_kernel(name, act, mkn, schedule, in_kernel):
    """With one K block (K <= kc) the micro-kernels apply an activation to the values in
    registers, before their store (their `epilogue` region), and no loop over the tile
    follows; with several K blocks (kc = 4) it runs on the tile after the last one."""
    m_, k, n = mkn
    x, w = rand(m_, k, seed=41), rand(k, n, seed=42) * 0.5
    m, out = run(lambda x, w: act(x @ w), (x, w), schedule=schedule)
    check(out, act(ref_matmul(x, w)), k)
    loops = m.ir("loops")
    fused = re.search(r"aicc_cpu\.microkernel[^\n]* epilogue \{", loops) is not None
    assert fused == in_kernel, loops
    assert m.stats["kernel_ops"] == {"linalg.matmul": 1}, m.stats


def test_batched_and_transposed_epilogues():
    a, b, bt = rand(3, 17, 9, seed=34), rand(3, 9, 33, seed=35), rand(33, 9, seed=36)
    for fn, args in ((lambda a, b: np.maximum(a @ b, 0.0), (a, b)),
                     (lambda a, bt: np.tanh(a @ bt.T), (a, bt))):
        m, out = run(fn, args, schedule={"kc": 4})
        check(out, fn(*(v.astype(np.float64) for v in args)), 9)
        assert m.stats["kernels"] == 1, m.stats


@pytest.mark.parametrize("schedule", [None, {"kc": 8, "mr": 3}, {"nc": 16, "order": "nm"}])
def test_epilogue_through_a_reshape(schedule):
    """A conv-shaped consumer: the (N, OC, OH*OW) matmul read as (N, OC, OH, OW) by bias +
    relu. The epilogue maps each element through its flat index; C is a view of the result."""
    w, b = rand(5, 27, seed=38), rand(1, 5, 1, 1, seed=39)
    col = rand(2, 27, 63, seed=40)

    def fn(col):
        return np.maximum((w @ col).reshape(2, 5, 7, 9) + b, 0.0)

    m, out = run(fn, (col,), schedule=schedule)
    check(out, np.maximum((w.astype(np.float64) @ col).reshape(2, 5, 7, 9) + b, 0.0), 27)
    assert m.stats["kernels"] == 1, m.stats
    ir = m.ir("memref")  # no temporary C: neither shape is a workspace view or an alloc
    assert "xi8> to memref<2x5x63xf32>" not in ir and "alloc() {alignment = 64 : i64} : memref<2x5x" not in ir


@pytest.mark.parametrize("schedule", [None, {"mc": 4, "nc": 32, "mr": 2}])
def test_elementwise_epilogue_through_a_reshape_indexes_like_c(schedule):
    """relu(conv-shaped matmul + residual), every operand read elementwise: the epilogue
    reads and writes views of its operands in C's shape (N, OC, OH*OW), so no element's
    index is split into digits (no division in the loops)."""
    w = rand(5, 27, seed=41)
    col, res = rand(2, 27, 63, seed=42), rand(2, 5, 7, 9, seed=43)

    def fn(col, res):
        return np.maximum((w @ col).reshape(2, 5, 7, 9) + res, 0.0)

    m, out = run(fn, (col, res), schedule=schedule)
    ref = np.maximum((w.astype(np.float64) @ col).reshape(2, 5, 7, 9) + res, 0.0)
    check(out, ref, 27)
    assert m.stats["kernels"] == 1, m.stats
    loops = m.ir("loops")
    assert "epilogue = " in loops and "arith.divui" not in loops.split("aicc_cpu.microkernel")[-1]


def test_epilogue_writes_the_result_in_place():
    """relu(x @ W + b): the matmul accumulates straight into the returned array."""
    x = rand(40, 45, seed=37)
    m, out = run(dense_relu, (x,))
    check(out, np.maximum(ref_matmul(x, W) + BIAS, 0.0), 45)
    assert m.stats["kernels"] == 1 and m.stats["intermediate_buffers"] == 0, m.stats
    assert "epilogue = \"arith.maximumf\"" in m.ir("loops")


def test_chained_matmuls_per_op_schedules():
    def mlp(x, w1, w2):
        return np.maximum(x @ w1, 0.0) @ w2

    x, w1, w2 = rand(20, 30, seed=15), rand(30, 40, seed=16), rand(40, 9, seed=17)
    m, out = run(mlp, (x, w1, w2), schedule={0: {"mr": 2, "kc": 8}, 1: {"vw": 8, "mr": 5}})
    h = np.maximum(ref_matmul(x, w1), 0.0)
    check(out, h @ w2.astype(np.float64), 40)
    printed = m.ir("linalg")
    assert "mr = 2 : i64" in printed and "mr = 5 : i64" in printed


TRANSPOSED = [  # operands stored transposed are read in place (packing transposes them)
    ("a.T@b.T", lambda a, b: a.T @ b.T, (40, 30), (50, 40)),
    ("a.T@b", lambda a, b: a.T @ b, (40, 30), (40, 50)),
    ("a@b.T", lambda a, b: a @ b.T, (30, 40), (50, 40)),
    ("q@k^T", lambda q, k: q @ np.transpose(k, (0, 2, 1)), (3, 30, 16), (3, 45, 16)),
    ("q^T@k", lambda q, k: np.transpose(q, (0, 2, 1)) @ k, (3, 16, 30), (3, 16, 45)),
    ("x@W.T", lambda x, w: x @ w.T, (17, 40), (33, 40)),
]


@pytest.mark.parametrize("name, fn, sa, sb", TRANSPOSED, ids=[t[0] for t in TRANSPOSED])
@pytest.mark.parametrize("schedule", [None, {"pack_a": True, "order": "nm"}, {"pack_a": False},
                                      {"pack_b": False}, {"vw": 8, "kc": 7}])
def test_transposed_operands(name, fn, sa, sb, schedule):
    a, b = rand(*sa, seed=18), rand(*sb, seed=19)
    m, out = run(fn, (a, b), schedule=schedule)
    check(out, fn(a.astype(np.float64), b.astype(np.float64)), 40)
    linalg_ir = m.ir("linalg")  # the transpose is folded: one generic, the matmul itself
    assert linalg_ir.count("linalg.generic") == 1 and "aicc.schedule" in linalg_ir


def test_constant_transposed_weights_are_prepacked():
    w = rand(33, 40, seed=20)
    x = rand(17, 40, seed=21)
    m, out = run(lambda x: x @ w.T, (x,))
    check(out, ref_matmul(x, w.T), 40)
    assert "_panels" in m.ir("memref")


@pytest.mark.parametrize("shape", [(1, 7, 1), (7, 33, 129), (129, 45, 7), (70, 1, 33)], ids=str)
@pytest.mark.parametrize("schedule", [None, {"vw": 8, "mr": 5}, {"order": "nm"}, {"kc": 7}])
def test_constant_a_is_prepacked(shape, schedule):
    # a constant A (a conv's weight) is packed into slivers at compile time; the original
    # global goes when nothing else reads it
    m_, k, n = shape
    w = rand(m_, k, seed=30)
    x = rand(k, n, seed=31)
    m, out = run(lambda x: w @ x, (x,), schedule=schedule)
    check(out, ref_matmul(w, x), k)
    assert "_slivers" in m.ir("memref") and "pack_a = true" in m.ir("linalg")


L2PF_CASES = [  # (side, M x K x N, schedule, threads)
    ("b", (7, 33, 129), {}, 1),
    ("b", (129, 45, 7), {"kc": 16, "mc": 12, "nc": 32, "mr": 4}, 2),
    ("b", (70, 100, 96), {"vw": 8, "mr": 5, "kc": 24}, 1),
    ("b", (70, 100, 96), {"kc": 8, "ku": 2, "nr": 16, "nc": 16}, 2),
    ("b", (33, 1, 49), {"ku": 1}, 1),
    ("b", (70, 100, 96), {"vw": 8, "ku": 8}, 1),  # 12 unrolled steps of a K block of 100
    ("b", (16, 300, 257), {}, 1),  # few rows: blocks of L2PF_NARROW_COLS, the last one short
    ("b", (13, 70, 200), {"vw": 8}, 2),
    ("a", (7, 33, 129), {"kc": 16, "mc": 12, "nc": 32, "mr": 4}, 1),
    ("a", (129, 45, 7), {}, 2),
    ("a", (70, 100, 96), {"vw": 8, "mr": 5, "kc": 24}, 2),
    ("a", (33, 1, 49), {}, 1),
]


@pytest.mark.parametrize("side, shape, schedule, threads", L2PF_CASES, ids=str)
def test_l2_prefetch_of_a_constant_operand(side, shape, schedule, threads):
    # l2pf: the kernels fetch the next block of a constant operand into L2 as they go; the
    # prefetches (past the buffer's end too, at the last block) change no result
    m_, k, n = shape
    schedule = {**schedule, "l2pf": 1}
    if side == "b":
        w, x = rand(k, n, seed=40), rand(m_, k, seed=41)
        fn, ref = (lambda x: x @ w), ref_matmul(x, w)
    else:
        w, x = rand(m_, k, seed=42), rand(k, n, seed=43)
        fn, ref = (lambda x: w @ x), ref_matmul(w, x)
        schedule["pack_a"] = True
    m, out = run(fn, (x,), schedule=schedule, threads=threads)
    check(out, ref, k)
    # the calls fetch where a block has several of them along the constant's reuse (slivers
    # of A for B's panels, panels of B for A's slivers), an unrolled k loop and a line to fetch
    sched = re.search(r"aicc\.schedule = \{[^}]*\}", m.ir("linalg")).group(0)
    f = {k_: int(v) for k_, v in re.findall(r"(\w+) = (\d+) : i64", sched)}
    several = (-(-min(m_, f["mc"]) // f["mr"]) if side == "b" else -(-min(n, f["nc"]) // f["nr"])) >= 2
    lines = min(k, f["kc"]) * (f["nr"] if side == "b" else f["mr"]) // 16
    assert ("l2pf %" in m.ir("loops")) == (several and f["ku"] > 1 and lines > 0), f
    if side == "b" and "nc" not in schedule and m_ <= L2PF_NARROW_MAX_M:
        assert f["nc"] <= max(L2PF_NARROW_COLS, f["nr"]), f  # a short first block


TAIL_CASES = [  # (M x K x N, schedule, threads, constant B, kernels' rows)
    # A in place, 2 rows left (4 FMA chains): the last sliver and them as two kernels of 4
    ((14, 37, 40), {"vw": 8, "mr": 6}, 1, False, {6, 4}),
    ((128, 70, 48), {"vw": 8, "mr": 6}, 1, True, {6, 4}),  # bert's M with AVX2 code
    ((16, 33, 64), {"vw": 16, "mr": 14}, 1, True, {8}),  # 14 + 2 -> 8 + 8
    ((13, 20, 16), {"vw": 8, "mr": 6}, 1, False, {6, 4, 3}),  # 6 + 7 -> 6 + 4 + 3
    # enough chains (5 rows x 2 vectors): one kernel of the rows left
    ((17, 9, 40), {"vw": 8, "mr": 6}, 1, True, {6, 5}),
    # A packed (slivers of mr rows): one kernel of the rows left, reading its sliver
    ((14, 37, 40), {"vw": 8, "mr": 6, "pack_a": True}, 1, False, {6, 2}),
    ((14, 37, 40), {"vw": 8, "mr": 6, "pack_a": True, "order": "nm"}, 1, False, {6, 2}),
    # M blocks over threads: only the last block has the tail (scf.if on the block's rows)
    ((50, 24, 33), {"vw": 8, "mr": 6, "mc": 12, "parallel": "mn"}, 2, True, {6, 2}),
    ((52, 24, 33), {"vw": 8, "mr": 6, "mc": 12, "parallel": "mn"}, 2, True, {6, 4}),
    # l2pf over split tail kernels: the second fetches the last sliver's share
    ((20, 64, 96), {"vw": 8, "mr": 6, "kc": 32, "nc": 32, "l2pf": 1}, 1, True, {6, 4}),
]


@pytest.mark.parametrize("mkn, schedule, threads, const_b, rows", TAIL_CASES, ids=str)
def test_row_tail_kernels(mkn, schedule, threads, const_b, rows):
    # The M % mr rows past the last whole sliver run kernels of exactly as many rows (or,
    # with A in place and too few FMA chains, share the last sliver's rows evenly), with an
    # init (a bias) and an epilogue in the kernels, as the other kernels
    m_, k, n = mkn
    x, w, bias = rand(m_, k, seed=60), rand(k, n, seed=61), rand(n, seed=62)
    want = np.maximum(ref_matmul(x, w) + bias, 0)
    if const_b:
        m, out = run(lambda x: np.maximum(x @ w + bias, 0), (x,), schedule=schedule,
                     threads=threads)
    else:
        m, out = run(lambda x, w: np.maximum(x @ w + bias, 0), (x, w), schedule=schedule,
                     threads=threads)
    check(out, want, k)
    loops = m.ir("loops")
    assert {int(r) for r in re.findall(r"\bmr = (\d+) : i64", loops)} == rows
    assert "a_clamp" not in loops


LANES_CASES = [  # (M x K x N, schedule, threads, epilogue)
    ((64, 128, 49), {}, 1, "relu"),  # resnet's 1x1 convs at 7x7: 48 columns + 1
    ((30, 37, 196), {"vw": 16}, 2, "bias"),  # 14x14: 192 + 4
    ((13, 5, 17), {"vw": 8, "mr": 6}, 1, ""),
    ((29, 70, 50), {"kc": 16, "mr": 7, "nr": 32}, 2, "gelu"),  # 4 K blocks, 48 + 2
    ((9, 33, 2), {"vw": 8, "mr": 9}, 1, "bias"),  # 2 columns, 9 rows in 2 vectors of 8
    ((40, 20, 129), {"order": "nm", "mc": 16, "nc": 160}, 1, "relu"),
]


@pytest.mark.parametrize("mkn, schedule, threads, epi", LANES_CASES, ids=str)
def test_lanes_kernel_for_the_last_columns(mkn, schedule, threads, epi):
    # A constant A (packed into slivers) and a few columns past whole vectors: those run an
    # m_lanes kernel (the rows in lanes, a column an FMA per k step), with the init (a bias
    # per row), the epilogue and K blocks as the other kernels
    m_, k, n = mkn
    w, x = rand(m_, k, seed=50), rand(k, n, seed=51)
    bias = rand(m_, 1, seed=52)
    ops = {"": lambda y: y, "relu": lambda y: np.maximum(y + bias, 0), "bias": lambda y: y + bias,
           "gelu": lambda y: compiler.ops.gelu(y)}
    ref64 = ref_matmul(w, x)
    want = {"": ref64, "relu": np.maximum(ref64 + bias, 0), "bias": ref64 + bias,
            "gelu": 0.5 * ref64 * (1 + np.vectorize(math.erf)(ref64 / math.sqrt(2)))}[epi]
    m, out = run(lambda x: ops[epi](w @ x), (x,), schedule={**schedule, "pack_a": True},
                 threads=threads)
    check(out, want, k)
    assert "m_lanes = true" in m.ir("loops")


def test_k_unroll_rule_by_vendor_and_width():
    """AVX2 code for an Intel core unrolls the kernels' k loop 8 times (measured on a Sapphire
    Rapids-class Xeon); AVX-512 code, AMD cores and generic CPU names keep K_UNROLL."""
    from compiler.targets.cpu.schedule import K_UNROLL, k_unroll_rule

    def machine(name, bits):
        return CPUMachine(name, "", bits, 48 * 1024, 2 << 20, False)

    assert k_unroll_rule(machine("haswell", 256)) == 8
    assert k_unroll_rule(machine("sapphirerapids", 256)) == 8  # its code at 256 bits
    assert k_unroll_rule(machine("sapphirerapids", 512)) == K_UNROLL
    assert k_unroll_rule(machine("znver3", 256)) == K_UNROLL
    assert k_unroll_rule(machine("x86-64-v3", 256)) == K_UNROLL
    # the heuristic takes it; a user's or tuner's ku wins over it
    assert choose_matmul_schedule((), 128, 768, 768, vw=8, threads=1, ku=8).ku == 8
    assert choose_matmul_schedule((), 128, 768, 768, vw=8, threads=1, ku=8,
                                  fixed={"ku": 2}).ku == 2


def test_l2_prefetch_rule_every_core():
    """Every core fetches a constant operand's next block into L2 (measured on a Sapphire
    Rapids-class Xeon and on a Zen 5, with AVX2 and AVX-512 code), generic names included."""
    from compiler.targets.cpu.schedule import l2_prefetch_rule

    def machine(name):
        return CPUMachine(name, "", 512, 48 * 1024, 2 << 20, False)

    for name in ("sapphirerapids", "haswell", "znver3", "znver5", "x86-64-v3"):
        assert l2_prefetch_rule(machine(name)), name
    # the heuristic asks for it only where an operand is a constant packed at compile time
    on = dict(vw=16, threads=1, l2_prefetch=True)
    assert choose_matmul_schedule((), 128, 3072, 768, b_constant=True, **on).l2pf == 1
    assert choose_matmul_schedule((), 512, 49, 2048, a_constant=True, conv=True, **on).l2pf == 1
    assert choose_matmul_schedule((), 128, 3072, 768, **on).l2pf == 0
    assert choose_matmul_schedule((), 128, 3072, 768, b_constant=True, vw=16, threads=1).l2pf == 0
    s = choose_matmul_schedule((), 128, 3072, 768, b_constant=True, **on)
    assert MatmulSchedule.from_attr(s.to_attr()) == s
    # the first block of a constant B streams in on demand: narrow blocks for few rows
    # (L2PF_NARROW_MAX_M), the L2-sized ones for many, or without l2pf
    for vw in (8, 16):
        on = dict(vw=vw, threads=1, l2_prefetch=True)
        assert choose_matmul_schedule((), 16, 512, 512, b_constant=True, **on).nc == 64
        assert choose_matmul_schedule((), 1500, 1536, 384, b_constant=True, **on).nc > 64
        assert choose_matmul_schedule((), 16, 512, 512, b_constant=True, vw=vw,
                                      threads=1).nc > 64
    assert "l2pf" not in str(choose_matmul_schedule((), 64, 64, 64, vw=16, threads=1).to_attr())


@pytest.mark.parametrize("n", [1, 9, 17, 33, 49, 129])
@pytest.mark.parametrize("schedule", [{"vw": 8, "nr": 16}, {"vw": 8, "nr": 24, "mr": 4},
                                      {"vw": 16, "nr": 32}, {"vw": 8, "nr": 16, "pack_b": False}])
def test_narrow_last_panel(n, schedule):
    # a last panel of fewer vectors than nr runs a kernel only as wide as they are (B packed
    # or in place); the columns still all come out
    a, b = rand(37, 29, seed=32), rand(29, n, seed=33)
    m, out = run(matmul, (a, b), schedule=schedule)
    check(out, ref_matmul(a, b), 29)
    nr, vw = schedule["nr"], schedule["vw"]
    widths = {int(w) for w in re.findall(r"microkernel.*?\{mr = \d+ : i64, nr = (\d+)",
                                           m.ir("loops"))}
    rem = n % nr
    narrow = -(-rem // vw) * vw
    assert widths == ({nr, narrow} - {0} if n > nr and 0 < narrow < nr else
                      {narrow} if n < nr and narrow < nr else {nr}), widths


# ------------------------------------------------------------------------------ schedules as data


def test_heuristic_is_valid_for_many_shapes():
    for vw in (4, 8, 16):
        for m, n, k in [(1, 1, 1), (1, 4096, 4096), (4096, 1, 7), (3, 5, 100000), (512, 512, 512),
                        (17, 1000, 3), (2048, 2048, 2048)]:
            for threads in (1, 2, 16):
                s = choose_matmul_schedule((), m, n, k, vw=vw, threads=threads)
                s.validate()
                assert s.nr % s.vw == 0 and s.mc % s.mr == 0 and s.nc % s.nr == 0
                assert s.mr * (s.nr // s.vw) <= (28 if vw == 16 else 12)


def test_register_rows_are_split_evenly():
    # As few register tiles down M as the accumulators allow, as equal as possible: no
    # 4-row sliver after two 14-row tiles at M = 32.
    for m in range(4, 300):
        s = choose_matmul_schedule((), m, 512, 512, vw=16, threads=1)
        tiles = -(-m // s.mr)
        assert tiles == -(-m // 14), (m, s.mr)
        assert m - (tiles - 1) * s.mr >= s.mr - tiles, (m, s.mr)
    assert choose_matmul_schedule((), 32, 512, 784, vw=16, threads=1).mr == 11


def test_rows_of_a_that_alias_in_l1_are_packed():
    # K = 1024 f32: A's rows 4 KiB apart fall on the same L1 sets, so A is packed; K = 1000
    # or 256 spread them out, and A is read in place.
    assert rows_alias_in_l1(4096, 14) and rows_alias_in_l1(8192, 14) and rows_alias_in_l1(2048, 14)
    assert not rows_alias_in_l1(4000, 14) and not rows_alias_in_l1(1024, 14)
    assert not rows_alias_in_l1(4096, 4)
    for k, packed in ((1024, True), (2048, True), (1000, False), (256, False)):
        assert choose_matmul_schedule((), 1024, 1024, k, vw=16, threads=1).pack_a is packed
        # where the machine's rule says so (a Zen 5), such an A is read in place
        assert not choose_matmul_schedule((), 1024, 1024, k, vw=16, threads=1,
                                          pack_aliased_a=False).pack_a
    a, b = rand(100, 1024, seed=5), rand(1024, 70, seed=6)
    m, out = run(matmul, (a, b))
    packs = aliased_a_rule(cpu_machine())  # the machine the code is for (host or AICC_TARGET_CPU)
    assert ("pack_a = true" in m.ir("linalg")) is packs
    check(out, ref_matmul(a, b), 1024)
    m, out = run(matmul, (a, b), schedule={"pack_a": not packs})  # and the other way
    assert ("pack_a = true" in m.ir("linalg")) is not packs
    check(out, ref_matmul(a, b), 1024)


def test_wide_register_tile_where_n_is_a_multiple_of_three_vectors():
    """With 32 registers, 9 (or 8) rows x 3 vectors where N is a multiple of 3 vectors and M
    at least WIDE_TILE_MIN_M; 14 x 2 elsewhere; 16 registers keep 6 x 2."""
    def tile(m, n, vw=16):
        s = choose_matmul_schedule((), m, n, 768, vw=vw, threads=1)
        return s.mr, s.nr

    assert tile(197, 768) == tile(1500, 3072) == (9, 48)
    assert tile(128, 768) == tile(77, 2304) == (8, 48)  # 8 rows pad M less
    assert tile(197, 2048) == (14, 32) and tile(77, 512) == (13, 32)  # N not a multiple of 48
    assert tile(12, 768) == (12, 32)  # a short M: one 14-row tile's worth
    assert tile(197, 768, vw=8) == (6, 16)
    assert choose_matmul_schedule((), 197, 768, 768, vw=16, threads=1,
                                  fixed={"mr": 14}).nr == 32  # a fixed mr keeps 2 vectors
    for m, n in ((197, 768), (128, 96), (16, 48)):
        s = choose_matmul_schedule((), m, n, 768, vw=16, threads=1)
        assert s.mr * (s.nr // 16) + s.nr // 16 + 1 <= 32


def test_aliased_a_rule_by_vendor_and_l1():
    """A's aliasing rows are packed except on cores with a 48 KiB L1 (Zen 5, Sapphire Rapids),
    where A read in place measured as fast or faster; smaller L1s and generic names pack."""
    def machine(name, l1):
        return CPUMachine(name, "", 512, l1, 1 << 20, False)

    assert not aliased_a_rule(machine("znver5", 48 * 1024))
    assert aliased_a_rule(machine("znver4", 32 * 1024)) and aliased_a_rule(machine("znver3", 32 * 1024))
    assert not aliased_a_rule(machine("sapphirerapids", 48 * 1024))
    assert aliased_a_rule(machine("skylake-avx512", 32 * 1024))
    assert aliased_a_rule(machine("x86-64-v3", 48 * 1024))
    assert aliased_a_rule(machine("znver5", 0))  # an unknown L1: the measured default


def test_a_packed_sliver_serves_four_register_panels():
    # A packed A sliver is used nc / nr times per pass: at least 4, even where a long K block
    # leaves a quarter of a 512 KiB L2 two panels of B (Zen 3, AVX2: nc = 32 at K = 2048
    # before); A read in place keeps the L2 rule (1536^3 measured better with nc = 32).
    small = dict(vw=8, threads=1, l1_bytes=32 * 1024, l2_bytes=512 * 1024)
    for m, n, k in ((2048, 2048, 2048), (2048, 1024, 4096), (49, 512, 2048), (128, 768, 3072)):
        s = choose_matmul_schedule((), m, n, k, **small)
        assert s.pack_a and s.nc >= 4 * s.nr and s.kc * s.nc * 4 <= 512 * 1024 // 2, (m, n, k, s)
    s = choose_matmul_schedule((), 1536, 1536, 1536, **small)
    assert not s.pack_a and s.nc == 2 * s.nr
    # a 1 MiB L2 already gave 4 or more
    wide = choose_matmul_schedule((), 2048, 2048, 2048, vw=16, threads=1, l2_bytes=1024 * 1024)
    assert wide.nc >= 4 * wide.nr


def test_conv_packs_b_from_many_output_channels():
    # a conv's B (im2col matrix or input) is packed from CONV_PACK_B_ROWS rows of reuse up,
    # at any vector width, but not when each image's tiles run on one thread
    from compiler.targets.cpu.schedule import CONV_PACK_B_ROWS

    for vw in (8, 16):
        for m, packed in ((64, False), (CONV_PACK_B_ROWS - 1, False), (CONV_PACK_B_ROWS, True),
                          (2048, True)):
            for n in (49, 196, 3136):
                s = choose_matmul_schedule((1,), m, n, 576, vw=vw, threads=1, conv=True)
                assert s.pack_b is packed, (vw, m, n)
        assert not choose_matmul_schedule((4,), 512, 49, 576, vw=vw, threads=2, conv=True).pack_b


def test_schedule_round_trips_through_its_attribute():
    s = choose_matmul_schedule((2,), 300, 200, 100, vw=16, threads=2)
    assert MatmulSchedule.from_attr(s.to_attr()) == s


def test_overrides_text_and_dict_forms_agree():
    assert parse_overrides("mr=6,nr=32") == {None: {"mr": "6", "nr": "32"}}
    assert parse_overrides("0:mr=6;1:kc=128,pack_b=false") == {
        0: {"mr": "6"}, 1: {"kc": "128", "pack_b": "false"}}
    assert parse_overrides({"mr": 6}) == {None: {"mr": 6}}
    assert parse_overrides({1: {"mr": 6}}) == {1: {"mr": 6}}


@pytest.mark.parametrize("schedule, needle", [
    ({"nr": 20, "vw": 16}, "multiple of vw"),
    ({"bogus": 1}, "unknown matmul schedule field"),
    ({"mr": "six"}, "not an integer"),
    ({"order": "km"}, "order"),
    ({"parallel": "x"}, "subset"),
    ({3: {"mr": 2}}, "matmul 3"),
])
def test_bad_schedules_are_compile_errors(schedule, needle):
    a = rand(8, 8)
    with pytest.raises(compiler.CompileError, match=needle):
        compiler.compile(matmul, (a, a), schedule=schedule)


def test_cuda_target_rejects_a_schedule():
    a = rand(8, 8)
    with pytest.raises(compiler.CompileError, match="cpu"):
        compiler.compile(matmul, (a, a), target="cuda", schedule={"mr": 2})


def test_llvm_ir_has_full_width_fma():
    a = rand(64, 64)
    m = compiler.compile(matmul, (a, a), schedule={"vw": 16})
    assert '@"llvm.fma.v16f32"' in m.ir("llvm")
    m8 = compiler.compile(matmul, (a, a), schedule={"vw": 8})
    assert '@"llvm.fma.v8f32"' in m8.ir("llvm")


def test_asm_inner_loop_is_full_width_fma():
    from compiler.targets.cpu.machine import cpu_machine

    a = rand(64, 64)
    m = compiler.compile(matmul, (a, a))
    asm = m.ir("asm")
    reg = {512: "zmm", 256: "ymm"}.get(cpu_machine().vector_bits)
    if reg is None:
        pytest.skip("no AVX on this host")
    assert f"vfmadd231ps\t%{reg}" in asm or "vfmadd231ps" in asm and f"%{reg}" in asm


# ------------------------------------------------------------------------------ command line


MODEL = """
import numpy as np

rng = np.random.default_rng(0)
w = rng.standard_normal((40, 24)).astype(np.float32)


def model(x):
    return x @ w


example_inputs = (rng.standard_normal((30, 40)).astype(np.float32),)
"""


def _aicc(*args):
    return subprocess.run([sys.executable, "-m", "tools.aicc", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "AICC_NUM_THREADS": "1"})


def test_cli_schedule_option(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    r = _aicc(path, "--schedule", "mr=3,kc=8,vw=8", "--emit", "linalg")
    assert r.returncode == 0, r.stderr
    assert "mr = 3 : i64" in r.stdout and "kc = 8 : i64" in r.stdout and "vw = 8 : i64" in r.stdout
    r = _aicc(path, "--schedule", "mr=3,kc=8", "--repeat", "1")
    assert r.returncode == 0, r.stderr


def test_cli_bad_schedule_is_one_line_error(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    r = _aicc(path, "--schedule", "nr=20")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aicc: error:") and "nr = 20" in lines[0]
