"""The errors aicc raises for a user's input.

Everything aicc raises because of what a user gave it derives from CompileError;
anything else escaping is a bug in aicc.
"""

from __future__ import annotations


class CompileError(Exception):
    """A user's model or IR cannot be compiled. The message is one line, ready to print."""

    def __init__(self, message: str, *, location: str | None = None):
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class UnsupportedOpError(CompileError):
    """An operator (or Python construct) that no frontend or lowering supports."""

    def __init__(self, op: str, message: str | None = None, *, location: str | None = None):
        self.op = op
        super().__init__(message or f"unsupported operation '{op}'", location=location)


class ShapeError(CompileError):
    """Operand shapes or dtypes an op does not accept."""


class SpecializationError(CompileError):
    """A call's input differs from the example value a model was specialized on (an ONNX shape,
    axes or pads input that arrived as a graph input and was compiled as a constant)."""

    def __init__(self, message: str, *, input_name: str | None = None):
        self.input_name = input_name
        super().__init__(message)


class DimensionError(CompileError):
    """A call whose input shapes break the compiled model's constraints on its dims: a static
    dim that differs, two dims that must be equal but are not, a size out of its range."""

    def __init__(self, message: str, *, input_name: str | None = None, dim: int | None = None):
        super().__init__(message)
        self.input_name = input_name
        self.dim = dim


class InternalError(RuntimeError):
    """A bug in aicc: a pass raised, or left IR that does not verify. Names the pass and the
    stage, and the reproducer file: the tensor-level IR the pipeline started from, whose first
    line is the aicc-opt command that reproduces the failure."""

    def __init__(self, message: str, *, pass_name: str, stage: str, reproducer: str | None):
        self.pass_name, self.stage, self.reproducer = pass_name, stage, reproducer
        where = f"; reproducer: {reproducer}" if reproducer else ""
        super().__init__(f"internal error in pass {pass_name} ({stage} stage): {message}{where}")
