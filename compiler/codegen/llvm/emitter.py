"""Loop IR (func/scf/memref/arith/math on static memrefs) to LLVM IR through llvmlite.ir.

Every memref is a bare base pointer: shapes are static and layouts row-major, so an access
is one ``getelementptr inbounds`` on the element type at the linearized index. Loops become
phi-based counted loops in rotated form (guard, body, latch test at the bottom), the shape
LLVM's loop vectorizer expects. Large top-level ``scf.parallel`` loops are outlined into
``@<fn>.par<k>(ptr ctx, i64 lo, i64 hi)`` chunk functions run by the runtime's
``aicc_parallel_for``, over their leading dims flattened (``_parallel_dims``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import itertools
from math import prod

import numpy as np

from llvmlite import ir
from xdsl.dialects import builtin
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from compiler.codegen.llvm import mathlib
from compiler.dialects.aicc import NONPOSITIVE_ARG, VECTORIZE_ATTR
from compiler.errors import CompileError, UnsupportedOpError

# A top-level scf.parallel is run on threads when trip-count product x body op count
# (inner loops multiplied out) reaches this.
PARALLEL_MIN_WORK = 1 << 15
# A function with more top-level scf.parallel loop nests than this outlines every one of them
# (the small ones called directly, without threads): LLVM's O3 time grows faster than linearly
# with the size of one function, and a caller holding hundreds of small loop nests inline
# dominated the compile (DenseNet-121 at 64x64: 844 nests, 113 s of O3 for `forward` alone,
# 8 s with them outlined). Outlined, identical nests are also compiled once.
OUTLINE_ALL_MIN_NESTS = 64
# int8 multiply-adds of an aicc_cpu.qgemm counted as one op of its work (a 256-bit vpdpbusd
# does 32), as the other kernels count their vector FMAs.
QGEMM_MACS_PER_OP = 32
# Trip count assumed for a loop whose bounds are not constants, when estimating work.
_UNKNOWN_TRIP = 64
ALLOC_ALIGN = 64
PARALLEL_FOR_SYMBOL = "aicc_parallel_for"

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_CMPF = {  # predicate index (xdsl CMPF_COMPARISON_OPERATIONS order) -> (ordered?, llvmlite op)
    1: (True, "=="), 2: (True, ">"), 3: (True, ">="), 4: (True, "<"), 5: (True, "<="),
    6: (True, "!="), 7: (True, "ord"), 8: (False, "=="), 9: (False, ">"), 10: (False, ">="),
    11: (False, "<"), 12: (False, "<="), 13: (False, "!="), 14: (False, "uno"),
}
_CMPI = {  # predicate index (CMPI_COMPARISON_OPERATIONS order) -> (signed?, llvmlite op)
    0: (True, "=="), 1: (True, "!="), 2: (True, "<"), 3: (True, "<="), 4: (True, ">"),
    5: (True, ">="), 6: (False, "<"), 7: (False, "<="), 8: (False, ">"), 9: (False, ">="),
}


# ------------------------------------------------------------------------------ types


def scalar_type(t) -> ir.Type:
    """The LLVM type of an SSA value of xDSL type ``t`` (memrefs are pointers)."""
    if isinstance(t, builtin.MemRefType):
        return PTR
    if isinstance(t, builtin.IndexType):
        return I64
    if isinstance(t, builtin.IntegerType):
        return ir.IntType(t.width.data)
    if isinstance(t, builtin.Float32Type):
        return ir.FloatType()
    if isinstance(t, builtin.Float64Type):
        return ir.DoubleType()
    if isinstance(t, builtin.Float16Type):
        return ir.HalfType()
    if isinstance(t, builtin.VectorType):
        if len(t.get_shape()) != 1:
            raise CompileError(f"only 1-D vectors are supported, got {t}")
        return ir.VectorType(scalar_type(t.element_type), t.get_shape()[0])
    raise CompileError(f"type {t} has no LLVM lowering")


def memory_type(t) -> ir.Type:
    """The in-memory LLVM type of a memref element (i1 is stored as one byte)."""
    ty = scalar_type(t)
    return I8 if ty == I1 else ty


def byte_size(ty: ir.Type) -> int:
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    if isinstance(ty, ir.FloatType):
        return 4
    if isinstance(ty, ir.DoubleType):
        return 8
    if isinstance(ty, ir.HalfType):
        return 2
    if isinstance(ty, ir.PointerType):
        return 8
    if isinstance(ty, ir.VectorType):
        return ty.count * byte_size(ty.element)
    raise CompileError(f"no size for LLVM type {ty}")


def _memref(t) -> builtin.MemRefType:
    if not isinstance(t, builtin.MemRefType):
        raise CompileError(f"expected a memref, got {t}")
    shape = t.get_shape()
    layout = t.layout
    if not isinstance(layout, builtin.NoneAttr):
        ok = False
        if isinstance(layout, builtin.StridedLayoutAttr):
            strides = [s.data if hasattr(s, "data") else s for s in layout.strides.data]
            offset = layout.offset.data if hasattr(layout.offset, "data") else layout.offset
            ok = list(strides) == _row_major_strides(shape) and offset in (0, None)
        elif isinstance(layout, builtin.AffineMapAttr):
            ok = layout.data.is_identity() if hasattr(layout.data, "is_identity") else False
        if not ok:
            raise CompileError(f"memref {t} has a non-contiguous layout")
    return t


DYNAMIC = builtin.DYNAMIC_INDEX


def _is_dynamic(t) -> bool:
    return isinstance(t, builtin.MemRefType) and DYNAMIC in t.get_shape()


def _dynamic_dim_count(types) -> int:
    return sum(tuple(t.get_shape()).count(DYNAMIC) for t in types if isinstance(t, builtin.MemRefType))


def _row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


def _const(ty: ir.Type, value) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [_const(ty.element, value)] * ty.count)
    if isinstance(ty, ir.IntType):
        value = int(value) & ((1 << ty.width) - 1)
        if ty.width == 1:
            return ir.Constant(ty, bool(value))
        if value >= 1 << (ty.width - 1):
            value -= 1 << ty.width
    return ir.Constant(ty, value)


def _const_int(v: SSAValue) -> int | None:
    """The value of an integer/index constant SSA value, else None."""
    if isinstance(v, OpResult) and v.op.name == "arith.constant":
        attr = v.op.properties.get("value")
        if isinstance(attr, builtin.IntegerAttr):
            return attr.value.data
    return None


def _fastmath(op: Operation) -> tuple[str, ...]:
    attr = op.properties.get("fastmath") or op.attributes.get("fastmath")
    if attr is None:
        return ()
    flags = getattr(attr, "flags", None) or getattr(attr, "data", None) or ()
    names = sorted(getattr(f, "value", str(f)) for f in flags)
    if len(names) >= 7:
        return ("fast",)
    return tuple(n for n in names if n in mathlib_fastmath_names)


mathlib_fastmath_names = frozenset(
    ["nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"])


# ------------------------------------------------------------------- work estimation


def _trip(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int:
    lo, hi, st = _const_int(lb), _const_int(ub), _const_int(step)
    if lo is None or hi is None or st is None or st <= 0:
        return _UNKNOWN_TRIP
    return max(0, -(-(hi - lo) // st))


def _block_cost(block: Block) -> int:
    return sum(_op_cost(op) for op in block.ops)


def _op_cost(op: Operation) -> int:
    if op.name == "aicc_cpu.microkernel":  # mr x nr/vw FMAs per k step
        kc = _const_int(op.kc)
        return op.int_prop("mr") * (op.int_prop("nr") // op.int_prop("vw")) * (
            _UNKNOWN_TRIP if kc is None else kc)
    if op.name == "aicc_cpu.conv_kernel":  # owb x ocv FMAs per tap and input channel
        return op.int_prop("owb") * op.int_prop("ocv") * op.int_prop("ic") * op.int_prop(
            "kh") * op.int_prop("kw")
    if op.name == "aicc_cpu.dw_kernel":  # owb vectors of outputs x the window's taps
        return op.int_prop("owb") * op.int_prop("kh") * op.int_prop("kw")
    if op.name == "aicc_cpu.qgemm":  # m x n x k int8 products, QGEMM_MACS_PER_OP an op
        m = _const_int(op.m)
        return max(1, (_UNKNOWN_TRIP if m is None else m) * op.n.value.data * op.k.value.data
                   // QGEMM_MACS_PER_OP)
    if op.name == "scf.for":
        return 1 + _trip(op.lb, op.ub, op.step) * _block_cost(op.body.block)
    if op.name == "scf.parallel":
        trips = prod(_trip(l, u, s) for l, u, s in zip(op.lowerBound, op.upperBound, op.step))
        return 1 + trips * _block_cost(op.body.block)
    if op.regions:
        return 1 + max((sum(_block_cost(b) for b in r.blocks) for r in op.regions), default=0)
    return 1


def parallel_work(op: Operation) -> int:
    """Estimated dynamic op count of an scf.parallel."""
    return _op_cost(op)


# ---------------------------------------------------------------------------- emitter


class LLVMEmitter:
    """Emits an llvmlite module for a loop-IR ``builtin.module``."""

    def __init__(self, *, parallel_min_work: int = PARALLEL_MIN_WORK,
                 prefer_vector_width: int | None = 512,
                 external_data_min_bytes: int | None = None, vector_ldexp: bool = False,
                 outline_serial: bool = True, outline_all_min_nests: int = OUTLINE_ALL_MIN_NESTS):
        self.parallel_min_work = parallel_min_work
        # More top-level loop nests than this in one function: all of them outlined.
        self.outline_all_min_nests = outline_all_min_nests
        # The target lowers llvm.ldexp on float vectors to one instruction (AVX-512's
        # vscalefps): exp then scales by 2**n with it, else with two exponent-field multiplies.
        self.vector_ldexp = vector_ldexp
        self.prefer_vector_width = prefer_vector_width
        # Constant globals of at least this many bytes are declared `external` and their bytes
        # handed to the runtime (`external_data`, symbol -> array) instead of being spelled out
        # in the IR text: LLVM would otherwise print, parse and codegen every weight byte.
        self.external_data_min_bytes = external_data_min_bytes
        self.external_data: dict[str, np.ndarray] = {}
        # Big top-level loop nests that could not use threads (one outer iteration) are
        # outlined all the same: LLVM compiles them apart from the caller, and only once
        # when identical.
        self.outline_serial = outline_serial
        # Outlined loop nests: structure key of the body -> its chunk function (one function
        # per distinct loop nest), and how many were outlined in all.
        self.kernels: dict[str, ir.Function] = {}
        self.outlined = 0
        self.module: ir.Module | None = None
        self.functions: dict[str, ir.Function] = {}
        self.globals: dict[str, ir.GlobalVariable] = {}
        self._runtime: dict[str, ir.Function] = {}

    # -- module level

    def emit(self, module: builtin.ModuleOp) -> ir.Module:
        self.module = ir.Module(name="aicc")
        self.functions, self.globals, self._runtime = {}, {}, {}
        self.external_data = {}
        self.kernels, self.outlined = {}, 0
        funcs = []
        for op in module.ops:
            if op.name == "memref.global":
                self._emit_global(op)
            elif op.name == "func.func":
                funcs.append(op)
            else:
                raise UnsupportedOpError(op.name, f"no LLVM lowering for '{op.name}'")
        for f in funcs:
            self._declare_function(f)
        for f in funcs:
            if f.body.blocks:
                FunctionEmitter(self, self.functions[f.sym_name.data]).emit_func(f)
        return self.module

    def _emit_global(self, op: Operation) -> None:
        name = op.sym_name.data
        mt = _memref(op.type)
        ety = memory_type(mt.element_type)
        esize = byte_size(ety)
        nbytes = prod(mt.get_shape()) * esize
        init = op.initial_value
        aty = ir.ArrayType(I8, max(nbytes, 1))
        external = (isinstance(init, builtin.DenseIntOrFPElementsAttr) and op.constant is not None
                    and self.external_data_min_bytes is not None
                    and nbytes >= self.external_data_min_bytes)
        symbol = f"aicc.data.{next(_EXTERNAL_IDS)}.{name}" if external else name
        g = ir.GlobalVariable(self.module, aty, name=symbol)
        if isinstance(init, builtin.DenseIntOrFPElementsAttr):
            data = np.frombuffer(init.data.data, np.uint8)
            if len(data) != nbytes:
                if len(data) == esize and nbytes % esize == 0:
                    data = np.tile(data, nbytes // esize)  # splat stored as one element
                else:
                    raise CompileError(
                        f"memref.global @{name}: initializer has {len(data)} bytes, "
                        f"type {mt} needs {nbytes}")
            if ety == I8 and isinstance(mt.element_type, builtin.IntegerType) \
                    and mt.element_type.width.data == 1:
                data = (data != 0).astype(np.uint8)
            if external:
                self.external_data[symbol] = _aligned_copy(data, ALLOC_ALIGN)
                g.linkage = "external"
            else:
                g.initializer = ir.Constant(aty, bytearray(data.tobytes() or b"\0"))
        else:
            g.initializer = ir.Constant(aty, None)
        vis = op.sym_visibility.data if op.sym_visibility is not None else "public"
        if not external:
            g.linkage = "internal" if vis == "private" else ""
        g.global_constant = op.constant is not None
        g.align = ALLOC_ALIGN
        g.type = PTR  # opaque: llvmlite would otherwise type-check stores against [N x i8]
        self.globals[name] = g

    def _declare_function(self, f: Operation) -> None:
        name = f.sym_name.data
        ftype = f.function_type
        args = [scalar_type(t) for t in ftype.inputs.data]
        # one i64 per dynamic dim of each memref argument, in order: their sizes
        args += [I64] * _dynamic_dim_count(ftype.inputs.data)
        outs = list(ftype.outputs.data)
        if len(outs) > 1:
            raise CompileError(f"func.func @{name}: more than one result is not supported")
        ret = scalar_type(outs[0]) if outs else VOID
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        for a, t in zip(fn.args, ftype.inputs.data):
            if isinstance(t, builtin.MemRefType):
                a.add_attribute("noalias")
                a.add_attribute("captures(none)")
        if f.body.blocks:
            fn.attributes.add("nounwind")
            self.vector_attrs(fn)
        self.functions[name] = fn

    def vector_attrs(self, fn: ir.Function) -> None:
        # llvmlite only knows enum attributes; string attributes print verbatim.
        if self.prefer_vector_width:
            set.add(fn.attributes, f'"prefer-vector-width"="{self.prefer_vector_width}"')
        # A 64-byte aligned frame: spilled 512-bit registers in slots of their own cache line.
        # Without it LLVM spills zmm registers to 16-byte aligned slots, so that where the
        # caller's stack happens to lie (it changes with ASLR from process to process) split
        # every spill and reload across two cache lines, or not: resnet50 ran at 86 or 110 ms.
        set.add(fn.attributes, "alignstack(64)")

    def runtime_fn(self, name: str) -> ir.Function:
        fn = self._runtime.get(name)
        if fn is None:
            sig = {
                "aligned_alloc": ir.FunctionType(PTR, [I64, I64]),
                "free": ir.FunctionType(VOID, [PTR]),
                PARALLEL_FOR_SYMBOL: ir.FunctionType(VOID, [PTR, PTR, I64]),
                "llvm.memcpy.p0.p0.i64": ir.FunctionType(VOID, [PTR, PTR, I64, I1]),
            }[name]
            fn = ir.Function(self.module, sig, name=name)
            self._runtime[name] = fn
        return fn


class FunctionEmitter:
    """Emits the body of one LLVM function from xDSL blocks."""

    def __init__(self, emitter: LLVMEmitter, fn: ir.Function,
                 values: dict[SSAValue, ir.Value] | None = None):
        self.em = emitter
        self.fn = fn
        self.values: dict[SSAValue, ir.Value] = dict(values or {})
        self.entry = fn.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(self.entry)
        start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        self._start = start
        self._npar = 0
        # Outline every top-level scf.parallel, small ones too (set by emit_func for a
        # function with many: LLVMEmitter.outline_all_min_nests)
        self.outline_all = False
        # The sizes (i64 values, one per dim) of every memref with a dynamic dim
        self.sizes: dict[SSAValue, list[ir.Value]] = {}

    def finish(self) -> None:
        self.alloca_builder.position_at_end(self.entry)
        self.alloca_builder.branch(self._start)

    # -- values

    def get(self, v: SSAValue) -> ir.Value:
        try:
            return self.values[v]
        except KeyError:
            raise CompileError(f"value {v} used before it is defined") from None

    def set(self, v: SSAValue, llv: ir.Value) -> None:
        self.values[v] = llv

    # -- func

    def emit_func(self, f: Operation) -> None:
        block = f.body.block
        for arg, llarg in zip(block.args, self.fn.args):
            self.set(arg, llarg)
        size_params = iter(self.fn.args[len(block.args):])
        for arg in block.args:
            if isinstance(arg.type, builtin.MemRefType) and _is_dynamic(arg.type):
                self.sizes[arg] = [next(size_params) if d == DYNAMIC else _const(I64, d)
                                   for d in arg.type.get_shape()]
        nests = sum(1 for op in block.ops if op.name == "scf.parallel")
        self.outline_all = self.em.outline_serial and nests > self.em.outline_all_min_nests
        for op in block.ops:
            self.emit_op(op)
        if self.b.block.terminator is None:
            if isinstance(self.fn.function_type.return_type, ir.VoidType):
                self.b.ret_void()
            else:
                raise CompileError(f"func.func @{self.fn.name} does not end in func.return")
        self.finish()

    def emit_block(self, block: Block) -> list[ir.Value]:
        """Emit a region's block; returns the values its scf.yield/scf.reduce passes on."""
        yielded: list[ir.Value] = []
        for op in block.ops:
            if op.name in ("scf.yield", "scf.reduce"):
                if op.name == "scf.reduce" and op.operands:
                    raise UnsupportedOpError(
                        "scf.reduce", "reductions on scf.parallel are not supported; "
                        "express them with scf.for iter_args")
                yielded = [self.get(v) for v in op.operands]
            else:
                self.emit_op(op)
        return yielded

    def emit_op(self, op: Operation) -> None:
        handler = _HANDLERS.get(op.name)
        if handler is None:
            raise UnsupportedOpError(op.name, f"no LLVM lowering for '{op.name}'")
        handler(self, op)

    # -- helpers

    def address(self, memref: SSAValue, indices: Sequence[SSAValue]) -> ir.Value:
        mt = _memref(memref.type)
        base = self.get(memref)
        ety = memory_type(mt.element_type)
        if not indices:
            return base
        shape = mt.get_shape()
        if DYNAMIC in shape[1:]:
            strides = self.dynamic_strides(memref)
        else:
            strides = [_const(I64, st) for st in _row_major_strides(shape)]
        lin = None
        for idx, stride in zip(indices, strides):
            i = self.get(idx)
            if i.type != I64:
                i = self.b.sext(i, I64) if i.type.width < 64 else self.b.trunc(i, I64)
            one = isinstance(stride, ir.Constant) and stride.constant == 1
            term = i if one else self.b.mul(i, stride, flags=["nsw"])
            lin = term if lin is None else self.b.add(lin, term, flags=["nsw"])
        return self.b.gep(base, [lin], inbounds=True, source_etype=ety)

    def dims(self, memref: SSAValue) -> list[ir.Value]:
        """The sizes of a memref, i64 values (constants where static)."""
        shape = memref.type.get_shape()
        if DYNAMIC not in shape:
            return [_const(I64, d) for d in shape]
        try:
            return self.sizes[memref]
        except KeyError:
            raise CompileError(f"the sizes of {memref.type} ({memref.owner.name if isinstance(memref, OpResult) else 'argument'}) "
                               "are unknown to the LLVM emitter") from None

    def dynamic_strides(self, memref: SSAValue) -> list[ir.Value]:
        dims = self.dims(memref)
        strides: list[ir.Value] = []
        acc: ir.Value = _const(I64, 1)
        for d in reversed(dims):
            strides.append(acc)
            acc = self.mul_i64(acc, d)
        return strides[::-1]

    def mul_i64(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant):
            return _const(I64, a.constant * b.constant)
        if isinstance(a, ir.Constant) and a.constant == 1:
            return b
        if isinstance(b, ir.Constant) and b.constant == 1:
            return a
        return self.b.mul(a, b, flags=["nsw"])

    def element_count(self, memref: SSAValue) -> ir.Value:
        n: ir.Value = _const(I64, 1)
        for d in self.dims(memref):
            n = self.mul_i64(n, d)
        return n

    def loop(self, lb: ir.Value, ub: ir.Value, step: ir.Value, inits: list[ir.Value],
             body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]],
             known_nonempty: bool = False, unroll: bool = True,
             vectorize: int = 0) -> list[ir.Value]:
        """Rotated counted loop ``for (iv = lb; iv < ub; iv += step)`` with loop-carried
        values; ``body(iv, carried)`` emits the body and returns the next carried values.
        Without `unroll`, LLVM leaves the loop as emitted (`llvm.loop.unroll.disable`): a
        kernel body whose registers unrolling would spill. With `vectorize` (lanes), LLVM
        vectorizes it that wide whatever its cost model says (`llvm.loop.vectorize.width`):
        strided reads it would otherwise leave scalar (see VECTORIZE_ATTR)."""
        b = self.b
        pre = b.block
        body_bb = self.fn.append_basic_block("loop")
        exit_bb = self.fn.append_basic_block("loop.exit")
        if known_nonempty:
            b.branch(body_bb)
        else:
            b.cbranch(b.icmp_signed("<", lb, ub), body_bb, exit_bb)
        b.position_at_end(body_bb)
        iv = b.phi(lb.type, name="iv")
        iv.add_incoming(lb, pre)
        carried = []
        for v in inits:
            p = b.phi(v.type)
            p.add_incoming(v, pre)
            carried.append(p)
        nexts = body(iv, list(carried))
        latch = b.block
        nxt = b.add(iv, step, flags=["nsw"])
        br = b.cbranch(b.icmp_signed("<", nxt, ub), body_bb, exit_bb)
        props = []
        module = self.fn.module
        if not unroll:
            props.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")]))
        if vectorize:
            props += [module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                           ir.Constant(ir.IntType(1), 1)]),
                      module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.width"),
                                           ir.Constant(ir.IntType(32), vectorize)])]
        if props:
            loop_id = module.add_metadata([props[0], *props])
            loop_id.operands = (loop_id, *loop_id.operands[1:])  # the loop ID refers to itself
            br.set_metadata("llvm.loop", loop_id)
        iv.add_incoming(nxt, latch)
        for p, v in zip(carried, nexts):
            p.add_incoming(v, latch)
        b.position_at_end(exit_bb)
        if known_nonempty:
            return list(nexts)
        results = []
        for init, v in zip(inits, nexts):
            p = b.phi(init.type)
            p.add_incoming(init, pre)
            p.add_incoming(v, latch)
            results.append(p)
        return results

    def intr(self, base: str, *args, fastmath=()):
        return mathlib.call_intrinsic(self.b, base, *args, fastmath=fastmath)

    def libcall(self, name: str, ret: ir.Type, *args):
        module = self.em.module
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name=name)
        return self.b.call(fn, list(args))


