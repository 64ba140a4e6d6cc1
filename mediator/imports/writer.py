"""Puts what an import read into the mediator's Redis, in the shapes our nodes serve.

An imported wallet ends up as a wallet that connected and got mediation through us would,
with two more fields on its record: our key on it, sealed (`ik`), and its keylist's key
format (`kf`). Each connection is written in three steps, in the order that leaves
something harmless after a crash at any point: its recipient keys' routes (the first holder
of a key keeps it), our key's entry in the our-keys map, then its record and queue in one
script (connection_import.lua). Writing the same connection again changes nothing, so a run
killed halfway and run again ends where one run would have.

Queued messages go into the wallets' queues in their order, each with its envelope's
digest: a copy already queued is not stored again, and the record counts how many of the
wallet's messages are in (`iq`), so a second run skips them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mediator.engine import Engine, QueueConfig, keys
from mediator.engine.model import QueueRef, SendMessage
from mediator.engine.replies import (
    ConnectionImportCode,
    RouteAddCode,
    connection_imported,
    route_added,
)
from mediator.engine.scripts import Scripts
from mediator.errors import ImportRefused, LimitExceeded
from mediator.imports.dids import paths_of
from mediator.imports.model import GRANTED, Connection, QueuedMessage, Report, Source
from mediator.mediation import imported as held
from mediator.mediation import record as rec
from mediator.mediation.handshakes import services_json
from mediator.mediation.keymaps import raw_key
from mediator.storage.clients import RedisClient

SEND_CHUNK = 100  # queued messages of one wallet per script call


@dataclass
class Target:
    """Where an import writes: the mediator's Redis, its engine and identity."""

    redis: RedisClient
    engine: Engine
    sealer: held.Sealer
    queue_defaults: QueueConfig  # what a granted wallet's new queue gets (--queue-*)
    now_ms: int


