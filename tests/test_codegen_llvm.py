"""Loop IR -> LLVM IR (compiler/codegen) checked by running the JIT-compiled code on NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xdsl.dialects import builtin
from xdsl.parser import Parser

from compiler.codegen.llvm import LLVMEmitter, emit_llvm
from compiler.errors import CompileError, UnsupportedOpError
from compiler.pipeline import make_context
from compiler.targets.cpu.runtime import CPUExecutable


def parse(text: str) -> builtin.ModuleOp:
    return Parser(make_context(), text).parse_module()


def build(text: str, threads: int | None = 1, vector_ldexp: bool = False) -> CPUExecutable:
    return CPUExecutable(emit_llvm(parse(text), vector_ldexp=vector_ldexp), threads=threads)


def parallel(ivs, lbs, ubs, steps, body: str) -> str:
    """scf.parallel in generic form (xDSL 0.74 has no custom syntax for it)."""
    n = len(ivs)
    operands = ", ".join(list(lbs) + list(ubs) + list(steps))
    args = ", ".join(f"{v}: index" for v in ivs)
    types = ", ".join(["index"] * (3 * n))
    return (f'"scf.parallel"({operands}) <{{operandSegmentSizes = array<i32: {n}, {n}, {n}, 0>}}>'
            f" ({{\n^bb0({args}):\n{body}\n  scf.reduce\n}}) : ({types}) -> ()")


def unary_kernel(opname: str, n: int, ty: str = "f32") -> str:
    return f"""
func.func @k(%a: memref<{n}x{ty}>, %b: memref<{n}x{ty}>) {{
  %c0 = arith.constant 0 : index
  %cn = arith.constant {n} : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : memref<{n}x{ty}>
    %y = {opname} %x : {ty}
    memref.store %y, %b[%i] : memref<{n}x{ty}>
  }}
  func.return
}}
"""


# ------------------------------------------------------------------- basic loops


@pytest.mark.parametrize("n", [1, 7, 129, 1000003])
def test_elementwise_add(n):
    ex = build(f"""
func.func @add(%a: memref<{n}xf32>, %b: memref<{n}xf32>, %c: memref<{n}xf32>) {{
  %c0 = arith.constant 0 : index
  %cn = arith.constant {n} : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : memref<{n}xf32>
    %y = memref.load %b[%i] : memref<{n}xf32>
    %z = arith.addf %x, %y : f32
    memref.store %z, %c[%i] : memref<{n}xf32>
  }}
  func.return
}}""")
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    c = np.full(n, np.nan, np.float32)
    ex.get("add", 3)(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_row_sum_iter_args():
    m, n = 37, 53
    ex = build(f"""
func.func @rowsum(%a: memref<{m}x{n}xf64>, %out: memref<{m}xf64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cm = arith.constant {m} : index
  %cn = arith.constant {n} : index
  %zero = arith.constant 0.0 : f64
  scf.for %i = %c0 to %cm step %c1 {{
    %s = scf.for %j = %c0 to %cn step %c1 iter_args(%acc = %zero) -> (f64) {{
      %x = memref.load %a[%i, %j] : memref<{m}x{n}xf64>
      %acc2 = arith.addf %acc, %x : f64
      scf.yield %acc2 : f64
    }}
    memref.store %s, %out[%i] : memref<{m}xf64>
  }}
  func.return
}}""")
    a = np.random.default_rng(0).standard_normal((m, n))
    out = np.zeros(m)
    ex.get("rowsum", 2)(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-12)


def test_for_with_dynamic_bounds_and_empty_trip():
    # Triangular loop: the inner bound is the outer induction variable (zero trips at i=0).
    n = 10
    ex = build(f"""
func.func @tri(%out: memref<{n}xi64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  %z = arith.constant 0 : i64
  scf.for %i = %c0 to %cn step %c1 {{
    %s = scf.for %j = %c0 to %i step %c1 iter_args(%acc = %z) -> (i64) {{
      %jj = arith.index_cast %j : index to i64
      %a2 = arith.addi %acc, %jj : i64
      scf.yield %a2 : i64
    }}
    memref.store %s, %out[%i] : memref<{n}xi64>
  }}
  func.return
}}""")
    out = np.full(n, -1, np.int64)
    ex.get("tri", 1)(out)
    np.testing.assert_array_equal(out, [i * (i - 1) // 2 for i in range(n)])


def test_matmul_ikj():
    m, k, n = 129, 65, 33
    ex = build(f"""
