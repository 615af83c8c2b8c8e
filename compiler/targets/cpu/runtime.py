"""Host CPU runtime: O3 + MCJIT for emitted LLVM IR, ctypes entry points, and the thread
pool behind ``aicc_parallel_for``.

``aicc_parallel_for(fn, ctx, n)`` (registered with ``llvm.add_symbol``) splits [0, n) into
one contiguous chunk per thread; the calling thread runs the first chunk itself and a
persistent pool of worker threads runs the rest (see the thread pool section below).
More chunks than threads (claimed the same way) win on some models and lose on others:
measured at 2 threads on a Zen 4, whole models, 1 / 4 chunks a thread alternated in one
process (ms): efficientnet_b0 9.03 / 8.19, clip-text 11.55 / 11.27, regnet_y_400mf
6.14 / 6.03, resnet50 39.7 / 40.3, bert 114.6 / 117.3, resnet18 12.57 / 13.70; so one
chunk a thread stays, until a loop can say how finely it may be cut.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import weakref
from collections.abc import Callable
from functools import lru_cache

import llvmlite.binding as llvm
from llvmlite import ir
import numpy as np

from compiler.codegen.llvm import PARALLEL_FOR_SYMBOL
from compiler.targets.cpu.machine import CPUMachine, check_runnable, cpu_machine, new_target_machine
from compiler.threads import count_from_env, default_threads

_init_lock = threading.Lock()
_initialized = False


def _init_llvm() -> None:
    global _initialized
    with _init_lock:
        if _initialized:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        global _pool
        _pool = _NativePool()
        llvm.add_symbol(PARALLEL_FOR_SYMBOL, _pool.parallel_for)
        _initialized = True


@lru_cache(maxsize=None)
def target_machine(machine: CPUMachine) -> llvm.TargetMachine:
    """The LLVM target machine of `machine` at O3, for optimizing and printing assembly.

    Shared: never hand it to an execution engine (the engine takes ownership and frees it);
    ``new_target_machine(machine, jit=True)`` makes one for that."""
    _init_llvm()
    return new_target_machine(machine, jit=True)


HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14  # Linux


def arena(nbytes: int) -> np.ndarray:
    """A 64-byte aligned uint8 buffer of `nbytes`; from 2 MiB on, aligned to
    2 MiB and, on Linux, advised to use transparent huge pages (where THP is "madvise", the
    common default, nothing else turns them on). An im2col copy or a strided operand walked
    row by row touches a new 4 KiB page at every row: on huge pages those rows stay within
    the TLB's reach."""
    align = HUGE_PAGE if nbytes >= HUGE_PAGE else 64
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    buf = raw[start: start + nbytes]
    if align == HUGE_PAGE and sys.platform.startswith("linux"):
        _madvise_huge(buf)
    return buf


def _madvise_huge(buf: np.ndarray) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        whole = buf.nbytes // HUGE_PAGE * HUGE_PAGE
        libc.madvise(ctypes.c_void_p(buf.ctypes.data), ctypes.c_size_t(whole),
                     ctypes.c_int(_MADV_HUGEPAGE))
    except (OSError, AttributeError):  # no libc symbol: plain pages, as before
        pass


# ----------------------------------------------------------------------- thread pool
#
# The pool is itself JIT-compiled LLVM IR (no C compiler needed). Each worker is a daemon
# Python thread that calls ``aicc_pool_worker(id)`` through ctypes once: ctypes drops the
# GIL and the call never returns, so dispatching work involves no Python at all. Workers spin
# on a generation counter for a while after each job (back-to-back loops start in about a
# microsecond), then sleep on a futex. A Python-callback pool costs ~90 us per loop here
# because every hand-off goes through the GIL and an OS wake-up.

_SPIN_ITERATIONS = 1 << 14  # ~pause instructions a worker spins before sleeping
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}


