"""Side-by-side CPU benchmarks: aicc against NumPy, at one thread and at all threads.

    python benchmarks/run.py                 # full sizes, threads 1 and all cores
    python benchmarks/run.py --quick         # small sizes (a smoke run)
    python benchmarks/run.py --only softmax,matmul_1024 --threads 1

Each thread count runs in its own process (BLAS reads its thread count at start-up), with
OPENBLAS/OMP/MKL_NUM_THREADS and AICC_NUM_THREADS set alike, and times aicc and NumPy on the
same inputs in that one process. It reports medians and the ratio numpy/aicc (> 1: aicc is
faster), checks that both agree, and writes benchmarks/results/cpu.json and cpu.md.
No assertion is made on any time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "AICC_NUM_THREADS")


def cases(quick: bool):
    """(name, numpy function, aicc function, inputs, work) for each benchmark."""
    import runpy

    import numpy as np

    from compiler import ops

    rng = np.random.default_rng(0)

    def randn(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    c = np.float32(np.sqrt(2 / np.pi))

    def gelu_np(x, w, b):  # what a NumPy user writes: every intermediate materialized
        y = x * w + b
        return 0.5 * y * (1 + np.tanh(c * (y + np.float32(0.044715) * y * y * y)))

    def gelu_aicc(x, w, b):
        return ops.gelu(x * w + b, approximate="tanh")

    from workloads import layernorm, softmax

    def matmul(a, b):
        return a @ b

    g = 1024 if quick else 4096
    rows = 1024 if quick else 4096
    mlp = runpy.run_path(str(ROOT / "examples" / "mlp.py"))
    out = [
        ("gelu(x*w+b) %dx%d" % (g, g), gelu_np, gelu_aicc, (randn(g, g), randn(g), randn(g)), ("bytes", 8 * g * g)),
        ("softmax %dx%d" % (rows, rows), softmax, softmax, (randn(rows, rows),), ("bytes", 8 * rows * rows)),
        ("layernorm %dx1024" % rows, layernorm, layernorm, (randn(rows, 1024),), ("bytes", 8 * rows * 1024)),
    ]
    for n in (256, 512) if quick else (256, 512, 1024, 2048):
        out.append((f"matmul {n}", matmul, matmul, (randn(n, n), randn(n, n)), ("flops", 2 * n**3)))
    out.append(("examples/mlp.py", mlp["model"], mlp["model"], tuple(mlp["example_inputs"]()), None))
    return out


def median_time(fn, args, budget_s: float, min_runs: int = 5) -> float:
    fn(*args)  # warm up
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < budget_s and len(times) < 200):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def torch_time(np_fn, inputs, budget_s: float) -> float | None:
    """Median time of np_fn's matmul in torch on the same inputs, if torch is installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(int(os.environ.get("AICC_NUM_THREADS", "1")))
    tensors = [torch.from_numpy(x) for x in inputs]
    with torch.no_grad():
        return median_time(np_fn, tensors, budget_s)


def peak_gflops() -> float | None:
    """FMA units x lanes x 2 x clock, for this process's thread count (benchmarks/peak.py)."""
    try:
        import peak
        from compiler.runtime.cpu import _init_llvm

        _init_llvm()
        import llvmlite.binding as llvm

        llvm.initialize_native_asmparser()
        lanes = peak.host_vector_lanes()
        clock = peak.measure_clock()
        units = round(peak.measure_fma(lanes) / (lanes * 2 * clock))
        threads = int(os.environ.get("AICC_NUM_THREADS", "1"))
        return units * lanes * 2 * clock * threads / 1e9
    except Exception:  # no peak on this platform (inline asm is x86): report none
        return None


