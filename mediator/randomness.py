"""Random bytes for the hot paths, drawn from the kernel's CSPRNG 4 KiB at a time.

Every envelope needs a content key and two nonces, and every message an id: asked of
`os.urandom` one by one that is eight `getrandom` system calls per live delivery, which on
a virtual machine cost more than the bytes. The buffer is the kernel's output, used once
and in order, so what it hands out is as unpredictable as `os.urandom`'s. One event loop per
process uses it (no threads), and a node never forks after start-up.
"""

from __future__ import annotations

import os
import uuid

_CHUNK = 4096
_buffer = b""
_at = 0


def random_bytes(n: int) -> bytes:
    global _buffer, _at
    if _at + n > len(_buffer):
        _buffer, _at = os.urandom(max(_CHUNK, n)), 0
    out = _buffer[_at : _at + n]
    _at += n
    return out


def uuid4() -> str:
    """A random (version 4) UUID, as text."""
    return str(uuid.UUID(bytes=random_bytes(16), version=4))
