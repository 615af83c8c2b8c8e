"""tile-conv: the packed convolutions (CPU), as register tiles of `aicc_cpu.conv_kernel`.

nn_to_linalg lowers a conv2d that `choose_conv_lowering` gives "packed" to the direct generic
(loops n, g, oc, oh, ow | ic, kh, kw over the padded input) marked
`aicc.conv_lowering = "packed"`, and choose-schedule records its register tile in
`aicc.conv_schedule = {vw, owb, ocv}` (`choose_conv_schedule`: vw from the target's vector
width). On memrefs, this pass replaces that generic by

    %wp = memref.get_global @<weight>_packed<vw>     the weight packed now, at compile time,
                                                    as [OC/vw][KH][KW][IC][vw] (zero past OC)
    scf.parallel (n, group of ocv channel vectors, oh):
      scf.for ow0 (step owb):
        aicc_cpu.conv_kernel %x[...], %wp[...], %out[...] {owb, ocv, ocn, vw, ...}
      [one kernel of the OW % owb last columns]
    [one more parallel loop for the OC % (ocv*vw) last channels, ocn of them]

A depthwise conv (one input and one output channel per group) goes to
`aicc_cpu.dw_kernel` instead, its columns in vectors:

    scf.parallel (n, channel, oh):
      scf.for ow0 (step owb * vw):
        aicc_cpu.dw_kernel %x[...], %w[...], %out[...] {cols, owb, vw, kh, kw, ...}
      [one kernel of the last columns, its last vector masked]

with the tile from `choose_dw_schedule` (owb vectors of vw columns) and the weight read
where it lies (kh x kw scalars per channel, broadcast); the start and the epilogue fold in
as below.

The input is read in place (plain NCHW, already padded by aicc.pad): the kernel broadcasts
one input value at a time against vw output channels of the packed weight, so the conv
makes no im2col copy. With the schedule's `nhwc` = 1 (a 1x1 conv on a small image, see
choose_conv_schedule) the input is first copied as [N][W][IC] and read from there. A
weight known only at run time (no dense global: fold-conv-input-scale's weight times a
gate) is packed by a loop nest before the conv into a temporary, laid out as above. The
kernels' owb x ocv accumulators go into the NCHW output, so no layout conversion follows.
The output's start (the zero fill, or the per-channel bias that
nn_to_linalg broadcast into it, right before the conv) is folded into the kernels, which
then start from zero or the bias and store without reading the output; any other start is
kept, the kernels adding into it. The first loop carries `aicc.tiled` (the generic's flops) for the
statistics. A weight that is not a dense global, a non-f32 or strided operand leaves the
generic as it is (a loop nest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.dialects.aicc import dense_from_numpy, numpy_from_dense
from compiler.dialects.aicc_cpu import CONV_UNROLL, ConvKernelOp, DwKernelOp, YieldOp
from compiler.errors import CompileError
from compiler.lowering.conv_lowering import CONV_LOWERING_ATTR, depthwise_generic_shapes
from compiler.lowering.loop_builder import IndexBuilder
from compiler.lowering.utils import PARALLEL, build_generic, flat_view, is_before, reshaped_view, view_root
from compiler.stats import TILED_ATTR, flops
from compiler.targets.cpu.schedule import (
    choose_conv_schedule,
    choose_dw_schedule,
    conv_schedule_of,
    pointwise_row,
)


def _d(i: int) -> AffineDimExpr:
    return AffineDimExpr(i)


def _c(v: int) -> AffineConstantExpr:
    return AffineConstantExpr(v)


def _coeffs(e, ndims: int) -> list[int]:
    """The coefficients of dims 0..ndims-1 in the linear expression `e`."""
    out = []
    for i in range(ndims):
        dims = [0] * ndims
        dims[i] = 1
        out.append(AffineMap(ndims, 0, (e,)).eval(dims, [])[0] - AffineMap(ndims, 0, (e,)).eval(
            [0] * ndims, [])[0])
    return out


def _global_of(v: SSAValue, module: ModuleOp) -> memref.GlobalOp | None:
    """The dense global that `v` reads, through reshapes."""
    v = view_root(v)
    if not (isinstance(v, OpResult) and isinstance(v.op, memref.GetGlobalOp)):
        return None
    name = v.op.name_.root_reference.data
    for op in module.ops:
        if isinstance(op, memref.GlobalOp) and op.sym_name.data == name \
                and isinstance(op.initial_value, DenseIntOrFPElementsAttr):
            return op
    return None


def _parallel(b: Builder, ix: IndexBuilder, ubs: list[int], body) -> scf.ParallelOp:
    """scf.parallel over 0 <= ivs < ubs (dims of one trip are constants 0, but the last when
    all are); body(builder, ivs)."""
    live = [i for i, u in enumerate(ubs) if u > 1] or [len(ubs) - 1]
    block = Block(arg_types=[IndexType()] * len(live))
    loop = b.insert(scf.ParallelOp([ix.const(0)] * len(live), [ix.const(ubs[i]) for i in live],
                                   [ix.const(1)] * len(live), Region(block)))
    Builder(InsertPoint.at_end(block)).insert(scf.ReduceOp())
    ivs = [ix.const(0)] * len(ubs)
    for a, i in zip(block.args, live):
        ivs[i] = a
    body(Builder(InsertPoint.before(block.last_op)), ivs)
    return loop


def _for(b: Builder, ix: IndexBuilder, ub: int, step: int, body) -> None:
    """scf.for 0 <= iv < ub step `step`; one trip: no loop."""
    if ub <= 0:
        return
    if ub <= step:
        body(b, ix.const(0))
        return
    block = Block(arg_types=[IndexType()])
    b.insert(scf.ForOp(ix.const(0), ix.const(ub), ix.const(step), [], Region(block)))
    Builder(InsertPoint.at_end(block)).insert(scf.YieldOp())
    body(Builder(InsertPoint.before(block.last_op)), block.args[0])


def _nest(b: Builder, ix: IndexBuilder, ubs: list[int], body, ivs: tuple = ()) -> None:
    """scf.for loops 0 <= iv < ub, one per entry of `ubs`, outermost first; body(builder,
    ivs) in the innermost."""
    if not ubs:
        body(b, ivs)
        return
    _for(b, ix, ubs[0], 1, lambda b, iv: _nest(b, ix, ubs[1:], body, (*ivs, iv)))


@dataclass
class _Conv:
    """A packed conv generic's shapes, strides and operands (memrefs)."""
    op: linalg.GenericOp
    x: SSAValue
    w: SSAValue
    out: SSAValue
    n: int
    ic: int
    hp: int
    wp: int
    oc: int
    kh: int
    kw: int
    oh: int
    ow: int
    sh: int
    sw: int
    dh: int
    dw: int
    depthwise: bool = False
    groups: int = 1  # ic and oc are then per group

    @staticmethod
    def match(op) -> "_Conv | None":
        if not isinstance(op, linalg.GenericOp):
            return None
        attr = op.attributes.get(CONV_LOWERING_ATTR)
        if not (isinstance(attr, StringAttr) and attr.data == "packed"):
            return None
        if len(op.inputs) != 2 or len(op.outputs) != 1 or not all(
                isinstance(v.type, MemRefType) for v in (*op.inputs, *op.outputs)):
            raise CompileError("tile-conv: run bufferize first (an packed conv on tensors)")
        x, w = op.inputs
        out = op.outputs[0]
        xs, ws, os_ = (v.type.get_shape() for v in (x, w, out))
        depthwise = depthwise_generic_shapes(xs, ws, os_)
        if depthwise and not any(d < 0 for d in (*xs, *ws, *os_)):
            xs, ws, os_ = (xs[0], 1, xs[1], *xs[3:]), (1, ws[0], 1, *ws[3:]), (os_[0], 1, os_[1], *os_[3:])
        elif len(xs) != 5 or len(ws) != 5 or len(os_) != 5 or not xs[1] == ws[0] == os_[1] \
                or any(d < 0 for d in (*xs, *ws, *os_)):
            raise CompileError(f"tile-conv: an packed conv of input {xs}, weight {ws} and "
                               f"output {os_}: expected static (N, 1, IC, H, W), (1, OC, IC, KH, "
                               "KW) and (N, 1, OC, OH, OW)")
        if not isinstance(x.type.element_type, Float32Type) or not all(
                isinstance(v.type.layout, NoneAttr) for v in (x, out)):
            return None  # f32 and dense row-major only: the generic stays a loop nest
        xmap = op.indexing_maps.data[0].data
        rh, rw = xmap.results[3], xmap.results[4]
        ch, cw = _coeffs(rh, 8), _coeffs(rw, 8)
        return _Conv(op, x, w, out, xs[0], xs[2], xs[3], xs[4], ws[1], ws[3], ws[4],
                     os_[3], os_[4], ch[3], cw[4], ch[6], cw[7], depthwise, xs[1])


