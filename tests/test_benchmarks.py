"""benchmarks/run.py: a smoke run of one tiny case end to end (subprocess, as a user runs it),
and the report logic (markdown, the issue's bars, the chart) on a synthetic results dict.
No assertion on any time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("benchmarks_run", RUN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _row(name, aicc_ms, bar=None, **peers):
    row = {"name": name, "aicc_ms": aicc_ms, "compile_s": 0.1, "kernels": 1,
           "peers": {p: ({"error": v} if isinstance(v, str) else {"ms": v, "ratio": v / aicc_ms,
                                                                   "max_scaled_err": 1e-7})
                     for p, v in peers.items()}}
    if bar:
        row["bar"] = bar
    return row


def _results(peak=True):
    matmul = _row("matmul 1024", 10.0, "matmul", numpy=11.0, torch=12.0)
    matmul |= {"aicc_GFLOPs": 75.0, "aicc_pct_of_peak": 75.0, "max_scaled_err": 1e-7}
    rows = [
        matmul,
        _row("MLP b32", 1.0, "mlp", torch=0.9, onnxruntime=1.0),  # slower than torch: not met
        _row("CNN b32", 1.0, "cnn", torch=2.0, onnxruntime=0.85),  # 1.0 <= 1.25 * 0.85: met
        _row("encoder b32", 1.0, "transformer", torch=2.0, onnxruntime="RuntimeError: no export"),
        _row("softmax", 1.0, "softmax", torch=2.0),
        _row("layernorm", 1.0, "layernorm", torch=0.5),
        # no attention row: "not run"
    ]
    pk = {"fma_units": 2, "lanes_f32": 16, "clock_GHz": 1.5625, "GFLOPs_1_thread": 100.0} if peak else None
    return {"machine": {"cpu": "Test CPU", "cores": 4, "python": "3.11", "peak": pk}, "clock": "thread",
            "note": None, "runs": {"1": rows, "4": rows[:2]}}


def test_bars(run):
    verdicts = {statement.split(":")[0]: met for statement, met, _ in run.evaluate_bars(_results()["runs"]["1"])}
    assert verdicts == {"matmul 1024": True, "MLP batch 32": False, "CNN batch 32": True,
                        "transformer layer batch 32": None, "softmax": True, "layer norm": False,
                        "attention": None}


def test_markdown(run):
    md = run.markdown(_results(), "python benchmarks/run.py --threads 1,4")
    assert "Peak fp32: 100.0 GFLOP/s at 1 thread, 400.0 GFLOP/s at 4 threads" in md
    assert "FMA units (2) x f32 lanes (16) x 2 x measured clock (1.56 GHz)" in md
    assert "| matmul 1024 | 1 | 10.000 | 75.0 | 75% | 1.0e-07 | 11.000 (1.10x) | 12.000 (1.20x) |  |" in md
    assert "- encoder b32, onnxruntime: RuntimeError: no export" in md
    bars = md.split("## Bars (1 thread)")[1]
    assert bars.count("| met |") == 3 and bars.count("| not met |") == 2 and bars.count("| no data |") == 2
    assert "Peak fp32: not measured" in run.markdown(_results(peak=False), "x")
    no_one_thread = _results()
    del no_one_thread["runs"]["1"]
    assert "No 1-thread run" in run.markdown(no_one_thread, "x")


def test_chart(run, tmp_path):
    pytest.importorskip("matplotlib")
    assert run.write_chart(_results(), tmp_path / "cpu.png")
    assert (tmp_path / "cpu.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_without_matplotlib(run, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert not run.write_chart(_results(), tmp_path / "cpu.png")
    assert not (tmp_path / "cpu.png").exists()
    assert capsys.readouterr().out.strip() == "chart skipped: matplotlib is not installed (pip install -e '.[bench]')"


def test_quick_run(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, str(RUN), "--quick", "--only", "matmul 256", "--threads", "1", "--budget", "0.01",
           "--peers", "numpy", "--clock", "thread", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "cpu.json").read_text())
    [row] = results["runs"]["1"]
    assert row["name"] == "matmul 256" and row["aicc_ms"] > 0
    assert row["peers"]["numpy"]["max_scaled_err"] < 1e-4
    md = (tmp_path / "cpu.md").read_text()
    assert "| matmul 256 |" in md and "## Bars (1 thread)" in md
    assert (tmp_path / "cpu.png").exists() == (importlib.util.find_spec("matplotlib") is not None)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 only")
def test_peak_is_measured_on_x86(run, monkeypatch):
    """peak_info reports None where no peak can be measured; on x86 it must measure one (an
    error inside aicc, such as a renamed import, must not pass for 'not measured here')."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    pk = run.peak_info()
    assert pk is not None and pk["lanes_f32"] in (4, 8, 16) and pk["GFLOPs_1_thread"] > 0


