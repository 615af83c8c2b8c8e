"""Numerics bisection: which kernel of a compiled model computes wrong numbers, and where in
the user's model it came from.

`check_numerics(m, inputs, compile_fn)` takes the model's tensor-level function (the IR that
`m.ir("tensor")` prints, after the graph passes) and compiles it once more, for the same target
and options, with the result of every op as an extra output. One run on `inputs` then gives
what the compiled code computes for each op. Each op's result is compared with the reference
interpreter (compiler/reference.py) evaluated in float64 **on the compiled values of that op's
own operands**: every kernel is judged on the same inputs it saw, so an error never spreads to
the kernels after it and the first failing row is the culprit.

An op is a kernel here as the graph shows it (a conv, a matmul, an elementwise op): with every
intermediate an output, elementwise chains that would fuse into one loop are materialized one
by one, which is what makes each op's own error visible. The model's final outputs are checked
too, from the model as compiled (fused), against the reference run end to end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from compiler.dialects import aicc
from compiler.dialects.extract import op_module
from compiler.reference import REFERENCE_KERNELS, run_reference

RTOL = 1e-3  # float32 kernels against float64: summation order, polynomial exp/tanh/erf
ATOL_OF_SCALE = 1e-4  # absolute slack, as a fraction of the largest |reference| value
ATOL = 1e-6


@dataclass
class KernelCheck:
    index: int  # among the checked kernels, in program order
    op: str  # "aicc.conv2d"
    result: str  # the result's SSA name in m.ir("tensor"), e.g. "%12"
    origin: str  # the user's file:line, the ONNX node or torch node it came from ("" unknown)
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float  # max |compiled - reference| / max |reference|
    ok: bool

    @property
    def label(self) -> str:
        return f"#{self.index} {self.result} = {self.op}"


@dataclass
class NumericsReport:
    kernels: list[KernelCheck]
    outputs: list[tuple[float, bool]] = field(default_factory=list)  # (max abs, ok) per output
    loop_ir: str = ""  # the first failing kernel's loop IR, compiled alone

    @property
    def first_failure(self) -> KernelCheck | None:
        return next((k for k in self.kernels if not k.ok), None)

    @property
    def ok(self) -> bool:
        return self.first_failure is None and all(ok for _, ok in self.outputs)

    def table(self) -> str:
        rows = [("kernel", "source", "shape", "max abs err", "max rel err", "ok")]
        for k in self.kernels:
            rows.append((k.label, k.origin or "-", "x".join(map(str, k.shape)) or "scalar",
                         f"{k.max_abs:.3g}", f"{k.max_rel:.3g}", "ok" if k.ok else "FAIL"))
        for i, (err, ok) in enumerate(self.outputs):
            rows.append((f"output {i}", "(whole model, fused)", "", f"{err:.3g}", "",
                         "ok" if ok else "FAIL"))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
                         for r in rows)


def _func(module: ModuleOp, name: str) -> func.FuncOp:
    return next(o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == name)


def _checked(op: Operation) -> bool:
    return (type(op) in REFERENCE_KERNELS and not isinstance(op, aicc.ConstantOp)
            and len(op.results) == 1
            and isinstance(op.results[0].type, TensorType))


def _names(fn: func.FuncOp) -> dict[SSAValue, str]:
    """The SSA names xDSL's printer gives the function's values (%0, %1, ...), in order."""
    names, n = {}, 0
    for arg in fn.body.blocks.first.args:
        names[arg] = f"%{n}"
        n += 1
    for op in fn.body.walk():
        for r in op.results:
            names[r] = f"%{n}"
            n += 1
    return names


def _origins(body: list[Operation], origins: list[str]) -> dict[Operation, str]:
    """Each op's origin; an op a graph pass made (linear + bias, conv + batch norm folded)
    has none of its own and is shown near the first op using its result that has one, else
    near the op before it."""
    known = {op: origins[i] for i, op in enumerate(body) if i < len(origins) and origins[i]}
    out, last = {}, ""
    for op in body:
        if op in known:
            out[op] = last = known[op]
            continue
        users = [u.operation for r in op.results for u in r.uses if u.operation in known]
        near = known[users[0]] if users else last
        out[op] = f"near {near}" if near else ""
    return out


def _faulted(fn: func.FuncOp, value: SSAValue, delta: float) -> SSAValue:
    """Test hook: `value + delta` in place of `value` for every later use (a wrong kernel)."""
    dtype = aicc.numpy_dtype(aicc.element_type_of(value))
    const = aicc.ConstantOp.from_array(np.asarray(delta, dtype))
    add = aicc.AddOp(value, const.result)
    fn.body.blocks.first.insert_ops_after([const, add], value.owner)
    for use in list(value.uses):
        if use.operation is not add:
            use.operation.operands[use.index] = add.result
    return add.result


def _float64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _compare(got: np.ndarray, ref: np.ndarray) -> tuple[float, float, bool]:
    if got.size == 0:
        return 0.0, 0.0, True
    if ref.dtype.kind != "f":
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        return float(diff.max()), 0.0, bool((got == ref).all())
    ref = ref.astype(np.float64)
    got = got.astype(np.float64)
    finite = np.isfinite(ref)
    scale = float(np.abs(ref[finite]).max()) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        diff = np.abs(got - ref)
    same_special = ~finite & ((got == ref) | (np.isnan(got) & np.isnan(ref)))
    diff = np.where(same_special, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    ok = bool((diff <= ATOL + ATOL_OF_SCALE * scale + RTOL * np.abs(np.where(finite, ref, 0))).all())
    max_abs = float(diff.max())
    return max_abs, max_abs / scale if scale else max_abs, ok


def _held(x: np.ndarray) -> np.ndarray:
    """A uint8 array as the compiled code holds it: the int8 array x - 128."""
    return np.bitwise_xor(np.asarray(x), np.uint8(0x80)).view(np.int8)


def check_numerics(m, inputs: Sequence, compile_fn: Callable, *,
                   fault: tuple[int, float] | None = None) -> NumericsReport:
    """Check every kernel of the compiled model `m` on `inputs` (see the module docstring).
    `compile_fn(module, func_name, output_is_tuple, options)` compiles a tensor-level module
    (compiler.pipeline's compile_module). `fault=(index, delta)` is a test hook: the compiled
    code of checked kernel `index` adds `delta` to its result."""
    given = [np.ascontiguousarray(np.asarray(x.detach().cpu() if hasattr(x, "detach") else x))
             for x in inputs]
    # the kernels' own form of the model's uint8 inputs and outputs: int8 v - 128 (see __call__)
    u8_in, u8_out = getattr(m, "uint8_inputs", []), getattr(m, "uint8_outputs", [])
    inputs = [_held(x) if i in u8_in else x for i, x in enumerate(given)]
    module = m.stages.module("tensor").clone()
    origins = list(m.stages.origins)
    fn = _func(module, m.func_name)
    names = _names(fn)
    body = list(fn.body.walk())
    ops = [op for op in body if _checked(op)]
    origin_of = _origins(body, origins)
    ret = fn.body.blocks.first.last_op
    assert isinstance(ret, func.ReturnOp)
    n_out = len(ret.operands)
    values = {op: op.results[0] for op in ops}
    if fault is not None:
        values[ops[fault[0]]] = _faulted(fn, ops[fault[0]].results[0], fault[1])
    probes = list(dict.fromkeys(values.values()))  # each value once among the outputs
    new_ret = func.ReturnOp(*ret.operands, *probes)
    fn.body.blocks.first.insert_op_before(new_ret, ret)
    fn.body.blocks.first.erase_op(ret)
    fn.function_type = FunctionType.from_lists(fn.function_type.inputs.data,
                                               [v.type for v in new_ret.operands])
    options = replace(m.options, print_ir_after_all=None) if m.options is not None else None
    probe_model = compile_fn(module.clone(), m.func_name, True, options)  # passes rewrite it
    outs = probe_model(*inputs)
    computed = dict(zip(probes, outs[n_out:]))

    env: dict[SSAValue, np.ndarray] = dict(zip(fn.body.blocks.first.args, inputs))
    for op in body:  # constants' values, for the operands of the checked ops
        if isinstance(op, aicc.ConstantOp):
            env[op.result] = aicc.numpy_from_dense(op.value)
    for op, v in values.items():
        env[op.results[0]] = env[v] = computed[v]
    rows = []
    for i, op in enumerate(ops):
        operands = [env.get(v) for v in op.operands]
        if any(a is None for a in operands):  # an operand no kernel computes (nested op)
            continue
        with np.errstate(all="ignore"):
            ref = np.asarray(REFERENCE_KERNELS[type(op)](op, [_float64(a) for a in operands]))
        got = computed[values[op]]
        ref = ref.reshape(got.shape) if ref.size == got.size else ref
        max_abs, max_rel, ok = _compare(got, ref)
        rows.append(KernelCheck(i, op.name, names[op.results[0]], origin_of.get(op, ""),
                                got.shape, max_abs, max_rel, ok))

    whole = m(*given)
    whole = [_held(w) if i in u8_out else w for i, w in enumerate(whole if isinstance(whole, tuple) else (whole,))]
    refs = run_reference(m.stages.module("tensor"), [_float64(a) for a in inputs], m.func_name)
    outputs = [_compare(np.asarray(g), np.asarray(r))[::2] for g, r in zip(whole, refs)]
    report = NumericsReport(rows, outputs)
    bad = report.first_failure
    if bad is not None:
        report.loop_ir = _alone(ops[bad.index], compile_fn, options, m.func_name)
    return report


def _alone(op: Operation, compile_fn: Callable, options, name: str) -> str:
    """The loop IR of `op` compiled on its own (its tensor operands as arguments)."""
    return compile_fn(op_module(op, name), name, False, options).ir("loops")


__all__ = ["KernelCheck", "NumericsReport", "check_numerics"]
