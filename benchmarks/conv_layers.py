"""Per-layer convolution timings at one thread: each conv of a model's shapes as a one-node
ONNX model (Conv with bias), aicc against ONNX Runtime, and the same conv's matmul alone
(W (OC x IC*KH*KW) @ X (IC*KH*KW x OH*OW), W constant) to show the im2col copy's share.

    python benchmarks/conv_layers.py [--runs 20] [--lowering "im2col/packed:owb=4,ocv=3"]
    python benchmarks/conv_layers.py --model resnet50
    python benchmarks/conv_layers.py --small-cnn 1     # run.py's CNN: packed vs im2col vs ORT

Times are the minimum thread CPU time (time.thread_time) of one call, the calls of every
variant of one layer alternated (a, b, c, a, b, c, ...) in one process.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_vs_ort import best_ms  # noqa: E402  (alternated calls, least thread CPU time)

# (name, ic, oc, hw, k, stride, pad, count in resnet18)
RESNET18 = [
    ("stem7x7s2", 3, 64, 224, 7, 2, 3, 1),
    ("l1.3x3.64", 64, 64, 56, 3, 1, 1, 4),
    ("l2.3x3s2.128", 64, 128, 56, 3, 2, 1, 1),
    ("l2.3x3.128", 128, 128, 28, 3, 1, 1, 3),
    ("l2.1x1s2.128", 64, 128, 56, 1, 2, 0, 1),
    ("l3.3x3s2.256", 128, 256, 28, 3, 2, 1, 1),
    ("l3.3x3.256", 256, 256, 14, 3, 1, 1, 3),
    ("l3.1x1s2.256", 128, 256, 28, 1, 2, 0, 1),
    ("l4.3x3s2.512", 256, 512, 14, 3, 2, 1, 1),
    ("l4.3x3.512", 512, 512, 7, 3, 1, 1, 3),
    ("l4.1x1s2.512", 256, 512, 14, 1, 2, 0, 1),
]
# torchvision's ResNet-50 (v1.5: the stride on the 3x3), bottleneck blocks 3, 4, 6, 3
RESNET50 = [
    ("stem7x7s2", 3, 64, 224, 7, 2, 3, 1),
    ("l1.1x1.64-64", 64, 64, 56, 1, 1, 0, 1),
    ("l1.1x1.256-64", 256, 64, 56, 1, 1, 0, 2),
    ("l1.3x3.64", 64, 64, 56, 3, 1, 1, 3),
    ("l1.1x1.64-256", 64, 256, 56, 1, 1, 0, 4),  # 3 blocks + the downsample (stride 1)
    ("l2.1x1.256-128", 256, 128, 56, 1, 1, 0, 1),
    ("l2.3x3s2.128", 128, 128, 56, 3, 2, 1, 1),
    ("l2.1x1s2.256-512", 256, 512, 56, 1, 2, 0, 1),
    ("l2.1x1.128-512", 128, 512, 28, 1, 1, 0, 4),
    ("l2.1x1.512-128", 512, 128, 28, 1, 1, 0, 3),
    ("l2.3x3.128", 128, 128, 28, 3, 1, 1, 3),
    ("l3.1x1.512-256", 512, 256, 28, 1, 1, 0, 1),
    ("l3.3x3s2.256", 256, 256, 28, 3, 2, 1, 1),
    ("l3.1x1s2.512-1024", 512, 1024, 28, 1, 2, 0, 1),
    ("l3.1x1.256-1024", 256, 1024, 14, 1, 1, 0, 6),
    ("l3.1x1.1024-256", 1024, 256, 14, 1, 1, 0, 5),
    ("l3.3x3.256", 256, 256, 14, 3, 1, 1, 5),
    ("l4.1x1.1024-512", 1024, 512, 14, 1, 1, 0, 1),
    ("l4.3x3s2.512", 512, 512, 14, 3, 2, 1, 1),
    ("l4.1x1s2.1024-2048", 1024, 2048, 14, 1, 2, 0, 1),
    ("l4.1x1.512-2048", 512, 2048, 7, 1, 1, 0, 3),
    ("l4.1x1.2048-512", 2048, 512, 7, 1, 1, 0, 2),
    ("l4.3x3.512", 512, 512, 7, 3, 1, 1, 2),
]
MODELS = {"resnet18": RESNET18, "resnet50": RESNET50}


def conv_model(ic, oc, hw, k, stride, pad, lowering=None):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((oc, ic, k, k)) / math.sqrt(ic * k * k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    oh = (hw + 2 * pad - k) // stride + 1
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k],
                            strides=[stride, stride], pads=[pad] * 4)
    g = helper.make_graph([node], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ic, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, oh, oh])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def small_cnn(runs: int, batch: int) -> None:
    """run.py's CNN 3x32x32 (benchmarks/models.py): aicc with the packed convs, aicc without
    (AICC_CONV_PACKED=0) and ONNX Runtime, alternated in this process."""
    import onnxruntime as ort
    import torch

    import compiler
    import models
    import workloads as W
    import zoo

    module = models.CNN(W.cnn_params()).eval()
    x = torch.randn(batch, 3, 32, 32)
    m = compiler.compile(module, (x,), threads=1)
    os.environ["AICC_CONV_PACKED"] = "0"
    m_old = compiler.compile(module, (x,), threads=1)
    del os.environ["AICC_CONV_PACKED"]
    proto = zoo.to_onnx(module, (x,))
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    xn = x.numpy()
    feed = {sess.get_inputs()[0].name: xn}
    want = sess.run(None, feed)[0]
    for mm in (m, m_old):
        np.testing.assert_allclose(mm(xn), want, rtol=1e-3, atol=1e-3)
    t = best_ms([lambda: m(xn), lambda: m_old(xn), lambda: sess.run(None, feed)], runs)
    print(f"CNN 3x32x32 b{batch}: aicc packed {t[0]:.3f} ms, aicc im2col {t[1]:.3f} ms, "
          f"ORT {t[2]:.3f} ms; ORT/aicc {t[2] / t[0]:.2f} (was {t[2] / t[1]:.2f})")


def main(argv=None) -> int:
    import onnxruntime as ort

    import compiler

    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--lowering", default="default",
                   help="aicc conv lowerings to time, separated by '/' (default: the heuristic's); "
                        "packed:owb=4,ocv=3 also fixes the packed register tile")
    p.add_argument("--only", default="")
    p.add_argument("--model", default="resnet18", choices=sorted(MODELS),
                   help="whose conv layers (with their counts in the model)")
    p.add_argument("--no-matmul", action="store_true")
    p.add_argument("--small-cnn", type=int, metavar="BATCH", default=0,
                   help="time run.py's CNN 3x32x32 at this batch instead (A/B against im2col)")
    args = p.parse_args(argv)
    if args.small_cnn:
        small_cnn(args.runs, args.small_cnn)
        return 0
    lowerings = args.lowering.split("/")
    rows = [r for r in MODELS[args.model] if not args.only or r[0] in args.only.split(",")]
    for i, low in enumerate(lowerings):
        print(f"variant {i}: {low}")
    head = f"{'layer':<20}{'x':>3}{'ORT ms':>9}" + "".join(f"{f'v{i} ms':>14}" for i in range(len(lowerings)))
    head += ("" if args.no_matmul else f"{'matmul ms':>11}") + "".join(
        f"{f'ORT/v{i}':>14}" for i in range(len(lowerings)))
    print(head, flush=True)
    tot = np.zeros(len(lowerings) + 2)
    for name, ic, oc, hw, k, s, pad, count in rows:
        proto = conv_model(ic, oc, hw, k, s, pad)
        x = np.random.default_rng(1).standard_normal((1, ic, hw, hw)).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
        sess = ort.InferenceSession(proto.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x})[0]
        fns = [lambda: sess.run(None, {"x": x})]
        for low in lowerings:
            mode, _, sched = low.partition(":")
            if mode != "default":
                os.environ["AICC_CONV_LOWERING"] = mode
            if sched:
                os.environ["AICC_CONV_SCHEDULE"] = sched
            m = compiler.compile(proto, [x], threads=1)
            os.environ.pop("AICC_CONV_LOWERING", None)
            os.environ.pop("AICC_CONV_SCHEDULE", None)
            got = m(x)
            err = float(np.abs(got - want).max())
            assert err < 1e-3 * max(1.0, float(np.abs(want).max())), (name, low, err)
            fns.append(lambda m=m: m(x))
        if not args.no_matmul:
            oh = (hw + 2 * pad - k) // s + 1
            kk = ic * k * k
            wm = np.random.default_rng(2).standard_normal((oc, kk)).astype(np.float32)
            xm = np.random.default_rng(3).standard_normal((kk, oh * oh)).astype(np.float32)
            mm = compiler.compile(lambda a: wm @ a, [xm], threads=1)
            fns.append(lambda: mm(xm))
        t = best_ms(fns, args.runs)
        if args.no_matmul:
            t.append(0.0)
        tot += np.array(t) * count
        line = f"{name:<20}{count:>3}{t[0]:9.3f}" + "".join(f"{v:14.3f}" for v in t[1:1 + len(lowerings)])
        line += ("" if args.no_matmul else f"{t[-1]:11.3f}") + "".join(
            f"{t[0] / v:14.2f}" for v in t[1:1 + len(lowerings)])
        print(line, flush=True)
    line = f"{'total(xcount)':<20}{'':>3}{tot[0]:9.3f}" + "".join(f"{v:14.3f}" for v in tot[1:1 + len(lowerings)])
    line += ("" if args.no_matmul else f"{tot[-1]:11.3f}") + "".join(
        f"{tot[0] / v:14.2f}" for v in tot[1:1 + len(lowerings)])
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