func.func @mm(%a: memref<{m}x{k}xf32>, %b: memref<{k}x{n}xf32>, %c: memref<{m}x{n}xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cm = arith.constant {m} : index
  %ck = arith.constant {k} : index
  %cn = arith.constant {n} : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %cm step %c1 {{
    scf.for %j = %c0 to %cn step %c1 {{
      memref.store %zero, %c[%i, %j] : memref<{m}x{n}xf32>
    }}
    scf.for %p = %c0 to %ck step %c1 {{
      %x = memref.load %a[%i, %p] : memref<{m}x{k}xf32>
      scf.for %j = %c0 to %cn step %c1 {{
        %y = memref.load %b[%p, %j] : memref<{k}x{n}xf32>
        %acc = memref.load %c[%i, %j] : memref<{m}x{n}xf32>
        %t = arith.mulf %x, %y fastmath<contract> : f32
        %u = arith.addf %acc, %t fastmath<contract> : f32
        memref.store %u, %c[%i, %j] : memref<{m}x{n}xf32>
      }}
    }}
  }}
  func.return
}}""")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    c = np.full((m, n), np.nan, np.float32)
    ex.get("mm", 3)(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_strided_step_and_rank0():
    ex = build("""
func.func @f(%a: memref<10xi32>, %s: memref<i32>) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c10 = arith.constant 10 : index
  %z = arith.constant 0 : i32
  %r = scf.for %i = %c1 to %c10 step %c3 iter_args(%acc = %z) -> (i32) {
    %x = memref.load %a[%i] : memref<10xi32>
    %y = arith.addi %acc, %x : i32
    scf.yield %y : i32
  }
  memref.store %r, %s[] : memref<i32>
  func.return
}""")
    a = np.arange(10, dtype=np.int32) * 7
    s = np.zeros((), np.int32)
    ex.get("f", 2)(a, s)
    assert s == a[1:10:3].sum()


# ------------------------------------------------------------------ arith and control


def test_cmpf_all_predicates_and_select_i1():
    preds = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
             "ult", "ule", "une", "uno", "true"]
    n = 6
    body = []
    for p in preds:
        body.append(f"""
    %r_{p} = arith.cmpf {p}, %x, %y : f32
    memref.store %r_{p}, %o_{p}[%i] : memref<{n}xi1>""")
    args = ", ".join(f"%o_{p}: memref<{n}xi1>" for p in preds)
    ex = build(f"""
func.func @cmp(%a: memref<{n}xf32>, %b: memref<{n}xf32>, %sel: memref<{n}xf32>, {args}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : memref<{n}xf32>
    %y = memref.load %b[%i] : memref<{n}xf32>
    {''.join(body)}
    %m = arith.select %r_ogt, %x, %y : f32
    memref.store %m, %sel[%i] : memref<{n}xf32>
  }}
  func.return
}}""")
    nan = np.nan
    a = np.array([1, 2, nan, 3, nan, -0.0], np.float32)
    b = np.array([2, 2, 1, nan, nan, 0.0], np.float32)
    outs = {p: np.full(n, 7, np.bool_) for p in preds}
    sel = np.zeros(n, np.float32)
    ex.get("cmp", 3 + len(preds))(a, b, sel, *outs.values())
    uno = np.isnan(a) | np.isnan(b)
    with np.errstate(invalid="ignore"):
        ref = {"false": np.zeros(n, bool), "oeq": a == b, "ogt": a > b, "oge": a >= b,
               "olt": a < b, "ole": a <= b, "one": (a != b) & ~uno, "ord": ~uno,
               "ueq": (a == b) | uno, "ugt": (a > b) | uno, "uge": (a >= b) | uno,
               "ult": (a < b) | uno, "ule": (a <= b) | uno, "une": a != b, "uno": uno,
               "true": np.ones(n, bool)}
    for p in preds:
        assert outs[p].view(np.uint8).max() <= 1, p  # i1 stored as a 0/1 byte
        np.testing.assert_array_equal(outs[p], ref[p], err_msg=p)
    np.testing.assert_array_equal(sel, np.where(a > b, a, b))


def test_integer_ops_and_casts():
    n = 8
    ex = build(f"""
