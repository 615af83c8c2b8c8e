"""aicc's dialects: `aicc` (graph-level tensor ops)."""

from compiler.dialects.aicc import AICC

__all__ = ["AICC"]
