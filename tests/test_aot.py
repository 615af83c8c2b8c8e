"""Ahead-of-time artifacts (compiler/targets/cpu/aot.py): `CompiledModel.export` / `aicc --aot`
write lib<name>.so + <name>.h; a C program built against the header with the system C compiler
runs it in a bare environment (no Python on PATH) and matches the in-process model; the library
links against libc/libm/libpthread alone and exports the C API alone; `compiler.load` runs it
from Python."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler.targets.cpu import aot

ROOT = Path(__file__).resolve().parents[1]
MAIN_C = ROOT / "examples" / "aot" / "main.c"
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler to link the library with")

rng = np.random.default_rng(7)
# 129 x 300 floats: above the emitter's 64 KiB line, so the weights live outside the LLVM IR
# and reach the library through weights.S
W1 = rng.standard_normal((129, 300)).astype(np.float32) * 0.1
B1 = rng.standard_normal(300).astype(np.float32)
W2 = rng.standard_normal((300, 7)).astype(np.float32) * 0.1
X = rng.standard_normal((5, 129)).astype(np.float32)
SYSTEM_LIBS = ("linux-vdso", "libc.so", "libm.so", "libpthread.so", "ld-linux")


def mlp(x):
    return np.tanh(np.maximum(x @ W1 + B1, 0.0) @ W2)


def two_outputs_onnx():
    """An ONNX graph with int64 and bool inputs and two outputs (float32, int64):
    (where(mask, x, -x) * 2 + 1, idx + 3)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("Neg", ["x"], ["nx"]),
             helper.make_node("Where", ["mask", "x", "nx"], ["s"]),
             helper.make_node("Mul", ["s", "two"], ["s2"]),
             helper.make_node("Add", ["s2", "one"], ["y"]),
             helper.make_node("Add", ["idx", "three"], ["j"])]
    inits = [helper.make_tensor("two", f32, [], [2.0]), helper.make_tensor("one", f32, [], [1.0]),
             helper.make_tensor("three", i64, [], [3])]
    graph = helper.make_graph(
        nodes, "pair",
        [helper.make_tensor_value_info("x", f32, [7, 1, 3]),
         helper.make_tensor_value_info("idx", i64, [7, 1, 3]),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 3])],
        [helper.make_tensor_value_info("y", f32, [7, 1, 3]),
         helper.make_tensor_value_info("j", i64, [7, 1, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def mlp_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp")
    m = compiler.compile(mlp, (X,), threads=2)
    written = m.export(out)
    return m, out, written


def build_main(lib_dir: Path, name: str = "model") -> Path:
    exe = lib_dir / "main"
    defines = [] if name == "model" else [f"-DMODEL_HEADER=\"{name}.h\"", f"-DMODEL(f)={name}_##f"]
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Werror", *defines,
                    str(MAIN_C), f"-I{lib_dir}", f"-L{lib_dir}", f"-l{name}",
                    f"-Wl,-rpath,{lib_dir}", "-o", str(exe)], check=True)
    return exe


def test_export_writes_the_library_header_and_metadata(mlp_lib):
    m, out, written = mlp_lib
    assert [p.name for p in written] == ["libmodel.so", "model.h", "model.json"]
    header = (out / "model.h").read_text()
    for decl in ("int model_num_inputs(void);", "int model_num_outputs(void);",
                 "int model_input_ndim(int i);", "const int64_t *model_input_shape(int i);",
                 "int model_output_ndim(int i);", "const int64_t *model_output_shape(int i);",
                 "int model_input_dtype(int i);", "int model_output_dtype(int i);",
                 "void model_set_num_threads(int n);",
                 "int model_run(const void *const *inputs, void *const *outputs);",
                 "const char *model_last_error(void);", "#define AICC_DTYPE_FLOAT32 1"):
        assert decl in header


def test_c_program_in_a_bare_environment_matches_the_in_process_model(mlp_lib, tmp_path):
    m, out, _ = mlp_lib
    exe = build_main(out)
    X.tofile(tmp_path / "x.bin")
    for threads in ("1", "2", "3"):
        # no PATH, no PYTHONPATH, nothing: the library needs no Python and no aicc
        run = subprocess.run([str(exe), "-t", threads, "x.bin"], env={}, cwd=tmp_path,
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert "output 0: shape (5, 7)" in run.stdout
        got = np.fromfile(tmp_path / "output0.bin", np.float32).reshape(5, 7)
        np.testing.assert_array_equal(got, m(X))
    np.testing.assert_allclose(got, mlp(X.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_the_library_needs_only_the_c_library_and_exports_only_its_api(mlp_lib):
    _, out, _ = mlp_lib
    lib = out / "libmodel.so"
    ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, check=True).stdout
    needed = [line.split()[0] for line in ldd.strip().splitlines()]
    assert needed and all(n.startswith(SYSTEM_LIBS) or "/ld-linux" in n for n in needed), ldd
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                        text=True, check=True).stdout
    exported = sorted(line.split()[-1] for line in nm.strip().splitlines())
    assert exported == sorted(f"model_{f}" for f in (
        "num_inputs", "num_outputs", "input_ndim", "output_ndim", "input_shape",
        "output_shape", "input_dtype", "output_dtype", "set_num_threads", "run", "last_error"))


def test_load_runs_the_library_from_python(mlp_lib):
    m, out, _ = mlp_lib
    lib = compiler.load(out)
    assert lib.input_types == m.input_types and lib.output_types == m.output_types
    np.testing.assert_array_equal(lib(X), m(X))
    for threads in (1, 2):
        lib.threads = threads
        np.testing.assert_array_equal(lib(X), m(X))
    with pytest.raises(compiler.CompileError, match=r"input 0 is \(5, 129\) float32"):
        lib(X[:4])
    with pytest.raises(compiler.CompileError, match="takes 1 inputs"):
        lib(X, X)


def test_calls_from_several_threads_are_safe(mlp_lib):
    m, out, _ = mlp_lib
    lib = compiler.load(out)
    xs = [rng.standard_normal((5, 129)).astype(np.float32) for _ in range(4)]
    expected = [m(x).copy() for x in xs]
    errors = []

    def work(i):
        for _ in range(20):
            if not np.array_equal(lib(xs[i]), expected[i]):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_dtypes_tuples_and_odd_shapes(tmp_path):
    x = rng.standard_normal((7, 1, 3)).astype(np.float32)
    idx = np.arange(7 * 3, dtype=np.int64).reshape(7, 1, 3)
    mask = rng.random((1, 3)) > 0.5
    m = compiler.compile(two_outputs_onnx(), (x, idx, mask))
    m.export(tmp_path, "pair")
    lib = compiler.load(tmp_path)
    codes = {dt: code for dt, (code, _) in aot.DTYPE_CODES.items()}
    assert [d for _, d in lib.input_types] == [np.float32, np.int64, np.bool_]
    assert [codes[d] for _, d in lib.output_types] == [1, 4]
    got, want = lib(x, idx, mask), m(x, idx, mask)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], idx + 3)