def _start_of(cv: _Conv) -> tuple[int, SSAValue | None, Operation | None]:
    """How the conv's output starts, when the op right before the conv (views, constants
    and globals aside) writes all of it: (1, None, a zero linalg.fill) or (2, the bias, a
    generic broadcasting a per-channel bias into it), which the kernels then do themselves
    (aicc_cpu.conv_kernel's `start`); else (0, None, None), the kernels adding into it."""
    prev = cv.op.prev_op
    while isinstance(prev, arith.ConstantOp | memref.GetGlobalOp | memref.CollapseShapeOp
                     | memref.ExpandShapeOp):
        prev = prev.prev_op
    root, count = view_root(cv.out), int(np.prod(cv.out.type.get_shape()))
    if not isinstance(prev, linalg.FillOp | linalg.GenericOp) or len(prev.outputs) != 1:
        return 0, None, None
    dst = prev.outputs[0]
    if view_root(dst) is not root or not isinstance(dst.type, MemRefType) \
            or int(np.prod(dst.type.get_shape())) != count:
        return 0, None, None
    if isinstance(prev, linalg.FillOp):
        value = prev.inputs[0]
        if isinstance(value, OpResult) and isinstance(value.op, arith.ConstantOp) \
                and isinstance(value.op.value, FloatAttr) and value.op.value.value.data == 0.0:
            return 1, None, prev
        return 0, None, None
    ops = list(prev.body.block.ops)
    if len(prev.inputs) != 1 or len(ops) != 1 or list(ops[0].operands) != [prev.body.block.args[0]]:
        return 0, None, None
    src = prev.inputs[0]
    maps = [m.data for m in prev.indexing_maps.data]
    shape = src.type.get_shape() if isinstance(src.type, MemRefType) else ()
    if dst.type.get_shape() != cv.out.type.get_shape() or maps[1] != AffineMap.identity(5) \
            or not isinstance(src.type.layout, NoneAttr) or int(np.prod(shape)) != cv.oc * cv.groups:
        return 0, None, None
    # the output's channel dims: (N, C, 1, ..) depthwise, (N, G, OC/G, ..) else (G = 1 or not)
    chans = [1] if cv.depthwise else [1, 2] if cv.groups > 1 else [2]
    varying = []
    for e, size in zip(maps[0].results, shape):  # only the channel dims vary, in order
        if size == 1:
            continue
        if not (isinstance(e, AffineDimExpr) and e.position in chans):
            return 0, None, None
        varying.append(e.position)
    if varying != sorted(varying):
        return 0, None, None
    return 2, src, prev


_PURE = (arith.ConstantOp, memref.GetGlobalOp, memref.CollapseShapeOp, memref.ExpandShapeOp,
         memref.AllocOp, memref.ViewOp)


def _views(root: SSAValue) -> set[SSAValue]:
    """`root` and its reshapes, through chains of them."""
    out, todo = {root}, [root]
    while todo:
        for u in todo.pop().uses:
            if isinstance(u.operation, memref.CollapseShapeOp | memref.ExpandShapeOp):
                r = u.operation.results[0]
                if r not in out:
                    out.add(r)
                    todo.append(r)
    return out