func.func @ints(%a: memref<{n}xi32>, %b: memref<{n}xi32>, %fd: memref<{n}xi32>,
                %rm: memref<{n}xi32>, %mx: memref<{n}xi32>, %mn: memref<{n}xi64>,
                %fl: memref<{n}xf64>, %back: memref<{n}xi8>, %bits: memref<{n}xi32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : memref<{n}xi32>
    %y = memref.load %b[%i] : memref<{n}xi32>
    %q = arith.floordivsi %x, %y : i32
    memref.store %q, %fd[%i] : memref<{n}xi32>
    %r = arith.remsi %x, %y : i32
    memref.store %r, %rm[%i] : memref<{n}xi32>
    %m = arith.maxsi %x, %y : i32
    memref.store %m, %mx[%i] : memref<{n}xi32>
    %x64 = arith.extsi %x : i32 to i64
    %y64 = arith.extsi %y : i32 to i64
    %m64 = arith.minsi %x64, %y64 : i64
    memref.store %m64, %mn[%i] : memref<{n}xi64>
    %f = arith.sitofp %x : i32 to f64
    %h = arith.constant 0.5 : f64
    %g = arith.mulf %f, %h : f64
    memref.store %g, %fl[%i] : memref<{n}xf64>
    %t = arith.fptosi %g : f64 to i32
    %ii = arith.index_cast %t : i32 to index
    %t2 = arith.index_cast %ii : index to i32
    %t8 = arith.trunci %t2 : i32 to i8
    memref.store %t8, %back[%i] : memref<{n}xi8>
    %ff = arith.sitofp %x : i32 to f32
    %bc = arith.bitcast %ff : f32 to i32
    %xo = arith.xori %bc, %y : i32
    %an = arith.andi %xo, %x : i32
    %o = arith.ori %an, %y : i32
    memref.store %o, %bits[%i] : memref<{n}xi32>
  }}
  func.return
}}""")
    a = np.array([7, -7, 7, -7, 0, 100, -100, 2**30], np.int32)
    b = np.array([2, 2, -2, -2, 3, 7, 7, -3], np.int32)
    outs = [np.zeros(n, np.int32) for _ in range(3)] + [np.zeros(n, np.int64),
                                                       np.zeros(n, np.float64),
                                                       np.zeros(n, np.int8),
                                                       np.zeros(n, np.int32)]
    ex.get("ints", 9)(a, b, *outs)
    fd, rm, mx, mn, fl, back, bits = outs
    np.testing.assert_array_equal(fd, a // b)
    np.testing.assert_array_equal(rm, np.fmod(a, b))
    np.testing.assert_array_equal(mx, np.maximum(a, b))
    np.testing.assert_array_equal(mn, np.minimum(a, b))
    np.testing.assert_array_equal(fl, a * 0.5)
    np.testing.assert_array_equal(back, np.trunc(a * 0.5).astype(np.int64).astype(np.int8))
    ref_bits = ((a.astype(np.float32).view(np.int32) ^ b) & a) | b
    np.testing.assert_array_equal(bits, ref_bits)


def test_maximumf_minimumf_propagate_nan_and_if_with_results():
    n = 5
    ex = build(f"""
func.func @mm(%a: memref<{n}xf32>, %b: memref<{n}xf32>, %mx: memref<{n}xf32>,
              %mn: memref<{n}xf32>, %w: memref<{n}xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : memref<{n}xf32>
    %y = memref.load %b[%i] : memref<{n}xf32>
    %hi = arith.maximumf %x, %y : f32
    %lo = arith.minimumf %x, %y : f32
    memref.store %hi, %mx[%i] : memref<{n}xf32>
    memref.store %lo, %mn[%i] : memref<{n}xf32>
    %pos = arith.cmpf ogt, %x, %zero : f32
    %r = scf.if %pos -> (f32) {{
      %s = math.sqrt %x : f32
      scf.yield %s : f32
    }} else {{
      %ng = arith.negf %x : f32
      scf.yield %ng : f32
    }}
    scf.if %pos {{
      memref.store %r, %w[%i] : memref<{n}xf32>
    }}
  }}
  func.return
}}""")
    a = np.array([1, np.nan, 4, -3, 9], np.float32)
    b = np.array([2, 0, np.nan, -1, 1], np.float32)
    mx, mn, w = np.zeros(n, np.float32), np.zeros(n, np.float32), np.full(n, -5, np.float32)
    ex.get("mm", 5)(a, b, mx, mn, w)
    np.testing.assert_array_equal(mx, np.maximum(a, b))
    np.testing.assert_array_equal(mn, np.minimum(a, b))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(w, np.where(a > 0, np.sqrt(a), -5))


# ------------------------------------------------------------------------- memory


def test_globals_alloc_reshape_and_call():
    ex = build("""
