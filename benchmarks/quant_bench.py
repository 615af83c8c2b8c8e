"""int8 against float32: `compiler.quantize` models next to `compiler.compile` of the same
model, side by side in one process; and `compiler.quantize_dynamic` transformers next to
aicc float32 and ONNX Runtime's float32 and quantize_dynamic models.

    python benchmarks/quant_bench.py [--threads 1] [--reps 50] [--batch 32] [--skip-static]
                                     [--int8-saturation] [--peer-isa avx2]

Models: an MLP (784-512-512-10), a small CNN (3x3 convs 32-64-64 on 32x32 images, pooling, a
linear head) and a transformer feed-forward block (x + W2 gelu(W1 x), d 256, ffn 1024, 64 tokens
per sample), at `--batch`. Calibration: 8 batches of random inputs (minmax). The int8 and
float32 models run alternately; reported: the median wall-clock ms and the least CPU time of the
calling thread (which other processes on a shared machine disturb less), the speed-up from the
CPU times, and the cosine similarity of the int8 output with float32. No assertion is made on
any time. Writes benchmarks/results/quant.md.

The MLP and the CNN also run against ONNX Runtime: the same network exported from torch and
quantized by onnxruntime.quantization.quantize_static (QDQ; 8-bit weights, then 7-bit with
reduce_range, against `compiler.quantize(..., reduce_range=True)`), run by ONNX Runtime and
compiled by aicc (`compiler.compile` of the QDQ model), next to ONNX Runtime's float32 (ort_row).

Dynamic quantization: a stack of two post-norm encoder layers (benchmarks/models.py's
EncoderLayer, d 256, 4 heads, FFN 1024) at batch 1 x 128 tokens and batch 32 x 64 tokens, as a
torch module: aicc float32 (`compiler.compile`), aicc int8 (`compiler.quantize_dynamic`, weights
per channel), ONNX Runtime float32 and ONNX Runtime running the model that
onnxruntime.quantization.quantize_dynamic writes from the float ONNX export (its defaults:
weights per tensor), and aicc compiling that same ORT int8 model. All run alternately in one
process, ONNX Runtime with one intra-op thread (its work then runs on the calling thread, so
its thread CPU time counts it). Cosines are against torch's float32 output.

`--int8-saturation` compiles every aicc int8 model with `int8_saturation=True`: on a CPU without
VNNI its 8-bit weights then take the vpmaddubsw kernel, whose int16 pair sums saturate as ONNX
Runtime's do there (with VNNI it changes nothing). Run it with AICC_TARGET_CPU=x86-64-v3 for
aicc's AVX2 code on any host; add `--peer-isa avx2` for ONNX Runtime's AVX2 kernels beside it
(benchmarks/peer_isa.py; without it ONNX Runtime picks its kernels from the host).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from aot_bench import cpu_name  # noqa: E402
from peer_isa import PEER_ISAS, aicc_code, describe, restrict_peers  # noqa: E402

import compiler  # noqa: E402
from compiler import ops  # noqa: E402


def models(batch: int, rng: np.random.Generator):
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    w1, w2, w3 = w(784, 512), w(512, 512), w(512, 10)
    b1, b2 = (rng.standard_normal(512) * 0.1).astype(np.float32), (rng.standard_normal(512) * 0.1).astype(np.float32)

    def mlp(x):
        h = np.maximum(x @ w1 + b1, 0.0)
        h = np.maximum(h @ w2 + b2, 0.0)
        return h @ w3

    mlp.torch = lambda: torch_mlp(w1, b1, w2, b2, w3)  # the same network in torch (ort_row)

    f1, f2 = w(256, 1024), w(1024, 256)
    c1, c2, c3 = (rng.standard_normal(s).astype(np.float32) / np.sqrt(np.prod(s[1:])) for s in
                  ((32, 3, 3, 3), (64, 32, 3, 3), (64, 64, 3, 3)))
    head = w(64 * 8 * 8, 10)

    def cnn(x):
        h = ops.relu(ops.conv2d(x, c1, padding=1))
        h = ops.max_pool2d(ops.relu(ops.conv2d(h, c2, padding=1)), 2)
        h = ops.max_pool2d(ops.relu(ops.conv2d(h, c3, padding=1)), 2)
        return h.reshape(x.shape[0], -1) @ head

    cnn.torch = lambda: torch_cnn(c1, c2, c3, head)

    def ffn(x):
        return x + ops.gelu(x @ f1) @ f2

    return {
        f"MLP 784-512-512-10, batch {batch}": (mlp, (batch, 784)),
        f"CNN conv 32-64-64 32x32, batch {batch}": (cnn, (batch, 3, 32, 32)),
        f"FFN d256 ffn1024, batch {batch} x 64 tokens": (ffn, (batch * 64, 256)),
    }


def timed(fns, reps: int) -> list[tuple[float, float]]:
    """(median wall ms, least CPU ms of this thread) per function, run alternately."""
    wall, cpu = [[] for _ in fns], [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t0, c0 = time.perf_counter(), time.thread_time()
            fn()
            cpu[i].append(time.thread_time() - c0)
            wall[i].append(time.perf_counter() - t0)
    return [(statistics.median(w) * 1e3, min(c) * 1e3) for w, c in zip(wall, cpu)]


def _cross_vnni() -> bool:
    """Whether aicc's code is for a CPU without VNNI on a host with it (AICC_TARGET_CPU)."""
    from compiler.targets.cpu.machine import cpu_machine

    return cpu_machine(None).vnni_bits == 0 and cpu_machine("host").vnni_bits > 0


