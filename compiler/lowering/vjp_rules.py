"""The vector-Jacobian product of every differentiable aicc op, one rule per op (see
compiler/lowering/autodiff.py). Each rule gets the op and the cotangent `g` of its result and
returns one gradient per operand, written with aicc ops."""

from __future__ import annotations