# ------------------------------------------------------------------------ op handlers

_HANDLERS: dict[str, Callable[[FunctionEmitter, Operation], None]] = {}


def handles(*names: str):
    def deco(fn):
        for n in names:
            _HANDLERS[n] = fn
        return fn
    return deco


# func


@handles("func.return")
def _return(e: FunctionEmitter, op: Operation) -> None:
    if op.operands:
        e.b.ret(e.get(op.operands[0]))
    else:
        e.b.ret_void()


@handles("func.call")
def _call(e: FunctionEmitter, op: Operation) -> None:
    name = op.callee.root_reference.data
    fn = e.em.functions.get(name)
    if fn is None:
        raise CompileError(f"func.call to unknown function @{name}")
    r = e.b.call(fn, [e.get(v) for v in op.arguments])
    if op.results:
        e.set(op.results[0], r)


# arith


@handles("arith.constant")
def _constant(e: FunctionEmitter, op: Operation) -> None:
    attr = op.properties["value"]
    ty = scalar_type(op.results[0].type)
    if isinstance(attr, builtin.IntegerAttr):
        e.set(op.results[0], _const(ty, attr.value.data))
    elif isinstance(attr, builtin.FloatAttr):
        e.set(op.results[0], _const(ty, attr.value.data))
    elif isinstance(attr, builtin.DenseIntOrFPElementsAttr) and isinstance(ty, ir.VectorType):
        vals = attr.get_values()
        e.set(op.results[0], ir.Constant(ty, [_const(ty.element, v) for v in vals]))
    else:
        raise UnsupportedOpError(op.name, f"arith.constant of {attr} has no LLVM lowering")


