"""benchmarks/peer_isa.py: the peers restricted to their AVX2 kernels (`--peer-isa avx2`).

The ONNX Runtime copy is checked by what its kernels compute, not by a timing: MLAS's AVX2
u8s8 int8 GEMM saturates int16 pair sums (255 * 127 * 2 > 32767), its VNNI one does not.
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

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 kernels")


@pytest.fixture(scope="module")
def peer_isa():
    spec = importlib.util.spec_from_file_location("benchmarks_peer_isa", ROOT / "benchmarks" / "peer_isa.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _needs_onnxruntime():
    for package in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")


def test_patch_library(peer_isa, tmp_path):
    """Every copy of the jump is made a 6-byte no-op and nothing else changes; a library
    without it is left as it was."""
    site1 = bytes.fromhex("f7 c7 00 00 01 00 74 0e 4c 89 d0 48 f7 d0 a8 e0")  # test ..., %edi
    site2 = bytes.fromhex("f7 c2 00 00 01 00 74 0e 4c 89 d0 48 f7 d0 a8 e0")  # test ..., %edx
    jump = bytes.fromhex("0f 84 ef 00 00 00")

    def library(j1, j2):
        return b"\x90" * 7 + site1 + j1 + b"\xcc" * 5 + site2 + j2 + b"\xc3"

    data = library(jump, jump)
    lib = tmp_path / "lib.so"
    lib.write_bytes(data)
    assert peer_isa.patch_library(lib) == 2
    assert lib.read_bytes() == library(peer_isa.NOP6, peer_isa.NOP6)
    other = tmp_path / "other.so"
    other.write_bytes(data.replace(b"\xa8\xe0", b"\xa8\xe1"))  # test $0xe1: not MLAS's check
    assert peer_isa.patch_library(other) == 0
    assert other.read_bytes() == data.replace(b"\xa8\xe0", b"\xa8\xe1")


def test_peer_env(peer_isa):
    assert peer_isa.peer_env("host") == {}
    with pytest.raises(peer_isa.PeerIsaError, match="unknown peer ISA 'sse'"):
        peer_isa.peer_env("sse")


def test_onnxruntime_avx2_runs_the_avx2_int8_kernel(peer_isa, tmp_path, monkeypatch):
    """The copy's int8 GEMM saturates as MLAS's AVX2 kernel does (on a host with VNNI the
    installed package gives the exact sum), or is exact where the host has AVX-VNNI (MLAS's
    AVX2 level then takes that kernel); the copy is made once and found again."""
    _needs_onnxruntime()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    site = peer_isa.onnxruntime_avx2()
    assert site.is_relative_to(tmp_path) and int((site / "ok").read_text().split()[0]) >= 1
    assert peer_isa.check_onnxruntime(site) == peer_isa.avx2_int8_sum()
    assert peer_isa.check_onnxruntime(None) in (peer_isa.SATURATED, peer_isa.EXACT)
    assert peer_isa.onnxruntime_avx2() == site
    # torch.compile's cache: a directory of the restricted peers' own (its keys miss the ISA)
    env = peer_isa.peer_env("avx2")
    assert env[peer_isa.INDUCTOR_CACHE_ENV] == str(tmp_path / "aicc-bench" / "torchinductor-avx2")
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["PYTHONPATH"].startswith(str(site))


def test_run_with_avx2_peers(tmp_path):
    """`benchmarks/run.py --peer-isa avx2`: the run says which kernels its peers ran."""
    _needs_onnxruntime()
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--only", "softmax",
           "--threads", "1", "--budget", "0.01", "--peers", "onnxruntime", "--clock", "thread",
           "--peer-isa", "avx2", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((tmp_path / "cpu.json").read_text())
    assert "their AVX2 kernels" in results["peers_isa"]
    [row] = results["runs"]["1"]
    assert row["peers"]["onnxruntime"]["max_scaled_err"] < 1e-4
    assert "ONNX Runtime with MLAS's AVX-512 set-up skipped" in (tmp_path / "cpu.md").read_text()


def _onnxruntime_avx2_run(peer_isa, model, feeds: dict, tmp_path: Path):
    """The model's first output from the ONNX Runtime copy on its AVX2 kernels, one thread,
    in a process of its own (the copy must come first on its path)."""
    import numpy as np
    import onnx

    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = ("import sys, numpy as np, onnxruntime as ort\n"
            "so = ort.SessionOptions(); so.intra_op_num_threads = 1\n"
            "s = ort.InferenceSession(sys.argv[1] + '/m.onnx', so, providers=['CPUExecutionProvider'])\n"
            "np.save(sys.argv[1] + '/out.npy', s.run(None, dict(np.load(sys.argv[1] + '/feeds.npz')))[0])\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                   env=peer_isa.site_env(peer_isa.onnxruntime_avx2()), check=True)
    return np.load(tmp_path / "out.npy")


def _int8_models(rng):
    """A MatMulInteger (u8 A with a zero point, s8 B, odd sizes) and a QLinearConv (3x3, pad 1,
    per-channel weight scales, an int32 bias), their weights over the whole int8 range and
    their inputs with rows of 255 (pair sums past int16)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def model(node, x, out_type, inits):
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))],
                              [helper.make_tensor_value_info("y", out_type, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)

    a = rng.integers(0, 256, (37, 129), dtype=np.uint8)
    a[:4] = 255
    mm = model(helper.make_node("MatMulInteger", ["x", "b", "az"], ["y"]), a, TensorProto.INT32,
               {"b": rng.integers(-128, 128, (129, 45), dtype=np.int8), "az": np.uint8(117)})
    x = rng.integers(0, 256, (2, 13, 9, 9), dtype=np.uint8)
    x[0] = 255
    conv = model(helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                                  pads=[1, 1, 1, 1]), x, TensorProto.UINT8,
                 {"xs": np.float32(0.02), "xz": np.uint8(120),
                  "w": rng.integers(-128, 128, (24, 13, 3, 3), dtype=np.int8),
                  "ws": rng.uniform(0.005, 0.02, 24).astype(np.float32), "wz": np.zeros(24, np.int8),
                  "ys": np.float32(0.5), "yz": np.uint8(128),
                  "b": rng.integers(-1000, 1000, 24).astype(np.int32)})
    return [("MatMulInteger", mm, a), ("QLinearConv", conv, x)]


