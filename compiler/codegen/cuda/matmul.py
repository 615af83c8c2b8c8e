"""The matmul kernel kind: C[M x N] (+)= A[M x K] @ B[K x N], batched or not.

    matmul       BM x BN tiles of A and B in double-buffered __shared__ (float4 loads), a
                 register tile per thread, batch on grid z, the fill and epilogues fused,
                 guards on every edge tile

An operand may be read transposed (k contiguous or not) or computed in place from the ops
that produce it (`(computed)` in the kernel's comment). A fill before the matmul becomes
the start value of C, and elementwise nests after it (the group's epilogues) run on each
output point in registers (KernelWriter.finish_point).
"""

from __future__ import annotations

from xdsl.ir import Operation

from compiler.codegen.cuda.common import KernelWriter
from compiler.codegen.cuda.patterns import match_matmul, split_main_group
from compiler.symbolic import exact_div


def _multiple_of_4(x) -> bool:
    """Whether a size (an int, or a dynamic size's Sym) is a multiple of 4 for every value."""
    return x % 4 == 0 if isinstance(x, int) else exact_div(x, 4) is not None


def emit_matmul(w: KernelWriter, ops: list[Operation]) -> None:
    """Block (x, y, z) computes the BM x BN tile of C at (row0, col0) = (y * BM, x * BN) of
    batch entry z; thread (tx, ty) holds a TM x TN register tile of it. A and B pass through
    __shared__ BK values of k at a time, the next step's tiles loaded while this one's are
    multiplied."""
    found = split_main_group(w.loop_nests(ops), match_matmul, lambda mm: mm.c)
    if found is None:
        w.fail("its nests are not [fill] matmul [epilogues]")
    mm, group = found
    kernel = _MatmulKernel(w, mm, group)
    kernel.declare()
    kernel.k_loop()
    kernel.store_results()


