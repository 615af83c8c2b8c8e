"""compiler/targets/cpu/runtime.py: O3 + MCJIT, vectorization, parallel loops on the thread pool."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from xdsl.dialects import builtin, scf
from xdsl.parser import Parser

from compiler.codegen.llvm import PARALLEL_MIN_WORK, LLVMEmitter, emit_llvm
from compiler.codegen.llvm.emitter import _trip, parallel_work
from compiler.targets.cpu import runtime as cpu
from compiler.pipeline import make_context
from compiler.targets.cpu.machine import cpu_machine
from compiler.targets.cpu.runtime import CPUExecutable, target_machine


def parse(text: str) -> builtin.ModuleOp:
    return Parser(make_context(), text).parse_module()


def exp_fma_kernel(n: int) -> str:
    """a[i] = exp(b[i] * c[i] + d[i])"""
    t = f"memref<{n}xf32>"
    return f"""
func.func @k(%a: {t}, %b: {t}, %c: {t}, %d: {t}) {{
  %c0 = arith.constant 0 : index
  %cn = arith.constant {n} : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %b[%i] : {t}
    %y = memref.load %c[%i] : {t}
    %z = memref.load %d[%i] : {t}
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %z : f32
    %e = math.exp %s : f32
    memref.store %e, %a[%i] : {t}
  }}
  func.return
}}"""


def parallel_kernel(m: int, n: int) -> str:
    """2-D scf.parallel: out[i, j] = tanh(a[i, j]) * s + i (captures a pointer, a scalar
    computed outside the loop and the loop's own induction variables)."""
    t = f"memref<{m}x{n}xf32>"
    return f"""
func.func @p(%a: {t}, %out: {t}, %scale: memref<f32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cm = arith.constant {m} : index
  %cn = arith.constant {n} : index
  %s = memref.load %scale[] : memref<f32>
  "scf.parallel"(%c0, %c0, %cm, %cn, %c1, %c1) <{{operandSegmentSizes = array<i32: 2, 2, 2, 0>}}> ({{
  ^bb0(%i: index, %j: index):
    %x = memref.load %a[%i, %j] : {t}
    %y = math.tanh %x : f32
    %z = arith.mulf %y, %s : f32
    %ii = arith.index_cast %i : index to i64
    %fi = arith.sitofp %ii : i64 to f32
    %w = arith.addf %z, %fi : f32
    memref.store %w, %out[%i, %j] : {t}
    scf.reduce
  }}) : (index, index, index, index, index, index) -> ()
  func.return
}}"""


def test_target_machine_is_host_and_cached():
    tm = target_machine(cpu_machine("host"))
    assert tm is target_machine(cpu_machine("host"))
    assert "x86_64" in tm.triple or tm.triple


def test_vectorized_exp_loop_and_asm():
    ex = CPUExecutable(emit_llvm(parse(exp_fma_kernel(1 << 20))), threads=1)
    assert re.search(r"<(16|8) x float>", ex.optimized_ir), ex.optimized_ir[:2000]
    # No scalar libm call survives: exp is inline polynomial code.
    assert "@expf" not in ex.optimized_ir and "llvm.exp." not in ex.optimized_ir
    asm = ex.asm()
    assert "zmm" in asm or "ymm" in asm
    assert len(ex.object_code()) > 0
    n = 1 << 20
    rng = np.random.default_rng(0)
    b, c, d = (rng.standard_normal(n, np.float32) for _ in range(3))
    a = np.empty(n, np.float32)
    ex.get("k", 4)(a, b, c, d)
    ref = np.exp(b.astype(np.float64) * c + d)
    np.testing.assert_allclose(a, ref, rtol=1e-6)


def test_get_checks_arguments():
    ex = CPUExecutable(emit_llvm(parse(exp_fma_kernel(8))), threads=1)
    f = ex.get("k", 4)
    assert ex.get("k", 4) is f
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError):
        f(x, x, x)
    with pytest.raises(ValueError):
        f(np.zeros(16, np.float32)[::2], x, x, x)
    with pytest.raises(KeyError):
        ex.get("nope", 1)


def test_parallel_loop_is_outlined_and_threads_agree():
    m, n = 256, 1024
    text = parallel_kernel(m, n)
    ir_text = emit_llvm(parse(text))
    assert "@p.par0" in ir_text.replace('"', "")
    assert "aicc_parallel_for" in ir_text
    ex = CPUExecutable(ir_text, threads=1)
    a = np.random.default_rng(2).uniform(-3, 3, (m, n)).astype(np.float32)
    scale = np.array(1.5, np.float32)
    out1, out2 = np.zeros_like(a), np.zeros_like(a)
    f = ex.get("p", 3)
    f(a, out1, scale)
    ex.threads = 2
    f(a, out2, scale)
    np.testing.assert_array_equal(out1, out2)
    ref = np.tanh(a.astype(np.float64)) * 1.5 + np.arange(m)[:, None]
    np.testing.assert_allclose(out1, ref, rtol=1e-6, atol=2e-6)
    # The chunk body still vectorizes (captured pointers keep noalias through the body fn).
    assert re.search(r"<(16|8) x float>", ex.optimized_ir)