def test_two_libraries_in_one_process_keep_to_themselves(mlp_lib, tmp_path):
    """Same C names in two folders, another model in each: every symbol but the API is local,
    so neither library's pool, weights or kernels resolve to the other's."""
    m, out, _ = mlp_lib
    w = rng.standard_normal((129, 300)).astype(np.float32)

    def other(x):
        return np.maximum(x @ w, 0.0).sum(axis=1)

    m2 = compiler.compile(other, (X,))
    m2.export(tmp_path)
    a, b = compiler.load(out), compiler.load(tmp_path)
    for _ in range(3):
        np.testing.assert_array_equal(a(X), m(X))
        np.testing.assert_array_equal(b(X), m2(X))


def test_a_model_from_the_compile_cache_exports_the_same_library(tmp_path, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "1")
    monkeypatch.setenv("AICC_CACHE_DIR", str(tmp_path / "cache"))
    compiler.compile(mlp, (X,))
    warm = compiler.compile(mlp, (X,))
    assert warm.stats["cache"] == "hit"
    warm.export(tmp_path / "lib")
    np.testing.assert_array_equal(compiler.load(tmp_path / "lib")(X), warm(X))


def test_a_cpu_without_the_code_s_instructions_gets_an_error_not_a_crash(tmp_path, monkeypatch):
    from compiler.targets.cpu.machine import cpu_machine

    assert {"avx", "avx2", "fma"} <= set(aot.required_features(cpu_machine("x86-64-v3")))
    host = cpu_machine("host")
    import llvmlite.binding as llvm

    have = llvm.get_host_cpu_features()
    lacking = [f for f in aot.CHECKED_FEATURES if not have.get(f, False)]
    if not lacking:
        pytest.skip("this CPU has every feature the library checks")
    monkeypatch.setattr(aot, "required_features", lambda machine: [lacking[-1]])
    m = compiler.compile(mlp, (X,))
    m.export(tmp_path)
    lib = compiler.load(tmp_path)
    with pytest.raises(compiler.CompileError, match=f"lacks {re.escape(lacking[-1])}.*{host.name}"):
        lib(X)


