"""GPU benchmarks (`python benchmarks/run.py --target cuda`): aicc's CUDA target against torch.

    python benchmarks/run.py --target cuda            # the issue's sizes
    python benchmarks/run.py --target cuda --quick    # small sizes (a smoke run)

Cases, each against its torch peer in the same process:
  matmul 1024 and 4096 (fp32; torch calls cuBLAS, TF32 off)      bar: aicc >= 50% of cuBLAS
  gelu(x*w+b) over 64M floats, fused, in GB/s                    bar: >= 80% of a device-to-
    against a device-to-device copy of the same bytes                 device copy's GB/s
  softmax 8192x8192 (last axis)                                   bar: at least as fast as torch
  layer norm 8192x4096 (last axis, no affine, eps 1e-5)           bar: at least as fast as torch
  examples/mlp.py                                                 (reported, no bar)
  causal attention, 16 heads x 2048 x 64 (fp32), one fused flash-  (reported, no bar)
    attention kernel, against torch's scaled_dot_product_attention

Both sides run on device-resident buffers (aicc through its runner's device-pointer entry,
sharing torch's primary context and default stream), timed with CUDA events: one event pair
per run, median over runs after a warm-up. Results: benchmarks/results/cuda.json and cuda.md.
Each output is checked against torch's. No assertion is made on any time: a missed bar is
reported, not raised. Without an NVIDIA GPU (or without torch built for CUDA) this prints one
line and exits with status 1.
"""

from __future__ import annotations

import json
import runpy
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _fail(msg: str) -> int:
    print(f"benchmarks --target cuda: {msg}", file=sys.stderr)
    return 1


