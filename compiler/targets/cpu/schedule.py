"""Schedules as data: how a matmul-like linalg op is tiled for the CPU.

A schedule is a plain record attached to the op as a dictionary attribute, so it prints in
the IR, parses back, and can be edited by hand, by `compiler.compile(..., schedule=...)` or
by an autotuner:

    linalg.matmul {aicc.schedule = {mr = 14 : i64, nr = 32 : i64, vw = 16 : i64,
                   kc = 256 : i64, mc = 126 : i64, nc = 512 : i64, ku = 4 : i64,
                   pack_a = true, pack_b = true, parallel = "bmn"}} ins(...) outs(...)

`choose-schedule` attaches one chosen by `choose_matmul_schedule` (a heuristic on the op's
shape and the target's vector width and thread count); `tile-matmul` consumes it.

Convolutions are scheduled one step earlier, in tensor-to-linalg: `choose_conv_lowering`
(compiler/lowering/conv_lowering.py, shared by the targets) picks, per conv2d, "direct" (one 8-loop generic), "im2col" (a copy of the input windows,
then a batched matmul that gets a schedule here) or "matmul" (1x1 stride 1: the input is
already the matrix). Depthwise-like convs, < 16 output channels per group along long
unstrided output rows, and tiny convs go direct. The choice can be forced per op
(`aicc.conv_lowering = "im2col"` on the aicc.conv2d), per pass
(`tensor-to-linalg{conv-lowering=direct}`) or per process ($AICC_CONV_LOWERING); the conv's
matmul carries `aicc.conv_lowering` too, and its schedule reads B (the conv's input matrix)
in place below CONV_PACK_B_ROWS output channels. On the cpu target (which has the kernel),
KxK convs of one group and 16 or more output channels with a constant weight go "packed":
the direct generic, marked, whose register tile `choose_conv_schedule` picks here
(`aicc.conv_schedule = {vw, owb, ocv}`; $AICC_CONV_SCHEDULE or the op's own attribute fix
fields) and which tile-conv (tile_conv.py) lowers to `aicc_cpu.conv_kernel`.

Fields (GotoBLAS/BLIS names; rows of C are M, columns N, the reduction K):

    mr, nr   register tile: mr rows x nr columns of C held in mr * nr / vw vector registers
    vw       vector lanes (16 f32 lanes for AVX-512, 8 for AVX2)
    kc       K cache block: a kc x nr panel of B stays in L1 while mc / mr slivers of A pass
    mc       M cache block: an mc x kc block of A stays in L2 (a multiple of mr)
    nc       N cache block (a multiple of nr)
    ku       unroll factor of the micro-kernel's k loop
    pack_a   copy A into mr-row slivers, k-major, before the kernels run
    pack_b   copy B into nr-wide panels, k-major (a constant B is packed at compile time)
    parallel which tile loops run on threads: a subset of "bmn" (batch, M blocks, N blocks);
             "b" alone on a conv's matmul also lets tile-matmul write each image's im2col
             matrix inside the tile loop, right before its tiles (see tile_matmul.py)
    order    the register-tile loops inside a cache block, outer first: "mn" keeps an A
             sliver (mr x kc) in L1 while the B panels of the block stream from L2; "nm"
             keeps a B panel (kc x nr) in L1 while the A slivers stream
    pf       the micro-kernel prefetches B this many k steps ahead (0: no prefetch)
    l2pf     1: the kernels of a cache block fetch the next block of an operand packed at
             compile time (a constant: a layer's weight) into L2 while they compute, so that
             it does not come from memory at the first sliver's pace (tile_matmul.py,
             l2_prefetch_rule); recorded only when 1
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    BoolAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ShapedType,
    StringAttr,
    i1,
    i64,
)
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr

from compiler.errors import CompileError
from compiler.lowering.conv_lowering import CONV_SCHEDULE_ATTR, WINOGRAD4_MIN_TILES
from compiler.threads import default_threads

SCHEDULE_ATTR = "aicc.schedule"


@dataclass(frozen=True)
class MatmulSchedule:
    mr: int
    nr: int
    vw: int
    kc: int
    mc: int
    nc: int
    ku: int = 4
    pack_a: bool = True
    pack_b: bool = True
    parallel: str = "bmn"
    order: str = "mn"
    pf: int = 0
    l2pf: int = 0

    def validate(self) -> None:
        def bad(msg: str):
            raise CompileError(f"matmul schedule {self.text()}: {msg}")

        for f in ("mr", "nr", "vw", "kc", "mc", "nc", "ku"):
            if getattr(self, f) < 1:
                bad(f"{f} must be positive")
        if self.pf < 0:
            bad("pf must be >= 0")
        if self.l2pf not in (0, 1):
            bad("l2pf must be 0 or 1")
        if self.nr % self.vw:
            bad(f"nr = {self.nr} must be a multiple of vw = {self.vw}")
        if self.mc % self.mr:
            bad(f"mc = {self.mc} must be a multiple of mr = {self.mr}")
        if self.nc % self.nr:
            bad(f"nc = {self.nc} must be a multiple of nr = {self.nr}")
        if self.order not in ("nm", "mn"):
            bad(f"order = '{self.order}' must be 'nm' (B panel outer) or 'mn' (A sliver outer)")
        if set(self.parallel) - set("bmn") or len(set(self.parallel)) != len(self.parallel):
            bad(f"parallel = '{self.parallel}' must be a subset of 'bmn'")

    def text(self) -> str:
        return ",".join(f"{k}={_fmt(v)}" for k, v in asdict(self).items())

    def to_attr(self) -> DictionaryAttr:
        out: dict[str, Attribute] = {}
        for k, v in asdict(self).items():
            if k == "l2pf" and not v:
                continue
            if isinstance(v, bool):
                out[k] = BoolAttr(v, i1)
            elif isinstance(v, int):
                out[k] = IntegerAttr(v, i64)
            else:
                out[k] = StringAttr(v)
        return DictionaryAttr(out)

    @staticmethod
    def from_attr(attr: Attribute) -> MatmulSchedule:
        if not isinstance(attr, DictionaryAttr):
            raise CompileError(f"{SCHEDULE_ATTR} must be a dictionary, got {attr}")
        values = {}
        for k, v in attr.data.items():
            if isinstance(v, IntegerAttr):
                values[k] = bool(v.value.data) if v.type == i1 else v.value.data
            elif isinstance(v, StringAttr):
                values[k] = v.data
            else:
                raise CompileError(f"{SCHEDULE_ATTR}: field {k} = {v} is not an integer or string")
        return MatmulSchedule.from_dict(values)

    @staticmethod
    def from_dict(values: Mapping[str, object]) -> MatmulSchedule:
        _check_fields(values)
        missing = {"mr", "nr", "vw", "kc", "mc", "nc"} - set(values)
        if missing:
            raise CompileError(f"matmul schedule lacks {', '.join(sorted(missing))}")
        s = MatmulSchedule(**{k: _coerce(k, v) for k, v in values.items()})
        s.validate()
        return s

    def with_overrides(self, values: Mapping[str, object]) -> MatmulSchedule:
        _check_fields(values)
        s = replace(self, **{k: _coerce(k, v) for k, v in values.items()})
        s.validate()
        return s


def _check_fields(values: Mapping[str, object]) -> None:
    known = [f.name for f in fields(MatmulSchedule)]
    unknown = set(values) - set(known)
    if unknown:
        raise CompileError(f"unknown matmul schedule field(s): {', '.join(sorted(unknown))} "
                           f"(known: {', '.join(known)})")


def _fmt(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _coerce(field: str, v: object):
    if field in ("pack_a", "pack_b"):
        if isinstance(v, str):
            if v.lower() in ("true", "1", "yes"):
                return True
            if v.lower() in ("false", "0", "no"):
                return False
            raise CompileError(f"matmul schedule: {field} = {v!r} is not a boolean")
        return bool(v)
    if field == "order":
        return str(v)
    if field == "parallel":
        return "" if v in (None, False, "none") else str(v)
    try:
        return int(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise CompileError(f"matmul schedule: {field} = {v!r} is not an integer") from None


# ------------------------------------------------------------------------------ overrides


def parse_overrides(spec: str | Mapping | None) -> dict[int | None, dict[str, object]]:
    """User overrides as {op index or None (all ops): {field: value}}.

    A dict of fields applies to every matmul; a dict keyed by int applies per matmul, in
    program order. The text form (CLI and pass option) is `mr=6,nr=32` for every matmul, or
    `0:mr=6,nr=32;1:kc=128` per matmul.
    """
    if not spec:
        return {}
    if isinstance(spec, Mapping):
        if all(isinstance(k, int) for k in spec):
            return {k: dict(v) for k, v in spec.items()}
        if all(isinstance(k, str) for k in spec):
            return {None: dict(spec)}
        raise CompileError("schedule: use {field: value} or {matmul index: {field: value}}")
    out: dict[int | None, dict[str, object]] = {}
    for part in str(spec).split(";"):
        part = part.strip()
        if not part:
            continue
        key: int | None = None
        if ":" in part:
            head, part = part.split(":", 1)
            try:
                key = int(head)
            except ValueError:
                raise CompileError(f"schedule: '{head}' is not a matmul index") from None
        fields_: dict[str, object] = {}
        for item in part.split(","):
            if not item.strip():
                continue
            if "=" not in item:
                raise CompileError(f"schedule: expected field=value, got '{item.strip()}'")
            k, v = item.split("=", 1)
            fields_[k.strip()] = v.strip()
        out.setdefault(key, {}).update(fields_)
    return out


def format_overrides(spec: str | Mapping | None) -> str:
    """The text form of `parse_overrides`' input (for a pass option)."""
    parsed = parse_overrides(spec)
    parts = []
    for key, vals in parsed.items():
        body = ",".join(f"{k}={_fmt(v)}" for k, v in vals.items())
        parts.append(body if key is None else f"{key}:{body}")
    return ";".join(parts)


