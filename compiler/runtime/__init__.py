"""Runtimes that load and run compiled code (``cpu``: llvmlite MCJIT on the host)."""
