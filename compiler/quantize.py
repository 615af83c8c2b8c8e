"""Post-training int8 quantization with calibration: `compiler.quantize`.

    q = compiler.quantize(model, calibration_data, example_inputs=None, method="minmax")
    y = q(x); q.stats["quantized_ops"]; print(q.quant_report())

1. The model is imported by its frontend (any model `compiler.compile` takes) and its graph is
   simplified (constants folded, transposes folded into matmul flags).
2. Every float matmul whose rhs is a 2-D constant (a linear layer's weight) is a candidate.
   The float model, compiled with those matmuls' inputs as extra outputs, runs over
   `calibration_data`; each input's range is estimated by `method`:
   - "minmax": the observed minimum and maximum (asymmetric, with a zero point);
   - "percentile": the `percentile`-th and (100 - `percentile`)-th percentiles;
   - "entropy": the clipping threshold of |x| whose 128-level quantization loses the least
     information (the KL divergence of the histograms, as TensorRT calibrates), symmetric.
3. Weights are quantized symmetrically, per output column (`per_channel`) or per tensor, at
   compile time, within [-127, 127], or with `reduce_range` within [-63, 63] (7 bits, as
   onnxruntime's reduce_range: on a CPU without VNNI the int8 kernel then multiplies them with
   vpmaddubsw, twice the products per instruction of its exact 8-bit kernel, at the cost of
   one bit of weight precision; with `int8_saturation`, 8-bit weights take vpmaddubsw too, its
   int16 pair sums saturating as in ONNX Runtime's kernels there: see compiler.compile);
   activations per tensor. The graph gets quantize / dequantize pairs around
   each candidate, which quantize-matmul turns into int8 x int8 -> int32 matmuls with a float
   epilogue (scale, bias), and the result is compiled as usual. Convs run as int8 im2col
   GEMMs in NHWC; the quantize of a layer's input then moves up past layout changes and max
   pools to the conv that produced it and fuses with that conv's epilogue (int32 bias, relu,
   requantization: `RequantizeInTheGemm`), so that int8 activations pass between the layers
   as in a QDQ graph.

`quant_report()` gives each quantized layer's SQNR: its float output against its int8 output
on the first calibration batch, each layer fed the float model's own input to it, so a bad
layer shows on its own row rather than through the error it passes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriter, PatternRewriteWalker, RewritePattern,
                                   op_type_rewrite_pattern)

from compiler import ops
from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc_quant import QMAX, QMIN, DequantizeOp, QuantizeOp
from compiler.lowering.dynamic_quantize import symmetric_weights as _weights
from compiler.lowering.quantize_conv import (TO_NCHW, TO_NHWC, hw_pad, im2col_matmul, max_pool_of,
                                             nhwc_pad, nhwc_pool)
from compiler.errors import CompileError

METHODS = ("minmax", "percentile", "entropy")
SAMPLES_PER_TENSOR = 1 << 20  # values kept per calibrated tensor for percentile / entropy


@dataclass
class LayerQuant:
    """One quantized matmul: where it came from, its parameters and its SQNR (dB)."""

    index: int
    origin: str
    shape: tuple[int, int]  # (K, N) of its weight (a conv: (C*KH*KW, O))
    act_scale: float
    act_zero_point: int
    weight_scales: np.ndarray
    sqnr_db: float = float("nan")
    kind: str = "matmul"


@dataclass
class QuantizationReport:
    method: str
    per_channel: bool
    batches: int
    layers: list[LayerQuant] = field(default_factory=list)
    reduce_range: bool = False
    saturation: bool = False  # int8_saturation

    def table(self) -> str:
        lines = [f"int8 quantization: {len(self.layers)} layer(s), activations per tensor ({self.method}, "
                 f"{self.batches} calibration batch(es)), weights {'per channel' if self.per_channel else 'per tensor'}"
                 f"{' in 7 bits' if self.reduce_range else ''}{_saturation_note(self.saturation)}",
                 f"{'#':>3}  {'layer':<7} {'weight':>11}  {'act scale':>10}  {'zp':>4}  {'SQNR dB':>8}  origin"]
        for q in self.layers:
            lines.append(f"{q.index:>3}  {q.kind:<7} {q.shape[0]:>5}x{q.shape[1]:<5}  {q.act_scale:>10.4g}  "
                         f"{q.act_zero_point:>4}  {q.sqnr_db:>8.2f}  {q.origin or '-'}")
        return "\n".join(lines)


def _candidates(fop: func.FuncOp) -> list:
    """The matmuls with a constant 2-D weight and the convolutions (groups 1) with a constant
    weight, float32, in program order."""
    out = []
    for op in fop.body.block.ops:
        if isinstance(op, aicc.MatmulOp) and not op.trans_lhs:
            x, w = op.lhs, op.rhs
            if len(aicc.shape_of(w)) != 2:
                continue
        elif isinstance(op, aicc_nn.Conv2dOp) and op.groups.value.data == 1:
            x, w = op.input, op.weight
        else:
            continue
        if isinstance(w.owner, aicc.ConstantOp) and aicc.element_type_of(w) == f32 \
                and aicc.element_type_of(x) == f32:
            out.append(op)
    return out


def _input(op) -> SSAValue:
    return op.input if isinstance(op, aicc_nn.Conv2dOp) else op.lhs


def _int8_conv(op: aicc_nn.Conv2dOp, scale: float, zp: int, qw: np.ndarray, w_scale: np.ndarray) -> list:
    """conv2d as an int8 im2col: the NCHW input is quantized once, into NHWC (one pass over it,
    where quantizing the gathered windows would quantize each value KH*KW times; the
    frontend's zero padding comes after, as the zero point, so the quantize fuses with the ops
    before it), then one aicc.tensor_op gathers its int8 windows,
    cols[n, p, q, i, j, c] = xq[n, s p + d i, s q + d j, c], whose rows copy runs of KW*C
    contiguous bytes; the (N*OH*OW, KH*KW*C) rows times the (O, KH*KW*C) weight run in
    matmul_integer, scaled per output channel, then back to NCHW. Zero padding is the zero
    point exactly (0.0 quantizes to it), so it still contributes nothing."""
    o = qw.shape[0]
    _, _, oh, ow = aicc.shape_of(op.result)
    (sh, sw), (dh, dw) = aicc_nn.int_values(op.strides), aicc_nn.int_values(op.dilations)
    x, pad = op.input, op.input.owner
    zero_pad = isinstance(pad, aicc_nn.PadOp) and pad.value.value.data == 0.0 and hw_pad(pad)
    if zero_pad:  # quantize the unpadded input, pad the int8 one with the zero point (what 0.0 gives)
        x = pad.input
    nhwc = aicc.TransposeOp(x, list(TO_NHWC))
    new: list = [nhwc, QuantizeOp(nhwc.result, [scale], [zp])]
    if zero_pad:
        new.append(nhwc_pad(new[-1].results[0], pad, zp))
    gemm = im2col_matmul(new[-1].results[0], zp, qw, (sh, sw), (dh, dw), (oh, ow))
    f = aicc.CastOp(gemm[-1].result, f32)
    sc = aicc.ConstantOp.from_array((scale * np.broadcast_to(w_scale, (o,))).astype(np.float32))
    y = aicc.MulOp(f.result, sc.result)
    back = aicc.ReshapeOp(y.result, (aicc.shape_of(op.input)[0], oh, ow, o))
    nchw = aicc.TransposeOp(back.result, list(TO_NCHW))
    return [*new, *gemm, f, sc, y, back, nchw]


def _sink_to_nchw(block, t: aicc.TransposeOp) -> None:
    """Move an int8 conv's NHWC -> NCHW transpose `t` past the layout-free ops after it, so
    that consecutive int8 convs pass their activations on in NHWC: an elementwise unary op
    (relu), an elementwise op with a constant (a bias), a pad of H and W, and a pool (as an
    NHWC aicc.tensor_op reduction) run on the NHWC value, and the next int8 conv's
    NCHW -> NHWC transpose cancels against it. The transpose stays in front of anything else,
    after the pools: on the smaller tensor."""
    v = t.input
    for use in list(t.result.uses):
        u = use.operation
        if isinstance(u, aicc.TransposeOp) and tuple(TO_NCHW[i] for i in u.perm) == (0, 1, 2, 3):
            u.result.replace_all_uses_with(v)
            block.erase_op(u)
            continue
        if isinstance(u, aicc.UnaryOp):
            new = type(u).create(operands=[v], result_types=[v.type], attributes=dict(u.attributes),
                                 properties=dict(u.properties))
        elif isinstance(u, aicc.BinaryOp) and aicc.shape_of(u.result) == aicc.shape_of(t.result) \
                and all(isinstance(x.owner, aicc.ConstantOp) for x in u.operands if x is not t.result):
            def nhwc(x):  # the constant operand (a conv bias), broadcast to rank 4 and permuted
                if x is t.result:
                    return v, []
                a = aicc.numpy_from_dense(x.owner.value)
                k = aicc.ConstantOp.from_array(np.ascontiguousarray(a.reshape((1,) * (4 - a.ndim) + a.shape)
                                                                   .transpose(TO_NHWC)))
                return k.result, [k]
            (lhs, ka), (rhs, kb) = nhwc(u.lhs), nhwc(u.rhs)
            block.insert_ops_before([*ka, *kb], u)
            new = type(u)(lhs, rhs)
        elif isinstance(u, aicc_nn.PadOp) and hw_pad(u):
            new = nhwc_pad(v, u, u.value.value.data)
        elif isinstance(u, aicc_nn.Pool2dOp):
            new = nhwc_pool(v, u)
        else:
            continue
        back = aicc.TransposeOp(new.results[0], list(TO_NCHW))
        block.insert_ops_before([new, back], u)
        u.results[0].replace_all_uses_with(back.result)
        block.erase_op(u)
        _sink_to_nchw(block, back)
    if not t.result.uses:
        block.erase_op(t)


class QuantizeBeforeLayout(RewritePattern):
    """quantize(transpose or reshape(x)) per tensor is transpose or reshape(quantize(x)): the
    quantize moves up towards the op that produced x, and the layout change moves int8."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: QuantizeOp, rewriter: PatternRewriter) -> None:
        t = op.input.owner
        params = op.per_tensor()
        if not isinstance(t, aicc.TransposeOp | aicc.ReshapeOp) or params is None or not t.results[0].has_one_use():
            return
        q = QuantizeOp(t.operands[0], [params[0]], [params[1]])
        if isinstance(t, aicc.TransposeOp):
            new = aicc.TransposeOp(q.result, list(t.perm))
            new.attributes.update(t.attributes)
        else:
            new = aicc.ReshapeOp(q.result, aicc.shape_of(t.results[0]))
        rewriter.replace(op, [q, new])
        rewriter.erase(t)


