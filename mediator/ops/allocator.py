"""The C allocator's settings for a long-running node or worker (glibc only).

Under hostile traffic a node's resident memory grew faster than its Python allocations
(tracemalloc). glibc raises its mmap threshold each time a large block (a big
envelope, a WebSocket buffer) is freed, so later large blocks come from the heap, which
they fragment and which is rarely given back. A fixed mmap and trim threshold and two
arenas (a node is one event loop; its threads are few) keep what a process holds close to
what it uses: fuzzed, a node held 76 MiB after 50,000 inputs with them, 92 MiB without.

Variables the operator sets (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, ...) win: nothing is
changed when any is set. Elsewhere (musl, macOS) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

# mallopt(3) parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

SETTINGS = {
    M_MMAP_THRESHOLD: 128 * 1024,  # blocks from 128 KiB up are mapped and unmapped
    M_TRIM_THRESHOLD: 128 * 1024,  # free memory at the heap's top beyond this goes back
    M_ARENA_MAX: 2,
}


def tune() -> bool:
    """Apply SETTINGS; True when they were applied."""
    if any(name.startswith("MALLOC_") for name in os.environ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl has a mallopt that ignores these
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = all([mallopt(param, value) == 1 for param, value in SETTINGS.items()])
    if not applied:
        log.debug("mallopt refused a setting; the allocator keeps its defaults")
    return applied
