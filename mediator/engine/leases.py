"""A worker's lease on an upkeep partition as stored: keys.leases() maps a partition to
`<worker id> <until ms>`, written by leases.lua (run by workers/leases.py), read by the
nodes' health figures and the capacity snapshot."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Lease:
    worker: str  # '' in a malformed entry
    until_ms: int  # 0 in a malformed entry

    @classmethod
    def parse(cls, value: bytes | str) -> Lease:
        text = value.decode() if isinstance(value, bytes) else value
        worker, _, until = text.partition(" ")
        return cls(worker, int(until) if until.isdigit() else 0)

    def live(self, now_ms: int) -> bool:
        """Whether a worker holds it at `now_ms`."""
        return bool(self.worker) and self.until_ms > now_ms