class _MatmulKernel:
    """The matmul of one kernel, its tile configuration, and the parts of its body."""

    def __init__(self, w: KernelWriter, mm, group):
        self.w, self.mm, self.group = w, mm, group
        cfg = w.k.tile_dims
        if cfg is None or len(cfg) != 3 or len(w.k.block_dims) != 2:
            w.fail("a matmul kernel needs tile = [BM, BN, BK] and a 2-D block")
        bm, bn, bk = cfg
        tx, ty = w.k.block_dims
        nt = tx * ty
        if bm % ty or bn % tx or (bm // ty) % 4 or (bn // tx) % 4 or bk % 4 or bm % 16 \
                or bn % 16 or (bm * bk // 4) % nt or (bk * bn // 4) % nt:
            w.fail(f"tile {bm}x{bn}x{bk} with {tx}x{ty} threads is not a supported shape")
        tm, tn = bm // ty, bn // tx
        if tm * tn >= 64:  # at most 128 registers: two 256-thread blocks per SM hide latency
            w.min_blocks = 65536 // (nt * 128)
        self.bm, self.bn, self.bk, self.tx, self.ty, self.nt, self.tm, self.tn = (
            bm, bn, bk, tx, ty, nt, tm, tn)
        self.M, self.N, self.K = mm.m, mm.n, mm.k_ext
        # operand -> (smem, operand, its iv, mn extent, mn origin, tile mn, staging registers)
        self.operands = [("As", mm.a, mm.i, self.M, "row0", bm, "ra"),
                         ("Bs", mm.b, mm.j, self.N, "col0", bn, "rb")]
        self.batch: list[str] = []

    def declare(self) -> None:
        """The kernel's comment, the __shared__ tiles, the thread and block coordinates, the
        batch ivs, the staging registers and the zeroed accumulators."""
        w, mm = self.w, self.mm
        M, N, K, L = self.M, self.N, self.K, w.line
        bm, bn, bk, tx, tm, tn = self.bm, self.bn, self.bk, self.tx, self.tm, self.tn
        desc = lambda o, name: name + ("" if o.plain else "(computed)") + (  # noqa: E731
            "" if o.k_contig == (name == "A") else "ᵀ")
        L(f"// C[{M}x{N}] += {desc(mm.a, 'A')}[{M}x{K}] @ {desc(mm.b, 'B')}[{K}x{N}]"
          + (f", {mm.batch_size} batches on grid z" if mm.batch else "")
          + f": {bm}x{bn} tile per block, {tm}x{tn} per thread, k step {bk}, double-buffered")
        L(f"__shared__ __align__(16) float As[2][{bk}][{bm + 4}];  // k-major; the pad keeps "
          "the transposing stores free of bank conflicts")
        L(f"__shared__ __align__(16) float Bs[2][{bk}][{bn + 4}];")
        L(f"const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * {tx} + tx;")
        L(f"const int row0 = blockIdx.y * {bm}, col0 = blockIdx.x * {bn};")
        self.batch = w.split_linear("blockIdx.z", mm.batch_extents) if mm.batch else []
        for a, name in zip(mm.batch, self.batch):
            w.names[a] = name
        for sm, _, _, _, _, tmn, reg in self.operands:
            L(f"float4 {reg}[{(tmn * bk // 4) // self.nt}];  // the next k step's {sm[0]} tile, "
              "staged in registers")
        L(f"float acc[{tm}][{tn}];")
        L(f"#pragma unroll\nfor (int i = 0; i < {tm}; ++i)")
        L(f"  #pragma unroll\n  for (int j = 0; j < {tn}; ++j) acc[i][j] = 0.0f;")

    def base(self, load) -> str:
        """`offset + ` of the matrix that `load` reads in its buffer (its batch entry), or ``
        at offset 0."""
        idx = list(load.indices[:-2]) + ["0", "0"]
        off = self.w.offset(load.memref, idx)
        return "" if off == "0" else f"{off} + "

    def computed(self, o, own, g_mn: str, g_k: str, ok: str, dst: str) -> None:
        """dst = the operand computed at (g_mn, g_k), or 0 outside the matrix."""
        w, L = self.w, self.w.line
        L(f"{{ const {w.idx} gmn = {g_mn}, gk = {g_k};")
        L(f"  if ({ok.format(mn='gmn', k='gk')}) {{")
        w.ind += 2
        w.names[own], w.names[self.mm.k] = "gmn", "gk"
        w.emit_ops(o.ops)
        L(f"{dst} = {w.val(o.value)};")
        w.ind -= 2
        L(f"  }} else {dst} = 0.0f;")
        L("}")

    def load_global(self, k0: str) -> None:
        """Each thread's share of the A and B tiles of the k step at `k0`, from global memory
        into its staging registers (float4 when the rows allow it; 0 outside the matrix)."""
        w, L, I, K = self.w, self.w.line, self.w.idx, self.K
        bk, nt = self.bk, self.nt
        for sm, o, own, ext, org, tmn, reg in self.operands:
            count = (tmn * bk // 4) // nt
            ptr = w.val(o.load.memref) if o.plain else None
            off = self.base(o.load) if o.plain else ""
            for t in range(count):
                l = f"tid + {t * nt}" if t else "tid"
                if o.k_contig:  # rows of the tile run along k: 16 rows x 2 float4 per warp
                    kq = bk // 4
                    mn = f"(({l}) % 16 + 16 * (({l}) / {16 * kq}))"
                    kk = f"((({l}) / 16) % {kq}) * 4"
                    g = lambda q: (f"{org} + {mn}", f"{k0} + {kk}" + (f" + {q}" if q else ""))  # noqa: E731
                    ld, vec = K, _multiple_of_4(K)
                else:  # the tile's rows run along m (or n): float4 along the contiguous dim
                    per = tmn // 4
                    kk, mn = f"({l}) / {per}", f"(({l}) % {per}) * 4"
                    g = lambda q: (f"{org} + {mn}" + (f" + {q}" if q else ""), f"{k0} + {kk}")  # noqa: E731
                    ld, vec = ext, _multiple_of_4(ext)
                ok = f"{{mn}} < {ext} && {{k}} < {K}"
                if not o.plain:
                    for q, c in enumerate("xyzw"):
                        self.computed(o, own, *g(q), ok, f"{reg}[{t}].{c}")
                    continue
                g_mn, g_k = g(0)
                addr = f"{off}({I})({g_k if not o.k_contig else g_mn}) * {ld} + " \
                       f"{g_mn if not o.k_contig else g_k}"
                if vec:
                    L(f"{reg}[{t}] = ({ok.format(mn=g_mn, k=g_k)}) ? *reinterpret_cast"
                      f"<const float4*>(&{ptr}[{addr}]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);")
                else:
                    for q, c in enumerate("xyzw"):
                        L(f"{reg}[{t}].{c} = ({ok.format(mn=g(q)[0], k=g(q)[1])}) ? "
                          f"{ptr}[{addr} + {q}] : 0.0f;")

    def store_shared(self, buf: str) -> None:
        """The staging registers into __shared__ buffer `buf` of As and Bs (k-major: a tile
        whose rows run along k is transposed on the way)."""
        L, bk, nt = self.w.line, self.bk, self.nt
        for sm, o, own, ext, org, tmn, reg in self.operands:
            count = (tmn * bk // 4) // nt
            for t in range(count):
                l = f"tid + {t * nt}" if t else "tid"
                if o.k_contig:
                    kq = bk // 4
                    mn = f"({l}) % 16 + 16 * (({l}) / {16 * kq})"
                    kk = f"((({l}) / 16) % {kq}) * 4"
                    L("{")
                    L(f"  const int mn = {mn}, kk = {kk};")
                    for q, c in enumerate("xyzw"):
                        L(f"  {sm}[{buf}][kk + {q}][mn] = {reg}[{t}].{c};")
                    L("}")
                else:
                    per = tmn // 4
                    L(f"*reinterpret_cast<float4*>(&{sm}[{buf}][({l}) / {per}]"
                      f"[(({l}) % {per}) * 4]) = {reg}[{t}];")

    def k_loop(self) -> None:
        """The prologue (the first k step's tiles into buffer 0), then the loop over k steps:
        issue the next step's global loads, multiply this step's tiles, store the next ones
        into the other buffer, one barrier."""
        w, L, K, bk = self.w, self.w.line, self.K, self.bk
        L("// prologue: the first k step's tiles")
        self.load_global("0")
        self.store_shared("0")
        L("__syncthreads();")
        L(f"for (int k0 = 0, cur = 0; k0 < {K}; k0 += {bk}, cur ^= 1) {{")
        w.ind += 1
        L(f"const bool more = k0 + {bk} < {K};")
        L("if (more) {  // issue the next step's global loads before computing on this one")
        w.ind += 1
        self.load_global(f"(k0 + {bk})")
        w.ind -= 1
        L("}")
        self.multiply_tiles()
        L("if (more) {  // fill the other buffer; the barrier below publishes it")
        w.ind += 1
        self.store_shared("cur ^ 1")
        w.ind -= 1
        L("}")
        L("__syncthreads();")
        w.ind -= 1
        L("}")

    def multiply_tiles(self) -> None:
        """acc += the thread's rows of As[cur] @ its columns of Bs[cur], one k at a time, a
        and b read from __shared__ as float4."""
        w, L = self.w, self.w.line
        bk, tx, ty, tm, tn = self.bk, self.tx, self.ty, self.tm, self.tn
        L("#pragma unroll")
        L(f"for (int kk = 0; kk < {bk}; ++kk) {{")
        w.ind += 1
        L(f"float a[{tm}], b[{tn}];")
        for g in range(tm // 4):
            L(f"{{ const float4 t = *reinterpret_cast<const float4*>(&As[cur][kk][ty * 4 + {g * 4 * ty}]);"
              f" a[{4 * g}] = t.x; a[{4 * g + 1}] = t.y; a[{4 * g + 2}] = t.z; a[{4 * g + 3}] = t.w; }}")
        for g in range(tn // 4):
            L(f"{{ const float4 t = *reinterpret_cast<const float4*>(&Bs[cur][kk][tx * 4 + {g * 4 * tx}]);"
              f" b[{4 * g}] = t.x; b[{4 * g + 1}] = t.y; b[{4 * g + 2}] = t.z; b[{4 * g + 3}] = t.w; }}")
        L(f"#pragma unroll\nfor (int i = 0; i < {tm}; ++i)")
        L(f"  #pragma unroll\n  for (int j = 0; j < {tn}; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);")
        w.ind -= 1
        L("}")

    def store_results(self) -> None:
        """The register tile into C: thread (tx, ty) holds rows ty*4 + 4*ty_count*g + 0..3,
        likewise columns; float4 stores when no epilogue runs and rows of C allow it, else
        one point at a time through the epilogues."""
        w, L, I = self.w, self.w.line, self.w.idx
        init = None if self.group.fill is None else w.val(self.group.fill)
        L("#pragma unroll")
        L(f"for (int i = 0; i < {self.tm}; ++i) {{")
        w.ind += 1
        L(f"const {I} r = row0 + ty * 4 + (i / 4) * {4 * self.ty} + (i & 3);")
        if not self.group.epilogues and _multiple_of_4(self.N):
            self.store_float4(init)
        else:
            self.store_points(init)
        w.ind -= 1
        L("}")

    def store_float4(self, init: str | None) -> None:
        """Row r of the thread's tile, 4 columns at a time: acc plus C's old value (no fill)
        or the fill value, guarded at the matrix's edges."""
        w, L, I, M, N = self.w, self.w.line, self.w.idx, self.M, self.N
        L("#pragma unroll")
        L(f"for (int g = 0; g < {self.tn // 4}; ++g) {{")
        w.ind += 1
        L(f"const {I} c = col0 + tx * 4 + g * {4 * self.tx};")
        L(f"if (r < {M} && c < {N}) {{")
        w.ind += 1
        cidx = f"{self.base(self.mm.c_init)}({I})r * {N} + c"
        C = w.val(self.mm.c)
        L("float4 v = make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], "
          "acc[i][4 * g + 3]);")
        if init is None:
            L(f"const float4 c0 = *reinterpret_cast<const float4*>(&{C}[{cidx}]);")
            L("v.x += c0.x; v.y += c0.y; v.z += c0.z; v.w += c0.w;")
        elif init not in ("0.0f", "0"):
            L(f"v.x += {init}; v.y += {init}; v.z += {init}; v.w += {init};")
        L(f"*reinterpret_cast<float4*>(&{C}[{cidx}]) = v;")
        w.ind -= 1
        L("}")
        w.ind -= 1
        L("}")

    def store_points(self, init: str | None) -> None:
        """Row r of the thread's tile, one point at a time: acc plus C's old value or the
        fill value, guarded, then finished with the epilogues (KernelWriter.finish_point)."""
        w, L, I, M, N = self.w, self.w.line, self.w.idx, self.M, self.N
        L("#pragma unroll")
        L(f"for (int j = 0; j < {self.tn}; ++j) {{")
        w.ind += 1
        L(f"const {I} c = col0 + tx * 4 + (j / 4) * {4 * self.tx} + (j & 3);")
        L(f"if (r < {M} && c < {N}) {{")
        w.ind += 1
        index = [*self.batch, "r", "c"]
        if init is None:
            v = f"acc[i][j] + {w.addr(self.mm.c, index)}"
        else:
            v = "acc[i][j]" if init in ("0.0f", "0") else f"acc[i][j] + {init}"
        L(f"const float v = {v};")
        w.finish_point(self.mm.c, "v", index, self.group.epilogues)
        w.ind -= 1
        L("}")
        w.ind -= 1
        L("}")
