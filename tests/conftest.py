"""Session-wide pytest hooks."""

from __future__ import annotations

import json
import os
import tempfile

# The tests compile from scratch: a test that checks pass timings, IR or statistics must see the
# passes run, not a model loaded from the compile cache. tests/test_cache.py turns the cache on
# for itself, in folders of its own; nothing here writes to the user's cache folder.
os.environ["AICC_CACHE"] = "0"
os.environ["AICC_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"aicc-test-cache-{os.getpid()}")


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
