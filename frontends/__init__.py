"""aicc's frontends: turn models written in NumPy (and later torch / ONNX) into the aicc dialect."""

from frontends.numpy_trace import TracedProgram, Tracer, trace

__all__ = ["TracedProgram", "Tracer", "trace"]
