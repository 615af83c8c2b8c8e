"""The numerical tests once more, with code generated for an AVX2-only CPU (x86-64-v3), whatever
this host is: on an AVX-512 machine the default (host) run checks the AVX-512 code paths and
this run the AVX2 ones (register tiles of 8 lanes, exp without a vector ldexp), so CI checks
both on any machine. A slice (numerics, matmul schedules, convolutions, LLVM code generation),
run by a pytest of its own in a child process with AICC_TARGET_CPU set, one per file so that
pytest-xdist spreads them over its workers. On a host without AVX-512 the default run already
generates 256-bit AVX2 code through the same paths, so the slice is skipped there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.targets.cpu.machine import HOST, cpu_machine

ROOT = Path(__file__).resolve().parents[1]
SLICE = ["tests/test_numerics.py", "tests/test_matmul_schedules.py",
         "tests/test_conv_lowering.py", "tests/test_codegen_llvm.py"]


@pytest.mark.skipif(cpu_machine(HOST).vector_bits < 512,
                    reason="the host has no AVX-512: the default run already checks the AVX2 code")
@pytest.mark.parametrize("path", SLICE)
def test_the_numerical_slice_passes_for_x86_64_v3(path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["AICC_TARGET_CPU"] = "x86-64-v3"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          "-p", "no:xdist", path], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    tail = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in tail and "failed" not in tail, tail
