"""The WebSocket's own limits, kept by each node for the sockets it holds: the messages one
socket may send per second, and the sockets one client address may hold open. The limits
that hold across the cluster are mediator/mediation/abuse.py's."""

from __future__ import annotations

from mediator.networks import within


class FrameRate:
    """The messages one WebSocket may send per second (--websocket-messages-per-second):
    over it a frame is refused (answered at most once a second), at four times it the
    socket is closed."""

    TAKE, REFUSE, DROP, CLOSE = "take", "refuse", "drop", "close"
    CLOSE_FACTOR = 4

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self.reason = f"over {per_second} messages a second on this socket"
        self.second = -1
        self.count = 0
        self.answered = False

    def take(self, now: float) -> str:
        if self.per_second <= 0:
            return self.TAKE
        second = int(now)
        if second != self.second:
            self.second, self.count, self.answered = second, 0, False
        self.count += 1
        if self.count <= self.per_second:
            return self.TAKE
        if self.count > self.CLOSE_FACTOR * self.per_second:
            return self.CLOSE
        if self.answered:
            return self.DROP
        self.answered = True
        return self.REFUSE


class AddressSockets:
    """The WebSockets each client address holds open on this node
    (--websocket-sockets-per-address)."""

    def __init__(self, limit: int, exempt_networks: str = "") -> None:
        self.limit = limit
        self.exempt_networks = exempt_networks
        self.open_by_address: dict[str, int] = {}

    def open(self, address: str) -> bool:
        """Count a new socket from `address`, or refuse it (nothing counted)."""
        held = self.open_by_address.get(address, 0)
        if self.limit > 0 and held >= self.limit and not within(address, self.exempt_networks):
            return False
        self.open_by_address[address] = held + 1
        return True

    def close(self, address: str) -> None:
        held = self.open_by_address.get(address, 0) - 1
        if held > 0:
            self.open_by_address[address] = held
        else:
            self.open_by_address.pop(address, None)