def test_parallel_leading_dims_flattened():
    """A loop of one image (a leading dim of one trip) is shared by the threads all the same:
    they take chunks of its leading dims flattened (here 1 x 5 x 3, the second at lower bound
    2 and step 2), the last dim staying the inner loop."""
    n = 40
    t = f"memref<1x12x3x{n}xf32>"
    text = f"""
func.func @p(%a: {t}, %out: {t}, %scale: memref<f32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c12 = arith.constant 12 : index
  %cn = arith.constant {n} : index
  %s = memref.load %scale[] : memref<f32>
  "scf.parallel"(%c0, %c2, %c0, %c0, %c1, %c12, %c3, %cn, %c1, %c2, %c1, %c1) <{{operandSegmentSizes = array<i32: 4, 4, 4, 0>}}> ({{
  ^bb0(%b: index, %i: index, %j: index, %k: index):
    %x = memref.load %a[%b, %i, %j, %k] : {t}
    %y = math.tanh %x : f32
    %z = arith.mulf %y, %s : f32
    %i1000 = arith.muli %i, %c12 : index
    %ij = arith.addi %i1000, %j : index
    %ii = arith.index_cast %ij : index to i64
    %fi = arith.sitofp %ii : i64 to f32
    %w = arith.addf %z, %fi : f32
    memref.store %w, %out[%b, %i, %j, %k] : {t}
    scf.reduce
  }}) : (index, index, index, index, index, index, index, index, index, index, index, index) -> ()
  func.return
}}"""
    ir_text = str(LLVMEmitter(parallel_min_work=1).emit(parse(text)))
    assert "aicc_parallel_for" in ir_text
    ex = CPUExecutable(ir_text, threads=1)
    a = np.random.default_rng(3).uniform(-3, 3, (1, 12, 3, n)).astype(np.float32)
    scale = np.array(0.5, np.float32)
    ref = np.zeros_like(a, np.float64)
    i, j = np.arange(2, 12, 2)[:, None], np.arange(3)[None, :]
    ref[0, 2:12:2] = np.tanh(a[0, 2:12:2].astype(np.float64)) * 0.5 + (i * 12 + j)[..., None]
    f = ex.get("p", 3)
    for threads in (1, 2, 3, 16):
        ex.threads = threads
        out = np.zeros_like(a)
        f(a, out, scale)
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=2e-6)


def test_parallel_uneven_split_and_more_threads_than_rows():
    m, n = 3, 20000
    ex = CPUExecutable(emit_llvm(parse(parallel_kernel(m, n))), threads=8)
    a = np.random.default_rng(3).uniform(-3, 3, (m, n)).astype(np.float32)
    out = np.zeros_like(a)
    ex.get("p", 3)(a, out, np.array(2.0, np.float32))
    ref = np.tanh(a.astype(np.float64)) * 2 + np.arange(m)[:, None]
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=2e-6)


def test_parallel_inside_for_captures_induction_variable():
    # The outlined loop reads the enclosing scf.for's iv and an i1 computed outside it.
    r, m, n = 3, 64, 1024
    t = f"memref<{r}x{m}x{n}xf32>"
    ex = CPUExecutable(emit_llvm(parse(f"""
func.func @f(%a: {t}, %out: {t}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cr = arith.constant {r} : index
  %cm = arith.constant {m} : index
  %cn = arith.constant {n} : index
  scf.for %k = %c0 to %cr step %c1 {{
    %kk = arith.index_cast %k : index to i64
    %kf = arith.sitofp %kk : i64 to f32
    %odd = arith.cmpi eq, %k, %c1 : index
    {parallel_body(t)}
  }}
  func.return
}}""")), threads=2)
    a = np.random.default_rng(5).standard_normal((r, m, n)).astype(np.float32)
    out = np.zeros_like(a)
    ex.get("f", 2)(a, out)
    k = np.arange(r, dtype=np.float32)[:, None, None]
    ref = np.where(k == 1, a * k, a + k)
    np.testing.assert_array_equal(out, ref)


def parallel_body(t: str) -> str:
    return f""""scf.parallel"(%c0, %c0, %cm, %cn, %c1, %c1) <{{operandSegmentSizes = array<i32: 2, 2, 2, 0>}}> ({{
    ^bb0(%i: index, %j: index):
      %x = memref.load %a[%k, %i, %j] : {t}
      %p = arith.mulf %x, %kf : f32
      %s = arith.addf %x, %kf : f32
      %y = arith.select %odd, %p, %s : f32
      memref.store %y, %out[%k, %i, %j] : {t}
      scf.reduce
    }}) : (index, index, index, index, index, index) -> ()"""


