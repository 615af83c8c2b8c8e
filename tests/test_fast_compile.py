"""Fast cold compiles on the cpu target: loop nests that are the same code compiled once
(compared by structure, never by name), and the LLVM module compiled as partitions in
parallel threads, linked in one MCJIT engine, stored whole in the compile cache."""

from __future__ import annotations

import io
import re
import time

import llvmlite.binding as llvm
import numpy as np
import pytest

import compiler
from compiler.progress import PROGRESS_ENV, Progress, progress_wanted
from compiler.targets.cpu.partition import refs, split_module

rng = np.random.default_rng(0)
N = 192
WS = [(rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32) for _ in range(4)]
W_NARROW = (rng.standard_normal((N, 128)) / np.sqrt(N)).astype(np.float32)
X = rng.standard_normal((N, N)).astype(np.float32)


def repeated(x):
    """Four identical layers but for their weights."""
    for w in WS:
        x = np.tanh(x @ w)
    return x


def mixed(x):
    """Two identical layers, then one of another shape."""
    x = np.tanh(x @ WS[0])
    x = np.tanh(x @ WS[1])
    return np.tanh(x @ W_NARROW)


@pytest.fixture(autouse=True)
def _fixed_caches(monkeypatch):
    """The nests counted here, how many are outlined and which are the same code, follow the
    matmul's cache blocking, and that follows the target's caches (the host's): with a Zen 4's
    1 MiB L2 the three layers of `mixed` share one outlined nest. Fixed caches (32 KiB L1,
    512 KiB L2) make the counts the same on every host."""
    from compiler.targets.cpu import machine

    monkeypatch.setattr(machine, "host_cache_bytes", lambda: (32 * 1024, 512 * 1024))
    machine._cpu_machine.cache_clear()
    yield
    machine._cpu_machine.cache_clear()


def reference(fn, x):
    x = x.astype(np.float64)
    for w in (WS if fn is repeated else [WS[0], WS[1], W_NARROW]):
        x = np.tanh(x @ w)
    return x


def defined(text: str) -> list[str]:
    return re.findall(r'^define [^@]*@"([^"]+)"', text, re.M)


def test_repeated_layers_compile_one_kernel():
    m = compiler.compile(repeated, (X,), threads=1)
    assert m.stats["kernels"] == 4
    assert m.stats["llvm_kernels"] == 4
    assert m.stats["kernels_compiled"] == 1
    np.testing.assert_allclose(m(X), reference(repeated, X), rtol=1e-4, atol=1e-5)
    # one chunk function, called with each layer's weights
    text = m.ir("llvm")
    chunks = [f for f in defined(text) if re.fullmatch(r"repeated\.par\d+", f)]
    assert len(chunks) == 1
    assert len(re.findall(rf'@"{re.escape(chunks[0])}"', text)) == 1 + 4  # its definition, 4 uses


def test_kernels_of_another_shape_stay_apart():
    m = compiler.compile(mixed, (X,), threads=1)
    assert m.stats["llvm_kernels"] == 3
    assert m.stats["kernels_compiled"] == 2
    np.testing.assert_allclose(m(X), reference(mixed, X), rtol=1e-4, atol=1e-5)


def test_shared_kernel_on_threads_computes_the_same():
    """Threads or not, the deduplicated program computes what one compiled per layer does."""
    m1 = compiler.compile(repeated, (X,), threads=1)
    m2 = compiler.compile(repeated, (X,), threads=2)
    np.testing.assert_array_equal(m1(X), m2(X))


@pytest.fixture
def small_partitions(monkeypatch):
    """Partitions however small the module (by default a small one stays whole)."""
    from compiler.targets.cpu import runtime

    monkeypatch.setattr(runtime, "MIN_PART_CHARS", 1)


def test_partitions_give_the_same_code_as_one_module(monkeypatch, small_partitions):
    monkeypatch.setenv("AICC_COMPILE_JOBS", "1")
    one = compiler.compile(mixed, (X,), threads=1)
    monkeypatch.setenv("AICC_COMPILE_JOBS", "3")
    parts = compiler.compile(mixed, (X,), threads=1)
    assert one.stats["llvm_partitions"] == 1
    assert parts.stats["llvm_partitions"] >= 2
    np.testing.assert_array_equal(one(X), parts(X))
    # m.ir("llvm") is still the whole model as one module, the same text either way (but for
    # the weights' symbols, numbered per process)
    data = re.compile(r"aicc\.data\.\d+\.")
    assert data.sub("", parts.ir("llvm")) == data.sub("", one.ir("llvm"))
    llvm.parse_assembly(parts.ir("llvm")).verify()
    # the optimized partitions link into one module; assembly and one object come from it
    llvm.parse_assembly(parts.executable.optimized_ir).verify()
    asm = parts.ir("asm")
    for name in defined(parts.ir("llvm")):
        if not name.endswith(".body"):  # bodies are inlined into their chunk functions
            assert re.search(rf"^\"?{re.escape(name)}\"?:", asm, re.M), name
    assert parts.executable.object_code()[:4] == b"\x7fELF"
    assert len(parts.executable.object_codes()) == parts.stats["llvm_partitions"]


