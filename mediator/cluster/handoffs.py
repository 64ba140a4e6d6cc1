"""Messages a send handed to a live socket of this node (hand_off in engine/lua/_lib.lua).

A live socket's receives leave a marker beside its queue. A send that finds the marker, and
finds its message the only visible one, hands the message out in the same script call (in
flight until the socket's delivery deadline, counted as delivered, as the socket's own
receive would) and publishes it on the socket's node channel as `take <msgpack>`. The
socket then writes the delivery without asking Redis: one round trip and one wake-up fewer
per live delivery.

A hand-off that no live loop here takes (its socket closed, left live mode, or was taken
over) is given back at once: visible again for the next receive, wherever it comes from,
unless a newer socket reclaimed it meanwhile. One published to a node that died meanwhile
stays in flight until its deadline, or until a new live socket for the recipient reclaims
what was handed out (as any delivery that node had written). While the node's subscription
was down hand-offs may have been lost: every live loop then reclaims what was handed out
and it did not write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import msgpack

from mediator.engine.model import Hold, QueueRef, ReceivedMessage
from mediator.engine.replies import received_message, text
from mediator.storage.clients import STORAGE_ERRORS

log = logging.getLogger(__name__)

# A socket's delivery loop: takes (connection, the hand-off's number, the message); False
# when it delivers nothing to that connection any more.
Accept = Callable[[str, int, ReceivedMessage], bool]
GiveBack = Callable[[str, list[ReceivedMessage]], Awaitable[int]]


class Handoffs:
    def __init__(self, give_back: GiveBack, delivered: Callable[[int], None] | None = None) -> None:
        self._give_back_to = give_back  # Mailbox.give_back: visible again at once
        self._delivered = delivered  # counts what a socket took (metrics)
        self._sockets: dict[str, tuple[Accept, Callable[[], None]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def register(self, socket_id: str, accept: Accept, lost: Callable[[], None]) -> None:
        """`lost`: hand-offs to the socket may have been lost (the subscription was down)."""
        self._sockets[socket_id] = (accept, lost)

    def unregister(self, socket_id: str) -> None:
        self._sockets.pop(socket_id, None)

    def reset(self) -> None:
        """The node's subscription is back: what was published meanwhile is lost."""
        for _, lost in list(self._sockets.values()):
            lost()

    def on_take(self, data: bytes) -> None:
        """`take`'s payload on this node's channel: msgpack [queue (qualified), the hold's
        owner `<node>/<socket>`, the hand-off's number, the message's 9 reply values]."""
        try:
            fields = msgpack.unpackb(data, raw=True)
            connection = QueueRef.parse(text(fields[0])).name
            owner = Hold.parse_owner(text(fields[1]))
            number = int(fields[2])
            message = received_message(fields[3:12])
        except (ValueError, TypeError, IndexError, msgpack.UnpackException):
            log.warning("ignoring a malformed hand-off %r", data[:100])
            return
        taker = None if owner is None else self._sockets.get(owner[1])
        if taker is not None and taker[0](connection, number, message):
            if self._delivered is not None:
                self._delivered(1)
            return
        task = asyncio.create_task(self._give_back(connection, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _give_back(self, connection: str, message: ReceivedMessage) -> None:
        try:
            await self._give_back_to(connection, [message])
        except STORAGE_ERRORS as exc:  # offered again at its deadline
            log.warning("giving back a hand-off no socket took failed: %s", exc)

    async def stop(self) -> None:
        """Let the releases under way finish."""
        if self._tasks:
            await asyncio.wait(list(self._tasks))


class Inbox:
    """What sends handed to one live delivery loop, kept until the loop writes it.

    Hand-offs come on the node's channel and receive replies on the line, two connections,
    so a hand-off made before a receive may arrive after the receive's reply: the reply
    says how many hand-offs there were (`handed`), and the loop writes those before what the
    receive returned (`take(upto=...)`), waiting a moment for any still on their way."""

    __slots__ = ("_ready", "floor", "items", "lost", "seen")

    def __init__(self) -> None:
        self.items: list[tuple[int, ReceivedMessage]] = []
        self.floor: int | None = None  # hand-offs up to this number went to other sockets
        self.seen = 0  # the highest number that came here
        self.lost = False  # some may not have come: the loop reclaims (websocket.py)
        self._ready: asyncio.Future[None] | None = None

    def put(self, number: int, message: ReceivedMessage) -> None:
        self.items.append((number, message))
        self.seen = max(self.seen, number)
        self.poke()

    def put_back(self, messages: list[ReceivedMessage]) -> None:
        """Taken and not written (the loop was stopped): for `take` again, or to give back."""
        self.items[:0] = [(0, m) for m in messages]

    def drop(self, message_ids: set[str]) -> None:
        """Written otherwise (reclaimed): their hand-offs are not written again."""
        self.items = [item for item in self.items if item[1].message_id not in message_ids]

    def poke(self, _: object = None) -> None:
        """End a `wait` (a hand-off came, or the loop was woken otherwise)."""
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    def counted(self, handed: int) -> int | None:
        """A receive's count of hand-offs: the number this loop must have seen before it
        writes what the receive returned (None: nothing to wait for)."""
        if self.floor is None:  # the loop's first receive, whose marker starts its share
            self.floor = handed
            self.seen = max(self.seen, handed)
            return None
        if handed < self.floor:  # the count started again (its hash had lapsed)
            self.floor = self.seen = handed
            return None
        return handed if handed > self.seen else None

    def take(self, upto: int | None = None) -> list[ReceivedMessage]:
        """What came, in the order it was handed out (up to number `upto`)."""
        self.items.sort(key=_number)
        if upto is None:
            taken, self.items = self.items, []
        else:
            taken = [item for item in self.items if item[0] <= upto]
            self.items = self.items[len(taken) :]
        return [message for _, message in taken]

    async def wait(self, seconds: float) -> None:
        """Until the next hand-off or poke, or `seconds`."""
        loop = asyncio.get_running_loop()
        self._ready = ready = loop.create_future()
        timer = loop.call_later(seconds, self.poke)
        try:
            await ready
        finally:
            timer.cancel()
            self._ready = None


def _number(item: tuple[int, ReceivedMessage]) -> int:
    return item[0]
