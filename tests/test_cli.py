"""The command lines, run as subprocesses: `aicc MODEL.py ...` and `aicc-opt FILE.mlir -p ...`.

A user's mistake must end with a non-zero exit status and exactly one line on stderr,
`aicc: error: ...`, naming the file and line where it can; never a Python traceback.

The subprocesses run with AICC_NUM_THREADS=1 unless a test says otherwise: the runtime's
thread pool can hang on its first parallel call in a fresh process (see
tests/test_numerics.py::test_thread_pool_startup_does_not_hang), and a CLI test is not the
place to catch that.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("tensor", "linalg", "memref", "loops", "llvm", "asm")
TIMEOUT = 120


def _env(threads: int | None = 1) -> dict:
    env = dict(os.environ)
    env.pop("AICC_DEBUG", None)
    if threads is None:
        env.pop("AICC_NUM_THREADS", None)
    else:
        env["AICC_NUM_THREADS"] = str(threads)
    return env


def aicc(*args, threads: int | None = 1) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.aicc", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env(threads))


def aicc_opt(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.aicc_opt", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env())


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def assert_one_line_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith("aicc: error:"), line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


SMALL_MODEL = """
import numpy as np

rng = np.random.default_rng(0)
w = rng.standard_normal((8, 6)).astype(np.float32)


def model(x):
    h = np.maximum(x @ w, 0.0)
    return np.exp(h - h.max(axis=-1, keepdims=True))


