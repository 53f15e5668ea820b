"""The WeChat delivery ledger: one row per user message, so WeChat's re-deliveries get one answer, across restarts.

WeChat re-sends a callback it got no reply to within 5 s, up to three deliveries in all, possibly overlapping and
possibly after this process restarted. Each message is keyed by its sender and MsgId, "msg:<openid>:<MsgId>"
(events: "event:<openid>:<CreateTime>"; a message without MsgId: "time:<openid>:<CreateTime>"), so a MsgId sent by
one user never serves another user's answer. `verified` records whether the message body itself was authenticated
(an encrypted callback with a valid msg_signature): admin commands run only from verified messages. A message
moves through  received → answering → answered (its reply parts stored) → delivered (passive replies) or pushed
(customer-service messages), or failed (a push WeChat refused). `sent` counts the parts already given to the user;
`owed` marks an answer a subscription account still owes (the user fetches it with their next message).
The ledger also remembers, per user, the citation ids of the last answer, so "原文1" works after a restart.

Several workers (PostgreSQL, `[storage] url`): whichever process gets a delivery records it, and exactly one of them
answers it: `claim` is one conditional UPDATE of the (openid, MsgId) row, so the database, not process memory, says who
answers and pushes. A claim whose claimant died (no answer after `lease_s`) can be taken over.

Own database file (WAL, synchronous=FULL, autocommit: every write is one statement), or tables in the shared
PostgreSQL database; numbered migrations per dialect.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Sequence

from .storage import Database, Migrations, open_database

log = logging.getLogger(__name__)

State = Literal["received", "answering", "answered", "delivered", "pushed", "failed"]

# Numbered migrations: MIGRATIONS[i] is version i + 1. Append new ones; never edit an applied one.
MIGRATIONS: tuple[str, ...] = (  # SQLite
    """
    CREATE TABLE messages (
        key TEXT PRIMARY KEY,            -- MsgId, or "event:FromUserName:CreateTime"
        openid TEXT NOT NULL,
        create_time REAL NOT NULL,       -- the message's CreateTime, Unix seconds
        text TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('received', 'answering', 'answered', 'delivered', 'pushed', 'failed')),
        deliveries INTEGER NOT NULL DEFAULT 0,
        parts TEXT,                      -- JSON list of the reply's message texts, once answered
        sent INTEGER NOT NULL DEFAULT 0, -- parts given to the user so far
        owed INTEGER NOT NULL DEFAULT 0, -- 1: the user fetches the rest with their next message
        error TEXT,
        received_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX messages_owed ON messages (openid, owed, received_at);
    CREATE INDEX messages_by_time ON messages (received_at);
    CREATE TABLE last_sources (
        openid TEXT PRIMARY KEY,
        ids TEXT NOT NULL,               -- JSON list of "docid#cid", footnote order
        updated_at REAL NOT NULL
    );
    """,
    # 2: keys name the sender (a MsgId alone let a second user collect the first one's answer); whether the body
    # was authenticated; errors that held a request URL (access_token=, or secret= of a failed token fetch) dropped.
    """
    PRAGMA secure_delete = ON;
    ALTER TABLE messages ADD COLUMN verified INTEGER NOT NULL DEFAULT 0;
    UPDATE messages SET key = 'msg:' || openid || ':' || key WHERE key NOT LIKE '%:%';
    UPDATE messages SET key = 'time:' || key WHERE key NOT LIKE 'event:%' AND key NOT LIKE 'msg:%';
    UPDATE messages SET error = 'request failed (details removed: they named a credential)'
        WHERE error LIKE '%access_token=%' OR error LIKE '%secret=%' OR error LIKE '%token=%';
    """,
    # 3: who is answering a message, since when (several workers: the claim).
    """
    ALTER TABLE messages ADD COLUMN claimed_by TEXT;
    ALTER TABLE messages ADD COLUMN claimed_at REAL;
    """,
)
# PostgreSQL: the same tables as SQLite's version 3, numbered from 1 on their own.
POSTGRES_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE messages (
        key TEXT PRIMARY KEY,            -- "msg:openid:MsgId", "event:openid:CreateTime" or "time:openid:CreateTime"
        openid TEXT NOT NULL,
        create_time DOUBLE PRECISION NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('received', 'answering', 'answered', 'delivered', 'pushed', 'failed')),
        deliveries INTEGER NOT NULL DEFAULT 0,
        parts TEXT,
        sent INTEGER NOT NULL DEFAULT 0,
        owed INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        received_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        verified INTEGER NOT NULL DEFAULT 0,
        claimed_by TEXT,
        claimed_at DOUBLE PRECISION
    );
    CREATE INDEX messages_owed ON messages (openid, owed, received_at);
    CREATE INDEX messages_by_time ON messages (received_at);
    CREATE TABLE last_sources (
        openid TEXT PRIMARY KEY,
        ids TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    """,
)

