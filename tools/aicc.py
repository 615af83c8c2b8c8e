"""aicc: compile a model, run it on its example inputs, and check it against running it eagerly
(NumPy for a function, PyTorch for a torch.nn.Module).

    aicc examples/mlp.py --target cpu
    aicc examples/mlp.py --emit loops
    aicc examples/mlp.py -o out/ --time-passes
    aicc examples/mlp.py --aot -o out/          # out/libmodel.so + out/model.h
    aicc examples/torch_cnn.py
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

STAGES = ("tensor", "linalg", "memref", "loops", "llvm", "asm", "gpu", "cuda")

# An output matches the eager run when |out - ref| <= ATOL + RTOL * |ref| everywhere (float32 work,
# summation order differs from NumPy's and torch's).
RTOL, ATOL = 1e-4, 1e-5


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        print(f"aicc: error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="aicc",
        description="Compile a model with aicc, run it on its example inputs and compare the "
        "result and the time with running it eagerly (in NumPy, or in PyTorch for a torch.nn.Module).",
        epilog="MODEL.py defines `model` (a NumPy-style function or a torch.nn.Module) and "
        "`example_inputs` (a tuple of arrays or torch tensors, or a function returning one). "
        "Compiled models are kept in a cache across runs ($AICC_CACHE_DIR, else the user cache "
        "folder; AICC_CACHE=0 turns it off): `aicc cache info` and `aicc cache clear`.",
    )
    p.add_argument("model", metavar="MODEL", help="a .py file defining `model` and `example_inputs`, or a .onnx model")
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=SHAPE",
        help="static shape of an ONNX input with symbolic dims, e.g. x=1x3x224x224 (repeatable)",
    )
    from compiler.targets import available_targets

    p.add_argument("--target", default="cpu", choices=available_targets(),
                   help="code generation target (default: cpu); cuda-emu runs the cuda "
                   "target's kernels on the CPU, to check them without a GPU")
    p.add_argument("--target-cpu", metavar="CPU",
                   help="cpu: the LLVM name of the CPU to generate code for, e.g. x86-64-v3 "
                   "or skylake-avx512 (default: $AICC_TARGET_CPU, else the host)")
    p.add_argument("--arch", metavar="SM", help="cuda: GPU architecture to compile for, e.g. sm_80 (default: the GPU's, else sm_90)")
    p.add_argument("--run", action="store_true", help="cuda: fail (exit 1) when there is no GPU to run on, instead of only compiling")
    p.add_argument(
        "--emit",
        choices=STAGES,
        metavar="STAGE",
        help=f"print the IR of one stage and stop; STAGE is one of: {', '.join(STAGES)}",
    )
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass (to stderr)")
    p.add_argument("--time-passes", action="store_true", help="print the time spent in each pass")
    p.add_argument("-o", "--output-dir", metavar="DIR", help="write every stage's IR, the .ll, the .s and the object file to DIR")
    p.add_argument("--aot", action="store_true",
                   help="cpu: write the model into DIR (-o) as lib<name>.so and <name>.h, a shared "
                   "library with a C API that runs without Python (see examples/aot/main.c), and "
                   "check it against the in-process model")
    p.add_argument("--aot-name", default="model", metavar="NAME",
                   help="with --aot: the library's name and its C functions' prefix (default: model)")
    p.add_argument("--check-numerics", action="store_true",
                   help="run the compiled model kernel by kernel on the example inputs and compare "
                   "each kernel with aicc's reference interpreter in float64 on the same inputs; "
                   "exit 1 naming the first kernel out of tolerance, with its loop IR")
    p.add_argument("--quantize", metavar="CALIB.npz",
                   help="int8: calibrate on CALIB.npz (one array per model input, by input name or "
                        "in order, the first axis indexing the calibration batches), then compare "
                        "with float32 and time both")
    p.add_argument("--quant-method", choices=("minmax", "percentile", "entropy"), default="minmax",
                   help="--quantize: how activation ranges are calibrated (default: minmax)")
    p.add_argument("--report", action="store_true", help="--quantize: print each int8 layer's SQNR")
    p.add_argument("--reduce-range", action="store_true",
                   help="--quantize: 7-bit weights, which a CPU without VNNI multiplies faster (vpmaddubsw)")
    p.add_argument("--int8-saturation", action="store_true",
                   help="cpu: int8 products as ONNX Runtime's GEMM computes them on this CPU (without "
                        "VNNI: int16 pair sums that may saturate, vpmaddubsw): faster there")
    p.add_argument("--tune", action="store_true",
                   help="cpu: measure schedules for the model's matmuls and convs on this machine "
                   "first, and keep the fastest in the tuning record that later compiles use")
    p.add_argument("--tune-budget", type=float, metavar="SECONDS",
                   help="with --tune: seconds of search for the whole model (default: 60)")
    p.add_argument("--tune-workers", choices=("local", "ray"), default="local",
                   help="with --tune: measure in one local process, or spread over a Ray cluster "
                   "(ray.init(), or $RAY_ADDRESS)")
    p.add_argument("--threads", type=int, metavar="N", help="threads for parallel loops (default: $AICC_NUM_THREADS or all cores)")
    p.add_argument("--no-fuse", action="store_true", help="compile without elementwise fusion")
    p.add_argument(
        "--schedule",
        metavar="SPEC",
        help="cpu: override matmul schedule fields, e.g. 'mr=6,nr=32,kc=256' for every matmul or "
        "'0:mc=96;1:kc=128' per matmul (see `aicc.schedule` in --emit linalg)",
    )
    p.add_argument("--stats", action="store_true", help="print kernels, flops and bytes of temporaries (with --no-fuse: unfused)")
    p.add_argument("--repeat", type=int, default=20, metavar="N", help="timed runs of each side (default: 20)")
    return p


def load_model(path: str):
    """Run the user's file and return (model, example_inputs); errors name the file."""
    from compiler.errors import CompileError

    file = Path(path)
    if not file.exists():
        raise CompileError(f"no such file: {path}")
    if file.suffix != ".py":
        raise CompileError(f"{path}: expected a .py file defining `model` and `example_inputs`")
    namespace: dict = {"__name__": "__aicc_model__", "__file__": str(file)}
    try:
        code = compile(file.read_text(), str(file), "exec")
        exec(code, namespace)
    except SyntaxError as e:
        raise CompileError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        raise CompileError(f"{_user_frame(e, file)}: {type(e).__name__}: {e}") from None
    if "model" not in namespace:
        raise CompileError(f"{path} defines no `model`")
    if "example_inputs" not in namespace:
        raise CompileError(f"{path} defines no `example_inputs`")
    inputs = namespace["example_inputs"]
    if callable(inputs):
        with _blame_user_code(file):
            inputs = inputs()
    if not isinstance(inputs, tuple | list):
        inputs = (inputs,)
    return namespace["model"], tuple(inputs)


