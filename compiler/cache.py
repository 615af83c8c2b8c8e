"""The persistent compile cache: compiled models and GPU cubins, kept across processes.

Where: `$AICC_CACHE_DIR`, else the user cache folder (`platformdirs`: ~/.cache/aicc on Linux).
`AICC_CACHE=0` turns it off. Each entry is one file, `<kind>/<key[:2]>/<key>.aicc`:

    b"AICCACHE" | format (u32) | header length (u64) | header (JSON) | blake2b-256 of header and
    blobs | blobs, each at an offset that is a multiple of 64

The header holds the entry's metadata and the table of its blobs (name, offset, length). A
reader checks the magic, the format, the lengths and the checksum; an entry that fails any of
them (truncated, corrupted, from another format) is deleted and reported as a miss, never
loaded. A writer writes a temporary file in the same folder and renames it over the entry
(atomic on POSIX), so processes that compile the same model at once never see a partial file:
the last rename wins, and every one of them wrote the same bytes.

What goes into a key is the caller's business (compiler/pipeline.py: the tensor-level IR, the
options, the target's machine and tool versions, aicc's own source); this module stores bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

CACHE_ENV = "AICC_CACHE"
CACHE_DIR_ENV = "AICC_CACHE_DIR"
MAGIC = b"AICCACHE"
FORMAT = 1
ALIGN = 64
_PREFIX = struct.Struct("<8sIQ")  # magic, format, header length
_DIGEST = 32
SUFFIX = ".aicc"


def cache_enabled() -> bool:
    return os.environ.get(CACHE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    d = os.environ.get(CACHE_DIR_ENV)
    if d:
        return Path(d)
    import platformdirs

    return Path(platformdirs.user_cache_dir("aicc", appauthor=False))


@lru_cache(maxsize=None)
def source_digest() -> str:
    """A digest of aicc's compiler sources (every .py and .h under compiler/): a compiler
    changed since an entry was written never reuses it, released version or not."""
    h = hashlib.blake2b(digest_size=16)
    root = Path(__file__).resolve().parent
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".h")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass
class Entry:
    meta: dict
    blobs: dict[str, memoryview]

    def array(self, name: str, dtype: str, shape) -> np.ndarray:
        """Blob `name` as a read-only array (no copy; 64-byte aligned)."""
        return np.frombuffer(self.blobs[name], dtype=np.dtype(dtype)).reshape(shape)


class CompileCache:
    """One kind of entry ("model", "cubin") under the cache folder."""

    def __init__(self, kind: str, root: Path | None = None):
        self.kind = kind
        self.root = (root or cache_dir()) / kind

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}{SUFFIX}"

    def get(self, key: str) -> Entry | None:
        """The entry for `key`, or None (missing, or found damaged and deleted)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                buf = np.empty(size + ALIGN, np.uint8)  # blobs 64-byte aligned in memory too
                start = -buf.ctypes.data % ALIGN
                data = memoryview(buf[start:start + size])
                if f.readinto(data) != size:
                    raise ValueError("short read")
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            self.discard(key)
            return None
        entry = _parse(data)
        if entry is None:
            self.discard(key)
        return entry

    def put(self, key: str, meta: dict, blobs: dict[str, bytes | memoryview | np.ndarray]) -> bool:
        """Store an entry atomically; False (and nothing written) if the folder is not writable."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                _write(f, meta, blobs)
            os.replace(tmp, path)
            return True
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False

    def discard(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except OSError:
            pass


def _blob_bytes(b) -> memoryview:
    if isinstance(b, np.ndarray):
        b = np.ascontiguousarray(b).view(np.uint8).reshape(-1)
    return memoryview(b).cast("B")


def _write(f, meta: dict, blobs: dict) -> None:
    views = {name: _blob_bytes(b) for name, b in blobs.items()}
    table, offset = {}, 0
    for name, v in views.items():
        table[name] = [offset, v.nbytes]
        offset = -(-(offset + v.nbytes) // ALIGN) * ALIGN
    header = json.dumps({"meta": meta, "blobs": table}, sort_keys=True).encode()
    # the blob area starts at a multiple of ALIGN from the start of the file
    head = _PREFIX.size + len(header) + _DIGEST
    pad0 = -head % ALIGN
    h = hashlib.blake2b(header, digest_size=_DIGEST)
    for v in views.values():
        h.update(v)
    f.write(_PREFIX.pack(MAGIC, FORMAT, len(header)))
    f.write(header)
    f.write(h.digest())
    f.write(b"\0" * pad0)
    at = 0
    for name, v in views.items():
        off = table[name][0]
        f.write(b"\0" * (off - at))
        f.write(v)
        at = off + v.nbytes


def _parse(data: memoryview) -> Entry | None:
    if len(data) < _PREFIX.size:
        return None
    magic, fmt, hlen = _PREFIX.unpack_from(data, 0)
    if magic != MAGIC or fmt != FORMAT or _PREFIX.size + hlen + _DIGEST > len(data):
        return None
    header_bytes = bytes(data[_PREFIX.size:_PREFIX.size + hlen])
    digest = bytes(data[_PREFIX.size + hlen:_PREFIX.size + hlen + _DIGEST])
    try:
        header = json.loads(header_bytes)
        table = header["blobs"]
        meta = header["meta"]
    except (ValueError, KeyError, TypeError):
        return None
    head = _PREFIX.size + hlen + _DIGEST
    base = head + (-head % ALIGN)
    h = hashlib.blake2b(header_bytes, digest_size=_DIGEST)
    blobs = {}
    for name, (off, n) in sorted(table.items(), key=lambda item: item[1][0]):  # as written
        if base + off + n > len(data):
            return None
        blobs[name] = data[base + off:base + off + n]
        h.update(blobs[name])
    if h.digest() != digest:
        return None
    return Entry(meta, blobs)


def info(root: Path | None = None) -> dict:
    """Where the cache is, whether it is on, and its entries and bytes per kind."""
    root = root or cache_dir()
    kinds = {}
    if root.is_dir():
        for kind in sorted(p for p in root.iterdir() if p.is_dir()):
            files = [p for p in kind.rglob(f"*{SUFFIX}") if p.is_file()]
            kinds[kind.name] = {"entries": len(files), "bytes": sum(p.stat().st_size for p in files)}
    return {"dir": str(root), "enabled": cache_enabled(), "kinds": kinds}


def clear(root: Path | None = None) -> int:
    """Delete every entry; the number of files removed."""
    root = root or cache_dir()
    removed = 0
    if root.is_dir():
        for kind in (p for p in root.iterdir() if p.is_dir()):
            removed += sum(1 for p in kind.rglob(f"*{SUFFIX}") if p.is_file())
            shutil.rmtree(kind, ignore_errors=True)
    return removed


__all__ = ["CACHE_DIR_ENV", "CACHE_ENV", "CompileCache", "Entry", "cache_dir", "cache_enabled",
           "clear", "info", "source_digest"]
