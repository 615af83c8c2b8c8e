"""Gradients of NumPy-style functions, following JAX: `grad`, `value_and_grad`, `check_grads`.

    loss_and_grads = compiler.value_and_grad(loss, argnums=(1, 2))
    value, (dw, db) = loss_and_grads(x, w, b)

The function is traced like `@jit` (frontends/numpy_trace.py), the `autodiff` pass appends
its backward graph (compiler/lowering/autodiff.py), and forward and backward compile as one
module, once per input shapes. `check_grads` compares the compiled gradients with central
finite differences of the traced function, evaluated in float64 by the reference interpreter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.pipeline import CompiledModel, CompileOptions, compile_module
from compiler.targets import get_target

__all__ = ["GradFunction", "check_grads", "grad", "value_and_grad"]


def _argnums(argnums: int | Sequence[int]) -> tuple[tuple[int, ...], bool]:
    """(argument numbers, whether the caller gets a tuple)."""
    if isinstance(argnums, int):
        return (argnums,), False
    nums = tuple(int(a) for a in argnums)
    if not nums:
        raise CompileError("argnums is empty: name at least one argument to differentiate")
    if len(set(nums)) != len(nums):
        raise CompileError(f"argnums {nums} repeats an argument")
    return nums, True


def _trace(fn: Callable, arrays: tuple[np.ndarray, ...]):
    from frontends.numpy_trace import trace

    program = trace(fn, arrays, name=getattr(fn, "__name__", "main").strip("<>") or "main")
    name = getattr(fn, "__name__", "the function")
    if program.output_is_tuple:
        raise CompileError(f"grad: {name} must return one array (the value to differentiate), not a tuple")
    (out_type,) = program.module.ops.first.function_type.outputs
    shape = tuple(out_type.get_shape())
    if int(np.prod(shape)) != 1:
        raise CompileError(
            f"grad: {name} returns an array of shape {shape}; grad needs a scalar (sum it for the "
            "gradient of the total)"
        )
    return program


class GradFunction:
    """`fn`'s value (when `with_value`) and gradients with respect to `argnums`, compiled once
    per input shapes: NumPy arrays in, NumPy arrays out."""

    def __init__(self, fn: Callable, argnums: int | Sequence[int], with_value: bool, options: CompileOptions):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.argnums, self.as_tuple = _argnums(argnums)
        self.with_value = with_value
        self.options = options
        self.cache: dict[tuple, CompiledModel] = {}

    def compiled_for(self, *inputs: Any) -> CompiledModel:
        arrays = tuple(np.asarray(x) for x in inputs)
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        m = self.cache.get(key)
        if m is None:
            m = self.cache[key] = self._compile(arrays)
        return m

    def _compile(self, arrays: tuple[np.ndarray, ...]) -> CompiledModel:
        from compiler.lowering.autodiff import differentiate

        for i in self.argnums:
            if not -len(arrays) <= i < len(arrays):
                raise CompileError(f"grad: argnums names argument {i}, but "
                                   f"{getattr(self.fn, '__name__', 'the function')} got {len(arrays)}")
        program = _trace(self.fn, arrays)
        fop = program.module.ops.first
        try:
            differentiate(fop, [i % len(arrays) for i in self.argnums])
        except UnsupportedOpError as e:
            where = next((loc for op, loc in program.locations.items() if op.name == e.op), None)
            raise UnsupportedOpError(e.op, str(e), location=where) from None
        return compile_module(program.module, program.func_name, output_is_tuple=True,
                              options=self.options, locations=program.locations)

    def __call__(self, *inputs: Any):
        value, *grads = self.compiled_for(*inputs)(*inputs)
        grads = tuple(grads) if self.as_tuple else grads[0]
        return (value, grads) if self.with_value else grads

    def ir(self, stage: str) -> str:
        """The IR (forward and backward) of the most recently compiled signature."""
        if not self.cache:
            raise CompileError(f"{self.fn.__name__} has not been compiled yet: call it first")
        return next(reversed(self.cache.values())).ir(stage)


def _options(target: str, threads: int | None) -> CompileOptions:
    options = CompileOptions(target, threads)
    get_target(target).check_options(options)
    return options


def grad(fn: Callable, argnums: int | Sequence[int] = 0, *, target: str = "cpu",
         threads: int | None = None) -> GradFunction:
    """The gradient of scalar-valued `fn` with respect to argument `argnums` (a tuple of
    gradients when `argnums` is a tuple), each shaped like its argument."""
    return GradFunction(fn, argnums, False, _options(target, threads))


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, *, target: str = "cpu",
                   threads: int | None = None) -> GradFunction:
    """Like `grad`, returning `(fn(*args), gradients)` from one compiled module."""
    return GradFunction(fn, argnums, True, _options(target, threads))


def numerical_grads(fn: Callable, args: Sequence[np.ndarray], argnums: Sequence[int],
                    eps: float = 1e-3) -> list[np.ndarray]:
    """Central finite differences of `fn` traced once and evaluated in float64 by the reference
    interpreter: (f(x + eps e_i) - f(x - eps e_i)) / 2 eps for every element i."""
    from compiler.reference import run_reference

    arrays = tuple(np.asarray(a, dtype=np.float32) for a in args)
    program = _trace(fn, arrays)
    base = [a.astype(np.float64) for a in arrays]

    def f(values):
        return float(np.sum(run_reference(program.module, values, program.func_name, float64=True)[0]))

    out = []
    for i in argnums:
        g = np.zeros(base[i].shape)
        for idx in np.ndindex(base[i].shape):
            vals = list(base)
            for sign in (1, -1):
                x = base[i].copy()
                x[idx] += sign * eps
                vals[i] = x
                g[idx] += sign * f(vals)
        out.append(g / (2 * eps))
    return out


def check_grads(fn: Callable, args: Sequence[Any], argnums: int | Sequence[int] | None = None, *,
                eps: float = 1e-3, rtol: float = 2e-2, atol: float = 2e-3, target: str = "cpu") -> None:
    """Check the compiled gradients of `fn` at `args` against central finite differences in
    float64 (see `numerical_grads`); raises AssertionError naming the argument and the worst
    element when they differ by more than `atol + rtol * |numerical|`. `argnums` defaults to
    every argument."""
    arrays = tuple(np.asarray(a, dtype=np.float32) for a in args)
    nums, _ = _argnums(tuple(range(len(arrays))) if argnums is None else argnums)
    analytic = grad(fn, nums, target=target)(*arrays)
    numeric = numerical_grads(fn, arrays, nums, eps)
    name = getattr(fn, "__name__", "fn")
    for i, a, n in zip(nums, analytic, numeric):
        err = np.abs(a.astype(np.float64) - n) - (atol + rtol * np.abs(n))
        if err.size and err.max() > 0:
            worst = np.unravel_index(int(np.argmax(err)), err.shape)
            raise AssertionError(
                f"check_grads: {name}, argument {i}: gradient {a[worst]:.6g} at {worst} differs from "
                f"the finite difference {n[worst]:.6g} (atol {atol}, rtol {rtol})"
            )