def scalar_constant(v: SSAValue) -> float | None:
    """The value of a one-element float buffer read from a dense constant global, else None
    (an i1 one is a condition, not a value)."""
    v = view_root(v)
    if not (isinstance(v, OpResult) and isinstance(v.op, memref.GetGlobalOp)) \
            or int(np.prod(v.type.get_shape())) != 1 \
            or not isinstance(v.type.element_type, Float16Type | Float32Type | Float64Type):
        return None
    module = v.op.get_toplevel_object()
    g = _global_of(v, module) if isinstance(module, ModuleOp) else None
    if g is None:
        return None
    return float(numpy_from_dense(g.initial_value).reshape(-1)[0])


def buffer_users(root: SSAValue) -> tuple[set[SSAValue], list[Operation]]:
    """`root`'s views (itself and its reshapes) and the ops that use them, reshapes and
    deallocations aside."""
    views = _views(root)
    return views, [u.operation for v in views for u in v.uses
                   if not isinstance(u.operation, memref.CollapseShapeOp | memref.ExpandShapeOp
                                     | memref.DeallocOp)]


class _Epilogue(NamedTuple):
    """The elementwise op after a conv that its kernels compute (see _epilogue_of)."""
    op: linalg.GenericOp  # the op the kernels replace
    dest: SSAValue  # its result D, which the kernels write
    res: SSAValue | None  # a residual the kernels add
    relu: bool  # then max(., 0)
    hi: float | None  # then min(., hi): ReLU6's top
    region: Region | None  # any other function of the output: the kernels' epilogue region


def _epilogue_of(cv: _Conv, init: Operation | None, clip: bool = False) -> _Epilogue | None:
    """The elementwise op right after the conv (constants, views and allocations between)
    that is the only reader of the conv's output, a temporary: D = relu(out), out + r or
    relu(out + r), all operands (N, OC, OH, OW) read and written in place, and (with `clip`:
    the kernel can) D = min(max(out, 0), hi), ReLU6's clamp, its bounds constants or
    one-element constant buffers; or any other function of out alone made of the ops in
    EPILOGUE_OPS (sigmoid, SiLU, hardswish, GELU), which the kernels compute as their
    `epilogue` region. Returns what the kernels then compute (a ResNet block's residual add
    and ReLU), or None. `init`, the output's start that the kernels take over, is no reader."""
    root = view_root(cv.out)
    if not (isinstance(root, OpResult) and isinstance(root.op, memref.AllocOp)):
        return None
    views, users = buffer_users(root)
    readers = [o for o in users if o not in (cv.op, init)]
    if len(readers) != 1 or not isinstance(readers[0], linalg.GenericOp):
        return None
    g = readers[0]
    roots = {view_root(v) for v in (*g.inputs, *g.outputs)}
    nxt = cv.op.next_op
    while nxt is not g:  # between: pure ops, and deallocations of other buffers
        if nxt is None or not (isinstance(nxt, _PURE) or (
                isinstance(nxt, memref.DeallocOp) and view_root(nxt.memref) not in roots)):
            return None
        nxt = nxt.next_op
    count = int(np.prod(cv.out.type.get_shape()))
    args = g.body.block.args
    # one-element constant inputs (a clamp's bounds) are values, not operands
    consts = {args[i]: c for i, v in enumerate(g.inputs)
              if (c := scalar_constant(v)) is not None and count > 1}
    kept = [i for i in range(len(g.inputs)) if args[i] not in consts]
    inputs = [g.inputs[i] for i in kept]
    operands = [*inputs, *g.outputs]
    if len(g.outputs) != 1 or len(inputs) not in (1, 2) or not all(
            isinstance(v.type, MemRefType) and isinstance(v.type.layout, NoneAttr)
            and int(np.prod(v.type.get_shape())) == count for v in operands):
        return None
    rank = len(g.outputs[0].type.get_shape())
    maps = g.indexing_maps.data
    if any(maps[i].data != AffineMap.identity(rank) for i in (*kept, len(g.inputs))) or any(
            v.type.get_shape() != g.outputs[0].type.get_shape() for v in operands):
        return None
    c_in = [k for k, v in enumerate(inputs) if v in views]
    if len(c_in) != 1 or view_root(g.outputs[0]) in (root,) or any(
            view_root(v) is root for k, v in enumerate(inputs) if k != c_in[0]):
        return None
    a_out = args[kept[c_in[0]]]
    a_res = args[kept[1 - c_in[0]]] if len(inputs) == 2 else None
    ops = [o for o in g.body.block.ops if not isinstance(o, linalg.YieldOp | arith.ConstantOp)]

    def value(v) -> float | None:
        if isinstance(v, OpResult) and isinstance(v.op, arith.ConstantOp) \
                and isinstance(v.op.value, FloatAttr):
            return v.op.value.value.data
        return consts.get(v)

    def is_relu(o, x) -> bool:
        return isinstance(o, arith.MaximumfOp) and (
            (o.lhs is x and value(o.rhs) == 0.0) or (o.rhs is x and value(o.lhs) == 0.0))

    def clip_hi(o, x) -> float | None:
        if not isinstance(o, arith.MinimumfOp):
            return None
        hi = value(o.rhs) if o.lhs is x else value(o.lhs) if o.rhs is x else None
        return hi if hi is not None and hi > 0.0 else None

    def is_add(o) -> bool:
        return isinstance(o, arith.AddfOp) and a_res is not None and {o.lhs, o.rhs} == {a_out, a_res}

    yielded = list(g.body.block.last_op.operands)
    hi = None
    if len(ops) == 1 and a_res is None and is_relu(ops[0], a_out):
        relu, res = True, None
    elif clip and len(ops) == 2 and a_res is None and is_relu(ops[0], a_out) \
            and (hi := clip_hi(ops[1], ops[0].results[0])) is not None:
        relu, res = True, None
    elif len(ops) == 1 and is_add(ops[0]):
        relu, res = False, inputs[1 - c_in[0]]
    elif len(ops) == 2 and is_add(ops[0]) and is_relu(ops[1], ops[0].results[0]):
        relu, res = True, inputs[1 - c_in[0]]
    elif a_res is None and (region := epilogue_region(g, a_out, consts)) is not None:
        return _Epilogue(g, g.outputs[0], None, False, None, region)
    else:
        return None
    if yielded != [ops[-1].results[0]]:
        return None
    return _Epilogue(g, g.outputs[0], res, relu, hi, None)


