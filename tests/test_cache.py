"""The persistent compile cache (compiler/cache.py, compile_module's use of it): hits across
calls and processes with identical results, keys that change with everything that changes the
code, damaged entries detected and rebuilt, concurrent writers, and `aicc cache`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler import cache

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(0)
W1 = rng.standard_normal((96, 200)).astype(np.float32)
B1 = rng.standard_normal(200).astype(np.float32)
W2 = rng.standard_normal((200, 10)).astype(np.float32)
X = rng.standard_normal((7, 96)).astype(np.float32)


def mlp(x):
    return np.tanh(np.maximum(x @ W1 + B1, 0.0) @ W2)


def reference(x):
    return np.tanh(np.maximum(x.astype(np.float64) @ W1 + B1, 0.0) @ W2)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "1")
    monkeypatch.setenv("AICC_CACHE_DIR", str(tmp_path))
    return tmp_path


def entries(root: Path) -> list[Path]:
    return sorted((root / "model").rglob("*.aicc"))


def test_second_compile_is_a_hit_with_identical_results(store):
    cold = compiler.compile(mlp, (X,), threads=1)
    warm = compiler.compile(mlp, (X,), threads=1)
    assert cold.stats["cache"] == "stored" and warm.stats["cache"] == "hit"
    assert [t.name for t in warm.timings] == ["cache-load"]
    np.testing.assert_array_equal(warm(X), cold(X))
    np.testing.assert_allclose(warm(X), reference(X), rtol=1e-4, atol=1e-5)
    assert warm.stats["kernels"] == cold.stats["kernels"]
    assert len(entries(store)) == 1
    # a hit keeps no IR: asking for a stage compiles again, without the cache
    assert warm.ir("loops") == cold.ir("loops")
    assert "vfmadd" in warm.ir("asm") or "fma" in warm.ir("asm")


def test_a_hit_loads_its_code_on_first_use(store):
    cold = compiler.compile(mlp, (X,))
    assert cold.stats["kernels_loaded"] == cold.stats["kernels"] > 0
    warm = compiler.compile(mlp, (X,))
    assert warm.stats["cache"] == "hit" and warm.stats["kernels_loaded"] == 0
    assert not warm.executable.loaded  # nothing linked into MCJIT yet
    warm.threads = 1
    np.testing.assert_array_equal(warm(X), cold(X))
    assert warm.executable.loaded and warm.threads == 1
    assert warm.stats["kernels_loaded"] == cold.stats["kernels"]


def test_an_entry_that_fails_to_load_is_discarded_and_compiled_anew(store, monkeypatch):
    from compiler.targets.cpu import CPUTarget

    cold = compiler.compile(mlp, (X,))
    assert len(entries(store)) == 1

    def refuse(*args, **kwargs):
        raise RuntimeError("an object this LLVM cannot link")

    monkeypatch.setattr(CPUTarget, "load_executable", refuse)
    warm = compiler.compile(mlp, (X,))
    assert warm.stats["cache"] == "hit"
    np.testing.assert_array_equal(warm(X), cold(X))
    assert entries(store) == []


def test_the_key_changes_with_what_changes_the_code(store, monkeypatch):
    base = compiler.compile(mlp, (X,), threads=1)
    assert base.stats["cache"] == "stored"

    def other_weights(x):
        return np.tanh(np.maximum(x @ (W1 * 2) + B1, 0.0) @ W2)

    misses = [
        compiler.compile(other_weights, (X,), threads=1),
        compiler.compile(mlp, (X[:3],), threads=1),  # another shape
        compiler.compile(mlp, (X,), threads=2),
        compiler.compile(mlp, (X,), threads=1, fuse=False),
        compiler.compile(mlp, (X,), threads=1, schedule={"mr": 4}),
        compiler.compile(mlp, (X,), threads=1, target_cpu="x86-64-v3"),
    ]
    # every environment knob of the passes
    for env, value in (("AICC_CONV_LOWERING", "direct"), ("AICC_CONV_WINOGRAD", "0"),
                       ("AICC_CONV_PACKED", "0"), ("AICC_CONV_PACKED_1X1", "0"),
                       ("AICC_CONV_SCHEDULE", "owb=4"), ("AICC_WINDOW_INNER", "0"),
                       ("AICC_COLLAPSE", "0")):
        monkeypatch.setenv(env, value)
        misses.append(compiler.compile(mlp, (X,), threads=1))
    assert [m.stats["cache"] for m in misses] == ["stored"] * len(misses)
    np.testing.assert_allclose(misses[0](X), np.tanh(np.maximum(X @ (W1 * 2) + B1, 0) @ W2),
                               rtol=1e-4, atol=1e-4)
    assert len(entries(store)) == 1 + len(misses)


def test_cache_off(store, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "0")
    m = compiler.compile(mlp, (X,), threads=1)
    assert m.stats["cache"] == "off" and entries(store) == []
    # printing IR after every pass needs the passes: no cache either
    monkeypatch.setenv("AICC_CACHE", "1")
    m = compiler.compile(mlp, (X,), threads=1, print_ir_after_all=lambda name, module: None)
    assert m.stats["cache"] == "off" and entries(store) == []


@pytest.mark.parametrize("damage", ["truncate", "flip-blob", "flip-header", "garbage", "empty"])
def test_a_damaged_entry_is_detected_and_rebuilt(store, damage):
    first = compiler.compile(mlp, (X,), threads=1)
    (path,) = entries(store)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:len(data) * 2 // 3]
    elif damage == "flip-blob":
        data[-100] ^= 0x40
    elif damage == "flip-header":
        data[20] ^= 0x01
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    again = compiler.compile(mlp, (X,), threads=1)
    assert again.stats["cache"] == "stored"  # not loaded: compiled and stored anew
    np.testing.assert_array_equal(again(X), first(X))
    assert compiler.compile(mlp, (X,), threads=1).stats["cache"] == "hit"


def test_an_unwritable_cache_folder_is_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AICC_CACHE", "1")
    monkeypatch.setenv("AICC_CACHE_DIR", str(blocker))
    m = compiler.compile(mlp, (X,), threads=1)
    assert m.stats["cache"] == "unwritable"
    np.testing.assert_allclose(m(X), reference(X), rtol=1e-4, atol=1e-5)


def test_store_round_trip_and_alignment(tmp_path):
    c = cache.CompileCache("test", tmp_path)
    blobs = {"b": b"xyz", "a": np.arange(1000, dtype=np.float64), "c": b""}
    assert c.put("k" * 40, {"n": 3}, blobs)
    e = c.get("k" * 40)
    assert e.meta == {"n": 3} and bytes(e.blobs["b"]) == b"xyz" and bytes(e.blobs["c"]) == b""
    a = e.array("a", "<f8", (10, 100))
    np.testing.assert_array_equal(a.reshape(-1), blobs["a"])
    assert a.ctypes.data % 64 == 0
    assert c.get("missing" * 6) is None


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import compiler
    rng = np.random.default_rng(1)
    w = rng.standard_normal((256, 512)).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    x = rng.standard_normal((33, 256)).astype(np.float32)
    def model(x):
        return np.maximum(x @ w + b, 0.0) * 0.5
    m = compiler.compile(model, (x,), threads=1)
    np.save(sys.argv[1], m(x))
    print(m.stats["cache"])
""")


