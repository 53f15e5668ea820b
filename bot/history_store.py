"""Per-chat conversation history (and a little channel state) in SQLite, through aiosqlite.

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

import aiosqlite

from rag_core.records import Role, Turn

from .sqlite import open_db, schema_version

log = logging.getLogger(__name__)

ROLES = ("user", "assistant")
DAY_S = 86_400.0
PURGED_KEY = "retention.purged"  # state: turns deleted by the retention purge, all time

# Numbered migrations: MIGRATIONS[i] is version i + 1. Append new ones; never edit an applied one.
MIGRATIONS: tuple[str, ...] = (
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
    """History of every chat on every channel; one aiosqlite connection, safe to share between coroutines."""

    def __init__(self, db: aiosqlite.Connection, retention_days: int, clock: Callable[[], float]) -> None:
        self._db = db
        self.retention_days = retention_days
        self._clock = clock
        self._closed = False

    @classmethod
    async def open(
        cls, path: Path, retention_days: int = 180, *, clock: Callable[[], float] = time.time
    ) -> HistoryStore:
        """Open (creating if needed) the database at `path` and bring its schema up to date."""
        if retention_days < 1:
            raise ValueError(f"retention_days must be at least 1, got {retention_days}")
        db = await open_db(Path(path), MIGRATIONS, clock, "history database")
        await db.execute("PRAGMA secure_delete = ON")
        return cls(db, retention_days, clock)

    async def schema_version(self) -> int:
        """The highest migration applied."""
        return await schema_version(self._db)

    async def add_turn(
        self, channel: str, chat_id: str, role: str, content: str, cited_ids: Sequence[str] = ()
    ) -> int:
        """Store one turn (committed before returning); returns its id."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        cursor = await self._db.execute(
            "INSERT INTO turns (channel, chat_id, role, content, cited_ids, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (channel, chat_id, role, content, json.dumps(list(cited_ids)), self._clock()),
        )
        turn_id = cursor.lastrowid
        await cursor.close()
        assert turn_id is not None
        return turn_id

    async def recent_stored(self, channel: str, chat_id: str, limit: int) -> list[StoredTurn]:
        """The last `limit` turns of a chat, oldest first."""
        if limit <= 0:
            return []
        async with self._db.execute(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE channel = ? AND chat_id = ? ORDER BY id DESC LIMIT ?",
            (channel, chat_id, limit),
        ) as cursor:
            rows = await cursor.fetchall()
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
                " SET value = CAST(CAST(value AS INTEGER) + excluded.value AS TEXT), updated_at = excluded.updated_at",
                (PURGED_KEY, str(deleted), self._clock()),
            )
            log.info("purged %d turns older than %d days", deleted, self.retention_days)
        return deleted

    async def stats(self) -> dict[str, int]:
        """Counts for /status: {"turns": …, "chats": …, "purged": turns deleted by the retention purge, all time}."""
        async with self._db.execute(
            "SELECT COUNT(*), (SELECT COUNT(*) FROM (SELECT DISTINCT channel, chat_id FROM turns)),"
            " (SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM state WHERE key = ?) FROM turns",
            (PURGED_KEY,),
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return {"turns": row[0], "chats": row[1], "purged": row[2]}

    async def put_state(self, key: str, value: str) -> None:
        """Set a channel-state value (e.g. a WeChat answer waiting to be fetched)."""
        await self._db.execute(
            "INSERT INTO state (key, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (key, value, self._clock()),
        )

    async def get_state(self, key: str) -> str | None:
        async with self._db.execute("SELECT value FROM state WHERE key = ?", (key,)) as cursor:
            row = await cursor.fetchone()
        return None if row is None else row[0]

    async def delete_state(self, key: str) -> bool:
        """Remove a key; returns whether it was there."""
        return await self._delete("DELETE FROM state WHERE key = ?", (key,)) > 0

    async def close(self) -> None:
        """Close the connection; safe to call twice."""
        if not self._closed:
            self._closed = True
            await self._db.close()

    async def _delete(self, sql: str, params: tuple[object, ...]) -> int:
        cursor = await self._db.execute(sql, params)
        count = cursor.rowcount
        await cursor.close()
        return count


def _stored_turn(row: Sequence[Any]) -> StoredTurn:
    turn_id, channel, chat_id, role, content, cited, created_at = row
    return StoredTurn(turn_id, channel, chat_id, role, content, tuple(json.loads(cited)), created_at)