# The ops an epilogue region may hold: the kernels apply them to vectors (see
# compiler/codegen/llvm/conv_kernel.py and microkernel.py), which these lower to without a
# call per element.
EPILOGUE_OPS = {f"arith.{n}" for n in ("addf", "subf", "mulf", "divf", "negf", "maximumf",
                                       "minimumf", "maxnumf", "minnumf", "cmpf", "select")} | {
    f"math.{n}" for n in ("exp", "log", "tanh", "erf", "sqrt", "rsqrt", "absf", "fma", "floor",
                          "ceil")}


def epilogue_region(g: linalg.GenericOp, a_out: SSAValue,
                    consts: dict[SSAValue, float]) -> Region | None:
    """g's body as a function of the conv's output value alone, for the kernels' `epilogue`
    region (a sigmoid, SiLU, hardswish or GELU after the conv): its one-element constant
    operands become constants, as do float constants it uses from outside its body, and it
    must use nothing else from outside (not D's old value) and only the ops in EPILOGUE_OPS;
    else None."""
    ety = a_out.type
    block = Block(arg_types=[ety])
    bb = Builder(InsertPoint.at_end(block))
    mapping: dict[SSAValue, SSAValue] = {a_out: block.args[0]}
    for arg, c in consts.items():
        mapping[arg] = bb.insert(arith.ConstantOp(FloatAttr(c, ety))).result
    *ops, yield_op = list(g.body.block.ops)
    for o in ops:
        for v in o.operands:  # a float constant defined outside the body: cloned in
            if v not in mapping and isinstance(v, OpResult) and isinstance(
                    v.op, arith.ConstantOp) and v.type == ety and not g.is_ancestor(v.op):
                mapping[v] = bb.insert(v.op.clone()).result
        if not isinstance(o, arith.ConstantOp) and o.name not in EPILOGUE_OPS \
                or any(v not in mapping for v in o.operands) \
                or any(r.type != ety for r in o.results if not isinstance(o, arith.CmpfOp)):
            return None
        bb.insert(o.clone(value_mapper=mapping))
    out = [mapping.get(v) for v in yield_op.operands]
    if len(out) != 1 or out[0] is None or out[0].type != ety:
        return None
    bb.insert(YieldOp(out[0]))
    return Region(block)


@dataclass
class _Pad:
    """A conv input that is a zero-padded copy of `src` (N, C, H, W): top and left pads."""
    src: SSAValue
    top: int
    left: int
    h: int
    w: int
    ops: tuple[Operation, Operation]  # the zero fill and the copy


def _padded_input(cv: _Conv) -> _Pad | None:
    """The padding before the conv, when its input is a buffer that only a zero linalg.fill
    and a copy of a (N, C, H, W) source into its interior write, read only by the conv: the
    kernels can read the source instead (padding read through), and the buffer goes."""
    root = view_root(cv.x)
    if not (isinstance(root, OpResult) and isinstance(root.op, memref.AllocOp)):
        return None
    _, users = buffer_users(root)
    fills = [o for o in users if isinstance(o, linalg.FillOp)]
    copies = [o for o in users if isinstance(o, linalg.GenericOp) and o is not cv.op]
    if len(fills) != 1 or len(copies) != 1 or len(users) != 3:
        return None
    fill, copy = fills[0], copies[0]
    value = fill.inputs[0]
    if not (isinstance(value, OpResult) and isinstance(value.op, arith.ConstantOp)
            and isinstance(value.op.value, FloatAttr) and value.op.value.value.data == 0.0):
        return None
    if fill.outputs[0] is not root or len(copy.inputs) != 1 or len(copy.outputs) != 1 \
            or copy.outputs[0] is not root:
        return None
    src = copy.inputs[0]
    shape = src.type.get_shape() if isinstance(src.type, MemRefType) else ()
    ops = list(copy.body.block.ops)
    if len(shape) != 4 or any(d < 0 for d in shape) or not isinstance(src.type.layout, NoneAttr) \
            or len(ops) != 1 or list(ops[0].operands) != [copy.body.block.args[0]]:
        return None
    in_map, out_map = (m.data for m in copy.indexing_maps.data)
    if in_map != AffineMap.identity(4) or len(out_map.results) != 4:
        return None
    offsets = out_map.eval([0] * 4, [])
    if [_coeffs(e, 4) for e in out_map.results] != [[int(i == j) for j in range(4)] for i in range(4)] \
            or offsets[0] or offsets[1] or tuple(shape[:2]) != (cv.n, cv.ic):
        return None
    # program order: fill, copy, then the conv, in one block
    if not (is_before(fill, copy) and is_before(copy, cv.op)):
        return None
    return _Pad(src, offsets[2], offsets[3], shape[2], shape[3], (fill, copy))


def keep_alive_through(v: SSAValue, op: Operation) -> None:
    """Move the deallocations of v's buffer that come before `op` (in its block) to right
    after it: `op` now reads the buffer, whose last reader was an earlier copy (a padding, an im2col)."""
    block = op.parent_block()
    for view in _views(view_root(v)):
        for u in list(view.uses):
            d = u.operation
            if isinstance(d, memref.DeallocOp) and is_before(d, op):
                d.detach()
                block.insert_op_after(d, op)


def erase_if_dead(root: SSAValue) -> None:
    """Drop an allocation that nothing reads or writes any more (views and deallocs aside)."""
    if not (isinstance(root, OpResult) and isinstance(root.op, memref.AllocOp)):
        return
    users = []
    todo = [root]
    while todo:
        for u in list(todo.pop().uses):
            o = u.operation
            if isinstance(o, memref.CollapseShapeOp | memref.ExpandShapeOp):
                todo.append(o.results[0])
            elif not isinstance(o, memref.DeallocOp):
                return
            users.append(o)
    for o in reversed(users):  # views after the views they read
        Rewriter.erase_op(o)
    Rewriter.erase_op(root.op)