def pool_ir() -> str:
    """LLVM IR of the pool: ``aicc_pool_worker(id)`` and ``aicc_parallel_for``.

    A job is published as one 64-bit word ``gen << 32 | claimed << 16 | nchunks``. Threads
    claim chunk ``claimed`` by compare-and-swap of the word, so every (job, chunk) runs exactly
    once even when a worker wakes up late with a stale view; the job's fn/ctx/n stay fixed
    until all of its chunks are done (``pending`` reaches 0), which needs every claimed chunk
    to finish. The caller claims chunks too, so sleeping workers never delay a loop.
    """
    pool = _PoolIR()
    pool.emit_worker()
    pool.emit_parallel_for()
    return str(pool.m)


class _PoolIR:
    """The pool's module while it is built: its globals (the shared state), the system
    functions it calls, and the pieces of code both entry points use."""

    def __init__(self):
        i32, i64, ptr, void = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()
        self.i32, self.i64, self.ptr, self.void = i32, i64, ptr, void
        self.chunk_ty = ir.FunctionType(void, [ptr, i64, i64])
        self.m = ir.Module(name="aicc_pool")
        glob = self.glob
        self.word = glob("aicc_pool_word", i64, 0)
        self.wake_gen = glob("aicc_pool_wake", i32, 0)
        self.pending = glob("aicc_pool_pending", i64, 0)
        self.busy = glob("aicc_pool_busy", i32, 0)
        self.sleepers = glob("aicc_pool_sleepers", i32, 0)
        self.job_fn = glob("aicc_pool_fn", ptr, None)
        self.job_ctx = glob("aicc_pool_ctx", ptr, None)
        self.job_n = glob("aicc_pool_n", i64, 0)
        self.req = glob("aicc_pool_threads", i64, 1)
        self.nworkers = glob("aicc_pool_nworkers", i64, 0)

        self.machine = platform.machine().lower()
        self.futex = sys.platform.startswith("linux") and self.machine in _SYS_FUTEX
        if self.futex:
            self.syscall = ir.Function(self.m, ir.FunctionType(i64, [i64], var_arg=True),
                                       name="syscall")
        else:
            self.sched_yield = ir.Function(self.m, ir.FunctionType(i32, []), name="sched_yield")
        self.x86 = self.machine in ("x86_64", "amd64", "i686", "x86")
        if self.x86:
            self.pause_fn = ir.Function(self.m, ir.FunctionType(void, []),
                                        name="llvm.x86.sse2.pause")

    def glob(self, name, ty, init):
        """A global of the pool's state, on a cache line of its own."""
        g = ir.GlobalVariable(self.m, ty, name=name)
        g.initializer = ir.Constant(ty, init)
        g.align = 64  # one cache line each: no false sharing between spinners and writers
        g.type = self.ptr  # print as opaque `ptr`, not llvmlite's typed-pointer spelling
        return g

    def c64(self, v):
        return ir.Constant(self.i64, v)

    def c32(self, v):
        return ir.Constant(self.i32, v)

    def pause(self, b):
        """A spin-wait hint (x86 pause), or nothing."""
        if self.x86:
            b.call(self.pause_fn, [])

    def futex_wait(self, b, seen):
        """Sleep while the wake generation is still `seen` (futex), or yield the CPU."""
        if self.futex:
            b.call(self.syscall, [self.c64(_SYS_FUTEX[self.machine]), self.wake_gen,
                                  self.c64(_FUTEX_WAIT_PRIVATE), b.zext(seen, self.i64),
                                  ir.Constant(self.ptr, None)])
        else:
            b.call(self.sched_yield, [])

    def futex_wake(self, b):
        """Wake every sleeper (futex), or nothing: without futexes they only yield."""
        if self.futex:
            b.call(self.syscall, [self.c64(_SYS_FUTEX[self.machine]), self.wake_gen,
                                  self.c64(_FUTEX_WAKE_PRIVATE), self.c64(0x7FFFFFFF)])

    def gen_of(self, b, w):
        """The job generation of a published word."""
        return b.lshr(w, self.c64(32))

    def run_chunk(self, b, c, nt, slot):
        """Run chunk c of nt of the current job, then count it done."""
        ptr, i64, c64 = self.ptr, self.i64, self.c64
        b.store(b.load(self.job_fn, typ=ptr), slot)
        # typed: llvmlite needs the signature
        fn = b.load(slot, typ=ir.PointerType(self.chunk_ty))
        ctx = b.load(self.job_ctx, typ=ptr)
        n = b.load(self.job_n, typ=i64)
        lo = b.sdiv(b.mul(n, c), nt)
        hi = b.sdiv(b.mul(n, b.add(c, c64(1))), nt)
        b.call(fn, [ctx, lo, hi])
        b.atomic_rmw("sub", self.pending, c64(1), "seq_cst")

    def claim_loop(self, fn_, b, w_slot, fn_slot, on_none, seen_slot=None):
        """Blocks that try to claim a chunk from the word in w_slot."""
        i64, c64 = self.i64, self.c64
        claim = fn_.append_basic_block("claim")
        try_cas = fn_.append_basic_block("try_cas")
        run = fn_.append_basic_block("run")
        retry = fn_.append_basic_block("retry")
        b.branch(claim)
        b.position_at_end(claim)
        w = b.load(w_slot, typ=i64)
        if seen_slot is not None:
            b.store(self.gen_of(b, w), seen_slot)
        claimed = b.and_(b.lshr(w, c64(16)), c64(0xFFFF))
        nt = b.and_(w, c64(0xFFFF))
        b.cbranch(b.icmp_unsigned("<", claimed, nt), try_cas, on_none)
        b.position_at_end(try_cas)
        res = b.cmpxchg(self.word, w, b.add(w, c64(1 << 16)), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(res, 1), run, retry)
        b.position_at_end(retry)
        b.store(b.extract_value(res, 0), w_slot)
        b.branch(claim)
        b.position_at_end(run)
        self.run_chunk(b, claimed, nt, fn_slot)
        b.store(b.load_atomic(self.word, "acquire", 8, typ=i64), w_slot)
        b.branch(claim)
        return claim

    def emit_worker(self) -> None:
        """void aicc_pool_worker(i64 id): never returns. Spins on the word for a new
        generation, then sleeps on the wake futex; claims chunks whenever one appears."""
        i32, i64, ptr, c64, c32 = self.i32, self.i64, self.ptr, self.c64, self.c32
        word, gen_of = self.word, self.gen_of
        w = ir.Function(self.m, ir.FunctionType(self.void, [i64]), name="aicc_pool_worker")
        entry, loop, spin, spin_next, sleep, sleep_wait, to_claim = (
            w.append_basic_block(n) for n in ("entry", "loop", "spin", "spin_next", "sleep",
                                              "sleep_wait", "to_claim"))
        b = ir.IRBuilder(entry)
        seen_slot, w_slot, fn_slot = b.alloca(i64), b.alloca(i64), b.alloca(ptr)
        seen_slot.type = w_slot.type = fn_slot.type = ptr
        b.store(gen_of(b, b.load_atomic(word, "acquire", 8, typ=i64)), seen_slot)
        b.branch(loop)
        b.position_at_end(loop)
        b.branch(spin)
        b.position_at_end(spin)
        k = b.phi(i64)
        k.add_incoming(c64(0), loop)
        cur = b.load_atomic(word, "acquire", 8, typ=i64)
        b.store(cur, w_slot)
        changed = b.icmp_unsigned("!=", gen_of(b, cur), b.load(seen_slot, typ=i64))
        b.cbranch(changed, to_claim, spin_next)
        b.position_at_end(spin_next)
        self.pause(b)
        k1 = b.add(k, c64(1))
        k.add_incoming(k1, spin_next)
        b.cbranch(b.icmp_unsigned("<", k1, c64(_SPIN_ITERATIONS)), spin, sleep)
        b.position_at_end(sleep)
        f = b.load_atomic(self.wake_gen, "seq_cst", 4, typ=i32)
        b.atomic_rmw("add", self.sleepers, c32(1), "seq_cst")
        cur = b.load_atomic(word, "seq_cst", 8, typ=i64)
        b.store(cur, w_slot)
        changed = b.icmp_unsigned("!=", gen_of(b, cur), b.load(seen_slot, typ=i64))
        woke = w.append_basic_block("woke")
        b.cbranch(changed, woke, sleep_wait)
        b.position_at_end(sleep_wait)
        self.futex_wait(b, f)
        b.atomic_rmw("sub", self.sleepers, c32(1), "seq_cst")
        b.branch(loop)
        b.position_at_end(woke)
        b.atomic_rmw("sub", self.sleepers, c32(1), "seq_cst")
        b.branch(to_claim)
        b.position_at_end(to_claim)
        self.claim_loop(w, b, w_slot, fn_slot, loop, seen_slot)

    def emit_parallel_for(self) -> None:
        """void aicc_parallel_for(ptr fn, ptr ctx, i64 n): runs fn(ctx, lo, hi) over [0, n).
        Serially when one thread is asked for or another caller owns the pool; else it
        publishes the job, wakes sleepers, claims chunks like a worker and waits for the
        rest."""
        i32, i64, ptr, c64, c32 = self.i32, self.i64, self.ptr, self.c64, self.c32
        word, gen_of = self.word, self.gen_of
        f = ir.Function(self.m, ir.FunctionType(self.void, [ptr, ptr, i64]),
                        name="aicc_parallel_for")
        fn, ctx, n = f.args
        blk = {name: f.append_basic_block(name) for name in (
            "entry", "serial", "try", "dispatch", "publish", "wait", "wait_next", "done", "ret")}
        b = ir.IRBuilder(blk["entry"])
        w_slot, slot = b.alloca(i64), b.alloca(ptr)  # allocas stay in the entry block
        w_slot.type = slot.type = ptr
        want = b.load(self.req, typ=i64)
        have = b.add(b.load_atomic(self.nworkers, "acquire", 8, typ=i64), c64(1))
        nt = b.select(b.icmp_signed("<", want, have), want, have)
        nt = b.select(b.icmp_signed("<", nt, n), nt, n)
        nt = b.select(b.icmp_signed("<", nt, c64(0xFFFF)), nt, c64(0xFFFF))
        b.cbranch(b.icmp_signed("<=", n, c64(0)), blk["ret"], blk["try"])
        b.position_at_end(blk["try"])
        b.cbranch(b.icmp_signed(">", nt, c64(1)), blk["dispatch"], blk["serial"])
        b.position_at_end(blk["serial"])
        b.store(fn, slot)
        b.call(b.load(slot, typ=ir.PointerType(self.chunk_ty)), [ctx, c64(0), n])
        b.branch(blk["ret"])
        b.position_at_end(blk["dispatch"])
        # Another caller (another Python thread, or a parallel loop inside a chunk) owns the
        # pool: run serially rather than wait.
        got = b.extract_value(b.cmpxchg(self.busy, c32(0), c32(1), "acquire", "monotonic"), 1)
        b.cbranch(got, blk["publish"], blk["serial"])
        b.position_at_end(blk["publish"])
        b.store(fn, self.job_fn)
        b.store(ctx, self.job_ctx)
        b.store(n, self.job_n)
        b.atomic_rmw("xchg", self.pending, nt, "seq_cst")
        old = b.load_atomic(word, "acquire", 8, typ=i64)
        new = b.or_(b.shl(b.add(gen_of(b, old), c64(1)), c64(32)), nt)
        b.atomic_rmw("xchg", word, new, "seq_cst")
        b.atomic_rmw("add", self.wake_gen, c32(1), "seq_cst")
        asleep = b.load_atomic(self.sleepers, "seq_cst", 4, typ=i32)
        with b.if_then(b.icmp_unsigned("!=", asleep, c32(0))):
            self.futex_wake(b)
        b.store(new, w_slot)
        # The caller claims chunks like any worker (chunk 0 first), then waits for the rest.
        self.claim_loop(f, b, w_slot, slot, blk["wait"])
        b.position_at_end(blk["wait"])
        left = b.load_atomic(self.pending, "acquire", 8, typ=i64)
        b.cbranch(b.icmp_signed("==", left, c64(0)), blk["done"], blk["wait_next"])
        b.position_at_end(blk["wait_next"])
        self.pause(b)
        b.branch(blk["wait"])
        b.position_at_end(blk["done"])
        b.atomic_rmw("xchg", self.busy, c32(0), "release")
        b.branch(blk["ret"])
        b.position_at_end(blk["ret"])
        b.ret_void()