def run_here(quick: bool, only: list[str] | None, budget_s: float) -> list[dict]:
    import numpy as np

    import compiler

    rows = []
    peak = peak_gflops()
    for name, np_fn, aicc_fn, inputs, work in cases(quick):
        if only and not any(o in name for o in only):
            continue
        t0 = time.perf_counter()
        m = compiler.compile(aicc_fn, inputs)
        compile_s = time.perf_counter() - t0
        out, ref = m(*inputs), np_fn(*inputs)
        err = float(np.max(np.abs(out.astype(np.float64) - ref)) / max(1.0, float(np.max(np.abs(ref)))))
        t_aicc = median_time(m, inputs, budget_s)
        t_np = median_time(np_fn, inputs, budget_s)
        row = {
            "name": name,
            "aicc_ms": t_aicc * 1e3,
            "numpy_ms": t_np * 1e3,
            "speedup_vs_numpy": t_np / t_aicc,
            "compile_s": compile_s,
            "max_scaled_err": err,
        }
        if work and work[0] == "bytes":
            row["aicc_GBps"] = work[1] / t_aicc / 1e9
        if work and work[0] == "flops":
            row["aicc_GFLOPs"] = work[1] / t_aicc / 1e9
            row["numpy_GFLOPs"] = work[1] / t_np / 1e9
            t_torch = torch_time(np_fn, inputs, budget_s)
            if t_torch is not None:  # torch (MKL / oneDNN) is the other peer for matmul
                row["torch_ms"] = t_torch * 1e3
                row["torch_GFLOPs"] = work[1] / t_torch / 1e9
                row["speedup_vs_torch"] = t_torch / t_aicc
            if peak:
                row["aicc_pct_of_peak"] = 100 * row["aicc_GFLOPs"] / peak
        rows.append(row)
        extra = ""
        if "aicc_GFLOPs" in row:
            extra = f"   {row['aicc_GFLOPs']:6.1f} GFLOP/s"
            if "torch_ms" in row:
                extra += f"   torch/aicc {row['speedup_vs_torch']:5.2f}x"
            if "aicc_pct_of_peak" in row:
                extra += f"   {row['aicc_pct_of_peak']:4.1f}% of peak"
        print(
            f"  {name:28s} aicc {t_aicc * 1e3:9.3f} ms   numpy {t_np * 1e3:9.3f} ms   "
            f"numpy/aicc {t_np / t_aicc:6.2f}x   err {err:.1e}{extra}",
            flush=True,
        )
    return rows


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes")
    p.add_argument("--only", help="comma-separated substrings of benchmark names")
    p.add_argument("--threads", help="comma-separated thread counts (default: 1 and all cores)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timing per measurement")
    p.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.target == "cuda":  # GPU benchmarks live apart: aicc vs torch on the device
        from cuda_bench import main as cuda_main  # not "cuda": that would shadow cuda-bindings

        return cuda_main(args)
    only = args.only.split(",") if args.only else None

    if args.child is not None:
        rows = run_here(args.quick, only, args.budget)
        print("JSON:" + json.dumps(rows))
        return 0

    ncpu = os.cpu_count() or 1
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, ncpu})
    machine = {"cpu": cpu_model(), "cores": ncpu, "python": platform.python_version()}
    print(f"aicc CPU benchmarks on {machine['cpu']} ({ncpu} cores)")
    results = {"machine": machine, "runs": {}}
    for t in threads:
        print(f"\n== {t} thread(s) ==", flush=True)
        env = dict(os.environ, **{v: str(t) for v in THREAD_VARS})
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, __file__, "--child", str(t), "--budget", str(args.budget)]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--only", args.only] if args.only else []
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
        lines = proc.stdout.splitlines()
        for line in lines:
            if not line.startswith("JSON:"):
                print(line)
        if proc.returncode != 0:
            print(f"benchmark process for {t} thread(s) failed (exit {proc.returncode})", file=sys.stderr)
            return proc.returncode
        results["runs"][str(t)] = json.loads(next(l for l in lines if l.startswith("JSON:"))[5:])

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cpu.json").write_text(json.dumps(results, indent=2))
    md = [f"# aicc CPU benchmarks\n\n{machine['cpu']}, {ncpu} cores, Python {machine['python']}\n"]
    md.append("Command: `python benchmarks/run.py" + (" --quick" if args.quick else "") + "`\n")
    for t, rows in results["runs"].items():
        md.append(f"\n## {t} thread(s)\n\n| benchmark | aicc ms | NumPy ms | NumPy/aicc |\n|---|---:|---:|---:|")
        for r in rows:
            md.append(f"| {r['name']} | {r['aicc_ms']:.3f} | {r['numpy_ms']:.3f} | {r['speedup_vs_numpy']:.2f}x |")
        mm = [r for r in rows if "aicc_GFLOPs" in r]
        if mm:
            md.append(f"\n| matmul | aicc GFLOP/s | NumPy GFLOP/s | torch GFLOP/s | torch/aicc | aicc % of peak |"
                      "\n|---|---:|---:|---:|---:|---:|")
            for r in mm:
                md.append(f"| {r['name']} | {r['aicc_GFLOPs']:.1f} | {r['numpy_GFLOPs']:.1f} | "
                          f"{r.get('torch_GFLOPs', float('nan')):.1f} | {r.get('speedup_vs_torch', float('nan')):.2f}x | "
                          f"{r.get('aicc_pct_of_peak', float('nan')):.0f}% |")
    (RESULTS / "cpu.md").write_text("\n".join(md) + "\n")
    print(f"\nwrote {RESULTS / 'cpu.json'} and {RESULTS / 'cpu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
