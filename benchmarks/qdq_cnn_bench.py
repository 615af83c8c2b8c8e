"""aicc compiling ONNX Runtime's QDQ model of quant_bench's CNN, against ONNX Runtime running it,
alternated in one process (batch 32, one thread, least CPU ms of the calling thread).

    PYTHONPATH=<aicc tree> python benchmarks/qdq_cnn_bench.py [--reps 25] [--batch 32] [--reduce-range]
    PYTHONPATH=<aicc tree> python benchmarks/qdq_cnn_bench.py --zoo resnet18 [--reduce-range]

The model is quant_bench.py's CNN (3x3 convs 32-64-64 on 32x32 images, max pools, a linear
head) exported from torch and quantized by onnxruntime.quantization.quantize_static (QDQ,
uint8 activations, int8 weights per channel, 8 random calibration batches), as in
quant_bench's ort_row. `compiler` is imported before this tree's benchmarks, so that the
aicc on PYTHONPATH is the one measured (an older checkout for a before / after comparison,
ONNX Runtime being the control in both processes). Prints the times and the cosines.
With --zoo, the model is instead one of benchmarks/zoo.py's (torchvision, random weights, its
full input size at batch 1, exported by the zoo), calibrated on 4 random batches.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import compiler  # the tree on PYTHONPATH, before quant_bench puts this one on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quant_bench as qb  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=25)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--reduce-range", action="store_true",
                   help="7-bit weights (quantize_static's reduce_range, ONNX Runtime's advice for AVX2 without VNNI)")
    p.add_argument("--zoo", metavar="NAME", help="a CNN of benchmarks/zoo.py (e.g. resnet18) instead, at batch 1")
    args = p.parse_args()
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from models import to_onnx

    os.environ.setdefault("AICC_CACHE", "0")
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp())
    f32, q8 = tmp / "cnn.onnx", tmp / "cnn_q.onnx"
    if args.zoo:
        import onnx
        import torch
        import zoo

        torch.set_num_threads(1)
        spec = zoo.SPECS[args.zoo]
        module, inputs = spec.build(False)
        name, x, shape = f"{args.zoo} (zoo, random weights), batch 1", inputs[0].numpy(), tuple(inputs[0].shape)
        f32.write_bytes(zoo.to_onnx(module, inputs, spec.onnx_attn).SerializeToString())

        def fn(v):
            with torch.no_grad():
                return module(torch.from_numpy(v)).numpy()

        calib = [(rng.standard_normal(shape).astype(np.float32),) for _ in range(4)]
        x_name = onnx.load(str(f32)).graph.input[0].name
    else:
        name, (fn, shape) = next((k, v) for k, v in qb.models(args.batch, rng).items() if k.startswith("CNN"))
        calib = [(rng.standard_normal(shape).astype(np.float32),) for _ in range(8)]
        x = rng.standard_normal(shape).astype(np.float32)
        f32.write_bytes(to_onnx(fn.torch(), (x,)).SerializeToString())
        x_name = "x"
    batches = iter(calib)

    class Reader(CalibrationDataReader):
        def get_next(self):
            b = next(batches, None)
            return None if b is None else {x_name: b[0]}

    quantize_static(str(f32), str(q8), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    reduce_range=args.reduce_range)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
    sess = ort.InferenceSession(str(q8), so, providers=["CPUExecutionProvider"])
    m = compiler.compile(str(q8), (x,), threads=1)
    ref, y, yo = fn(x), m(x), sess.run(None, {x_name: x})[0]
    (wa, ca), (wo, co) = qb.timed([lambda: m(x), lambda: sess.run(None, {x_name: x})], args.reps)
    print(f"aicc from {Path(compiler.__file__).parent.parent}; {name}")
    print(f"aicc on the QDQ model: {wa:.2f} / {ca:.2f} ms (median wall / least CPU), cosine with float32 "
          f"{qb._cos(y, ref):.4f}, with ONNX Runtime's int8 {qb._cos(y, yo):.4f}")
    print(f"ONNX Runtime int8:     {wo:.2f} / {co:.2f} ms, cosine with float32 {qb._cos(yo, ref):.4f}")
    print(f"aicc vs ONNX Runtime (CPU ms): {co / ca:.2f}x; outputs equal: {np.array_equal(y, yo)}")


if __name__ == "__main__":
    main()