def _pack_weight(module: ModuleOp, g: memref.GlobalOp, vw: int, b: Builder,
                 groups: int = 1) -> SSAValue:
    """The weight (OC, IC/G, KH, KW) packed as [G][OC/G/vw][KH][KW][IC/G][vw], zero past each
    group's OC/G, in a new global (made once per weight and width)."""
    name = f"{g.sym_name.data}_packed{vw}" + (f"g{groups}" if groups > 1 else "")
    existing = next((o for o in module.ops if isinstance(o, memref.GlobalOp)
                     and o.sym_name.data == name), None)
    if existing is None:
        data = numpy_from_dense(g.initial_value)
        w = data.reshape(groups, -1, *data.shape[-3:])
        _, oc, ic, kh, kw = w.shape
        ocb = -(-oc // vw)
        padded = np.zeros((groups, ocb * vw, ic, kh, kw), w.dtype)
        padded[:, :oc] = w
        packed = np.ascontiguousarray(
            padded.reshape(groups, ocb, vw, ic, kh, kw).transpose(0, 1, 4, 5, 3, 2)).reshape(-1)
        existing = memref.GlobalOp.get(
            StringAttr(name), MemRefType(Float32Type(), [packed.size]), dense_from_numpy(packed),
            sym_visibility=StringAttr("private"), constant=UnitAttr())
        module.body.block.insert_op_after(existing, g)
    return b.insert(memref.GetGlobalOp(name, existing.type)).memref


def _pack_weight_at_run_time(cv: _Conv, vw: int, b: Builder, ix: IndexBuilder) -> SSAValue:
    """The weight that only the run knows (a squeeze-and-excitation gate folded into a 1x1
    conv's weight, fold-conv-input-scale; a weight fed as an input) packed as _pack_weight
    packs a constant, [G][OC/G/vw][KH][KW][IC/G][vw] with zeros past each group's OC/G, into
    a temporary (`memref.alloc`, placed by plan-memory) by a loop nest before the conv:
    G * OC * IC * KH * KW copies, one pass over the weight against the conv's OH * OW
    multiply-adds per weight element."""
    G, oc, ic, kh, kw = cv.groups, cv.oc, cv.ic, cv.kh, cv.kw
    ocb, full, rest = -(-oc // vw), oc // vw, oc % vw
    wp = b.insert(memref.AllocOp.get(Float32Type(), 64, [G * ocb * kh * kw * ic * vw])).memref
    # dims: 0 group, 1 channel vector, 2 kernel row, 3 kernel column, 4 input channel, 5 lane
    at = ((((_d(0) * ocb + _d(1)) * kh + _d(2)) * kw + _d(3)) * ic + _d(4)) * vw + _d(5)

    zero = b.insert(arith.ConstantOp(FloatAttr(0.0, Float32Type()))).result

    def copy(q0: int = 0, lane0: int = 0, pad: bool = False):
        """The body storing channel vector q0 + q, lane lane0 + lane: the weight's value,
        or (`pad`, lanes past OC) zero."""
        def body(b: Builder, ivs) -> None:
            g, q, r, s, c, lane = ivs
            dims = {0: g, 1: b.insert(arith.AddiOp(q, ix.const(q0))).result if q0 else q,
                    2: r, 3: s, 4: c,
                    5: b.insert(arith.AddiOp(lane, ix.const(lane0))).result if lane0 else lane}
            v = zero if pad else b.insert(memref.LoadOp.get(
                cv.w, [g, ix.expr(b, _d(1) * vw + _d(5), dims), c, r, s])).res
            b.insert(memref.StoreOp.get(v, wp, [ix.expr(b, at, dims)]))
        return body

    _nest(b, ix, [G, full, kh, kw, ic, vw], copy())
    if rest:
        _nest(b, ix, [G, 1, kh, kw, ic, rest], copy(full))
        _nest(b, ix, [G, 1, kh, kw, ic, vw - rest], copy(full, rest, pad=True))
    return wp


def nhwc_applies(cv: _Conv) -> bool:
    """Can the kernels read this conv's input as an [N][H][W][IC] copy (schedule field
    `nhwc`)? Any conv of one group."""
    return not cv.depthwise and cv.groups == 1


def nhwc_stride(ic: int) -> int:
    """The floats from one pixel to the next in a conv's [N][W][IC] input copy: IC, and one
    64-byte line more where IC floats are an even count of lines. A kernel call reads owb
    pixels at once, owb streams one stride apart: at a stride of 2^k lines they all fall in
    one set of L1 (a 12-way set, 9 streams of an AVX-512 tile besides the weight streams),
    and 2048 input channels (8 KiB) ran at half speed on a Zen 5; an odd count of lines
    spreads them over the sets."""
    lines, rest = divmod(ic * 4, 64)
    return ic + 16 if not rest and lines % 2 == 0 else ic


def _input_as_nhwc(cv: _Conv, b: Builder) -> tuple[SSAValue, SSAValue | None]:
    """The input (N, 1, IC, Hp, Wp) as a temporary laid out [N][Hp][Wp][nhwc_stride(IC)]
    (`memref.alloc`, placed by plan-memory), written before the conv by linalg ops (which
    linalg-to-loops tiles as a transpose): a kernel's taps then read a pixel's channels
    contiguously instead of one float from each of IC planes. Where the input is a
    zero-padded copy read only by the conv (`_padded_input`), the copy writes this layout
    itself, into a zero-filled temporary, and the padded buffer goes (the caller erases it,
    the second value, once the conv no longer reads it): the layout costs no pass of its
    own."""
    n, ic, h, w = cv.n, cv.ic, cv.hp, cv.wp
    stride = nhwc_stride(ic)
    f32 = Float32Type()
    xt = b.insert(memref.AllocOp.get(f32, 64, [n * h * w * stride])).memref
    pad = _padded_input(cv)
    if pad is not None:
        zero = b.insert(arith.ConstantOp(FloatAttr(0.0, f32))).result
        b.insert(linalg.FillOp((zero,), (xt,), ()))
        src, top, left = pad.src, pad.top, pad.left
    else:
        src = reshaped_view(b, cv.x, MemRefType(f32, [n, ic, h, w]))
        top = left = 0
    if stride == ic:  # a transpose, which linalg-to-loops tiles
        out = reshaped_view(b, xt, MemRefType(f32, [n, h, w, ic]))
        out_map = AffineMap(4, 0, (_d(0), _d(2) + top, _d(3) + left, _d(1)))
    else:  # a pixel's stride longer than its channels: the flat index
        out = xt
        out_map = AffineMap(4, 0, ((((_d(0) * h + _d(2) + top) * w) + _d(3) + left) * stride
                                   + _d(1),))
    copy = b.insert(build_generic([src], [out], [AffineMap.identity(4), out_map],
                                  [PARALLEL] * 4, lambda bb, args: [args[0]]))
    if pad is None:
        return xt, None
    keep_alive_through(src, copy)
    for o in pad.ops:
        Rewriter.erase_op(o)
    return xt, view_root(cv.x)


def _weight_as_4d(module: ModuleOp, g: memref.GlobalOp, cv: _Conv) -> bool:
    return int(np.prod(g.type.get_shape())) == cv.groups * cv.oc * cv.ic * cv.kh * cv.kw


@dataclass(frozen=True)
class TileConv(ModulePass):
    """Every packed conv generic on memrefs as loops of `aicc_cpu.conv_kernel` (CPU)."""

    name = "tile-conv"

    vector_bits: int = 256  # for convs without an aicc.conv_schedule

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        packed: set[str] = set()
        for o in list(op.walk()):
            cv = _Conv.match(o)
            if cv is None:
                continue
            if cv.depthwise:
                s = conv_schedule_of(o) or choose_dw_schedule(self.vector_bits, cv.ow, oh=cv.oh,
                                                                strides=(cv.sh, cv.sw))
                self._rewrite_dw(cv, s)
                continue
            g = _global_of(cv.w, op)
            if g is not None and not _weight_as_4d(op, g, cv):
                continue
            if g is None and not isinstance(cv.w.type.layout, NoneAttr):
                continue  # a strided weight known only at run time: stays a loop nest
            s = conv_schedule_of(o) or choose_conv_schedule(
                self.vector_bits, cv.ow, cv.oc, k=cv.ic * cv.kh * cv.kw, pointwise=nhwc_applies(cv))
            self._rewrite(op, cv, g, s)
            if g is not None:
                packed.add(g.sym_name.data)
        for o in reversed(list(op.walk())):
            if isinstance(o, memref.GetGlobalOp | memref.CollapseShapeOp | memref.ExpandShapeOp) \
                    and not o.results[0].uses:
                Rewriter.erase_op(o)
        used = {o.name_.root_reference.data for o in op.walk() if isinstance(o, memref.GetGlobalOp)}
        for o in list(op.ops):
            if isinstance(o, memref.GlobalOp) and o.sym_name.data in packed - used:
                Rewriter.erase_op(o)

    @staticmethod
    def _rewrite(module: ModuleOp, cv: _Conv, g: memref.GlobalOp | None,
                 s: dict[str, int]) -> None:
        """`g`: the weight's dense global, None for a weight known only at run time."""
        vw, owb = s["vw"], min(s["owb"], cv.ow)
        ocv = min(s["ocv"], -(-cv.oc // vw))
        start, bias_src, epi, b, ix = _fold_start_and_epilogue(cv)
        wp = (_pack_weight(module, g, vw, b, cv.groups) if g is not None
              else _pack_weight_at_run_time(cv, vw, b, ix))
        x = flat_view(b, cv.x)
        out = flat_view(b, cv.out) if epi is None else None
        x_cs, x_rs = cv.hp * cv.wp, cv.wp
        nhwc = bool(s.get("nhwc")) and nhwc_applies(cv)
        padded = None
        if nhwc:
            x, padded = _input_as_nhwc(cv, b)
        o_cs = cv.oh * cv.ow
        w_ocs = cv.kh * cv.kw * cv.ic * vw
        ocb = -(-cv.oc // vw)  # channel vectors of a group
        ints = dict(vw=vw, ic=cv.ic, kh=cv.kh, kw=cv.kw, sw=cv.sw, dh=cv.dh, dw=cv.dw,
                    x_cs=x_cs, x_rs=x_rs, w_ocs=w_ocs, o_cs=o_cs)
        image = cv.groups * cv.ic * x_cs  # floats per image of the input the kernels read
        if nhwc:  # channel c of pixel (y, j) at (y * W + j) * stride + c
            stride = nhwc_stride(cv.ic)
            # (a pointwise row's one row and one tap: x_rs and dw unused, left at 1)
            x_rs = cv.wp * stride if cv.hp > 1 else 1
            ints.update(x_cs=1, x_rs=x_rs, sw=cv.sw * stride,
                        dw=cv.dw * stride if cv.kw > 1 else cv.dw)
            image = cv.hp * cv.wp * stride
        xcol = ints["sw"]  # a column's step in the input
        bias = flat_view(b, bias_src) if bias_src is not None else None
        res, relu, region = None, False, None
        if epi is not None:  # the kernels write the op's result, the conv's output goes
            out = flat_view(b, epi.dest)
            res = flat_view(b, epi.res) if epi.res is not None else None
            relu, region = epi.relu, epi.region
        G = cv.groups
        calls_per_row = -(-cv.ow // owb)

        def l2_prefetch(b: Builder, dims: dict, nq: int) -> tuple | None:
            """What the call at `dims` fetches into L2 (ConvKernelOp's l2pf): its share of
            the weights of the next nq channel vectors (of this group, or the next group's
            first: they follow in the packed weight), the calls of a block (its rows, and
            the column calls of each) one share each; None where the weight is packed at
            run time (then in cache), a block has one call, or the channel loop is not
            unrolled (fewer than CONV_UNROLL channels)."""
            calls = cv.oh * calls_per_row
            steps = cv.kh * cv.kw * (cv.ic // CONV_UNROLL)  # unrolled steps of a call
            if not s.get("l2pf") or g is None or calls < 2 or not steps:
                return None
            lines = -(-cv.kh * cv.kw * cv.ic * nq * vw * 4 // 64)  # the next block's weights
            rate = -(-lines // (calls * steps))
            share = steps * rate * 16  # floats a call fetches
            off = ix.expr(b, _d(4) * (ocb * w_ocs) + _d(1) * w_ocs + nq * w_ocs
                          + (_d(2) * calls_per_row + _d(3) // owb) * share, dims)
            return wp, off, rate

        def kernels(b: Builder, n: SSAValue, gi: SSAValue, q0: SSAValue, y: SSAValue, nq: int,
                    ocn: int) -> None:
            """Row y of the ocn output channels from vector block q0 on, of group gi of
            image n."""
            def at(b: Builder, ow0: SSAValue, cols: int) -> None:
                dims = {0: n, 1: q0, 2: y, 3: ow0, 4: gi}
                xo = ix.expr(b, _d(0) * image + _d(4) * (cv.ic * x_cs)
                             + _d(2) * (cv.sh * x_rs) + _d(3) * xcol, dims)
                wo = ix.expr(b, _d(4) * (ocb * w_ocs) + _d(1) * w_ocs, dims)
                oo = ix.expr(b, _d(0) * (G * cv.oc * o_cs) + _d(4) * (cv.oc * o_cs)
                             + _d(1) * (vw * o_cs) + _d(2) * cv.ow + _d(3), dims)
                bo = ix.expr(b, _d(4) * cv.oc + _d(1) * vw, dims) if bias is not None else None
                b.insert(ConvKernelOp(x, xo, wp, wo, out, oo, owb=cols, ocv=nq, ocn=ocn,
                                      start=start, bias=(bias, bo) if bias is not None else None,
                                      res=(res, oo) if res is not None else None, relu=relu,
                                      epilogue=region.clone() if region is not None else None,
                                      pf=s.get("pf", 0), l2pf=l2_prefetch(b, dims, nq), **ints))

            full = cv.ow - cv.ow % owb
            _for(b, ix, full, owb, lambda b, ow0: at(b, ow0, owb))
            if cv.ow % owb:
                at(b, ix.const(full), cv.ow % owb)

        tiles = cv.oc // (ocv * vw)  # tiles of ocv full vectors
        rest = cv.oc - tiles * ocv * vw  # channels left: one tile of fewer lanes
        loops = []
        if tiles:
            def body(b: Builder, ivs) -> None:
                n, gi, qg, y = ivs
                q0 = b.insert(arith.MuliOp(qg, ix.const(ocv))).result if tiles > 1 else ix.const(0)
                kernels(b, n, gi, q0, y, ocv, ocv * vw)
            loops.append(_parallel(b, ix, [cv.n, G, tiles, cv.oh], body))
        if rest:
            loops.append(_parallel(b, ix, [cv.n, G, 1, cv.oh], lambda b, ivs: kernels(
                b, ivs[0], ivs[1], ix.const(tiles * ocv), ivs[3], -(-rest // vw), rest)))
        if g is None:
            b.insert(memref.DeallocOp.get(wp))
        if nhwc:
            b.insert(memref.DeallocOp.get(x))
        _replace(cv, epi, loops[0])
        if padded is not None:  # the conv read it, now the kernels read the NHWC copy
            erase_if_dead(padded)

    @staticmethod
    def _rewrite_dw(cv: _Conv, s: dict[str, int]) -> None:
        """A depthwise conv as aicc_cpu.dw_kernel calls: owb vectors of vw columns per call
        along each output row of each channel. When the input is a zero-padded copy, the
        kernels read the unpadded source instead: rows whose window reaches into the padding
        (the first and last few) get kernels of their own that skip those tap rows, calls
        whose columns reach into it mask their loads, and the padded copy goes."""
        pad = _padded_input(cv)
        plane = s.get("plane") and pad is not None and cv.sh == cv.sw == 1 and cv.ow == pad.w
        if s.get("plane") and not plane:  # (a plane in one row needs an output as wide as X)
            s = choose_dw_schedule(32 * s["vw"], cv.ow, {"vw": s["vw"], "plane": 0})
        vw, owb = s["vw"], s["owb"]
        span = owb * vw
        start, bias_src, epi, b, ix = _fold_start_and_epilogue(cv, clip=True)
        if pad is not None:
            root = view_root(cv.x)
            for o in pad.ops:
                Rewriter.erase_op(o)
            keep_alive_through(pad.src, cv.op)
            x = flat_view(b, pad.src)
            h, w, top, left = pad.h, pad.w, pad.top, pad.left
        else:
            x = flat_view(b, cv.x)
            h, w, top, left = cv.hp, cv.wp, 0, 0
        wt = flat_view(b, cv.w)
        bias = flat_view(b, bias_src) if bias_src is not None else None
        out, res, relu, hi, region = (flat_view(b, cv.out), None, False, None, None) if epi is None \
            else (flat_view(b, epi.dest), flat_view(b, epi.res) if epi.res is not None else None,
                  epi.relu, epi.hi, epi.region)
        c, x_cs, o_cs = cv.ic, h * w, cv.oh * cv.ow

        def taps(y: int) -> tuple[int, int]:
            """The tap rows r of output row y that read a row of the source."""
            rows = [r for r in range(cv.kh) if 0 <= y * cv.sh - top + r * cv.dh < h]
            return (rows[0], rows[-1] + 1) if rows else (0, 0)

        def call(b: Builder, dims, xo: SSAValue, oo: SSAValue, cols: int, sw: int, **where):
            """One kernel call of `cols` columns of channel dims[1], X and O at offsets xo and
            oo; `where`: its columns / rows / plane (see DwKernelOp)."""
            wo = ix.expr(b, _d(1) * (cv.kh * cv.kw), dims)
            b.insert(DwKernelOp(x, xo, wt, wo, out, oo, start=start,
                                bias=(bias, dims[1]) if bias is not None else None,
                                res=(res, oo) if res is not None else None, relu=relu,
                                clip_hi=hi, epilogue=region.clone() if region is not None else None,
                                cols=cols, owb=-(-cols // vw), vw=vw, kh=cv.kh, kw=cv.kw,
                                sw=sw, dh=cv.dh, dw=cv.dw, x_rs=w, **where))

        def calls(b: Builder, n: SSAValue, ch: SSAValue, y: SSAValue, rows: tuple[int, int]):
            """The kernel calls of output row y (an index value) of channel ch of image n."""
            for ow0 in range(0, cv.ow, span):
                cols = min(span, cv.ow - ow0)
                c0 = ow0 * cv.sw - left  # the source column of lane 0's first tap
                edge = c0 < 0 or c0 + (cols - 1) * cv.sw + (cv.kw - 1) * cv.dw >= w
                dims = {0: n, 1: ch, 2: y}
                # the row's source offset, less `top` rows: may be negative, read-through
                xo = ix.expr(b, _d(0) * (c * x_cs) + _d(1) * x_cs + _d(2) * (cv.sh * w)
                             + _c(c0 - top * w), dims)
                oo = ix.expr(b, _d(0) * (c * o_cs) + _d(1) * o_cs + _d(2) * cv.ow + _c(ow0), dims)
                call(b, dims, xo, oo, cols, cv.sw, columns=(w, c0) if edge else None,
                     rows=rows if rows != (0, cv.kh) else None)

        if plane:
            # a whole plane in one row: the calls span the flattened pixels p0 .. of the
            # plane (masks from each lane's row and column), one parallel loop over
            # (image, channel)
            pixels = cv.oh * cv.ow

            def plane_calls(b: Builder, ivs) -> None:
                dims = {0: ivs[0], 1: ivs[1]}
                for p0 in range(0, pixels, span):
                    cols = min(span, pixels - p0)
                    xo = ix.expr(b, _d(0) * (c * x_cs) + _d(1) * x_cs + _c(p0 - top * w - left),
                                 dims)
                    oo = ix.expr(b, _d(0) * (c * o_cs) + _d(1) * o_cs + _c(p0), dims)
                    call(b, dims, xo, oo, cols, 1, columns=(w, -left), plane=(h, -top, p0))

            _replace(cv, epi, _parallel(b, ix, [cv.n, c], plane_calls))
            erase_if_dead(root)
            return
        # output rows by the tap rows they read: a parallel loop over the middle rows (all
        # taps), a loop over (image, channel) for each edge row
        kinds = [taps(y) for y in range(cv.oh)]
        full = [y for y in range(cv.oh) if kinds[y] == (0, cv.kh)]
        loops = []
        if full and full == list(range(full[0], full[-1] + 1)):
            y0 = full[0]

            def middle(b: Builder, ivs) -> None:
                y = ivs[2] if y0 == 0 else b.insert(arith.AddiOp(ivs[2], ix.const(y0))).result
                calls(b, ivs[0], ivs[1], y, (0, cv.kh))

            loops.append(_parallel(b, ix, [cv.n, c, len(full)], middle))
        else:
            full = []
        for y in range(cv.oh):
            if y in full:
                continue
            if kinds[y] == (0, 0):
                raise CompileError(f"tile-conv: output row {y} of a depthwise conv reads only "
                                   "padding")  # (a pad wider than the window: not made)
            loops.append(_parallel(b, ix, [cv.n, c, 1], lambda b, ivs, y=y: calls(
                b, ivs[0], ivs[1], ix.const(y), kinds[y])))
        _replace(cv, epi, loops[0])
        if pad is not None:
            erase_if_dead(root)


def _fold_start_and_epilogue(cv: _Conv, clip: bool = False):
    """The output's start and the epilogue that the kernels take over (see _start_of and
    _epilogue_of): the start's op erased, what lies between the conv and the epilogue moved
    before the conv. Returns (start, bias or None, epilogue or None, a builder before the
    conv, an IndexBuilder whose constants dominate it)."""
    start, bias_src, init = _start_of(cv)
    epi = _epilogue_of(cv, init, clip) if start else None
    if epi is not None:  # what lies between (views, allocations) moves before the conv
        nxt = cv.op.next_op
        while nxt is not epi.op:
            after = nxt.next_op
            if not isinstance(nxt, memref.DeallocOp):
                nxt.detach()
                cv.op.parent_block().insert_op_before(nxt, cv.op)
            nxt = after
    if init is not None:
        Rewriter.erase_op(init)
    b = Builder(InsertPoint.before(cv.op))
    # index constants go before a marker (itself the constant 0) ahead of all the code
    # below, so they dominate every use
    marker = b.insert(arith.ConstantOp(IntegerAttr(0, IndexType())))
    ix = IndexBuilder(Builder(InsertPoint.before(marker)))
    ix.consts[0] = marker.result
    return start, bias_src, epi, b, ix


def _replace(cv: _Conv, epi: _Epilogue | None, first_loop: Operation) -> None:
    """Erase the conv generic (and the epilogue op the kernels took over); the statistics
    count the conv once, as the generic it replaces (see compiler/stats.py), on
    `first_loop`."""
    fused = epi.op if epi is not None else None
    info = {"op": StringAttr("generic"), "flops": IntegerAttr(
        flops(cv.op) + (flops(fused) if fused is not None else 0), i64)}
    if fused is not None:
        info["epilogue"] = StringAttr(",".join(
            o.name for o in fused.body.block.ops
            if not isinstance(o, linalg.YieldOp | arith.ConstantOp)))
    first_loop.attributes[TILED_ATTR] = DictionaryAttr(info)
    root = view_root(cv.out)
    Rewriter.erase_op(cv.op)
    if fused is not None:
        Rewriter.erase_op(fused)
        erase_if_dead(root)


__all__ = ["TileConv"]
