"""choose-schedule: attach a CPU schedule to every matmul-like linalg op.

    linalg.matmul ins(%a, %b) outs(%c)
  ==>
    linalg.matmul {aicc.schedule = {mr = 14 : i64, nr = 32 : i64, vw = 16 : i64, ...}} ins(...) outs(...)

The schedule (see `schedule.py`) comes from `choose_matmul_schedule` for the op's shape, the
target's vector width (`vector-bits`, 512 for AVX-512), cache sizes (`l1-bytes`,
`l2-bytes`) and thread count (`threads`, 0 for $AICC_NUM_THREADS or all cores). `overrides`
fixes fields, and the heuristic chooses the others around them: `mr=6,nr=32` for every
matmul, `0:mr=6;1:kc=128` per matmul in program order. An op that already has a schedule
keeps it (overrides still apply), so a schedule written into the IR by hand or by a tuner
wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from compiler.errors import CompileError
from compiler.lowering.schedule import (
    SCHEDULE_ATTR,
    choose_matmul_schedule,
    element_bytes,
    is_constant,
    match_matmul,
    parse_overrides,
    schedule_of,
)


@dataclass(frozen=True)
class ChooseSchedule(ModulePass):
    """Attach `aicc.schedule` to each matmul-like linalg op."""

    name = "choose-schedule"

    vector_bits: int = 512
    threads: int = 0
    l1_bytes: int = 0  # 0: the defaults in schedule.py
    l2_bytes: int = 0
    overrides: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        overrides = parse_overrides(self.overrides)
        caches = {k: v for k, v in (("l1_bytes", self.l1_bytes), ("l2_bytes", self.l2_bytes)) if v}
        index = 0
        for o in op.walk():
            match = match_matmul(o)
            if match is None:
                continue
            fixed = {**overrides.get(None, {}), **overrides.get(index, {})}
            sched = schedule_of(o)
            if sched is not None:  # written into the IR: overrides still apply
                sched = sched.with_overrides(fixed)
            else:
                ebytes = element_bytes(match.element_type)
                sched = choose_matmul_schedule(
                    match.batch, match.m, match.n, match.k,
                    vw=max(1, self.vector_bits // (8 * ebytes)), elem_bytes=ebytes,
                    threads=self.threads or None, b_constant=is_constant(match.b),
                    fixed=fixed, **caches)
            o.attributes[SCHEDULE_ATTR] = sched.to_attr()
            index += 1
        unused = [k for k in overrides if k is not None and k >= index]
        if unused:
            raise CompileError(
                f"schedule override for matmul {unused[0]}, but the program has {index} matmul(s)")
