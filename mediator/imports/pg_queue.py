"""The queue a Credo mediator kept in Postgres instead of its store (didcomm-mediator-credo
with `PICKUP_TYPE=postgres`, or its 0.6 `MESSAGE_PICKUP__STORAGE__TYPE=postgres`): table
`queued_message` (id, connection_id, recipient_dids, encrypted_message, state, created_at)
of the database `--queue-url` names (docs/import-sources.md §2.4). Rows `pending` (never
handed out) and `sending` (handed out, not acknowledged) are both still the wallet's.

Only read: one SELECT for which connections have messages, then one per such connection,
in the order they arrived.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from mediator.errors import ImportRefused
from mediator.imports.model import verkey_of
from mediator.imports.source import describe

WAITING = ("pending", "sending")


class PostgresQueue:
    def __init__(self, url: str) -> None:
        self.url = url
        self._db: Any = None

    async def open(self) -> None:
        try:
            self._db = await asyncpg.connect(self.url, timeout=15)
        except (OSError, asyncpg.PostgresError, ValueError) as exc:
            raise ImportRefused(f"--queue-url {describe(self.url)}: {_first(exc)}") from exc
        exists = await self._db.fetchval("SELECT to_regclass('queued_message') IS NOT NULL")
        if not exists:
            await self.close()
            raise ImportRefused(
                f"--queue-url {describe(self.url)}: not a Credo message pickup database "
                "(no queued_message table)"
            )

    async def connections(self) -> dict[str, int]:
        """Connection id -> how many messages wait for it."""
        rows = await self._query(
            "SELECT connection_id::text AS c, count(*) AS n FROM queued_message "
            "WHERE state::text = ANY($1::text[]) AND connection_id IS NOT NULL "
            "GROUP BY connection_id",
            list(WAITING),
        )
        return {row["c"]: int(row["n"]) for row in rows}

    async def unrouted(self) -> list[str]:
        """Ids of waiting messages that name no connection (Credo always names one)."""
        rows = await self._query(
            "SELECT id::text AS id FROM queued_message "
            "WHERE state::text = ANY($1::text[]) AND connection_id IS NULL ORDER BY created_at, id",
            list(WAITING),
        )
        return [row["id"] for row in rows]

    async def messages(self, connection_id: str) -> AsyncIterator[tuple[str, bytes, str, str]]:
        """(id, envelope JSON, recipient verkey or "", arrival time) in arrival order."""
        rows = await self._query(
            "SELECT id::text AS id, encrypted_message::text AS m, recipient_dids AS r, "
            "created_at::text AS t FROM queued_message WHERE connection_id::text = $1 "
            "AND state::text = ANY($2::text[]) ORDER BY created_at, id",
            connection_id,
            list(WAITING),
        )
        for row in rows:
            recipients = row["r"] or []
            recipient = next((k for k in map(verkey_of, recipients) if k), "")
            yield row["id"], (row["m"] or "").encode(), recipient, row["t"] or ""

    async def _query(self, sql: str, *args: Any) -> list[Any]:
        try:
            return list(await self._db.fetch(sql, *args))
        except (OSError, asyncpg.PostgresError) as exc:
            raise ImportRefused(f"--queue-url {describe(self.url)}: {_first(exc)}") from exc

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None


def _first(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text