def _cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _params(*arrays):
    import torch

    return torch.nn.ParameterList(torch.nn.Parameter(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))
                                  for a in arrays)


def torch_mlp(w1, b1, w2, b2, w3):
    """models()'s MLP as a torch module with the same weights."""
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = _params(w1, b1, w2, b2, w3)

        def forward(self, x):
            h = torch.relu(x @ self.w[0] + self.w[1])
            h = torch.relu(h @ self.w[2] + self.w[3])
            return h @ self.w[4]

    return MLP().eval()


def torch_cnn(c1, c2, c3, head):
    """models()'s CNN as a torch module with the same weights."""
    import torch

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = _params(c1, c2, c3, head)

        def forward(self, x):
            f = torch.nn.functional
            h = torch.relu(f.conv2d(x, self.w[0], padding=1))
            h = f.max_pool2d(torch.relu(f.conv2d(h, self.w[1], padding=1)), 2)
            h = f.max_pool2d(torch.relu(f.conv2d(h, self.w[2], padding=1)), 2)
            return h.reshape(x.shape[0], -1) @ self.w[3]

    return CNN().eval()


def ort_row(fn, calib, x, q, f, threads: int, reps: int, out_dir: Path, reduce_range: bool = False,
            saturation: bool = False) -> tuple:
    """(wall, cpu) and cosine with float32 of aicc int8 `q`, aicc float32 `f`, aicc compiling the
    QDQ model onnxruntime.quantization.quantize_static writes (uint8 activations, int8 weights
    per channel, 7-bit with `reduce_range`, the same calibration batches), ONNX Runtime on that
    model and ONNX Runtime float32; then the cosine of aicc's output on the QDQ model with ONNX
    Runtime's."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from models import to_onnx

    f32, q8 = out_dir / f"{fn.__name__}.onnx", out_dir / f"{fn.__name__}_q{7 if reduce_range else 8}.onnx"
    f32.write_bytes(to_onnx(fn.torch(), (x,)).SerializeToString())

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib)

        def get_next(self):
            b = next(self.it, None)
            return None if b is None else {"x": b[0]}

    quantize_static(str(f32), str(q8), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=reduce_range)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    ort_q, ort_f = (ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"]) for p in (q8, f32))
    aicc_oq = compiler.compile(str(q8), (x,), threads=threads, int8_saturation=saturation)  # ORT's QDQ model
    ref = fn(x)
    peers = [lambda: q(x), lambda: f(x), lambda: aicc_oq(x), lambda: ort_q.run(None, {"x": x})[0],
             lambda: ort_f.run(None, {"x": x})[0]]
    cos = [_cos(p(), ref) for p in peers]
    return timed(peers, reps), cos, _cos(peers[2](), peers[3]())


def dynamic_rows(threads: int, reps: int, out_dir: Path, saturation: bool = False) -> list[tuple]:
    """(name, int8 layers, then (wall, cpu) and cosine for each peer) per encoder case."""
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import quantize_dynamic

    from models import EncoderLayer, to_onnx
    from workloads import encoder_params

    torch.manual_seed(0)
    layers = torch.nn.Sequential(*(EncoderLayer(encoder_params(seed=i)) for i in range(2))).eval()
    rows = []
    for batch, seq in ((1, 128), (32, 64)):
        x = np.random.default_rng(batch).standard_normal((batch, seq, 256)).astype(np.float32)
        with torch.no_grad():
            ref = layers(torch.from_numpy(x)).numpy()
        f32, q8 = out_dir / f"enc_b{batch}.onnx", out_dir / f"enc_b{batch}_q.onnx"
        f32.write_bytes(to_onnx(layers, (x,)).SerializeToString())
        quantize_dynamic(str(f32), str(q8))
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        ort_f = ort.InferenceSession(str(f32), so, providers=["CPUExecutionProvider"])
        ort_q = ort.InferenceSession(str(q8), so, providers=["CPUExecutionProvider"])
        aicc_f = compiler.compile(layers, (x,), threads=threads)
        aicc_q = compiler.quantize_dynamic(layers, (x,), threads=threads, int8_saturation=saturation)
        aicc_q7 = compiler.quantize_dynamic(layers, (x,), threads=threads, reduce_range=True)
        aicc_oq = compiler.compile(str(q8), (x,), threads=threads, int8_saturation=saturation)
        peers = [lambda: aicc_q(x), lambda: aicc_q7(x), lambda: aicc_f(x), lambda: aicc_oq(x),
                 lambda: ort_q.run(None, {"x": x}), lambda: ort_f.run(None, {"x": x})]
        cos = [_cos(fn() if i < 4 else fn()[0], ref) for i, fn in enumerate(peers)]
        times = timed(peers, reps)
        name = f"2 encoder layers d256 h4 ffn1024, batch {batch} x {seq} tokens"
        rows.append((name, aicc_q.stats["quantized_ops"], times, cos))
        print(name, " | ".join(f"{c:.3f} ms (cos {k:.4f})" for (_, c), k in zip(times, cos)), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--skip-static", action="store_true", help="only the dynamic quantization rows")
    p.add_argument("--int8-saturation", action="store_true",
                   help="aicc's int8 models with int8_saturation=True (ONNX Runtime's pair sums without VNNI)")
    p.add_argument("--peer-isa", default="host", choices=PEER_ISAS,
                   help="ONNX Runtime's kernels: the host's, or its AVX2 ones (benchmarks/peer_isa.py)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "quant.md"))
    args = p.parse_args()
    restrict_peers(args.peer_isa)
    sat = args.int8_saturation
    rng = np.random.default_rng(0)
    rows, ort_rows = [], []
    tmp = tempfile.TemporaryDirectory()
    for name, (fn, shape) in ({} if args.skip_static else models(args.batch, rng)).items():
        calib = [(rng.standard_normal(shape).astype(np.float32),) for _ in range(8)]
        x = rng.standard_normal(shape).astype(np.float32)
        q = compiler.quantize(fn, calib, (x,), threads=args.threads, int8_saturation=sat)
        f = compiler.compile(fn, (x,), threads=args.threads)
        yq, yf = q(x).astype(np.float64).ravel(), f(x).astype(np.float64).ravel()
        cos = float(yq @ yf / (np.linalg.norm(yq) * np.linalg.norm(yf)))
        (w_q, c_q), (w_f, c_f) = timed([lambda: q(x), lambda: f(x)], args.reps)
        rows.append((name, q.stats["quantized_ops"], w_q, c_q, w_f, c_f, cos))
        print(f"{name}: int8 {c_q:.3f} ms, float32 {c_f:.3f} ms (CPU) -> {c_f / c_q:.2f}x; cosine {cos:.5f}",
              flush=True)
        if hasattr(fn, "torch"):
            for bits in (8, 7):
                qb = q if bits == 8 else compiler.quantize(fn, calib, (x,), threads=args.threads, reduce_range=True)
                row = ort_row(fn, calib, x, qb, f, args.threads, args.reps, Path(tmp.name), bits == 7, sat)
                ort_rows.append((f"{name}, {bits}-bit weights", *row))
                print(ort_rows[-1][0], "aicc int8 / float32 / on the QDQ model, ORT int8 QDQ / float32:",
                      " | ".join(f"{c:.3f} ms (cos {k:.4f})" for (_, c), k in zip(*row[:2])), flush=True)
    dyn = dynamic_rows(args.threads, max(5, args.reps // 2), Path(tmp.name), sat)
    tmp.cleanup()
    if args.peer_isa != "host":
        peers = [f"Peers: {describe()}."]
    elif _cross_vnni():
        peers = ["ONNX Runtime picks its kernels from the host, not from AICC_TARGET_CPU: here it runs its VNNI",
                 "int8 kernels against aicc's code for a CPU without VNNI."]
    else:
        peers = []
    lines = [
        "# int8 (compiler.quantize) against float32 (compiler.compile)",
        "",
        f"Machine: {cpu_name()} ({platform.machine()}; {aicc_code()}), {args.threads} thread(s). "
        f"Command: `python benchmarks/quant_bench.py {' '.join(sys.argv[1:])}`.",
        *(["aicc's int8 models: `int8_saturation=True` (without VNNI, int16 pair sums that may saturate,",
           "as ONNX Runtime's)."] if sat else []),
        *peers,
        "Alternating runs: median wall-clock ms and least CPU ms of the calling thread; speed-up =",
        "float32 CPU ms / int8 CPU ms; cosine of the int8 output with float32's. Calibration: 8",
        "random batches, minmax; weights per channel.",
        "",
        "| model | int8 layers | int8 wall / CPU ms | float32 wall / CPU ms | speed-up | cosine |",
        "|---|---|---|---|---|---|",
        *(f"| {n} | {k} | {wq:.3f} / {cq:.3f} | {wf:.3f} / {cf:.3f} | {cf / cq:.2f}x | {c:.5f} |"
          for n, k, wq, cq, wf, cf, c in rows),
        *([] if not ort_rows else [
            "",
            "The MLP and the CNN against ONNX Runtime: the same network exported from torch, quantized by",
            "`onnxruntime.quantization.quantize_static` (QDQ, uint8 activations, int8 weights per channel, the",
            "same calibration batches; 7-bit: `reduce_range=True`, and `compiler.quantize(...,",
            "reduce_range=True)`) and run by ONNX Runtime with one intra-op thread (its AVX2 u8 x s8 kernel",
            "may saturate int16 pair sums of 8-bit weights); each cell: median wall ms / least CPU ms",
            "(cosine with float32); speed-ups from CPU ms; the last column: cosine of aicc's output on the",
            "QDQ model with ONNX Runtime's.",
            "",
            "| model | aicc int8 | aicc float32 | aicc on ORT's QDQ model | ORT int8 (QDQ) | ORT float32 "
            "| aicc int8 vs ORT int8 | aicc on the QDQ model vs ORT int8 | aicc vs ORT on the QDQ model |",
            "|---|---|---|---|---|---|---|---|---|",
            *(f"| {n} | " + " | ".join(f"{w:.2f} / {c:.2f} ({k:.4f})" for (w, c), k in zip(t, cos))
              + f" | {t[3][1] / t[0][1]:.2f}x | {t[3][1] / t[2][1]:.2f}x | {agree:.5f} |"
              for n, t, cos, agree in ort_rows)]),
        "",
        "## Dynamic quantization (compiler.quantize_dynamic) of transformer encoder layers",
        "",
        "Each cell: median wall-clock ms / least CPU ms of the calling thread, then the cosine with",
        "torch's float32 output. aicc int8: `compiler.quantize_dynamic` of the torch module (weights",
        "per channel, activations per tensor at run time), and with `reduce_range=True` (7-bit weights:",
        "the vpmaddubsw kernel); ORT int8: the model `onnxruntime.quantization.quantize_dynamic` writes",
        "(defaults: 8-bit weights per tensor; its AVX2 u8 x s8 kernel may saturate int16 pair sums), run",
        "by ONNX Runtime, and compiled by aicc in the column before; speed-ups from CPU ms.",
        "",
        "| model | int8 layers | aicc int8 | aicc int8 7-bit | aicc float32 | aicc on ORT's int8 model | ORT int8 "
        "| ORT float32 | aicc int8 / 7-bit vs aicc float32 | aicc int8 / 7-bit vs ORT int8 |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(f"| {n} | {k} | " + " | ".join(f"{w:.2f} / {c:.2f} ({cs:.4f})" for (w, c), cs in zip(t, cos))
          + f" | {t[2][1] / t[0][1]:.2f}x / {t[2][1] / t[1][1]:.2f}x | {t[4][1] / t[0][1]:.2f}x / "
          f"{t[4][1] / t[1][1]:.2f}x |" for n, k, t, cos in dyn),
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