_COLUMNS = "key, openid, create_time, text, state, deliveries, parts, sent, owed, error, verified"


@dataclass(frozen=True)
class Entry:
    key: str
    openid: str
    create_time: float
    text: str
    state: State
    deliveries: int
    parts: tuple[str, ...] | None  # None until answered
    sent: int
    owed: bool
    error: str | None = None
    verified: bool = False  # the body was authenticated (encrypted, valid msg_signature)

    @property
    def unsent(self) -> bool:
        return self.parts is None or self.sent < len(self.parts)


def _entry(row: Sequence) -> Entry:
    key, openid, create_time, text, state, deliveries, parts, sent, owed, error, verified = row
    return Entry(key, openid, create_time, text, state, deliveries,
                 None if parts is None else tuple(json.loads(parts)), sent, bool(owed), error, bool(verified))


class Ledger:
    """One connection (SQLite) or pool (PostgreSQL), shared by the channel's coroutines; every method is one
    committed statement."""

    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock
        self._closed = False

    @classmethod
    async def open(cls, path: Path, *, clock: Callable[[], float] = time.time, url: str = "") -> Ledger:
        """The ledger at `path` (SQLite), or in the database `url` names (`[storage] url`)."""
        # SQLite: purged messages are overwritten, not left in free pages
        migrations = Migrations("wechat_ledger", MIGRATIONS, POSTGRES_MIGRATIONS)
        db = await open_database(url, Path(path), migrations, clock, "WeChat ledger", secure_delete=True)
        return cls(db, clock)

    @property
    def shared(self) -> bool:
        """Whether other processes may use this ledger at the same time (PostgreSQL)."""
        return self._db.dialect != "sqlite"

    async def schema_version(self) -> int:
        return await self._db.schema_version()

    async def record_delivery(self, key: str, openid: str, create_time: float, text: str,
                              static: str | None = None, verified: bool = False) -> Entry:
        """Count one delivery of a message (creating its row on the first) and return the row.

        `static` is a constant reply given at once (a welcome, a notice; "" for none): the row starts delivered.
        The first delivery's text and `verified` stay: a later delivery never changes what is answered.
        """
        now = self._clock()
        if static is None:
            state, parts, sent = "received", None, 0
        else:
            given = [static] if static else []
            state, parts, sent = "delivered", json.dumps(given, ensure_ascii=False), len(given)
        row = await self._db.fetchone(  # one statement: concurrent deliveries each see their own count
            "INSERT INTO messages AS m (key, openid, create_time, text, state, deliveries, parts, sent, received_at,"
            " updated_at, verified) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET deliveries = m.deliveries + 1, updated_at = excluded.updated_at"
            f" RETURNING {_COLUMNS}",
            (key, openid, create_time, text, state, parts, sent, now, now, int(verified)),
        )
        assert row is not None
        return _entry(row)

    async def unfinished(self, since: float) -> list[Entry]:
        """Messages received after `since` whose answer was not finished or not fully pushed (a stop, a crash)."""
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM messages WHERE state IN ('received', 'answering', 'answered')"
            " AND received_at >= ? ORDER BY received_at",
            (since,),
        )
        return [_entry(row) for row in rows]

    async def get(self, key: str) -> Entry | None:
        row = await self._db.fetchone(f"SELECT {_COLUMNS} FROM messages WHERE key = ?", (key,))
        return None if row is None else _entry(row)

    async def claim(self, key: str, owner: str, lease_s: float) -> bool:
        """Take the answering (and pushing) of `key`: True for exactly one caller among all processes sharing the
        ledger. A message still being answered, or answered but not fully pushed, can be taken over once its
        claim is `lease_s` old (its claimant died); lease 0 takes it over at once (one process: a restart)."""
        now = self._clock()
        return await self._update(
            "UPDATE messages SET claimed_by = ?, claimed_at = ?, updated_at = ?,"
            " state = CASE WHEN parts IS NULL THEN 'answering' ELSE state END"
            " WHERE key = ? AND (state = 'received' OR (state IN ('answering', 'answered')"
            " AND (claimed_at IS NULL OR claimed_at <= ?)))",
            (owner, now, now, key, now - lease_s)) > 0

    async def set_state(self, key: str, state: State, error: str | None = None) -> None:
        await self._update("UPDATE messages SET state = ?, error = ?, updated_at = ? WHERE key = ?",
                           (state, error, self._clock(), key))

    async def store_answer(self, key: str, parts: Sequence[str], state: State = "answered") -> Entry:
        """Keep the reply (its message texts); from now on every delivery of `key` serves these."""
        await self._update("UPDATE messages SET parts = ?, state = ?, updated_at = ? WHERE key = ? AND parts IS NULL",
                           (json.dumps(list(parts), ensure_ascii=False), state, self._clock(), key))
        entry = await self.get(key)
        assert entry is not None
        return entry

    async def take_part(self, key: str, index: int, done: State) -> bool:
        """Claim part `index` for sending (it must be the next unsent one); False when someone else took it.

        When it is the last part the message becomes `done` ("delivered" or "pushed") and is no longer owed.
        """
        n = self._db.json_length("parts")
        return await self._update(
            "UPDATE messages SET sent = sent + 1, updated_at = ?,"
            f" state = CASE WHEN sent + 1 >= {n} THEN ? ELSE state END,"
            f" owed = CASE WHEN sent + 1 >= {n} THEN 0 ELSE owed END"
            f" WHERE key = ? AND parts IS NOT NULL AND sent = ? AND sent < {n}",
            (self._clock(), done, key, index),
        ) > 0

    async def mark_owed(self, key: str) -> None:
        """The user gets the rest of this answer with their next message (subscription accounts)."""
        await self._update(
            "UPDATE messages SET owed = 1, updated_at = ? WHERE key = ? AND state NOT IN ('delivered', 'failed')",
            (self._clock(), key))

    async def owed_to(self, openid: str, since: float, exclude: str = "") -> Entry | None:
        """The oldest answer still owed to a user, received after `since`."""
        row = await self._db.fetchone(
            f"SELECT {_COLUMNS} FROM messages WHERE openid = ? AND owed = 1 AND received_at >= ? AND key != ?"
            " ORDER BY received_at LIMIT 1",
            (openid, since, exclude),
        )
        return None if row is None else _entry(row)

    async def set_last_sources(self, openid: str, ids: Sequence[str]) -> None:
        await self._db.execute(
            "INSERT INTO last_sources (openid, ids, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (openid) DO UPDATE SET ids = excluded.ids, updated_at = excluded.updated_at",
            (openid, json.dumps(list(ids)), self._clock()),
        )

    async def last_sources(self, openid: str) -> tuple[str, ...]:
        row = await self._db.fetchone("SELECT ids FROM last_sources WHERE openid = ?", (openid,))
        return () if row is None else tuple(json.loads(row[0]))

    async def purge(self, before: float, sources_before: float | None = None) -> int:
        """Forget messages received before `before` (long past WeChat's retries and the 48-hour push window) and
        users' last citations not updated since `sources_before` (default: `before`); returns the rows deleted."""
        deleted = await self._update("DELETE FROM messages WHERE received_at < ?", (before,))
        deleted += await self._update("DELETE FROM last_sources WHERE updated_at < ?",
                                      (before if sources_before is None else sources_before,))
        if deleted:
            log.info("purged %d WeChat ledger rows", deleted)
        return deleted

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._db.close()

    async def _update(self, sql: str, params: tuple) -> int:
        return await self._db.execute(sql, params)