@contextlib.contextmanager
def _blame_user_code(file: Path):
    """An exception raised in the user's own file is the user's error: report it with file:line."""
    from compiler.errors import CompileError

    try:
        yield
    except CompileError:
        raise
    except Exception as e:
        where = _user_frame(e, file)
        if where == str(file):  # not raised from the user's code: an aicc bug, let it through
            raise
        raise CompileError(f"{where}: {type(e).__name__}: {e}") from None


def _user_frame(e: BaseException, file: Path) -> str:
    """'file:line' of the deepest frame of the traceback that lies in the user's file."""
    where = str(file)
    for frame in traceback.extract_tb(e.__traceback__):
        if Path(frame.filename).resolve() == file.resolve():
            where = f"{file}:{frame.lineno}"
    return where


def _median_seconds(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def write_outputs(m, directory: str) -> list[Path]:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return m.target.write_outputs(m, out)


def print_stats(m) -> None:
    from compiler.stats import format_stats

    print(format_stats(m.stats))


def cpu_options(args: argparse.Namespace) -> dict:
    """--tune, --tune-budget, --tune-workers and --int8-saturation as compile options (none
    of them unless asked for)."""
    from compiler.api import cpu_target_options

    tune = args.tune and ("ray" if args.tune_workers == "ray" else True)
    return cpu_target_options(tune, args.tune_budget, args.int8_saturation)


def report_compiled(m, args: argparse.Namespace, import_s: float | None = None) -> int | None:
    """What every model kind prints after compiling (--tune, --stats, --time-passes, --emit,
    -o, the no-GPU report); an exit status when nothing is left to run."""
    if m.tune_report is not None:
        print(m.tune_report.table())
        print(f"tuned schedules in this compile: {m.stats.get('tuned', 0)}")
    if args.stats:
        print_stats(m)
    if args.time_passes:
        timings = [("import", import_s)] if import_s is not None else []
        timings += [(t.name, t.seconds) for t in m.timings]
        total = sum(s for _, s in timings)
        print("pass timings:")
        for name, seconds in timings:
            print(f"  {seconds * 1e3:9.2f} ms  {100 * seconds / total:5.1f}%  {name}")
        print(f"  {total * 1e3:9.2f} ms  total")
    if args.emit:
        print(m.ir(args.emit))
        return 0
    if args.output_dir:
        written = (m.export(args.output_dir, args.aot_name) if args.aot
                   else write_outputs(m, args.output_dir))
        for path in written:
            print(f"wrote {path}")
    return m.target.report(m, args.run)


def calibration_batches(path: str, names: Sequence[str] | None, n_inputs: int) -> list[tuple]:
    """--quantize's CALIB.npz as a list of input tuples: arrays by input name, else in order."""
    import numpy as np

    from compiler.errors import CompileError

    try:
        data = np.load(path)
    except (OSError, ValueError) as e:
        raise CompileError(f"--quantize: cannot read {path}: {e}") from None
    keys = list(data.keys())
    if names and all(n in data for n in names):
        keys = list(names)
    if len(keys) != n_inputs:
        raise CompileError(f"--quantize: {path} holds {len(keys)} array(s) ({', '.join(keys)}); "
                           f"the model takes {n_inputs} input(s)")
    arrays = [data[k].astype(np.float32) if data[k].dtype == np.float64 else data[k] for k in keys]
    if len({a.shape[0] for a in arrays}) != 1:
        raise CompileError(f"--quantize: the arrays of {path} hold different numbers of batches")
    return [tuple(a[i] for a in arrays) for i in range(arrays[0].shape[0])]


def run_quantize(args: argparse.Namespace) -> int:
    """--quantize: int8 against float32 on the example inputs (cosine per output), and times."""
    import numpy as np

    import compiler

    if args.model.lower().endswith(".onnx"):
        from frontends.onnx_import import import_onnx, make_inputs, parse_input_shapes

        model = args.model
        program = import_onnx(model, parse_input_shapes(args.input_shape))
        inputs, names = make_inputs(program.input_types), program.input_names
    else:
        model, inputs = load_model(args.model)
        names = None
    batches = calibration_batches(args.quantize, names, len(inputs))
    with _blame_user_code(Path(args.model)):
        t0 = time.perf_counter()
        q = compiler.quantize(model, batches, inputs, method=args.quant_method, target=args.target,
                              threads=args.threads, reduce_range=args.reduce_range,
                              int8_saturation=args.int8_saturation, target_cpu=args.target_cpu)
        quant_s = time.perf_counter() - t0
        f = compiler.compile(model, inputs, target=args.target, threads=args.threads, target_cpu=args.target_cpu)
    print(f"aicc {args.model} --quantize {args.quantize}: {q.stats['quantized_ops']} int8 matmul(s), "
          f"calibrated and compiled in {quant_s:.1f} s")
    if args.report:
        print(q.quant_report())
    outs_q, outs_f = q(*inputs), f(*inputs)
    for i, (a, b) in enumerate(zip(*(o if isinstance(o, tuple) else (o,) for o in (outs_q, outs_f)))):
        a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        cos = float(a64 @ b64 / max(np.linalg.norm(a64) * np.linalg.norm(b64), 1e-300))
        print(f"  output {i}: cosine similarity with float32 {cos:.5f}")
    if q.target.timed:
        t_q = _median_seconds(lambda: q(*inputs), args.repeat)
        t_f = _median_seconds(lambda: f(*inputs), args.repeat)
        print(f"  int8    {t_q * 1e3:10.3f} ms (median of {args.repeat})")
        print(f"  float32 {t_f * 1e3:10.3f} ms (median of {args.repeat})  -> int8 is {t_f / t_q:.2f}x")
    return 0


def run(args: argparse.Namespace) -> int:
    import numpy as np

    import compiler
    from compiler.errors import CompileError

    if args.quantize:
        return run_quantize(args)
    if args.model.lower().endswith(".onnx"):
        return run_onnx(args)
    model, inputs = load_model(args.model)

    def print_after(pass_name, module):
        print(f"// -----// IR after {pass_name} //----- //\n{module}\n", file=sys.stderr)

    t0 = time.perf_counter()
    with _blame_user_code(Path(args.model)):
        m = compiler.compile(
            model,
            inputs,
            target=args.target,
            threads=args.threads,
            fuse=not args.no_fuse,
            schedule=args.schedule,
            target_cpu=args.target_cpu,
            print_ir_after_all=print_after if args.print_ir_after_all else None,
            **cpu_options(args),
        )
    compile_s = time.perf_counter() - t0
    status = report_compiled(m, args)
    if status is not None:
        return status
    if args.check_numerics:
        return check_numerics(m, inputs)

    out = m(*inputs)
    if args.aot:
        check_library(args, inputs, out)
    ref_name, eager = eager_runner(model, inputs, m.threads)
    try:
        ref = eager()
    except Exception as e:
        raise CompileError(f"running `model` eagerly in {ref_name} failed: {type(e).__name__}: {e}") from None
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple | list) else (ref,)

    print(f"aicc {args.model} --target {args.target}: compiled in {compile_s * 1e3:.0f} ms, "
          f"{m.threads} thread(s)")
    ok = True
    for i, (o, r) in enumerate(zip(outs, refs)):
        r = np.asarray(r, dtype=np.float64)
        diff = np.abs(o.astype(np.float64) - r)
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float((diff / np.maximum(np.abs(r), 1e-30)).max()) if diff.size else 0.0
        good = bool(np.all(diff <= ATOL + RTOL * np.abs(r)) and o.shape == r.shape)
        ok &= good
        print(f"  output {i}: shape {o.shape}  max abs err {max_abs:.3g}  max rel err {max_rel:.3g}  "
              f"{'OK' if good else 'MISMATCH'}")

    if m.target.timed:
        t_aicc = _median_seconds(lambda: m(*inputs), args.repeat)
        t_ref = _median_seconds(eager, args.repeat)
        print(f"  aicc  {t_aicc * 1e3:10.3f} ms (median of {args.repeat})")
        print(f"  {ref_name:<5} {t_ref * 1e3:10.3f} ms (median of {args.repeat})  -> aicc is {t_ref / t_aicc:.2f}x")
    else:
        print(f"  (not timed: the {m.target.name} target checks code, its speed means nothing)")
    if not ok:
        print(f"aicc: error: compiled output differs from {ref_name} beyond rtol={RTOL}, atol={ATOL}",
              file=sys.stderr)
        return 1
    return 0


