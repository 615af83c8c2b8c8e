"""ONNX node conformance: every node test case shipped with the onnx package whose op types
aicc's importer supports, compiled and run, checked with the case's own rtol / atol.

One test per op type runs all of that op's cases (the first data set of each); an op with many
cases (Attention's expanded functions) is split into tests of at most CHUNK cases, so that
pytest-xdist can spread them over its workers. The bar: no case
fails or crashes; a case needing a feature aicc lacks must be refused at import with
UnsupportedOpError ("unsupported"); cases with element types the pipeline does not compute are
skipped. Each test writes its outcomes for the summary table that tests/conftest.py prints at
the end of the session (`python tests/onnx_conformance.py` prints the same table alone).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

import pytest

pytest.importorskip("onnx")

from tests import onnx_conformance as conf  # noqa: E402

CHUNK = 16

_BY_OP = defaultdict(list)
for _c in conf.supported_cases():
    _BY_OP[conf.primary_op(_c)].append(_c)
_CASES = {}
for _op, _cs in sorted(_BY_OP.items()):
    for _i in range(0, len(_cs), CHUNK):
        _CASES[_op if len(_cs) <= CHUNK else f"{_op}-{_i // CHUNK}"] = _cs[_i:_i + CHUNK]


@pytest.mark.parametrize("op", list(_CASES))
def test_onnx_node_cases(op, tmp_path_factory):
    outcomes = [conf.run_case(c) for c in _CASES[op]]
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    (root / "onnx-conformance").mkdir(exist_ok=True)
    (root / "onnx-conformance" / f"{op}.json").write_text(
        json.dumps([o.__dict__ for o in outcomes])
    )
    failed = [f"{o.case}: {o.detail}" for o in outcomes if o.status == "failed"]
    assert not failed, "\n".join(failed)
