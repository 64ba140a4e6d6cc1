"""Log files of the processes tests start (nodes, workers, wallets, pods' containers): in
one directory per test process, removed when that process exits. A failing test shows what
it needs from them in its message; left in /tmp they were thousands per `make test`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import IO

_DIRECTORY = tempfile.TemporaryDirectory(prefix="mediator-test-logs-")


def log_file(prefix: str) -> IO[bytes]:
    """A new log file, open for a process to write its output to."""
    return tempfile.NamedTemporaryFile(
        dir=_DIRECTORY.name, prefix=prefix, suffix=".log", delete=False
    )


def log_path(prefix: str) -> Path:
    """A new, empty log file's path."""
    with log_file(prefix) as file:
        return Path(file.name)
