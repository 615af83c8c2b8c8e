"""Cold compile time of a torch.nn.TransformerEncoderLayer through the PyTorch frontend.

    python benchmarks/torch_compile_time.py                  # d_model 256, 4 heads, ffn 1024, seq 128, batch 1
    python benchmarks/torch_compile_time.py --runs 3 --d-model 64 --ffn 128 --seq 16

Each run is a fresh Python process (nothing of torch.export, xDSL or LLVM is warm): it imports
torch and aicc (not timed), then times `compiler.compile(layer, (x,))` split into its stages:
torch.export (with decompositions when needed) and the import into the aicc dialect, each pass
of the pipeline, and LLVM's O3 + JIT. It checks the compiled output against torch and reports
medians over the runs. No assertion is made on any time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(args) -> dict:
    import numpy as np
    import torch

    import compiler
    from compiler.api import compile_program
    from compiler.pipeline import CompileOptions
    from frontends.torch_import import TorchImporter, export_module, to_torch_inputs

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(args.d_model, args.heads, args.ffn, batch_first=True).eval()
    x = torch.randn(args.batch, args.seq, args.d_model)

    t0 = time.perf_counter()  # the steps of compiler.compile(layer, (x,)), timed one by one
    exported = export_module(layer, to_torch_inputs((x,)))
    t1 = time.perf_counter()
    program = TorchImporter(layer, (x,)).run(exported)
    t2 = time.perf_counter()
    m = compile_program(program, CompileOptions("cpu"))
    t3 = time.perf_counter()

    got = m(x)
    with torch.no_grad():
        want = layer(x).numpy()
    err = float(np.abs(got - want).max())
    stages = {"torch.export": t1 - t0, "import into aicc": t2 - t1}
    for t in m.timings:
        stages[t.name] = stages.get(t.name, 0.0) + t.seconds
    assert isinstance(m, compiler.CompiledModel)
    return {"total": t3 - t0, "stages": stages, "max_abs_err": err}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--runs", type=int, default=1, help="fresh processes to time (default: 1)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0
    argv = [sys.executable, __file__, "--child", *sys.argv[1:]]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    results = []
    for _ in range(args.runs):
        out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"TransformerEncoderLayer(d_model={args.d_model}, nhead={args.heads}, dim_feedforward={args.ffn}), "
          f"input {args.batch}x{args.seq}x{args.d_model}, {args.runs} fresh process(es), cpu {os.cpu_count()} cores")
    print(f"  cold compile: {statistics.median(r['total'] for r in results):.2f} s (median), "
          f"max |aicc - torch| = {max(r['max_abs_err'] for r in results):.2g}")
    for name in results[0]["stages"]:
        print(f"    {statistics.median(r['stages'][name] for r in results) * 1e3:9.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
