"""Branch-free, vectorizable f32 exp/log/tanh/erf emitted as llvmlite IR.

Every function takes an ``llvmlite.ir.IRBuilder`` and a float value (scalar or vector of
float) and returns the result value. The code uses only arithmetic, bit operations,
``select`` and LLVM intrinsics that have vector forms, so the loop vectorizer turns a loop
calling them into straight-line SIMD code. f64 values go to libm (through the LLVM
intrinsic where there is one).

Accuracy on f32 against a float64 reference (measured in tests/test_codegen_llvm.py):
exp and log within a few 1e-7 relative over the whole finite range, tanh and erf within
3e-7 absolute; inf, -inf, NaN, zeros and denormals behave like NumPy.
"""

from __future__ import annotations

from llvmlite import ir

F32 = ir.FloatType()
F64 = ir.DoubleType()
I32 = ir.IntType(32)

# exp: Cephes expf's range reduction. ln2 split in two so n*LN2_HI is exact; then
# exp(r) = 1 + r + r^2 * Q(r) on |r| <= ln2/2, Q of degree 4 (six FMAs in one Horner chain).
# Q is a minimax fit of (exp(r) - 1 - r) / r^2 for the relative error of exp(r): 3.1e-9
# before rounding, far below float32's 6e-8, so exp(x) is within 0.88 ulp over [-87, 88]
# (94% correctly rounded), as with Cephes' Q of degree 5, which costs a seventh FMA.
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_POLY = (1.3814324047416449e-3, 8.368851616978645e-3, 4.1668400168418884e-2,
             1.666651964187622e-1, 4.999999403953552e-1)
# Outside [lo, hi] the result is 0 resp. inf anyway; clamping keeps n inside int range.
_EXP_CLAMP_HI = 89.0
_EXP_CLAMP_LO = -104.0
# `flush` (one factor 2^n): x * log2(e) >= -126.96 rounds to n >= -127, whose factor is +0.0,
# as every result below 2^-126 of n <= -127 is there
_EXP_FLUSH_LO = -88.0
_ROUND_MAGIC = 12582912.0  # 1.5 * 2**23: x + it rounds x to an integer, held in its low bits
_ROUND_MAGIC_BITS = 0x4B400000

# log: Cephes logf. Polynomial for log(1+x) - x + x^2/2 divided by x^3, on [sqrt(1/2)-1, sqrt(2)-1].
_LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
             1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
             3.3333331174e-1)
_SQRTHF = 0.707106781186547524
_FLT_MIN = 1.17549435e-38

# tanh: Cephes tanhf odd polynomial for |x| < 0.625.
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
              -3.33332819422e-1)
_TANH_SMALL = 0.625

# erf: fitted here (weighted least squares on Chebyshev nodes, checked in f32).
#   |x| < 0.9:  erf(x) = x * P(x^2)
#   |x| >= 0.9: erf(x) = 1 - exp(-x^2) * Q(1/|x|), Q ~ erfc(x) * exp(x^2)
_ERF_SMALL = 0.9
_ERF_P = (8.53941310197115e-05, -0.0008182077435776591, 0.005204451270401478,
          -0.026860760524868965, 0.11283719539642334, -0.37612634897232056,
          1.128379225730896)
_ERF_Q = (-0.0038807177916169167, 0.0028265647124499083, 0.0736120194196701,
          -0.2945176661014557, 0.5297213196754456, -0.4838087260723114,
          0.04457836225628853, 0.5587723851203918, 0.0002799856592901051)


# ---------------------------------------------------------------------------- helpers


def _scalar(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def _const(ty: ir.Type, value) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)
    return ir.Constant(ty, value)


def _like(ty: ir.Type, elem: ir.Type) -> ir.Type:
    """The type shaped like ``ty`` (scalar or vector) with element type ``elem``."""
    return ir.VectorType(elem, ty.count) if isinstance(ty, ir.VectorType) else elem


def type_suffix(ty: ir.Type) -> str:
    def one(t):
        if isinstance(t, ir.FloatType):
            return "f32"
        if isinstance(t, ir.DoubleType):
            return "f64"
        if isinstance(t, ir.HalfType):
            return "f16"
        if isinstance(t, ir.IntType):
            return f"i{t.width}"
        raise TypeError(f"no intrinsic suffix for {t}")

    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{one(ty.element)}"
    return one(ty)


def intrinsic(builder: ir.IRBuilder, base: str, ty: ir.Type, nargs: int) -> ir.Function:
    """Declare (once) the overloaded intrinsic ``llvm.<base>.<suffix(ty)>`` taking ``nargs``
    operands of type ``ty`` and returning ``ty``."""
    module = builder.module
    name = f"llvm.{base}.{type_suffix(ty)}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name=name)
    return fn


def libm(builder: ir.IRBuilder, name: str, ty: ir.Type) -> ir.Function:
    module = builder.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ty, [ty]), name=name)
    return fn


def call_intrinsic(builder: ir.IRBuilder, base: str, *args, fastmath=()):
    fn = intrinsic(builder, base, args[0].type, len(args))
    return builder.call(fn, list(args), fastmath=fastmath)


