"""Targets as plug-ins (compiler/targets): the registry that `compile`, `jit`, `aicc` and
`aicc-opt` all use, a toy target that a third party could write on the `Target` interface, the
cuda-emu target run from the command line, and the target CPU (`AICC_TARGET_CPU`)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import IntAttr, ModuleOp
from xdsl.passes import ModulePass

import compiler
from compiler.lowering import pipeline as shared
from compiler.stages import PassTiming
from compiler.targets import (
    BUILTIN_TARGETS,
    ENTRY_POINT_GROUP,
    Target,
    available_targets,
    get_target,
    register_target,
    unregister_target,
)

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def mlp(x, w1, b1, w2):
    return np.maximum(x @ w1 + b1, 0.0) @ w2


# -- a toy target, written the way another package would ----------------------------------------


@dataclass(frozen=True)
class CountLoops(ModulePass):
    """The toy target's own pass: records how many loop nests (scf.for / scf.parallel) the loop
    IR has, on the module."""

    name = "toy-count-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        n = sum(1 for o in op.walk() if o.name in ("scf.for", "scf.parallel"))
        op.attributes["toy.loops"] = IntAttr(n)


class ToyTarget(Target):
    """Plain loop nests (no tiling, no micro-kernels, no fused rows), through aicc's LLVM
    emitter and the CPU runtime: a minimal target on the shared stages."""

    name = "toy"
    description = "test: the shared stages only, then LLVM"
    stages = ("tensor", "linalg", "memref", "loops", "llvm")

    def pipeline(self, options):
        stages = shared.shared_stages(options.fuse, shared.StageHooks())
        stages[-1][1].append(CountLoops())
        return stages

    def build(self, module, stages, timings, options, n_inputs, n_outputs):
        from compiler.codegen.llvm import LLVMEmitter
        from compiler.targets.cpu.runtime import CPUExecutable

        text = str(LLVMEmitter().emit(module))
        timings.append(PassTiming("toy-llvm", 0.0))
        stages["llvm"] = text
        return CPUExecutable(text, threads=1)

    def passes(self):
        return {"toy-count-loops": lambda: CountLoops}


@pytest.fixture
def toy():
    register_target(ToyTarget())
    yield get_target("toy")
    unregister_target("toy")


def test_builtin_targets_are_registered():
    assert {"cpu", "cuda", "cuda-emu"} <= set(available_targets())
    assert available_targets()[0] == "cpu"
    for name in BUILTIN_TARGETS:
        t = get_target(name)
        assert isinstance(t, Target) and t.name == name and t.description
        assert get_target(name) is t  # loaded once


def test_builtin_targets_are_entry_points():
    """Installed aicc declares its targets in the entry point group others use too."""
    names = {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {"cpu", "cuda", "cuda-emu"} <= names


def test_unknown_target_names_the_known_ones():
    with pytest.raises(compiler.CompileError, match="unknown target 'tpu'.*cpu.*cuda-emu"):
        compiler.compile(mlp, (f32(2, 3), f32(3, 4), f32(4), f32(4, 2)), target="tpu")
    with pytest.raises(compiler.CompileError, match="unknown target"):
        compiler.jit(target="tpu")


def test_options_a_target_does_not_take_are_refused():
    args = (f32(2, 3), f32(3, 4), f32(4), f32(4, 2))
    with pytest.raises(compiler.CompileError, match="schedule= applies to the cpu target"):
        compiler.compile(mlp, args, target="cuda-emu", schedule={"mr": 4})
    with pytest.raises(compiler.CompileError, match="target_cpu= applies to the cpu target"):
        compiler.compile(mlp, args, target="cuda-emu", target_cpu="haswell")


def test_registering_twice_is_refused(toy):
    with pytest.raises(ValueError, match="already registered"):
        register_target(ToyTarget())
    with pytest.raises(ValueError, match="already registered"):
        register_target(type("Cpu", (ToyTarget,), {"name": "cpu"})())


def test_toy_target_through_compile_and_jit(toy):
    args = (f32(7, 33), f32(33, 17), f32(17), f32(17, 5))
    m = compiler.compile(mlp, args, target="toy")
    np.testing.assert_allclose(m(*args), mlp(*args), rtol=1e-4, atol=1e-5)
    assert m.target is toy
    assert "aicc_cpu.microkernel" not in m.ir("loops")  # no cpu passes ran
    assert "toy-count-loops" in [t.name for t in m.timings]
    assert "toy.loops" in m.ir("loops")
    with pytest.raises(compiler.CompileError, match="unknown IR stage 'asm'"):
        m.ir("asm")
    jitted = compiler.jit(mlp, target="toy")
    np.testing.assert_allclose(jitted(*args), mlp(*args), rtol=1e-4, atol=1e-5)


def test_toy_target_in_stage_passes_aicc_and_aicc_opt(toy, tmp_path):
    from compiler.pipeline import stage_passes
    from tools import aicc, aicc_opt

    assert [s for s, _ in stage_passes("toy")] == ["tensor", "linalg", "memref", "loops"]
    model = tmp_path / "m.py"
    model.write_text("import numpy as np\n"
                     "def model(x):\n    return np.tanh(x) * 2.0\n"
                     "example_inputs = (np.linspace(-2, 2, 35, dtype=np.float32).reshape(5, 7),)\n")
    out = io.StringIO()
    with redirect_stdout(out):
        assert aicc.main([str(model), "--target", "toy", "--threads", "1"]) == 0
    assert "--target toy" in out.getvalue() and "OK" in out.getvalue()
    loops = tmp_path / "loops.mlir"
    m = compiler.compile(lambda x: x * 2.0, (f32(3, 4),), target="toy")
    loops.write_text(m.ir("memref"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert aicc_opt.main([str(loops), "-p", "linalg-to-loops,toy-count-loops"]) == 0
    assert "toy.loops = #builtin.int<1>" in out.getvalue()  # one fused nest


def _aicc(*args, env=None) -> subprocess.CompletedProcess:
    full = dict(os.environ, AICC_NUM_THREADS="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "tools.aicc", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=full)


def test_cuda_emu_runs_the_mlp_example_from_the_command_line():
    """`aicc examples/mlp.py --target cuda-emu --run`: the GPU kernels, run by the CPU
    emulation, match NumPy on a machine without a GPU."""
    r = _aicc("examples/mlp.py", "--target", "cuda-emu", "--run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cuda-emu:" in r.stdout and "kernel(s)" in r.stdout
    assert " OK" in r.stdout and "MISMATCH" not in r.stdout and "not timed" in r.stdout


def test_cuda_emu_compile_matches_numpy_and_prints_cuda():
    args = (f32(9, 31), f32(31, 16), f32(16), f32(16, 3))
    m = compiler.compile(mlp, args, target="cuda-emu")
    np.testing.assert_allclose(m(*args), mlp(*args), rtol=1e-4, atol=1e-5)
    assert "__global__" in m.ir("cuda") and "gpu_map.kernel" in m.ir("gpu")


def test_help_lists_the_registered_targets():
    r = _aicc("--help")
    assert "cuda-emu" in r.stdout and "--target-cpu" in r.stdout
    r = _aicc("examples/mlp.py", "--target", "tpu")
    assert r.returncode == 2 and "invalid choice: 'tpu'" in r.stderr


# -- the target CPU ------------------------------------------------------------------------------


def test_target_cpu_avx2_code_has_no_zmm():
    args = (f32(64, 64), f32(64, 64), f32(64), f32(64, 8))
    m = compiler.compile(mlp, args, target_cpu="x86-64-v3")
    asm = m.ir("asm")
    assert "zmm" not in asm and "ymm" in asm
    np.testing.assert_allclose(m(*args), mlp(*args), rtol=1e-4, atol=1e-4)
    assert "vw = 8" in m.ir("linalg")  # choose-schedule read the target's vector width


def test_target_cpu_avx512_code_is_generated_on_any_host():
    from compiler.targets.cpu.machine import cpu_machine

    args = (f32(64, 64), f32(64, 64), f32(64), f32(64, 8))
    if cpu_machine("host").vector_bits >= 512:
        m = compiler.compile(mlp, args, target_cpu="skylake-avx512")
        assert "zmm" in m.ir("asm")
        return
    with pytest.raises(compiler.CompileError, match="uses 512-bit vectors.*printed"):
        compiler.compile(mlp, args, target_cpu="skylake-avx512")


def test_target_cpu_from_the_environment_and_unknown_names(monkeypatch):
    from compiler.targets.cpu.machine import cpu_machine

    monkeypatch.setenv("AICC_TARGET_CPU", "x86-64-v3")
    assert cpu_machine().name == "x86-64-v3" and cpu_machine().vector_bits == 256
    assert not cpu_machine().vector_ldexp
    assert cpu_machine("skylake-avx512").vector_ldexp
    with pytest.raises(compiler.CompileError, match="unknown target CPU 'pentium9'"):
        compiler.compile(mlp, (f32(2, 3), f32(3, 4), f32(4), f32(4, 2)), target_cpu="pentium9")


def test_cache_keys_name_the_machine():
    from compiler.stages import CompileOptions

    cpu = get_target("cpu").cache_key(CompileOptions(target_cpu="x86-64-v3"))
    assert cpu["cpu"] == "x86-64-v3" and cpu["llvmlite"]
    host = get_target("cpu").cache_key(CompileOptions())
    assert "+avx2" in host["cpu"] or host["cpu"]  # the host: name and its feature string
    assert get_target("cuda-emu").cache_key(CompileOptions(target="cuda-emu"))["emulator"]
