"""The ONNX node test cases shipped in the onnx package, run through aicc.

Used by tests/test_onnx_conformance.py and runnable alone for the full table:

    python tests/onnx_conformance.py [OP ...]

A case is *run* when every op type in its graph is one aicc's importer supports. Its outcome is
  passed       every output matches the expected one within the case's rtol / atol;
  failed       a wrong answer, or an exception that is not a CompileError (a bug);
  unsupported  the importer refused it with UnsupportedOpError (a feature of a supported op
               that aicc does not have, e.g. an attribute value);
  skipped      its inputs or outputs have element types the pipeline does not compute
               (float16, bfloat16, strings, ...), or its opset is newer than 28 (older ones are
               upgraded to 13 by the importer).

Each case's inputs are its example inputs: an input an op needs at compile time (a shape, axes,
pads, k) is specialized on the case's value and checked again when the case runs.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

SUPPORTED_IO = {np.dtype(t) for t in (np.float32, np.int64, np.int32, np.bool_, np.int8, np.uint8)}


@dataclass
class Outcome:
    case: str
    op: str
    status: str  # passed / failed / unsupported / skipped
    detail: str = ""


def collect_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return collect_testcases(None)


def _all_op_names():
    import onnx.defs

    return sorted({s.name for s in onnx.defs.get_all_schemas()}, key=len, reverse=True)


_OP_NAMES: list[str] | None = None


def primary_op(case) -> str:
    """The op a case tests: the one node's type, or the op its name starts with (test_<op>...)."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    global _OP_NAMES
    if _OP_NAMES is None:
        _OP_NAMES = _all_op_names()
    name = case.name[len("test_"):].replace("_", "").lower()
    for op in _OP_NAMES:
        if name.startswith(op.lower()):
            return op
    return nodes[-1].op_type if nodes else "?"


def op_types(case) -> set[str]:
    return {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in case.model.graph.node}


def supported_cases(cases=None):
    from frontends.onnx_import import SUPPORTED_OPS

    cases = collect_cases() if cases is None else cases
    return [c for c in cases if c.kind == "node" and op_types(c) <= set(SUPPORTED_OPS) and c.model.graph.node]


def _array(x) -> np.ndarray:
    if isinstance(x, np.ndarray | np.generic):  # a NumPy scalar: a 0-d tensor
        return np.asarray(x)
    if type(x).__name__ == "TensorProto":
        from onnx import numpy_helper

        return np.asarray(numpy_helper.to_array(x))
    return np.asarray(x, dtype=object)  # sequences, maps, optionals


def run_case(case) -> Outcome:
    import compiler
    from compiler.errors import CompileError, UnsupportedOpError
    from frontends.onnx_import import MAX_OPSET

    op = primary_op(case)
    opset = max([o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")] or [0])
    if opset > MAX_OPSET:  # older opsets are upgraded by the importer (onnx.version_converter)
        return Outcome(case.name, op, "skipped", f"opset {opset}")
    inputs, expected = case.data_sets[0]
    inputs = [_array(x) for x in inputs]
    expected = [_array(x) for x in expected]
    for what, arrays in (("input", inputs), ("output", expected)):
        for a in arrays:
            if a.dtype not in SUPPORTED_IO:
                return Outcome(case.name, op, "skipped", f"{what} dtype {a.dtype}")
    rtol = case.rtol if case.rtol is not None else 1e-3
    atol = case.atol if case.atol is not None else 1e-7
    try:
        # aicc compiles for static shapes: an input an op needs at compile time (axes, shapes,
        # pads, k) is specialized on the case's value, which the compiled model checks per call
        m = compiler.compile(case.model, inputs)
    except UnsupportedOpError as e:
        return Outcome(case.name, op, "unsupported", str(e))
    except CompileError as e:
        return Outcome(case.name, op, "failed", f"CompileError: {e}")
    except Exception as e:  # a crash is a bug
        return Outcome(case.name, op, "failed", f"crash: {type(e).__name__}: {e}")
    try:
        out = m(*inputs)
    except Exception as e:
        return Outcome(case.name, op, "failed", f"run: {type(e).__name__}: {e}")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(expected):
        return Outcome(case.name, op, "failed", f"{len(outs)} outputs, expected {len(expected)}")
    for i, (o, r) in enumerate(zip(outs, expected)):
        if o.shape != r.shape:
            return Outcome(case.name, op, "failed", f"output {i}: shape {o.shape}, expected {r.shape}")
        if o.dtype != r.dtype:
            return Outcome(case.name, op, "failed", f"output {i}: dtype {o.dtype}, expected {r.dtype}")
        if r.dtype.kind == "f":
            ok = np.allclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(o, r)
        if not ok:
            err = np.max(np.abs(o.astype(np.float64) - r.astype(np.float64))) if r.size else 0
            return Outcome(case.name, op, "failed", f"output {i}: max abs err {err:.3g} (rtol {rtol}, atol {atol})")
    return Outcome(case.name, op, "passed")


def summarize(outcomes: list[Outcome]) -> str:
    per_op: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        per_op[o.op][o.status] += 1
    total = Counter(o.status for o in outcomes)
    lines = ["ONNX node conformance (onnx backend node test cases, first data set):",
             f"  {'op':28s} {'passed':>6s} {'failed':>6s} {'unsup':>6s} {'skip':>6s}"]
    for op in sorted(per_op):
        c = per_op[op]
        lines.append(f"  {op:28s} {c['passed']:6d} {c['failed']:6d} {c['unsupported']:6d} {c['skipped']:6d}")
    lines.append(f"  {'TOTAL':28s} {total['passed']:6d} {total['failed']:6d} {total['unsupported']:6d} {total['skipped']:6d}")
    skips = Counter(o.detail for o in outcomes if o.status == "skipped")
    if skips:
        lines.append("  skipped because of: " + ", ".join(f"{d} ({n})" for d, n in skips.most_common()))
    for o in outcomes:
        if o.status == "failed":
            lines.append(f"  FAILED {o.case}: {o.detail}")
    return "\n".join(lines)


if __name__ == "__main__":
    cases = supported_cases()
    if sys.argv[1:]:
        cases = [c for c in cases if primary_op(c) in sys.argv[1:] or c.name in sys.argv[1:]]
    outcomes = []
    for c in cases:
        o = run_case(c)
        outcomes.append(o)
        if o.status in ("failed", "unsupported") and "-v" in sys.argv:
            print(o.case, o.status, o.detail[:300])
    print(summarize(outcomes))
    for o in outcomes:
        if o.status == "unsupported":
            print(f"  unsupported {o.case}: {o.detail[:200]}")
