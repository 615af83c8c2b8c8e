"""Zoo models through the ONNX frontend, timed next to ONNX Runtime by thread CPU time.

    python benchmarks/onnx_vs_ort.py                       # the transformer rows, full size
    python benchmarks/onnx_vs_ort.py --only gpt2,vit --runs 20 --write

Each model is built and exported exactly as `benchmarks/zoo.py` does (seeded random weights,
torch.onnx.export with the TorchScript exporter, opset 17), compiled with
`compiler.compile(proto, inputs, threads=N)` and run next to an onnxruntime session with
intra_op_num_threads = N. The check is zoo.py's (against onnxruntime here: |aicc - ort| <=
1e-4 x s + 1e-3 x |ort|, s = max |ort|). Times are the minimum over `--runs` calls of
`time.thread_time()` around one call, aicc's and ORT's calls alternated, so that other
processes on a shared machine count as little as they can (at 1 thread both run on the
calling thread); the ratio is ORT ms / aicc ms (above 1:
aicc is faster). `--write` puts the table in benchmarks/results/onnx_vs_ort.md (or `--out`).
`--peer-isa avx2` runs ONNX Runtime's AVX2 kernels (benchmarks/peer_isa.py), for aicc's AVX2 code
(AICC_TARGET_CPU=x86-64-v3) on a host with AVX-512.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from pathlib import Path

os.environ.setdefault("AICC_CACHE", "0")
os.environ.setdefault("AICC_PROGRESS", "0")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import zoo  # noqa: E402
from peer_isa import PEER_ISAS, aicc_code, describe, restrict_peers  # noqa: E402

TRANSFORMERS = ["gpt2", "t5-encoder", "vit", "clip-text", "clip-vision", "vit_b_16", "whisper-encoder"]


def best_ms(fns, runs: int) -> list[float]:
    """The minimum thread CPU time of each function in ms, the calls alternated (a, b, a, b,
    ...) so that both see the same load from other jobs."""
    for fn in fns:
        fn()
    best = [math.inf] * len(fns)
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.thread_time()
            fn()
            best[i] = min(best[i], time.thread_time() - t0)
    return [1e3 * t for t in best]


def run(name: str, threads: int, runs: int, ab: str = "") -> dict:
    import onnxruntime as ort
    import torch

    import compiler

    torch.set_num_threads(threads)
    module, inputs = zoo.SPECS[name].build(False)
    proto = zoo.to_onnx(module, inputs)
    args = [t.numpy() for t in inputs]
    m = compiler.compile(proto, args, threads=threads)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {i.name: a for i, a in zip(sess.get_inputs(), args)}
    want = sess.run(None, feed)
    ok, err, why = zoo.compare(zoo.outputs_of(m(*args)), [np.asarray(w) for w in want])
    row = {"model": name, "kernels": m.stats.get("kernels"), "ok": ok, "err": err, "why": why,
           "attention": m.ir("tensor").count("aicc_fused.attention")}
    fns = [lambda: m(*args), lambda: sess.run(None, feed)]
    if ab:  # a second aicc model compiled with ENV=VALUE, timed in the same alternation
        key, _, value = ab.partition("=")
        old = os.environ.get(key)
        os.environ[key] = value
        try:
            m_b = compiler.compile(proto, args, threads=threads)
        finally:
            if old is None:
                os.environ.pop(key)
            else:
                os.environ[key] = old
        ok_b, err_b, _ = zoo.compare(zoo.outputs_of(m_b(*args)), [np.asarray(w) for w in want])
        row["ok"] = row["ok"] and ok_b
        fns.append(lambda: m_b(*args))
    times = best_ms(fns, runs)
    row["aicc_ms"], row["ort_ms"] = times[:2]
    if ab:
        row["b_ms"] = times[2]
    return row


def table(rows) -> str:
    lines = ["| model | kernels | fused attentions | max err | aicc ms | ORT ms | ORT / aicc |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['kernels']} | {r['attention']} | {r['err']:.1e}"
                     f"{'' if r['ok'] else ' MISMATCH'} | {r['aicc_ms']:.1f} | {r['ort_ms']:.1f} | "
                     f"{r['ort_ms'] / r['aicc_ms']:.2f} |")
    ratios = [r["ort_ms"] / r["aicc_ms"] for r in rows]
    lines.append(f"\ngeomean ORT / aicc: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(TRANSFORMERS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--write", action="store_true")
    p.add_argument("--out", type=Path, default=HERE / "results" / "onnx_vs_ort.md",
                   help="where --write puts the table")
    p.add_argument("--peer-isa", default="host", choices=PEER_ISAS,
                   help="ONNX Runtime's kernels: the host's, or its AVX2 ones (benchmarks/peer_isa.py)")
    p.add_argument("--ab", default="", metavar="ENV=VALUE",
                   help="also time aicc compiled with this environment variable set (A/B)")
    args = p.parse_args(argv)
    restrict_peers(args.peer_isa)
    rows = []
    for name in [n for n in args.only.split(",") if n]:
        rows.append(run(name, args.threads, args.runs, args.ab))
        r = rows[-1]
        print(f"{name:18s} ok={r['ok']} err={r['err']:.1e} aicc={r['aicc_ms']:.1f} ms "
              f"ort={r['ort_ms']:.1f} ms" + (f" aicc[{args.ab}]={r['b_ms']:.1f} ms "
                                             f"ORT/aicc={r['ort_ms'] / r['aicc_ms']:.2f} "
                                             f"ORT/aicc[{args.ab}]={r['ort_ms'] / r['b_ms']:.2f}"
                                             if args.ab else ""), flush=True)
    text = table(rows)
    print(text)
    if args.write:
        out = args.out
        out.write_text(
            "# ONNX models: aicc against ONNX Runtime\n\n"
            f"`python benchmarks/onnx_vs_ort.py {shlex.join(sys.argv[1:] if argv is None else argv)}`. "
            f"Machine: {zoo.machine()}, shared with other jobs; {aicc_code()}; {describe()}; "
            f"{args.threads} thread(s), batch 1, full-size models as in zoo.py. Times: the "
            "minimum thread CPU time (time.thread_time) of one call over the runs.\n\n" + text + "\n")
        print(f"wrote {out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
