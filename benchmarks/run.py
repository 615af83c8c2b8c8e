"""Side-by-side CPU benchmarks: aicc against NumPy, torch eager, torch.compile and ONNX Runtime,
at one thread and at all threads.

    python benchmarks/run.py                 # full sizes, threads 1 and all cores
    python benchmarks/run.py --quick         # small sizes (a smoke run)
    python benchmarks/run.py --only softmax,attention --threads 1
    python benchmarks/run.py --peers numpy,torch    # leave out torch.compile and ONNX Runtime
    python benchmarks/run.py --clock thread --threads 1   # CPU time of the calling thread
    python benchmarks/run.py --chart-only    # redraw cpu.png from cpu.json
    python benchmarks/run.py --models        # the model-level benchmark (zoo CNNs, transformers)
    python benchmarks/run.py --models resnet18,vit --batches 1,8 --threads 1 --clock thread

Each thread count runs in its own process (BLAS reads its thread count at start-up), with
OPENBLAS/OMP/MKL_NUM_THREADS and AICC_NUM_THREADS set alike, torch.set_num_threads and ONNX
Runtime's intra-op threads set to the same count, and times aicc and every peer that applies
on the same inputs in that one process, in turn (aicc, each peer, aicc, ...: load from other
processes falls on all of them). It reports medians and the ratio peer/aicc (> 1: aicc is
faster), checks that every peer agrees with aicc (max_scaled_err), and writes
benchmarks/results/cpu.json, cpu.md and, with matplotlib (the `bench` extra), cpu.png: peer
time / aicc time, one subplot per thread count. A peer that fails (torch.compile without a
working C++ toolchain, say) is reported with its error and skipped. cpu.md ends with the issue's
one-thread bars (BARS), each met or not met by the numbers of the same run; this is reporting:
no assertion is made on any time.

`--clock thread` measures the calling thread's CPU time instead of wall time: at one thread
every library here computes on the calling thread, and CPU time ignores the time other
processes take the core away, which is what a shared machine needs. It has no meaning for more
threads, where wall time is used regardless, and each library's turn starts with 0.1 s of
calls not counted (SETTLE_S: the last library's pool threads spin on after its call).

The fusion workloads of issue 5 (softmax, layer norm, gelu(x @ W + b), causal attention, an
encoder layer) come from workloads.py, which also builds their torch and ONNX forms. The model
workloads (an MLP 784-512-512-10, a CNN on 3x32x32 images, a transformer encoder layer with
d_model 256, 4 heads, ffn 1024, sequence 128; each at batch 1 and 32) are torch.nn.Modules
(models.py) that aicc compiles through its torch frontend; ONNX Runtime runs them exported with
torch.onnx.export, NumPy (MLP, encoder) with the same weights.

`--models` runs the model-level benchmark instead: zoo models (benchmarks/zoo.py; by default
five torchvision CNNs and six transformers, full size, random weights) at each `--batches` size,
aicc through its torch frontend against torch eager, torch.compile and ONNX Runtime (the model
through torch.onnx.export), written to models.json, models.md and models.png. Its bar: at one
thread and batch 1, every model at least as fast as ONNX Runtime, geomean ratio >= 1.2. A
model's GFLOP/s and % of peak count its nominal FLOPs (onnx_flops: the MatMul, Gemm and Conv
nodes of its ONNX export, a convolution at its direct count, so a network that aicc runs with
Winograd can pass 100%), and models.md ends with each model's ceiling: the ratio to ONNX Runtime
that aicc would show at 100% of peak.

Peak fp32 FLOP/s is measured once (benchmarks/peak.py): FMA units x f32 lanes x 2 x the measured
clock, times the thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
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
    # the NumPy-style function aicc compiles, or (module=True) a factory of the torch.nn.Module
    # it compiles through its torch frontend (torch is imported only when the case runs)
    aicc: Callable
    inputs: tuple | Callable[[], tuple]  # NumPy arrays, or a function building them (a zoo model's)
    # peer name -> factory returning the peer's function of the NumPy inputs (lazily: torch and
    # onnxruntime are imported only when a case needs them)
    peers: dict[str, Callable[[], Callable]] = field(default_factory=dict)
    # ("bytes", n) or ("flops", n), or a function returning one (a zoo model's, counted on its
    # ONNX export)
    work: tuple | Callable[[], tuple] | None = None
    module: bool = False
    bar: str | None = None  # the key in BARS of the bar this case (at this size) decides


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


def ort_peer(make_model: Callable, names: tuple[str, ...] | None, threads: int) -> Callable[[], Callable]:
    """ONNX Runtime on the model `make_model` returns, fed by input `names` (None: the model's
    inputs in order)."""
    def factory():
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(make_model().SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feed = names or tuple(i.name for i in sess.get_inputs())
        return lambda *arrays: sess.run(None, dict(zip(feed, arrays)))[0]

    return factory


def module_peers(make: Callable[[], Callable], inputs: tuple, threads: int) -> dict[str, Callable]:
    """torch eager, torch.compile and ONNX Runtime (the module through torch.onnx.export) peers
    of a torch.nn.Module built by `make`."""

    def onnx_model():
        import models

        return models.to_onnx(make(), inputs)

    return {"torch": torch_peer(make), "torch.compile": torch_peer(make, compiled=True),
            "onnxruntime": ort_peer(onnx_model, ("x",), threads)}


def module_factory(cls: str, params: dict) -> Callable:
    def make():
        import models

        return getattr(models, cls)(params)

    return make


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

    def model_case(name, cls, params, inputs, flops, np_fn=None, bar=None):
        make = module_factory(cls, params)
        peers = ({"numpy": lambda: np_fn} if np_fn else {}) | module_peers(make, inputs, threads)
        return Case(name, make, inputs, peers, ("flops", flops), module=True, bar=bar)

    g = 1024 if quick else 4096
    rows = 1024 if quick else 4096
    gm, gk, gn = (256, 256, 1024) if quick else (1024, 1024, 4096)
    heads, seq, head = (8, 256, 64) if quick else (8, 1024, 64)
    attention = W.causal_attention(seq, head)
    enc = W.encoder_params()
    encoder = W.encoder_layer(enc)
    mlp = runpy.run_path(str(ROOT / "examples" / "mlp.py"))
    full = not quick  # the bars are stated for the full sizes
    out = [
        Case(f"softmax {rows}x{rows}", W.softmax, (randn(rows, rows),),
             all_peers(W.softmax, W.softmax_torch, lambda: W.softmax_onnx((rows, rows)), ("x",)),
             ("bytes", 8 * rows * rows), bar="softmax" if full else None),
        Case(f"layernorm {rows}x1024", W.layernorm, (randn(rows, 1024),),
             all_peers(W.layernorm, W.layernorm_torch, lambda: W.layernorm_onnx((rows, 1024)), ("x",)),
             ("bytes", 8 * rows * 1024), bar="layernorm" if full else None),
        Case(f"gelu(x@W+b) {gm}x{gk}x{gn}", W.gelu_linear, (randn(gm, gk), randn(gk, gn), randn(gn)),
             all_peers(W.gelu_linear_numpy, W.gelu_linear_torch, lambda: W.gelu_linear_onnx(gm, gk, gn),
                       ("x", "w", "b")),
             ("flops", 2 * gm * gk * gn)),
        Case(f"attention causal {heads}x{seq}x{head}", attention,
             tuple(randn(heads, seq, head) for _ in range(3)),
             all_peers(attention, W.causal_attention_torch,
                       lambda: W.causal_attention_onnx(heads, seq, head), ("q", "k", "v")),
             ("flops", 4 * heads * head * seq * (seq + 1) // 2), bar="attention" if full else None),
        Case("encoder layer 128x256 h4 ffn1024", encoder, (randn(enc["S"], enc["D"]),),
             all_peers(encoder, lambda: W.encoder_layer_torch(enc), lambda: W.encoder_layer_onnx(enc), ("x",))),
        Case(f"gelu(x*w+b) {g}x{g}", gelu_aicc, (randn(g, g), randn(g), randn(g)), {"numpy": lambda: gelu_np},
             ("bytes", 8 * g * g)),
    ]
    for n in (256, 512) if quick else (256, 512, 1024, 2048):
        out.append(Case(f"matmul {n}", matmul, (randn(n, n), randn(n, n)),
                        {"numpy": lambda: matmul, "torch": torch_peer(lambda: matmul),
                         "onnxruntime": ort_peer(lambda n=n: W.matmul_onnx(n), ("a", "b"), threads)},
                        ("flops", 2 * n**3), bar="matmul" if n == 1024 else None))
    out.append(Case("examples/mlp.py", mlp["model"], tuple(mlp["example_inputs"]()), {"numpy": lambda: mlp["model"]}))

    # The model workloads, compiled from torch.nn.Modules (benchmarks/models.py) with the weights
    # of workloads.py, so the NumPy peer computes with the same numbers.
    mlp_p, cnn_p = W.mlp_params(), W.cnn_params()
    S, D, F = enc["S"], enc["D"], enc["F"]
    for batch in (1, 2) if quick else (1, 32):
        bar = full and batch == 32
        out.append(model_case(f"MLP 784-512-512-10 b{batch}", "MLP", mlp_p, (randn(batch, 784),),
                              2 * batch * (784 * 512 + 512 * 512 + 512 * 10), W.mlp(mlp_p), "mlp" if bar else None))
        out.append(model_case(f"CNN 3x32x32 b{batch}", "CNN", cnn_p, (randn(batch, 3, 32, 32),),
                              2 * batch * (32 * 32 * 32 * 27 + 32 * 32 * 64 * 288 + 64 * 16 * 16 * 10),
                              bar="cnn" if bar else None))
        out.append(model_case(f"encoder module b{batch} 128x256 h4 ffn1024", "EncoderLayer", enc,
                              (randn(batch, S, D),), 2 * batch * S * (4 * D * D + 2 * D * F + 2 * S * D),
                              W.encoder_layer(enc, batch), "transformer" if bar else None))
    return out


# The model-level benchmark (--models): models of benchmarks/zoo.py (torchvision and transformers
# architectures with random weights, full size), each at every --batches size, compiled by aicc
# through its torch frontend; peers: torch eager, torch.compile, and ONNX Runtime on the model
# through torch.onnx.export (zoo.to_onnx, as the zoo exports it).
ZOO_CNNS = ("resnet18", "resnet50", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf")
ZOO_TRANSFORMERS = ("bert", "gpt2", "t5-encoder", "vit", "whisper-encoder", "clip-text")
ZOO_DEFAULT = ZOO_CNNS + ZOO_TRANSFORMERS


def zoo_cases(names: list[str], batches: list[int], quick: bool, threads: int) -> list[Case]:
    import zoo

    unknown = [n for n in names if n not in zoo.SPECS]
    if unknown:
        raise SystemExit(f"unknown zoo models {unknown} (known: {', '.join(zoo.SPECS)})")
    return [zoo_case(zoo.SPECS[n], b, quick, threads) for n in names for b in batches]


def zoo_case(spec, batch: int, quick: bool, threads: int) -> Case:
    built: dict = {}

    def build():
        """The module and its inputs (the zoo's batch-1 example repeated `batch` times), once."""
        if not built:
            import torch

            module, inputs = spec.build(quick)  # quick: the zoo's small configurations
            inputs = tuple(torch.cat([t] * batch) if batch > 1 else t for t in inputs)
            built.update(module=module, torch_inputs=inputs, inputs=tuple(t.numpy() for t in inputs))
        return built

    def onnx_model():
        """The module through zoo.to_onnx, once (ONNX Runtime's model and the FLOP count's)."""
        import zoo

        b = build()
        if "onnx" not in b:
            b["onnx"] = zoo.to_onnx(b["module"], b["torch_inputs"], spec.onnx_attn)
        return b["onnx"]

    def make():
        return build()["module"]

    peers = {"torch": torch_peer(make), "torch.compile": torch_peer(make, compiled=True),
             "onnxruntime": ort_peer(onnx_model, None, threads)}
    return Case(f"{spec.name} b{batch}", make, lambda: build()["inputs"], peers,
                work=lambda: ("flops", onnx_flops(onnx_model(), build()["inputs"])), module=True,
                bar=f"model:{spec.family}" if batch == 1 else None)


def onnx_flops(proto, inputs: tuple) -> int:
    """The nominal FLOPs of a model: 2 x the multiply-adds of its MatMul, Gemm and Conv nodes
    (attention's products included: the export writes them as MatMuls), a direct convolution's
    count whatever algorithm runs it (Winograd runs a 3x3 convolution in fewer); elementwise
    ops, norms and softmax are not counted. The shapes are those of one ONNX Runtime run on
    `inputs` with every operand of those nodes as an extra graph output (shape inference leaves
    some of a transformer export's batch dimensions unknown)."""
    import math

    import onnx
    import onnxruntime as ort

    model = onnx.ModelProto()
    model.CopyFrom(proto)
    g = model.graph
    counted = [n for n in g.node if n.op_type in ("MatMul", "Gemm", "Conv")]
    shapes = {t.name: tuple(t.dims) for t in g.initializer}
    wanted = list(dict.fromkeys(x for n in counted for x in (n.input[0], n.input[1], n.output[0])
                                if x not in shapes))
    outputs = {o.name for o in g.output}
    g.output.extend(onnx.ValueInfoProto(name=x) for x in wanted if x not in outputs)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the names
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    shapes |= {x: v.shape for x, v in zip(wanted, sess.run(wanted, feed))}
    total = 0
    for n in counted:
        a, w, out = shapes[n.input[0]], shapes[n.input[1]], shapes[n.output[0]]
        if n.op_type == "Conv":  # weight [OC, IC / groups, KH, KW...]
            macs_per_output = math.prod(w[1:])
        elif n.op_type == "Gemm" and any(at.name == "transA" and at.i for at in n.attribute):
            macs_per_output = a[0]
        else:
            macs_per_output = a[-1]
        total += 2 * math.prod(out) * macs_per_output
    return total


# At more than one thread each library's turn starts with SETTLE_S of calls that are not
# counted, then BURST counted ones: the last library's pool still spins on the cores after its
# call (ONNX Runtime's for ~50 ms, torch's and aicc's for less), which fell on the next one's
# calls. Measured at 2 threads on the 2-core Xeon, resnet18, ms of aicc's 1st, 2nd, 3rd and 4th
# call after 4 of ORT's: 23.3, 19.9, 15.6, 10.4 (alone 10.0); of ORT's after torch's: 18.5,
# 12.5, 11.9 (alone 11.8). On a Zen 4 (2 vCPUs), resnet50 at 2 threads, one process, four
# rounds of 5 ORT calls then 6 of aicc's: ORT's pool spun for ~40 ms of CPU after its last
# call, and aicc's 1st and 2nd calls took 62-66 and 41-44 ms (then 37-39, as alone); with ORT's
# spinning off (session option session.intra_op.allow_spinning = 0) 37-40 from the first, and
# ORT itself 1-3% slower (median 39.5-42.4 against 38.6-41.5 ms), so ORT keeps its default.
SETTLE_S = 0.1
BURST = 3


def median_times(fns: list, args, budget_s: float, clock, min_runs: int = 5,
                 settle_s: float = 0.0) -> list[float]:
    """The median time of each of `fns` on `args`, run in turn (aicc, then each peer, again
    and again) for about `budget_s` seconds each: a burst of load from another process on a
    shared machine then falls on all of them, not on the one whose window it hit. With
    `settle_s`, each turn first calls for that long uncounted, then counts BURST calls."""
    for fn in fns:
        fn(*args)  # warm up
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    while len(times[0]) < min_runs or (time.perf_counter() - start < budget_s * len(fns) and len(times[0]) < 200):
        for fn, ts in zip(fns, times):
            if settle_s:
                until = time.perf_counter() + settle_s
                fn(*args)
                while time.perf_counter() < until:
                    fn(*args)
            for _ in range(BURST if settle_s else 1):
                t0 = clock()
                fn(*args)
                ts.append(clock() - t0)
    return [statistics.median(ts) for ts in times]


def scaled_err(out, ref) -> float:
    import numpy as np

    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def run_here(quick: bool, only: list[str] | None, budget_s: float, threads: int, peers: list[str],
             clock_name: str, peak: float | None = None, models: list[str] | None = None,
             batches: list[int] | None = None) -> list[dict]:
    """Time every selected case (the zoo `models` at `batches` where given, else the suite)
    and its peers in this process; `peak` is the GFLOP/s of `threads` cores (None: no % of
    peak)."""
    import compiler

    clock = time.thread_time if clock_name == "thread" and threads == 1 else time.perf_counter
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    rows = []
    for case in zoo_cases(models, batches or [1], quick, threads) if models else cases(quick, threads):
        if only and not any(o in case.name for o in only):
            continue
        try:
            if callable(case.inputs):
                case.inputs = case.inputs()
            model, example = case.aicc, case.inputs
            if case.module:
                import torch

                model, example = case.aicc(), tuple(torch.from_numpy(a) for a in case.inputs)
        except ImportError as e:
            print(f"  {case.name:40s} skipped ({e})", flush=True)
            continue
        t0 = time.perf_counter()
        m = compiler.compile(model, example)
        compile_s = time.perf_counter() - t0
        out = m(*case.inputs)
        row = {"name": case.name, "compile_s": compile_s, "kernels": m.stats.get("kernels"), "peers": {}}
        if case.bar:
            row["bar"] = case.bar
        running, failed = {}, {}  # the peers that run here (fn, output), and why the others do not
        for peer in peers:
            if peer not in case.peers:
                continue
            try:
                fn = case.peers[peer]()
                ref = fn(*case.inputs)
                running[peer] = (fn, ref.numpy() if hasattr(ref, "numpy") else ref)
            except Exception as e:  # noqa: BLE001 - a peer that cannot run here is reported, not fatal
                failed[peer] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        t_aicc, *t_peers = median_times([m, *(fn for fn, _ in running.values())], case.inputs,
                                        budget_s, clock, settle_s=0.0 if threads == 1 else SETTLE_S)
        t_peer = dict(zip(running, t_peers))
        row["aicc_ms"] = t_aicc * 1e3
        line = [f"  {case.name:40s} aicc {t_aicc * 1e3:9.3f} ms"]
        for peer in peers:
            if peer in failed:
                row["peers"][peer] = {"error": failed[peer]}
                line.append(f"{peer} failed ({failed[peer][:60]})")
            elif peer in running:
                t = t_peer[peer]
                row["peers"][peer] = {"ms": t * 1e3, "ratio": t / t_aicc,
                                      "max_scaled_err": scaled_err(out, running[peer][1])}
                line.append(f"{peer} {t * 1e3:9.3f} ms ({t / t_aicc:5.2f}x)")
        errs = [v["max_scaled_err"] for v in row["peers"].values() if "max_scaled_err" in v]
        if errs:
            row["max_scaled_err"] = max(errs)
        if callable(case.work):
            try:
                case.work = case.work()
            except Exception as e:  # noqa: BLE001 - no count (an export that fails): no GFLOP/s
                print(f"  {case.name}: work not counted ({type(e).__name__}: {str(e)[:100]})",
                      flush=True)
                case.work = None
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


def peak_info() -> dict | None:
    """The measured single-core peak (benchmarks/peak.py, x86 only): FMA units x lanes x 2 x
    clock; None where it cannot be measured. The lanes are those of the vectors aicc's code
    uses (AICC_TARGET_CPU, else the host's): code for AVX2 on an AVX-512 host is held to the
    AVX2 peak, which is all it can reach."""
    try:
        import llvmlite.binding as llvm
        import peak

        from compiler.targets.cpu.runtime import _init_llvm

        _init_llvm()
        llvm.initialize_native_asmparser()
        from compiler.targets.cpu.machine import cpu_machine

        lanes = min(peak.host_vector_lanes(), max(4, cpu_machine(None).vector_bits // 32))
        clock = peak.measure_clock()
        fma = peak.measure_fma(lanes)
        units = round(fma / (lanes * 2 * clock))
        # fma_loop_GFLOPs: what a register-only FMA loop reaches; below the product when the
        # core lowers its clock for wide vector FMAs (AVX-512 frequency licences)
        return {"fma_units": units, "lanes_f32": lanes, "clock_GHz": clock / 1e9,
                "GFLOPs_1_thread": units * lanes * 2 * clock / 1e9, "fma_loop_GFLOPs": fma / 1e9}
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


# The one-thread bars, by the `bar` key of the case that decides each.
BARS = {
    "matmul": "matmul 1024: >= 70% of peak and at least as fast as the fastest of NumPy and torch",
    "mlp": "MLP batch 32: at least as fast as torch eager and within 1.25x of ONNX Runtime",
    "cnn": "CNN batch 32: at least as fast as torch eager and within 1.25x of ONNX Runtime",
    "transformer": "transformer layer batch 32: at least as fast as torch eager and within 1.25x of ONNX Runtime",
    "softmax": "softmax: >= 2x torch eager",
    "layernorm": "layer norm: at least as fast as torch eager",
    "attention": "attention: at least as fast as torch SDPA",
}


def evaluate_bars(rows: list[dict]) -> list[tuple[str, bool | None, str]]:
    """(statement, met, the numbers) for every bar from one run's rows; met is None where the
    numbers are missing (the case was not run, a peer failed, no peak). Reporting only."""
    by_bar = {r["bar"]: r for r in rows if r.get("bar")}
    out = []
    for key, statement in BARS.items():
        r = by_bar.get(key)
        if r is None:
            out.append((statement, None, "not run"))
            continue
        a = r["aicc_ms"]
        ms = {p: v["ms"] for p, v in r["peers"].items() if "ms" in v}
        torch_ms, ort_ms = ms.get("torch"), ms.get("onnxruntime")
        if key == "matmul":
            pct = r.get("aicc_pct_of_peak")
            fastest = min(((ms[p], p) for p in ("numpy", "torch") if p in ms), default=None)
            if pct is None or fastest is None:
                out.append((statement, None, "no peak" if pct is None else "no NumPy or torch time"))
                continue
            out.append((statement, pct >= 70 and a <= fastest[0],
                        f"{pct:.0f}% of peak; aicc {a:.3f} ms, {fastest[1]} {fastest[0]:.3f} ms"))
        elif key in ("mlp", "cnn", "transformer"):
            if torch_ms is None or ort_ms is None:
                out.append((statement, None, "no torch or ONNX Runtime time"))
                continue
            out.append((statement, a <= torch_ms and a <= 1.25 * ort_ms,
                        f"aicc {a:.3f} ms, torch {torch_ms:.3f} ms, ONNX Runtime {ort_ms:.3f} ms "
                        f"(aicc/ORT {a / ort_ms:.2f})"))
        else:
            if torch_ms is None:
                out.append((statement, None, "no torch time"))
                continue
            need = 2.0 if key == "softmax" else 1.0
            out.append((statement, torch_ms >= need * a,
                        f"aicc {a:.3f} ms, torch {torch_ms:.3f} ms ({torch_ms / a:.2f}x)"))
    return out


def evaluate_model_bars(rows: list[dict]) -> list[tuple[str, bool | None, str]]:
    """The model-level bar at one thread and batch 1: every CNN and every transformer at least
    as fast as ONNX Runtime, and their geometric mean ratio at least 1.2. Reporting only."""
    ratios = {}
    for r in rows:
        if r.get("bar", "").startswith("model:"):
            v = r["peers"].get("onnxruntime", {})
            ratios[r["name"]] = v.get("ratio")
    statement = ("every model at batch 1 at least as fast as ONNX Runtime (ORT time / aicc time "
                 ">= 1.0), geomean >= 1.2")
    if not ratios:
        return [(statement, None, "not run")]
    if any(v is None for v in ratios.values()):
        missing = ", ".join(k for k, v in ratios.items() if v is None)
        return [(statement, None, f"no ONNX Runtime time for {missing}")]
    geo = statistics.geometric_mean(ratios.values())
    worst = min(ratios, key=ratios.get)
    return [(statement, min(ratios.values()) >= 1.0 and geo >= 1.2,
             f"geomean {geo:.3f} over {len(ratios)} models; lowest {worst} {ratios[worst]:.2f}")]


def model_ceilings(rows: list[dict]) -> list[str]:
    """How far the models' one-thread bar can go on this machine: per model at batch 1, the share
    of the FMA peak that aicc and ONNX Runtime run at on the model's nominal FLOPs (onnx_flops),
    and the ceiling: ONNX Runtime's time over the time of the nominal FLOPs at peak, the ratio
    aicc would show at 100% of peak. A convolution network can pass its ceiling (Winograd runs
    fewer than the nominal FLOPs); a transformer's FLOPs are its matmuls', so it cannot."""
    lines, by_family = [], {}
    for r in rows:
        ort = r["peers"].get("onnxruntime", {})
        if (not r.get("bar", "").startswith("model:") or "ratio" not in ort
                or "aicc_pct_of_peak" not in r):
            continue
        c = ort["ratio"] * 100 / r["aicc_pct_of_peak"]
        by_family.setdefault(r["bar"].split(":", 1)[1], []).append(c)
        lines.append(f"| {r['name']} | {r['aicc_GFLOPs'] * r['aicc_ms'] / 1e3:.2f} | "
                     f"{r['aicc_pct_of_peak']:.0f}% | {r['aicc_pct_of_peak'] / ort['ratio']:.0f}% | "
                     f"{ort['ratio']:.2f} | {c:.2f} |")
    if not lines:
        return []
    geo = statistics.geometric_mean
    ceilings = [c for cs in by_family.values() for c in cs]
    summary = "; ".join(f"{fam} {geo(cs):.2f} ({len(cs)})" for fam, cs in by_family.items())
    return ["| model | GFLOP | aicc % of peak | ORT % of peak | ORT / aicc | ceiling (ORT at peak) |",
            "|---|---:|---:|---:|---:|---:|", *lines, "",
            f"Geomean of the ceilings: {geo(ceilings):.2f} over {len(ceilings)} models; "
            f"by family: {summary}."]


def verdict(met: bool | None) -> str:
    return "no data" if met is None else "met" if met else "not met"


def machine_line(machine: dict) -> str:
    line = f"{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}"
    pk = machine.get("peak")
    if pk:
        line += (f". Peak fp32: {pk['GFLOPs_1_thread']:.1f} GFLOP/s at 1 thread, "
                 f"{pk['GFLOPs_1_thread'] * machine['cores']:.1f} GFLOP/s at {machine['cores']} threads = "
                 f"FMA units ({pk['fma_units']}) x f32 lanes ({pk['lanes_f32']}) x 2 x measured clock "
                 f"({pk['clock_GHz']:.2f} GHz) x threads, measured by benchmarks/peak.py")
        if pk.get("fma_loop_GFLOPs"):
            line += (f"; a register-only loop of {pk['lanes_f32']}-lane FMAs reaches "
                     f"{pk['fma_loop_GFLOPs']:.1f} GFLOP/s on one core (the clock drops under "
                     f"wide FMAs)")
    else:
        line += ". Peak fp32: not measured on this platform"
    return line


def markdown(results: dict, command: str) -> str:
    title = "aicc CPU benchmarks: models" if results.get("models") else "aicc CPU benchmarks"
    md = [f"# {title}\n\n{machine_line(results['machine'])}\n",
          f"Command: `{command}`\n",
          f"Clock: {results['clock']} (medians); a peer cell is `ms (peer/aicc)`, > 1 means aicc is faster. "
          "`max err` is the largest max|peer - aicc| / max(1, max|peer|) over the peers.\n"]
    if results.get("code"):
        md.append(f"Code: {results['code']}; {results['peers_isa']}.\n")
    if results.get("note"):
        md.append(f"Note: {results['note']}\n")
    for t, rows in results["runs"].items():
        peers = [p for p in PEERS if any(p in r["peers"] for r in rows)]
        md.append(f"\n## {t} thread(s)\n")
        md.append("| benchmark | kernels | aicc ms | GFLOP/s | % of peak | max err | " + " | ".join(peers) + " |")
        md.append("|---|---:|---:|---:|---:|---:|" + "---:|" * len(peers))
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
            gflops = f"{r['aicc_GFLOPs']:.1f}" if "aicc_GFLOPs" in r else ""
            pct = f"{r['aicc_pct_of_peak']:.0f}%" if "aicc_pct_of_peak" in r else ""
            err = f"{r['max_scaled_err']:.1e}" if "max_scaled_err" in r else ""
            md.append(f"| {r['name']} | {r['kernels']} | {r['aicc_ms']:.3f} | {gflops} | {pct} | {err} | "
                      + " | ".join(cells) + " |")
        if notes:
            md.append("\n" + "\n".join(notes))
    md.append("\n## Bars (1 thread)\n")
    if "1" not in results["runs"]:
        md.append("No 1-thread run: the bars are stated at one thread (`--threads 1`).")
    else:
        md.append("The issue's one-thread bars, evaluated on the 1-thread numbers above (reporting, not a test).\n")
        md.append("| bar | verdict | numbers |")
        md.append("|---|---|---|")
        bars = evaluate_model_bars if results.get("models") else evaluate_bars
        for statement, met, numbers in bars(results["runs"]["1"]):
            md.append(f"| {statement} | {verdict(met)} | {numbers} |")
        ceilings = model_ceilings(results["runs"]["1"]) if results.get("models") else []
        if ceilings:
            md.append("\n### Ceilings (1 thread)\n")
            md.append("Nominal FLOPs: 2 x the multiply-adds of the model's MatMul, Gemm and Conv nodes in "
                      "its ONNX export (a direct convolution's count; elementwise ops not counted). "
                      "Ceiling: ONNX Runtime's time / (FLOPs / peak), the ratio aicc would show at 100% "
                      "of peak.\n")
            md.extend(ceilings)
    return "\n".join(md) + "\n"


def write_chart(results: dict, path: Path) -> bool:
    """A bar chart of peer time / aicc time: one subplot per thread count, one group per
    benchmark, one bar per peer, a line at 1. False (and one line printed) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("chart skipped: matplotlib is not installed (pip install -e '.[bench]')")
        return False
    runs = results["runs"]
    n = max((len(rows) for rows in runs.values()), default=1)
    fig, axes = plt.subplots(len(runs) or 1, 1, figsize=(max(8, 0.7 * n), 4.5 * max(1, len(runs))),
                             squeeze=False)
    for ax, (t, rows) in zip(axes[:, 0], runs.items()):
        peers = [p for p in PEERS if any("ratio" in r["peers"].get(p, {}) for r in rows)]
        width = 0.8 / max(1, len(peers))
        for i, p in enumerate(peers):
            bars = [(j + (i - (len(peers) - 1) / 2) * width, r["peers"][p]["ratio"])
                    for j, r in enumerate(rows) if "ratio" in r["peers"].get(p, {})]
            # from the line at 1 (log scale): up where aicc is faster, down where the peer is
            ax.bar([x for x, _ in bars], [y - 1 for _, y in bars], width, bottom=1, label=p)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(rows)), [r["name"] for r in rows], rotation=35, ha="right",
                      rotation_mode="anchor", fontsize=8)
        ax.set_ylabel("peer time / aicc time")
        ax.set_title(f"{t} thread(s): above 1, aicc is faster")
        if peers:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> int:
    from peer_isa import PEER_ISAS, aicc_code, describe, restrict_peers

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes")
    p.add_argument("--only", help="comma-separated substrings of benchmark names")
    p.add_argument("--threads", help="comma-separated thread counts (default: 1 and all cores)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timing per measurement")
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated peers (default: {','.join(PEERS)})")
    p.add_argument("--clock", choices=["wall", "thread"], default="wall",
                   help="wall time, or (one thread only) the calling thread's CPU time")
    p.add_argument("--note", help="a remark recorded with the results (say, the machine was shared)")
    p.add_argument("--out", type=Path, default=RESULTS, help=f"results folder (default: {RESULTS})")
    p.add_argument("--chart-only", action="store_true", help="redraw cpu.png from the results folder's cpu.json (with --models: models.png)")
    p.add_argument("--models", nargs="?", const=",".join(ZOO_DEFAULT),
                   help="the model-level benchmark instead of the suite: comma-separated zoo models "
                        f"(alone: {','.join(ZOO_DEFAULT)}); writes models.json/.md/.png")
    p.add_argument("--batches", default="1,8", help="batch sizes of --models (default: 1,8)")
    p.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--peer-isa", default="host", choices=PEER_ISAS,
                   help="the peers' kernels: the host's, or their AVX2 ones (benchmarks/peer_isa.py)")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--peak", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    restrict_peers(args.peer_isa)
    if args.target == "cuda":  # GPU benchmarks live apart: aicc vs torch on the device
        from cuda_bench import main as cuda_main  # not "cuda": that would shadow cuda-bindings

        return cuda_main(args)
    models = [m for m in args.models.split(",") if m] if args.models else None
    batches = [int(b) for b in args.batches.split(",")]
    stem = "models" if models else "cpu"
    if args.chart_only:
        if write_chart(json.loads((args.out / f"{stem}.json").read_text()), args.out / f"{stem}.png"):
            print(f"wrote {args.out / f'{stem}.png'}")
        return 0
    only = args.only.split(",") if args.only else None
    peers = [x for x in args.peers.split(",") if x]
    unknown = set(peers) - set(PEERS)
    if unknown:
        p.error(f"unknown peers {sorted(unknown)} (known: {', '.join(PEERS)})")

    if args.child is not None:
        rows = run_here(args.quick, only, args.budget, args.child, peers, args.clock, args.peak,
                        models, batches)
        print("JSON:" + json.dumps(rows))
        return 0

    ncpu = os.cpu_count() or 1
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, ncpu})
    if str(ROOT) not in sys.path:  # peak.py JITs through this checkout's compiler
        sys.path.insert(0, str(ROOT))
    peak = peak_info()
    machine = {"cpu": cpu_model(), "cores": ncpu, "python": platform.python_version(), "peak": peak}
    print(f"aicc CPU benchmarks on {machine_line(machine)}")
    results = {"machine": machine, "clock": args.clock, "note": args.note, "runs": {},
               "code": aicc_code(), "peers_isa": describe()}
    if models:
        results["models"] = models
        results["batches"] = batches
    for t in threads:
        print(f"\n== {t} thread(s) ==", flush=True)
        env = dict(os.environ, **{v: str(t) for v in THREAD_VARS})
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, __file__, "--child", str(t), "--budget", str(args.budget),
               "--peers", ",".join(peers), "--clock", args.clock]
        cmd += ["--peak", str(peak["GFLOPs_1_thread"] * t)] if peak else []
        cmd += ["--quick"] if args.quick else []
        cmd += ["--only", args.only] if args.only else []
        cmd += ["--models", ",".join(models), "--batches", args.batches] if models else []
        lines = []
        with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) as proc:
            for line in proc.stdout:  # each case's line as it finishes (models take minutes)
                lines.append(line.rstrip("\n"))
                if not line.startswith("JSON:"):
                    print(lines[-1], flush=True)
        if proc.returncode != 0:
            print(f"benchmark process for {t} thread(s) failed (exit {proc.returncode})", file=sys.stderr)
            return proc.returncode
        results["runs"][str(t)] = json.loads(next(l for l in lines if l.startswith("JSON:"))[5:])

    if "1" in results["runs"]:
        print("\nbars (1 thread):")
        bars = evaluate_model_bars if models else evaluate_bars
        for statement, met, numbers in bars(results["runs"]["1"]):
            print(f"  {verdict(met):8s} {statement}: {numbers}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=2))
    command = "python benchmarks/run.py " + shlex.join(sys.argv[1:])
    (args.out / f"{stem}.md").write_text(markdown(results, command.strip()))
    print(f"\nwrote {args.out / f'{stem}.json'} and {args.out / f'{stem}.md'}")
    if write_chart(results, args.out / f"{stem}.png"):
        print(f"wrote {args.out / f'{stem}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
