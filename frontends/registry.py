"""Tables of op handlers, one per module of handlers, merged where an importer dispatches.

    HANDLERS = HandlerTable()
    handles = HANDLERS.handles

    @handles("Add", "Sub")
    def _op_arith(imp, node, ins, at): ...

    SUPPORTED_OPS = merge_tables(core.HANDLERS, nn.HANDLERS)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["HandlerTable", "merge_tables"]


class HandlerTable(dict[str, Callable[..., Any]]):
    """Op name -> handler. A name has one handler: registering it twice is an error."""

    def handles(self, *names: str):
        """A decorator registering its function as the handler of each of `names`."""

        def reg(fn):
            for n in names:
                if n in self:
                    raise ValueError(f"{n} has two handlers: {self[n].__qualname__} and {fn.__qualname__}")
                self[n] = fn
            return fn

        return reg


def merge_tables(*tables: HandlerTable) -> HandlerTable:
    """One table holding the handlers of `tables`, which must not share an op name."""
    out = HandlerTable()
    for table in tables:
        for name, fn in table.items():
            out.handles(name)(fn)
    return out
