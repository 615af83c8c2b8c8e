"""The attention kernel kind: flash attention for one aicc_fused.attention op.

    attention    a block per (batch entry, BQ query rows), T threads per row holding q's row
                 and the output accumulator in registers, k and v staged KB keys at a time in
                 __shared__, scores and online softmax 16 keys at a time, causal sweeps
                 stopping at each warp's last row

softmax(scale * q @ kᵀ [masked]) @ v, flash-attention style: no score matrix.

Block (batch entry b, query block qb) runs BQ rows with T threads each; thread `lane` of a
row owns the head-dim elements 4 * (lane + T * g) + u (u < 4), of q (in registers, zero past
E) and of the output accumulator. Per KB-key tile of k and v, staged in __shared__ (zero past
S and past the head dims, so the float4 reads need no guard), each thread walks the keys 16
at a time:
    s[c] = dot(q, k_j) summed over the row's T lanes (shuffles), * scale, masked
           (additive, or boolean with the op's fill), -inf past S or above the diagonal
    m' = max(m, max_c s[c]); ms = m' == -inf ? 0 : m'  (nothing seen yet adds nothing)
    p[c] = exp(s[c] - ms); l = l * exp(m - ms) + sum_c p[c]
    acc = acc * exp(m - ms) + sum_c p[c] * v_j; m = m'
and writes acc / l (a row whose scores are all masked: 0 / 0 = NaN, as on the CPU). Rows
past L compute row L-1 (every thread takes part in the barriers and shuffles) and are not
written. Causal: the tiles stop after the block's last row, and each warp's 16-key steps
after its own last row (the warp's threads agree, so shuffles stay whole).
"""

from __future__ import annotations

import math

from xdsl.dialects import builtin
from xdsl.ir import Operation

from compiler.codegen.cuda.common import KernelWriter, f32_text
from compiler.codegen.cuda.patterns import attention_sizes
from compiler.symbolic import ceildiv_expr

ATTENTION_CHUNK = 16  # keys an attention thread scores at a time, in registers


def emit_attention(w: KernelWriter, ops: list[Operation]) -> None:
    """The flash-attention kernel of the kernel's one aicc_fused.attention op (see the module
    docstring): the setup, q into registers, the loop over key tiles, the output."""
    if len(ops) != 1 or ops[0].name != "aicc_fused.attention":
        w.fail("an attention kernel must hold one aicc_fused.attention")
    kernel = _AttentionKernel(w, ops[0])
    kernel.declare()
    kernel.load_q()
    kernel.key_tiles()
    kernel.write_output()