def _fma(b: ir.IRBuilder, x, y, z):
    """x*y + z, fused where the target has FMA (llvm.fmuladd)."""
    return call_intrinsic(b, "fmuladd", x, y, z)


def _horner(b: ir.IRBuilder, coeffs, x):
    ty = x.type
    acc = _const(ty, coeffs[0])
    for c in coeffs[1:]:
        acc = _fma(b, acc, x, _const(ty, c))
    return acc


def _is_f32(ty: ir.Type) -> bool:
    return isinstance(_scalar(ty), ir.FloatType)


def _libm_scalar_or_vector(b: ir.IRBuilder, name: str, x):
    """Call a libm double function, element by element for vectors."""
    ty = x.type
    fn = libm(b, name, _scalar(ty))
    if not isinstance(ty, ir.VectorType):
        return b.call(fn, [x])
    out = ir.Constant(ty, ir.Undefined)
    for i in range(ty.count):
        idx = ir.Constant(I32, i)
        out = b.insert_element(out, b.call(fn, [b.extract_element(x, idx)]), idx)
    return out


def _ldexp(b: ir.IRBuilder, y, n):
    """y * 2**n with one rounding (llvm.ldexp: vscalefps on AVX-512)."""
    module = b.module
    name = f"llvm.ldexp.{type_suffix(y.type)}.{type_suffix(n.type)}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(y.type, [y.type, n.type]), name=name)
    return b.call(fn, [y, n])


# ---------------------------------------------------------------------------- functions


def emit_exp(b: ir.IRBuilder, x, vector_ldexp: bool = False, flush: bool = False,
             nonpositive: bool = False):
    """exp(x). `vector_ldexp`: the target lowers llvm.ldexp on vectors to one instruction
    (AVX-512 vscalefps); elsewhere it would become a libm call per element.

    `flush` (math.exp marked `afn`): 2^n is one factor built in the exponent field, on every
    target, so results below 2^-126 (FLT_MIN) are +0.0 and arguments in [88.38, 88.72]
    (n = 128) give +inf, not their finite exp. Softmax and attention mark their exp so: its
    argument (x - max) is never above 0, and then every result of 2^-126 or more is the exact
    form's, bit for bit (as ONNX Runtime's softmax, which flushes the same way). vscalefps is
    not used there: a masked score (-inf), clamped to -104, would come out as the smallest
    denormal, 2^-149, and an Intel core takes a microcode assist of about a hundred cycles for each
    vector that makes or reads one, in the exp and again in attention's p @ v. One thread,
    Sapphire Rapids-class Xeon, alternately in one process: attention 12 x 197 x 64 (27 masked
    keys in the last block) 1.64 -> 1.23 ms, causal 8 x 1024 x 64 11.0 -> 9.4 ms, unmasked
    shapes 2-4% faster (the shift and add cost no more than vscalefps).

    `nonpositive` (math.exp marked NONPOSITIVE_ARG): x is never above 0 (or NaN), so the upper
    clamp, there for arguments whose 2^n would overflow, is left out: one op fewer a vector."""
    ty = x.type
    if not _is_f32(ty):
        return call_intrinsic(b, "exp", x)
    ity = _like(ty, I32)
    # Clamp with compare+select written so that a NaN x passes through (one vminps/vmaxps
    # each): it then runs through the arithmetic below and comes out NaN, with no check.
    hi, lo = _const(ty, _EXP_CLAMP_HI), _const(ty, _EXP_FLUSH_LO if flush else _EXP_CLAMP_LO)
    xc = x if nonpositive else b.select(b.fcmp_ordered(">", x, hi), hi, x)
    xc = b.select(b.fcmp_ordered("<", xc, lo), lo, xc)
    # n = round(x * log2(e)), to nearest even, by adding 1.5 * 2**23: the sum's low mantissa
    # bits are n (|n| <= 151), so n is read from its bits (never fptosi, whose NaN is poison).
    t = _fma(b, xc, _const(ty, _LOG2E), _const(ty, _ROUND_MAGIC))
    nf = b.fsub(t, _const(ty, _ROUND_MAGIC))
    r = _fma(b, nf, _const(ty, -_LN2_HI), xc)
    r = _fma(b, nf, _const(ty, -_LN2_LO), r)
    # exp(r) = 1 + r + r^2 * Q(r), all as one Horner chain.
    y = _horner(b, _EXP_POLY + (1.0, 1.0), r)
    if flush:
        # 2**n as one float: its bits (n + 127) << 23. t's bits are the magic's plus n, and
        # the magic's shifted by 23 vanish modulo 2^32, so they are (t's bits << 23) plus
        # 127 << 23, the bits of 1.0 (a constant the polynomial holds already). The clamp at
        # _EXP_FLUSH_LO keeps n >= -127: n = -127 gives the factor +0.0, and so the result
        # (a NaN x stays NaN); n = 128 gives e = 255, +inf. For -126 <= n <= 127 the factor
        # is exact, and the product is the two-factor form's (one rounding at most). Two
        # integer ops and no constant of their own: AVX2's 16 registers hold the loop's.
        bits = b.add(b.shl(b.bitcast(t, ity), _const(ity, 23)), _const(ity, 127 << 23))  # 1.0's bits
        y = b.fmul(y, b.bitcast(bits, ty))
    elif vector_ldexp:
        y = _ldexp(b, y, b.sub(b.bitcast(t, ity), _const(ity, _ROUND_MAGIC_BITS)))
    else:
        # 2**n in two factors, 2**n1 * 2**n2 with n1 = floor(n / 2), so that results in the
        # denormal range (n < -126) and the overflow boundary (n = 128) come out with a
        # single rounding. The exponent bias is folded into t's bits: e = n + 254 (t's bits
        # minus the magic's plus 254), e1 = e >> 1 = n1 + 127 and e - e1 = n2 + 127 are the
        # two factors' biased exponents, each one shift from a float.
        e = b.sub(b.bitcast(t, ity), _const(ity, _ROUND_MAGIC_BITS - 254))
        e1 = b.ashr(e, _const(ity, 1))
        p1 = b.bitcast(b.shl(e1, _const(ity, 23)), ty)
        p2 = b.bitcast(b.shl(b.sub(e, e1), _const(ity, 23)), ty)
        y = b.fmul(b.fmul(y, p1), p2)
    return y


