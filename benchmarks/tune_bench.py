"""Autotuning on shapes the heuristics never saw: the default schedules against the tuned ones,
side by side in one process, with the search's time; locally and over a local Ray cluster.

    python benchmarks/tune_bench.py                      # 1 thread, 40 s of search per model
    python benchmarks/tune_bench.py --budget 20 --only matmul --no-ray

Each model is compiled twice in a fresh cache folder: with no tuning record (the heuristic's
schedules), and with `tune=True` (the search writes the record, the compile reads it). Both
are then timed alternately in this process (median and best wall clock, and the calling
thread's CPU time). With Ray the search runs again in another fresh folder through
`tune="ray"`. Writes benchmarks/results/tune.md. No assertion is made on any time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from aot_bench import cpu_name  # noqa: E402
from conv_bench import timeit  # noqa: E402


def workloads():
    import torch

    rng = np.random.default_rng(0)
    w = rng.standard_normal((777, 555)).astype(np.float32)

    def matmul(x):
        return x @ w

    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(24, 24, 3, padding=1), torch.nn.ReLU()).eval()
    block = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0).eval()
    return {
        "matmul 333x777x555": (matmul, (rng.standard_normal((333, 777)).astype(np.float32),)),
        "conv 24ch 56x56 3x3": (conv, (torch.randn(1, 24, 56, 56),)),
        "transformer block b1 s128 d256": (block, (torch.randn(1, 128, 256),)),
    }


def run(name, model, inputs, threads, budget, reps, ray: bool) -> list[str]:
    import compiler

    arrays = tuple(np.asarray(x.numpy() if hasattr(x, "numpy") else x) for x in inputs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AICC_CACHE_DIR"] = str(Path(tmp) / "local")
        default = compiler.compile(model, inputs, threads=threads)
        t0 = time.perf_counter()
        tuned = compiler.compile(model, inputs, threads=threads, tune=True, tune_budget=budget)
        search_s = time.perf_counter() - t0
        report = tuned.tune_report
        print(report.table(), flush=True)
        np.testing.assert_allclose(tuned(*arrays), default(*arrays), rtol=1e-4, atol=1e-4)
        td, tt = timeit(lambda: default(*arrays), reps), timeit(lambda: tuned(*arrays), reps)
        td2, tt2 = timeit(lambda: default(*arrays), reps), timeit(lambda: tuned(*arrays), reps)
        d, t = min(td[0], td2[0]), min(tt[0], tt2[0])
        measured = sum(r.measured for r in report.kernels)
        rows.append(f"| {name} | local | {len(report.kernels)} | {measured} | {search_s:.1f} | "
                    f"{d:.3f} | {t:.3f} | {d / t:.2f}x | {tuned.stats['tuned']} |")
        if ray:
            os.environ["AICC_CACHE_DIR"] = str(Path(tmp) / "ray")
            t0 = time.perf_counter()
            rt = compiler.compile(model, inputs, threads=threads, tune="ray", tune_budget=budget)
            ray_s = time.perf_counter() - t0
            print(rt.tune_report.table(), flush=True)
            tr = min(timeit(lambda: rt(*arrays), reps)[0], timeit(lambda: rt(*arrays), reps)[0])
            d3 = timeit(lambda: default(*arrays), reps)[0]
            measured = sum(r.measured for r in rt.tune_report.kernels)
            rows.append(f"| {name} | ray | {len(rt.tune_report.kernels)} | {measured} | "
                        f"{ray_s:.1f} | {d3:.3f} | {tr:.3f} | {d3 / tr:.2f}x | "
                        f"{rt.stats['tuned']} |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--budget", type=float, default=40.0, help="seconds of search per model")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--only", help="a substring of the workload names")
    p.add_argument("--no-ray", action="store_true")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tune.md"))
    args = p.parse_args()
    ray = not args.no_ray
    if ray:
        try:
            import ray as ray_mod

            ray_mod.init(include_dashboard=False, log_to_driver=False)
        except ImportError:
            ray = False
    lines = [f"# aicc autotuning: default vs tuned schedules, {args.threads} thread(s)", "",
             f"Machine: {cpu_name()}, {os.cpu_count()} cores. Command: `python "
             f"benchmarks/tune_bench.py --threads {args.threads} --budget {args.budget:g}`. "
             "Times are the median wall clock in ms, the better of two alternated rounds.", "",
             "| workload | search | kernels tuned | candidates measured | search s | default ms "
             "| tuned ms | speed-up | matmuls using the record |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, (model, inputs) in workloads().items():
        if args.only and args.only not in name:
            continue
        rows = run(name, model, inputs, args.threads, args.budget, args.reps, ray)
        print("\n".join(rows), flush=True)
        lines += rows
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