"memref.global"() <{sym_name = "w", sym_visibility = "private", type = memref<2x3xf32>,
                   initial_value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>,
                   constant}> : () -> ()
"memref.global"() <{sym_name = "s", sym_visibility = "private", type = memref<6xi32>,
                   initial_value = dense<3> : tensor<6xi32>, constant}> : () -> ()
"memref.global"() <{sym_name = "flags", sym_visibility = "private", type = memref<6xi1>,
                   initial_value = dense<[true, false, true, true, false, false]> : tensor<6xi1>,
                   constant}> : () -> ()
func.func private @scale(%src: memref<6xf32>, %dst: memref<6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %s = memref.get_global @s : memref<6xi32>
  %fl = memref.get_global @flags : memref<6xi1>
  scf.for %i = %c0 to %c6 step %c1 {
    %x = memref.load %src[%i] : memref<6xf32>
    %k = memref.load %s[%i] : memref<6xi32>
    %kf = arith.sitofp %k : i32 to f32
    %y = arith.mulf %x, %kf : f32
    %f = memref.load %fl[%i] : memref<6xi1>
    %z = arith.select %f, %y, %x : f32
    memref.store %z, %dst[%i] : memref<6xf32>
  }
  func.return
}
func.func @main(%in: memref<2x3xf32>, %out: memref<3x2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %w = memref.get_global @w : memref<2x3xf32>
  %t = memref.alloc() : memref<2x3xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      %x = memref.load %in[%i, %j] : memref<2x3xf32>
      %y = memref.load %w[%i, %j] : memref<2x3xf32>
      %z = arith.addf %x, %y : f32
      memref.store %z, %t[%i, %j] : memref<2x3xf32>
    }
  }
  %flat = memref.collapse_shape %t [[0, 1]] : memref<2x3xf32> into memref<6xf32>
  %tmp2 = memref.alloca() : memref<6xf32>
  func.call @scale(%flat, %tmp2) : (memref<6xf32>, memref<6xf32>) -> ()
  %o6 = memref.collapse_shape %out [[0, 1]] : memref<3x2xf32> into memref<6xf32>
  "memref.copy"(%tmp2, %o6) : (memref<6xf32>, memref<6xf32>) -> ()
  memref.dealloc %t : memref<2x3xf32>
  %e = memref.expand_shape %o6 [[0, 1]] output_shape [3, 2] : memref<6xf32> into memref<3x2xf32>
  %v = memref.load %e[%c2, %c1] : memref<3x2xf32>
  %one = arith.constant 1.0 : f32
  %v1 = arith.addf %v, %one : f32
  memref.store %v1, %e[%c2, %c1] : memref<3x2xf32>
  func.return
}""")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros((3, 2), np.float32)
    ex.get("main", 2)(x, out)
    t = (x + np.array([[1, 2, 3], [4, 5, 6]], np.float32)).reshape(6)
    ref = np.where([True, False, True, True, False, False], t * 3, t).reshape(3, 2)
    ref[2, 1] += 1
    np.testing.assert_array_equal(out, ref)


def test_uninitialized_global_is_writable():
    ex = build("""
"memref.global"() <{sym_name = "acc", sym_visibility = "private", type = memref<4xi64>,
                   initial_value}> : () -> ()
