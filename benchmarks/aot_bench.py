"""The ahead-of-time library against the in-process model and ONNX Runtime, side by side, and
the compile cache's cold and warm compiles, each in a fresh process.

    python benchmarks/aot_bench.py                   # 1 thread, every model
    python benchmarks/aot_bench.py --threads 2 --only mlp

For each model: `compiler.compile` cold (empty cache folder) and warm (a second process, same
folder), each timed in a new process; then, in one process, the in-process model, its exported
lib<name>.so called through `compiler.load` (ctypes, the C API) and ONNX Runtime where the model
is ONNX, timed alike (median and best wall clock, and the calling thread's CPU time). Outputs
of the library are checked against the in-process model. Writes benchmarks/results/aot.md.
No assertion is made on any time.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from conv_bench import RESNET50, timeit  # noqa: E402

# name -> (python that defines `model` and `inputs`)
MODELS = {
    "mlp": "exec(open('examples/mlp.py').read()); inputs = example_inputs",
    "torch_cnn": "exec(open('examples/torch_cnn.py').read()); inputs = example_inputs",
    "transformer": textwrap.dedent("""\
        import torch
        torch.manual_seed(0)
        model = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0).eval()
        inputs = (torch.randn(1, 128, 256),)"""),
    "resnet50": (f"model = {os.path.abspath(RESNET50)!r}\n"
                 "import numpy as np\n"
                 "inputs = (np.random.default_rng(0).standard_normal((1, 3, 224, 224))"
                 ".astype(np.float32),)"),
}

COMPILE = """
import os, sys, time
os.chdir({root!r}); sys.path.insert(0, {root!r})
{setup}
inputs = inputs() if callable(inputs) else inputs
import compiler
t0 = time.perf_counter()
m = compiler.compile(model, inputs, threads={threads})
print(time.perf_counter() - t0, m.stats.get("cache"))
"""


def compile_seconds(name: str, cache: str, threads: int) -> tuple[float, str]:
    code = COMPILE.format(root=str(ROOT), setup=MODELS[name], threads=threads)
    env = {**os.environ, "AICC_CACHE": "1", "AICC_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[-2]), out[-1]


def run_side_by_side(name: str, threads: int, reps: int, lib_dir: Path) -> list[str]:
    import compiler

    ns: dict = {}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(MODELS[name], ns)
    finally:
        os.chdir(cwd)
    inputs = ns["inputs"]
    inputs = inputs() if callable(inputs) else inputs
    arrays = tuple(np.asarray(x.detach().numpy() if hasattr(x, "detach") else x) for x in inputs)
    m = compiler.compile(ns["model"], inputs, threads=threads)
    m.export(lib_dir / name, "model")
    lib = compiler.load(lib_dir / name)
    lib.threads = threads
    got, want = lib(*arrays), m(*arrays)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)
    rows = [("aicc in-process", timeit(lambda: m(*arrays), reps)),
            ("aicc libmodel.so", timeit(lambda: lib(*arrays), reps))]
    if isinstance(ns["model"], str) and ns["model"].endswith(".onnx"):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(ns["model"], so, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: arrays[0]}
        rows.append(("onnxruntime", timeit(lambda: sess.run(None, feed), reps)))
    base = rows[0][1][0]
    return [f"| {name} | {who} | {t[0]:.3f} | {t[1]:.3f} | {t[2]:.3f} | {base / t[0]:.2f}x |"
            for who, t in rows]


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated model names: " + ", ".join(MODELS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "aot.md"))
    args = p.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    head = [f"# aicc: compile cache and AOT library, {args.threads} thread(s)", "",
            f"Machine: {cpu_name()} ({llvm.get_host_cpu_name()}), {os.cpu_count()} cores. "
            f"Command: `python benchmarks/aot_bench.py --threads {args.threads}"
            f"{' --only ' + args.only if args.only else ''}`.", "",
            "| model | cold compile s | warm compile s (second process) |", "|---|---|---|"]
    runs = ["", "| model | runner | median ms | best ms | cpu ms | speed vs in-process |",
            "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            cache = str(Path(tmp) / f"cache-{name}")
            cold, c1 = compile_seconds(name, cache, args.threads)
            warm, c2 = compile_seconds(name, cache, args.threads)
            head.append(f"| {name} | {cold:.2f} ({c1}) | {warm:.3f} ({c2}) |")
            print(head[-1], flush=True)
            os.environ["AICC_CACHE_DIR"] = cache
            rows = run_side_by_side(name, args.threads, args.reps, Path(tmp))
            runs += rows
            print("\n".join(rows), flush=True)
    text = "\n".join(head + runs) + "\n"
    Path(args.out).write_text(text)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
