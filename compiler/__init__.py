"""aicc: an MLIR-style multi-level AI compiler, built on xDSL.

    import compiler
    from compiler import jit

    @jit
    def mlp(x, w1, b1, w2, b2):
        return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2

    m = compiler.compile(fn, example_inputs)     # m(*inputs), m.ir("loops")
    m.export("out/")                             # libmodel.so + model.h: no Python needed
    lib = compiler.load("out/")                  # that library, called from Python
    g = compiler.grad(loss, argnums=(1, 2))      # gradients, as in JAX (compiler/grad.py)
"""

from compiler.api import JitFunction, compile, jit, load
from compiler.errors import CompileError, DimensionError, ShapeError, SpecializationError, UnsupportedOpError
from compiler.grad import check_grads, grad, value_and_grad
from compiler.quantize import quantize, quantize_dynamic
from compiler.pipeline import CompiledModel

__all__ = [
    "CompileError",
    "CompiledModel",
    "JitFunction",
    "ShapeError",
    "SpecializationError",
    "DimensionError",
    "UnsupportedOpError",
    "check_grads",
    "compile",
    "grad",
    "jit",
    "load",
    "ops",
    "quantize",
    "quantize_dynamic",
    "tensor_op",
    "value_and_grad",
]


def tensor_op(src: str, ranges: dict[str, int] | None = None, *, target: str = "cpu", threads: int | None = None):
    """A custom operator in index notation, e.g. `tensor_op("out[i, j] = sum[k](a[i, k] * b[k, j])")`.

    The callable takes the expression's tensors (in order of first appearance, or by name) as
    NumPy arrays, compiled for `target` once per input shapes, or traced values inside `@jit`
    functions, where it becomes `aicc.tensor_op` ops. `ranges` gives index ranges that the
    operands' shapes do not determine. See frontends/tensor_op.py."""
    import functools

    from compiler.api import jit
    from frontends.tensor_op import TensorOpFunction

    return TensorOpFunction(src, ranges, compile=functools.partial(jit, target=target, threads=threads))


def __getattr__(name: str):
    if name == "ops":  # compiler.ops without importing it eagerly
        import importlib

        return importlib.import_module("compiler.ops")
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")