func.func @f(%out: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %g = memref.get_global @acc : memref<4xi64>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %g[%i] : memref<4xi64>
    %ii = arith.index_cast %i : index to i64
    %y = arith.addi %x, %ii : i64
    memref.store %y, %g[%i] : memref<4xi64>
    memref.store %y, %out[%i] : memref<4xi64>
  }
  func.return
}""")
    out = np.zeros(4, np.int64)
    f = ex.get("f", 1)
    f(out)
    f(out)
    np.testing.assert_array_equal(out, 2 * np.arange(4))


# ---------------------------------------------------------------------- math accuracy


def _run_unary(op: str, x: np.ndarray, vector_ldexp: bool = False) -> np.ndarray:
    ex = build(unary_kernel(op, x.size, "f32" if x.dtype == np.float32 else "f64"),
               vector_ldexp=vector_ldexp)
    y = np.empty_like(x)
    ex.get("k", 2)(x, y)
    return y


def _f32_samples(lo: float, hi: float, n: int = 200_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    rand = bits.view(np.float32)  # every exponent, both signs, denormals
    rand = rand[np.isfinite(rand) & (rand >= lo) & (rand <= hi)]
    lin = np.linspace(lo, hi, n, dtype=np.float32)
    return np.concatenate([rand, lin]).astype(np.float32)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
                     1.1754944e-38, 88.72283, 88.72284, 88.7, -88.7, 100.0, -100.0,
                     -87.33655, -103.97, -104.0, 1.0, -1.0, 0.5, 3.9, 4.0, 10.0, -10.0],
                    np.float32)


def _check_specials(y, ref):
    ref = ref.astype(np.float32)
    with np.errstate(invalid="ignore"):
        close = np.abs(y - ref) <= 4e-7 * np.abs(ref)
    same = (y == ref) | (np.isnan(y) & np.isnan(ref)) | close
    assert same.all(), list(zip(SPECIALS[~same], y[~same], ref[~same]))


@pytest.fixture(params=[True, False], ids=["vector-ldexp", "portable"])
def vector_ldexp(request):
    """exp scales by 2**n with llvm.ldexp (vscalefps on an AVX-512 target; a libm call per
    element elsewhere, still correct) or with exponent-bit arithmetic: check both on any host."""
    return request.param


def test_exp_accuracy(vector_ldexp):
    x = _f32_samples(-110.0, 100.0)
    y = _run_unary("math.exp", np.concatenate([x, SPECIALS]), vector_ldexp)
    ys, y = y[x.size:], y[:x.size]
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(np.float64))
    normal = (ref >= np.finfo(np.float32).tiny) & (ref <= np.finfo(np.float32).max)
    rel = np.abs(y[normal] - ref[normal]) / ref[normal]
    assert rel.max() <= 5e-7, rel.max()
    # Denormal results: within one denormal step of the correctly rounded value.
    den = (ref < np.finfo(np.float32).tiny)
    assert np.all(np.abs(y[den].astype(np.float64) - ref[den]) <= 2.0**-149)
    assert np.all(np.isinf(y[ref > np.finfo(np.float32).max]))
    with np.errstate(over="ignore"):
        _check_specials(ys, np.exp(SPECIALS.astype(np.float64)))


def test_exp_afn_flushes_only_results_below_flt_min(vector_ldexp):
    """math.exp fastmath<afn> (softmax's and attention's exp): one factor 2**n on every
    target, vscalefps or not, so results below 2^-126 of n <= -127 are +0.0 (those of n = -126
    stay; a masked -inf is never a denormal) and arguments in [88.38, 88.72] (n = 128) +inf;
    every other result is the exact form's bit for bit."""
    x = np.concatenate([_f32_samples(-110.0, 100.0), SPECIALS,
                        np.float32([-87.3365, -87.3366, -87.5, -87.7, 88.37, 88.38, 88.5, 88.72])])
    afn = build(unary_kernel("math.exp", x.size).replace(
        "%y = math.exp %x : f32", "%y = math.exp %x fastmath<afn> : f32"), vector_ldexp=vector_ldexp)
    y = np.empty_like(x)
    afn.get("k", 2)(x, y)
    exact = _run_unary("math.exp", x, vector_ldexp)
    tiny = exact < np.finfo(np.float32).tiny
    band = np.isfinite(exact) & (x.astype(np.float64) * math.log2(math.e) >= 127.5)  # n = 128
    assert np.all(np.isposinf(y[band])) and band.any() and x[band].min() >= 88.376
    # below 2^-126 a result is 0 (n <= -127) or the exact form's (n = -126, y*2^-126 rounded once)
    assert np.all((y[tiny] == 0.0) | (y[tiny] == exact[tiny]))
    assert (y[tiny] == 0.0).sum() > 1000 and (y[tiny & (exact > 0)] > 0).any()
    keep = ~tiny & ~band
    np.testing.assert_array_equal(y[keep], exact[keep])  # NaN == NaN here, inf too
    assert np.isnan(y[np.isnan(x)]).all() and y[x == -np.inf].tolist() == [0.0]


def test_log_accuracy():
    x = _f32_samples(0.0, 3.0e38)
    x = x[x > 0]
    y = _run_unary("math.log", np.concatenate([x, SPECIALS]))
    ys, y = y[x.size:], y[:x.size]
    ref = np.log(x.astype(np.float64))
    err = np.abs(y - ref) / np.maximum(np.abs(ref), 1e-30)
    assert err.max() <= 5e-7, (err.max(), x[np.argmax(err)])
    with np.errstate(divide="ignore", invalid="ignore"):
        _check_specials(ys, np.log(SPECIALS.astype(np.float64)))


