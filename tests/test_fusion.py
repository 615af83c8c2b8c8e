"""Row fusion (fuse-rows) and attention fusion (fuse-attention, lower-attention), end to end.

Every fused kernel is compiled twice, with the full pipeline and with `fuse=False` (no
fuse-elementwise, fuse-rows or fuse-attention), and both are compared with a float64 NumPy
reference; each test also checks that the fusion fired (the kernel count and kind), so none
passes vacuously.

Tolerances, float32 throughout, relative to the output's scale (max(1, max |ref|)):
  * fused vs unfused: RTOL = ATOL = 2e-6. Row fusion keeps the unfused arithmetic except the
    order of reductions (both reassociate); attention computes the same scores, but an online
    softmax (rescaled partial sums) and FMA contraction in q.k and p@v: a few ulps apart.
  * vs NumPy in float64: RTOL = ATOL = 1e-5, reductions over up to 1000 elements.
NaN must appear exactly where the reference has it (a row masked entirely).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import compiler
from compiler import ops
from compiler.dialects.aicc_fused import attention_reference
from compiler.pipeline import stage_passes

FUSED_RTOL = FUSED_ATOL = 2e-6
REF_RTOL = REF_ATOL = 1e-5

rng = np.random.default_rng(11)


def randn(*shape, scale=1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    b = np.asarray(b)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    finite = ~np.isnan(b)
    if not finite.any():
        return True
    scale = max(1.0, float(np.abs(b[finite]).max()))
    return bool(np.all(np.abs(a[finite] - b[finite]) <= atol * scale + rtol * np.abs(b[finite])))


def f64(args):
    return [a.astype(np.float64) if a.dtype == np.float32 else a for a in args]


def compile_both(fn, args):
    fused = compiler.compile(fn, args)
    unfused = compiler.compile(fn, args, fuse=False)
    return fused, unfused


def check(fn, args, ref=None):
    """Fused and unfused agree, both match the float64 reference; returns the fused model."""
    fused, unfused = compile_both(fn, args)
    y, yu = fused(*args), unfused(*args)
    if ref is None:
        with np.errstate(all="ignore"):
            ref = fn(*f64(args))
    assert close(y, yu, FUSED_RTOL, FUSED_ATOL), f"fused vs unfused: {np.nanmax(np.abs(y - yu))}"
    assert close(y, ref, REF_RTOL, REF_ATOL), f"fused vs reference: {np.nanmax(np.abs(y - ref))}"
    assert close(yu, ref, REF_RTOL, REF_ATOL)
    return fused, unfused


# -- the row-wise workloads, as a NumPy user writes them ------------------------------------------


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    s = x - x.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def layernorm(x, g, b):
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + np.float32(1e-5)) * g + b


def layernorm_pow(x):  # examples/layernorm.py's spelling: ** 2, no affine
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(1e-5))


def rmsnorm(x, g):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6)) * g


def softmax_op(x):
    return ops.softmax(x, axis=-1)


ROW_SHAPES = [(r, w) for r in (1, 7, 129) for w in (1, 7, 129, 1000)] + [(2, 3, 129), (1, 7, 33)]


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layernorm", "layernorm_pow", "rmsnorm",
                                  "softmax_op"])
def test_row_kernel_is_one_nest_per_row(name, shape):
    x = randn(*shape)
    g, b = randn(shape[-1]), randn(shape[-1])
    fn, args = {
        "softmax": (softmax, (x,)),
        "log_softmax": (log_softmax, (x,)),
        "layernorm": (layernorm, (x, g, b)),
        "layernorm_pow": (layernorm_pow, (x,)),
        "rmsnorm": (rmsnorm, (x, g)),
        "softmax_op": (softmax_op, (x,)),
    }[name]
    fused, unfused = check(fn, args)
    assert fused.stats["kernels"] == 1 and fused.stats["kernel_ops"] == {"rows": 1}
    assert unfused.stats["kernels"] >= 6
    assert fused.stats["intermediate_bytes"] < unfused.stats["intermediate_bytes"] or math.prod(shape) == 1
    assert 'aicc.kernel = "rows"' in fused.ir("loops")


def test_softmax_large_logits_and_minus_inf():
    """Rows of +-1e4 (exp overflows without the max), rows with -inf entries, and a row that
    is all -inf (0/0: NaN, in the fused, the unfused and the reference alike)."""
    x = randn(6, 129)
    x[0, ::2] = 1e4
    x[1, ::3] = -1e4
    x[2, 5] = 1e4
    x[3, ::2] = -np.inf
    x[4, :] = -np.inf
    x[5, 7] = np.inf
    fused, _ = check(softmax, (x,))
    y = fused(x)
    assert np.isnan(y[4]).all() and not np.isnan(y[:4]).any()
    assert np.all(y[3, ::2] == 0)
    assert fused.stats["kernels"] == 1


def test_layernorm_large_offset():
    """Rows of 1e4 + N(0, 1): the fused nest keeps the two-pass variance (mean first, then the
    squares of x - mean, over the row while it is in cache), so the variance stays accurate.
    A one-pass E[x^2] - E[x]^2 in float32 would cancel completely (E[x^2] ~ 1e8, var ~ 1).
    Against float64 the bound is the float32 mean itself: 1000 values near 1e4 sum with an
    error of order 1e-3 each way, which x - mean carries into the output."""
    x = (randn(7, 1000) + np.float32(1e4)).astype(np.float32)
    g, b = randn(1000), randn(1000)
    fused, unfused = compile_both(layernorm, (x, g, b))
    y, yu, ref = fused(x, g, b), unfused(x, g, b), layernorm(*f64((x, g, b)))
    assert close(y, yu, FUSED_RTOL, FUSED_ATOL)
    assert np.abs(y - ref).max() < 1e-2 * np.abs(ref).max()
    assert fused.stats["kernels"] == 1


def test_softmax_example_and_stats():
    """examples/softmax.py: one kernel, no temporaries in the arena, the same flops but one
    reciprocal per row (the division by the row's sum is a multiplication by it)."""
    import runpy
    from pathlib import Path

    ns = runpy.run_path(str(Path(__file__).parent.parent / "examples" / "softmax.py"))
    (x,) = ns["example_inputs"]
    fused, unfused = check(ns["model"], (x,))
    assert fused.stats["kernels"] == 1 and unfused.stats["kernels"] == 7
    assert fused.stats["flops"] == unfused.stats["flops"] + x.shape[0]
    assert fused.stats["intermediate_bytes"] == 0 and unfused.stats["intermediate_bytes"] > 0


def test_layernorm_with_inverse_std_output():
    """ONNX LayerNormalization's expanded form ends with Reciprocal(StdDev) after the normalize
    op. The reciprocal, a per-row scalar op, runs early in the row; the standard deviation must
    then not live in the reciprocal's output buffer (it did, once)."""
    def fn(x):
        mean = x.mean(axis=-1, keepdims=True)
        d = x - mean
        std = np.sqrt((d * d).mean(axis=-1, keepdims=True) + np.float32(1e-5))
        return d / std, np.float32(1) / std

    x = randn(7, 129)
    fused, unfused = compile_both(fn, (x,))
    refs = fn(x.astype(np.float64))
    for y, yu, ref in zip(fused(x), unfused(x), refs):
        assert close(y, yu, FUSED_RTOL, FUSED_ATOL) and close(y, ref, REF_RTOL, REF_ATOL)
    assert fused.stats["kernel_ops"] == {"rows": 1}


def test_rows_take_the_elementwise_producer():
    """A residual add before a layer norm joins its row kernel: one nest for both."""
    x, r = randn(7, 129), randn(7, 129)
    g, b = randn(129), randn(129)
    fused, _ = check(lambda x, r: layernorm(x + r, g, b), (x, r))
    assert fused.stats["kernels"] == 1


def test_column_reduction_is_not_fused():
    # positive entries: a column sum of standard normals can come near 0, and x / sum is then
    # ill-conditioned in float32 (NumPy's own float32 result misses the tolerance too)
    x = np.abs(randn(7, 129)) + 0.5
    fused, unfused = check(lambda x: x / x.sum(axis=0, keepdims=True), (x,))
    assert "rows" not in fused.stats["kernel_ops"]


@pytest.mark.parametrize("shape", [(1, 7, 1), (4, 33, 64), (2, 129, 17)], ids=str)
def test_scaled_operand_stays_out_of_the_matmul(shape):
    """q @ (k^T / c), as DeBERTa writes its scores: the division runs once per element of k
    (not once per row of q), and the matmul stays a matmul that tile-matmul tiles."""
    b, n, e = shape
    q, k = randn(b, n, e), randn(b, n + 3, e)
    fused, _ = check(lambda q, k: q @ (np.swapaxes(k, -1, -2) / 8.0), (q, k))
    assert fused.stats["kernels"] == 2
    assert "aicc.tiled" in fused.ir("loops")


@pytest.mark.parametrize("b, s, h, d", [(1, 7, 2, 4), (2, 33, 3, 16), (1, 129, 2, 8)], ids=str)
def test_head_split_matmuls_stay_tiled(b, s, h, d):
    """Batched matmuls over heads split off by a reshape and a transpose, as in BERT's
    attention when it stays unfused (a mask known only at run time): q_h @ k_h^T and
    scores @ v_h. Each transpose runs once as a copy, and both matmuls stay matmuls that
    tile-matmul tiles. Before, q's transpose fused into the scores and left them a plain loop
    nest: 41% of BERT-base's time."""
    q, k, v = randn(b, s, h * d), randn(b, s, h * d), randn(b, s, h * d)

    def heads(t):
        return np.transpose(t.reshape(b, s, h, d), (0, 2, 1, 3))

    def f(q, k, v):
        scores = heads(q) @ np.transpose(heads(k), (0, 1, 3, 2))
        return np.transpose(scores @ heads(v), (0, 2, 1, 3)).reshape(b, s, h * d)

    fused, _ = check(f, (q, k, v))
    assert fused.ir("loops").count("aicc.tiled") == 2


def test_onnx_softmax_logsoftmax_layernorm():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto as TP, helper, numpy_helper

    g, b = randn(129), randn(129)
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], axis=-1),
        helper.make_node("LogSoftmax", ["x"], ["l"], axis=-1),
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
    ]
    graph = helper.make_graph(
        nodes, "rows", [helper.make_tensor_value_info("x", TP.FLOAT, [7, 129])],
        [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in ("s", "l", "n")],
        [numpy_helper.from_array(g, "g"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = randn(7, 129)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    fused = compiler.compile(model)
    unfused = compiler.compile(model, fuse=False)
    for y, yu, r in zip(fused(x), unfused(x), ref):
        assert close(y, yu, FUSED_RTOL, FUSED_ATOL) and close(y, r, REF_RTOL, REF_ATOL)
    # softmax and log-softmax share the row max, so the three ops become at most three nests
    assert fused.stats["kernel_ops"].get("rows", 0) >= 1
    assert fused.stats["kernels"] <= 3 < unfused.stats["kernels"]


def test_cuda_pipeline_keeps_the_unfused_row_kernels():
    """CUDA: no fuse-rows (map-to-gpu fuses row nests itself); fuse-attention yes, for
    map-to-gpu's attention kernel (head dims up to 128), and no lower-attention."""
    cuda = {p.name: p for _, passes in stage_passes("cuda") for p in passes}
    assert "fuse-rows" not in cuda and "lower-attention" not in cuda
    assert cuda["fuse-attention"].max_head_dim == 128 and cuda["fuse-attention"].f32_only
    assert "fuse-attention" not in [p.name for _, passes in stage_passes("cuda", fuse=False)
                                    for p in passes]
    cpu = [p.name for _, passes in stage_passes("cpu") for p in passes]
    assert {"fuse-rows", "fuse-attention", "lower-attention"} <= set(cpu)
    off = [p.name for _, passes in stage_passes("cpu", fuse=False) for p in passes]
    assert "fuse-rows" not in off and "fuse-attention" not in off


# -- attention -------------------------------------------------------------------------------------


def attention_fn(L, S, E, kind="none", fill=-np.inf):
    """softmax(q k^T / sqrt(E) [masked]) v over leading batch dims, written out in NumPy."""
    causal = np.tril(np.ones((L, S), bool))
    scale = np.float32(1 / math.sqrt(E))

    def fn(q, k, v, *mask):
        s = q @ k.transpose(*range(k.ndim - 2), k.ndim - 1, k.ndim - 2) * scale
        if kind == "causal":
            s = np.where(causal, s, np.float32(fill))
        elif kind == "bool":
            s = np.where(mask[0] > 0, s, np.float32(fill))
        elif kind == "add":
            s = s + mask[0]
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    return fn


ATTENTION_SHAPES = [(1, 1, 1, 1), (7, 7, 64, 64), (129, 129, 64, 64), (7, 129, 1, 1), (129, 7, 64, 3),
                    (33, 200, 17, 9)]


@pytest.mark.parametrize("L,S,E,F", ATTENTION_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "add"])
def test_attention_is_one_kernel(L, S, E, F, kind):
    H = 2
    q, k, v = randn(H, L, E), randn(H, S, E), randn(H, S, F)
    extra = ()
    if kind == "bool":
        keep = rng.random((L, S)) < 0.6
        keep[:, 0] = True
        extra = (keep.astype(np.float32),)
    elif kind == "add":
        m = np.where(rng.random((L, S)) < 0.6, 0.0, -np.inf).astype(np.float32)
        m[:, 0] = 0.0
        extra = (m + randn(L, S, scale=0.5),)
    args = (q, k, v, *extra)
    fused, unfused = check(attention_fn(L, S, E, kind), args)
    assert fused.stats["kernel_ops"].get("aicc_fused.attention") == 1
    assert fused.stats["kernels"] == (2 if kind == "bool" else 1)  # + the mask's compare
    assert unfused.stats["kernels"] >= 8  # tile-matmul folds both matmuls' zero fills (CPU)
    tensor_ir = fused.ir("tensor")
    assert ("causal" in tensor_ir) == (kind == "causal")
    assert 'aicc.kernel = "attention"' in fused.ir("loops")


def test_attention_row_tile_follows_the_vector_registers():
    """lower-attention's register tile takes 8 query rows with AVX-512's 32 vector registers,
    6 with AVX2's 16 (12 accumulators; 8 rows would spill): the cpu target hands the pass its
    vector width, and the score buffer shows the rows. 13 rows: a last tile of 1 row (5 of 8,
    1 of 6)."""
    from compiler.stages import CompileOptions
    from compiler.targets import get_target
    from compiler.targets.cpu.machine import cpu_machine

    for cpu, bits in (("x86-64-v3", 256), ("skylake-avx512", 512)):
        stages = get_target("cpu").pipeline(CompileOptions(target="cpu", target_cpu=cpu))
        lower = next(p for _, passes in stages for p in passes if p.name == "lower-attention")
        assert lower.vector_bits == bits, cpu
    L, S, E = 13, 150, 64
    q, k, v = randn(2, L, E), randn(2, S, E), randn(2, S, 64)
    want = attention_fn(L, S, E, "causal")(q, k, v)
    for cpu in ("x86-64-v3", "host"):
        m = compiler.compile(attention_fn(L, S, E, "causal"), (q, k, v), target_cpu=cpu)
        rows = 8 if cpu_machine(cpu).vector_bits >= 512 else 6
        assert f"memref<{rows}x128xf32>" in m.ir("loops"), cpu
        assert close(m(q, k, v), want, REF_RTOL, REF_ATOL)


@pytest.mark.parametrize("rows,cols", [(6, 16), (8, 32), (5, 32)], ids=lambda v: str(v))
def test_attention_register_tiles_on_any_host(monkeypatch, rows, cols):
    """Each register tile lower-attention can take (AVX2's 6 rows x 16 keys, AVX-512's 8 x
    32, an odd row count) matches the reference on odd shapes, whatever this host's vector
    width: the tile is forced on the pass, so an AVX2-only host runs the wide tile too
    (spilling, the same arithmetic). The loop over e carries rows x cols sums; F = 40 and 48
    take a 32-column accumulator tile, then 16 columns, then a tail (F = 40)."""
    from compiler.targets.cpu import lower_attention as la

    def apply(self, ctx, op):
        for o in list(op.walk()):
            if isinstance(o, la.AttentionOp):
                la.lower(o, rows, cols)

    monkeypatch.setattr(la.LowerAttention, "apply", apply)
    monkeypatch.setenv("AICC_CACHE", "0")
    carried = "-> (" + "f32, " * (rows * cols - 1) + "f32)"
    for L, S, E, F, kind in ((13, 129, 64, 64, "causal"), (7, 137, 17, 48, "none"), (1, 1, 1, 1, "none"),
                             (33, 200, 64, 40, "add")):
        q, k, v = randn(2, L, E), randn(2, S, E), randn(2, S, F)
        extra = ()
        if kind == "add":
            m = np.where(rng.random((L, S)) < 0.6, 0.0, -np.inf).astype(np.float32)
            m[:, 0] = 0.0
            extra = (m + randn(L, S, scale=0.5),)
        fused, _ = check(attention_fn(L, S, E, kind), (q, k, v, *extra))
        if E > 1:  # (a loop of one e is folded away)
            assert carried in fused.ir("loops"), (rows, cols, L, S, E, F)


def test_attention_matches_the_op_reference():
    """The dialect's own reference semantics agree with the compiled kernel (and causal rows
    attend to keys up to themselves, top-left aligned, when L != S)."""
    L, S, E = 7, 12, 5
    q, k, v = randn(3, L, E), randn(3, S, E), randn(3, S, 4)
    fused = compiler.compile(attention_fn(L, S, E, "causal"), (q, k, v))
    ref = attention_reference(q, k, v, scale=1 / math.sqrt(E), causal=True)
    assert close(fused(q, k, v), ref, REF_RTOL, REF_ATOL)


def test_attention_large_logits_and_fully_masked_rows():
    """Scores of +-1e4 (online softmax rescales across key blocks without overflow); a query
    row whose keys are all masked gives NaN like the unfused softmax (0/0)."""
    L, S, E = 129, 200, 8
    q, k, v = randn(2, L, E, scale=60.0), randn(2, S, E, scale=60.0), randn(2, S, 3)
    fn = attention_fn(L, S, E, "none")
    fused, unfused = compile_both(fn, (q, k, v))
    y, yu, ref = fused(q, k, v), unfused(q, k, v), fn(*f64((q, k, v)))
    # Scores reach ~4e3, where one float32 ulp is 2.4e-4: both compiles round each score
    # (FMA or not) within a few of those, and the weights exp(s - max) move as much.
    s_max = float(np.abs(q @ k.transpose(0, 2, 1)).max()) / math.sqrt(E)
    tol = 8 * 2.0**-24 * s_max
    assert close(y, yu, tol, tol) and close(y, ref, tol, tol) and np.isfinite(y).all()
    keep = (rng.random((L, S)) < 0.5).astype(np.float32)
    keep[3, :] = 0  # row 3 sees nothing
    q, k = randn(2, L, E), randn(2, S, E)
    fused, _ = check(attention_fn(L, S, E, "bool"), (q, k, v, keep))
    y = fused(q, k, v, keep)
    assert np.isnan(y[:, 3]).all() and not np.isnan(np.delete(y, 3, axis=1)).any()


def test_attention_finite_fill_is_a_mask_not_causal():
    """A tril mask filled with -1e9 is not skipped like -inf: it stays a mask."""
    L = 33
    q, k, v = randn(2, L, 16), randn(2, L, 16), randn(2, L, 16)
    fused, _ = check(attention_fn(L, L, 16, "causal", fill=-1e9), (q, k, v))
    assert "causal" not in fused.ir("tensor") and 'mask = "keep"' in fused.ir("tensor")


def test_attention_example():
    import runpy
    from pathlib import Path

    ns = runpy.run_path(str(Path(__file__).parent.parent / "examples" / "attention.py"))
    args = ns["example_inputs"]()
    fused, unfused = check(ns["model"], args)
    assert fused.stats["kernels"] == 1 < unfused.stats["kernels"]
    assert fused.stats["intermediate_bytes"] == 0  # no score matrix anywhere


def mha(S, H, E, causal=True):
    """Causal multi-head self-attention with projections, heads split and merged by
    reshape + transpose, in NumPy."""
    D = H * E
    wq, wk, wv, wo = (randn(D, D, scale=1 / math.sqrt(D)) for _ in range(4))
    mask = np.tril(np.ones((S, S), bool))

    def fn(x):
        def heads(t):
            return t.reshape(S, H, E).transpose(1, 0, 2)

        q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
        s = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(E))
        if causal:
            s = np.where(mask, s, np.float32(-np.inf))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        return (p @ v).transpose(1, 0, 2).reshape(S, D) @ wo

    return fn


@pytest.mark.parametrize("S", [1, 7, 129])
def test_multi_head_attention_reads_heads_in_place(S):
    """The head split/merge transposes fold into the attention op: no transpose kernel."""
    fn = mha(S, 4, 16)
    x = randn(S, 64)
    fused, unfused = check(fn, (x,))
    kinds = fused.stats["kernel_ops"]
    assert kinds.get("aicc_fused.attention") == 1
    assert "aicc.transpose" not in fused.ir("tensor")
    # the 4 projections (a matmul and its zero fill each) and the attention: no transpose copies
    assert "linalg.generic" not in kinds and fused.stats["kernels"] <= 9
    assert "causal" in fused.ir("tensor")


def test_onnx_attention_written_out():
    """MatMul, Transpose, Div, Add (mask), Softmax, MatMul from ONNX: one attention kernel."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto as TP, helper, numpy_helper

    H, L, E = 2, 9, 8
    mask = np.where(np.tril(np.ones((L, L), bool)), 0, -np.inf).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Div", ["s", "c"], ["sc"]),
        helper.make_node("Add", ["sc", "mask"], ["t"]),
        helper.make_node("Softmax", ["t"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info(n, TP.FLOAT, [H, L, E]) for n in ("q", "k", "v")]
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                              [numpy_helper.from_array(np.float32(math.sqrt(E)), "c"),
                               numpy_helper.from_array(mask, "mask")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    q, k, v = randn(H, L, E), randn(H, L, E), randn(H, L, E)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"q": q, "k": k, "v": v})[0]
    fused, unfused = compiler.compile(model), compiler.compile(model, fuse=False)
    y, yu = fused(q, k, v), unfused(q, k, v)
    assert close(y, yu, FUSED_RTOL, FUSED_ATOL) and close(y, ref, REF_RTOL, REF_ATOL)
    assert fused.stats["kernels"] == 1 and "causal" in fused.ir("tensor")  # the 0/-inf constant


# -- a transformer encoder layer written out in NumPy ---------------------------------------------


def encoder_layer(S=128, D=256, H=4, F=1024):
    """Post-norm encoder layer (self-attention, add & norm, ReLU FFN, add & norm), no mask."""
    E = D // H
    wq, wk, wv, wo = (randn(D, D, scale=1 / math.sqrt(D)) for _ in range(4))
    bq, bk, bv, bo = (randn(D, scale=0.1) for _ in range(4))
    w1, b1, w2, b2 = randn(D, F, scale=1 / math.sqrt(D)), randn(F, scale=0.1), randn(F, D, scale=1 / math.sqrt(F)), randn(D, scale=0.1)
    g1, be1, g2, be2 = (randn(D, scale=0.1) + 1, randn(D, scale=0.1), randn(D, scale=0.1) + 1, randn(D, scale=0.1))

    def fn(x):
        def heads(t):
            return t.reshape(S, H, E).transpose(1, 0, 2)

        q, k, v = heads(x @ wq + bq), heads(x @ wk + bk), heads(x @ wv + bv)
        s = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(E))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        a = (p @ v).transpose(1, 0, 2).reshape(S, D)
        x = layernorm(x + a @ wo + bo, g1, be1)
        h = np.maximum(x @ w1 + b1, np.float32(0))
        return layernorm(x + h @ w2 + b2, g2, be2)

    return fn


def test_encoder_layer_kernel_count():
    """The issue's encoder layer (d_model 256, 4 heads, ffn 1024, sequence 128), written out in
    NumPy: attention is one kernel, each add & norm one row kernel, and each of the 6 matmuls
    one kernel, its bias or residual start and (FFN) its ReLU folded in by tile-matmul: 9
    kernels, down from 53 (the issue's bar: at most 12)."""
    fn = encoder_layer()
    x = randn(128, 256)
    fused, unfused = check(fn, (x,))
    kinds = fused.stats["kernel_ops"]
    assert kinds == {"aicc_fused.attention": 1, "rows": 2, "linalg.matmul": 6}, kinds
    assert fused.stats["kernels"] == 9 < unfused.stats["kernels"]
