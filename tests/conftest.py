"""Session-wide pytest hooks."""

from __future__ import annotations

import json


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print the ONNX conformance table when tests/test_onnx_conformance.py ran."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    folder = factory.getbasetemp() / "onnx-conformance"
    if not folder.is_dir():
        return
    from tests.onnx_conformance import Outcome, summarize

    outcomes = []
    for f in sorted(folder.glob("*.json")):
        outcomes += [Outcome(**d) for d in json.loads(f.read_text())]
    if outcomes:
        terminalreporter.write_sep("=", "ONNX conformance")
        terminalreporter.write_line(summarize(outcomes))
