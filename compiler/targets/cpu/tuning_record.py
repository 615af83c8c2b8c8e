"""The tuning record: measured matmul schedules, per machine, kept in the cache folder.

One JSON file per target CPU (its name and features), `<cache folder>/tuning/<digest>.json`:

    {"format": 1, "machine": "znver3:+avx2,...",
     "kernels": {"<signature>": {"schedule": {...}, "ms": 0.41, "default_ms": 0.52,
                                 "measured": 37, "search_s": 12.5}}}

A kernel's signature is what choose-schedule sees of a matmul: batch, M, N, K, transposed
operands, a constant B, a conv's matmul, element size and the thread count, so a record found
on one model serves every model with the same matmul on this machine. choose-schedule takes a
recorded schedule in place of its heuristic (`m.stats["tuned"]` counts them); the compile
cache's key covers the record's digest, so tuning changes the code of later compiles.
Writers merge under a lock file and replace the record atomically (temporary file + rename).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from compiler.cache import cache_dir

FORMAT = 1
TUNED_ATTR = "aicc.tuned"


def signature(batch, m: int, n: int, k: int, *, a_trans: bool, b_trans: bool,
              b_constant: bool, conv: bool, elem_bytes: int, threads: int) -> str:
    b = "x".join(map(str, batch)) or "1"
    flags = "".join(f for f, on in (("A", a_trans), ("B", b_trans), ("c", b_constant),
                                     ("v", conv)) if on) or "-"
    return f"b{b}_m{m}_n{n}_k{k}_{flags}_e{elem_bytes}_t{threads}"


def record_path(machine_key: str) -> Path:
    digest = hashlib.blake2b(machine_key.encode(), digest_size=8).hexdigest()
    return cache_dir() / "tuning" / f"{digest}.json"


def load_record(path: Path) -> dict[str, dict]:
    """The record's kernels ({} when there is none or it cannot be read)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    kernels = data.get("kernels")
    return kernels if isinstance(kernels, dict) else {}


def record_digest(machine_key: str) -> str:
    """What the compile cache's key takes of the record ("" without one)."""
    try:
        return hashlib.blake2b(record_path(machine_key).read_bytes(), digest_size=12).hexdigest()
    except OSError:
        return ""


@contextlib.contextmanager
def _locked(path: Path):
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def save_kernels(machine_key: str, kernels: dict[str, dict]) -> Path:
    """Merge `kernels` into the machine's record (a new measurement of a signature replaces
    the old one only when faster)."""
    path = record_path(machine_key)
    with _locked(path):
        merged = load_record(path)
        for sig, entry in kernels.items():
            old = merged.get(sig)
            if old is None or entry["ms"] <= old.get("ms", float("inf")):
                merged[sig] = entry
        text = json.dumps({"format": FORMAT, "machine": machine_key,
                           "kernels": dict(sorted(merged.items()))}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    return path


__all__ = ["TUNED_ATTR", "load_record", "record_digest", "record_path", "save_kernels",
           "signature"]
