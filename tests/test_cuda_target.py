"""The CUDA target's compile-time surface: stages, errors, the command line without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import compiler
from compiler.errors import CompileError, UnsupportedOpError

pytest.importorskip("cuda.bindings.nvrtc")

from compiler.targets.cuda.runtime import NVRTCCompiler, has_gpu, parse_ptxas_log  # noqa: E402
from tools.aicc import main as aicc_main  # noqa: E402

x = np.ones((4, 8), np.float32)


def test_stages_print_without_running():
    m = compiler.compile(lambda a: np.exp(a) + 1.0, (x,), target="cuda")
    assert 'gpu_map.kernel "' in m.ir("gpu") and '"elementwise"' in m.ir("gpu")
    src = m.ir("cuda")
    assert '__global__ void __launch_bounds__(' in src and "expf(" in src
    assert "// from: scf.parallel" in src


@pytest.mark.skipif(has_gpu(), reason="checks the no-GPU path")
def test_call_without_gpu_is_a_compile_error():
    m = compiler.compile(lambda a: a * 2.0, (x,), target="cuda")
    with pytest.raises(CompileError, match="NVIDIA GPU"):
        m(x)
    f = compiler.jit(target="cuda")(lambda a: a * 2.0) if _jit_takes_target() else None
    if f is not None:
        with pytest.raises(CompileError, match="NVIDIA GPU"):
            f(x)


def _jit_takes_target() -> bool:
    try:
        compiler.jit(target="cuda")
        return True
    except TypeError:
        return False


def test_nvrtc_failure_names_kernel_and_line():
    src = 'extern "C" __global__ void broken_k0(float* p0) {\n  p0[0] = undefined_thing;\n}\n'
    with pytest.raises(CompileError) as e:
        NVRTCCompiler("sm_90").compile(src)
    msg = str(e.value)
    assert "broken_k0" in msg and "line 2" in msg and "undefined_thing" in msg


def test_ptxas_log_parsing():
    log = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8448 bytes smem, 380 bytes cmem[0]"""
    s = parse_ptxas_log(log)["k"]
    assert (s.registers, s.shared_bytes, s.spill_stores, s.spill_loads) == (40, 8448, 4, 8)


def test_unsupported_op_names_op_and_target():
    from xdsl.dialects import builtin, test

    from compiler.codegen.cuda import CudaEmitter

    module = builtin.ModuleOp([test.TestOp()])
    with pytest.raises(UnsupportedOpError, match="test.op.*cuda"):
        CudaEmitter().emit(module)


@pytest.mark.skipif(has_gpu(), reason="checks the no-GPU path")
def test_cli_without_gpu(tmp_path, capsys):
    assert aicc_main(["examples/softmax.py", "--target", "cuda", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "row_reduce" in out and "registers" in out and "spill" in out
    assert out.strip().splitlines()[-1].startswith("aicc: running the cuda target needs an NVIDIA GPU")
    # softmax's six loop nests run as one kernel: a block per row, the row in registers
    assert (tmp_path / "model.cu").read_text().count("extern \"C\" __global__") == 1
    assert (tmp_path / "model.cubin").stat().st_size > 0
    assert aicc_main(["examples/softmax.py", "--target", "cuda", "--run"]) == 1


def test_cli_emit_gpu_and_cuda(capsys):
    assert aicc_main(["examples/layernorm.py", "--target", "cuda", "--emit", "gpu"]) == 0
    assert '"row_reduce"' in capsys.readouterr().out
    assert aicc_main(["examples/mlp.py", "--target", "cuda", "--emit", "cuda", "--arch", "sm_80"]) == 0
    assert "__shared__ __align__(16) float As" in capsys.readouterr().out


@pytest.mark.skipif(has_gpu(), reason="checks the no-GPU path")
def test_cuda_benchmark_without_gpu_fails_with_one_line():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "run.py"), "--target", "cuda"],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 1
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "no NVIDIA GPU" in r.stderr