class _NativePool:
    def __init__(self):
        mod = llvm.parse_assembly(pool_ir())
        mod.verify()
        tm = new_target_machine(cpu_machine("host"), jit=True)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        optimize(mod, tm)
        self._engine = llvm.create_mcjit_compiler(mod, tm)
        self._engine.finalize_object()
        addr = self._engine.get_global_value_address
        self.parallel_for = self._engine.get_function_address(PARALLEL_FOR_SYMBOL)
        self._threads = ctypes.c_int64.from_address(addr("aicc_pool_threads"))
        self._nworkers = ctypes.c_int64.from_address(addr("aicc_pool_nworkers"))
        self._worker = ctypes.CFUNCTYPE(None, ctypes.c_int64)(
            self._engine.get_function_address("aicc_pool_worker"))
        self._lock = threading.Lock()
        self._started = 0
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        # A forked child has none of the parent's worker threads; start over.
        self._lock = threading.Lock()
        self._started = 0
        self._nworkers.value = 0

    def ensure_workers(self, count: int) -> None:
        if count <= self._started:
            return
        with self._lock:
            while self._started < count:
                self._started += 1
                threading.Thread(target=self._worker, args=(self._started,), daemon=True,
                                 name=f"aicc-cpu-{self._started}").start()
            self._nworkers.value = self._started  # aligned 8-byte store: atomic on x86/arm64

    def set_threads(self, threads: int) -> None:
        self.ensure_workers(threads - 1)
        self._threads.value = threads


