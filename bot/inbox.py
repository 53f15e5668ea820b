"""The Telegram inbox: an update is stored before Telegram is allowed to forget it, and marked done once handled.

Telegram drops an update for good once `getUpdates` is called with a higher offset. The channel therefore stores
each fetched batch here (one transaction, WAL with synchronous=FULL) and only then asks for the next offset; a
handled update is marked done. On start, stored updates that were never done are handled again, unless they are
older than `[telegram] inbox_max_age_s` or have already been tried `MAX_ATTEMPTS` times (a message that kills the
process must not kill it forever). Delivery is therefore at least once: a crash between sending an answer and
marking it done answers that question again after the restart.

The bot's id and the update id are the key: a batch fetched twice (the offset was not yet confirmed when the process died) is stored
once, and only its new updates are handed out. No offset is kept across restarts: after a week without updates
Telegram may pick new ids at random, below an old offset, so each run starts at 0 and gets every unconfirmed update.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import aiosqlite

from .sqlite import open_db

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5  # tries (restarts included) before a stored update is given up
KEEP_DONE_S = 2 * 86400  # Telegram keeps an unconfirmed update 24 h; a done row is kept past that, to dedupe

MIGRATIONS = (
    """
    CREATE TABLE updates (
        bot_id INTEGER NOT NULL,        -- the number before the colon of the token: another bot, other ids
        update_id INTEGER NOT NULL,
        payload TEXT NOT NULL,          -- the update as JSON, to rebuild it after a restart
        received_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 1,
        done_at REAL,                   -- NULL until handled (answered, or failed and logged)
        outcome TEXT,                   -- 'handled', 'stale' (too old on restart) or 'abandoned' (too many tries)
        PRIMARY KEY (bot_id, update_id)
    );
    CREATE INDEX updates_pending ON updates (bot_id, update_id) WHERE done_at IS NULL;
    """,
)


@dataclass(frozen=True)
class Stored:
    update_id: int
    payload: dict[str, Any]
    received_at: float
    attempts: int


@dataclass(frozen=True)
class Recovered:
    """What `recover` found on start: updates to handle again, and how many were given up on (and why)."""

    pending: tuple[Stored, ...]
    stale: int
    abandoned: int


class Inbox:
    def __init__(self, db: aiosqlite.Connection, bot_id: int, clock: Callable[[], float]) -> None:
        self._db, self._bot, self._clock = db, bot_id, clock
        self._lock = asyncio.Lock()  # statements of other coroutines must not land inside a batch's transaction

    @classmethod
    async def open(cls, path: Path, bot_id: int, clock: Callable[[], float] = time.time) -> "Inbox":
        db = await open_db(path, MIGRATIONS, clock, "telegram inbox")
        inbox = cls(db, bot_id, clock)
        await inbox.prune()
        return inbox

    async def close(self) -> None:
        await self._db.close()

    async def store(self, updates: Sequence[tuple[int, dict[str, Any]]]) -> set[int]:
        """Store a fetched batch durably in one transaction; the ids that were not stored before."""
        if not updates:
            return set()
        ids = [u for u, _ in updates]
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                query = f"SELECT update_id FROM updates WHERE bot_id = ? AND update_id IN ({','.join('?' * len(ids))})"
                async with self._db.execute(query, [self._bot, *ids]) as cur:
                    known = {row[0] for row in await cur.fetchall()}
                fresh = [(self._bot, u, json.dumps(p), self._clock())  # ASCII: a lone surrogate stays storable
                         for u, p in updates if u not in known]
                await self._db.executemany(
                    "INSERT INTO updates (bot_id, update_id, payload, received_at) VALUES (?, ?, ?, ?)", fresh)
                await self._db.execute("COMMIT")
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
        return {u for _, u, _, _ in fresh}

    async def done(self, update_id: int, outcome: str = "handled") -> None:
        async with self._lock:
            await self._db.execute("UPDATE updates SET done_at = ?, outcome = ? WHERE bot_id = ? AND update_id = ?",
                                   (self._clock(), outcome, self._bot, update_id))

    async def recover(self, max_age_s: float) -> Recovered:
        """On start: the stored updates never done, oldest first, each counted as one more attempt; those too old
        or tried too often are marked done instead."""
        now = self._clock()
        async with self._db.execute(
            "SELECT update_id, payload, received_at, attempts FROM updates WHERE bot_id = ? AND done_at IS NULL "
            "ORDER BY update_id", (self._bot,)
        ) as cur:
            rows = await cur.fetchall()
        pending, stale, abandoned = [], 0, 0
        for update_id, payload, received_at, attempts in rows:
            if now - received_at > max_age_s:
                stale += 1
                await self.done(update_id, "stale")
            elif attempts >= MAX_ATTEMPTS:
                abandoned += 1
                await self.done(update_id, "abandoned")
            else:
                await self._db.execute("UPDATE updates SET attempts = attempts + 1 WHERE bot_id = ? AND update_id = ?",
                                       (self._bot, update_id))
                pending.append(Stored(update_id, json.loads(payload), received_at, attempts + 1))
        return Recovered(tuple(pending), stale, abandoned)

    async def counts(self) -> dict[str, int]:
        """Rows by outcome ('pending' for those not done): for status pages and tests."""
        async with self._db.execute("SELECT COALESCE(outcome, 'pending'), COUNT(*) FROM updates WHERE bot_id = ? "
                                    "GROUP BY 1", (self._bot,)) as cur:
            return {str(k): int(n) for k, n in await cur.fetchall()}

    async def prune(self, keep_s: float = KEEP_DONE_S) -> int:
        """Forget updates done more than `keep_s` ago (Telegram will not send them again by then)."""
        cur = await self._db.execute("DELETE FROM updates WHERE done_at IS NOT NULL AND done_at < ?",
                                     (self._clock() - keep_s,))
        if cur.rowcount:
            log.info("telegram inbox: pruned %d handled updates", cur.rowcount)
        return cur.rowcount
