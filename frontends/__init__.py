"""aicc's frontends: turn models written in NumPy (and later torch / ONNX) into the aicc dialect."""

from frontends.graph_builder import TracedProgram
from frontends.numpy_trace import Tracer, trace

__all__ = ["TracedProgram", "Tracer", "trace"]