def _binop(method: str, fast: bool = False):
    def handler(e: FunctionEmitter, op: Operation) -> None:
        lhs, rhs = e.get(op.operands[0]), e.get(op.operands[1])
        kw = {"flags": _fastmath(op)} if fast else {}
        e.set(op.results[0], getattr(e.b, method)(lhs, rhs, **kw))
    return handler


for _n, _m in {"addf": "fadd", "subf": "fsub", "mulf": "fmul", "divf": "fdiv",
               "remf": "frem"}.items():
    _HANDLERS[f"arith.{_n}"] = _binop(_m, fast=True)
for _n, _m in {"addi": "add", "subi": "sub", "muli": "mul", "divsi": "sdiv", "divui": "udiv",
               "remsi": "srem", "remui": "urem", "andi": "and_", "ori": "or_",
               "xori": "xor", "shli": "shl", "shrsi": "ashr", "shrui": "lshr"}.items():
    _HANDLERS[f"arith.{_n}"] = _binop(_m)


def _intrinsic_binop(base: str, fast: bool = False):
    def handler(e: FunctionEmitter, op: Operation) -> None:
        fm = _fastmath(op) if fast else ()
        e.set(op.results[0], e.intr(base, e.get(op.operands[0]), e.get(op.operands[1]),
                                    fastmath=fm))
    return handler


