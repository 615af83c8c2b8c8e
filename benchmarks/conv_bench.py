"""Convolution timings at one thread: resnet50 (ONNX) against ONNX Runtime, and a small CNN
against torch eager.

    AICC_NUM_THREADS=1 python benchmarks/conv_bench.py            # both
    AICC_NUM_THREADS=1 python benchmarks/conv_bench.py --only cnn
    AICC_CONV_LOWERING=direct AICC_NUM_THREADS=1 python benchmarks/conv_bench.py   # the old lowering

Prints the median and best of a few runs in milliseconds, wall clock and the calling thread's CPU
time (at one thread every library computes on the calling thread; CPU time ignores the time other
processes take the core away). No assertion is made on any time; the outputs are checked against
the peer's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

RESNET50 = os.path.join(os.path.dirname(np.__file__), "..", "onnx", "backend", "test", "data",
                        "light", "light_resnet50.onnx")


def timeit(fn, reps: int) -> tuple[float, float, float]:
    fn()
    wall, cpu = [], []
    for _ in range(reps):
        w, c = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(wall) * 1e3, min(wall) * 1e3, min(cpu) * 1e3


def report(name: str, t: tuple[float, float, float]) -> None:
    print(f"  {name:<22} median {t[0]:9.2f} ms   best {t[1]:9.2f} ms   cpu {t[2]:9.2f} ms", flush=True)


def resnet50(reps: int) -> None:
    import onnx
    import onnxruntime as ort

    import compiler

    path = os.path.abspath(RESNET50)
    model = onnx.load(path)
    name = model.graph.input[0].name
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    t0 = time.perf_counter()
    m = compiler.compile(model)
    print(f"resnet50 (1x3x224x224): aicc compile {time.perf_counter() - t0:.1f} s", flush=True)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {name: x})[0]
    got = m(x)
    print(f"  max |aicc - ort| = {np.abs(got - ref).max():.2e}")
    report("aicc", timeit(lambda: m(x), reps))
    report("onnxruntime", timeit(lambda: sess.run(None, {name: x}), reps))


def cnn(reps: int) -> None:
    import torch

    import compiler

    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64 * 16 * 16, 10)).eval()
    for batch in (1, 32):
        x = torch.randn(batch, 3, 32, 32)
        m = compiler.compile(net, (x,))
        with torch.no_grad():
            ref = net(x).numpy()
        xn = x.numpy()
        print(f"cnn batch {batch}: max |aicc - torch| = {np.abs(m(xn) - ref).max():.2e}")
        report("aicc", timeit(lambda: m(xn), reps))
        with torch.no_grad():
            report("torch eager", timeit(lambda: net(x), reps))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--only", choices=("resnet50", "cnn"))
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    print(f"AICC_NUM_THREADS={os.environ.get('AICC_NUM_THREADS')} "
          f"AICC_CONV_LOWERING={os.environ.get('AICC_CONV_LOWERING', '(heuristic)')}")
    if args.only in (None, "cnn"):
        cnn(args.reps)
    if args.only in (None, "resnet50"):
        resnet50(args.reps)


if __name__ == "__main__":
    main()