example_inputs = (rng.standard_normal((4, 8)).astype(np.float32),)
"""


@pytest.fixture
def small_model(tmp_path: Path) -> Path:
    return write(tmp_path, "small_model.py", SMALL_MODEL)


# ------------------------------------------------------------------------------ aicc: success


def test_mlp_runs_ok_with_timings():
    r = aicc("examples/mlp.py", "--target", "cpu")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = r.stdout
    assert "compiled in" in out
    assert "OK" in out and "MISMATCH" not in out
    timing_lines = [line for line in out.splitlines() if " ms (median of" in line]
    assert [line.split()[0] for line in timing_lines] == ["aicc", "numpy"], out


@pytest.mark.parametrize("example", ["softmax.py", "layernorm.py", "attention.py"])
def test_other_examples_ok(example):
    r = aicc(f"examples/{example}", "--repeat", "2")
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout and "MISMATCH" not in r.stdout


def test_torch_module_checked_against_torch():
    pytest.importorskip("torch")
    r = aicc("examples/torch_cnn.py", "--repeat", "2")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "OK" in r.stdout and "MISMATCH" not in r.stdout
    timing_lines = [line for line in r.stdout.splitlines() if " ms (median of" in line]
    assert [line.split()[0] for line in timing_lines] == ["aicc", "torch"], r.stdout


def test_threads_and_no_fuse_options(small_model):
    r = aicc(small_model, "--threads", "1", "--no-fuse", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    assert "1 thread(s)" in r.stdout
    assert "OK" in r.stdout


EMIT_MARKERS = {
    "tensor": ["aicc.matmul", "func.func @model"],
    "linalg": ["linalg.generic", "linalg.matmul"],
    "memref": ["memref<"],
    "loops": ["scf.", "memref.load", "memref.store"],
    "llvm": ["define void @"],
    "asm": ["model"],
}


@pytest.mark.parametrize("stage", STAGES)
def test_emit_stage(small_model, stage):
    r = aicc(small_model, "--emit", stage)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.strip()
    for marker in EMIT_MARKERS[stage]:
        assert marker in out, (stage, marker)
    # --emit prints the IR and stops: no run, no comparison, no timings
    assert "median of" not in out and "OK" not in out.split()
    if stage == "tensor":
        assert "linalg." not in out
    if stage in ("memref", "loops"):
        assert "tensor<" not in out.split("func.func")[-1]
    if stage == "loops":
        assert "linalg." not in out
    if stage == "asm":
        assert "define void" not in out and "func.func" not in out


def test_output_dir(small_model, tmp_path):
    out = tmp_path / "out" / "nested"
    r = aicc(small_model, "-o", out, "--repeat", "1")
    assert r.returncode == 0, r.stderr
    names = ["tensor.mlir", "linalg.mlir", "memref.mlir", "loops.mlir",
             "model.ll", "model.opt.ll", "model.s", "model.o"]
    for name in names:
        f = out / name
        assert f.is_file(), name
        assert f.stat().st_size > 0, name
        assert f"wrote {f}" in r.stdout, name
    assert "aicc." in (out / "tensor.mlir").read_text()
    assert "linalg.generic" in (out / "linalg.mlir").read_text()
    assert "scf." in (out / "loops.mlir").read_text()
    assert "define void @" in (out / "model.ll").read_text()
    assert "define void @" in (out / "model.opt.ll").read_text()
    if sys.platform.startswith("linux"):
        assert (out / "model.o").read_bytes()[:4] == b"\x7fELF"
    assert "OK" in r.stdout


def test_time_passes(small_model):
    r = aicc(small_model, "--time-passes", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for name in ("tensor-to-linalg", "fuse-elementwise", "bufferize", "linalg-to-loops",
                 "canonicalize", "emit-llvm", "total"):
        assert name in out, name
    assert " ms " in out


def test_time_passes_with_no_fuse_omits_fusion(small_model):
    r = aicc(small_model, "--time-passes", "--no-fuse", "--emit", "tensor")
    assert r.returncode == 0, r.stderr
    assert "tensor-to-linalg" in r.stdout
    assert "fuse-elementwise" not in r.stdout


def test_print_ir_after_all(small_model):
    r = aicc(small_model, "--print-ir-after-all", "--emit", "llvm")
    assert r.returncode == 0, r.stderr
    err = r.stderr
    for name in ("tensor-to-linalg", "bufferize", "linalg-to-loops"):
        assert f"IR after {name}" in err, name
    after_t2l = err.split("IR after tensor-to-linalg")[1]
    assert "linalg.generic" in after_t2l.split("IR after")[0]
    after_loops = err.split("IR after linalg-to-loops")[1]
    assert "scf." in after_loops.split("IR after")[0]
    assert "define void @" in r.stdout


def test_help_mentions_every_option():
    r = aicc("--help")
    assert r.returncode == 0
    for opt in ("MODEL", "--target", "cpu", "--emit", "--print-ir-after-all", "--time-passes",
                "-o", "--output-dir", "--threads", "--no-fuse", "--repeat", *STAGES):
        assert opt in r.stdout, opt


# ------------------------------------------------------------------------------ aicc: errors


def test_error_missing_file(tmp_path):
    assert_one_line_error(aicc(tmp_path / "nope.py"), "nope.py")


def test_error_no_model(tmp_path):
    f = write(tmp_path, "no_model.py", """
        import numpy as np
        example_inputs = (np.ones(3, np.float32),)
    """)
    assert_one_line_error(aicc(f), "no_model.py", "model")


def test_error_no_example_inputs(tmp_path):
    f = write(tmp_path, "no_inputs.py", """
        import numpy as np
        def model(x):
            return x + 1.0
    """)
    assert_one_line_error(aicc(f), "no_inputs.py", "example_inputs")


def test_error_bad_target(small_model):
    assert_one_line_error(aicc(small_model, "--target", "tpu"), "tpu")


def test_error_bad_emit_stage(small_model):
    assert_one_line_error(aicc(small_model, "--emit", "bogus"), "bogus")


def test_error_no_arguments():
    assert_one_line_error(aicc(), "MODEL")


def test_error_unsupported_numpy_function(tmp_path):
    f = write(tmp_path, "the_model_file.py", """
        import numpy as np


        def model(x):
            y = x * 2.0
            return np.sort(y)


        example_inputs = (np.ones((3, 4), np.float32),)
    """)
    assert_one_line_error(aicc(f), "np.sort", "the_model_file.py:6")


def test_error_shape_mismatch(tmp_path):
    f = write(tmp_path, "shape_model.py", """
        import numpy as np


        def model(x, y):
            return x + y


        example_inputs = (np.ones((3, 4), np.float32), np.ones((5, 4), np.float32))
    """)
    assert_one_line_error(aicc(f), "aicc.add", "(3, 4)", "(5, 4)", "shape_model.py:5")


def test_error_matmul_mismatch(tmp_path):
    f = write(tmp_path, "mm_model.py", """
        import numpy as np

        def model(a, b):
            return np.tanh(a @ b)

        example_inputs = (np.ones((3, 4), np.float32), np.ones((5, 6), np.float32))
    """)
    assert_one_line_error(aicc(f), "aicc.matmul", "(3, 4)", "(5, 6)", "mm_model.py:4")


def test_error_syntax_error(tmp_path):
    f = write(tmp_path, "syntax_model.py", """
        import numpy as np

        def model(x):
            return x +* 2

        example_inputs = (np.ones(3, np.float32),)
    """)
    assert_one_line_error(aicc(f), "syntax_model.py:4", "syntax")


def test_error_exception_at_import(tmp_path):
    f = write(tmp_path, "raising_model.py", """
        import numpy as np
        import aicc_no_such_module_xyz
    """)
    assert_one_line_error(aicc(f), "raising_model.py:2", "aicc_no_such_module_xyz")


def test_error_data_dependent_control_flow(tmp_path):
    f = write(tmp_path, "branch_model.py", """
        import numpy as np

        def model(x):
            if x.sum() > 0:
                return x
            return -x

        example_inputs = (np.ones(3, np.float32),)
    """)
    assert_one_line_error(aicc(f), "branch_model.py:4", "np.where")


def test_error_torch_export_failure(tmp_path):
    pytest.importorskip("torch")
    f = write(tmp_path, "torch_branch.py", """
        import torch

        class Branchy(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x * 2
                return x

        model = Branchy()
        example_inputs = (torch.ones(3),)
    """)
    assert_one_line_error(aicc(f), "torch_branch.py:5", "torch.export could not export Branchy",
                          "data-dependent")


def test_error_float64_inputs(tmp_path):
    f = write(tmp_path, "f64_model.py", """
        import numpy as np
        def model(x):
            return x * 2.0
        example_inputs = (np.ones(3),)
    """)
    assert_one_line_error(aicc(f), "float64", "float32")


def test_error_wrong_number_of_inputs(tmp_path):
    f = write(tmp_path, "arity_model.py", """
        import numpy as np
        def model(x, y):
            return x + y
        example_inputs = (np.ones(3, np.float32),)
    """)
    assert_one_line_error(aicc(f), "model")


def test_error_not_a_python_file(tmp_path):
    f = tmp_path / "model.txt"
    f.write_text("hello")
    assert_one_line_error(aicc(f), "model.txt")


def test_error_example_inputs_function_raises(tmp_path):
    f = write(tmp_path, "inputs_model.py", """
        import numpy as np
        def model(x):
            return x
        def example_inputs():
            raise RuntimeError("no inputs today")
    """)
    r = aicc(f)
    assert_one_line_error(r, "inputs_model.py:5", "no inputs today")
    assert r.returncode == 1


def test_error_model_raises_while_tracing(tmp_path):
    f = write(tmp_path, "name_model.py", """
        import numpy as np
        def model(x):
            return x * undefined_name
        example_inputs = (np.ones(3, np.float32),)
    """)
    r = aicc(f)
    assert_one_line_error(r, "name_model.py:3", "undefined_name")
    assert r.returncode == 1


# ------------------------------------------------------------------------------ aicc-opt

SMALL_MLIR = """
func.func @f(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = aicc.add %x, %y : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = aicc.exp %0 : tensor<4x8xf32>
  %2 = aicc.relu %1 : tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}
"""


def test_aicc_opt_roundtrip(tmp_path):
    f = write(tmp_path, "small.mlir", SMALL_MLIR)
    r = aicc_opt(f)
    assert r.returncode == 0, r.stderr
    for op in ("aicc.add", "aicc.exp", "aicc.relu", "func.return"):
        assert op in r.stdout


def test_aicc_opt_pipeline_to_loops(tmp_path):
    f = write(tmp_path, "small.mlir", SMALL_MLIR)
    r = aicc_opt(f, "-p", "tensor-to-linalg,fuse-elementwise,bufferize,linalg-to-loops")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "aicc." not in out and "linalg." not in out and "tensor<" not in out
    assert "scf." in out
    assert "memref.load" in out and "memref.store" in out
    assert "math.exp" in out and "arith.addf" in out
    # fused: one loop nest, one store
    assert out.count("memref.store") == 1


def test_aicc_opt_single_pass(tmp_path):
    f = write(tmp_path, "small.mlir", SMALL_MLIR)
    r = aicc_opt(f, "-p", "tensor-to-linalg")
    assert r.returncode == 0, r.stderr
    assert "linalg.generic" in r.stdout and "aicc." not in r.stdout


def test_aicc_opt_parse_error(tmp_path):
    f = write(tmp_path, "bad.mlir", """
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = aicc.add %x, : tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }
    """)
    r = aicc_opt(f, "-p", "tensor-to-linalg")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr + r.stdout
    assert "bad.mlir:2:" in r.stderr
    assert "operand expected" in r.stderr


def test_aicc_opt_unknown_op(tmp_path):
    f = write(tmp_path, "unknown.mlir", """
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = aicc.frobnicate %x : tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }
    """)
    r = aicc_opt(f)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr + r.stdout
    assert "unknown.mlir:2:" in r.stderr


def test_aicc_opt_verify_error(tmp_path):
    f = write(tmp_path, "badtype.mlir", """
        func.func @f(%x: tensor<4xf32>) -> tensor<5xf32> {
          %0 = aicc.add %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<5xf32>
          func.return %0 : tensor<5xf32>
        }
    """)
    r = aicc_opt(f)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr + r.stdout
    assert "aicc-opt: error:" in r.stderr and "aicc.add" in r.stderr


def test_aicc_opt_unknown_pass(tmp_path):
    f = write(tmp_path, "small.mlir", SMALL_MLIR)
    r = aicc_opt(f, "-p", "no-such-pass")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "no-such-pass" in r.stderr


def test_aicc_opt_missing_file(tmp_path):
    r = aicc_opt(tmp_path / "missing.mlir")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "missing.mlir" in r.stderr


def test_output_piped_into_head_ends_quietly():
    """`aicc MODEL | head -1`: the reader leaves early; no internal error, no traceback."""
    r = subprocess.run(f"{sys.executable} -m tools.aicc examples/mlp.py | head -1", shell=True,
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert r.stdout.startswith("aicc examples/mlp.py") and r.stderr == ""