for _n, _m in {"maximumf": "maximum", "minimumf": "minimum", "maxnumf": "maxnum",
               "minnumf": "minnum"}.items():
    _HANDLERS[f"arith.{_n}"] = _intrinsic_binop(_m, fast=True)
for _n, _m in {"maxsi": "smax", "minsi": "smin", "maxui": "umax", "minui": "umin"}.items():
    _HANDLERS[f"arith.{_n}"] = _intrinsic_binop(_m)


@handles("arith.negf")
def _negf(e: FunctionEmitter, op: Operation) -> None:
    e.set(op.results[0], e.b.fneg(e.get(op.operands[0]), flags=_fastmath(op)))


@handles("arith.floordivsi", "arith.ceildivsi")
def _floor_ceil_divsi(e: FunctionEmitter, op: Operation) -> None:
    b = e.b
    a, d = e.get(op.operands[0]), e.get(op.operands[1])
    q, r = b.sdiv(a, d), b.srem(a, d)
    zero = _const(a.type, 0)
    inexact = b.icmp_signed("!=", r, zero)
    same_sign = b.icmp_signed("==", b.icmp_signed("<", r, zero), b.icmp_signed("<", d, zero))
    if op.name == "arith.floordivsi":
        adjust = b.and_(inexact, b.not_(same_sign))
        res = b.sub(q, b.zext(adjust, a.type))
    else:
        adjust = b.and_(inexact, same_sign)
        res = b.add(q, b.zext(adjust, a.type))
    e.set(op.results[0], res)


@handles("arith.ceildivui")
def _ceildivui(e: FunctionEmitter, op: Operation) -> None:
    b = e.b
    a, d = e.get(op.operands[0]), e.get(op.operands[1])
    inexact = b.icmp_unsigned("!=", b.urem(a, d), _const(a.type, 0))
    e.set(op.results[0], b.add(b.udiv(a, d), b.zext(inexact, a.type)))


