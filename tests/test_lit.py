"""Runs the lit/FileCheck suite in tests/filecheck as part of pytest (one command runs both)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).parent / "filecheck"


def test_lit_suite():
    lit = shutil.which("lit", path=os.path.dirname(sys.executable)) or shutil.which("lit")
    if lit is None or shutil.which("aicc-opt") is None:
        pytest.fail("lit and aicc-opt must be installed: pip install -e '.[test]'")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    result = subprocess.run([lit, "-v", str(SUITE)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert "Passed" in result.stdout
