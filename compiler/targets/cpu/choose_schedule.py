"""choose-schedule: attach a CPU schedule to every matmul-like linalg op.

    linalg.matmul ins(%a, %b) outs(%c)
  ==>
    linalg.matmul {aicc.schedule = {mr = 14 : i64, nr = 32 : i64, vw = 16 : i64, ...}} ins(...) outs(...)

A matmul operand produced by a 2-D transpose (used only there) is first read in place:
the matmul becomes a generic with the operand's map transposed, and tile-matmul's packing
does the transpose. The schedule (see `schedule.py`) comes from `choose_matmul_schedule` for the op's shape, the
target's vector width (`vector-bits`, 512 for AVX-512), cache sizes (`l1-bytes`,
`l2-bytes`) and thread count (`threads`, 0 for $AICC_NUM_THREADS or all cores). `overrides`
fixes fields, and the heuristic chooses the others around them: `mr=6,nr=32` for every
matmul, `0:mr=6;1:kc=128` per matmul in program order. An op that already has a schedule
keeps it (overrides still apply), so a schedule written into the IR by hand or by a tuner
wins. The matmul of a conv2d (marked `aicc.conv_lowering` by nn_to_linalg.py) gets a conv's
schedule: B, the conv's input matrix, read in place.

`record` names a tuning record (tuning_record.py): a matmul whose signature it holds, and
that no override names, takes the measured schedule and is marked `aicc.tuned`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, UnitAttr, i64
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import OpResult, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from compiler.errors import CompileError
from compiler.lowering.conv_lowering import (
    CONV_LOWERING_ATTR,
    CONV_SCHEDULE_ATTR,
    depthwise_generic_shapes,
)
from compiler.lowering.utils import PARALLEL, REDUCTION, build_generic
from compiler.targets.cpu.schedule import (
    K_UNROLL,
    NHWC_MIN_CHANNELS,
    choose_conv_schedule,
    choose_dw_schedule,
    conv_schedule_of,
    parse_conv_schedule,
    pointwise_row,
    SCHEDULE_ATTR,
    MatmulSchedule,
    choose_matmul_schedule,
    element_bytes,
    is_constant,
    match_matmul,
    parse_overrides,
    schedule_of,
)


def _transposed_source(v: SSAValue) -> SSAValue | None:
    """The source of `v` when v is the single-use result of a 2-D transpose generic."""
    gen = v.owner if isinstance(v, OpResult) else None
    if not isinstance(gen, linalg.GenericOp) or len(gen.inputs) != 1 or len(list(v.uses)) != 1:
        return None
    maps = [m.data for m in gen.indexing_maps]
    d0, d1 = AffineDimExpr(0), AffineDimExpr(1)
    if (len(maps) != 2 or maps[0] != AffineMap(2, 0, (d1, d0)) or maps[1] != AffineMap.identity(2)
            or any(it.data != IteratorType.PARALLEL for it in gen.iterator_types)):
        return None
    ops = list(gen.body.block.ops)
    if len(ops) != 1 or list(ops[0].operands) != [gen.body.block.args[0]]:
        return None
    return gen.inputs[0]


def fold_transposed_operands(op: linalg.MatmulOp) -> None:
    """`matmul(transpose(x), y)` reads x in place: a generic matmul with x's map [k, m]
    (likewise [n, k] for B), so packing does the transpose instead of a separate pass."""
    if len(op.results) != 1 or not all(isinstance(v.type, TensorType) for v in op.operands):
        return
    a, b = op.inputs
    src_a, src_b = _transposed_source(a), _transposed_source(b)
    if src_a is None and src_b is None:
        return
    m, n, k = (AffineDimExpr(i) for i in range(3))
    maps = [AffineMap(3, 0, (k, m) if src_a is not None else (m, k)),
            AffineMap(3, 0, (n, k) if src_b is not None else (k, n)),
            AffineMap(3, 0, (m, n))]

    def body(bld, args):
        prod = bld.insert(arith.MulfOp(args[0], args[1])).result
        return [bld.insert(arith.AddfOp(args[2], prod)).result]

    generic = build_generic([src_a or a, src_b or b], list(op.outputs), maps,
                            [PARALLEL, PARALLEL, REDUCTION], body, [op.results[0].type])
    generic.attributes |= op.attributes
    Rewriter.replace_op(op, generic)
    for v in (a, b):
        if isinstance(v, OpResult) and not v.uses:
            Rewriter.erase_op(v.op)


def matmul_signature(op, match, threads: int) -> str:
    """The tuning record's key of a matmul-like op (tuning_record.signature)."""
    from compiler.targets.cpu.tuning_record import signature

    return signature(match.batch, match.m, match.n, match.k, a_trans=match.a_trans,
                     b_trans=match.b_trans, b_constant=is_constant(match.b),
                     conv=CONV_LOWERING_ATTR in op.attributes,
                     elem_bytes=element_bytes(match.element_type), threads=threads)


def _conv_strides(op: linalg.GenericOp) -> tuple[int, int]:
    """The (row, column) strides of a direct conv generic (loops n, g, oc, oh, ow | ic, kh,
    kw): the coefficients of oh and ow in its input map's last two results."""
    xmap = op.indexing_maps.data[0].data
    base = xmap.eval([0] * xmap.num_dims, [])
    oh, ow = (xmap.eval([int(i == d) for i in range(xmap.num_dims)], []) for d in (3, 4))
    return oh[-2] - base[-2], ow[-1] - base[-1]