# ------------------------------------------------------------------------------ matching


@dataclass
class MatmulMatch:
    """A matmul-like linalg op: C[batch, m, n] += A[batch?, m, k] * B[batch?, k, n].

    `a_batch` / `b_batch` give, for each of the operand's batch dims, the output batch dim it
    follows, or None where the operand broadcasts (size 1). `a_trans` / `b_trans`: the
    operand is stored transposed, A as [k, m] or B as [n, k] (a transpose folded into the
    matmul, as in q @ k.T)."""

    op: Operation
    a: SSAValue
    b: SSAValue
    c: SSAValue
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a_batch: tuple[int | None, ...]
    b_batch: tuple[int | None, ...]
    a_trans: bool = False
    b_trans: bool = False
    # M is a dynamic dim (a 2-D matmul whose A and C have `?` rows): `m` is then only the
    # size the schedule is chosen for (DYNAMIC_M_GUESS); the tiles loop to the run-time M
    m_dynamic: bool = False
    # The one batch dim is dynamic (C is (?, m, n); an operand that follows the batch has a `?`
    # batch dim too): `batch` is then the size the schedule is chosen for (DYNAMIC_BATCH_GUESS),
    # and the tile loops run to the run-time batch
    batch_dynamic: bool = False

    @property
    def element_type(self):
        return self.c.type.element_type

    def fixed_choices(self) -> dict:
        """Schedule choices the match's dynamic sizes impose: no packing of an operand whose
        size depends on a run-time dim."""
        fixed = {}
        if self.m_dynamic or (self.batch_dynamic and tuple(self.a_batch) == (0,)):
            fixed["pack_a"] = False
        if self.batch_dynamic and tuple(self.b_batch) == (0,):
            fixed["pack_b"] = False
        return fixed


# The row count a matmul with a dynamic M is scheduled for: large enough that B is packed and
# the tiles split across threads over M, as for a batch of requests.
DYNAMIC_M_GUESS = 256
# The batch a batched matmul with a dynamic batch dim (a conv at a dynamic batch) is
# scheduled for: one where throughput matters.
DYNAMIC_BATCH_GUESS = 32


def _shape(v: SSAValue) -> tuple[int, ...] | None:
    t = v.type
    if isinstance(t, ShapedType) and all(d >= 0 for d in t.get_shape()):
        return tuple(t.get_shape())
    return None


def _dynamic_batch_shape(v: SSAValue) -> tuple[int, ...] | None:
    """The shape of a memref whose first dim only is dynamic, that dim at DYNAMIC_BATCH_GUESS."""
    t = v.type
    if not isinstance(t, ShapedType) or len(t.get_shape()) < 3:
        return None
    shape = t.get_shape()
    if shape[0] >= 0 or any(d < 0 for d in shape[1:]):
        return None
    return (DYNAMIC_BATCH_GUESS, *shape[1:])


def _dynamic_rows(v: SSAValue) -> bool:
    """A 2-D memref whose rows only are dynamic."""
    t = v.type
    return isinstance(t, ShapedType) and len(t.get_shape()) == 2 and t.get_shape()[0] < 0 \
        and t.get_shape()[1] >= 0


def _is_float(t) -> bool:
    return getattr(t, "name", "") in ("f32", "f64")


def match_matmul(op: Operation) -> MatmulMatch | None:
    """The matmul described by `op` (linalg.matmul, or a batched-matmul linalg.generic)."""
    if isinstance(op, linalg.MatmulOp):
        if len(op.inputs) != 2 or len(op.outputs) != 1:
            return None
        a, b = op.inputs
        c = op.outputs[0]
        sa, sb, sc = _shape(a), _shape(b), _shape(c)
        dyn = not sa and not sc and _dynamic_rows(a) and _dynamic_rows(c)
        if dyn and sb and len(sb) == 2 and a.type.get_shape()[1] == sb[0] == sb[0] \
                and c.type.get_shape()[1] == sb[1]:
            sa = (DYNAMIC_M_GUESS, sb[0])
        elif not (sa and sb and sc) or len(sa) != 2 or len(sb) != 2 or len(sc) != 2:
            return None
        if not _is_float(c.type.element_type) or len({a.type.element_type, b.type.element_type,
                                                      c.type.element_type}) != 1:
            return None
        return MatmulMatch(op, a, b, c, (), sa[0], sb[1], sa[1], (), (), m_dynamic=dyn)
    if not isinstance(op, linalg.GenericOp) or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    return _match_generic(op)


def _match_generic(op: linalg.GenericOp) -> MatmulMatch | None:
    a, b = op.inputs
    c = op.outputs[0]
    sa, sb, sc = _shape(a), _shape(b), _shape(c)
    dynamic = {v for v, sv in ((a, sa), (b, sb), (c, sc)) if sv is None}
    if dynamic:  # a dynamic batch: C's first dim, and that of an operand that follows it
        sa, sb, sc = (_dynamic_batch_shape(v) if v in dynamic else sv
                      for v, sv in ((a, sa), (b, sb), (c, sc)))
        if c not in dynamic:
            return None
    if not (sa and sb and sc) or min(len(sa), len(sb), len(sc)) < 2:
        return None
    if not _is_float(c.type.element_type) or len({a.type.element_type, b.type.element_type,
                                                  c.type.element_type}) != 1:
        return None
    iters = [it.data for it in op.iterator_types]
    nb = len(sc) - 2
    if len(iters) != nb + 3 or iters[-1] != IteratorType.REDUCTION or any(
            it != IteratorType.PARALLEL for it in iters[:-1]):
        return None
    ma, mb, mc = (m.data for m in op.indexing_maps)
    dm, dn, dk = nb, nb + 1, nb + 2

    def dims(m, expect_tail):
        res = list(m.results)
        if len(res) < 2:
            return None
        tail = res[-2:]
        if any(not isinstance(e, AffineDimExpr) for e in tail):
            return None
        if [e.position for e in tail] != list(expect_tail):
            return None
        batch = []
        for e in res[:-2]:
            if isinstance(e, AffineDimExpr) and e.position < nb:
                batch.append(e.position)
            elif isinstance(e, AffineConstantExpr) and e.value == 0:
                batch.append(None)
            else:
                return None
        return tuple(batch)

    bc = dims(mc, (dm, dn))
    ba, a_trans = dims(ma, (dm, dk)), False
    if ba is None:
        ba, a_trans = dims(ma, (dk, dm)), True
    bb, b_trans = dims(mb, (dk, dn)), False
    if bb is None:
        bb, b_trans = dims(mb, (dn, dk)), True
    if bc is None or ba is None or bb is None or list(bc) != list(range(nb)):
        return None
    # A broadcast dim must have size 1; a followed dim must match the output's.
    for bmap, shape in ((ba, sa), (bb, sb)):
        for pos, d in enumerate(bmap):
            if d is None and shape[pos] != 1:
                return None
            if d is not None and shape[pos] != sc[d]:
                return None
    if dynamic:  # one batch dim, dynamic exactly where it is followed; B read along n
        for v, bmap in ((a, ba), (b, bb)):
            if (v in dynamic) != (tuple(bmap) == (0,)):
                return None
        if nb != 1 or (b in dynamic and b_trans):
            return None
    # Body: yield(acc + x * y) in either operand order.
    body = op.body.block
    ops = list(body.ops)
    if len(ops) != 3:
        return None
    mul, add, yld = ops
    x, y, acc = body.args
    if not isinstance(mul, arith.MulfOp) or not isinstance(add, arith.AddfOp):
        return None
    if {mul.lhs, mul.rhs} != {x, y} or {add.lhs, add.rhs} != {acc, mul.result}:
        return None
    if list(yld.operands) != [add.result]:
        return None
    m, n = sc[-2], sc[-1]
    k = sa[-2] if a_trans else sa[-1]
    if (sb[-1] if b_trans else sb[-2]) != k:
        return None
    return MatmulMatch(op, a, b, c, sc[:-2], m, n, k, ba, bb, a_trans, b_trans,
                       batch_dynamic=bool(dynamic))


