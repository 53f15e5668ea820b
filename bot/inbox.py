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

Several webhook workers (`[storage] url` = PostgreSQL) share one inbox: an update Telegram re-sends to another worker
is stored once and handled by the worker that stored it; on start, a worker takes over only updates left unhandled
for `[storage] claim_lease_s` (their worker died), each claimed by one conditional UPDATE so two workers starting
together never both handle it. With SQLite (one process) everything left unhandled is taken at once, as before.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .storage import Database, Migrations, open_database

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
    # 2: when a recovery last took the update (several workers: claimed once, taken over after a lease)
    """
    ALTER TABLE updates ADD COLUMN claimed_at REAL;
    """,
)
# PostgreSQL: SQLite's version 2, numbered from 1 on its own.
POSTGRES_MIGRATIONS = (
    """
    CREATE TABLE updates (
        bot_id BIGINT NOT NULL,
        update_id BIGINT NOT NULL,
        payload TEXT NOT NULL,
        received_at DOUBLE PRECISION NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 1,
        done_at DOUBLE PRECISION,
        outcome TEXT,
        claimed_at DOUBLE PRECISION,
        PRIMARY KEY (bot_id, update_id)
    );
    CREATE INDEX updates_pending ON updates (bot_id, update_id) WHERE done_at IS NULL;
    """,
)
BATCH = 100  # updates per INSERT statement (SQLite allows 32,766 parameters)


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
    def __init__(self, db: Database, bot_id: int, clock: Callable[[], float], lease_s: float = 120.0) -> None:
        self._db, self._bot, self._clock = db, bot_id, clock
        self._lease_s = lease_s if db.dialect != "sqlite" else 0.0  # one process: take over everything at once
        self._lock = asyncio.Lock()  # one batch stored at a time

    @classmethod
    async def open(cls, path: Path, bot_id: int, clock: Callable[[], float] = time.time, *, url: str = "",
                   lease_s: float = 120.0) -> "Inbox":
        """The inbox at `path` (SQLite), or in the database `url` names (`[storage] url`)."""
        db = await open_database(url, path, Migrations("telegram_inbox", MIGRATIONS, POSTGRES_MIGRATIONS), clock,
                                 "telegram inbox")
        inbox = cls(db, bot_id, clock, lease_s)
        await inbox.prune()
        return inbox

    async def close(self) -> None:
        await self._db.close()

    async def store(self, updates: Sequence[tuple[int, dict[str, Any]]]) -> set[int]:
        """Store a fetched batch durably (one statement, so one transaction, per 100 updates); the ids that were
        not stored before (by this process or, sharing PostgreSQL, another worker)."""
        fresh: set[int] = set()
        async with self._lock:
            for i in range(0, len(updates), BATCH):
                batch = updates[i : i + BATCH]
                now = self._clock()
                params = [v for u, p in batch  # ASCII JSON: a lone surrogate stays storable
                          for v in (self._bot, u, json.dumps(p), now)]
                rows = await self._db.fetchall(
                    "INSERT INTO updates (bot_id, update_id, payload, received_at) VALUES "
                    + ", ".join(["(?, ?, ?, ?)"] * len(batch))
                    + " ON CONFLICT (bot_id, update_id) DO NOTHING RETURNING update_id", params)
                fresh |= {int(r[0]) for r in rows}
        return fresh

    async def done(self, update_id: int, outcome: str = "handled") -> None:
        await self._db.execute("UPDATE updates SET done_at = ?, outcome = ? WHERE bot_id = ? AND update_id = ?",
                               (self._clock(), outcome, self._bot, update_id))

    async def recover(self, max_age_s: float) -> Recovered:
        """On start: the stored updates never done, oldest first, each counted as one more attempt; those too old
        or tried too often are marked done instead."""
        now = self._clock()
        # PostgreSQL: a live worker's update (stored or taken since the cutoff) is not ours to take
        cutoff = now - self._lease_s if self._lease_s else math.inf
        rows = await self._db.fetchall(
            "SELECT update_id, payload, received_at, attempts FROM updates WHERE bot_id = ? AND done_at IS NULL "
            "AND COALESCE(claimed_at, received_at) <= ? ORDER BY update_id", (self._bot, cutoff))
        pending, stale, abandoned = [], 0, 0
        for update_id, payload, received_at, attempts in rows:
            if now - received_at > max_age_s:
                stale += 1
                await self.done(update_id, "stale")
            elif attempts >= MAX_ATTEMPTS:
                abandoned += 1
                await self.done(update_id, "abandoned")
            elif await self._db.execute(  # the claim: of workers starting together, one takes it
                    "UPDATE updates SET attempts = attempts + 1, claimed_at = ? WHERE bot_id = ? AND update_id = ?"
                    " AND done_at IS NULL AND COALESCE(claimed_at, received_at) <= ?",
                    (now, self._bot, update_id, cutoff)):
                pending.append(Stored(update_id, json.loads(payload), received_at, attempts + 1))
        return Recovered(tuple(pending), stale, abandoned)

    async def counts(self) -> dict[str, int]:
        """Rows by outcome ('pending' for those not done): for status pages and tests."""
        rows = await self._db.fetchall("SELECT COALESCE(outcome, 'pending'), COUNT(*) FROM updates WHERE bot_id = ? "
                                       "GROUP BY 1", (self._bot,))
        return {str(k): int(n) for k, n in rows}

    async def prune(self, keep_s: float = KEEP_DONE_S) -> int:
        """Forget updates done more than `keep_s` ago (Telegram will not send them again by then)."""
        count = await self._db.execute("DELETE FROM updates WHERE done_at IS NOT NULL AND done_at < ?",
                                       (self._clock() - keep_s,))
        if count:
            log.info("telegram inbox: pruned %d handled updates", count)
        return count
