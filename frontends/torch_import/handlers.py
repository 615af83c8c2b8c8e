"""The importer's table: ATen op name -> handler, merged from the tables of the op families.

A handler takes (importer, bound arguments) and returns a value or a list of values; the
importer dispatches on this table, and export_module keeps the ops it names whole when it
decomposes a graph.
"""

from __future__ import annotations

from frontends.registry import merge_tables
from frontends.torch_import import (
    ops_activation,
    ops_attention,
    ops_elementwise,
    ops_index,
    ops_linalg,
    ops_logic,
    ops_nn,
    ops_norm,
    ops_reduce,
    ops_resample,
    ops_scatter,
    ops_shape,
    ops_sort,
)

__all__ = ["HANDLERS", "SUPPORTED_OPS"]

HANDLERS = merge_tables(
    ops_elementwise.HANDLERS,
    ops_activation.HANDLERS,
    ops_logic.HANDLERS,
    ops_linalg.HANDLERS,
    ops_reduce.HANDLERS,
    ops_norm.HANDLERS,
    ops_shape.HANDLERS,
    ops_index.HANDLERS,
    ops_nn.HANDLERS,
    ops_resample.HANDLERS,
    ops_attention.HANDLERS,
    ops_scatter.HANDLERS,
    ops_sort.HANDLERS,
)
SUPPORTED_OPS = HANDLERS