class Writer:
    def __init__(self, target: Target, report: Report, *, dry_run: bool) -> None:
        self.target = target
        self.redis = target.redis
        self.scripts = Scripts(target.redis)
        self.report = report
        self.dry_run = dry_run
        namespace = keys.DIDCOMM_NAMESPACE
        stored = target.queue_defaults.stored_fields(
            namespace, target.engine.defaults.get(namespace)
        )
        self._config = [item for pair in stored.items() for item in pair]

    # ---------------------------------------------------------------- the mediator

    async def check(self, source: Source) -> None:
        """Refuse a target that holds another mediator: an import of another store, or
        wallets made here (two mediators' identities are never merged)."""
        stored = await self.redis.hget(keys.imported(), held.SOURCE)
        if stored is not None:
            earlier = json.loads(stored)
            if not source.same_mediator(earlier):
                raise ImportRefused(
                    "this Redis already holds another mediator's state (imported from a "
                    f"{earlier.get('kind', 'different')} mediator with routing key "
                    f"{(earlier.get('routing_keys') or ['none'])[0]}); two mediators are "
                    "never merged: import into an empty Redis"
                )
            return
        wallets = await self._wallets_here()
        if wallets:
            raise ImportRefused(
                f"this Redis already holds another mediator's state ({wallets} wallets with "
                "mediation made by our nodes); two mediators are never merged: import into "
                "an empty Redis, before the nodes serve anyone"
            )

    async def _wallets_here(self) -> int:
        """Granted wallets (queues) in the DIDComm namespace, over every shard."""
        pipe = self.redis.pipeline(transaction=False)
        for shard in range(keys.SHARDS):
            pipe.hget(keys.shard_totals(shard, keys.DIDCOMM_NAMESPACE), "q")
        return sum(int(v) for v in await pipe.execute() if v is not None)

    async def write_mediator(self, source: Source) -> None:
        """The routing and invitation keys (sealed), invitations, endpoints and paths, and
        which store they came from, that one first."""
        fields: dict[Any, Any] = {held.SOURCE: json.dumps(source.fingerprint)}
        for key in source.routing_keys:
            fields[held.ROUTING + key.verkey_b58] = self._seal(key.sigkey[:32], key.verkey)
        for invitation in source.invitations:
            verkey = invitation.keys.verkey_b58
            fields[held.INVITATION_KEY + verkey] = self._seal(
                invitation.keys.sigkey[:32], invitation.keys.verkey
            )
            fields[held.INVITATION + verkey] = json.dumps(
                {
                    "id": invitation.id,
                    "label": invitation.label,
                    "message": invitation.message,
                    "created": invitation.created,
                }
            )
        sealed = [n for n in fields if n.startswith((held.ROUTING, held.INVITATION_KEY))]
        there = await self.redis.hmget(keys.imported(), sealed) if sealed else []
        for name, value in zip(sealed, there, strict=True):
            what = "routing keys" if name.startswith(held.ROUTING) else "invitations"
            (self.report.imported if value is None else self.report.existing)[what] += 1
        if self.dry_run:
            return
        await self.redis.hset(keys.imported(), held.SOURCE, fields.pop(held.SOURCE))
        await self.redis.hset(keys.imported(), mapping=fields)

    async def write_endpoints(self, source: Source) -> None:
        """The endpoints the old mediator advertised and their paths, written last: its
        wallets' connections name some of them (ACA-Py's invitation has only the first)."""
        if self.dry_run:
            return
        await self.redis.hset(
            keys.imported(),
            mapping={
                held.ENDPOINTS: json.dumps(source.endpoints),
                held.PATHS: json.dumps(paths_of(source.endpoints)),
            },
        )

    def _seal(self, seed: bytes, name: bytes) -> bytes:
        return self.target.sealer.seal(seed, name)

    # ------------------------------------------------------------- the connections

    async def write_connections(self, batch: Sequence[Connection]) -> None:
        """A batch of connections, each in its three steps (see the module's text)."""
        kept, added = await self._routes(batch)
        if self.dry_run:
            codes = await self._would_be(batch)
            for connection, routed, code in zip(batch, kept, codes, strict=True):
                self._count(connection, code, routed)
            return
        pipe = self.redis.pipeline(transaction=False)  # the buckets span cluster slots
        for connection in batch:
            ours = connection.ours.verkey
            pipe.hset(keys.ours_bucket(ours), ours, raw_key(connection.their_verkey))
        await pipe.execute()
        calls = [self._record_call(c, routed) for c, routed in zip(batch, kept, strict=True)]
        codes = [connection_imported(c) for c in await self.scripts.pipeline(calls)]
        taken = [i for i, code in enumerate(codes) if code is ConnectionImportCode.TAKEN]
        if taken:
            await self._undo(batch, added, taken)
        for connection, routed, code in zip(batch, kept, codes, strict=True):
            self._count(connection, code, routed)

    async def _would_be(self, batch: Sequence[Connection]) -> list[ConnectionImportCode]:
        """A dry run's answer of connection_import.lua, from the records as they are."""
        pipe = self.redis.pipeline(transaction=False)
        for c in batch:
            pipe.hmget(
                keys.connection_keys(c.their_verkey).record, [rec.IMPORTED_KEY, rec.HANDSHAKE]
            )
        out = []
        for c, (sealed, handshake) in zip(batch, await pipe.execute(), strict=True):
            mine = self._seal(c.ours.sigkey[:32], raw_key(c.their_verkey))
            if sealed is not None and sealed == mine:
                out.append(ConnectionImportCode.ALREADY)
            elif sealed is not None or handshake is not None:
                out.append(ConnectionImportCode.TAKEN)
            else:
                out.append(ConnectionImportCode.IMPORTED)
        return out

    async def _undo(
        self, batch: Sequence[Connection], added: list[list[str]], taken: list[int]
    ) -> None:
        """A connection refused by its record's script leaves nothing: the routes this batch
        added for it and its entry in the our-keys map go again."""
        calls = [
            (
                "route",
                [keys.routes_bucket(raw_key(k))],
                ["release", raw_key(k), batch[i].their_verkey],
            )
            for i in taken
            for k in added[i]
        ]
        if calls:
            await self.scripts.pipeline(calls)
        pipe = self.redis.pipeline(transaction=False)
        for i in taken:
            ours = batch[i].ours.verkey
            pipe.hdel(keys.ours_bucket(ours), ours)
        await pipe.execute()

    async def _routes(self, batch: Sequence[Connection]) -> tuple[list[list[str]], list[list[str]]]:
        """Each connection's recipient keys that route to it (a key another connection
        holds is refused and left out of its keylist), and those of them this call added."""
        kept: list[list[str]] = [[] for _ in batch]
        added: list[list[str]] = [[] for _ in batch]
        wanted = [(i, c.their_verkey, k) for i, c in enumerate(batch) for k in c.recipient_keys]
        if not wanted:
            return kept, added
        if self.dry_run:
            pipe = self.redis.pipeline(transaction=False)
            for _, _, key in wanted:
                raw = raw_key(key)
                pipe.hget(keys.routes_bucket(raw), raw)
            answers = [
                RouteAddCode.ADDED if h is None or _text(h) == owner else RouteAddCode.TAKEN
                for (_, owner, _), h in zip(wanted, await pipe.execute(), strict=True)
            ]
        else:
            calls = [
                ("route", [keys.routes_bucket(raw_key(k))], ["add", raw_key(k), owner])
                for _, owner, k in wanted
            ]
            answers = [route_added(a) for a in await self.scripts.pipeline(calls)]
        for (i, _, key), answer in zip(wanted, answers, strict=True):
            if answer is RouteAddCode.TAKEN:
                self.report.refuse("a recipient key another wallet holds", key)
                continue
            kept[i].append(key)
            if answer is RouteAddCode.ADDED:
                added[i].append(key)
        return kept, added

    def _record_call(self, c: Connection, routed: list[str]) -> tuple[str, list[str], list[Any]]:
        qk = keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{c.their_verkey}")
        granted = c.mediation == GRANTED
        fields: list[Any] = [
            rec.HANDSHAKE, rec.CODES[rec.COMPLETED],
            rec.HANDSHAKE_MS, c.created_ms or self.target.now_ms,
            rec.PROTOCOL, c.protocol,
        ]  # fmt: skip
        if granted:
            fields += [rec.MEDIATION, rec.CODES[rec.GRANTED]]
        elif c.mediation == rec.DENIED:
            fields += [rec.MEDIATION, rec.CODES[rec.DENIED], rec.DENIED_MS, c.mediation_ms]
        if c.keylist_base58:
            fields += [rec.KEY_FORMAT, rec.BASE58]
        if c.services:
            fields += [rec.SERVICES, services_json(c.services, c.their_verkey)]
        for key in routed:
            fields += [rec.KEY + raw_key(key), ""]
        sealed = self._seal(c.ours.sigkey[:32], raw_key(c.their_verkey))
        args: list[Any] = [
            f"{keys.DIDCOMM_NAMESPACE}:{c.their_verkey}",
            rec.IMPORTED_KEY,
            sealed,
            rec.HANDSHAKE,
            "1" if granted else "",
            c.mediation_ms or self.target.now_ms,
            len(self._config) // 2,
            *self._config,
            *fields,
        ]
        return "connection_import", qk.all, args

    def _count(self, c: Connection, code: ConnectionImportCode, routed: list[str]) -> None:
        if code is ConnectionImportCode.TAKEN:
            self.report.refuse("a wallet whose key has a connection here already", c.source_id)
            return
        fresh = code is ConnectionImportCode.IMPORTED
        counts = self.report.imported if fresh else self.report.existing
        counts["connections"] += 1
        counts["keys"] += 1
        if c.mediation == GRANTED:
            counts["grants"] += 1
        elif c.mediation is not None:
            counts[f"mediation {c.mediation}"] += 1
        counts["recipient keys"] += len(routed)

    # -------------------------------------------------------------- queued messages

    async def write_messages(
        self, connection: str, messages: Sequence[QueuedMessage], position: int = 0
    ) -> None:
        """Some of one wallet's queued messages, in order: those from `position` in the
        run's sequence of its messages (a wallet's may come in several groups: from the
        store, then from a Postgres queue). Those a run before put in are skipped: the
        record counts how many of the sequence are in."""
        record = keys.connection_keys(connection).record
        done = int(await self.redis.hget(record, rec.IMPORTED_MESSAGES) or 0)
        skip = min(max(done - position, 0), len(messages))
        self.report.existing["queued messages"] += skip
        rest = list(messages[skip:])
        if self.dry_run:
            self.report.imported["queued messages"] += len(rest)
            return
        position += skip
        ref = QueueRef(keys.DIDCOMM_NAMESPACE, connection)
        for start in range(0, len(rest), SEND_CHUNK):
            chunk = rest[start : start + SEND_CHUNK]
            sends = [
                SendMessage(
                    body=m.payload,
                    content_type="",
                    trace_id=m.recipient_key,
                    digest=hashlib.sha256(m.payload).digest(),
                )
                for m in chunk
            ]
            try:
                result = await self.target.engine.send(
                    ref, sends, create_with=self.target.queue_defaults
                )
            except LimitExceeded as exc:
                reason = f"a queued message over its wallet's queue limits ({exc})"
                for m in rest[start:]:
                    self.report.refuse(reason, m.source_id)
                return
            position += len(chunk)
            await self.redis.hset(record, rec.IMPORTED_MESSAGES, position)
            copies = sum(result.duplicates)
            self.report.imported["queued messages"] += len(chunk) - copies
            self.report.existing["queued messages"] += copies


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