@dataclass(frozen=True)
class ChooseSchedule(ModulePass):
    """Attach `aicc.schedule` to each matmul-like linalg op."""

    name = "choose-schedule"

    vector_bits: int = 512
    threads: int = 0
    l1_bytes: int = 0  # 0: the defaults in schedule.py
    l2_bytes: int = 0
    overrides: str = ""
    record: str = ""  # a tuning record's path ("" none)
    # fields of every packed conv's register tile, "owb=7,ocv=1" ("": $AICC_CONV_SCHEDULE)
    conv_overrides: str = ""
    # the packed conv kernels' weight prefetch distance in input channels (conv_prefetch_rule)
    conv_pf: int = 0
    # pack an A whose rows alias in L1 (the machine's aliased_a_rule)
    pack_aliased_a: bool = True
    # a KxK conv reads an NHWC copy of its input from this many FLOPs per input element on
    # (the machine's nhwc_kxk_rule; 0: never)
    conv_nhwc_flops: int = 0
    # fetch the next block of a constant operand into L2 (the machine's l2_prefetch_rule)
    l2_prefetch: bool = False
    # ... and the packed convs the next block of their weights (conv_l2_prefetch_rule)
    conv_l2_prefetch: bool = False
    # k steps per iteration of the kernels' unrolled loop (the machine's k_unroll_rule)
    k_unroll: int = K_UNROLL

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from pathlib import Path

        from compiler.targets.cpu.tuning_record import TUNED_ATTR, load_record
        from compiler.threads import default_threads

        tuned = load_record(Path(self.record)) if self.record else {}
        threads = self.threads or default_threads()
        for o in list(op.walk()):
            if isinstance(o, linalg.MatmulOp):
                fold_transposed_operands(o)
        overrides = parse_overrides(self.overrides)
        caches = {k: v for k, v in (("l1_bytes", self.l1_bytes), ("l2_bytes", self.l2_bytes)) if v}
        index = 0
        for o in op.walk():
            match = match_matmul(o)
            if match is None:
                continue
            fixed = {**overrides.get(None, {}), **overrides.get(index, {})}
            fixed.update(match.fixed_choices())  # a packed size would depend on a run-time dim
            sched = schedule_of(o)
            ebytes = element_bytes(match.element_type)
            entry = None
            if tuned and sched is None and not fixed:
                entry = tuned.get(matmul_signature(o, match, threads))
            if entry is not None:
                try:
                    sched = MatmulSchedule.from_dict(entry["schedule"])
                except (CompileError, KeyError, TypeError):  # a record this aicc cannot read
                    sched = None
                else:
                    o.attributes[TUNED_ATTR] = UnitAttr()
            if sched is not None:  # written into the IR, or measured: overrides still apply
                sched = sched.with_overrides(fixed)
            else:
                sched = choose_matmul_schedule(
                    match.batch, match.m, match.n, match.k,
                    vw=max(1, self.vector_bits // (8 * ebytes)), elem_bytes=ebytes,
                    threads=self.threads or None, b_constant=is_constant(match.b),
                    a_constant=is_constant(match.a),
                    a_trans=match.a_trans, b_trans=match.b_trans,
                    conv=CONV_LOWERING_ATTR in o.attributes, pack_aliased_a=self.pack_aliased_a,
                    l2_prefetch=self.l2_prefetch, ku=self.k_unroll, fixed=fixed, **caches)
            o.attributes[SCHEDULE_ATTR] = sched.to_attr()
            index += 1
        for o in op.walk():  # the packed convs' register tiles (see tile_conv.py)
            mode = o.attributes.get(CONV_LOWERING_ATTR)
            if isinstance(o, linalg.GenericOp) and isinstance(mode, StringAttr) \
                    and mode.data == "packed":
                shape = o.outputs[0].type.get_shape()
                fixed = {**parse_conv_schedule(self.conv_overrides), **conv_schedule_of(o)}
                if depthwise_generic_shapes(*(v.type.get_shape() for v in (*o.inputs, o.outputs[0]))):
                    s = choose_dw_schedule(self.vector_bits, shape[-1], fixed, oh=shape[-2],
                                           strides=_conv_strides(o))
                else:
                    wshape = o.inputs[1].type.get_shape()  # (G, OC/G, IC/G, KH, KW)
                    xshape = o.inputs[0].type.get_shape()  # (N, G, IC/G, H, W)
                    pointwise = pointwise_row(wshape[0], wshape[3:], xshape[-2:], shape[-2:],
                                              _conv_strides(o))
                    # FLOPs per element of the padded input, for a conv of one group whose
                    # pixels have a 64-byte line of channels or more (NHWC_MIN_CHANNELS)
                    input_flops = (2 * shape[-3] * wshape[3] * wshape[4] * shape[-2] * shape[-1]
                                   / (xshape[-2] * xshape[-1])) \
                        if wshape[0] == 1 and xshape[-3] >= NHWC_MIN_CHANNELS else 0
                    s = choose_conv_schedule(self.vector_bits, shape[-1], shape[-3], fixed=fixed,
                                             k=math.prod(wshape[2:]), pointwise=pointwise,
                                             pf=self.conv_pf, l2pf=self.conv_l2_prefetch,
                                             input_flops=input_flops,
                                             nhwc_min_flops=self.conv_nhwc_flops)
                o.attributes[CONV_SCHEDULE_ATTR] = DictionaryAttr(
                    {k: IntegerAttr(v, i64) for k, v in s.items()})
        unused = [k for k in overrides if k is not None and k >= index]
        if unused:
            raise CompileError(
                f"schedule override for matmul {unused[0]}, but the program has {index} matmul(s)")
