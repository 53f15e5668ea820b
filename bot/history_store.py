"""Per-chat conversation history (and a little channel state): SQLite through aiosqlite by default, or the
PostgreSQL database of `[storage] url` shared by several workers (bot/storage/).

Durability: WAL with synchronous=FULL, so every committed turn is fsynced to the WAL before `add_turn` returns and
survives a process crash *and* a power loss (NORMAL only survives the former). The cost is one fsync per turn,
negligible at chat rates. The connection runs in autocommit mode: every write is a single statement, hence its own
transaction, so coroutines sharing the store never see or commit each other's half-done work.

Retention: `purge_expired` deletes turns older than `[bot] history_retention_days`; the daemon calls it on start and
nightly. The count of purged turns is kept (state "retention.purged") for /status. secure_delete is on, so deleted
turns are overwritten in the file rather than left in free pages.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, cast

from rag_core.records import Role, Turn

from .storage import Database, Migrations, open_database

log = logging.getLogger(__name__)

ROLES = ("user", "assistant")
DAY_S = 86_400.0
PURGED_KEY = "retention.purged"  # state: turns deleted by the retention purge, all time

# Numbered migrations: MIGRATIONS[i] is version i + 1. Append new ones; never edit an applied one.
MIGRATIONS: tuple[str, ...] = (  # SQLite
    """
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        cited_ids TEXT NOT NULL DEFAULT '[]',  -- JSON array of "docid#cid"
        created_at REAL NOT NULL
    );
    CREATE INDEX turns_by_chat ON turns (channel, chat_id, id);
    CREATE INDEX turns_by_time ON turns (created_at);
    """,
    """
    CREATE TABLE state (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    """,
)

# PostgreSQL: one schema, numbered from 1 on its own (timestamps in DOUBLE PRECISION: REAL is 4 bytes there).
POSTGRES_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE turns (
        id BIGSERIAL PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        cited_ids TEXT NOT NULL DEFAULT '[]',
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX turns_by_chat ON turns (channel, chat_id, id);
    CREATE INDEX turns_by_time ON turns (created_at);
    CREATE TABLE state (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    """,
)

_TURN_COLUMNS = "id, channel, chat_id, role, content, cited_ids, created_at"


@dataclass(frozen=True)
class StoredTurn:
    id: int
    channel: str
    chat_id: str
    role: str
    content: str
    cited_ids: tuple[str, ...]
    created_at: float  # Unix seconds


class HistoryStore:
    """History of every chat on every channel; one connection (SQLite) or pool (PostgreSQL), safe to share between
    coroutines."""

    def __init__(self, db: Database, retention_days: int, clock: Callable[[], float]) -> None:
        self._db = db
        self.retention_days = retention_days
        self._clock = clock
        self._closed = False

    @classmethod
    async def open(
        cls, path: Path, retention_days: int = 180, *, clock: Callable[[], float] = time.time, url: str = ""
    ) -> HistoryStore:
        """Open (creating if needed) the database at `path` (or the one `url` names: `[storage] url`) and bring
        its schema up to date."""
        if retention_days < 1:
            raise ValueError(f"retention_days must be at least 1, got {retention_days}")
        migrations = Migrations("history", MIGRATIONS, POSTGRES_MIGRATIONS)
        db = await open_database(url, Path(path), migrations, clock, "history database", secure_delete=True)
        return cls(db, retention_days, clock)

    async def schema_version(self) -> int:
        """The highest migration applied."""
        return await self._db.schema_version()

    async def add_turn(
        self, channel: str, chat_id: str, role: str, content: str, cited_ids: Sequence[str] = ()
    ) -> int:
        """Store one turn (committed before returning); returns its id."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        row = await self._db.fetchone(
            "INSERT INTO turns (channel, chat_id, role, content, cited_ids, created_at) VALUES (?, ?, ?, ?, ?, ?)"
            " RETURNING id",
            (channel, chat_id, role, content, json.dumps(list(cited_ids)), self._clock()),
        )
        assert row is not None
        return int(row[0])

    async def recent_stored(self, channel: str, chat_id: str, limit: int) -> list[StoredTurn]:
        """The last `limit` turns of a chat, oldest first."""
        if limit <= 0:
            return []
        rows = await self._db.fetchall(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE channel = ? AND chat_id = ? ORDER BY id DESC LIMIT ?",
            (channel, chat_id, limit),
        )
        return [_stored_turn(row) for row in reversed(rows)]

    async def recent(self, channel: str, chat_id: str, limit: int) -> list[Turn]:
        """The last `limit` turns of a chat, oldest first, as the engine's `Turn`s."""
        return [Turn(cast(Role, t.role), t.content) for t in await self.recent_stored(channel, chat_id, limit)]

    async def reset(self, channel: str, chat_id: str) -> int:
        """Forget one chat's history; returns how many turns were deleted."""
        return await self._delete("DELETE FROM turns WHERE channel = ? AND chat_id = ?", (channel, chat_id))

    async def purge_expired(self, now: float | None = None) -> int:
        """Delete turns older than the retention period (on start and nightly); returns how many."""
        cutoff = (self._clock() if now is None else now) - self.retention_days * DAY_S
        deleted = await self._delete("DELETE FROM turns WHERE created_at < ?", (cutoff,))
        if deleted:
            await self._db.execute(
                "INSERT INTO state (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE"
                " SET value = CAST(CAST(state.value AS INTEGER) + CAST(excluded.value AS INTEGER) AS TEXT),"
                " updated_at = excluded.updated_at",
                (PURGED_KEY, str(deleted), self._clock()),
            )
            log.info("purged %d turns older than %d days", deleted, self.retention_days)
        return deleted

    async def stats(self) -> dict[str, int]:
        """Counts for /status: {"turns": …, "chats": …, "purged": turns deleted by the retention purge, all time}."""
        row = await self._db.fetchone(
            "SELECT COUNT(*), (SELECT COUNT(*) FROM (SELECT DISTINCT channel, chat_id FROM turns) AS chats),"
            " (SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM state WHERE key = ?) FROM turns",
            (PURGED_KEY,),
        )
        assert row is not None
        return {"turns": int(row[0]), "chats": int(row[1]), "purged": int(row[2])}

    async def put_state(self, key: str, value: str) -> None:
        """Set a channel-state value (e.g. a WeChat answer waiting to be fetched)."""
        await self._db.execute(
            "INSERT INTO state (key, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (key, value, self._clock()),
        )

    async def get_state(self, key: str) -> str | None:
        row = await self._db.fetchone("SELECT value FROM state WHERE key = ?", (key,))
        return None if row is None else row[0]

    async def delete_state(self, key: str) -> bool:
        """Remove a key; returns whether it was there."""
        return await self._delete("DELETE FROM state WHERE key = ?", (key,)) > 0

    async def close(self) -> None:
        """Close the connection; safe to call twice."""
        if not self._closed:
            self._closed = True
            await self._db.close()

    async def probe_write(self) -> None:
        """A write statement that changes nothing (for /healthz): refused by a read-only or closed database."""
        await self._db.execute("DELETE FROM state WHERE 1 = 0")

    async def _delete(self, sql: str, params: tuple[object, ...]) -> int:
        return await self._db.execute(sql, params)


def _stored_turn(row: Sequence[Any]) -> StoredTurn:
    turn_id, channel, chat_id, role, content, cited, created_at = row
    return StoredTurn(turn_id, channel, chat_id, role, content, tuple(json.loads(cited)), created_at)