class QuantizeBeforeMaxPool(RewritePattern):
    """quantize(max pool(x)) per tensor is max pool(quantize(x)): quantize never reverses an
    order (rounding and clamping are monotonic), so max commutes with it, exactly. The pool
    then reads and writes int8, and the quantize meets the conv that produced x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: QuantizeOp, rewriter: PatternRewriter) -> None:
        from compiler.dialects.aicc_index import TensorOp

        pool_op = op.input.owner
        pool, params = max_pool_of(pool_op), op.per_tensor()
        if pool is None or params is None or not op.input.has_one_use():
            return
        x, text, ranges = pool
        q = QuantizeOp(x, [params[0]], [params[1]])
        rewriter.replace(op, [q, TensorOp(text, [q.result], ranges, op.result.type)])
        rewriter.erase(pool_op)


class _RangeObserver:
    def __init__(self, method: str, percentile: float, rng: np.random.Generator):
        self.method, self.percentile, self.rng = method, percentile, rng
        self.lo, self.hi = np.inf, -np.inf
        self.samples: list[np.ndarray] = []
        self.kept = 0

    def observe(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32).reshape(-1)
        if not np.all(np.isfinite(x)):
            raise CompileError("quantize: a calibration batch gives a non-finite activation")
        self.lo, self.hi = min(self.lo, float(x.min(initial=0.0))), max(self.hi, float(x.max(initial=0.0)))
        if self.method != "minmax" and self.kept < SAMPLES_PER_TENSOR:
            take = x if x.size <= SAMPLES_PER_TENSOR - self.kept else \
                self.rng.choice(x, SAMPLES_PER_TENSOR - self.kept, replace=False)
            self.samples.append(take)
            self.kept += take.size

    def params(self) -> tuple[float, int]:
        """(scale, zero point) of the int8 activation."""
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)
        if self.method == "percentile":
            x = np.concatenate(self.samples)
            lo = min(float(np.percentile(x, 100 - self.percentile)), 0.0)
            hi = max(float(np.percentile(x, self.percentile)), 0.0)
        elif self.method == "entropy":
            t = entropy_threshold(np.abs(np.concatenate(self.samples)))
            return max(t, 1e-12) / QMAX, 0
        scale = max(hi - lo, 1e-12) / (QMAX - QMIN)
        zp = int(np.clip(np.rint(QMIN - lo / scale), QMIN, QMAX))
        return scale, zp


def entropy_threshold(a: np.ndarray, bins: int = 2048, levels: int = 128) -> float:
    """TensorRT's entropy calibration: the threshold T over a histogram of |x| such that
    quantizing [0, T] to `levels` levels (values beyond T clipped into the last bin) keeps the
    distribution closest to the original in KL divergence."""
    amax = float(a.max(initial=0.0))
    if amax == 0.0:
        return 0.0
    hist, edges = np.histogram(a, bins=bins, range=(0.0, amax))
    hist = hist.astype(np.float64)
    best, best_t = np.inf, amax
    for i in range(levels, bins + 1, 16):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()  # the clipped tail lands in the last kept bin
        # q: p's first i bins merged into `levels` groups, spread back over the non-empty bins
        groups = np.array_split(np.arange(i), levels)
        q = np.zeros(i)
        for g in groups:
            nonzero = hist[g] != 0
            if nonzero.any():
                q[g[nonzero]] = hist[g].sum() / nonzero.sum()
        mask = p > 0
        ps, qs = p / p.sum(), q / max(q.sum(), 1e-30)
        if np.any(qs[mask] == 0):
            continue
        kl = float(np.sum(ps[mask] * np.log(ps[mask] / qs[mask])))
        if kl < best:
            best, best_t = kl, float(edges[i])
    return best_t


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref.astype(np.float64) - got) ** 2))
    signal = float(np.sum(ref.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else 10.0 * np.log10(max(signal, 1e-300) / noise)


def _saturation_note(on: bool) -> str:
    """The reports' words for int8_saturation (their SQNRs come from exact integer sums)."""
    return "; int16 pair sums may saturate without VNNI (int8_saturation; SQNR of exact sums)" if on else ""