def test_model_bars(run):
    """The model-level bar: every model at batch 1 >= 1.0 against ONNX Runtime, geomean >= 1.2."""
    fast = [_row("resnet18 b1", 1.0, "model:torchvision", onnxruntime=1.5),
            _row("vit b1", 1.0, "model:transformers", onnxruntime=1.3),
            _row("vit b8", 1.0, None, onnxruntime=0.5)]  # batch 8: not part of the bar
    [(_, met, numbers)] = run.evaluate_model_bars(fast)
    assert met is True and "geomean 1.396 over 2 models" in numbers
    slow = fast[:1] + [_row("gpt2 b1", 1.0, "model:transformers", onnxruntime=0.9)]
    [(_, met, numbers)] = run.evaluate_model_bars(slow)
    assert met is False and "lowest gpt2 b1 0.90" in numbers
    low_mean = [_row("a b1", 1.0, "model:torchvision", onnxruntime=1.1)]
    assert run.evaluate_model_bars(low_mean)[0][1] is False  # every model >= 1, geomean < 1.2
    failed = [_row("a b1", 1.0, "model:torchvision", onnxruntime="RuntimeError: export")]
    assert run.evaluate_model_bars(failed)[0][1] is None
    assert run.evaluate_model_bars([])[0][1:] == (None, "not run")


def test_onnx_flops(run):
    """The nominal FLOPs of an ONNX graph: 2 x multiply-adds of MatMul (batched, broadcast),
    Gemm (transA) and Conv (grouped, strided), on the shapes of a run (a symbolic batch too)."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import numpy as np
    from onnx import TensorProto, helper

    def graph(batch):
        nodes = [helper.make_node("MatMul", ["a", "b"], ["ab"]),  # [batch, 7, 3] @ [3, 5]
                 helper.make_node("Gemm", ["g", "h"], ["gh"], transA=1),  # [3, 7]^T @ [3, 4]
                 helper.make_node("Conv", ["x", "w"], ["y"], group=2, strides=[2, 2], pads=[1, 1, 1, 1])]
        inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [batch, 7, 3]),
                  helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 5]),
                  helper.make_tensor_value_info("g", TensorProto.FLOAT, [3, 7]),
                  helper.make_tensor_value_info("h", TensorProto.FLOAT, [3, 4]),
                  helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 9]),
                  helper.make_tensor_value_info("w", TensorProto.FLOAT, [6, 2, 3, 3])]
        outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("ab", "gh", "y")]
        model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8  # what ONNX Runtime reads
        return model

    rng = np.random.default_rng(0)
    arrays = tuple(rng.standard_normal(s, dtype=np.float32)
                   for s in ((2, 7, 3), (3, 5), (3, 7), (3, 4), (1, 4, 9, 9), (6, 2, 3, 3)))
    conv = 2 * (6 * 5 * 5) * (2 * 3 * 3)  # 9x9, pad 1, stride 2 -> 5x5; 2 input channels per group
    want = 2 * (2 * 7 * 5) * 3 + 2 * (7 * 4) * 3 + conv
    assert run.onnx_flops(graph(2), arrays) == want
    assert run.onnx_flops(graph("N"), arrays) == want  # shape inference alone cannot know N


def test_model_ceilings(run):
    """The ceiling of a model: ORT time / (nominal FLOPs / peak); aicc at 50% of peak and ORT
    1.1x slower puts ORT at 45% and the ceiling at 2.2."""
    def row(name, ms, bar, ort, gflops):
        return _row(name, ms, bar, onnxruntime=ort) | {"aicc_GFLOPs": gflops, "aicc_pct_of_peak": gflops}

    rows = [row("bert b1", 100.0, "model:transformers", 110.0, 50.0),  # peak 100 GFLOP/s
            row("vit b1", 10.0, "model:transformers", 10.0, 80.0),
            row("bert b8", 100.0, None, 50.0, 50.0)]
    lines = run.model_ceilings(rows)
    assert "| bert b1 | 5.00 | 50% | 45% | 1.10 | 2.20 |" in lines
    assert "| vit b1 | 0.80 | 80% | 80% | 1.00 | 1.25 |" in lines
    assert not any("bert b8" in ln for ln in lines)  # not part of the bar
    assert lines[-1] == "Geomean of the ceilings: 1.66 over 2 models; by family: transformers 1.66 (2)."
    assert run.model_ceilings(rows[2:]) == []


def test_quick_model_run(tmp_path):
    """--models: a zoo model (quick size) at two batch sizes, aicc against ONNX Runtime on the
    model's torch.onnx.export, written to models.json and models.md with the model bar."""
    for package in ("torchvision", "onnxruntime"):  # find_spec: importing torchvision may fail
        if importlib.util.find_spec(package) is None:  # without zoo.import_torchvision's fix-up
            pytest.skip(f"{package} is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, str(RUN), "--quick", "--models", "squeezenet1_1", "--batches", "1,3",
           "--threads", "1", "--budget", "0.01", "--peers", "onnxruntime", "--clock", "thread",
           "--out", str(tmp_path)]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "models.json").read_text())
    rows = results["runs"]["1"]
    assert [r["name"] for r in rows] == ["squeezenet1_1 b1", "squeezenet1_1 b3"]
    for r in rows:
        assert r["aicc_ms"] > 0 and r["peers"]["onnxruntime"]["max_scaled_err"] < 1e-4
        assert r["aicc_GFLOPs"] > 0  # counted on the ONNX export
    md = (tmp_path / "models.md").read_text()
    assert "# aicc CPU benchmarks: models" in md and "| squeezenet1_1 b3 |" in md
    if results["machine"].get("peak"):
        assert "### Ceilings (1 thread)" in md and "| squeezenet1_1 b1 |" in md.split("### Ceilings")[1]
    assert "every model at batch 1 at least as fast as ONNX Runtime" in md
    assert not (tmp_path / "cpu.json").exists()
