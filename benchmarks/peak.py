"""The CPU's single-core floating-point peak, measured: clock and FMA throughput.

    python benchmarks/peak.py

peak = FMA units x vector lanes x 2 (flops per FMA) x clock. The clock is measured with a
chain of dependent integer adds (one cycle each), the FMA throughput with independent chains
of vector FMAs on registers (no memory traffic) at the host's full vector width. Both are
JIT-compiled with llvmlite, like aicc's own code, and timed on the calling thread.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time

import llvmlite.binding as llvm
from llvmlite import ir


def _jit(module: ir.Module):
    from compiler.targets.cpu.machine import cpu_machine, new_target_machine

    tm = new_target_machine(cpu_machine("host"), jit=True)
    mod = llvm.parse_assembly(str(module))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine


def _best(fn, arg, repeats=60) -> float:
    # Short runs, best of many: on a shared machine some runs see no preemption.
    fn(arg)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best


def measure_clock(n: int = 2_000_000, chain: int = 100) -> float:
    """Cycles per second from `chain` dependent 1-cycle adds per loop trip (inline asm).

    Register + register: Golden Cove and later execute `add reg, imm` chains at rename."""
    i64 = ir.IntType(64)
    m = ir.Module("clock")
    f = ir.Function(m, ir.FunctionType(i64, [i64]), "adds")
    entry, loop, done = (f.append_basic_block(x) for x in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    x = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    x.add_incoming(ir.Constant(i64, 0), entry)
    asm = ir.InlineAsm(ir.FunctionType(i64, [i64]), "\n".join(["add $0, $0"] * chain), "=r,0")
    x1 = b.call(asm, [x])
    i1 = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(i1, loop)
    x.add_incoming(x1, loop)
    b.cbranch(b.icmp_signed("<", i1, f.args[0]), loop, done)
    b.position_at_end(done)
    b.ret(x1)
    engine = _jit(m)
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(engine.get_function_address("adds"))
    trips = n // chain
    return trips * chain / _best(fn, trips)


def measure_fma(lanes: int, chains: int | None = None, n: int = 2_400_000) -> float:
    """Flops per second of `chains` independent <lanes x float> FMA chains (registers only).

    The chains and the two operands must fit the vector registers, or the spills halve the
    rate: 24 for AVX-512's 32 registers, 12 for AVX2's 16 (Zen 3's two FMA pipes at latency 4
    need 8; 16 chains and up measured at 1 FMA per cycle there)."""
    if chains is None:
        chains = 24 if lanes >= 16 else 12
    i64, f32 = ir.IntType(64), ir.FloatType()
    vt = ir.VectorType(f32, lanes)
    m = ir.Module("fma")
    fma = ir.Function(m, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{lanes}f32")
    f = ir.Function(m, ir.FunctionType(f32, [i64]), "fmas")
    entry, loop, done = (f.append_basic_block(x) for x in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    # Opaque multiplier and addend (an asm barrier) so LLVM cannot fold the chains.
    opaque = ir.InlineAsm(ir.FunctionType(vt, [vt]), "", "=v,0")
    a = b.call(opaque, [ir.Constant(vt, [1.0000001] * lanes)])
    c = b.call(opaque, [ir.Constant(vt, [1e-7] * lanes)])
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    accs = []
    for k in range(chains):
        p = b.phi(vt)
        p.add_incoming(ir.Constant(vt, [float(k)] * lanes), entry)
        accs.append(p)
    new = [b.call(fma, [acc, a, c]) for acc in accs]
    for p, v in zip(accs, new):
        p.add_incoming(v, loop)
    i1 = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(i1, loop)
    b.cbranch(b.icmp_signed("<", i1, f.args[0]), loop, done)
    b.position_at_end(done)
    s = new[0]
    for v in new[1:]:
        s = b.fadd(s, v)
    b.ret(b.extract_element(s, ir.Constant(ir.IntType(32), 0)))
    engine = _jit(m)
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("fmas"))
    trips = n // chains
    return trips * chains * lanes * 2 / _best(fn, trips)


def host_vector_lanes() -> int:
    feats = llvm.get_host_cpu_features()
    return 16 if feats.get("avx512f") else 8 if feats.get("avx2") or feats.get("avx") else 4


def main() -> int:
    from compiler.targets.cpu.runtime import _init_llvm

    _init_llvm()
    llvm.initialize_native_asmparser()  # the clock loop is inline asm
    lanes = host_vector_lanes()
    clock = measure_clock()
    fma = measure_fma(lanes)
    units = fma / (lanes * 2 * clock)
    peak = round(units) * lanes * 2 * clock
    out = {"cpu": llvm.get_host_cpu_name(), "clock_GHz": clock / 1e9, "lanes_f32": lanes,
           "measured_fma_GFLOPs": fma / 1e9, "fma_units": round(units),
           "peak_GFLOPs": peak / 1e9}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
