"""Dynamic shapes against static ones: one model compiled with symbolic dims, timed next to the
same model compiled for each exact shape, at one thread.

    python benchmarks/dynamic_bench.py            # writes benchmarks/results/dynamic.md
    python benchmarks/dynamic_bench.py --no-write

The models are ONNX graphs with a symbolic batch dim (and sequence dim, for the transformer),
built with onnx.helper and seeded random weights: compiled once with no shapes (dynamic), and
once per measured size with `input_shapes` (static). Each time is the calling thread's CPU
time (`time.thread_time`), the minimum over the repeats, so that other load on the machine
disturbs it little; "ratio" is dynamic / static (1.00: as fast as the static compile). Every
dynamic result is checked against the static one (and ONNX Runtime, when installed) first.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("AICC_CACHE", "0")
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import compiler  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from aot_bench import cpu_name  # noqa: E402


def mlp_model(dims=(256, 512, 512, 10), seed: int = 0):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, cur = [], [], "x"
    for i in range(len(dims) - 1):
        w = (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype(np.float32)
        b = rng.standard_normal(dims[i + 1]).astype(np.float32) * 0.1
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        cur = f"a{i}"
        if i < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
    nodes.append(helper.make_node("Softmax", [cur], ["y"], axis=-1))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", dims[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", dims[-1]])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def transformer_model(d: int = 256, heads: int = 4, layers: int = 2, seed: int = 0):
    """A pre-norm transformer encoder (attention, GELU MLP, layer norms) written in torch with
    the sizes read from x.shape, exported to ONNX with dynamic batch and sequence axes."""
    import io

    import onnx
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.ff = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                          torch.nn.Linear(4 * d, d))

        def forward(self, x):
            B, S, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(B, S, 3, heads, D // heads).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / (D // heads) ** 0.5, -1) @ v
            x = x + self.o(a.transpose(1, 2).reshape(B, S, D))
            return x + self.ff(self.ln2(x))

    torch.manual_seed(seed)
    net = torch.nn.Sequential(*(Block() for _ in range(layers))).eval()
    buf = io.BytesIO()
    torch.onnx.export(net, (torch.randn(2, 7, d),), buf, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                      opset_version=17, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def cnn_model(seed: int = 0):
    """A small CNN (3x3 convs with padding, batch norm, max pooling, a stride-2 conv, a 1x1
    conv, global average pooling, a linear layer) exported from torch with a dynamic batch."""
    import io

    import onnx
    import torch

    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()
    buf = io.BytesIO()
    torch.onnx.export(net, (torch.randn(2, 3, 32, 32),), buf, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17,
                      dynamo=False)
    return onnx.load_from_string(buf.getvalue())


MODELS = {
    "mlp 256-512-512-10": (mlp_model, lambda n, rng: {"x": rng.standard_normal((n, 256)).astype(np.float32)},
                           [1, 32]),
    "transformer d256 h4 L2, seq 128": (
        transformer_model, lambda n, rng: {"x": rng.standard_normal((n, 128, 256)).astype(np.float32)},
        [1, 32]),
    "cnn 3x32x32, 4 convs": (
        cnn_model, lambda n, rng: {"x": rng.standard_normal((n, 3, 32, 32)).astype(np.float32)},
        [1, 32]),
}


def cpu_time(fn, *args, repeats: int) -> float:
    fn(*args)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - t0)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    rows = []
    for name, (make, inputs, sizes) in MODELS.items():
        try:
            model = make()
        except ImportError as e:  # the transformer is written in torch
            print(f"{name}: skipped ({e})")
            continue
        t0 = time.perf_counter()
        dyn = compiler.compile(model, threads=1)
        dyn_compile = time.perf_counter() - t0
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]) \
            if ort is not None else None
        rng = np.random.default_rng(1)
        for n in sizes:
            feeds = inputs(n, rng)
            shapes = {k: v.shape for k, v in feeds.items()}
            static = compiler.compile(model, input_shapes=shapes, threads=1)
            xs = list(feeds.values())
            yd, ys = dyn(*xs), static(*xs)
            np.testing.assert_allclose(yd, ys, rtol=1e-4, atol=1e-5)
            if sess is not None:
                np.testing.assert_allclose(yd, sess.run(None, feeds)[0], rtol=1e-4, atol=1e-5)
            ts = cpu_time(static, *xs, repeats=args.repeats)
            td = cpu_time(dyn, *xs, repeats=args.repeats)
            rows.append((name, " ".join(f"{k}={'x'.join(map(str, s))}" for k, s in shapes.items()),
                         ts * 1e6, td * 1e6, td / ts))
            print(f"{name:24s} {rows[-1][1]:20s} static {ts * 1e6:9.1f} us  dynamic {td * 1e6:9.1f} us"
                  f"  ratio {td / ts:.2f}", flush=True)
        assert dyn.stats["compilations"] == 1
        print(f"{name}: one dynamic compile ({dyn_compile:.1f} s) served every size")
    if args.no_write:
        return
    from compiler.targets.cpu.machine import cpu_machine

    mach = cpu_machine()
    cpu = (f"{cpu_name()} (LLVM CPU {mach.name}, {mach.vector_bits}-bit vectors"
           f"{', AVX2' if mach.has_avx2 else ''})")
    lines = ["# Dynamic shapes: one compile for every size, against a compile per size", "",
             f"Machine: {cpu}, {os.cpu_count()} cores; 1 thread; python {platform.python_version()}.",
             "Command: `python benchmarks/dynamic_bench.py`. Times: calling thread's CPU time, "
             f"min of {args.repeats}. Ratio: dynamic / static (lower is better).", "",
             "| model | inputs | static (us) | dynamic (us) | ratio |", "|---|---|---:|---:|---:|"]
    lines += [f"| {m} | {s} | {a:.1f} | {b:.1f} | {r:.2f} |" for m, s, a, b, r in rows]
    out = ROOT / "benchmarks" / "results" / "dynamic.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
