"""Numerics bisection (compiler/numerics.py, `m.check_numerics`, `aicc --check-numerics`): every
kernel of a compiled model is compared with the reference interpreter in float64 on its own
compiled operands; a fault injected into one kernel is blamed on exactly that kernel, with the
user's file:line or the ONNX node it came from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compiler

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(3)
W1 = rng.standard_normal((33, 70)).astype(np.float32) * 0.2
B1 = rng.standard_normal(70).astype(np.float32)
W2 = rng.standard_normal((70, 7)).astype(np.float32) * 0.2
X = rng.standard_normal((5, 33)).astype(np.float32)


def net(x):
    h = np.maximum(x @ W1 + B1, 0.0)
    y = np.tanh(h @ W2) * 2.0
    return compiler.ops.softmax(y - y.mean(axis=-1, keepdims=True), axis=-1)


@pytest.fixture(scope="module")
def model():
    return compiler.compile(net, (X,))


def test_every_kernel_is_checked_and_within_tolerance(model):
    report = model.check_numerics(X)
    assert report.ok and report.first_failure is None
    ops = [k.op for k in report.kernels]
    assert ops[0] == "aicc.matmul" and "aicc.tanh" in ops and ops[-1] == "aicc.softmax"
    # each row names the line of this file that made the op (or the one near a fused op)
    this = Path(__file__).name
    assert all(this in k.origin for k in report.kernels), [k.origin for k in report.kernels]
    assert any(k.origin == f"{this}:{net.__code__.co_firstlineno + 2}" for k in report.kernels)
    assert all(k.max_abs < 1e-4 for k in report.kernels)
    table = report.table()
    assert table.splitlines()[0].split() == ["kernel", "source", "shape", "max", "abs", "err",
                                             "max", "rel", "err", "ok"]
    assert "(whole model, fused)" in table


@pytest.mark.parametrize("which", [0, 2, -1])
def test_a_fault_in_one_kernel_is_blamed_on_exactly_that_kernel(model, which):
    n = len(model.check_numerics(X).kernels)
    index = which % n
    report = model.check_numerics(X, fault=(index, 0.5))
    bad = [k.index for k in report.kernels if not k.ok]
    assert bad == [index]
    assert report.first_failure.index == index
    assert report.first_failure.max_abs == pytest.approx(0.5, rel=1e-3)
    assert "scf." in report.loop_ir or "aicc_cpu." in report.loop_ir  # its loop IR, alone


def test_onnx_kernels_name_their_nodes():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv_a", pads=[1, 1, 1, 1]),
         helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
         helper.make_node("Mul", ["c", "s"], ["y"], name="silu_mul")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 7, 9])], [w])
    m = compiler.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    report = m.check_numerics(x)
    assert report.ok
    origins = {k.op: k.origin for k in report.kernels}
    assert origins["aicc.conv2d"] == "ONNX Conv node 'conv_a'"
    assert origins["aicc.sigmoid"] == "ONNX Sigmoid node 'gate'"
    assert origins["aicc.mul"] == "ONNX Mul node 'silu_mul'"
    faulty = next(k.index for k in report.kernels if k.op == "aicc.sigmoid")
    bad = m.check_numerics(x, fault=(faulty, 1.0)).first_failure
    assert bad.origin == "ONNX Sigmoid node 'gate'"


def test_a_model_from_the_compile_cache_is_checked_too(tmp_path, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "1")
    monkeypatch.setenv("AICC_CACHE_DIR", str(tmp_path))
    compiler.compile(net, (X,))
    warm = compiler.compile(net, (X,))
    assert warm.stats["cache"] == "hit"
    report = warm.check_numerics(X)
    assert report.ok and all(k.origin for k in report.kernels)


def test_on_the_cuda_emulator(model):
    emu = compiler.compile(net, (X,), target="cuda-emu")
    report = emu.check_numerics(X)
    # the cuda pipeline keeps matmul and bias apart: one kernel more than the cpu's
    assert report.ok and len(report.kernels) >= len(model.check_numerics(X).kernels)
    assert [k.index for k in emu.check_numerics(X, fault=(1, 0.5)).kernels if not k.ok] == [1]


CNN = """
import torch
from torch import nn
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.b = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.b(torch.relu(self.bn(self.a(x)))))


model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), Block(8), Block(8),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5)).eval()
example_inputs = (torch.randn(2, 3, 19, 17),)
"""


def test_cli_on_a_resnet_style_model(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "resnetish.py"
    path.write_text(CNN)
    cmd = [sys.executable, "-m", "tools.aicc", str(path), "--check-numerics"]
    ok = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].split()[:2] == ["kernel", "source"]
    assert sum("aicc.conv2d" in line for line in lines) == 5
    # the user's line and the submodule that ran the op; torch's own code is never named
    assert any("resnetish.py:15 2.b:Conv2d" in line for line in lines)
    assert any(" 0:Conv2d " in line for line in lines)
    assert not any("site-packages" in line for line in lines)
    assert "kernels within tolerance" in lines[-1]
    env = {**os.environ, "AICC_TEST_NUMERICS_FAULT": "4:0.25"}
    bad = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert bad.returncode == 1
    assert bad.stderr.startswith("aicc: error: kernel #4 ")
    assert "out of tolerance" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert "// loop IR of #4 " in bad.stdout and "FAIL" in bad.stdout
    assert sum("FAIL" in line for line in bad.stdout.splitlines()) == 1