def quantize(model: Any, calibration_data: Iterable[Sequence[Any]], example_inputs: Sequence[Any] | None = None,
             *, method: str = "minmax", per_channel: bool = True, target: str = "cpu",
             threads: int | None = None, percentile: float = 99.99,
             input_shapes: dict[str, Sequence[int]] | None = None, reduce_range: bool = False,
             int8_saturation: bool = False, target_cpu: str | None = None):
    """An int8 `CompiledModel` of `model` (anything `compiler.compile` takes), calibrated on
    `calibration_data` (an iterable of input tuples, each like one call's inputs); see the
    module's docstring. `example_inputs` default to the first calibration batch. `target_cpu`
    and `int8_saturation` are compiler.compile's (cpu)."""
    from compiler.api import cpu_target_options, import_model, set_uint8_io
    from compiler.lowering.dynamic_quantize import REDUCED_QMAX
    from compiler.lowering.fold_constants import FoldConstants
    from compiler.lowering.pipeline import make_context
    from compiler.lowering.simplify import Simplify
    from compiler.pipeline import CompileOptions, compile_module
    from compiler.targets import get_target

    qmax = REDUCED_QMAX if reduce_range else QMAX
    if method not in METHODS:
        raise CompileError(f"quantize: method must be one of {', '.join(METHODS)}, got {method!r}")
    batches = [tuple(np.asarray(getattr(x, "numpy", lambda: x)()) for x in
                     (b if isinstance(b, (tuple, list)) else (b,))) for b in calibration_data]
    if not batches:
        raise CompileError("quantize: calibration_data is empty")
    if example_inputs is None:
        example_inputs = batches[0]
    options = CompileOptions(target, threads, target_cpu=target_cpu,
                             target_options=cpu_target_options(int8_saturation=int8_saturation))
    get_target(target).check_options(options)
    ctx = make_context()

    def imported(inputs):
        program = import_model(model, inputs, input_shapes)
        FoldConstants().apply(ctx, program.module)
        Simplify().apply(ctx, program.module)
        fop = next(o for o in program.module.ops
                   if isinstance(o, func.FuncOp) and o.sym_name.data == program.func_name)
        return program, fop

    def shapes(inputs):
        return [np.shape(getattr(x, "numpy", lambda: x)()) for x in inputs]

    program, fop = imported(example_inputs)
    module: ModuleOp = program.module
    candidates = _candidates(fop)
    locations = getattr(program, "locations", None) or {}

    # calibration: the float model (at the calibration batches' shapes) with every
    # candidate's input as an extra output
    if shapes(example_inputs) == shapes(batches[0]):
        probe = module.clone()
        pfop = next(o for o in probe.ops if isinstance(o, func.FuncOp) and o.sym_name.data == program.func_name)
    else:
        probe_program, pfop = imported(batches[0])
        probe = probe_program.module
    ret = pfop.body.block.last_op
    probed = [_input(op) for op in _candidates(pfop)]
    if len(probed) != len(candidates):
        raise CompileError("quantize: the model's graph differs between the calibration batches' shapes "
                           "and example_inputs' shapes; calibrate at the shapes of example_inputs")
    n_out = len(ret.operands)
    ret.operands = [*ret.operands, *probed]
    pfop.function_type = func.FunctionType.from_lists(
        list(pfop.function_type.inputs), [v.type for v in ret.operands])
    calib = compile_module(probe, program.func_name, output_is_tuple=True,
                           options=CompileOptions("cpu", threads), use_cache=False)
    rng = np.random.default_rng(0)
    observers = [_RangeObserver(method, percentile, rng) for _ in candidates]
    first_inputs: list[np.ndarray] = []
    for b, batch in enumerate(batches):
        outs = calib(*batch)
        for i, obs in enumerate(observers):
            obs.observe(outs[n_out + i])
            if b == 0:
                first_inputs.append(np.array(outs[n_out + i]))

    report = QuantizationReport(method, per_channel, len(batches), reduce_range=reduce_range,
                                saturation=int8_saturation)
    to_nchw: list[aicc.TransposeOp] = []  # each int8 conv's output transpose
    for i, (op, obs) in enumerate(zip(candidates, observers)):
        scale, zp = obs.params()
        x = first_inputs[i]
        xq = (np.clip(np.rint(x / np.float32(scale)) + zp, QMIN, QMAX) - zp) * scale
        if isinstance(op, aicc_nn.Conv2dOp):
            w = aicc.numpy_from_dense(op.weight.owner.value)
            o = w.shape[0]
            qw2, w_scale = _weights(w.reshape(o, -1), per_channel, 0, qmax)
            qw = qw2.reshape(w.shape)
            new = _int8_conv(op, scale, zp, qw, w_scale)
            fop.body.block.insert_ops_before(new, op)
            op.result.replace_all_uses_with(new[-1].result)
            fop.body.block.erase_op(op)
            if isinstance(op.input.owner, aicc_nn.PadOp) and not op.input.uses:
                fop.body.block.erase_op(op.input.owner)
            to_nchw.append(new[-1])
            conv = {"stride": aicc_nn.int_values(op.strides), "dilation": aicc_nn.int_values(op.dilations)}
            wq = qw.astype(np.float64) * (w_scale if per_channel else w_scale[0]).reshape(-1, 1, 1, 1)
            sqnr = _sqnr(ops.conv2d(x, w, **conv).astype(np.float64), ops.conv2d(xq, wq, **conv))
            report.layers.append(LayerQuant(i, locations.get(op, ""), (int(np.prod(w.shape[1:])), o), scale, zp,
                                            w_scale, sqnr, "conv2d"))
            continue
        n_axis = 0 if op.trans_rhs else 1
        w = aicc.numpy_from_dense(op.rhs.owner.value)
        qw, w_scale = _weights(w, per_channel, n_axis, qmax)
        q = QuantizeOp(op.lhs, [scale], [zp])
        dq = DequantizeOp(q.result, [scale], [zp])
        cw = aicc.ConstantOp.from_array(qw)
        dw = DequantizeOp(cw.result, list(w_scale), [0] * len(w_scale), n_axis if per_channel else -1)
        fop.body.block.insert_ops_before([q, dq, cw, dw], op)
        op.operands = [dq.result, dw.result, *op.operands[2:]]
        # the layer alone: float vs int8 on the float model's own input to it
        wt = w.T if op.trans_rhs else w
        wq = (qw.astype(np.float64) * (w_scale if per_channel else w_scale[0]).reshape((-1, 1) if n_axis == 0 else (1, -1)))
        wq = wq.T if op.trans_rhs else wq
        report.layers.append(LayerQuant(i, locations.get(op, ""), tuple(wt.shape), scale, zp, w_scale,
                                        _sqnr(x.astype(np.float64) @ wt, xq @ wq)))

    for t in to_nchw:
        _sink_to_nchw(fop.body.block, t)
    # each quantize moves up to the conv before it (past layout changes and max pools), where
    # quantize-matmul's RequantizeInTheGemm fuses it with the conv's epilogue, as in a QDQ
    # graph: int8 activations between the layers
    PatternRewriteWalker(GreedyRewritePatternApplier(
        [QuantizeBeforeLayout(), QuantizeBeforeMaxPool()])).rewrite_module(module)
    m = compile_module(module, program.func_name, output_is_tuple=program.output_is_tuple,
                       options=options, locations=locations)
    m.input_names = getattr(program, "input_names", None)
    m.output_names = getattr(program, "output_names", None)
    m.guards = list(getattr(program, "guards", None) or [])
    set_uint8_io(m, program)
    m.quantization = report
    m.stats["quantized_ops"] = m.ir("tensor").count("aicc.matmul_integer")  # matmuls and convs
    return m