class _AttentionKernel:
    """One attention op, its tile configuration (BQ rows of T threads, KB-key tiles), and
    the parts of its kernel's body."""

    def __init__(self, w: KernelWriter, op):
        from compiler.dialects.aicc_fused import AttentionOp

        assert isinstance(op, AttentionOp)
        self.w, self.op = w, op
        tile = w.k.tile_dims
        if tile is None or len(tile) != 3:
            w.fail("an attention kernel needs tile = [BQ, KB, T]")
        bq, kb, T = tile
        ch = ATTENTION_CHUNK
        batch, L, S, E, F = attention_sizes(op)
        nt = bq * T
        if math.prod(w.k.block_dims) != nt or kb % ch or T & (T - 1) or 32 % T \
                or nt % 32 or (32 // T) > bq:
            w.fail(f"tile {tile} with block {w.k.block_dims} is not a supported shape")
        if not all(isinstance(v.type.element_type, builtin.Float32Type)
                   for v in (op.q, op.k, op.v, op.out)):
            w.fail("the attention kernel takes f32 q, k, v and result")
        qblocks = ceildiv_expr(L, bq)
        if all(isinstance(g, int) for g in w.k.grid_dims) \
                and math.prod(batch) * qblocks != math.prod(w.k.grid_dims):
            w.fail(f"grid {w.k.grid_dims} does not cover {math.prod(batch)} x {qblocks} blocks")
        ep, fp = -(-E // (4 * T)) * 4 * T, -(-F // (4 * T)) * 4 * T  # padded head dims
        eq, fq = ep // T, fp // T  # elements per thread
        # one block per SM at least: without it ptxas caps a 256-thread block at 128 registers
        # and the head dim 128 kernel (146 registers) spills
        w.min_blocks = 1
        self.bq, self.kb, self.T, self.ch, self.nt, self.qblocks = bq, kb, T, ch, nt, qblocks
        self.batch, self.L, self.S, self.E, self.F = batch, L, S, E, F
        self.ep, self.fp, self.eq, self.fq = ep, fp, eq, fq
        self.causal = op.causal is not None
        self.kind, self.scale = op.mask_kind, op.scale_value
        self.nb = len(batch)
        self.bnames: list[str] = []  # the batch entry's indices
        self.Q = self.K = self.V = self.O = ""  # the C names of q, k, v and the output
        self.M: str | None = None  # the mask's

    def offset(self, value, perm, logical: list[str]) -> str:
        """Offset into `value` of the logical index (batch..., a, b), through its permutation
        (None: the mask, plain broadcasting to (batch..., L, S)) and broadcast dims."""
        batch, nb = self.batch, self.nb
        shape = value.type.get_shape()
        rank = len(shape)
        bix, tail = logical[:nb], logical[nb:]
        if perm is None:
            full = [*batch, self.L, self.S]
            sh = len(full) - rank
            stored = ["0" if shape[i] == 1 and full[i + sh] != 1 else logical[i + sh]
                      for i in range(rank)]
        else:
            lshape = [shape[p] for p in perm]
            sh = nb - (rank - 2)
            lix = ["0" if lshape[i] == 1 and batch[i + sh] != 1 else bix[i + sh]
                   for i in range(rank - 2)] + tail
            stored = [""] * rank
            for t, p in enumerate(perm):
                stored[p] = lix[t]
        return self.w.offset(value, stored)

    def declare(self) -> None:
        """The kernel's comment, the k and v tiles in __shared__, and the thread's
        coordinates: its lane and row in the block, the query block, the batch entry, and
        the query row it computes (`qrow`: row clamped to L - 1)."""
        w, op, Ln, I = self.w, self.op, self.w.line, self.w.idx
        bq, kb, T, ch, qblocks = self.bq, self.kb, self.T, self.ch, self.qblocks
        batch, L, S, E, F = self.batch, self.L, self.S, self.E, self.F
        kind, scale, causal, eq, fq = self.kind, self.scale, self.causal, self.eq, self.fq
        self.Q, self.K, self.V, self.O = (w.val(x) for x in (op.q, op.k, op.v, op.out))
        w.writes.add(op.out)
        self.M = w.val(op.mask_value) if op.mask_value is not None else None
        what = {None: "", "add": " + mask", "keep": " where mask", "drop": " where !mask"}[kind]
        Ln(f"// {op.name}: softmax({scale!r} * q @ kᵀ{what}{', causal' if causal else ''}) @ v, "
           f"batch {list(batch)}, L {L}, S {S}, E {E}, F {F}")
        Ln(f"// a block per (batch entry, {bq} query rows), {T} thread{'s' * (T > 1)} per row holding {eq} of "
           f"q's and {fq} of the output's elements; k and v in {kb}-key shared tiles; online "
           f"softmax {ch} keys at a time")
        Ln(f"__shared__ __align__(16) float Ks[{kb}][{self.ep}];")
        Ln(f"__shared__ __align__(16) float Vs[{kb}][{self.fp}];")
        Ln(f"const int tid = threadIdx.x, lane = {f'tid % {T}' if T > 1 else '0'}, "
           f"r = {f'tid / {T}' if T > 1 else 'tid'};  // the thread's row in the block")
        Ln(f"const {I} qb = {f'blockIdx.x % {qblocks}' if qblocks != 1 else '0'};")
        if batch:
            Ln(f"const {I} bl = blockIdx.x{f' / {qblocks}' if qblocks != 1 else ''};")
            self.bnames = w.split_linear("bl", batch)
        Ln(f"const {I} row = qb * {bq} + r;")
        Ln(f"const {I} qrow = row < {L} ? row : {L - 1};  // rows past L: computed, not written")

    def load_q(self) -> None:
        """The thread's elements of q's row into registers (0 past E), the output accumulator
        zeroed, and the running max and sum of the online softmax."""
        op, Ln = self.op, self.w.line
        T, E, ep, eq, fq = self.T, self.E, self.ep, self.eq, self.fq
        Ln(f"float q[{eq}], acc[{fq}];")
        Ln("#pragma unroll")
        Ln(f"for (int g = 0; g < {eq // 4}; ++g) {{")
        Ln("  #pragma unroll")
        Ln("  for (int u = 0; u < 4; ++u) {")
        Ln(f"    const int d = (lane + {T} * g) * 4 + u;")
        qload = f"{self.Q}[{self.offset(op.q, op.perm('q'), [*self.bnames, 'qrow', 'd'])}]"
        Ln("    q[g * 4 + u] = " + (f"d < {E} ? {qload} : 0.0f;" if ep != E else f"{qload};"))
        Ln("  }")
        Ln("}")
        Ln(f"#pragma unroll\nfor (int i = 0; i < {fq}; ++i) acc[i] = 0.0f;")
        Ln("float m = -INFINITY, l = 0.0f;  // the running max and sum of exp(s - m)")

    def key_tiles(self) -> None:
        """The loop over KB-key tiles (causal: up to the block's last row): stage the tiles of
        k and v, then walk their keys ch at a time (causal: up to the warp's last row), each
        chunk scored and folded into the online softmax and the accumulator."""
        w, Ln, I = self.w, self.w.line, self.w.idx
        bq, kb, T, ch, S = self.bq, self.kb, self.T, self.ch, self.S
        if self.causal:
            Ln(f"const {I} kend = qb * {bq} + {bq} < {S} ? qb * {bq} + {bq} : {S};  "
               "// causal: the keys up to the block's last row")
            Ln(f"const {I} wlast = qb * {bq} + (tid / 32 + 1) * {32 // T} - 1;  "
               "// the warp's last row")
        else:
            Ln(f"const {I} kend = {S};")
        Ln(f"for ({I} j0 = 0; j0 < kend; j0 += {kb}) {{")
        w.ind += 1
        Ln("__syncthreads();  // every thread is done with the previous tiles")
        self.stage_tiles()
        Ln("__syncthreads();")
        lim = f"kend - j0 < {kb} ? kend - j0 : {kb}"
        Ln(f"{I} cend = {lim};")
        if self.causal:
            Ln("if (wlast - j0 + 1 < cend) cend = wlast - j0 + 1;  // warp-uniform: shuffles stay whole")
        Ln(f"for (int c0 = 0; c0 < cend; c0 += {ch}) {{")
        w.ind += 1
        self.score_chunk()
        self.update_softmax()
        w.ind -= 1
        Ln("}")
        w.ind -= 1
        Ln("}")

    def stage_tiles(self) -> None:
        """The block's threads copy the KB keys from j0 of k and v into Ks and Vs (0 past S
        and past the head dims)."""
        op, Ln, I = self.op, self.w.line, self.w.idx
        kb, nt, S = self.kb, self.nt, self.S
        for buf, src, val, width, dim in (("Ks", self.K, op.k, self.ep, self.E),
                                          ("Vs", self.V, op.v, self.fp, self.F)):
            Ln(f"for (int x = tid; x < {kb * width}; x += {nt}) {{")
            Ln(f"  const int c = x / {width}, d = x % {width};")
            Ln(f"  const {I} j = j0 + c;")
            off = self.offset(val, op.perm("k" if buf == "Ks" else "v"), [*self.bnames, "j", "d"])
            guard = f"j < {S}" + (f" && d < {dim}" if width != dim else "")
            Ln(f"  {buf}[c][d] = ({guard}) ? {src}[{off}] : 0.0f;")
            Ln("}")

    def score_chunk(self) -> None:
        """s[c] for the chunk's ch keys: q . k_j over the row's lanes (shuffles), scaled,
        masked, -inf past S or above the diagonal; mx their max."""
        w, op, Ln, I = self.w, self.op, self.w.line, self.w.idx
        T, ch, S, kind, scale, M = self.T, self.ch, self.S, self.kind, self.scale, self.M
        Ln(f"float s[{ch}], mx = -INFINITY;")
        Ln("#pragma unroll")
        Ln(f"for (int c = 0; c < {ch}; ++c) {{")
        w.ind += 1
        Ln("float dot = 0.0f;  // q . k_j over this thread's elements")
        Ln("#pragma unroll")
        Ln(f"for (int g = 0; g < {self.eq // 4}; ++g) {{")
        Ln(f"  const float4 kv = *reinterpret_cast<const float4*>(&Ks[c0 + c][(lane + {T} * g) * 4]);")
        Ln("  dot = fmaf(q[g * 4], kv.x, dot); dot = fmaf(q[g * 4 + 1], kv.y, dot);")
        Ln("  dot = fmaf(q[g * 4 + 2], kv.z, dot); dot = fmaf(q[g * 4 + 3], kv.w, dot);")
        Ln("}")
        sh = 1
        while sh < T:
            Ln(f"dot += __shfl_xor_sync(0xffffffffu, dot, {sh});  // the row's other lanes")
            sh *= 2
        Ln(f"const {I} j = j0 + c0 + c;")
        Ln("float x = dot" + (f" * {f32_text(scale)};" if scale != 1.0 else ";"))
        if M is not None:
            mo = self.offset(op.mask_value, None,
                             [*self.bnames, "qrow", f"(j < {S} ? j : {S - 1})"])
            if kind == "add":
                Ln(f"x = x + {M}[{mo}];")
            else:
                fill = w.literal_float(op.fill_value)
                a, b = ("x", fill) if kind == "keep" else (fill, "x")
                Ln(f"x = {M}[{mo}] ? {a} : {b};")
        Ln(f"if (j >= {S}{' || j > qrow' if self.causal else ''}) x = -INFINITY;")
        Ln("s[c] = x;")
        Ln("mx = aicc_max(mx, x);")
        w.ind -= 1
        Ln("}")

    def update_softmax(self) -> None:
        """The online softmax step for the chunk: the new max, the old sums rescaled to it,
        s[c] turned into exp(s[c] - max) and added to l, and acc += s[c] * v_j."""
        Ln, T, ch, fq = self.w.line, self.T, self.ch, self.fq
        Ln("const float mn = aicc_max(m, mx);")
        Ln("const float ms = mn == -INFINITY ? 0.0f : mn;  // nothing seen yet: adds nothing")
        Ln("const float alpha = __expf(m - ms);  // rescales what was summed under the old max")
        Ln("float ps = 0.0f;")
        Ln("#pragma unroll")
        Ln(f"for (int c = 0; c < {ch}; ++c) {{ s[c] = __expf(s[c] - ms); ps += s[c]; }}")
        Ln("l = l * alpha + ps;")
        Ln(f"#pragma unroll\nfor (int i = 0; i < {fq}; ++i) acc[i] *= alpha;")
        Ln("#pragma unroll")
        Ln(f"for (int c = 0; c < {ch}; ++c) {{")
        Ln("  #pragma unroll")
        Ln(f"  for (int g = 0; g < {fq // 4}; ++g) {{")
        Ln(f"    const float4 vv = *reinterpret_cast<const float4*>(&Vs[c0 + c][(lane + {T} * g) * 4]);")
        Ln("    acc[g * 4] = fmaf(s[c], vv.x, acc[g * 4]); acc[g * 4 + 1] = fmaf(s[c], vv.y, acc[g * 4 + 1]);")
        Ln("    acc[g * 4 + 2] = fmaf(s[c], vv.z, acc[g * 4 + 2]); acc[g * 4 + 3] = fmaf(s[c], vv.w, acc[g * 4 + 3]);")
        Ln("  }")
        Ln("}")
        Ln("m = mn;")

    def write_output(self) -> None:
        """acc / l into the output row (rows past L return first; elements past F are not
        written)."""
        op, Ln, F = self.op, self.w.line, self.F
        Ln(f"if (row >= {self.L}) return;")
        Ln("#pragma unroll")
        Ln(f"for (int g = 0; g < {self.fq // 4}; ++g) {{")
        Ln("  #pragma unroll")
        Ln("  for (int u = 0; u < 4; ++u) {")
        Ln(f"    const int d = (lane + {self.T} * g) * 4 + u;")
        off = self.offset(op.out, op.perm('out'), [*self.bnames, 'row', 'd'])
        store = f"{self.O}[{off}] = acc[g * 4 + u] / l;"
        Ln(f"    if (d < {F}) {store}" if self.fp != F else f"    {store}")
        Ln("  }")
        Ln("}")