_pool: _NativePool | None = None


# ----------------------------------------------------------------------- executable


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """The new pass manager's O3 pipeline with loop and SLP vectorization."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(module, pb)


def compile_jobs() -> int:
    """Threads LLVM compiles a module's partitions on: AICC_COMPILE_JOBS when set to an
    integer, else every core this process may run on."""
    jobs = count_from_env("AICC_COMPILE_JOBS")
    if jobs is not None:
        return jobs
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# Partitions per compile thread: their costs differ and are not known from their sizes, and
# a few more than threads keep every thread busy until the end (light_resnet50 on 2 idle
# cores: LLVM 4.5 s in one module, 2.9 s in 2 partitions, 1.8 s in 8).
PARTS_PER_JOB = 4
# Characters of LLVM IR per partition at least: a partition costs a context, a pass
# pipeline and a thread hand-off, which a small module does not win back (examples/mlp.py
# stays one or two partitions, a transformer layer three, ResNet-50 takes all).
MIN_PART_CHARS = 100_000


class _Part:
    """One partition of a module: its own LLVM context (contexts are not thread-safe), the
    optimized module and the object code generated from it."""

    def __init__(self, text: str, machine: CPUMachine):
        self.text = text
        self.machine = machine
        self.context = None
        self.module: llvm.ModuleRef | None = None
        self.object: bytes = b""

    def compile(self, tm: llvm.TargetMachine, own_context: bool) -> None:
        self.context = llvm.create_context() if own_context else None
        try:
            mod = llvm.parse_assembly(self.text, context=self.context) if own_context \
                else llvm.parse_assembly(self.text)
            mod.verify()
        except RuntimeError as exc:
            raise RuntimeError(f"aicc emitted invalid LLVM IR: {exc}") from exc
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        optimize(mod, tm)
        self.object = tm.emit_object(mod)
        self.module = mod
        self.text = ""  # the module holds it now


_unlocked = threading.local()


def _bypass_llvmlite_lock() -> bool:
    """Let aicc's partition threads call LLVM without llvmlite's global lock.

    llvmlite wraps every call of its C library in one process-wide lock, so threads that
    compile separate modules would take turns. Each partition thread works on its own
    context, module, target machine and pass builder, which LLVM allows at once; so the
    lock's class is swapped (once) for one that the threads marked in `_unlocked` walk
    through, while every other thread still takes it. False (and threads take turns, as
    before) where llvmlite's internals are not the expected ones."""
    from llvmlite.binding import ffi

    lock = getattr(getattr(ffi, "lib", None), "_lock", None)
    base = getattr(ffi, "_LLVMLock", None)
    if lock is None or base is None or _PartitionLock is None:
        return False
    if isinstance(lock, _PartitionLock):
        return True
    if type(lock) is not base:
        return False
    lock.__class__ = _PartitionLock
    return True


