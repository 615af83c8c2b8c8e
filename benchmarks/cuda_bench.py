"""GPU benchmarks (`python benchmarks/run.py --target cuda`): aicc's CUDA target against torch.

Cases: matmul 1024 and 4096, gelu over 64M floats (against a device-to-device copy's GB/s, the
bandwidth bound), softmax 8192x8192, layer norm 8192x4096, examples/mlp.py. aicc's call takes
NumPy arrays, so its time includes the host<->device copies; torch is timed both that way
(from NumPy, back to NumPy) and on device-resident tensors. No assertion is made on any time.
Without a GPU this prints one line and exits 0. Results go to benchmarks/results/cuda.json.
"""

from __future__ import annotations

import json
import runpy
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _median(fn, sync, budget_s: float, min_runs: int = 5) -> float:
    fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < budget_s and len(times) < 100):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(args) -> int:
    from compiler.runtime.cuda import has_gpu

    if not has_gpu():
        print("benchmarks --target cuda: no NVIDIA GPU found; nothing to run")
        return 0
    try:
        import torch
    except ImportError:
        print("benchmarks --target cuda: torch is needed as the peer; nothing to run")
        return 0
    if not torch.cuda.is_available():
        print("benchmarks --target cuda: torch has no CUDA support here; nothing to run")
        return 0
    import numpy as np

    import compiler
    from compiler import ops

    quick = args.quick
    rng = np.random.default_rng(0)
    dev = torch.device("cuda")
    sync = torch.cuda.synchronize

    def randn(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    from workloads import layernorm, softmax

    n_gelu = (1 << 22) if quick else (1 << 26)
    big = 2048 if quick else 8192
    mlp = runpy.run_path(str(ROOT / "examples" / "mlp.py"))
    F = torch.nn.functional
    cases = [
        *[(f"matmul {n}", lambda a, b: a @ b, lambda a, b: a @ b, (randn(n, n), randn(n, n)),
           2 * n**3) for n in ((256, 1024) if quick else (1024, 4096))],
        (f"gelu {n_gelu} floats", lambda x: ops.gelu(x, approximate="tanh"),
         lambda x: F.gelu(x, approximate="tanh"), (randn(n_gelu),), None),
        (f"softmax {big}x{big}", softmax, lambda x: torch.softmax(x, -1), (randn(big, big),), None),
        (f"layernorm {big}x{big // 2}", layernorm,
         lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5), (randn(big, big // 2),), None),
        ("examples/mlp.py", mlp["model"], None, tuple(mlp["example_inputs"]()), None),
    ]
    rows = []
    for name, fn, torch_fn, inputs, flops in cases:
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        m = compiler.compile(fn, inputs, target="cuda")
        t_aicc = _median(lambda: m(*inputs), sync, args.budget)
        row = {"name": name, "aicc_ms": t_aicc * 1e3}
        if torch_fn is not None:
            dx = [torch.from_numpy(x).to(dev) for x in inputs]
            row["torch_device_ms"] = _median(lambda: torch_fn(*dx), sync, args.budget) * 1e3
            row["torch_with_copies_ms"] = _median(
                lambda: torch_fn(*[torch.from_numpy(x).to(dev) for x in inputs]).cpu(), sync,
                args.budget) * 1e3
        if flops:
            row["aicc_tflops"] = flops / t_aicc / 1e12
        if name.startswith("gelu"):
            src = torch.empty(n_gelu, device=dev)
            dst = torch.empty_like(src)
            t_copy = _median(lambda: dst.copy_(src), sync, args.budget)
            row["d2d_copy_GBps"] = 2 * 4 * n_gelu / t_copy / 1e9
        rows.append(row)
        print("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "cuda.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(0), "rows": rows}, indent=1))
    return 0
