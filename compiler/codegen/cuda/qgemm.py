"""The qgemm kernel kind: an int8 GEMM with int32 accumulation on `__dp4a`.

    qgemm        one gpu_map.qgemm: C[R x N] = (A - zp)[R x K] @ B[N x K]ᵀ, BM x BN of C per
                 block, k through __shared__ BK bytes at a time as 32-bit words of 4 bytes,
                 a TM x TN register tile per thread, each product of words one __dp4a

`__dp4a(a, b, c)` is c plus the four products of a's and b's signed bytes (sm_61 and later,
exact in int32). A word of A's row r holds A[r, k .. k + 3] (zeros past R and K), a word of
B's row j B[j, k .. k + 3] (zeros past N and K), so sum_k A[r, k] B[j, k] is the sum of the
dp4a of their words. The zero point is taken out once at the end: sum_k (A - zp) B =
sum_k A B - zp * sum_k B, the column sums accumulated alongside by __dp4a(b, 0x01010101)
(when zp may be nonzero), in unsigned arithmetic, which wraps as the int32 result would.

With `quantize %params` (dynamic quantization) A is float32 and each element is quantized as
the tile is staged, q = clamp(rint(__fdiv_rn(a, scale)) + zp, -128, 127) (the division rounded
as IEEE's, whatever --prec-div=false does to `/`; rint rounds half to even), then the same
with zp = params[1]. The words are assembled byte by byte: any K and any alignment of A and B.
"""

from __future__ import annotations

from xdsl.ir import Operation

from compiler.codegen.cuda.common import KernelWriter
from compiler.errors import CompileError

QGEMM_THREADS = (16, 16)  # block (x: columns, y: rows)
QGEMM_TILE = (64, 64, 32)  # BM, BN, BK (bytes of k)