def test_int8_saturation_is_onnx_runtimes_avx2_kernel_bit_for_bit(peer_isa, tmp_path, monkeypatch):
    """aicc's code for a CPU without VNNI with `int8_saturation=True` gives ONNX Runtime's AVX2
    int8 results bit for bit, saturated pair sums included (issue 16: "matching ONNX Runtime's
    integer results, its rounding and saturation rules"); exact sums differ from them. On a host
    with AVX-VNNI, MLAS's AVX2 level runs its exact AVX-VNNI kernel: aicc's exact results are
    then ONNX Runtime's bit for bit, and the saturating ones differ."""
    _needs_onnxruntime()
    import numpy as np

    import compiler

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name, model, x in _int8_models(np.random.default_rng(0)):
        ort = _onnxruntime_avx2_run(peer_isa, model, {"x": x}, tmp_path)
        saturating = np.asarray(compiler.compile(model, (x,), target_cpu="x86-64-v3", int8_saturation=True)(x))
        exact = np.asarray(compiler.compile(model, (x,), target_cpu="x86-64-v3")(x))
        if peer_isa.host_has_avx_vnni():  # MLAS's AVX2 level runs its exact AVX-VNNI kernel
            assert (saturating != ort).sum() > x.shape[-1], name
            np.testing.assert_array_equal(exact, ort, err_msg=name)
            continue
        assert (exact != ort).sum() > x.shape[-1], name  # the check sees saturation
        np.testing.assert_array_equal(saturating, ort, err_msg=name)
