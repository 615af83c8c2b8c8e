"""One training step (forward + backward + SGD update) of an MLP and of a transformer block:
aicc's `value_and_grad` against torch eager and torch.compile, side by side in one process.

    python benchmarks/train_bench.py                  # 1 and 2 threads, 30 reps
    python benchmarks/train_bench.py --threads 1 --reps 10 --no-compile

Every framework computes the same loss of the same parameters (float32) and applies the same
SGD update; the first step's gradients are compared with torch's before timing. aicc's step is
the compiled value_and_grad plus the update in NumPy; torch's is loss.backward() and an
in-place update under no_grad. Median wall-clock ms per step; ratio = peer ms / aicc ms (> 1:
aicc faster). Writes benchmarks/results/train.md. No assertion is made on any time.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from aot_bench import cpu_name  # noqa: E402
from conv_bench import timeit  # noqa: E402

import compiler  # noqa: E402
from compiler import ops  # noqa: E402


def mlp_case(rng):
    b, d_in, d_h, d_out = 64, 784, 512, 10

    def loss(x, y, w1, b1, w2, b2):
        z = np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
        z = z - np.max(z, axis=1, keepdims=True)
        return -np.mean(np.sum(y * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))), axis=1))

    def loss_t(torch, x, y, w1, b1, w2, b2):
        z = torch.relu(x @ w1 + b1) @ w2 + b2
        return torch.nn.functional.cross_entropy(z, y.argmax(1))

    data = [rng.standard_normal((b, d_in)), np.eye(d_out)[rng.integers(0, d_out, b)]]
    params = [rng.standard_normal((d_in, d_h)) / math.sqrt(d_in), np.zeros(d_h),
              rng.standard_normal((d_h, d_out)) / math.sqrt(d_h), np.zeros(d_out)]
    return f"MLP {d_in}-{d_h}-{d_out}, batch {b}", loss, loss_t, data, params


def transformer_case(rng):
    b, t, d, h, f = 4, 64, 128, 4, 512
    hd = d // h

    def heads(z):
        return np.transpose(z.reshape(b, t, h, hd), (0, 2, 1, 3))

    def loss(x, g1, c1, wq, wk, wv, wo, g2, c2, w1, b1, w2, b2):
        a_in = ops.layer_norm(x, g1, c1)
        a = ops.attention(heads(a_in @ wq), heads(a_in @ wk), heads(a_in @ wv), causal=True)
        x = x + np.transpose(a, (0, 2, 1, 3)).reshape(b, t, d) @ wo
        x = x + ops.gelu(ops.layer_norm(x, g2, c2) @ w1 + b1) @ w2 + b2
        return np.mean(x * x)

    def loss_t(torch, x, g1, c1, wq, wk, wv, wo, g2, c2, w1, b1, w2, b2):
        F = torch.nn.functional

        def th(z):
            return z.reshape(b, t, h, hd).transpose(1, 2)

        a_in = F.layer_norm(x, (d,), g1, c1)
        a = F.scaled_dot_product_attention(th(a_in @ wq), th(a_in @ wk), th(a_in @ wv), is_causal=True)
        x = x + a.transpose(1, 2).reshape(b, t, d) @ wo
        x = x + F.gelu(F.layer_norm(x, (d,), g2, c2) @ w1 + b1) @ w2 + b2
        return (x * x).mean()

    s = 1 / math.sqrt(d)
    data = [rng.standard_normal((b, t, d))]
    params = [np.ones(d), np.zeros(d), *(rng.standard_normal((d, d)) * s for _ in range(4)), np.ones(d),
              np.zeros(d), rng.standard_normal((d, f)) * s, np.zeros(f), rng.standard_normal((f, d)) / math.sqrt(f),
              np.zeros(d)]
    return f"transformer block (pre-LN, causal) b{b} s{t} d{d} h{h} ffn{f}", loss, loss_t, data, params


LR = 1e-3


def bench(case, threads: int, reps: int, use_compile: bool) -> dict:
    import torch

    name, loss, loss_t, data, params = case
    data = [np.asarray(a, np.float32) for a in data]
    params = [np.asarray(p, np.float32) for p in params]
    n_data = len(data)
    argnums = tuple(range(n_data, n_data + len(params)))

    torch.set_num_threads(threads)
    step = compiler.value_and_grad(loss, argnums=argnums, threads=threads)
    t0 = time.perf_counter()
    step.compiled_for(*data, *params)
    compile_s = time.perf_counter() - t0
    value, grads = step(*data, *params)

    td = [torch.tensor(a) for a in data]
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    ref = loss_t(torch, *td, *tp)
    ref.backward()
    err = max(float(np.abs(g - p.grad.numpy()).max() / (np.abs(p.grad.numpy()).max() + 1e-12))
              for g, p in zip(grads, tp))

    aicc_params = [p.copy() for p in params]

    def aicc_step():
        _, gs = step(*data, *aicc_params)
        for p, g in zip(aicc_params, gs):
            p -= LR * g

    def torch_step_of(fn):
        def run():
            for p in tp:
                p.grad = None
            fn(torch, *td, *tp).backward()
            with torch.no_grad():
                for p in tp:
                    p -= LR * p.grad
        return run

    row = {"name": name, "threads": threads, "compile_s": compile_s, "max_rel_grad_err": err,
           "loss": float(value), "aicc_ms": timeit(aicc_step, reps)[0], "peers": {}}
    row["peers"]["torch eager"] = timeit(torch_step_of(loss_t), reps)[0]
    if use_compile:
        try:
            compiled = torch.compile(loss_t)
            t0 = time.perf_counter()
            torch_step_of(compiled)()
            row["torch_compile_s"] = time.perf_counter() - t0
            row["peers"]["torch.compile"] = timeit(torch_step_of(compiled), reps)[0]
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            row["peers"]["torch.compile"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    return row


def markdown(rows: list[dict], cmd: str) -> str:
    import torch

    lines = [
        "# Training step: aicc value_and_grad vs torch",
        "",
        f"Machine: {cpu_name()}, {platform.machine()}; torch {torch.__version__}. Command: `{cmd}`.",
        "One step = forward + backward + SGD update, median wall-clock ms over the repetitions;",
        "ratio = peer ms / aicc ms (> 1: aicc faster). Gradient error: max |aicc - torch| / max |torch|",
        "per parameter, worst parameter, on the first step.",
        "",
        "| model | threads | aicc ms | torch eager ms (ratio) | torch.compile ms (ratio) | aicc compile s | grad err |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = []
        for peer in ("torch eager", "torch.compile"):
            v = r["peers"].get(peer, "not run")
            cells.append(f"{v:.2f} ({v / r['aicc_ms']:.2f}x)" if isinstance(v, float) else v)
        lines.append(f"| {r['name']} | {r['threads']} | {r['aicc_ms']:.2f} | {cells[0]} | {cells[1]} | "
                     f"{r['compile_s']:.1f} | {r['max_rel_grad_err']:.1e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "train.md"))
    args = p.parse_args()
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for make in (mlp_case, transformer_case):
            row = bench(make(np.random.default_rng(0)), threads, args.reps, not args.no_compile)
            peers = ", ".join(f"{k} {v:.2f} ms ({v / row['aicc_ms']:.2f}x)" if isinstance(v, float) else f"{k} {v}"
                              for k, v in row["peers"].items())
            print(f"{row['name']} @ {threads} threads: aicc {row['aicc_ms']:.2f} ms; {peers}; "
                  f"grad err {row['max_rel_grad_err']:.1e}", flush=True)
            rows.append(row)
    text = markdown(rows, "python benchmarks/train_bench.py " + " ".join(sys.argv[1:]))
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
