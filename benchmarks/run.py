"""Side-by-side CPU benchmarks: aicc against NumPy, torch eager, torch.compile and ONNX Runtime,
at one thread and at all threads.

    python benchmarks/run.py                 # full sizes, threads 1 and all cores
    python benchmarks/run.py --quick         # small sizes (a smoke run)
    python benchmarks/run.py --only softmax,attention --threads 1
    python benchmarks/run.py --peers numpy,torch    # leave out torch.compile and ONNX Runtime
    python benchmarks/run.py --clock thread --threads 1   # CPU time of the calling thread

Each thread count runs in its own process (BLAS reads its thread count at start-up), with
OPENBLAS/OMP/MKL_NUM_THREADS and AICC_NUM_THREADS set alike, torch.set_num_threads and ONNX
Runtime's intra-op threads set to the same count, and times aicc and every peer that applies
on the same inputs in that one process. It reports medians and the ratio peer/aicc (> 1: aicc is
faster), checks that every peer agrees with aicc, and writes benchmarks/results/cpu.json and
cpu.md. A peer that fails (torch.compile without a working C++ toolchain, say) is reported with
its error and skipped. No assertion is made on any time.

`--clock thread` measures the calling thread's CPU time instead of wall time: at one thread
every library here computes on the calling thread, and CPU time ignores the time other
processes take the core away, which is what a shared machine needs. It has no meaning for more
threads, where wall time is used regardless.

The fusion workloads of issue 5 (softmax, layer norm, gelu(x @ W + b), causal attention, an
encoder layer) come from workloads.py, which also builds their torch and ONNX forms.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "AICC_NUM_THREADS")
PEERS = ("numpy", "torch", "torch.compile", "onnxruntime")


@dataclass
class Case:
    name: str
    aicc: Callable  # the NumPy-style function aicc compiles
    inputs: tuple
    # peer name -> factory returning the peer's function of the NumPy inputs (lazily: torch and
    # onnxruntime are imported only when a case needs them)
    peers: dict[str, Callable[[], Callable]] = field(default_factory=dict)
    work: tuple | None = None  # ("bytes", n) or ("flops", n)


def torch_peer(make: Callable[[], Callable], compiled: bool = False) -> Callable[[], Callable]:
    def factory():
        import numpy as np
        import torch

        fn = make()
        if compiled:
            fn = torch.compile(fn, dynamic=False)

        def run(*arrays):
            with torch.inference_mode():
                return fn(*(torch.from_numpy(np.asarray(a)) for a in arrays))

        return run

    return factory


def ort_peer(make_model: Callable, names: tuple[str, ...], threads: int) -> Callable[[], Callable]:
    def factory():
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(make_model().SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return lambda *arrays: sess.run(None, dict(zip(names, arrays)))[0]

    return factory


def cases(quick: bool, threads: int) -> list[Case]:
    import runpy

    import numpy as np

    import workloads as W
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

    def matmul(a, b):
        return a @ b

    def all_peers(np_fn, torch_make, onnx_make, names):
        return {"numpy": lambda: np_fn, "torch": torch_peer(torch_make),
                "torch.compile": torch_peer(torch_make, compiled=True),
                "onnxruntime": ort_peer(onnx_make, names, threads)}

    g = 1024 if quick else 4096
    rows = 1024 if quick else 4096
    gm, gk, gn = (256, 256, 1024) if quick else (1024, 1024, 4096)
    heads, seq, head = (8, 256, 64) if quick else (8, 1024, 64)
    attention = W.causal_attention(seq, head)
    enc = W.encoder_params()
    encoder = W.encoder_layer(enc)
    mlp = runpy.run_path(str(ROOT / "examples" / "mlp.py"))
    out = [
        Case(f"softmax {rows}x{rows}", W.softmax, (randn(rows, rows),),
             all_peers(W.softmax, W.softmax_torch, lambda: W.softmax_onnx((rows, rows)), ("x",)),
             ("bytes", 8 * rows * rows)),
        Case(f"layernorm {rows}x1024", W.layernorm, (randn(rows, 1024),),
             all_peers(W.layernorm, W.layernorm_torch, lambda: W.layernorm_onnx((rows, 1024)), ("x",)),
             ("bytes", 8 * rows * 1024)),
        Case(f"gelu(x@W+b) {gm}x{gk}x{gn}", W.gelu_linear, (randn(gm, gk), randn(gk, gn), randn(gn)),
             all_peers(W.gelu_linear_numpy, W.gelu_linear_torch, lambda: W.gelu_linear_onnx(gm, gk, gn),
                       ("x", "w", "b")),
             ("flops", 2 * gm * gk * gn)),
        Case(f"attention causal {heads}x{seq}x{head}", attention,
             tuple(randn(heads, seq, head) for _ in range(3)),
             all_peers(attention, W.causal_attention_torch,
                       lambda: W.causal_attention_onnx(heads, seq, head), ("q", "k", "v")),
             ("flops", 4 * heads * head * seq * (seq + 1) // 2)),
        Case("encoder layer 128x256 h4 ffn1024", encoder, (randn(enc["S"], enc["D"]),),
             all_peers(encoder, lambda: W.encoder_layer_torch(enc), lambda: W.encoder_layer_onnx(enc), ("x",))),
        Case(f"gelu(x*w+b) {g}x{g}", gelu_aicc, (randn(g, g), randn(g), randn(g)), {"numpy": lambda: gelu_np},
             ("bytes", 8 * g * g)),
    ]
    for n in (256, 512) if quick else (256, 512, 1024, 2048):
        out.append(Case(f"matmul {n}", matmul, (randn(n, n), randn(n, n)),
                        {"numpy": lambda: matmul, "torch": torch_peer(lambda: matmul)},
                        ("flops", 2 * n**3)))
    out.append(Case("examples/mlp.py", mlp["model"], tuple(mlp["example_inputs"]()), {"numpy": lambda: mlp["model"]}))
    return out


def median_time(fn, args, budget_s: float, clock, min_runs: int = 5) -> float:
    fn(*args)  # warm up
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < budget_s and len(times) < 200):
        t0 = clock()
        fn(*args)
        times.append(clock() - t0)
    return statistics.median(times)


def scaled_err(out, ref) -> float:
    import numpy as np

    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def run_here(quick: bool, only: list[str] | None, budget_s: float, threads: int, peers: list[str],
             clock_name: str) -> list[dict]:
    import compiler

    clock = time.thread_time if clock_name == "thread" and threads == 1 else time.perf_counter
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    rows = []
    peak = peak_gflops(threads) if any(c.work and c.work[0] == "flops" for c in cases(quick, threads)
                                       if not only or any(o in c.name for o in only)) else None
    for case in cases(quick, threads):
        if only and not any(o in case.name for o in only):
            continue
        t0 = time.perf_counter()
        m = compiler.compile(case.aicc, case.inputs)
        compile_s = time.perf_counter() - t0
        out = m(*case.inputs)
        t_aicc = median_time(m, case.inputs, budget_s, clock)
        row = {"name": case.name, "aicc_ms": t_aicc * 1e3, "compile_s": compile_s,
               "kernels": m.stats.get("kernels"), "peers": {}}
        line = [f"  {case.name:34s} aicc {t_aicc * 1e3:9.3f} ms"]
        for peer in peers:
            if peer not in case.peers:
                continue
            try:
                fn = case.peers[peer]()
                ref = fn(*case.inputs)
                ref = ref.numpy() if hasattr(ref, "numpy") else ref
                t = median_time(fn, case.inputs, budget_s, clock)
            except Exception as e:  # noqa: BLE001 - a peer that cannot run here is reported, not fatal
                note = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
                row["peers"][peer] = {"error": note}
                line.append(f"{peer} failed ({note[:60]})")
                continue
            row["peers"][peer] = {"ms": t * 1e3, "ratio": t / t_aicc, "max_scaled_err": scaled_err(out, ref)}
            line.append(f"{peer} {t * 1e3:9.3f} ms ({t / t_aicc:5.2f}x)")
        if case.work and case.work[0] == "bytes":
            row["aicc_GBps"] = case.work[1] / t_aicc / 1e9
        if case.work and case.work[0] == "flops":
            row["aicc_GFLOPs"] = case.work[1] / t_aicc / 1e9
            line.append(f"{row['aicc_GFLOPs']:.1f} GFLOP/s")
            if peak:
                row["aicc_pct_of_peak"] = 100 * row["aicc_GFLOPs"] / peak
                line.append(f"{row['aicc_pct_of_peak']:.0f}% of peak")
        rows.append(row)
        print("   ".join(line), flush=True)
    return rows


def peak_gflops(threads: int) -> float | None:
    """FMA units x lanes x 2 x clock x threads, measured by benchmarks/peak.py (x86 only)."""
    try:
        import llvmlite.binding as llvm
        import peak

        from compiler.runtime.cpu import _init_llvm

        _init_llvm()
        llvm.initialize_native_asmparser()
        lanes = peak.host_vector_lanes()
        clock = peak.measure_clock()
        units = round(peak.measure_fma(lanes) / (lanes * 2 * clock))
        return units * lanes * 2 * clock * threads / 1e9
    except Exception:  # noqa: BLE001 - no peak on this platform: report none
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def markdown(results: dict, command: str) -> str:
    machine = results["machine"]
    md = [f"# aicc CPU benchmarks\n\n{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}\n",
          f"Command: `{command}`\n",
          f"Clock: {results['clock']} (medians); a peer cell is `ms (peer/aicc)`, > 1 means aicc is faster.\n"]
    if results.get("note"):
        md.append(f"Note: {results['note']}\n")
    for t, rows in results["runs"].items():
        peers = [p for p in PEERS if any(p in r["peers"] for r in rows)]
        md.append(f"\n## {t} thread(s)\n")
        md.append("| benchmark | kernels | aicc ms | " + " | ".join(peers) + " |")
        md.append("|---|---:|---:|" + "---:|" * len(peers))
        notes = []
        for r in rows:
            cells = []
            for p in peers:
                v = r["peers"].get(p)
                if v is None:
                    cells.append("")
                elif "error" in v:
                    cells.append("failed")
                    notes.append(f"- {r['name']}, {p}: {v['error']}")
                else:
                    cells.append(f"{v['ms']:.3f} ({v['ratio']:.2f}x)")
            md.append(f"| {r['name']} | {r['kernels']} | {r['aicc_ms']:.3f} | " + " | ".join(cells) + " |")
        flop_rows = [r for r in rows if "aicc_pct_of_peak" in r]
        if flop_rows:
            md.append("\naicc GFLOP/s and fraction of peak (FMA units x lanes x 2 x clock, benchmarks/peak.py): "
                      + ", ".join(f"{r['name']} {r['aicc_GFLOPs']:.0f} ({r['aicc_pct_of_peak']:.0f}%)"
                                  for r in flop_rows))
        if notes:
            md.append("\n" + "\n".join(notes))
    return "\n".join(md) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes")
    p.add_argument("--only", help="comma-separated substrings of benchmark names")
    p.add_argument("--threads", help="comma-separated thread counts (default: 1 and all cores)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timing per measurement")
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated peers (default: {','.join(PEERS)})")
    p.add_argument("--clock", choices=["wall", "thread"], default="wall",
                   help="wall time, or (one thread only) the calling thread's CPU time")
    p.add_argument("--note", help="a remark recorded with the results (say, the machine was shared)")
    p.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.target == "cuda":  # GPU benchmarks live apart: aicc vs torch on the device
        from cuda_bench import main as cuda_main  # not "cuda": that would shadow cuda-bindings

        return cuda_main(args)
    only = args.only.split(",") if args.only else None
    peers = [x for x in args.peers.split(",") if x]
    unknown = set(peers) - set(PEERS)
    if unknown:
        p.error(f"unknown peers {sorted(unknown)} (known: {', '.join(PEERS)})")

    if args.child is not None:
        rows = run_here(args.quick, only, args.budget, args.child, peers, args.clock)
        print("JSON:" + json.dumps(rows))
        return 0

    ncpu = os.cpu_count() or 1
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, ncpu})
    machine = {"cpu": cpu_model(), "cores": ncpu, "python": platform.python_version()}
    print(f"aicc CPU benchmarks on {machine['cpu']} ({ncpu} cores)")
    results = {"machine": machine, "clock": args.clock, "note": args.note, "runs": {}}
    for t in threads:
        print(f"\n== {t} thread(s) ==", flush=True)
        env = dict(os.environ, **{v: str(t) for v in THREAD_VARS})
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, __file__, "--child", str(t), "--budget", str(args.budget),
               "--peers", ",".join(peers), "--clock", args.clock]
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
    command = "python benchmarks/run.py " + " ".join(sys.argv[1:])
    (RESULTS / "cpu.md").write_text(markdown(results, command.strip()))
    print(f"\nwrote {RESULTS / 'cpu.json'} and {RESULTS / 'cpu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