def main(args) -> int:
    from compiler.targets.cuda.runtime import has_gpu

    if not has_gpu():
        return _fail("no NVIDIA GPU with a CUDA driver found; nothing was run")
    try:
        import torch
    except ImportError:
        return _fail("torch (built for CUDA) is the peer and is not installed; nothing was run")
    if not torch.cuda.is_available():
        return _fail("torch has no CUDA support here; nothing was run")
    import numpy as np

    import compiler
    from compiler import ops
    from compiler.targets.cuda.runtime import device_pointer

    sys.path.insert(0, str(HERE))
    from workloads import layernorm, softmax

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 against fp32
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    rng = np.random.default_rng(0)
    quick = args.quick
    budget = args.budget

    def randn(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    def timed(fn) -> float:
        """Median milliseconds of fn() on the default stream, by CUDA events."""
        fn()
        torch.cuda.synchronize()
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 200):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    F = torch.nn.functional
    mlp = runpy.run_path(str(ROOT / "examples" / "mlp.py"))
    mw = {k: torch.from_numpy(mlp[k]).to(dev) for k in ("w1", "b1", "w2", "b2")}

    def torch_mlp(x):
        return torch.relu(x @ mw["w1"] + mw["b1"]) @ mw["w2"] + mw["b2"]

    def gelu_aicc(x, w, b):
        return ops.gelu(x * w + b, approximate="tanh")

    heads, seq = (4, 512) if quick else (16, 2048)
    tril = np.tril(np.ones((seq, seq), bool))

    def causal_attention(q, k, v):  # fuse-attention: one aicc_fused.attention, causal
        s = q @ k.transpose(0, 2, 1) * np.float32(0.125)
        s = np.where(tril, s, np.float32(-np.inf))
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    g = 2048 if quick else 8192  # gelu over g*g floats (64M)
    sm = 2048 if quick else 8192
    mm_sizes = (256, 1024) if quick else (1024, 4096)
    cases = [
        *[(f"matmul {n}", lambda a, b: a @ b, lambda a, b: a @ b, (randn(n, n), randn(n, n)),
           "matmul", 2 * n**3) for n in mm_sizes],
        (f"gelu(x*w+b) {g * g // (1 << 20)}M floats", gelu_aicc,
         lambda x, w, b: F.gelu(x * w + b, approximate="tanh"),
         (randn(g, g), randn(g), randn(g)), "bandwidth", 2 * 4 * g * g),
        (f"softmax {sm}x{sm}", softmax, lambda x: torch.softmax(x, -1), (randn(sm, sm),),
         "faster", None),
        (f"layernorm {sm}x{sm // 2}", layernorm,
         lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5), (randn(sm, sm // 2),), "faster",
         None),
        ("examples/mlp.py", mlp["model"], torch_mlp, tuple(mlp["example_inputs"]()), None, None),
        (f"attention {heads}x{seq}x64 causal", causal_attention,
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         (randn(heads, seq, 64), randn(heads, seq, 64), randn(heads, seq, 64)), None, None),
    ]
    rows = []
    print(f"aicc CUDA benchmarks on {torch.cuda.get_device_name(0)} against torch "
          f"{torch.__version__} (CUDA events, medians)")
    for name, fn, torch_fn, inputs, bar, work in cases:
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        try:
            t0 = time.perf_counter()
            m = compiler.compile(fn, inputs, target="cuda")
            compile_s = time.perf_counter() - t0
            dx = [torch.from_numpy(x).to(dev) for x in inputs]
            outs = [torch.empty(shape, dtype=getattr(torch, np.dtype(dt).name), device=dev)
                    for shape, dt in m.output_types]
            runner = m.executable.get(m.func_name)
            ptrs = [device_pointer(t) for t in (*dx, *outs)]
            t_aicc = timed(lambda: runner.launch(ptrs))
            t_torch = timed(lambda: torch_fn(*dx))
            ref = torch_fn(*dx)
            err = float((outs[0] - ref).abs().max() / max(1.0, float(ref.abs().max())))
            row = {"name": name, "aicc_ms": t_aicc, "torch_ms": t_torch,
                   "torch_over_aicc": t_torch / t_aicc, "kernels": len(m.executable.program.kernels),
                   "compile_s": compile_s, "max_scaled_err": err}
            if bar == "matmul":
                row["aicc_tflops"] = work / t_aicc / 1e9
                row["cublas_tflops"] = work / t_torch / 1e9
                row["bar"] = "aicc >= 50% of cuBLAS"
                row["bar_ratio"] = row["aicc_tflops"] / row["cublas_tflops"]
                row["bar_met"] = row["bar_ratio"] >= 0.5
            elif bar == "bandwidth":
                src = torch.empty(g * g, device=dev)
                dst = torch.empty_like(src)
                t_copy = timed(lambda: dst.copy_(src))
                row["aicc_GBps"] = work / t_aicc / 1e6
                row["d2d_copy_GBps"] = 2 * 4 * g * g / t_copy / 1e6
                row["bar"] = ">= 80% of a device-to-device copy's GB/s"
                row["bar_ratio"] = row["aicc_GBps"] / row["d2d_copy_GBps"]
                row["bar_met"] = row["bar_ratio"] >= 0.8
            elif bar == "faster":
                row["bar"] = "at least as fast as torch"
                row["bar_ratio"] = t_torch / t_aicc
                row["bar_met"] = row["bar_ratio"] >= 1.0
        except Exception as e:  # noqa: BLE001 - one case's failure is reported, the rest run
            rows.append({"name": name, "error": f"{type(e).__name__}: {e}".splitlines()[0]})
            print(f"  {name:28s} FAILED: {rows[-1]['error']}", flush=True)
            torch.cuda.empty_cache()
            continue
        rows.append(row)
        extra = f"   {row['bar']}: {row['bar_ratio']:.2f} {'ok' if row['bar_met'] else 'MISSED'}" \
            if "bar" in row else ""
        print(f"  {name:28s} aicc {t_aicc:8.3f} ms   torch {t_torch:8.3f} ms   "
              f"torch/aicc {t_torch / t_aicc:5.2f}x   err {err:.1e}{' WRONG' if err > 1e-3 else ''}"
              f"{extra}", flush=True)
        torch.cuda.empty_cache()

    device = torch.cuda.get_device_name(0)
    out = args.out  # run.py's --out (default benchmarks/results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cuda.json").write_text(json.dumps(
        {"device": device, "torch": torch.__version__, "quick": quick, "rows": rows}, indent=2))
    md = [f"# aicc CUDA benchmarks\n\n{device}, torch {torch.__version__}. Command: "
          f"`python benchmarks/run.py --target cuda{' --quick' if quick else ''}`. "
          "Device-resident buffers, CUDA events, medians.\n",
          "| benchmark | aicc ms | torch ms | torch/aicc | bar | measured | met |",
          "|---|---:|---:|---:|---|---:|---|"]
    for r in rows:
        if "error" in r:
            md.append(f"| {r['name']} | failed: {r['error']} | | | | | |")
            continue
        bar = (r["bar"], f"{r['bar_ratio']:.2f}", "yes" if r["bar_met"] else "**no**") \
            if "bar" in r else ("", "", "")
        md.append(f"| {r['name']} | {r['aicc_ms']:.3f} | {r['torch_ms']:.3f} | "
                  f"{r['torch_over_aicc']:.2f}x | {' | '.join(bar)} |")
    (out / "cuda.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out / 'cuda.json'} and {out / 'cuda.md'}")
    return 0
