"""A fingerprint of an IR module: what the compile cache keys a model by.

Printing a module costs seconds once it holds a model's weights (a 100 MB constant prints as
200 MB of hex), so the fingerprint walks the ops instead: each op's name, its operands (by the
position of the value they use), result and block-argument types and attributes, and, for
dense elements, the type and the raw bytes. Two modules get the same fingerprint exactly when
they are the same IR up to SSA names.
"""

from __future__ import annotations

import hashlib

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue


def module_fingerprint(module: ModuleOp) -> str:
    h = hashlib.blake2b(digest_size=20)
    numbers: dict[SSAValue, int] = {}

    def value(v: SSAValue) -> None:
        numbers[v] = len(numbers)
        h.update(b"v" + str(v.type).encode())

    def attr(name: str, a: Attribute) -> None:
        h.update(b"a" + name.encode())
        if isinstance(a, DenseIntOrFPElementsAttr):
            h.update(str(a.type).encode())
            h.update(a.data.data)
        else:
            h.update(str(a).encode())

    def op(o: Operation) -> None:
        h.update(b"o" + o.name.encode())
        for v in o.operands:
            h.update(b"u%d" % numbers.get(v, -1))
        for name in sorted(o.properties):
            attr(name, o.properties[name])
        for name in sorted(o.attributes):
            attr(name, o.attributes[name])
        for r in o.results:
            value(r)
        for region in o.regions:
            h.update(b"r")
            for block in region.blocks:
                h.update(b"b")
                for arg in block.args:
                    value(arg)
                for inner in block.ops:
                    op(inner)

    op(module)
    return h.hexdigest()


__all__ = ["module_fingerprint"]