def check_numerics(m, inputs) -> int:
    """--check-numerics: the kernel table; 1 and the first bad kernel's loop IR on a failure."""
    report = m.check_numerics(*inputs)
    print(report.table())
    bad = report.first_failure
    if bad is not None:
        print(f"\n// loop IR of {bad.label}, compiled alone:\n{report.loop_ir}")
        print(f"aicc: error: kernel {bad.label} ({bad.origin or 'source unknown'}) is out of "
              f"tolerance: max abs err {bad.max_abs:.3g} (max rel err {bad.max_rel:.3g})",
              file=sys.stderr)
        return 1
    if not report.ok:
        print("aicc: error: every kernel is within tolerance but the fused model's outputs are "
              "not: the error is in fusion", file=sys.stderr)
        return 1
    print(f"aicc: {len(report.kernels)} kernels within tolerance")
    return 0


def check_library(args: argparse.Namespace, inputs, expected) -> None:
    """Run the library --aot wrote (through compiler.load) on the inputs and compare it with
    the in-process model's outputs: the same LLVM IR, so the same numbers."""
    import numpy as np

    import compiler

    lib = compiler.load(args.output_dir, args.aot_name)
    got = lib(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    worst = max((float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
                 for g, e in zip(got, expected) if e.size), default=0.0)
    same = all(g.shape == e.shape and np.allclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
               for g, e in zip(got, expected))
    if not same:
        raise RuntimeError(f"lib{args.aot_name}.so computes other numbers than the "
                           f"in-process model (max abs difference {worst:.3g})")
    print(f"lib{args.aot_name}.so: same outputs as the in-process model "
          f"(max abs difference {worst:.3g})")


def eager_runner(model, inputs, threads: int):
    """(name, function) that runs `model` eagerly on `inputs`: the NumPy function itself, or a
    torch.nn.Module in eval mode without autograd on `threads` threads (as many as aicc's),
    its outputs as NumPy arrays."""
    from compiler.api import is_torch_module

    if not is_torch_module(model):
        return "numpy", lambda: model(*inputs)
    import torch

    from frontends.torch_import import to_torch_inputs

    args = to_torch_inputs(inputs)
    model.eval()
    torch.set_num_threads(threads)

    def run():
        with torch.no_grad():
            out = model(*args)
        if isinstance(out, tuple | list):
            return tuple(o.numpy() for o in out)
        return out.numpy()

    return "torch", run


def run_onnx(args: argparse.Namespace) -> int:
    """Compile an ONNX model on random inputs of its input shapes; check it against onnxruntime
    (or, without it, aicc's reference interpreter of the imported graph)."""
    import numpy as np

    from compiler.api import compile_program
    from compiler.pipeline import CompileOptions
    from frontends.onnx_import import import_onnx, make_inputs, parse_input_shapes

    t0 = time.perf_counter()
    program = import_onnx(args.model, parse_input_shapes(args.input_shape))
    import_s = time.perf_counter() - t0
    tensor_level = program.module.clone()
    inputs = make_inputs(program.input_types)

    def print_after(pass_name, module):
        print(f"// -----// IR after {pass_name} //----- //\n{module}\n", file=sys.stderr)

    options = CompileOptions(args.target, args.threads, not args.no_fuse,
                             print_after if args.print_ir_after_all else None, args.schedule,
                             args.target_cpu, target_options=cpu_options(args))
    m = compile_program(program, options)
    compile_s = time.perf_counter() - t0
    status = report_compiled(m, args, import_s)
    if status is not None:
        return status
    if args.check_numerics:
        return check_numerics(m, inputs)
    out = m(*inputs)
    if args.aot:
        check_library(args, inputs, out)
    outs = out if isinstance(out, tuple) else (out,)
    try:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3  # errors only: zoo models trip its unused-initializer warnings
        so.intra_op_num_threads = m.threads
        sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
        feeds = dict(zip(program.input_names, inputs))
        refs = sess.run(None, feeds)
        ref_name = "onnxruntime"
        t_ref = _median_seconds(lambda: sess.run(None, feeds), args.repeat)
    except Exception:  # no onnxruntime, or one that cannot load this model (IR version, ops)
        from compiler.reference import run_reference

        refs = run_reference(tensor_level, inputs, program.func_name)
        ref_name, t_ref = "reference", None
    print(f"aicc {args.model} --target {args.target}: compiled in {compile_s * 1e3:.0f} ms, "
          f"{m.threads} thread(s)")
    if m.is_dynamic:
        syms = sorted({s for shape, _ in m.input_types for d in shape if not isinstance(d, int)
                       for s in d.symbols})
        print(f"  dynamic dims {', '.join(syms)}: one compile for any size; run here with each 1 "
              "(--input-shape NAME=D0xD1... compiles for a static shape)")
    ok = True
    for name, o, r in zip(program.output_names, outs, refs):
        r = np.asarray(r)
        diff = np.abs(o.astype(np.float64) - r.astype(np.float64))
        max_abs = float(diff.max()) if diff.size else 0.0
        good = o.shape == r.shape and bool(np.all(diff <= 1e-4 + 1e-3 * np.abs(r)))
        ok &= good
        print(f"  output {name}: shape {o.shape}  max abs err {max_abs:.3g} vs {ref_name}  "
              f"{'OK' if good else 'MISMATCH'}")
    if m.target.timed:
        t_aicc = _median_seconds(lambda: m(*inputs), args.repeat)
        print(f"  aicc  {t_aicc * 1e3:10.3f} ms (median of {args.repeat})")
        if t_ref is not None:
            print(f"  {ref_name} {t_ref * 1e3:10.3f} ms (median of {args.repeat})")
    if not ok:
        print(f"aicc: error: compiled output differs from {ref_name}", file=sys.stderr)
        return 1
    return 0


def cache_command(argv: list[str]) -> int:
    """`aicc cache info` / `aicc cache clear`: the persistent compile cache (compiler/cache.py)."""
    from compiler import cache

    if argv not in (["info"], ["clear"]):
        print("aicc: error: usage: aicc cache info|clear", file=sys.stderr)
        return 2
    if argv == ["clear"]:
        print(f"aicc: removed {cache.clear()} cache entries from {cache.cache_dir()}")
        return 0
    info = cache.info()
    print(f"aicc cache: {info['dir']} ({'on' if info['enabled'] else 'off: AICC_CACHE=0'})")
    for kind, n in info["kinds"].items():
        print(f"  {kind:<6} {n['entries']:6d} entries  {n['bytes'] / 2**20:9.1f} MiB")
    if not info["kinds"]:
        print("  empty")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cache"] and not os.path.exists("cache"):
        return cache_command(argv[1:])
    args = build_parser().parse_args(argv)
    if args.aot and not args.output_dir:
        print("aicc: error: --aot writes the library into a folder: give it with -o DIR",
              file=sys.stderr)
        return 2
    # --threads and --arch hold for this command alone: main() also runs inside other
    # processes (tests, notebooks), which must not inherit them
    env = {}
    if args.threads is not None:
        env["AICC_NUM_THREADS"] = str(args.threads)
    if getattr(args, "arch", None):
        env["AICC_CUDA_ARCH"] = args.arch
    with mock.patch.dict(os.environ, env):
        return _main(args)


def _main(args) -> int:
    from compiler.errors import CompileError, InternalError

    try:
        status = run(args)
        sys.stdout.flush()  # a reader that left shows here, inside the handlers below
        return status
    except CompileError as e:
        print(f"aicc: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `aicc ... | head`: the reader left; stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141
    except Exception as e:  # anything else is a bug in aicc: say so in one line, keep details on request
        if os.environ.get("AICC_DEBUG"):
            traceback.print_exc()
        what = str(e) if isinstance(e, InternalError) else f"internal error: {type(e).__name__}: {e}"
        print(f"aicc: {what} (set AICC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
