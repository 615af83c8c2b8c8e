"""A pass that crashes or leaves IR that does not verify is a bug in aicc: the error names the
pass and its stage, and writes a reproducer (the tensor-level IR, headed by the aicc-opt
command) that aicc-opt reproduces. Passes are broken on purpose here with monkeypatch."""

from __future__ import annotations

import shlex

import numpy as np
import pytest
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir.affine import AffineMap

import compiler
from compiler.errors import InternalError
from compiler.lowering.fuse_elementwise import FuseElementwise
from compiler.lowering.simplify import Simplify


def model(x, w):
    return np.tanh(x @ w) + 1.0


ARGS = (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))


def _corrupt_first_generic(self, ctx, module):
    """A broken fuse-elementwise: the first generic's indexing maps lose a dimension."""
    original(self, ctx, module)
    op = next(o for o in module.walk() if isinstance(o, GenericOp))
    op.indexing_maps = ArrayAttr([AffineMapAttr(AffineMap.identity(1))] * len(op.operands))


original = FuseElementwise.apply


def _command(path: str) -> list[str]:
    first = open(path).readline()
    assert first.startswith("// aicc-opt ")
    return shlex.split(first[len("// "):])


def test_invalid_ir_names_the_pass_and_reproduces(monkeypatch, tmp_path):
    monkeypatch.setenv("AICC_REPRO_DIR", str(tmp_path))
    monkeypatch.setenv("AICC_CACHE", "0")
    monkeypatch.setattr(FuseElementwise, "apply", _corrupt_first_generic)
    with pytest.raises(InternalError) as info:
        compiler.compile(model, ARGS)
    e = info.value
    assert e.pass_name == "fuse-elementwise" and e.stage == "linalg"
    assert "internal error in pass fuse-elementwise (linalg stage)" in str(e)
    assert e.reproducer and e.reproducer.startswith(str(tmp_path)) and "aicc-repro-" in e.reproducer
    text = open(e.reproducer).read()
    assert "aicc.matmul" in text and "linalg" not in text.split("\n", 1)[1]  # the tensor level
    cmd = _command(e.reproducer)
    assert cmd[0] == "aicc-opt" and cmd[-1].endswith("fuse-elementwise")
    # aicc-opt, with the same broken pass, fails the same way on the reproducer
    from tools.aicc_opt import main

    assert main(cmd[1:]) == 1


def test_crashing_pass_names_the_pass(monkeypatch, tmp_path):
    monkeypatch.setenv("AICC_REPRO_DIR", str(tmp_path))
    monkeypatch.setenv("AICC_CACHE", "0")

    def crash(self, ctx, module):
        raise KeyError("boom")

    monkeypatch.setattr(Simplify, "apply", crash)
    with pytest.raises(InternalError, match=r"internal error in pass simplify \(tensor stage\): KeyError: 'boom'"):
        compiler.compile(model, ARGS)
    (repro,) = tmp_path.glob("aicc-repro-*.mlir")
    assert _command(str(repro))[-1].endswith("simplify")


def test_user_errors_pass_through_unchanged(monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "0")

    def refuse(self, ctx, module):
        raise compiler.UnsupportedOpError("aicc.thing")

    monkeypatch.setattr(Simplify, "apply", refuse)
    with pytest.raises(compiler.UnsupportedOpError, match="aicc.thing"):
        compiler.compile(model, ARGS)