@dataclass
class DynamicQuantizationReport:
    """compiler.quantize_dynamic's layers: each weight's shape, scales and the SQNR of its int8
    copy (activations have no fixed parameters to report)."""

    per_channel: bool
    reduce_range: bool = False
    layers: list[LayerQuant] = field(default_factory=list)
    saturation: bool = False  # int8_saturation

    def table(self) -> str:
        lines = [f"int8 dynamic quantization: {len(self.layers)} layer(s), activations per tensor at run time, "
                 f"weights {'per channel' if self.per_channel else 'per tensor'}"
                 f"{' in 7 bits' if self.reduce_range else ''}{_saturation_note(self.saturation)}",
                 f"{'#':>3}  {'weight':>11}  {'w scale min':>11}  {'max':>10}  {'w SQNR dB':>9}  origin"]
        for q in self.layers:
            lines.append(f"{q.index:>3}  {q.shape[0]:>5}x{q.shape[1]:<5}  {q.weight_scales.min():>11.4g}  "
                         f"{q.weight_scales.max():>10.4g}  {q.sqnr_db:>9.2f}  {q.origin or '-'}")
        return "\n".join(lines)


def quantize_dynamic(model: Any, example_inputs: Sequence[Any] | None = None, *, per_channel: bool = True,
                     reduce_range: bool = False, target: str = "cpu", threads: int | None = None,
                     input_shapes: dict[str, Sequence[int]] | None = None, int8_saturation: bool = False,
                     target_cpu: str | None = None):
    """An int8 `CompiledModel` of `model` (anything `compiler.compile` takes) with dynamic
    quantization, as onnxruntime.quantization.quantize_dynamic and
    torch.ao.quantization.quantize_dynamic: every float32 matmul of a constant 2-D weight (a
    linear layer, an ONNX MatMul or Gemm of an initializer) gets int8 weights, quantized
    symmetrically at compile time (per output channel, or per tensor without `per_channel`;
    in 7 bits with `reduce_range`, which the AVX2 kernel multiplies with vpmaddubsw, exactly and
    faster), and its
    activation is quantized per tensor in every call from its own range (uint8 with a
    zero point, DynamicQuantizeLinear's formula), inside the compiled model: no calibration
    data. The rest of the model stays float32. `m.stats["quantized_ops"]` counts the int8
    matmuls, `m.quant_report()` lists them. `target_cpu` and `int8_saturation` are
    compiler.compile's (cpu). See compiler/lowering/dynamic_quantize.py."""
    from compiler.api import cpu_target_options, import_model, set_uint8_io
    from compiler.lowering.dynamic_quantize import REDUCED_QMAX, DynamicQuantizeMatmul, candidate, linear_layer
    from compiler.lowering.fold_constants import FoldConstants
    from compiler.lowering.pipeline import make_context
    from compiler.lowering.simplify import Simplify
    from compiler.pipeline import CompileOptions, compile_module
    from compiler.targets import get_target

    options = CompileOptions(target, threads, target_cpu=target_cpu,
                             target_options=cpu_target_options(int8_saturation=int8_saturation))
    get_target(target).check_options(options)
    ctx = make_context()
    program = import_model(model, example_inputs, input_shapes)
    FoldConstants().apply(ctx, program.module)
    Simplify().apply(ctx, program.module)
    locations = getattr(program, "locations", None) or {}
    report = DynamicQuantizationReport(per_channel, reduce_range, saturation=int8_saturation)
    for op in program.module.walk():
        if isinstance(op, aicc.MatmulOp) and linear_layer(op) and not candidate(op):
            raise CompileError(f"quantize_dynamic: a linear layer of symbolic shape {op.lhs.type} "
                               f"({locations.get(op) or 'no location'}); int8 layers are compiled for static "
                               f"shapes: pass example_inputs or input_shapes")
        if isinstance(op, aicc.MatmulOp) and candidate(op):
            w = aicc.numpy_from_dense(op.rhs.owner.value)
            n_axis = 0 if op.trans_rhs else 1
            qw, w_scale = _weights(w, per_channel, n_axis, REDUCED_QMAX if reduce_range else QMAX)
            wq = qw.astype(np.float64) * (w_scale if per_channel else w_scale[0]).reshape(
                (-1, 1) if n_axis == 0 else (1, -1))
            report.layers.append(LayerQuant(len(report.layers), locations.get(op, ""),
                                            tuple((w.T if op.trans_rhs else w).shape), float("nan"), 0, w_scale,
                                            _sqnr(w, wq)))
    DynamicQuantizeMatmul(per_channel, reduce_range).apply(ctx, program.module)
    m = compile_module(program.module, program.func_name, output_is_tuple=program.output_is_tuple,
                       options=options, locations=locations)
    m.input_names = getattr(program, "input_names", None)
    m.output_names = getattr(program, "output_names", None)
    m.guards = list(getattr(program, "guards", None) or [])
    set_uint8_io(m, program)
    m.quantization = report
    m.stats["quantized_ops"] = m.ir("tensor").count("aicc.dynamic_matmul_integer")
    return m
