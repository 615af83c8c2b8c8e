"""The CUDA target's compile-time surface: stages, errors, the command line without a GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

import compiler
from compiler.errors import CompileError, UnsupportedOpError

pytest.importorskip("cuda.bindings.nvrtc")

from compiler.targets.cuda.runtime import (  # noqa: E402
    NVRTCCompiler, cubin_stats, has_gpu, kernel_stats, parse_ptxas_log)
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


# four kernels in one program: few registers; static shared memory; many registers; and a
# register cap that makes ptxas spill (a stack frame)
STATS_SRC = r"""
extern "C" __global__ void plain(float* x) { x[threadIdx.x] = x[threadIdx.x] * 2.0f + 1.0f; }
extern "C" __global__ void __launch_bounds__(256) tiled(float* x) {
  __shared__ float s[100]; __shared__ double d[7];
  s[threadIdx.x % 100] = x[threadIdx.x]; d[threadIdx.x % 7] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[(threadIdx.x + 1) % 100] + (float)d[(threadIdx.x + 3) % 7];
}
extern "C" __global__ void wide(float* x, int k) {
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = x[i * blockDim.x + threadIdx.x];
  x[threadIdx.x] = a[k & 63] + a[(k + 5) & 63];
}
extern "C" __global__ void __launch_bounds__(1024, 2) capped(const float* x, float* y) {
  float a[48];
#pragma unroll
  for (int i = 0; i < 48; i++) a[i] = x[i * 1024 + threadIdx.x];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 48; i++) s += a[i] * a[47 - i] + a[(i * 7) % 48];
  y[threadIdx.x] = s;
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cubin_statistics_agree_with_ptxas(arch, monkeypatch):
    # NVRTC 13.0 leaves its log empty once the process has initialized the CUDA driver (seen on
    # an H100): the statistics then come from the cubin's ELF, and must say what ptxas says
    monkeypatch.setenv("AICC_CACHE", "0")
    c = NVRTCCompiler(arch).compile(STATS_SRC)
    if not c.log:
        pytest.skip("NVRTC left its log empty: this process has initialized a CUDA driver")
    from_log, from_cubin = parse_ptxas_log(c.log), cubin_stats(c.image)
    assert set(from_log) == set(from_cubin) == {"plain", "tiled", "wide", "capped"}
    for name, s in from_log.items():
        t = from_cubin[name]
        assert (t.registers, t.shared_bytes, t.stack_bytes) == (
            s.registers, s.shared_bytes, s.stack_bytes), (name, s, t)
        assert t.source == "cubin" and not t.spills and t.may_spill == bool(s.stack_bytes)
    assert from_log["tiled"].shared_bytes == 456 and from_log["capped"].stack_bytes > 0
    assert from_log["capped"].spills and from_log["capped"].registers <= 32
    assert not any(from_log[k].spills for k in ("plain", "tiled", "wide"))
    # with an empty log every kernel's statistics come from the cubin
    assert kernel_stats("", c.image) == from_cubin
    assert kernel_stats(c.log, c.image) == from_log


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


def test_cli_emit_gpu_and_cuda(capsys, monkeypatch):
    monkeypatch.delenv("AICC_CUDA_ARCH", raising=False)
    assert aicc_main(["examples/layernorm.py", "--target", "cuda", "--emit", "gpu"]) == 0
    assert '"row_reduce"' in capsys.readouterr().out
    assert aicc_main(["examples/mlp.py", "--target", "cuda", "--emit", "cuda", "--arch", "sm_80"]) == 0
    assert "__shared__ __align__(16) float As" in capsys.readouterr().out
    # --arch held for that command alone: later compiles in this process target the default
    assert "AICC_CUDA_ARCH" not in os.environ


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
