"""The `gpu_map` dialect: how a loop nest is mapped onto a CUDA grid.

`map-to-gpu` wraps every top-level loop nest of a loop-IR function in one `gpu_map.kernel`.
The body keeps the loop IR unchanged (an `scf.parallel` band, or straight-line code for a
single-thread kernel); the attributes say how `CudaEmitter` maps it:

    gpu_map.kernel "model_k2" "row_reduce" attributes {grid = array<i64: 256>,
                                                       block = array<i64: 128>, tile = array<i64: 8>} {
      "scf.parallel"(...) ({ ... scf.for ... iter_args ... })
      "scf.parallel"(...) ({ ... })
    }

kind         body                                    how it is mapped
elementwise  one scf.parallel                        band flattened over `grid` x `block`
                                                     threads, one point per thread, guarded
row_reduce   nests over the same rows, one at least  one block per row; with `tile` = [E] each
             reducing the row in an scf.for          thread keeps E elements of the row in
                                                     registers across all the nests, else the
                                                     (single) reduction strides over the row;
                                                     warp shuffles + shared memory combine
col_reduce   [fill] nest reducing into C[p.., j]     threads over j (coalesced), each looping
             over outer loops [epilogues]            over the reduced dims; block = [bx, by]
                                                     splits that loop over threadIdx.y
matmul       [fill] C[b..,i,j] += A[..,i,k] B[..,k,j] tiled through double-buffered shared memory:
             [epilogues]                             `tile` = [BM, BN, BK], `block` threads each
                                                     computing a (BM/block[1]) x (BN/block[0])
                                                     register tile; batch on grid z
single       straight-line code outside any nest     one thread
qgemm        one gpu_map.qgemm (an int8 GEMM on       `tile` = [BM, BN, BK]: BM x BN of C per
             memrefs, put there by lower-qgemm-gpu)  block, k through __shared__ BK bytes at a
                                                     time, __dp4a on 4 bytes of k per
                                                     instruction, int32 accumulators
attention    one aicc_fused.attention on memrefs     flash attention: `tile` = [BQ, KB, T], a
             (not loop IR: the op is whole)          block per (batch entry, BQ query rows), T
                                                     threads per row holding its q and output
                                                     row in registers, KB-key tiles of k and v
                                                     in shared memory, online softmax

A body with several nests means: run them in this order. The emitter fuses them into one
launch; the structural queries deciding what fuses live in gpu_patterns.py. A fill before the
main nest is folded into its accumulator; an epilogue (a point-wise nest over the output that
reads it only at its own point) runs in the thread that finished that output element.

The region may use values defined above it (memrefs, constants): the emitter turns the memrefs
into kernel parameters and folds the constants.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, Float32Type, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import SSAValue
from xdsl.ir import Dialect, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    AttrSizedOperandSegments,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

KINDS = ("elementwise", "row_reduce", "col_reduce", "matmul", "single", "attention", "qgemm")


@irdl_op_definition
class KernelOp(IRDLOperation):
    name = "gpu_map.kernel"

    sym_name = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    tile = opt_prop_def(DenseArrayBase)
    # dynamic dims: the grid sizes that are -1 in `grid`, in order, as expressions of the
    # kernel's dims (`ceildiv(d_batch*48, 256)`), evaluated by the host at each launch
    grid_dynamic = opt_prop_def(ArrayAttr[StringAttr])
    body = region_def("single_block")

    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$sym_name $kind attr-dict-with-keyword $body"

    def __init__(self, name: str, kind: str, grid, block, body: Region, tile=None):
        """`grid`: ints, or for a size known at run time only, its expression (a str or Sym)."""
        dynamic = [str(g) for g in grid if not isinstance(g, int)]
        props = {
            "sym_name": StringAttr(name),
            "kind": StringAttr(kind),
            "grid": DenseArrayBase.from_list(i64, [g if isinstance(g, int) else -1 for g in grid]),
            "block": DenseArrayBase.from_list(i64, list(block)),
        }
        if tile is not None:
            props["tile"] = DenseArrayBase.from_list(i64, list(tile))
        if dynamic:
            props["grid_dynamic"] = ArrayAttr([StringAttr(g) for g in dynamic])
        super().__init__(properties=props, regions=[body])

    def verify_(self) -> None:
        if self.kind.data not in KINDS:
            raise VerifyException(
                f"gpu_map.kernel: kind '{self.kind.data}' is not one of {', '.join(KINDS)}")
        for what in ("grid", "block"):
            dims = getattr(self, what).get_values()
            dyn = sum(d == -1 for d in dims) if what == "grid" else 0
            if not 1 <= len(dims) <= 3 or sum(d < 1 for d in dims) != dyn:
                raise VerifyException(f"gpu_map.kernel: {what} must be 1 to 3 positive sizes")
        n_dyn = len(self.grid_dynamic.data) if self.grid_dynamic is not None else 0
        if n_dyn != sum(d == -1 for d in self.grid.get_values()):
            raise VerifyException("gpu_map.kernel: one grid_dynamic expression for each -1 of grid")
        if self.kind.data == "matmul" and (self.tile is None or len(self.tile.get_values()) != 3):
            raise VerifyException("gpu_map.kernel: a matmul kernel needs tile = [BM, BN, BK]")
        if self.kind.data == "attention":
            if self.tile is None or len(self.tile.get_values()) != 3:
                raise VerifyException("gpu_map.kernel: an attention kernel needs tile = [BQ, KB, T]")
            ops = list(self.body.block.ops)
            if len(ops) != 1 or ops[0].name != "aicc_fused.attention":
                raise VerifyException(
                    "gpu_map.kernel: an attention kernel holds one aicc_fused.attention")
        if self.kind.data == "qgemm":
            ops = list(self.body.block.ops)
            if self.tile is None or len(self.tile.get_values()) != 3 or len(ops) != 1 \
                    or ops[0].name != "gpu_map.qgemm":
                raise VerifyException("gpu_map.kernel: a qgemm kernel holds one gpu_map.qgemm and needs "
                                      "tile = [BM, BN, BK]")

    @property
    def grid_dims(self) -> tuple[int | str, ...]:
        """The grid's sizes: ints, and for the dynamic ones their expressions."""
        dyn = iter(a.data for a in self.grid_dynamic.data) if self.grid_dynamic is not None \
            else iter(())
        return tuple(next(dyn) if d == -1 else d for d in self.grid.get_values())

    @property
    def block_dims(self) -> tuple[int, ...]:
        return tuple(self.block.get_values())

    @property
    def tile_dims(self) -> tuple[int, ...] | None:
        return tuple(self.tile.get_values()) if self.tile is not None else None