def test_concurrent_callers_share_the_pool():
    import threading

    m, n = 128, 1024
    ex = CPUExecutable(emit_llvm(parse(parallel_kernel(m, n))), threads=2)
    f = ex.get("p", 3)
    a = np.random.default_rng(6).uniform(-3, 3, (m, n)).astype(np.float32)
    ref = np.zeros_like(a)
    f(a, ref, np.array(1.0, np.float32))
    errors = []

    def worker():
        out = np.zeros_like(a)
        for _ in range(20):
            out[:] = 0
            f(a, out, np.array(1.0, np.float32))
            if not np.array_equal(out, ref):
                errors.append(1)

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def kernel_loop_is_parallel(m, kernel: str, trips: int = 0) -> bool:
    """Does compiled model `m` run the top-level scf.parallel that calls `kernel` (an aicc_cpu
    op) on threads: is its estimated work (the emitter's parallel_work) at least
    PARALLEL_MIN_WORK? With `trips`, the loop also has that many iterations, fewer than
    PARALLEL_MIN_WORK (so that one op a call would have kept it serial)."""
    loops = [op for op in parse(m.ir("loops")).walk() if isinstance(op, scf.ParallelOp)
             and any(o.name == kernel for o in op.walk())]
    assert len(loops) == 1, f"{len(loops)} scf.parallel loops call {kernel}"
    loop = loops[0]
    n = 1
    for bounds in zip(loop.lowerBound, loop.upperBound, loop.step):
        n *= _trip(*bounds)
    assert not trips or (n == trips and trips < PARALLEL_MIN_WORK), n
    return parallel_work(loop) >= PARALLEL_MIN_WORK


def test_small_parallel_loop_stays_serial():
    ir_text = emit_llvm(parse(parallel_kernel(4, 4)))
    assert "aicc_parallel_for" not in ir_text
    ex = CPUExecutable(ir_text, threads=2)
    a = np.ones((4, 4), np.float32)
    out = np.zeros_like(a)
    ex.get("p", 3)(a, out, np.array(1.0, np.float32))
    np.testing.assert_allclose(out, np.tanh(1.0) + np.zeros((4, 4)) + np.arange(4)[:, None],
                               rtol=1e-6)
    # A lower threshold outlines it.
    assert "aicc_parallel_for" in str(LLVMEmitter(parallel_min_work=1).emit(
        parse(parallel_kernel(4, 4))))
    assert PARALLEL_MIN_WORK >= 1 << 10


def test_threads_default_from_env(monkeypatch):
    monkeypatch.setenv("AICC_NUM_THREADS", "3")
    assert cpu.default_threads() == 3
    ex = CPUExecutable(emit_llvm(parse(exp_fma_kernel(8))))
    assert ex.threads == 3
    monkeypatch.delenv("AICC_NUM_THREADS")
    assert cpu.default_threads() >= 1


def test_invalid_ir_is_runtime_error():
    with pytest.raises(RuntimeError):
        CPUExecutable("define void @f() { ret i32 0 }")


def test_exp_timing_vs_numpy(capsys):
    """Not an assertion on time: prints the single-thread exp throughput next to NumPy's."""
    n = 1 << 24
    t = f"memref<{n}xf32>"
    ex = CPUExecutable(emit_llvm(parse(f"""
func.func @e(%a: {t}, %b: {t}) {{
  %c0 = arith.constant 0 : index
  %cn = arith.constant {n} : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : {t}
    %y = math.exp %x : f32
    memref.store %y, %b[%i] : {t}
  }}
  func.return
}}""")), threads=1)
    f = ex.get("e", 2)
    a = np.random.default_rng(4).uniform(-20, 20, n).astype(np.float32)
    b = np.empty_like(a)
    r = np.empty_like(a)

    def best(fn):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    ta = best(lambda: f(a, b))
    tn = best(lambda: np.exp(a, out=r))
    with capsys.disabled():
        print(f"\nexp over 16M f32: aicc {ta * 1e3:.1f} ms, numpy {tn * 1e3:.1f} ms, "
              f"ratio {tn / ta:.2f}x")
    np.testing.assert_allclose(b, r, rtol=1e-6)


@pytest.mark.parametrize("nbytes", [1, 100, (2 << 20) - 1, 2 << 20, (5 << 20) + 3])
def test_arena_alignment_and_size(nbytes):
    # plan-memory's workspace: 64-byte aligned, and from 2 MiB on aligned to 2 MiB (a huge
    # page) so that madvise(MADV_HUGEPAGE) can back it with huge pages; writable end to end.
    buf = cpu.arena(nbytes)
    assert buf.dtype == np.uint8 and buf.nbytes == nbytes
    align = cpu.HUGE_PAGE if nbytes >= cpu.HUGE_PAGE else 64
    assert buf.ctypes.data % align == 0
    buf[:] = 7
    assert int(buf.sum()) == 7 * nbytes