def test_split_module_defines_every_function_once():
    m = compiler.compile(mixed, (X,), threads=1)
    text = m.ir("llvm")
    whole = defined(text)
    pieces = split_module(text, 4)
    assert len(pieces) >= 2
    seen: list[str] = []
    for piece in pieces:
        llvm.parse_assembly(piece).verify()
        names = defined(piece)
        seen += names
        # an internal function is defined wherever it is used
        for f in re.findall(r'^define internal [^@]*@"([^"]+)"', text, re.M):
            if any(f in refs(b) for b in piece.split("\ndefine")[1:]):
                assert f in names, f
    assert sorted(seen) == sorted(whole)
    assert split_module(text, 1) == [text]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "1")
    monkeypatch.setenv("AICC_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_cache_entry_holds_every_partition(store, monkeypatch, small_partitions):
    monkeypatch.setenv("AICC_COMPILE_JOBS", "3")
    cold = compiler.compile(mixed, (X,), threads=1)
    assert cold.stats["cache"] == "stored" and cold.stats["llvm_partitions"] >= 2
    warm = compiler.compile(mixed, (X,), threads=1)
    assert warm.stats["cache"] == "hit"
    assert warm.stats["kernels_compiled"] == cold.stats["kernels_compiled"]
    np.testing.assert_array_equal(warm(X), cold(X))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_one_line_per_stage_on_a_terminal_only(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    term = _Terminal()
    with Progress(term, after=0.0) as p:
        time.sleep(0.2)  # the display opens once the compile has run `after` seconds
        for stage, steps in (("tensor", 3), ("linalg", 2), ("codegen", 1)):
            p.stage(stage, steps)
            for i in range(steps):
                p.step(f"pass{i}")
    lines = [chunk.split("\r")[-1] for chunk in term.getvalue().split("\n") if chunk.strip()]
    assert [line.split("|")[0].strip() for line in lines] == ["tensor", "linalg", "codegen"]
    assert all(re.search(r"(\d+)/\1, \d+\.\d s$", line) for line in lines), lines
    # not a terminal, turned off, or a compile that ends in time: nothing at all
    quiet = io.StringIO()
    with Progress(quiet, after=0.0) as p:
        p.stage("tensor", 1)
        p.step()
    assert quiet.getvalue() == ""
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert not progress_wanted(_Terminal())
    monkeypatch.delenv(PROGRESS_ENV)
    fast = _Terminal()
    with Progress(fast, after=60.0) as p:
        p.stage("tensor", 1)
        p.step()
    assert fast.getvalue() == ""


def many_nests(n: int, width: int = 8) -> str:
    """n small top-level loop nests: out[k, i] = a[i] * (k + 1) + k."""
    t, o = f"memref<{width}xf32>", f"memref<{n}x{width}xf32>"
    nests = []
    for k in range(n):
        nests.append(f"""
  %k{k} = arith.constant {k} : index
  %m{k} = arith.constant {float(k + 1)} : f32
  %b{k} = arith.constant {float(k)} : f32
  "scf.parallel"(%c0, %cw, %c1) <{{operandSegmentSizes = array<i32: 1, 1, 1, 0>}}> ({{
  ^bb0(%i: index):
    %x = memref.load %a[%i] : {t}
    %y = arith.mulf %x, %m{k} : f32
    %z = arith.addf %y, %b{k} : f32
    memref.store %z, %out[%k{k}, %i] : {o}
    scf.reduce
  }}) : (index, index, index) -> ()""")
    return f"""
func.func @many(%a: {t}, %out: {o}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cw = arith.constant {width} : index{"".join(nests)}
  func.return
}}"""


@pytest.mark.parametrize("extra", [0, 1])
def test_a_function_of_many_small_loop_nests_outlines_them(extra):
    """Past OUTLINE_ALL_MIN_NESTS top-level loop nests, every one becomes a function of its
    own called directly (no threads: they are small), so that LLVM never optimizes one huge
    caller (DenseNet-121's 844 nests cost 113 s of O3 inline); at the limit they stay inline."""
    from xdsl.parser import Parser

    from compiler.codegen.llvm import LLVMEmitter
    from compiler.codegen.llvm.emitter import OUTLINE_ALL_MIN_NESTS
    from compiler.pipeline import make_context
    from compiler.targets.cpu.runtime import CPUExecutable

    n = OUTLINE_ALL_MIN_NESTS + extra
    module = Parser(make_context(), many_nests(n)).parse_module()
    em = LLVMEmitter()
    text = str(em.emit(module))
    chunks = [f for f in defined(text) if re.fullmatch(r"many\.par\d+", f)]
    assert "aicc_parallel_for" not in text
    if extra:
        assert em.outlined == n and len(chunks) == n
        assert len(re.findall(r'call void @"many\.par\d+"\(', text)) == n
    else:
        assert em.outlined == 0 and not chunks
    a = np.linspace(-1, 1, 8, dtype=np.float32)
    out = np.zeros((n, 8), np.float32)
    CPUExecutable(text, threads=1).get("many", 2)(a, out)
    k = np.arange(n, dtype=np.float32)[:, None]
    np.testing.assert_allclose(out, a * (k + 1) + k, rtol=1e-6)
    # outlining stays off where the emitter is told not to outline serial loops
    text = str(LLVMEmitter(outline_serial=False).emit(Parser(make_context(), many_nests(n)).parse_module()))
    assert not [f for f in defined(text) if re.fullmatch(r"many\.par\d+", f)]