@irdl_op_definition
class QGemmOp(IRDLOperation):
    """An int8 GEMM for the CUDA target's dp4a kernel (put there by lower-qgemm-gpu, in place
    of matmul_integer's marked generic):

        gpu_map.qgemm %a, %b, %c {zp = -3 : i64} : memref<7x129xi8>, memref<5x129xi8>, memref<7x5xi32>

    C[r, j] = sum over k of (A[r, k] - zp) * B[j, k], int32, for every row r of A (its leading
    dims flattened: memref<...xMxK>, C memref<...xMxN>) and every j < N; B holds the weight's
    rows (N, K). With `quantize %params : memref<2xf32>` (dynamic quantization) A is f32 and
    A[r, k] - zp above is clamp(rne(A[r, k] / params[0]) + params[1], -128, 127) - params[1].
    The kernel stores every element of C (no fill before it)."""

    name = "gpu_map.qgemm"

    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    params = opt_operand_def(MemRefType)
    zp = prop_def(IntegerAttr)

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = ("$a `,` $b `,` $c (`quantize` $params^ `:` type($params))? attr-dict "
                       "`:` type($a) `,` type($b) `,` type($c)")

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue, zp: int, params: SSAValue | None = None):
        super().__init__(operands=[a, b, c, [params] if params is not None else []],
                         properties={"zp": IntegerAttr(zp, i64)})

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(rows of A, N, K)."""
        a_shape, (n, k) = self.a.type.get_shape(), self.b.type.get_shape()
        rows = 1
        for d in a_shape[:-1]:
            rows *= d
        return rows, n, k

    def verify_(self) -> None:
        a_shape, b_shape, c_shape = (v.type.get_shape() for v in (self.a, self.b, self.c))
        if any(d < 0 for d in (*a_shape, *b_shape, *c_shape)):
            raise VerifyException("gpu_map.qgemm: static shapes only")
        if len(b_shape) != 2 or len(a_shape) < 2 or a_shape[-1] != b_shape[1] \
                or tuple(c_shape) != (*a_shape[:-1], b_shape[0]):
            raise VerifyException(f"gpu_map.qgemm: expected A (..., M, K), B (N, K) and C (..., M, N), got "
                                  f"{self.a.type}, {self.b.type}, {self.c.type}")
        dynamic = self.params is not None
        for v, want in ((self.a, "f32" if dynamic else "i8"), (self.b, "i8"), (self.c, "i32")):
            e = v.type.element_type
            ok = isinstance(e, Float32Type) if want == "f32" else getattr(e, "width", None) is not None \
                and e.width.data == int(want[1:])
            if not ok:
                raise VerifyException(f"gpu_map.qgemm: expected an {'f32' if dynamic else 'i8'} A, an i8 B "
                                      f"and an i32 C, got {v.type}")
        if dynamic and (self.params.type.get_shape() != (2,)
                        or not isinstance(self.params.type.element_type, Float32Type)):
            raise VerifyException(f"gpu_map.qgemm: quantize takes a memref<2xf32>, got {self.params.type}")


GPUMap = Dialect("gpu_map", [KernelOp, QGemmOp], [])
