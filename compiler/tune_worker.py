"""The autotuner's measuring process: `python -m compiler.tune_worker`.

Reads one JSON job per line on stdin, {"module": MLIR text, "func": name, "schedule": {...},
"threads": n, "target_cpu": name, "min_s": seconds}, compiles the module (one matmul-like op,
weights stripped to splats) with that schedule (or a whole model with the schedules of the
tuning record in "cache_dir"), fills its splat weights and its inputs with
random values, and writes one JSON line: {"ms": best time of the runs} or {"error": text}.
The tuner runs it as a child process with a timeout per job, so a candidate that crashes or
hangs the compiler or the code costs that candidate only.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def _fill_weights(module) -> None:
    """Give every splat constant of more than one element random values (the tuner strips
    weights; a splat could be folded, and timing never depends on the values)."""
    from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr

    from compiler.dialects import aicc

    rng = np.random.default_rng(0)
    for op in module.walk():
        if isinstance(op, aicc.ConstantOp):
            t = op.value.get_type()
            n = int(np.prod(t.get_shape()))
            dtype = aicc.numpy_dtype(t.element_type)
            if n > 1 and len(op.value.data.data) == dtype.itemsize:
                values = rng.standard_normal(n).astype(dtype) if dtype.kind == "f" else \
                    rng.integers(0, 2, n).astype(dtype)
                op.value = DenseIntOrFPElementsAttr(t, BytesAttr(values.tobytes()))


def measure(job: dict) -> float:
    from xdsl.parser import Parser

    from compiler.lowering.pipeline import make_context
    from compiler.pipeline import CompileOptions, compile_module

    module = Parser(make_context(), job["module"]).parse_module()
    _fill_weights(module)
    options = CompileOptions("cpu", job["threads"], schedule=job["schedule"],
                             target_cpu=job.get("target_cpu"))
    m = compile_module(module, job["func"], options=options, use_cache=False)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f"
              else np.zeros(shape, dtype) for shape, dtype in m.input_types]
    m(*inputs)  # warm up: pages, caches
    best, total, runs = float("inf"), 0.0, 0
    while runs < 3 or total < job.get("min_s", 0.1):
        t0 = time.perf_counter()
        m(*inputs)
        dt = time.perf_counter() - t0
        best, total, runs = min(best, dt), total + dt, runs + 1
        if runs >= 200:
            break
    return best * 1e3


def main() -> None:
    os.environ["AICC_CACHE"] = "0"  # each candidate is compiled, never looked up
    for line in sys.stdin:
        job = json.loads(line)
        if job.get("cache_dir"):  # a whole model with the tuning record found there
            os.environ["AICC_CACHE_DIR"] = job["cache_dir"]
        if job.get("crash"):  # test hook: a candidate that takes the process down
            os._exit(3)
        try:
            result = {"ms": measure(job)}
        except Exception as e:  # noqa: BLE001 - any failure discards this candidate only
            result = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