@handles("arith.cmpf")
def _cmpf(e: FunctionEmitter, op: Operation) -> None:
    pred = op.predicate.value.data
    lhs, rhs = e.get(op.operands[0]), e.get(op.operands[1])
    rty = scalar_type(op.results[0].type)
    if pred == 0:
        e.set(op.results[0], _const(rty, 0))
    elif pred == 15:
        e.set(op.results[0], _const(rty, 1))
    else:
        ordered, cmp = _CMPF[pred]
        fn = e.b.fcmp_ordered if ordered else e.b.fcmp_unordered
        e.set(op.results[0], fn(cmp, lhs, rhs, flags=_fastmath(op)))


@handles("arith.cmpi")
def _cmpi(e: FunctionEmitter, op: Operation) -> None:
    signed, cmp = _CMPI[op.predicate.value.data]
    fn = e.b.icmp_signed if signed else e.b.icmp_unsigned
    e.set(op.results[0], fn(cmp, e.get(op.operands[0]), e.get(op.operands[1])))


@handles("arith.select")
def _select(e: FunctionEmitter, op: Operation) -> None:
    c, t, f = (e.get(v) for v in op.operands)
    e.set(op.results[0], e.b.select(c, t, f))


def _int_width(ty: ir.Type) -> int:
    return (ty.element if isinstance(ty, ir.VectorType) else ty).width


def _resize_int(e: FunctionEmitter, v: ir.Value, to: ir.Type, signed: bool) -> ir.Value:
    fw, tw = _int_width(v.type), _int_width(to)
    if fw == tw:
        return v
    if fw > tw:
        return e.b.trunc(v, to)
    return e.b.sext(v, to) if signed else e.b.zext(v, to)


@handles("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
          "arith.trunci")
def _int_cast(e: FunctionEmitter, op: Operation) -> None:
    to = scalar_type(op.results[0].type)
    signed = op.name in ("arith.index_cast", "arith.extsi")
    e.set(op.results[0], _resize_int(e, e.get(op.operands[0]), to, signed))


_CASTS = {"arith.sitofp": "sitofp", "arith.uitofp": "uitofp", "arith.fptosi": "fptosi",
          "arith.fptoui": "fptoui", "arith.extf": "fpext", "arith.truncf": "fptrunc",
          "arith.bitcast": "bitcast"}


@handles(*_CASTS)
def _cast(e: FunctionEmitter, op: Operation) -> None:
    to = scalar_type(op.results[0].type)
    e.set(op.results[0], getattr(e.b, _CASTS[op.name])(e.get(op.operands[0]), to))


# math


def _unary_intrinsic(base: str):
    def handler(e: FunctionEmitter, op: Operation) -> None:
        e.set(op.results[0], e.intr(base, e.get(op.operands[0]), fastmath=_fastmath(op)))
    return handler


for _n, _m in {"sqrt": "sqrt", "absf": "fabs", "floor": "floor", "ceil": "ceil",
               "round": "round", "roundeven": "roundeven", "trunc": "trunc", "sin": "sin",
               "cos": "cos", "exp2": "exp2", "log2": "log2", "log10": "log10"}.items():
    _HANDLERS[f"math.{_n}"] = _unary_intrinsic(_m)
_HANDLERS["math.powf"] = _intrinsic_binop("pow", fast=True)
_HANDLERS["math.copysign"] = _intrinsic_binop("copysign", fast=True)

_MATHLIB = {"math.exp": mathlib.emit_exp, "math.log": mathlib.emit_log,
            "math.tanh": mathlib.emit_tanh, "math.erf": mathlib.emit_erf}


@handles(*_MATHLIB)
def _mathlib(e: FunctionEmitter, op: Operation) -> None:
    kw = {"flush": bool({"afn", "fast"} & set(_fastmath(op))),
          "nonpositive": NONPOSITIVE_ARG in op.attributes} if op.name == "math.exp" else {}
    e.set(op.results[0], _MATHLIB[op.name](e.b, e.get(op.operands[0]),
                                          vector_ldexp=e.em.vector_ldexp, **kw))


@handles("math.rsqrt")
def _rsqrt(e: FunctionEmitter, op: Operation) -> None:
    x = e.get(op.operands[0])
    fm = _fastmath(op)
    e.set(op.results[0], e.b.fdiv(_const(x.type, 1.0), e.intr("sqrt", x, fastmath=fm),
                                  flags=fm))


@handles("math.fma")
def _fma(e: FunctionEmitter, op: Operation) -> None:
    e.set(op.results[0], e.intr("fma", *(e.get(v) for v in op.operands),
                                fastmath=_fastmath(op)))


@handles("math.absi")
def _absi(e: FunctionEmitter, op: Operation) -> None:
    x = e.get(op.operands[0])
    fn = ir.Function(e.em.module, ir.FunctionType(x.type, [x.type, I1]),
                     name=f"llvm.abs.{mathlib.type_suffix(x.type)}") \
        if f"llvm.abs.{mathlib.type_suffix(x.type)}" not in e.em.module.globals \
        else e.em.module.globals[f"llvm.abs.{mathlib.type_suffix(x.type)}"]
    e.set(op.results[0], e.b.call(fn, [x, _const(I1, 0)]))


_LIBM = {"math.tan": "tan", "math.atan": "atan", "math.expm1": "expm1",
         "math.log1p": "log1p", "math.sinh": "sinh", "math.cosh": "cosh", "math.asin": "asin",
         "math.acos": "acos", "math.atan2": "atan2"}


@handles(*_LIBM)
def _libm(e: FunctionEmitter, op: Operation) -> None:
    args = [e.get(v) for v in op.operands]
    ty = args[0].type
    if isinstance(ty, ir.VectorType):
        raise UnsupportedOpError(op.name, f"no LLVM lowering for '{op.name}' on vectors")
    name = _LIBM[op.name] + ("f" if isinstance(ty, ir.FloatType) else "")
    e.set(op.results[0], e.libcall(name, ty, *args))


# memref


@handles("memref.load")
def _load(e: FunctionEmitter, op: Operation) -> None:
    mt = _memref(op.memref.type)
    ety = memory_type(mt.element_type)
    v = e.b.load(e.address(op.memref, op.indices), typ=ety, align=byte_size(ety))
    if scalar_type(mt.element_type) == I1:
        v = e.b.trunc(v, I1)
    e.set(op.results[0], v)


@handles("memref.store")
def _store(e: FunctionEmitter, op: Operation) -> None:
    mt = _memref(op.memref.type)
    ety = memory_type(mt.element_type)
    v = e.get(op.value)
    if v.type == I1:
        v = e.b.zext(v, I8)
    e.b.store(v, e.address(op.memref, op.indices), align=byte_size(ety))


def _nbytes(t) -> int:
    mt = _memref(t)
    return prod(mt.get_shape()) * byte_size(memory_type(mt.element_type))


