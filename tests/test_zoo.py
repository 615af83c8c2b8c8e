"""The model zoo's quick subset (benchmarks/zoo.py --quick): a torchvision CNN at 64x64 and
BERT-, GPT-2- and ViT-shaped transformers (2 layers, hidden 64) with random weights, each
through both frontends (torch.export, and torch.onnx.export then the ONNX importer), checked
against torch eager at the zoo's tolerance: |aicc - torch| <= 1e-4 * s + 1e-3 * |torch|,
s = max |torch output|. Skipped without torch, torchvision / transformers or onnx.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")

ZOO_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo.py"


@pytest.fixture(scope="module")
def zoo():
    spec = importlib.util.spec_from_file_location("aicc_zoo", ZOO_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _needs(zoo, family):
    # torchvision through the zoo's loader: importing it plainly fails where its C++
    # extension does not load (a RuntimeError, which pytest.importorskip does not catch)
    if importlib.util.find_spec("torchvision") is not None:
        zoo.import_torchvision()
    elif family == "torchvision":
        pytest.skip("torchvision is not installed")
    if family == "transformers":
        pytest.importorskip("transformers")


QUICK = ["resnet18", "bert", "gpt2", "vit"]


@pytest.mark.parametrize("frontend", ["torch", "onnx"])
@pytest.mark.parametrize("name", QUICK)
def test_zoo_quick(zoo, name, frontend):
    spec = zoo.SPECS[name]
    _needs(zoo, spec.family)
    (row,) = zoo.run_model(spec, quick=True, frontends=(frontend,), threads=1, time_it=False)
    assert row.get("compiled"), row.get("why")
    assert row.get("ok"), row.get("why")
    assert row["kernels"] > 0
    assert row["max_err"] < 1e-3


def test_zoo_reports_a_failure_as_a_row(zoo):
    """A model that cannot be built is a row saying why, for every frontend."""

    def broken(quick):
        raise ValueError("no such weights")

    rows = zoo.run_model(zoo.Spec("broken", "none", broken), quick=True, time_it=False)
    assert [r["frontend"] for r in rows] == ["torch", "onnx"]
    assert all(not r["compiled"] and "building the model: ValueError: no such weights" in r["why"] for r in rows)
    table = zoo.table(rows)
    assert table.count("| broken |") == 2 and "no such weights" in table


def test_zoo_compare_is_relative_to_the_output_scale(zoo):
    import numpy as np

    want = [np.array([100.0, -50.0, 0.0], np.float32)]
    ok, err, _ = zoo.compare([want[0] + np.float32(5e-3)], want)  # 5e-5 of the scale
    assert ok and err == pytest.approx(5e-5, rel=1e-2)
    ok, _, why = zoo.compare([want[0] + np.float32(0.5)], want)
    assert not ok and "max err" in why
    ok, _, why = zoo.compare([want[0][:2]], want)
    assert not ok and "shape" in why


def test_zoo_llama_exports_to_onnx_with_a_vmap_free_mask(zoo):
    """transformers builds LLaMA's mask with torch.vmap, which the TorchScript exporter
    cannot trace; the zoo exports it with transformers' vmap-free SDPA mask. The model so
    exported computes what the module does (checked with ONNX Runtime, cheaply: aicc on it is
    the zoo's llama onnx row), and the module keeps its own attention implementation."""
    ort = pytest.importorskip("onnxruntime")
    spec = zoo.SPECS["llama"]
    _needs(zoo, spec.family)
    assert spec.onnx_attn == "sdpa_without_vmap"
    module, inputs = spec.build(True)
    before = module.model.config._attn_implementation
    proto = zoo.to_onnx(module, inputs, spec.onnx_attn)
    assert module.model.config._attn_implementation == before
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), inputs)})
    import torch

    with torch.no_grad():
        want = zoo.outputs_of(module(*inputs))
    ok, _, why = zoo.compare(got, want)
    assert ok, why