def is_memref(v: SSAValue) -> bool:
    return isinstance(v.type, MemRefType)


# ops whose result holds their operand's elements in the same (row-major) order
RESHAPES = ("tensor.collapse_shape", "tensor.expand_shape", "memref.collapse_shape",
            "memref.expand_shape")


def is_constant(v: SSAValue) -> bool:
    """A dense constant: `arith.constant` on tensors, `memref.get_global` on memrefs, or a
    reshape of one (a conv's weight viewed as the matrix its matmul reads)."""
    while isinstance(v, OpResult) and v.op.name in RESHAPES:
        v = v.op.operands[0]
    return isinstance(v, OpResult) and v.op.name in ("arith.constant", "memref.get_global")


# ------------------------------------------------------------------------------ heuristic

L1_BYTES = 48 * 1024  # data cache per core, when the host's is unknown
L2_BYTES = 2048 * 1024


CONV_SCHEDULE_FIELDS = ("vw", "owb", "ocv", "plane", "nhwc", "pf", "l2pf")
_FLAGS = ("plane", "nhwc", "l2pf")


def _field_ok(k: str, v: int) -> bool:
    """Is v a value of conv schedule field k (positive; `plane` and `nhwc` flags, 0 or 1;
    `pf`, the weight prefetch distance, 0 for none)?"""
    return v in (0, 1) if k in _FLAGS else v >= 0 if k == "pf" else v >= 1


def conv_schedule_of(op: Operation) -> dict[str, int]:
    """The fields of an packed conv's register tile recorded on `op` (`aicc.conv_schedule`,
    see tile_conv.py); {} when none is."""
    attr = op.attributes.get(CONV_SCHEDULE_ATTR)
    if attr is None:
        return {}
    if not isinstance(attr, DictionaryAttr):
        raise CompileError(f"{CONV_SCHEDULE_ATTR}: expected a dictionary, got {attr}")
    out = {}
    for k, v in attr.data.items():
        if k not in CONV_SCHEDULE_FIELDS or not isinstance(v, IntegerAttr) \
                or not _field_ok(k, v.value.data):
            raise CompileError(f"{CONV_SCHEDULE_ATTR}: '{k} = {v}': expected positive integers "
                               f"for {', '.join(CONV_SCHEDULE_FIELDS[:3])}, 0 or 1 for plane, "
                               "nhwc and l2pf")
        out[k] = v.value.data
    return out


CONV_SCHEDULE_ENV = "AICC_CONV_SCHEDULE"


def parse_conv_schedule(spec: str = "") -> dict[str, int]:
    """Fields of an packed conv's register tile from text, "owb=7,ocv=1" (`spec`, else
    $AICC_CONV_SCHEDULE): they apply to every packed conv that does not name its own."""
    import os

    spec = spec or os.environ.get(CONV_SCHEDULE_ENV, "")
    out = {}
    for item in filter(None, (t.strip() for t in spec.split(","))):
        k, _, v = item.partition("=")
        k = k.strip()
        if k not in CONV_SCHEDULE_FIELDS or not v.strip().isdigit() or not _field_ok(k, int(v)):
            raise CompileError(f"conv schedule '{item}': expected "
                               f"{'/'.join(CONV_SCHEDULE_FIELDS[:3])}=<positive integer>, "
                               "plane=0/1, nhwc=0/1, l2pf=0/1 or pf=<integer>")
        out[k] = int(v)
    return out


# A packed conv reducing over fewer than this many products per output (IC * KH * KW: a stem
# of 3 input channels, 16-channel convs) takes at most SHORT_K_MAX_OWB columns per kernel call.
SHORT_K = 512
SHORT_K_MAX_OWB = 8
# A 1x1 unstrided conv of one group on an image of more than NHWC_MIN_PIXELS and at most
# NHWC_MAX_PIXELS pixels, not a multiple of NHWC_PIXEL_MULTIPLE, reads its input as an
# [N][W][IC] copy (tile_conv.py, schedule field `nhwc`; see choose_conv_schedule).
NHWC_MIN_PIXELS = 16
NHWC_MAX_PIXELS = 64
NHWC_PIXEL_MULTIPLE = 16
# ... and with 512-bit vectors only where IC * OC is at least this (see choose_conv_schedule)
NHWC_WIDE_MIN_WEIGHTS = 1 << 20


def pointwise_row(groups: int, kernel: tuple[int, int], in_hw: tuple[int, int],
                  out_hw: tuple[int, int], strides: tuple[int, int]) -> bool:
    """Is a packed conv with these sizes a 1x1 unstrided conv of one group whose image is one
    row, as nn_to_linalg views a 1x1 conv's H * W pixels (`pointwise` of
    choose_conv_schedule: the convs that can read their input as an [N][W][IC] copy)?"""
    return (groups == 1 and tuple(kernel) == (1, 1) and tuple(strides) == (1, 1)
            and in_hw[0] == out_hw[0] == 1 and in_hw[1] == out_hw[1])


CONV_PREFETCH = 16  # input channels ahead (16 x 64-byte lines of each weight stream)


def conv_prefetch_rule(machine) -> int:
    """How far ahead the packed conv kernels prefetch their weights on `machine` (a
    CPUMachine), in input channels (choose_conv_schedule's `pf`; 0: not at all). A kernel
    streams its weight block (KH * KW * IC * ocv vectors) from L2 for every tile of owb
    columns; an Intel core with AVX-512 runs two 512-bit FMAs a cycle, and its hardware
    prefetchers keep ocv such streams ahead too little. Measured on an Intel Xeon (Sapphire
    Rapids class) at one thread, one conv + bias as an ONNX model, alternated in one process
    (time without / time with, prefetch distance 8 / 16 / 32 channels):
      resnet50's 7x7/2 stem 1.06/1.05/1.07; 3x3/2 128ch at 56x56 1.12/1.15/1.11, 256ch at
      28x28 1.00/1.05/1.01, 512ch at 14x14 1.04/1.08/1.12; 3x3 32ch at 112x112
      1.02/1.04/0.99; a 1x1 96->24 at 56x56 (AMD's rules) 1.18/1.38/1.28; resnet18's
      64->128 3x3/2 1.0/0.99/1.03.
    With AVX2 code on the same core it loses (3x3/2 convs 0.78-0.93 at 16: the prefetches
    compete with the broadcasts for the load ports). On a Zen 5 with AVX-512 code (zoo
    models, torch frontend, one thread, A/B in one process, median ms, 0 / 16): resnet50
    36.05 / 36.42, resnet18 13.72 / 14.10, regnet_y_400mf 5.54 / 5.50, efficientnet_b0
    6.20 / 6.17, mobilenet_v3_small 1.10 / 1.10: nothing to gain. So CONV_PREFETCH on Intel
    with 512-bit vectors, else 0."""
    return CONV_PREFETCH if machine.vendor == "intel" and machine.vector_bits >= 512 else 0