def _run(script: Path, out: Path, store: Path) -> subprocess.Popen:
    env = dict(os.environ, AICC_CACHE="1", AICC_CACHE_DIR=str(store), AICC_NUM_THREADS="1",
               PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, str(script), str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_three_processes_compiling_one_model_at_once(tmp_path):
    """Concurrent writers of one entry: every process gets the right answer, the entry is
    whole afterwards, and a later process loads it."""
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    store = tmp_path / "store"
    procs = [_run(script, tmp_path / f"out{i}.npy", store) for i in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.strip() in ("stored", "hit")
    later = _run(script, tmp_path / "later.npy", store)
    out, err = later.communicate(timeout=300)
    assert later.returncode == 0 and out.strip() == "hit", err
    ref = np.load(tmp_path / "out0.npy")
    for name in ("out1.npy", "out2.npy", "later.npy"):
        np.testing.assert_array_equal(np.load(tmp_path / name), ref)
    assert len(list(store.rglob("*.aicc"))) == 1
    assert not list(store.rglob("*.tmp"))  # no temporary file left behind


def test_aicc_cache_info_and_clear(store):
    compiler.compile(mlp, (X,), threads=1)
    env = dict(os.environ, AICC_CACHE_DIR=str(store))

    def aicc(*args):
        return subprocess.run([sys.executable, "-m", "tools.aicc", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    r = aicc("cache", "info")
    assert r.returncode == 0 and str(store) in r.stdout and "model" in r.stdout and "1 entries" in r.stdout
    r = aicc("cache", "clear")
    assert r.returncode == 0 and "removed 1" in r.stdout
    assert entries(store) == []
    assert "empty" in aicc("cache", "info").stdout
    r = aicc("cache", "purge")
    assert r.returncode == 2 and r.stderr.startswith("aicc: error:")