def _sizes_from_operands(e: FunctionEmitter, result: SSAValue, operands) -> None:
    """A memref whose dynamic dims are given by index operands, in order (alloc, view)."""
    it = iter(operands)
    e.sizes[result] = [e.get(next(it)) if d == DYNAMIC else _const(I64, d)
                       for d in result.type.get_shape()]


@handles("memref.alloc")
def _alloc(e: FunctionEmitter, op: Operation) -> None:
    if op.dynamic_sizes:
        _sizes_from_operands(e, op.memref, op.dynamic_sizes)
        ebytes = byte_size(memory_type(_memref(op.memref.type).element_type))
        nbytes = e.b.mul(e.element_count(op.memref), _const(I64, ebytes))
        # aligned_alloc wants a multiple of the alignment, and at least one line
        rounded = e.b.and_(e.b.add(nbytes, _const(I64, ALLOC_ALIGN - 1)), _const(I64, -ALLOC_ALIGN))
        size = e.intr("umax", rounded, _const(I64, ALLOC_ALIGN))
    else:
        size = _const(I64, max(ALLOC_ALIGN, -(-_nbytes(op.memref.type) // ALLOC_ALIGN) * ALLOC_ALIGN))
    p = e.b.call(e.em.runtime_fn("aligned_alloc"), [_const(I64, ALLOC_ALIGN), size])
    e.set(op.results[0], p)


@handles("memref.dim")
def _dim(e: FunctionEmitter, op: Operation) -> None:
    i = _const_int(op.index)
    if i is None:
        raise CompileError("memref.dim with a dynamic index")
    e.set(op.results[0], e.dims(op.source)[i])


@handles("memref.alloca")
def _alloca(e: FunctionEmitter, op: Operation) -> None:
    if op.dynamic_sizes:
        raise CompileError("memref.alloca with dynamic sizes in loop IR")
    mt = _memref(op.memref.type)
    ety = memory_type(mt.element_type)
    # Hoisted to the entry block: inside a loop a plain alloca would grow the stack.
    a = e.alloca_builder.alloca(ir.ArrayType(ety, max(1, prod(mt.get_shape()))))
    a.align = ALLOC_ALIGN
    a.type = PTR
    e.set(op.results[0], a)


@handles("memref.dealloc")
def _dealloc(e: FunctionEmitter, op: Operation) -> None:
    e.b.call(e.em.runtime_fn("free"), [e.get(op.operands[0])])


@handles("memref.get_global")
def _get_global(e: FunctionEmitter, op: Operation) -> None:
    name = op.name_.root_reference.data if hasattr(op, "name_") else \
        op.properties["name"].root_reference.data
    g = e.em.globals.get(name)
    if g is None:
        raise CompileError(f"memref.get_global of unknown global @{name}")
    e.set(op.results[0], g)


@handles("memref.collapse_shape", "memref.expand_shape", "memref.cast")
def _reshape(e: FunctionEmitter, op: Operation) -> None:
    res = op.results[0]
    _memref(res.type)
    e.set(res, e.get(op.operands[0]))
    if not _is_dynamic(res.type):
        return
    src = op.operands[0]
    if op.name == "memref.cast":
        e.sizes[res] = e.dims(src)
    elif op.name == "memref.collapse_shape":
        dims = e.dims(src)
        out = []
        for group in op.reassociation.data:
            n: ir.Value = _const(I64, 1)
            for i in group.data:
                n = e.mul_i64(n, dims[i.value.data])
            out.append(n)
        e.sizes[res] = out
    else:
        _sizes_from_operands(e, res, op.output_shape)


@handles("memref.view")
def _view(e: FunctionEmitter, op: Operation) -> None:
    """A typed view at a byte offset into an i8 buffer (plan-memory's arena)."""
    p = e.b.gep(e.get(op.source), [e.get(op.byte_shift)], inbounds=True, source_etype=I8)
    e.set(op.results[0], p)
    if op.sizes:
        _sizes_from_operands(e, op.results[0], op.sizes)


@handles("memref.copy")
def _copy(e: FunctionEmitter, op: Operation) -> None:
    src, dst = op.source, op.destination
    if _is_dynamic(src.type) or _is_dynamic(dst.type):
        ebytes = byte_size(memory_type(_memref(src.type).element_type))
        n = e.b.mul(e.element_count(src), _const(I64, ebytes))
        e.b.call(e.em.runtime_fn("llvm.memcpy.p0.p0.i64"), [e.get(dst), e.get(src), n, _const(I1, 0)])
        return
    n = _nbytes(src.type)
    if n != _nbytes(dst.type):
        raise CompileError(f"memref.copy between {src.type} and {dst.type}")
    if n:
        e.b.call(e.em.runtime_fn("llvm.memcpy.p0.p0.i64"),
                 [e.get(dst), e.get(src), _const(I64, n), _const(I1, 0)])


# scf


@handles("scf.for")
def _for(e: FunctionEmitter, op: Operation) -> None:
    block = op.body.block
    iv_arg, carried_args = block.args[0], block.args[1:]
    lo, hi = _const_int(op.lb), _const_int(op.ub)

    def body(iv, carried):
        e.set(iv_arg, iv)
        for a, v in zip(carried_args, carried):
            e.set(a, v)
        return e.emit_block(block)

    results = e.loop(e.get(op.lb), e.get(op.ub), e.get(op.step),
                     [e.get(v) for v in op.iter_args], body,
                     known_nonempty=lo is not None and hi is not None and lo < hi)
    for r, v in zip(op.results, results):
        e.set(r, v)


@handles("scf.if")
def _if(e: FunctionEmitter, op: Operation) -> None:
    b = e.b
    then_bb = e.fn.append_basic_block("if.then")
    else_bb = e.fn.append_basic_block("if.else")
    merge_bb = e.fn.append_basic_block("if.end")
    b.cbranch(e.get(op.cond), then_bb, else_bb)
    incoming = []
    for bb, region in ((then_bb, op.true_region), (else_bb, op.false_region)):
        b.position_at_end(bb)
        vals = e.emit_block(region.block) if region.blocks else []
        incoming.append((vals, b.block))
        b.branch(merge_bb)
    b.position_at_end(merge_bb)
    for i, r in enumerate(op.results):
        p = b.phi(scalar_type(r.type))
        for vals, bb in incoming:
            p.add_incoming(vals[i], bb)
        e.set(r, p)


@handles("scf.parallel")
def _parallel(e: FunctionEmitter, op: Operation) -> None:
    if op.initVals or op.results:
        raise UnsupportedOpError(
            "scf.parallel", "reductions on scf.parallel are not supported; "
            "express them with scf.for iter_args")
    nested = _enclosing_parallel(op) is not None
    dims = _parallel_dims(op)
    trips = prod(_trip(op.lowerBound[d], op.upperBound[d], op.step[d]) for d in range(dims))
    big = (not nested and not getattr(e, "serial_only", False)
           and parallel_work(op) >= e.em.parallel_min_work)
    if big and trips > 1:
        _outline_parallel(e, op)
    elif (big or e.outline_all) and e.em.outline_serial and op.parent_op() is not None \
            and op.parent_op().name == "func.func":
        # As much work, but one outer iteration (or little work, in a function of many loop
        # nests: OUTLINE_ALL_MIN_NESTS): no threads, but a function of its own all the same
        # (called directly), which LLVM compiles apart from the caller and only once for
        # identical loops (see LLVMEmitter.kernels)
        _outline_parallel(e, op, threads=False)
    else:
        _serial_parallel(e, op, 0)


# The threads take chunks of a loop's leading dims, flattened until there are this many
# iterations (a batch of 1 image, a (1, C, H, W) loop: C x H rows, not 1) and never the last
# dim unless the others are all of one trip (it is the loop LLVM vectorizes).
PARALLEL_MIN_TRIPS = 16


def _parallel_dims(op: Operation) -> int:
    """How many leading dims of `op` (an scf.parallel) the threads share, flattened: its
    first dim alone where that is dynamic; else from the first, up to and with the first of
    more than one trip, then more while fewer than PARALLEL_MIN_TRIPS iterations."""
    ndim = len(op.lowerBound)
    total, d = 1, 0
    while d < ndim:
        if any(_const_int(v) is None for v in (op.lowerBound[d], op.upperBound[d], op.step[d])):
            return max(d, 1)  # a dynamic dim: the threads share the ones before it (or it)
        if total > 1 and (total >= PARALLEL_MIN_TRIPS or d == ndim - 1):
            break
        total *= _trip(op.lowerBound[d], op.upperBound[d], op.step[d])
        d += 1
    return max(d, 1)


def _enclosing_parallel(op: Operation) -> Operation | None:
    p = op.parent_op()
    while p is not None:
        if p.name == "scf.parallel":
            return p
        p = p.parent_op()
    return None


def _serial_parallel(e: FunctionEmitter, op: Operation, first_dim: int) -> None:
    block = op.body.block
    ndim = len(op.lowerBound)
    lanes = op.attributes[VECTORIZE_ATTR].value.data if VECTORIZE_ATTR in op.attributes else 0

    def nest(d: int) -> list[ir.Value]:
        if d == ndim:
            e.emit_block(block)
            return []
        lo, hi = _const_int(op.lowerBound[d]), _const_int(op.upperBound[d])

        def body(iv, _):
            e.set(block.args[d], iv)
            nest(d + 1)
            return []

        e.loop(e.get(op.lowerBound[d]), e.get(op.upperBound[d]), e.get(op.step[d]), [],
               body, known_nonempty=lo is not None and hi is not None and lo < hi,
               vectorize=lanes if d == ndim - 1 else 0)
        return []

    nest(first_dim)


def _is_inside(v: SSAValue, op: Operation) -> bool:
    if isinstance(v, BlockArgument):
        owner = v.block.parent_op()
    else:
        owner = v.op
    while owner is not None:
        if owner is op:
            return True
        owner = owner.parent_op()
    return False


_REMATERIALIZE = ("arith.constant", "memref.get_global")


def _outline_parallel(e: FunctionEmitter, op: Operation, threads: bool = True) -> None:
    """Outline a top-level scf.parallel into `@<fn>.par<k>(ptr ctx, i64 lo, i64 hi)` (a chunk
    function that unpacks the captured values from ctx and calls the alwaysinline body), run
    by `aicc_parallel_for`, or called directly with [0, n) when not `threads`. A loop whose
    body function is identical to an earlier one's, modulo its name, reuses that one's chunk
    function (`LLVMEmitter.kernels`)."""
    em = e.em
    name = f"{e.fn.name}.par{e._npar}"
    e._npar += 1
    # Values from outside the loop, in first-use order; the loop's own bounds included.
    outside: list[SSAValue] = []
    seen: set[SSAValue] = set()

    def note(v: SSAValue):
        if v not in seen and not _is_inside(v, op):
            seen.add(v)
            outside.append(v)

    for v in op.operands:
        note(v)
    for inner in op.walk():
        if inner is op:
            continue
        for v in inner.operands:
            note(v)

    # Constants are made again inside: LLVM folds the loads of a small constant global. A
    # global whose bytes the IR does not hold (external data: the weights) is a parameter
    # like any buffer, so that loop nests alike but for their weights are one function.
    remat = [v for v in outside if isinstance(v, OpResult) and v.op.name in _REMATERIALIZE
             and not _external_global(e.get(v))]
    # One parameter per distinct LLVM value (a reshaped memref is the same pointer).
    params: list[ir.Value] = []
    param_of: dict[SSAValue, int] = {}
    for v in outside:
        if v in remat:
            continue
        llv = e.get(v)
        for i, p in enumerate(params):
            if p is llv:
                param_of[v] = i
                break
        else:
            param_of[v] = len(params)
            params.append(llv)

    # The sizes of dynamic memrefs used inside travel as parameters too.
    size_slots: dict[SSAValue, list[int | ir.Value]] = {}
    for v in outside:
        if v in e.sizes:
            slots: list[int | ir.Value] = []
            for llv in e.sizes[v]:
                if isinstance(llv, ir.Constant):
                    slots.append(llv)
                    continue
                for i, p in enumerate(params):
                    if p is llv:
                        slots.append(i)
                        break
                else:
                    slots.append(len(params))
                    params.append(llv)
            size_slots[v] = slots
    # The body function: typed parameters, noalias where the pointer is a distinct object.
    body_fn = ir.Function(em.module, ir.FunctionType(VOID, [p.type for p in params] + [I64, I64]),
                          name=name + ".body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("alwaysinline")
    body_fn.attributes.add("nounwind")
    em.vector_attrs(body_fn)
    disjoint = _disjoint_views(e, param_of, params)
    for i, (arg, p) in enumerate(zip(body_fn.args, params)):
        if isinstance(p.type, ir.PointerType) and (_distinct_object(p) or i in disjoint):
            arg.add_attribute("noalias")
            arg.add_attribute("captures(none)")
        if _external_global(p):  # what the body knew of the global itself
            arg.attributes.align = p.align
    sub = FunctionEmitter(em, body_fn)
    sub.serial_only = True
    for v, i in param_of.items():
        sub.set(v, body_fn.args[i])
    for v, slots in size_slots.items():
        sub.sizes[v] = [body_fn.args[x] if isinstance(x, int) else x for x in slots]
    for v in remat:
        sub.emit_op(v.op)
    lo_arg, hi_arg = body_fn.args[-2], body_fn.args[-1]
    block = op.body.block
    one = _const(I64, 1)
    dims = _parallel_dims(op)
    # the flattened dims' trips (all constant where more than one dim is flattened)
    trips = [_trip(op.lowerBound[d], op.upperBound[d], op.step[d]) for d in range(dims)]
    first = next((d for d in range(dims) if trips[d] != 1), dims - 1)

    def chunk_body(k, _):
        for d in range(dims):  # k's digits in the trips, row-major
            inner = prod(trips[d + 1:])
            if dims > 1 and trips[d] == 1:
                idx = _const(I64, 0)
            else:
                idx = k if inner == 1 else sub.b.udiv(k, _const(I64, inner))
                if d != first:
                    idx = sub.b.urem(idx, _const(I64, trips[d]))
            if _const_int(op.step[d]) != 1:
                idx = sub.b.mul(idx, sub.get(op.step[d]), flags=["nsw"])
            if _const_int(op.lowerBound[d]) != 0:
                idx = sub.b.add(idx, sub.get(op.lowerBound[d]), flags=["nsw"])
            sub.set(block.args[d], idx)
        if len(op.lowerBound) > dims:
            _serial_parallel(sub, op, dims)
        else:
            sub.emit_block(block)
        return []

    sub.loop(lo_arg, hi_arg, one, [], chunk_body)
    sub.b.ret_void()
    sub.finish()

    em.outlined += 1
    key = _structure_key(body_fn)
    chunk = em.kernels.get(key)
    if chunk is not None:  # the same loop nest was outlined before: call that one
        del em.module.globals[body_fn.name]
    else:
        # The chunk function the runtime calls: unpack ctx slots, call the body. noinline:
        # called directly (a loop without threads), it stays a function of its own whether
        # or not LLVM compiles it in the caller's module.
        chunk = ir.Function(em.module, ir.FunctionType(VOID, [PTR, I64, I64]), name=name)
        chunk.attributes.add("nounwind")
        chunk.attributes.add("noinline")
        em.vector_attrs(chunk)
        cb = ir.IRBuilder(chunk.append_basic_block("entry"))
        ctx, lo, hi = chunk.args
        args = []
        for i, p in enumerate(params):
            slot = cb.gep(ctx, [_const(I64, i)], inbounds=True, source_etype=I64)
            args.append(cb.load(slot, typ=p.type, align=8))
        cb.call(body_fn, args + [lo, hi])
        cb.ret_void()
        em.kernels[key] = chunk

    # Caller: fill the ctx slots on the stack, hand the chunk function to the runtime.
    b = e.b
    if params:
        ctx_mem = e.alloca_builder.alloca(ir.ArrayType(I64, len(params)))
        ctx_mem.align = 8
        ctx_mem.type = PTR
        for i, p in enumerate(params):
            slot = b.gep(ctx_mem, [_const(I64, i)], inbounds=True, source_etype=I64)
            b.store(p, slot, align=8)
    else:
        ctx_mem = ir.Constant(PTR, None)
    if dims > 1:
        n = _const(I64, prod(trips))
    else:
        lbv, ubv, stv = e.get(op.lowerBound[0]), e.get(op.upperBound[0]), e.get(op.step[0])
        span = b.sub(ubv, lbv)
        if _const_int(op.step[0]) != 1:
            span = b.sdiv(b.add(span, b.sub(stv, one)), stv)
        n = e.intr("smax", span, _const(I64, 0))
    if threads:
        b.call(em.runtime_fn(PARALLEL_FOR_SYMBOL), [chunk, ctx_mem, n])
    else:
        b.call(chunk, [ctx_mem, _const(I64, 0), n])


def _structure_key(fn: ir.Function) -> str:
    """What identifies an outlined body function's code: its text with its own name taken
    out (the values it uses from outside are its parameters, the globals and micro-kernels it
    names are named by what they hold), so two loop nests that do the same work on
    different buffers get the same key, and nothing else does."""
    text = str(fn)
    return text.replace(f'@"{fn.name}"', "@SELF", 1)


def _arena_range(v: SSAValue):
    """(arena, start, end) of a memref that is a memref.view of an i8 buffer (plan-memory's
    workspace), through reshapes; None for anything else. Start and end are (group, offset)
    pairs, ordered as the arena is: group -1 is its static part (offsets in bytes), and group g
    its g-th dynamic part (offsets in units of that part's monomial, plan-memory's
    `aicc.arena_slot`), which lies after the static part and the parts before it."""
    while isinstance(v, OpResult) and v.op.name in ("memref.collapse_shape", "memref.expand_shape",
                                                    "memref.cast"):
        v = v.op.operands[0]
    if not (isinstance(v, OpResult) and v.op.name == "memref.view"):
        return None
    slot = v.op.attributes.get("aicc.arena_slot")
    if slot is not None:
        g, lo, hi = slot.get_values()
        return v.op.source, (g, lo), (g, hi)
    shift = _const_int(v.op.byte_shift)
    if shift is None or v.op.sizes:
        return None
    return v.op.source, (-1, shift), (-1, shift + _nbytes(v.type))


def _disjoint_views(e: FunctionEmitter, param_of: dict[SSAValue, int],
                    params: list[ir.Value]) -> set[int]:
    """The outlined loop's pointer parameters that are views of one workspace at byte ranges
    that do not overlap (plan-memory gives buffers live at once disjoint ranges), when the
    loop reaches that workspace through these views alone. Each may be marked noalias, so
    LLVM vectorizes a copy between two of them (an im2col reading a padded buffer) without
    run-time overlap checks it may not be able to form."""
    by_param: dict[int, list[SSAValue]] = {}
    for v, i in param_of.items():
        if isinstance(v.type, builtin.MemRefType):
            by_param.setdefault(i, []).append(v)
    ranges: dict[int, tuple[SSAValue, int, int]] = {}
    arenas: dict[ir.Value, list[int]] = {}
    for i, vs in by_param.items():
        rs = {_arena_range(v) for v in vs}
        if len(rs) != 1 or None in rs:
            continue
        (r,) = rs
        ranges[i] = r
        arenas.setdefault(e.get(r[0]), []).append(i)
    out: set[int] = set()
    for arena, members in arenas.items():
        if any(p is arena for p in params):  # the whole workspace is reachable too
            continue
        spans = sorted((ranges[i][1], ranges[i][2]) for i in members)
        if all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])):
            out.update(members)
    return out


def _external_global(p: ir.Value) -> bool:
    """A global declared external: data bound at load time (LLVMEmitter.external_data)."""
    return isinstance(p, ir.GlobalVariable) and p.linkage == "external"


def _distinct_object(p: ir.Value) -> bool:
    """True when ``p`` points at its own object: a noalias argument, a fresh allocation, a
    stack buffer or a global."""
    if isinstance(p, ir.Argument):
        return "noalias" in p.attributes
    if isinstance(p, ir.GlobalVariable):
        return True
    if isinstance(p, ir.instructions.AllocaInstr):
        return True
    if isinstance(p, ir.instructions.CallInstr):
        return getattr(p.callee, "name", None) == "aligned_alloc"
    return False


def _aligned_copy(data: np.ndarray, align: int) -> np.ndarray:
    raw = np.empty(data.nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    out = raw[start:start + data.nbytes]
    out[:] = data
    return out


# Weights at least this big stay out of the LLVM IR text (see LLVMEmitter.external_data).
EXTERNAL_DATA_MIN_BYTES = 1 << 16
# Global, because MCJIT resolves external symbols process-wide: each module's data is unique.
_EXTERNAL_IDS = itertools.count()


def emit_llvm(module: builtin.ModuleOp, *, vector_ldexp: bool = False) -> str:
    """Unoptimized LLVM IR text for a loop-IR module."""
    return str(LLVMEmitter(vector_ldexp=vector_ldexp).emit(module))