def qgemm_config(op) -> tuple[tuple, tuple, tuple]:
    """(grid, block, tile) of the dp4a kernel for gpu_map.qgemm `op`: row tiles on grid x (up
    to 2^31 - 1 of them: an im2col's rows may be many), column tiles on grid y."""
    rows, n, _ = op.sizes
    bm, bn, _ = QGEMM_TILE
    if -(-n // bn) > 65535:
        raise CompileError(f"gpu_map.qgemm: N = {n} columns need more than 65535 blocks of {bn} in grid y")
    return (-(-rows // bm), -(-n // bn)), QGEMM_THREADS, QGEMM_TILE


def emit_qgemm(w: KernelWriter, ops: list[Operation]) -> None:
    if len(ops) != 1 or ops[0].name != "gpu_map.qgemm":
        w.fail("a qgemm kernel must hold one gpu_map.qgemm")
    op = ops[0]
    tile = w.k.tile_dims
    if tile is None or len(tile) != 3 or len(w.k.block_dims) != 2:
        w.fail("a qgemm kernel needs tile = [BM, BN, BK] and a 2-D block")
    bm, bn, bk = tile
    tx, ty = w.k.block_dims
    if bm % ty or bn % tx or bk % 4:
        w.fail(f"tile {bm}x{bn}x{bk} with {tx}x{ty} threads is not a supported shape")
    tm, tn, bkw, nt = bm // ty, bn // tx, bk // 4, tx * ty
    R, N, K = op.sizes
    I, L = w.idx, w.line
    A, B, C = w.val(op.a), w.val(op.b), w.val(op.c)
    w.writes.add(op.c)
    dynamic = op.params is not None
    zp_static = op.zp.value.data
    sums = dynamic or zp_static != 0  # the column sums for the zero point
    L(f"// C[{R}x{N}] = ({'quantize(A)' if dynamic else 'A'} - zp)[{R}x{K}] @ Bᵀ[{K}x{N}] in int32, "
      f"__dp4a on 4 bytes of k: {bm}x{bn} tile per block, {tm}x{tn} per thread, k step {bk}")
    L(f"__shared__ int As[{bkw}][{bm + 1}];  // words of 4 bytes of k, k-major")
    L(f"__shared__ int Bs[{bkw}][{bn + 1}];")
    L(f"const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * {tx} + tx;")
    L(f"const {I} row0 = ({I})blockIdx.x * {bm}, col0 = ({I})blockIdx.y * {bn};")
    if dynamic:
        P = w.val(op.params)
        L(f"const float qscale = {P}[0], qzp = {P}[1];")
        L("const int zp = (int)qzp;")
    else:
        L(f"const int zp = {zp_static};")
    L(f"int acc[{tm}][{tn}];")
    L(f"int cs[{tn}];  // column sums of B (the zero point's correction)")
    L(f"for (int i = 0; i < {tm}; ++i)")
    L(f"  for (int j = 0; j < {tn}; ++j) acc[i][j] = 0;")
    L(f"for (int j = 0; j < {tn}; ++j) cs[j] = 0;")
    L(f"for ({I} k0 = 0; k0 < {K}; k0 += {bk}) {{")
    w.ind += 1
    # A's tile: bm rows x bkw words; consecutive threads take consecutive words of a row
    L(f"for (int e = tid; e < {bm * bkw}; e += {nt}) {{")
    w.ind += 1
    L(f"const int r = e / {bkw}, kw = e % {bkw};")
    L(f"const {I} gr = row0 + r, gk = k0 + 4 * kw;")
    L("unsigned word = 0;")
    L(f"if (gr < {R}) {{")
    L("  #pragma unroll")
    L("  for (int t = 0; t < 4; ++t) {")
    L(f"    if (gk + t < {K}) {{")
    if dynamic:
        L(f"      float q = rintf(__fdiv_rn({A}[gr * {K} + gk + t], qscale)) + qzp;")
        L("      q = fminf(fmaxf(q, -128.0f), 127.0f);")
        L("      word |= ((unsigned)(int)q & 0xffu) << (8 * t);")
    else:
        L(f"      word |= ((unsigned)(unsigned char){A}[gr * {K} + gk + t]) << (8 * t);")
    L("    }")
    L("  }")
    L("}")
    L("As[kw][r] = (int)word;")
    w.ind -= 1
    L("}")
    L(f"for (int e = tid; e < {bn * bkw}; e += {nt}) {{")
    w.ind += 1
    L(f"const int c = e / {bkw}, kw = e % {bkw};")
    L(f"const {I} gc = col0 + c, gk = k0 + 4 * kw;")
    L("unsigned word = 0;")
    L(f"if (gc < {N}) {{")
    L("  #pragma unroll")
    L("  for (int t = 0; t < 4; ++t)")
    L(f"    if (gk + t < {K}) word |= ((unsigned)(unsigned char){B}[gc * {K} + gk + t]) << (8 * t);")
    L("}")
    L("Bs[kw][c] = (int)word;")
    w.ind -= 1
    L("}")
    L("__syncthreads();")
    L("#pragma unroll")
    L(f"for (int kw = 0; kw < {bkw}; ++kw) {{")
    w.ind += 1
    L(f"int a[{tm}], b[{tn}];")
    L(f"for (int i = 0; i < {tm}; ++i) a[i] = As[kw][ty + {ty} * i];")
    L(f"for (int j = 0; j < {tn}; ++j) b[j] = Bs[kw][tx + {tx} * j];")
    if sums:
        L(f"for (int j = 0; j < {tn}; ++j) cs[j] = __dp4a(b[j], 0x01010101, cs[j]);")
    L(f"for (int i = 0; i < {tm}; ++i)")
    L(f"  for (int j = 0; j < {tn}; ++j) acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);")
    w.ind -= 1
    L("}")
    L("__syncthreads();")
    w.ind -= 1
    L("}")
    L(f"for (int i = 0; i < {tm}; ++i) {{")
    L(f"  const {I} r = row0 + ty + {ty} * i;")
    L(f"  if (r >= {R}) break;")
    L(f"  for (int j = 0; j < {tn}; ++j) {{")
    L(f"    const {I} c = col0 + tx + {tx} * j;")
    L(f"    if (c < {N}) {C}[r * {N} + c] = (int)((unsigned)acc[i][j] - (unsigned)zp * (unsigned)cs[j]);")
    L("  }")
    L("}")