def winograd4_rule(machine) -> int:
    """From how many 4x4 tiles of its output a Winograd conv takes F(4x4, 3x3) rather than
    F(2x2, 3x3) on `machine` (a CPUMachine; conv_lowering.winograd_tile). On an Intel core
    WINOGRAD4_MIN_TILES (32: measured on a Sapphire Rapids-class Xeon, where resnet50's 256ch
    14x14 convs, 16 tiles, lost with F(4x4): its weight, 2.25x F(2x2)'s, streams from memory
    once per run for few FLOPs). On an AMD core 16: those convs win with F(4x4). Whole models
    on a Zen 5 (torch frontend, one thread, both compiled in one process and timed
    alternately, ms, 32 / 16): resnet50 35.5 / 34.0 and 34.1 / 32.7, resnet18 13.4 / 12.6
    (AVX-512 code), resnet50 63.7 / 61.6 (AVX2 code); from 50 (the 128ch 28x28 convs to F(2x2)
    too) 35.8, F(2x2) everywhere 36.8. On a Zen 4 the 256ch 14x14 conv alone was 1.13x (AVX-512
    code) and 1.15x (AVX2 code) faster with F(4x4); whole models there, the same way, two
    rounds: AVX-512 code resnet50 68.1 / 67.9 and 65.3 / 65.9, resnet18 24.8 / 24.7 and
    22.8 / 22.6 (even); AVX2 code (x86-64-v3 with the threshold set) resnet50 73.1 / 71.3 and
    74.6 / 72.2, resnet18 27.4 / 26.3 and 27.0 / 25.6. Zen 1-3 are unmeasured. A generic name
    (x86-64-v3) keeps 32: its code may run on an Intel core, where 16 tiles lost."""
    return 16 if machine.vendor == "amd" else WINOGRAD4_MIN_TILES


def packed_1x1_rule(machine) -> str:
    """Which of choose_conv_lowering's rules for taking the packed kernel on an unstrided 1x1
    conv (PACKED_1X1_RULES) hold on `machine` (a CPUMachine). They were measured on AMD's
    cores (Zen 3 with AVX2 code, Zen 4 with both widths), where the kernel, its weight block
    streamed from L2 for every tile of owb columns, wins on small and narrowing images. On an
    Intel core it loses to the matmul, whose packed panels stay in L1, on every such image
    with AVX-512 code, and with AVX2 code on all but the smallest. Measured on an Intel Xeon
    (Sapphire Rapids class, 2 MiB L2) at one thread, resnet50's 1x1 convs with bias as
    one-node models (benchmarks/conv_layers.py), alternated in one process (matmul time /
    packed time), AVX-512 code / AVX2 code (x86-64-v3):
      56x56: 256->64 0.65/0.89, 256->128 0.36/0.62; 28x28: 512->128 0.74/0.83;
      14x14: 1024->256 0.82/0.96, 1024->512 0.87/0.85; 7x7: 512->2048 0.71/1.09,
      2048->512 0.78/1.17.
    Whole resnet50 (ONNX, AVX-512 code, nothing else running): 115.8 ms with the packed 1x1
    convs, 102.2 without. The small images' matmul has since taken an m_lanes kernel for its
    last columns (tile_matmul.py: N = 49 is 48 columns of vectors and one), and with it the
    matmul wins there too with AVX2 code: whole models A/B in one process, "small" / "none"
    (ms, haswell code): resnet50 74.2 / 69.8, regnet_y_400mf 11.0 / 10.6, efficientnet_b0
    12.9 / 12.6, mobilenet_v3_small 2.1 / 2.0.
    On AMD the m_lanes kernel did not turn the rules around. Re-measured with it on a Zen 4,
    whole models (torch frontend, one thread) A/B/C in one process, ms "all" / "small" /
    "none", two rounds: AVX2 code (x86-64-v3) mobilenet_v3_small 1.81 / 1.82 / 1.83 and
    1.80 / 1.81 / 1.83, efficientnet_b0 12.30 / 12.29 / 12.76 and 12.38 / 12.41 / 12.86,
    regnet_y_400mf 10.22 / 10.11 / 10.31 and 9.77 / 9.77 / 9.99, resnet50 84.5 / 84.6 / 85.8
    and 76.3 / 74.6 / 75.4; AVX-512 code mobilenet_v3_small 2.07 / 2.00 / 2.00 and
    1.97 / 1.92 / 1.89, efficientnet_b0 12.51 / 12.19 / 12.43 and 13.42 / 12.94 / 13.38,
    regnet_y_400mf 9.09 / 9.12 / 9.22 and 9.27 / 9.31 / 9.40, resnet50 68.4 / 69.6 / 69.8 and
    66.0 / 67.5 / 67.0: "none" loses 1-4% with AVX2 code, and with AVX-512 code the three
    lie within 4% with no order that holds across the models (resnet50, the longest, is
    fastest with "all").
    So "none" on Intel, and "all" elsewhere (AMD, and generic CPU names such as x86-64-v3)."""
    return "none" if machine.vendor == "intel" else "all"


def nhwc_kxk_rule(machine) -> int:
    """From how many FLOPs per element of its (padded) input a conv of one group that is not
    a pointwise row reads that input as an [N][H][W][IC] copy on `machine` (a CPUMachine;
    choose_conv_schedule's `nhwc_min_flops`, 0: never). The kernels then read a pixel's
    channels contiguously, instead of one float from each of IC planes, which the strided
    and small-image convs of a ResNet's late stages walk out of L1 (IC = 512: 512 planes x
    3 rows for each call's taps). The copy is the padding's copy itself where the conv reads
    a zero-padded input (tile_conv._input_as_nhwc); it costs about as much as a transpose
    of the input. Measured on a Sapphire Rapids-class Xeon at one thread, resnet50's convs
    as one-node models (conv + bias) alternated in one process (ms, NCHW / NHWC; FLOPs per
    input element), AVX-512 code: 3x3/2 128ch 56x56 1.78 / 1.87 (537), 3x3/2 256ch 28x28
    1.71 / 1.51 (1003), 3x3/2 512ch 14x14 1.85 / 1.51 (1764), 3x3 512ch 7x7 1.53 / 1.39
    (5575), 1x1/2 1024->2048 1.44 / 1.32 (1024), 7x7/2 stem 1.67 / 1.63 (1487); AVX2 code
    (haswell) 2.68 / 2.79, 2.60 / 2.46, 2.79 / 2.50, 2.62 / 2.58, 2.66 / 2.17, 2.19 / 2.16.
    Whole models (ONNX, A/B in one process, ms NCHW / NHWC): AVX2 code resnet50 77.6 / 75.7,
    resnet18 28.5 / 27.5; AVX-512 code even (resnet50 47.4 / 47.6, resnet18 19.6 / 19.6:
    there the late stages' convs wait on their weights from memory, as one-node models,
    their weights in cache, do not). On a Zen 5 (zoo models, torch frontend, one thread, A/B
    in one process, median ms, NCHW / NHWC, two rounds): AVX2 code (znver3) resnet50 66.1 /
    65.5 and 60.7 / 60.1, resnet18 21.5 / 21.1 and 21.5 / 20.9, regnet_y_400mf 8.39 / 8.34;
    AVX-512 code resnet50 35.1 / 35.0, resnet18 12.3 / 12.1 and 14.1 / 13.7, regnet 5.04 /
    4.99. So from NHWC_KXK_MIN_FLOPS on every core, generic CPU names included."""
    return NHWC_KXK_MIN_FLOPS


NHWC_KXK_MIN_FLOPS = 1000
# ... and with 16 input channels or more (a 64-byte line of a pixel's channels): the 3
# channels of a stem lost with it (7x7/2 at 224x224 1.63 -> 1.72 ms)
NHWC_MIN_CHANNELS = 16


