"""Import a torch.nn.Module into the aicc tensor dialect through torch.export.

    prog = import_torch(model, (torch.randn(1, 3, 32, 32),))
    print(prog.module)

The module is exported in eval mode with `torch.export.export` on the example inputs (static
shapes), then `run_decompositions` applies the core-ATen decomposition table minus every op
that has a handler below: ops that map well onto aicc ops (linear, conv2d, layer_norm, softmax,
gelu, scaled_dot_product_attention, ...) stay whole, everything else is decomposed into the
core ATen ops that it is built from, and functionalization removes in-place ops.

The graph is then walked once in order. A value is a NumPy array when it is known at compile
time (a parameter, a buffer, a lifted constant, or any node whose tensor inputs are all known,
which torch itself evaluates: weight transposes, masks built with torch.triu, position tables,
...), a Python scalar, or an SSA value of the function being built. Every other node goes to
the handler registered for its ATen overload (`aten.add.Tensor`, ...), which emits aicc ops
through the GraphBuilder shared with the ONNX importer. Each result is checked against the
shape and dtype torch recorded for the node.

Before any IR is built, the graph is checked and every unsupported op type is reported in one
UnsupportedOpError, with its count and the first node's name. An argument value a handler does
not support is an UnsupportedOpError naming the node and the user's source line.

The package, by concern:

    export.py          torch.export, decompositions, to_torch_inputs
    importer.py        TorchImporter: the checks before any IR exists and the walk
    common.py          dtype tables, op names, constant nodes, operand helpers of the handlers
    handlers.py        the table of handlers (ATen op name -> handler), merged from the families:
    ops_elementwise.py casts, arithmetic, division and rounding, powers, unary math
    ops_activation.py  gelu, silu, clamps, hard sigmoid / swish, elu, softplus, mish, ...
    ops_logic.py       comparisons, logic, where, masked_fill
    ops_linalg.py      mm, bmm, matmul, linear, addmm
    ops_reduce.py      sum, mean, max / min, argmax, cumsum, var / std, logsumexp, norms
    ops_norm.py        softmax, layer / RMS / batch / group norm
    ops_shape.py       views, reshapes, permutes, cat / stack, slices, splits, flip, roll
    ops_index.py       embedding, index_select, index.Tensor, gather
    ops_nn.py          convolution, pooling, padding
    ops_resample.py    interpolation (upsample_*)
    ops_attention.py   scaled_dot_product_attention
"""

from frontends.torch_import.export import export_module, to_torch_inputs
from frontends.torch_import.handlers import SUPPORTED_OPS
from frontends.torch_import.importer import TorchImporter, import_torch
from frontends.torch_import.ops_resample import upsample_taps

__all__ = ["import_torch", "SUPPORTED_OPS", "to_torch_inputs", "TorchImporter", "export_module", "upsample_taps"]
