"""Artifact verification: SHA-256 of downloaded files."""

from __future__ import annotations

import os

from .protocol import CHUNK


# Files up to this size are hashed with the interpreter's own SHA-256, which
# loads in microseconds; hashlib's loads OpenSSL, which takes milliseconds
# and pays off only on larger files.
SMALL_FILE_HASH = 1 << 20


def sha256_file(path: str, prefix: bytes = b"") -> str:
    """SHA-256 of ``prefix`` then the file's bytes, as hex."""
    digest = None
    if os.path.getsize(path) <= SMALL_FILE_HASH:
        digest = builtin_sha256(prefix)
    if digest is None:
        import hashlib
        digest = hashlib.sha256(prefix)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def builtin_sha256(data: bytes):
    """A SHA-256 object from the interpreter's built-in module (``_sha2``
    since 3.12, ``_sha256`` before), or None when it has none."""
    for module in ("_sha2", "_sha256"):
        try:
            return __import__(module).sha256(data)
        except (ImportError, AttributeError):
            continue
    return None