@pytest.mark.parametrize("name", ["tanh", "erf"])
def test_tanh_erf_accuracy(name):
    x = _f32_samples(-12.0, 12.0, 100_000)
    y = _run_unary(f"math.{name}", np.concatenate([x, SPECIALS]))
    ys, y = y[x.size:], y[:x.size]
    f = np.tanh if name == "tanh" else np.frompyfunc(math.erf, 1, 1)
    ref = f(x.astype(np.float64)).astype(np.float64)
    err = np.abs(y - ref)
    assert err.max() <= 3e-7, (err.max(), x[np.argmax(err)])
    # Tiny inputs keep their relative accuracy too.
    tiny = (np.abs(x) < 1e-3) & (np.abs(x) > 1e-37)  # denormal results lose bits
    assert np.all(np.abs(y[tiny] - ref[tiny]) <= 1e-6 * np.abs(ref[tiny]))
    refs = f(np.where(np.isnan(SPECIALS), 0, SPECIALS).astype(np.float64)).astype(np.float64)
    refs[np.isnan(SPECIALS)] = np.nan
    _check_specials(ys, refs)


def test_f64_math_uses_libm():
    x = np.linspace(-5, 5, 101)
    for name, ref in [("exp", np.exp), ("tanh", np.tanh),
                      ("erf", np.frompyfunc(math.erf, 1, 1))]:
        np.testing.assert_allclose(_run_unary(f"math.{name}", x),
                                   ref(x).astype(np.float64), rtol=1e-14, atol=1e-15)
    xp = np.linspace(0.1, 5, 101)
    np.testing.assert_allclose(_run_unary("math.log", xp), np.log(xp), rtol=1e-14)


@pytest.mark.parametrize("op,ref", [
    ("math.sqrt", np.sqrt), ("math.absf", np.abs), ("math.floor", np.floor),
    ("math.ceil", np.ceil), ("math.rsqrt", lambda v: 1 / np.sqrt(v)),
    ("math.sin", np.sin), ("math.cos", np.cos),
])
def test_other_unary_math(op, ref):
    x = np.linspace(0.01, 20, 257, dtype=np.float32)
    x[::2] *= -1 if op in ("math.absf", "math.floor", "math.ceil", "math.sin") else 1
    np.testing.assert_allclose(_run_unary(op, x), ref(x), rtol=2e-6, atol=1e-6)


def test_fma_and_powf():
    n = 16
    ex = build(f"""
func.func @f(%a: memref<{n}xf32>, %b: memref<{n}xf32>, %o1: memref<{n}xf32>,
             %o2: memref<{n}xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  scf.for %i = %c0 to %cn step %c1 {{
    %x = memref.load %a[%i] : memref<{n}xf32>
    %y = memref.load %b[%i] : memref<{n}xf32>
    %f = math.fma %x, %y, %x : f32
    memref.store %f, %o1[%i] : memref<{n}xf32>
    %p = math.powf %x, %y : f32
    memref.store %p, %o2[%i] : memref<{n}xf32>
  }}
  func.return
}}""")
    a = np.linspace(0.5, 3, n, dtype=np.float32)
    b = np.linspace(-2, 2, n, dtype=np.float32)
    o1, o2 = np.zeros(n, np.float32), np.zeros(n, np.float32)
    ex.get("f", 4)(a, b, o1, o2)
    np.testing.assert_allclose(o1, a * b + a, rtol=1e-6)
    np.testing.assert_allclose(o2, a.astype(np.float64) ** b, rtol=1e-6)


# --------------------------------------------------------------------------- errors


def test_unknown_op_raises_unsupported():
    m = parse("""
func.func @f(%a: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xi32>
  %y = math.ctlz %x : i32
  memref.store %y, %a[%c0] : memref<4xi32>
  func.return
}""")
    with pytest.raises(UnsupportedOpError, match="math.ctlz"):
        LLVMEmitter().emit(m)


def test_parallel_reduction_rejected():
    m = parse("""
func.func @f(%a: memref<4xf32>, %o: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant 0.0 : f32
  %r = "scf.parallel"(%c0, %c4, %c1, %z) <{operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
  ^bb0(%i: index):
    %x = memref.load %a[%i] : memref<4xf32>
    "scf.reduce"(%x) ({
    ^bb1(%l: f32, %rr: f32):
      %s = arith.addf %l, %rr : f32
      scf.reduce.return %s : f32
    }) : (f32) -> ()
  }) : (index, index, index, f32) -> f32
  memref.store %r, %o[] : memref<f32>
  func.return
}""")
    with pytest.raises(CompileError, match="reduction"):
        LLVMEmitter().emit(m)