def _partition_lock_class():
    from llvmlite.binding import ffi

    if not isinstance(getattr(ffi, "_LLVMLock", None), type):
        return None  # another llvmlite: its lock stays as it is

    class PartitionLock(ffi._LLVMLock):
        def __enter__(self):
            if not getattr(_unlocked, "on", False):
                super().__enter__()

        def __exit__(self, *exc):
            if not getattr(_unlocked, "on", False):
                super().__exit__(*exc)

    return PartitionLock


_PartitionLock = _partition_lock_class()


def compile_module_text(llvm_ir: str, machine: CPUMachine, jobs: int | None = None
                        ) -> list[_Part]:
    """O3 and code generation of `llvm_ir` for `machine`, split into partitions
    (compiler/targets/cpu/partition.py) compiled on `jobs` threads."""
    from concurrent.futures import ThreadPoolExecutor

    from compiler.targets.cpu.partition import split_module

    jobs = compile_jobs() if jobs is None else max(1, jobs)
    texts = [llvm_ir]
    if jobs > 1:
        try:
            texts = split_module(llvm_ir, min(jobs * PARTS_PER_JOB,
                                              -(-len(llvm_ir) // MIN_PART_CHARS)))
        except ValueError:  # text this splitter does not read: one module, as it is
            texts = [llvm_ir]
    parts = [_Part(t, machine) for t in texts]
    tms = [new_target_machine(machine, jit=True) for _ in parts]
    if len(parts) == 1:
        parts[0].compile(tms[0], own_context=False)
        return parts
    order = sorted(range(len(parts)), key=lambda i: -len(texts[i]))  # longest first
    unlocked = _bypass_llvmlite_lock()

    def run(i: int) -> None:
        _unlocked.on = unlocked
        try:
            parts[i].compile(tms[i], True)
        finally:
            _unlocked.on = False

    with ThreadPoolExecutor(max_workers=min(jobs, len(parts)),
                            thread_name_prefix="aicc-llvm") as pool:
        for f in [pool.submit(run, i) for i in order]:
            f.result()
    return parts


def _close_refs(refs: list) -> None:
    for r in refs:
        if r is not None:
            r.close()
    refs.clear()


class CPUExecutable:
    """LLVM IR text compiled for a CPU (the host's by default) and loaded into the process
    with MCJIT."""

    def __init__(self, llvm_ir: str | None, *, threads: int | None = None,
                 data: dict[str, np.ndarray] | None = None, machine: CPUMachine | None = None,
                 object_code: bytes | list[bytes] | None = None, jobs: int | None = None):
        """`data` binds the module's external globals (symbol -> array, e.g. the weights the
        emitter kept out of the IR text); the executable keeps the arrays alive. `machine`:
        the CPU to generate code for (default: `cpu_machine()`, $AICC_TARGET_CPU or the
        host); its code must be able to run on this host. `object_code`, instead of
        `llvm_ir`: the machine code of an earlier compile (`self.object_codes()`, or one
        object), loaded as it is (the compile cache). `jobs`: threads that compile the
        module's partitions (default: `compile_jobs()`)."""
        machine = machine or cpu_machine()
        check_runnable(machine)
        self._machine = machine
        self._data = dict(data or {})
        for symbol, array in self._data.items():
            llvm.add_symbol(symbol, array.ctypes.data)
        tm = target_machine(machine)  # initializes LLVM and the thread pool first
        self._tm = tm
        self._parts: list[_Part] = []
        self._linked: llvm.ModuleRef | None = None
        self._optimized_ir: str | None = None
        # The LLVM modules kept (for optimized_ir / asm) and their contexts, closed in this
        # order when the executable goes: left to the garbage collector, a context could be
        # disposed of before its modules (finalizers of a collected cycle run in any order).
        self._llvm_refs: list = []
        weakref.finalize(self, _close_refs, self._llvm_refs)
        if object_code is None:
            self._parts = compile_module_text(llvm_ir, machine, jobs)
            for p in self._parts:
                self._llvm_refs += [p.module, p.context]
            self._objects = [p.object for p in self._parts]
        else:
            self._objects = [object_code] if isinstance(object_code, bytes | bytearray | memoryview) \
                else list(object_code)
        mod = llvm.parse_assembly("")
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        # The engine owns (and frees) both the module and its target machine; it links the
        # partitions' objects with each other.
        self._engine = llvm.create_mcjit_compiler(mod, new_target_machine(machine, jit=True))
        for obj in self._objects:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
        self._engine.finalize_object()
        self._engine.run_static_constructors()
        self._functions: dict[tuple[str, int], Callable[..., None]] = {}
        self.threads: int = threads if threads is not None else default_threads()

    def _linked_module(self) -> llvm.ModuleRef:
        """The optimized partitions linked into one module (in a context of its own)."""
        if self._linked is None:
            if not self._parts:
                raise RuntimeError("a model loaded from machine code has no LLVM IR")
            if len(self._parts) == 1 and self._parts[0].context is None:
                self._linked = self._parts[0].module
            else:
                ctx = llvm.create_context()
                texts = [str(p.module) for p in self._parts]
                linked = llvm.parse_assembly(texts[0], context=ctx)
                for t in texts[1:]:
                    linked.link_in(llvm.parse_assembly(t, context=ctx))
                self._linked = linked
                self._llvm_refs += [linked, ctx]
        return self._linked

    @property
    def optimized_ir(self) -> str | None:
        """The LLVM IR after O3, as one module (None for a model loaded from machine code)."""
        if self._optimized_ir is None and self._parts:
            self._optimized_ir = str(self._linked_module())
        return self._optimized_ir

    def asm(self) -> str:
        if not self._parts:
            raise RuntimeError("a model loaded from machine code has no assembly text")
        return self._tm.emit_assembly(self._linked_module())

    def object_codes(self) -> list[bytes]:
        """The machine code MCJIT loaded: one ELF relocatable object per partition."""
        return [bytes(o) for o in self._objects]

    def object_code(self) -> bytes:
        """The machine code as one ELF relocatable object (with several partitions, the
        linked optimized module compiled again)."""
        if len(self._objects) == 1:
            return bytes(self._objects[0])
        return self._tm.emit_object(self._linked_module())

    @property
    def data(self) -> dict[str, np.ndarray]:
        """The external globals the code reads (symbol -> array)."""
        return dict(self._data)

    def address(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise KeyError(f"no function @{name} in the compiled module")
        return addr

    def get(self, name: str, nargs: int) -> Callable[..., None]:
        """A callable taking ``nargs`` C-contiguous NumPy arrays (or raw int addresses)."""
        key = (name, nargs)
        fn = self._functions.get(key)
        if fn is not None:
            return fn
        cfn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))(self.address(name))

        def call(*arrays) -> None:
            if len(arrays) != nargs:
                raise TypeError(f"@{name} takes {nargs} buffers, got {len(arrays)}")
            ptrs = [_data_pointer(a) for a in arrays]
            _pool.set_threads(max(1, int(self.threads)))
            cfn(*ptrs)

        call.__name__ = name
        call._cfunc = cfn  # keep the ctypes object alive with the callable
        call._owner = self  # and the engine that holds the code
        self._functions[key] = call
        return call


def _data_pointer(a) -> int:
    if isinstance(a, np.ndarray):
        if not a.flags.c_contiguous:
            raise ValueError("aicc buffers must be C-contiguous NumPy arrays")
        return a.ctypes.data
    if isinstance(a, int):
        return a
    if isinstance(a, np.generic):
        raise TypeError("pass scalars as 0-d NumPy arrays (np.array(x)), not NumPy scalars")
    iface = getattr(a, "__array_interface__", None)
    if iface is not None:
        return iface["data"][0]
    raise TypeError(f"cannot pass {type(a).__name__} as a buffer")