def test_names_targets_and_folders_are_checked(tmp_path):
    m = compiler.compile(mlp, (X,))
    with pytest.raises(compiler.CompileError, match="must be a C identifier"):
        m.export(tmp_path, "my-model")
    with pytest.raises(compiler.CompileError, match="holds none"):
        compiler.load(tmp_path)
    m.export(tmp_path, "a")
    m.export(tmp_path, "b")
    with pytest.raises(compiler.CompileError, match=r"holds 2 \(a, b\): pass name="):
        compiler.load(tmp_path)
    np.testing.assert_array_equal(compiler.load(tmp_path, "b")(X), m(X))
    emu = compiler.compile(mlp, (X,), target="cuda-emu")
    with pytest.raises(compiler.CompileError, match="cuda-emu target cannot write"):
        emu.export(tmp_path / "emu")


def test_named_library_from_c(tmp_path):
    m = compiler.compile(mlp, (X,), threads=1)
    m.export(tmp_path, "net")
    exe = build_main(tmp_path, "net")
    X.tofile(tmp_path / "x.bin")
    run = subprocess.run([str(exe), "x.bin"], env={}, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.fromfile(tmp_path / "output0.bin", np.float32).reshape(5, 7),
                                  m(X))


def test_the_header_compiles_as_cpp(mlp_lib, tmp_path):
    cxx = shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    _, out, _ = mlp_lib
    src = tmp_path / "use.cpp"
    src.write_text('#include "model.h"\nint main() { return model_num_inputs() - 1; }\n')
    subprocess.run([cxx, "-fsyntax-only", f"-I{out}", str(src)], check=True)


def test_cli_aot_with_a_torch_cnn(tmp_path):
    """`aicc MODEL --aot -o DIR` on a torch module with convolutions, batch norm, pooling and a
    workspace: the library is written, checked against the in-process model, and a C program
    runs it."""
    pytest.importorskip("torch")
    model = tmp_path / "cnn.py"
    model.write_text(
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
        "model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),\n"
        "    nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(),\n"
        "    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).eval()\n"
        "example_inputs = (torch.randn(2, 3, 17, 19),)\n")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "tools.aicc", str(model), "--aot", "-o", str(out),
                          "--aot-name", "cnn", "--repeat", "1"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "libcnn.so: same outputs as the in-process model" in run.stdout
    assert f"wrote {out / 'libcnn.so'}" in run.stdout
    exe = build_main(out, "cnn")
    c = subprocess.run([str(exe)], env={}, cwd=tmp_path, capture_output=True, text=True)
    assert c.returncode == 0 and "output 0: shape (2, 10)" in c.stdout, c.stderr


def test_cli_aot_with_an_onnx_file(tmp_path):
    import onnx

    path = tmp_path / "pair.onnx"
    onnx.save(two_outputs_onnx(), path)
    run = subprocess.run([sys.executable, "-m", "tools.aicc", str(path), "--aot", "-o",
                          str(tmp_path / "out"), "--repeat", "1"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "libmodel.so: same outputs as the in-process model" in run.stdout
    lib = compiler.load(tmp_path / "out")
    assert [s for s, _ in lib.output_types] == [(7, 1, 3), (7, 1, 3)]


def test_cli_aot_needs_an_output_folder(tmp_path):
    run = subprocess.run([sys.executable, "-m", "tools.aicc", "examples/mlp.py", "--aot"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == "aicc: error: --aot writes the library into a folder: give it with -o DIR"
