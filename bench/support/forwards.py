"""Forwards to the plan's recipients, packed ahead of time so the figures measure the
server: a third party (the same sender for all) authcrypts a basicmessage whose inner
envelope is 1 KiB to recipient i's registered key and wraps it in an anoncrypted forward to
the mediator; many at once are packed in worker processes. And which recipients each part
of a run uses, so that no part meets another's state."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from bench.harness.loadgen import build_request
from bench.support.bulk_load import Plan
from bench.support.live import ENVELOPE, ciphertext_tag
from mediator.client import Sender, forward_envelope
from mediator.didcomm.keys import KeyPair

KIB = 1024
BASIC = "https://didcomm.org/basicmessage/1.0/message"
SENDER_SEED = bytes(range(32))  # the third party that sends every forward
ROTATING = 8  # the recipients of the side that rotates over a few


def regions(plan: Plan, sockets: int = 0, live: int = 0) -> dict[str, range]:
    """Index ranges of the parts' recipients: `sockets` idle live sockets first, then the
    rotating side's 8, then `live` live recipients, and the distinct forwards' recipients
    drawn from the rest."""
    socket_range = range(0, sockets)
    rotating = range(socket_range.stop, socket_range.stop + ROTATING)
    live_range = range(rotating.stop, rotating.stop + live)
    return {
        "sockets": socket_range,
        "rotating": rotating,
        "live": live_range,
        "distinct": range(live_range.stop, plan.recipients),
    }


def _sender(plan: Plan) -> Sender:
    return Sender(plan.identity.verkey_b58, KeyPair.from_seed(SENDER_SEED))


def inner_content_length(plan: Plan) -> int:
    """The basicmessage content length that makes the inner envelope (what is queued)
    1 KiB: measured once by packing an empty one (authcrypt adds a fixed overhead and a
    third for base64)."""
    sender = _sender(plan)
    key = plan.recipient_key(0).verkey_b58
    empty = len(sender.pack({"@type": BASIC, "content": ""}, [key]))
    return max(1, int((KIB - empty) * 3 / 4))


def forward(plan: Plan, i: int, content: dict[str, Any]) -> tuple[bytes, str]:
    """`POST /` with a forward for recipient i's key, and the inner envelope's AEAD tag."""
    sender = _sender(plan)
    key = plan.recipient_key(i).verkey_b58
    inner = sender.pack(content, [key])
    wrapped = forward_envelope(inner, key, sender.mediator)
    return build_request("POST", "/", ENVELOPE, wrapped), ciphertext_tag(inner)


def _pack_chunk(plan: Plan, indexes: list[int], length: int) -> list[bytes]:
    with contextlib.suppress(OSError, AttributeError):  # free of the parent's CPU pin
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    content = {"@type": BASIC, "content": "x" * length}
    return [forward(plan, i, content)[0] for i in indexes]


def pack_forwards(plan: Plan, indexes: list[int], processes: int = 2) -> tuple[list[bytes], int]:
    """Forwards of a 1 KiB inner envelope to each of `indexes` (in that order), packed by
    `processes` worker processes; and the inner envelope's size."""
    length = inner_content_length(plan)
    example = plan.recipient_key(0).verkey_b58
    size = len(_sender(plan).pack({"@type": BASIC, "content": "x" * length}, [example]))
    if len(indexes) < 200 or processes <= 1:
        return _pack_chunk(plan, indexes, length), size
    step = -(-len(indexes) // (processes * 4))
    chunks = [indexes[k : k + step] for k in range(0, len(indexes), step)]
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        parts = pool.map(_pack_chunk, [plan] * len(chunks), chunks, [length] * len(chunks))
        return [raw for part in parts for raw in part], size