def choose_conv_schedule(vector_bits: int, ow: int, oc: int,
                         fixed: Mapping[str, int] | None = None, k: int = 0,
                         pointwise: bool = False, pf: int = 0,
                         l2pf: bool = False, input_flops: float = 0,
                         nhwc_min_flops: int = 0) -> dict[str, int]:
    """The register tile of an packed conv kernel (tile_conv.py): `vw` output channels per
    vector (the target's vector width in floats: 8 with AVX2, 16 with AVX-512, 8 there too for
    8 channels or fewer), `ocv` vectors
    of output channels by `owb` output columns. The owb x ocv accumulators, the ocv weight
    vectors and one broadcast input fit the register file (16 ymm: 4 x 3; 32 zmm: 9 x 3).
    Among the widths that fit, owb takes the fewest kernel calls along a row of OW columns,
    a short last call counting half a call more. `fixed` fields are kept.

    Measured on resnet18's convs (Zen 3, AVX2, one thread, benchmarks/conv_layers.py): 4 x 3
    against 6 x 2 is even at 56x56 and 28x28 and 1.1-1.3x faster at 14x14 and 7x7, where
    fewer columns share each weight load; 3 x 4 (17 registers) spills and runs at half speed.

    With a short reduction (`k` = IC * KH * KW below SHORT_K), the call's epilogue (the
    transpose of its accumulators into output rows) weighs more against its few products,
    and a 14- or 9-column tile of AVX-512 transposes badly: at most SHORT_K_MAX_OWB columns
    then (Zen 4, one thread, one conv, 14 or 9 columns against 8: 3->32 3x3/2 at 224x224
    0.50 -> 0.37 ms, 3->32 3x3 at 112x112 0.42 -> 0.32, 3->64 7x7/2 2.64 -> 2.47, 16->32 3x3
    at 112x112 1.40 -> 1.24; 32->64 3x3/2 (k = 288) 1.15 -> 1.13; no change from k = 576
    on, nor with AVX2's 4- and 6-column tiles).

    `pointwise`: the conv is 1x1, unstrided, of one group, its image one row of `ow` pixels
    (nn_to_linalg's view of a 1x1 conv). On the small images of a CNN's last stage, 7x7,
    its kernels then read the input from an [N][W][IC] copy (`nhwc` = 1), made before the
    conv (IC * W copies against IC * W * OC multiply-adds): a call's owb columns are owb runs
    of IC contiguous floats, where the image's own layout has it read IC rows of 196 bytes,
    a few floats from each, that the next call reads again after the weight block has
    pushed them out of L1. Measured on a Zen 3 (AVX2) at one thread, one 1x1 conv + bias +
    residual + ReLU (or + ReLU), both compiled in one process and timed alternately, each
    timed call after an untimed one (GFLOP/s, image's layout -> copy):
      7x7: 192->1152 63 -> 83, 1152->192 66 -> 85, 2048->512 52 -> 85, 440->440 64 -> 82,
      96->576 67 -> 67; (cold, + ReLU) 320->1280 63 -> 81, 1152->320 59 -> 81, 512->2048
      65 -> 86, 1024->256 61 -> 77, 576->96 58 -> 66; 6x6: 256->512 74 -> 79;
      5x5: 256->512 60 -> 61;
    but where the rows are whole multiples of 16 floats the image's layout is as fast or
    faster: 8x8 256->256 81 -> 68, 96->96 45 -> 40; 4x4 512->512 81 -> 78; and at 14x14
    the copy is slower (672->112 83 -> 78), far slower with many input channels (1024->256
    86 -> 38). So: `nhwc` on pointwise convs of NHWC_MIN_PIXELS to NHWC_MAX_PIXELS pixels
    that are not a multiple of NHWC_PIXEL_MULTIPLE.

    With 512-bit vectors the copy (a scalar transpose, IC * W of them) pays only on the
    largest weights: measured on a Zen 5 at one thread, one 1x1 conv + bias at 7x7, A/B in
    one process (ms, image's layout / copy): 1152->192 0.105 / 0.122, 672->192 0.065 /
    0.076, 1152->320 0.177 / 0.189, 192->1152 0.114 / 0.118, but 2048->512 0.573 / 0.534,
    512->2048 0.576 / 0.559 (with AVX2 code on the same core within 5% either way). So with
    512-bit vectors only where IC * OC >= NHWC_WIDE_MIN_WEIGHTS (whole models, A/B: 1-2%
    faster efficientnet_b0, mobilenet_v3_small, regnet_y_400mf).

    `pf`: the kernels prefetch each weight stream pf input channels ahead (the machine's
    `conv_prefetch_rule`) where vw is 16 floats; a fixed `pf` wins; recorded only when not
    0. `input_flops`: the conv's FLOPs per element of its padded input (0 for a grouped
    conv); from `nhwc_min_flops` (the machine's nhwc_kxk_rule, 0: never) a conv that is not a
    pointwise row takes `nhwc` too. `l2pf` (the machine's conv_l2_prefetch_rule): the calls
    on one block of output channels fetch the next block's weights into L2 (tile_conv.py),
    recorded as l2pf = 1."""
    fixed = dict(fixed or {})
    if pointwise and "nhwc" not in fixed and NHWC_MIN_PIXELS < ow <= NHWC_MAX_PIXELS \
            and ow % NHWC_PIXEL_MULTIPLE and (vector_bits < 512 or k * oc >= NHWC_WIDE_MIN_WEIGHTS):
        fixed["nhwc"] = 1
    if not pointwise and "nhwc" not in fixed and 0 < nhwc_min_flops <= input_flops:
        fixed["nhwc"] = 1
    lanes = max(1, vector_bits // 32)
    # Output channels that fill at most half a vector (a grouped conv's 8 per group on
    # AVX-512) take 8-float vectors instead: a 16-lane accumulator would be half zeros
    # (regnet_y_400mf, Zen 4, one thread: 11.0 ms against 12.5).
    vw = fixed.get("vw", 8 if lanes >= 16 and oc <= 8 else lanes)
    nregs = 32 if vector_bits >= 512 else 16
    regs = nregs if vw <= lanes else nregs * lanes // vw  # vw-wide registers
    ocv = fixed.get("ocv", max(1, min(3, -(-oc // vw))))
    flags = {k: fixed[k] for k in _FLAGS if fixed.get(k)}
    # 8-float vectors on AVX-512 (grouped convs of 8 channels) keep their small weight
    # blocks in L1: the prefetches only cost there (regnet_y_400mf 0.96x with them)
    pf = fixed["pf"] if "pf" in fixed else pf if vw >= 16 else 0
    if pf:
        flags["pf"] = pf
    if l2pf and "l2pf" not in fixed:
        flags["l2pf"] = 1
    if "owb" in fixed:
        return {"vw": vw, "owb": fixed["owb"], "ocv": ocv, **flags}
    top = max(1, (regs - 1 - ocv) // ocv)
    if 0 < k < SHORT_K:
        top = min(top, SHORT_K_MAX_OWB)
    candidates = range(max(1, top // 2), top + 1)
    owb = min(candidates, key=lambda b: (-(-ow // b) + (0.5 if ow % b else 0), -b))
    return {"vw": vw, "owb": min(owb, ow), "ocv": ocv, **flags}


DW_MAX_VECTORS = 4  # column vectors of one depthwise kernel call (accumulators in registers)
DW_PLANE_MAX_VECTORS = 8  # ... of a call that spans a flattened plane (stride 1: one load)


def choose_dw_schedule(vector_bits: int, ow: int, fixed: Mapping[str, int] | None = None,
                       oh: int = 0, strides: tuple[int, int] = (1, 1)) -> dict[str, int]:
    """The tile of a depthwise conv kernel (tile_conv.py, aicc_cpu.dw_kernel): `vw` output
    columns per vector (the target's width in floats) and `owb` vectors of columns per kernel
    call, at most DW_MAX_VECTORS (their accumulators, a broadcast weight and the row loads of
    a stride-2 window fit 16 ymm registers), the calls along a row of OW columns as few and
    as even as can be. With `plane`, the default for stride 1 (given OH; tile-conv takes it
    where the output is as wide as the input, a padded one it reads through), the calls span
    the OH x OW plane flattened instead, up to DW_PLANE_MAX_VECTORS vectors each. `fixed`
    fields are kept.

    Measured (one conv + SiLU, Zen 4, one thread, plane against rows): 2.0-2.2x faster at
    7x7, 1.2-1.5x at 14x14 to 56x56, 1.1x at 112x112 with AVX-512 code; 1.9-2.1x, 1.5-1.7x,
    1.06x with AVX2 code. Rows narrower than a vector waste lanes, and each call of a row
    broadcasts every weight again.

    By rows, a row that fits half a vector takes the half-width vector (down to 8 lanes;
    4 lanes measured even at 4 columns):
    two 8-lane FMAs issue where one 16-lane one does on a Zen 4, and a 7-column row fills
    7 of 8 lanes, not 7 of 16 (stride-2 convs from 14x14 to 7x7, one thread, with the
    activation: 576ch 3x3 1.28x, 576ch 5x5 1.17x, 672ch 5x5 1.13x; at 14 columns the
    16-lane vector stays ahead, 1.15x)."""
    fixed = dict(fixed or {})
    vw = fixed.get("vw", max(1, vector_bits // 32))
    plane = fixed.get("plane", int(oh > 0 and tuple(strides) == (1, 1)))
    if not plane and "vw" not in fixed:
        while vw > 8 and ow <= vw // 2:  # a row in half a vector: the narrower one
            vw //= 2
    if plane and oh > 0:
        vectors, most = -(-oh * ow // vw), DW_PLANE_MAX_VECTORS
    else:
        vectors, most = -(-ow // vw), DW_MAX_VECTORS
    calls = -(-vectors // most)
    return {"vw": vw, "owb": fixed.get("owb", -(-vectors // calls)), "plane": plane}


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _balanced(total: int, block_max: int, multiple: int) -> int:
    """The block size that splits `total` into the fewest blocks of at most `block_max`
    (or one block), as equal as possible, rounded up to a multiple of `multiple`."""
    blocks = max(1, -(-total // max(block_max, 1)))
    return _round_up(max(1, -(-total // blocks)), multiple)


# The output channels (M) from which a conv's matmul packs B (see choose_matmul_schedule).
CONV_PACK_B_ROWS = 256
# The longest K block of a matmul that reads B in place (not packed); packed B panels take
# the longest K block whose A sliver fits 5/8 of L1 (choose_matmul_schedule).
KC_MAX_IN_PLACE = 512
# With l2pf and a constant B, M up to this many rows takes B blocks of at most
# L2PF_NARROW_COLS columns (see choose_matmul_schedule).
L2PF_NARROW_MAX_M = 256
L2PF_NARROW_COLS = 64

L1_SET_SPAN = 4096  # bytes after which the L1 set index repeats (64 sets x 64-byte lines)


def rows_alias_in_l1(row_bytes: int, rows: int, limit: int = 4) -> bool:
    """Whether `rows` rows `row_bytes` apart fall on so few L1 sets that more than `limit`
    of them compete for each set's ways: a row stride of 4 KiB (K = 1024 f32) puts all the
    rows of an A sliver on the same sets, and an 8-way L1 then evicts the sliver while it is
    being read (1024^3 in place: 59 GFLOP/s; packed: 101, on a Zen 4 core)."""
    period = L1_SET_SPAN // math.gcd(L1_SET_SPAN, max(row_bytes, 1))
    return -(-rows // period) > limit


# With 32 vector registers, a tile of 3 vectors per row (9 rows x 3: 27 accumulators, 12 loads
# per 27 FMAs against 16 per 28 for 14 x 2) where N is a multiple of 3 vectors, as a
# transformer's 768, 1536, 2304 and 3072 are. Measured on a Zen 5 at one thread, constant B,
# A/B in one process (ms, 14 x 2 / 9 x 3): 197x768x2304 3.42 / 3.30, 197x768x3072 5.06 /
# 4.72, 197x3072x768 4.69 / 4.46, 128x768x768 0.744 / 0.738, 1500x1536x384 8.16 / 8.06,
# 1024^3 10.35 / 10.28; where N is not such a multiple (2048: a tail panel of 2 vectors)
# 14 x 2 stays (77x512x2048 0.85 / 0.91). The rows: 9 or 8, whichever pads M less. Whole
# models, A/B: bert 112.8 -> 109.2 ms, gpt2 110.7 -> 106.6, vit 180.7 -> 174.4. Below
# WIDE_TILE_MIN_M rows (unmeasured) the 14-row tile, which takes such an M in one, stays.
WIDE_TILE_VECTORS = 3
WIDE_TILE_MIN_M = 16


def aliased_a_rule(machine) -> bool:
    """Does choose_matmul_schedule pack an A whose rows alias in L1 (rows_alias_in_l1) on
    `machine` (a CPUMachine)? The rule was measured on a Zen 4 (32 KiB, 8-way L1: 1024^3 in
    place 59 GFLOP/s, packed 101). On a Zen 5 (48 KiB, 12-way) A read in place is as fast or
    faster on every such shape, at one thread with a constant B, A/B in one process (ms,
    packed / in place): AVX-512 code 197x3072x768 4.91 / 4.65, 1500x1536x384 10.37 / 8.56,
    128x3072x768 3.15 / 3.00, 1024^3 11.14 / 10.91, 256x2048x512 2.84 / 2.74, 64x4096x1024
    2.80 / 2.78; AVX2 code 8.84 / 8.65, 16.39 / 16.44, 19.66 / 19.42, 5.50 / 5.27. On a
    Sapphire Rapids-class Xeon (48 KiB, 12-way L1) likewise, a chain of 4 or 8 distinct
    constant B at one thread, alternated in one process (GFLOP/s, packed / in place):
    AVX-512 code 128x3072x768 147 / 158, 197x3072x768 141 / 148, 1500x1536x384 131 / 137,
    1024^3 164 / 172, 64x4096x1024 141 / 145, 256x2048x512 149 / 149; AVX2 code
    128x3072x768 95 / 96, 1500x1536x384 93 / 100, 1024^3 110 / 115; whole models (ONNX,
    A/B) bert 143.0 -> 132.6 ms, whisper-encoder 266.6 -> 230.1, t5-encoder 33.6 -> 32.7,
    clip-text 18.6 -> 17.9 (with AVX2 code even). So False on AMD and Intel cores with an
    L1 of 48 KiB or more, True elsewhere (generic CPU names and smaller L1s included)."""
    return not (machine.vendor in ("amd", "intel") and machine.l1_bytes >= 48 * 1024)


def l2_prefetch_rule(machine) -> bool:
    """Do the matmul kernels fetch the next cache block of a constant operand into L2 on
    `machine` (a CPUMachine; the schedule's `l2pf`)? A layer's weight, packed at compile
    time, is read from memory (or L3) by the first sliver of each block, at the pace of that
    sliver's FMAs, which outrun the core's memory bandwidth; the other slivers find it in
    L2. Measured on an Intel Xeon (Sapphire Rapids class) at one thread, alternated in one
    process (GFLOP/s of a chain of 8 distinct constant B, as in a model, off / on):
    128x768x3072 158 / 182, 128x768x768 154 / 173, 197x768x2304 156 / 171, 128x3072x768
    145 / 159, 32x768x3072 103 / 119, 1500x384x1536 166 / 173; whole models (ONNX, A/B in
    one process): bert 162.7 -> 145.9 ms, vit 220.9 -> 207.0, resnet50 57.1 -> 55.2.
    Likewise on an AMD Zen 5 (512-bit FMAs, 1 MiB L2), one thread, alternated in one process:
    a chain of 24 distinct constant 16x512x2048 / 16x2048x512 Linears with AVX2 code (znver3)
    89.7 / 104.0 GFLOP/s (108.0 with one hot weight), AVX-512 code 148.8 / 188.3 (213.3 hot);
    zoo models (torch frontend, median ms, off / on) with AVX2 code clip-text 15.36 / 12.86,
    t5-encoder 50.9 / 50.0, regnet_y_400mf 10.23 / 10.04, efficientnet_b0 12.02 / 11.92,
    mobilenet_v3_small 1.93 / 1.91, resnet18 24.0 / 23.1, resnet50 67.2 / 65.8, bert 205.1 /
    203.4, gpt2 203.8 / 200.4, vit 336.5 / 333.3, whisper-encoder 379.0 / 378.2; with
    AVX-512 code (where the packed convs fetch too) clip-text 9.21 / 7.23, t5-encoder 23.9 /
    23.4, regnet 5.71 / 5.22, efficientnet 7.51 / 7.04, mobilenet 1.44 / 1.37, resnet18
    17.7 / 16.4, resnet50 45.9 / 42.8, bert 115.7 / 111.8, gpt2 116.0 / 112.0, vit 176.8 /
    175.1, whisper-encoder 209.3 / 208.8. A Zen 3 had run a chain of cold weights as fast as
    one hot one (80.1 / 80.5 GFLOP/s: little to gain there; unmeasured with it). So on every
    core, generic CPU names included; AICC_L2_PREFETCH=0 turns it off for A/B timing."""
    return True


def conv_l2_prefetch_rule(machine) -> bool:
    """Do the packed conv kernels fetch the next block of output channels' weights into L2 on
    `machine` (a CPUMachine; choose_conv_schedule's `l2pf`)? Measured at one thread, whole
    models A/B in one process (ms, without / with). A Sapphire Rapids-class Xeon, ONNX
    models: AVX-512 code resnet50 53.6 / 52.9, resnet18 21.3 / 20.7, regnet_y_400mf
    8.6 / 8.4, efficientnet_b0 10.1 / 9.9; AVX2 code (haswell) resnet50 75.5 / 78.7,
    resnet18 28.5 / 28.9, where the fetches compete with the broadcasts for the load ports,
    as `pf` does (conv_prefetch_rule). A Zen 5 with AVX2 code (znver3; torch frontend,
    medians, the matmuls fetching in both): resnet50 68.1 / 66.9, resnet18 24.7 / 24.5,
    regnet_y_400mf 9.16 / 8.68, efficientnet_b0 10.85 / 10.49, mobilenet_v3_small 1.77 /
    1.71; with AVX-512 code it is part of l2_prefetch_rule's figures. So with 512-bit vectors
    on every core and on AMD's with 256-bit ones; generic CPU names with 256-bit vectors
    (which may run on an Intel core) keep it off."""
    return machine.vector_bits >= 512 or machine.vendor == "amd"


# The k loop's unroll (the schedule's `ku`) where k_unroll_rule has nothing to say.
K_UNROLL = 4


def k_unroll_rule(machine) -> int:
    """How many k steps the matmul kernels' loop unrolls (the schedule's `ku`) on `machine`
    (a CPUMachine). AVX2 code on an Intel core: 8. Its 6 x 2-vector tile's loop of 4 steps
    (48 FMAs, 32 loads, a prefetch per step) ran at 100-105 GFLOP/s even with every operand
    in L1, where a register-only loop of the same FMAs reached 113-115 that day (~90%);
    with 8 steps 2-5% faster, and slower again with 16 (a loop of some 350 instructions;
    why is unmeasured). Measured on a Sapphire Rapids-class Xeon with haswell code at one
    thread, a chain of 8 distinct constant B alternated in one process
    (GFLOP/s, ku = 4 / 8 / 16): 240x256x256 100.1 / 101.3 / 97.6, 126x768x768 98.7 / 101.4 /
    95.9, 128x768x3072 99.0 / 103.7 / 79.5, 197x3072x768 104.1 / 107.3 / 80.4,
    1500x384x1536 99.9 / 102.5 / 76.4; zoo models (torch frontend, A/B in one process, ms) bert
    248.4 -> 242.3, gpt2 247.7 -> 240.7, t5-encoder 56.0 -> 53.9, vit 409.1 -> 390.8,
    resnet50 82.7 -> 81.4, regnet_y_400mf 11.73 -> 11.65. AVX-512 code (14 x 2 and 9 x 3
    tiles) is even or slower with 8 (128x768x3072 164.7 / 164.2, 126x768x768 161.1 /
    158.8). On an AMD core, a Zen 5 (one thread, alternated, GFLOP/s, ku = 4 / 8), 8 steps
    gain nothing: znver3 code 128x768x3072 121.8 / 121.1, 197x3072x768 123.4 / 123.6,
    1500x384x1536 126.9 / 126.7, 126x768x768 124.7 / 124.3 (haswell code there: 118.6 / 119.1,
    116.5 / 116.6, 117.0 / 115.7, 117.6 / 119.0): K_UNROLL there."""
    return 8 if machine.vendor == "intel" and machine.vector_bits == 256 else K_UNROLL


# A matmul of fewer FLOPs runs on one thread: its tiles are not split for the threads (split
# anyway, Winograd's 64 x 64 x 196 slices, 1.6 MFLOP each, ran slower at 2 threads).
PARALLEL_MIN_FLOPS = 1 << 22


def choose_matmul_schedule(batch: tuple[int, ...], m: int, n: int, k: int, *, vw: int,
                           elem_bytes: int = 4, threads: int | None = None,
                           registers: int | None = None, l1_bytes: int = L1_BYTES,
                           l2_bytes: int = L2_BYTES, b_constant: bool = False,
                           a_constant: bool = False, a_trans: bool = False,
                           b_trans: bool = False, conv: bool = False,
                           pack_aliased_a: bool = True, l2_prefetch: bool = False,
                           ku: int = K_UNROLL,
                           fixed: Mapping[str, object] | None = None) -> MatmulSchedule:
    """The default schedule for a (batch x) m x n x k matmul; fields in `fixed` are kept and
    the others chosen around them.

    Register tile: as many accumulators as the register file holds next to the B vectors
    and a broadcast (28 of 32 zmm: 14 x 2 vectors, or 9 x 3 where N is a multiple of 3
    vectors and M at least WIDE_TILE_MIN_M; 12 of 16 ymm: 6 x 2), narrower when N is, and
    wide (up to 8 vectors) for a row vector (m < 4), where the FMA chains would otherwise
    be too few to hide the FMA latency; such a matrix-vector product reading B
    in place walks it in K blocks of 64 rows. A matrix-vector product (m < 4) prefetches
    nothing: B, in place or packed at compile time, streams in order, which the hardware
    prefetcher follows, and prefetch instructions only compete with its loads (Zen 4, one
    thread, a Linear at batch 1 against pf = 32: 1x768x3072 1.41x, 1x4096x4096 1.39x,
    1x1024x1000 1.2x, 1x576x1024 1.13x; batch 2 and 3 1.05-1.09x; from batch 4 on pf = 32
    is even or ahead, 1.12x at 14x768x3072). Cache blocks (order "mn"):
    the mr x kc sliver of A takes up to 5/8 of L1 (the longer kc, the fewer passes over C),
    with kc <= KC_MAX_IN_PLACE where B is read in place; a packed B's K blocks are not held
    to it (Zen 4, one thread, both in one process: AVX2 code, whose 6-row sliver allowed
    more than 512, 197x768x3072 1.05x, 128x768x768 1.02-1.04x, 2048^3 1.08-1.09x, 1024^3
    1.0-1.02x; AVX-512 code with a short M: 4x2048x2048 1.07x, 8x768x3072 1.01x), a
    kc x nc block of B a quarter of L2 (but at least 4 register panels wide where A is
    packed, so each packed sliver serves 4 tiles), the mc x nc tile of C an eighth; blocks are
    balanced so the last is not a sliver. Then tiles are split until each thread has a few.
    The kernels' k loop unrolls `ku` steps (the machine's k_unroll_rule).
    A is read in place (its sliver sits in L1) unless transposed or its rows alias in L1
    (`rows_alias_in_l1`: a K that is a multiple of 512 f32; only with `pack_aliased_a`, the
    machine's aliased_a_rule), or constant (a conv's weight:
    packed at compile time, so each sliver is one contiguous stream); B is
    packed when its panels are reused (m > mr), transposed or constant (packed at compile
    time, so for free). A conv's matmul (`conv`: B is the im2col copy or the input itself,
    A the weight) packs B only from CONV_PACK_B_ROWS output channels up: packing is then a
    second copy of the conv's input, for M = OC/G rows of reuse. Below, reading B in place
    measured faster (up to 1.7x at M = 64 on an AVX-512 core; 1.06x at M = 128 on Zen 3,
    AVX2); from M = 256 the packed panels win (Zen 3, one thread, batch 1: 1.15x for
    resnet's 256-channel 3x3 conv at 14x14, 1.3x for 512 channels at 7x7 and for the
    2048-channel 1x1 at 7x7), where B read in place has a masked tail panel (N = 49 or
    196) and rows N floats apart, on many pages and few L1 sets. A batch of images split
    over the threads (parallel = "b") keeps B in place, its im2col written per image; so
    does Winograd's matmul, batched over its 16 or 36 transformed slices (256 channels at
    14x14 with F(2x2): even with the packed B of one slice's own matmul).
    With `l2_prefetch` (the machine's l2_prefetch_rule), `l2pf` where an operand is packed
    at compile time (a constant A or B) and the A sliver is the outer register-tile loop.
    The kernels then fetch each block of a constant B while the one before it runs, all but
    the first: the first sliver reads that from memory at the pace of its loads, the rest of
    the matmul waits on it. Its share of the time falls with M (the block's FMAs grow with
    M, its bytes do not), so up to L2PF_NARROW_MAX_M rows a block is at most
    L2PF_NARROW_COLS columns wide. Measured on a Sapphire Rapids-class Xeon at one thread,
    alternated in one process: a chain of 12 distinct (4 x 512x512, 512x2048, 2048x512)
    constant B, ms with blocks of 128-256 columns / 64, AVX2 code: M = 16 16.1 / 13.6,
    24 17.6 / 15.5, 48 32.1 / 30.9, 64 43.0 / 41.1, 128 84.1 / 81.0; AVX-512 code M = 16
    11.5 / 9.7, 64 26.5 / 23.6; whole models (ONNX): clip-text (M = 16) 16.2 -> 14.0 ms
    (AVX2 code 20.8 -> 17.9), t5-encoder 28.5 -> 26.7, bert 115.8 -> 112.7 (AVX2 code 203.0
    -> 199.2), gpt2 110.5 -> 107.5, vit 172.9 -> 171.2; but whisper-encoder (M = 1500)
    201.4 -> 203.8 (AVX2 code 344.5 -> 346.2), where the first block is a small share of
    the matmul and wider blocks pass over the A sliver fewer times.
    """
    fixed = fixed or {}
    _check_fields(fixed)
    fixed = {k_: _coerce(k_, v) for k_, v in fixed.items()}
    threads = threads or default_threads()
    vw = int(fixed.get("vw", vw))
    if registers is None:
        registers = 32 if vw * elem_bytes >= 64 else 16
    acc_budget = registers - 4  # B vectors + the broadcast
    if "nr" in fixed:
        nq = max(1, int(fixed["nr"]) // vw)
    else:
        nq = max(1, min(2, -(-n // vw)))  # vectors per row of the tile
        if (registers >= 32 and m >= WIDE_TILE_MIN_M and n % (WIDE_TILE_VECTORS * vw) == 0
                and "mr" not in fixed):
            nq = WIDE_TILE_VECTORS  # 9 x 3 vectors: see WIDE_TILE_VECTORS
        if m < 4:  # (nearly) a row vector: go wide in N for independent FMA chains
            nq = max(1, min(acc_budget // max(m, 1), 8, -(-n // vw)))
        if "nc" in fixed:  # the register tile must divide a fixed cache block
            while nq > 1 and int(fixed["nc"]) % (nq * vw):
                nq -= 1
    nr = int(fixed.get("nr", nq * vw))
    # Rows of the register tile: as many as the accumulators allow, then evened out over M so
    # the last tile is not a sliver (M = 32: 3 tiles of 11 rows, not 14 + 14 + 4; an MLP at
    # batch 32 runs 1.26x faster so).
    mr = int(fixed.get("mr", _balanced(max(m, 1), max(1, min(acc_budget // nq, 14)), 1)))
    if nq == WIDE_TILE_VECTORS and "mr" not in fixed and m > acc_budget // nq:
        # 9 or 8 rows, whichever pads M less (M = 128: 16 tiles of 8, not 15 of 9)
        mr = min((acc_budget // nq, acc_budget // nq - 1), key=lambda r: -(-m // r) * r)
    if "mc" in fixed and "mr" not in fixed:
        while mr > 1 and int(fixed["mc"]) % mr:
            mr -= 1
    order = str(fixed.get("order", "mn"))
    # B read in place by a (nearly) row-vector A: a matrix-vector product, bound by reading
    # B. Short K blocks walk B a few rows at a time, all panels, so each line of B is used
    # at once; prefetching rows ahead only adds traffic.
    streaming_b = not (b_constant or b_trans or m > mr) and m < 4
    nbatch = math.prod(batch)
    # A conv's batch of images split evenly over the threads: each image's tiles on one
    # thread, which lets tile-matmul write that image's im2col matrix right before them.
    per_image = conv and nbatch >= 2 and (nbatch % threads == 0 or nbatch >= 4 * threads)
    pack_b = bool(fixed["pack_b"]) if "pack_b" in fixed else (b_constant or b_trans or (
        m > mr and (not conv or (m >= CONV_PACK_B_ROWS and not per_image))))
    if "kc" in fixed:
        kc = int(fixed["kc"])
    else:
        # The L1-resident operand: an mr x kc sliver of A ("mn") or a kc x nr panel of B.
        # B read in place keeps K blocks of KC_MAX_IN_PLACE rows at most; packed B panels
        # take the longest the sliver allows (fewer passes over C).
        per_k = (mr if order == "mn" else nr) * elem_bytes
        kc_max = max(16, (l1_bytes * 5 // 8) // per_k // 16 * 16)
        if not pack_b:
            kc_max = min(kc_max, KC_MAX_IN_PLACE)
        if streaming_b:
            kc_max = 64
        kc = _balanced(max(k, 1), kc_max, 1)
    pack_a = bool(fixed["pack_a"]) if "pack_a" in fixed else (a_constant or (
        (order == "nm" or a_trans or (pack_aliased_a and rows_alias_in_l1(k * elem_bytes, mr)))
        and m > mr and n > nr))
    l2pf = int(fixed["l2pf"]) if "l2pf" in fixed else int(
        l2_prefetch and order == "mn" and ((b_constant and pack_b) or (a_constant and pack_a)))
    if "nc" in fixed:
        nc = int(fixed["nc"])
    else:
        # A packed sliver is used nc / nr times per pass: at least 4 (a long K block on a
        # 512 KB L2 left 2: Zen 3, one thread, 2048^3 and 2048x4096x1024 with run-time
        # operands 1.05-1.08x with 4, 128x3072x768 and 49x2048x512 with a constant B 1.02x;
        # A read in place (1536^3) stays better with 2)
        least = 4 * nr if pack_a else nr
        widest = (l2_bytes // 4) // (kc * elem_bytes) // nr * nr
        if l2pf and b_constant and pack_b and m <= L2PF_NARROW_MAX_M:
            widest = min(widest, L2PF_NARROW_COLS)  # a short first block (see the docstring)
        nc = _balanced(max(n, 1), max(least, widest), nr)
    if "mc" in fixed:
        mc = int(fixed["mc"])
    else:
        mc = _balanced(max(m, 1), max(mr, (l2_bytes // 8) // (nc * elem_bytes) // mr * mr), mr)
    # Enough tiles for the threads (a few each, for balance), if the work is worth it.
    flops = 2 * nbatch * m * n * k
    if threads > 1 and flops >= PARALLEL_MIN_FLOPS:
        want = 4 * threads
        while nbatch * (-(-m // mc)) * (-(-n // nc)) < want:
            if "nc" not in fixed and nc >= 4 * nr and nc >= mc:
                nc = _round_up(nc // 2, nr)
            elif "mc" not in fixed and mc >= 2 * mr:
                mc = _round_up(mc // 2, mr)
            elif "nc" not in fixed and nc >= 2 * nr:
                nc = _round_up(nc // 2, nr)
            else:
                break
    s = MatmulSchedule(
        mr=mr, nr=nr, vw=vw, kc=kc, mc=mc, nc=nc, ku=ku,
        pack_a=pack_a,
        pack_b=pack_b,
        parallel="b" if per_image else "bmn", order=order,
        pf=32 if k > 64 and m >= 4 else 0, l2pf=l2pf)
    s = replace(s, **{k_: v for k_, v in fixed.items() if k_ not in ("mr", "nr", "vw", "kc",
                                                                     "mc", "nc", "order")})
    s.validate()
    return s


def element_bytes(t) -> int:
    return 8 if getattr(t, "name", "") == "f64" else 4


def schedule_of(op: Operation) -> MatmulSchedule | None:
    attr = op.attributes.get(SCHEDULE_ATTR)
    return None if attr is None else MatmulSchedule.from_attr(attr)


__all__ = [
    "CONV_SCHEDULE_FIELDS",
    "MatmulMatch",
    "MatmulSchedule",
    "SCHEDULE_ATTR",
    "choose_conv_schedule",
    "conv_l2_prefetch_rule",
    "pointwise_row",
    "choose_dw_schedule",
    "choose_matmul_schedule",
    "conv_schedule_of",
    "l2_prefetch_rule",
    "nhwc_kxk_rule",
    "parse_conv_schedule",
    "format_overrides",
    "match_matmul",
    "parse_overrides",
]
