"""torch.export of a module on its example inputs, and the decompositions the importer needs.

The module is exported in eval mode with `torch.export.export` on the example inputs (static
shapes), then `run_decompositions` applies the core-ATen decomposition table minus every op
that has a handler: ops that map well onto aicc ops (linear, conv2d, layer_norm, softmax,
gelu, scaled_dot_product_attention, ...) stay whole, everything else is decomposed into the
core ATen ops that it is built from, and functionalization removes in-place ops.
"""

from __future__ import annotations

import contextlib
import io
import logging
import operator
import os
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from compiler.errors import CompileError
from frontends.torch_import.common import (
    NO_OPS,
    TORCH_TO_NP,
    constant_sources,
    first_line,
    op_name,
    static_nodes,
)
from frontends.torch_import.handlers import HANDLERS

__all__ = ["export_module", "to_torch_inputs"]


def to_torch_inputs(example_inputs: Sequence[Any]) -> tuple:
    """Example inputs as CPU torch tensors; NumPy arrays are converted, other values refused."""
    out = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            t = x.detach()
            if t.device.type != "cpu":
                t = t.cpu()
        elif isinstance(x, np.ndarray | np.generic):
            t = torch.from_numpy(np.array(x))
        else:
            raise CompileError(
                f"example input {i} is a {type(x).__name__}; a torch.nn.Module is compiled for "
                "tensor inputs (torch tensors or NumPy arrays)"
            )
        if t.dtype not in TORCH_TO_NP:
            hint = " (call .float() on the module and the input)" if t.is_floating_point() else ""
            raise CompileError(
                f"example input {i} has dtype {str(t.dtype).removeprefix('torch.')}; aicc compiles "
                f"float32, int32, int64 and bool tensors{hint}"
            )
        out.append(t)
    return tuple(out)


@contextlib.contextmanager
def _quiet():
    """torch.export prints partial graphs and logs warnings on failure; the error says enough."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _user_line(e: BaseException) -> str | None:
    """'file:line' of the user's code that torch.export names in its message, if any."""
    hits = re.findall(r'File "([^"]+)", line (\d+)', str(e))
    torch_dir = os.path.dirname(torch.__file__)
    for path, line in reversed(hits):
        if not os.path.abspath(path).startswith(torch_dir):
            return f"{path}:{line}"
    return None


def export_module(module: torch.nn.Module, inputs: tuple, dynamic_shapes=None):
    """torch.export in eval mode (the caller's train/eval flags are restored); one-line errors.
    `dynamic_shapes`: torch.export's own argument (torch.export.Dim per dynamic dim)."""
    name = type(module).__name__
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with _quiet():
            ep = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes)
    except Exception as e:
        raise CompileError(
            f"torch.export could not export {name}: {type(e).__name__}: {first_line(e)}",
            location=_user_line(e),
        ) from None
    finally:
        for m, training in modes:
            m.training = training
    if not _needs_decomposition(ep):
        return ep
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op_name(op) in HANDLERS:
            table.pop(op)
    try:
        with _quiet():
            return ep.run_decompositions(table)
    except Exception as e:
        raise CompileError(
            f"decomposing the exported graph of {name} failed: {type(e).__name__}: {first_line(e)}"
        ) from None


def _needs_decomposition(ep) -> bool:
    """Would run_decompositions change anything the importer cares about? Not when every op
    is handled or only computes constants, and none mutates its inputs (functionalization)."""
    static = static_nodes(ep.graph, set(constant_sources(ep)))
    for node in ep.graph.nodes:
        if node.op in ("placeholder", "output") or node.target is operator.getitem:
            continue
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            return True
        if node.target._schema.is_mutable:
            return True
        name = op_name(node.target)
        if name not in HANDLERS and name not in NO_OPS and node not in static:
            return True
    return False