def emit_log(b: ir.IRBuilder, x, vector_ldexp: bool = False):
    ty = x.type
    if not _is_f32(ty):
        return call_intrinsic(b, "log", x)
    ity = _like(ty, I32)
    # Denormal inputs: scale by 2**23 first so the exponent field is meaningful.
    is_den = b.fcmp_ordered("<", x, _const(ty, _FLT_MIN))
    xs = b.select(is_den, b.fmul(x, _const(ty, 8388608.0)), x)
    bits = b.bitcast(xs, ity)
    e = b.sub(b.lshr(bits, _const(ity, 23)), _const(ity, 126))
    e = b.sub(e, b.select(is_den, _const(ity, 23), _const(ity, 0)))
    m = b.bitcast(b.or_(b.and_(bits, _const(ity, 0x007FFFFF)), _const(ity, 0x3F000000)), ty)
    small = b.fcmp_ordered("<", m, _const(ty, _SQRTHF))
    e = b.sub(e, b.zext(small, ity))
    xm = b.fsub(b.select(small, b.fadd(m, m), m), _const(ty, 1.0))
    ef = b.sitofp(e, ty)
    z = b.fmul(xm, xm)
    y = b.fmul(b.fmul(_horner(b, _LOG_POLY, xm), xm), z)
    y = _fma(b, ef, _const(ty, _LN2_LO), y)
    y = _fma(b, z, _const(ty, -0.5), y)
    r = b.fadd(xm, y)
    r = _fma(b, ef, _const(ty, _LN2_HI), r)
    inf = _const(ty, float("inf"))
    r = b.select(b.fcmp_ordered("==", x, inf), inf, r)
    r = b.select(b.fcmp_ordered("==", x, _const(ty, 0.0)), _const(ty, float("-inf")), r)
    r = b.select(b.fcmp_ordered("<", x, _const(ty, 0.0)), _const(ty, float("nan")), r)
    return b.select(b.fcmp_unordered("uno", x, x), x, r)


def emit_tanh(b: ir.IRBuilder, x, vector_ldexp: bool = False):
    ty = x.type
    if not _is_f32(ty):
        return _libm_scalar_or_vector(b, "tanh", x)
    ax = call_intrinsic(b, "fabs", x)
    z = b.fmul(x, x)
    ys = _fma(b, b.fmul(_horner(b, _TANH_POLY, z), z), x, x)
    # exp's `flush` form changes nothing here: its argument is at least 1.25, and where it
    # gives +inf for a finite exp (2|x| in [88.38, 88.72]), 1 - 2/(e + 1) is 1.0 both ways
    e = emit_exp(b, b.fadd(ax, ax), vector_ldexp, flush=True)
    one = _const(ty, 1.0)
    yl = b.fsub(one, b.fdiv(_const(ty, 2.0), b.fadd(e, one)))
    yl = call_intrinsic(b, "copysign", yl, x)
    return b.select(b.fcmp_ordered("<", ax, _const(ty, _TANH_SMALL)), ys, yl)


def emit_erf(b: ir.IRBuilder, x, vector_ldexp: bool = False):
    ty = x.type
    if not _is_f32(ty):
        return _libm_scalar_or_vector(b, "erf", x)
    ax = call_intrinsic(b, "fabs", x)
    z = b.fmul(x, x)
    ys = b.fmul(x, _horner(b, _ERF_P, z))
    q = _horner(b, _ERF_Q, b.fdiv(_const(ty, 1.0), ax))
    # `flush` changes nothing: where exp(-x^2) is below 2^-126 (|x| > 9.3), 1 - e*q is 1.0
    e = emit_exp(b, b.fneg(z), vector_ldexp, flush=True)
    yl = b.fsub(_const(ty, 1.0), b.fmul(e, q))
    yl = call_intrinsic(b, "copysign", yl, x)
    return b.select(b.fcmp_ordered("<", ax, _const(ty, _ERF_SMALL)), ys, yl)
