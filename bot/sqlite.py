"""Durable SQLite through aiosqlite, shared by the history store and the WeChat ledger: WAL with
synchronous=FULL (a committed row survives a crash or power cut), autocommit (each statement commits alone, so
coroutines never share a transaction), and numbered migrations applied once each."""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Callable, Sequence

import aiosqlite

log = logging.getLogger(__name__)


async def open_db(path: Path, migrations: Sequence[str], clock: Callable[[], float], label: str) -> aiosqlite.Connection:
    """Open (creating if needed) the database at `path` and bring its schema up to date."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = await aiosqlite.connect(path, isolation_level=None)
    try:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("PRAGMA foreign_keys=ON")
        await db.execute("PRAGMA busy_timeout=5000")
        await migrate(db, migrations, clock, label)
    except BaseException:
        await db.close()
        raise
    return db


async def schema_version(db: aiosqlite.Connection) -> int:
    async with db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def migrate(db: aiosqlite.Connection, migrations: Sequence[str], clock: Callable[[], float], label: str) -> None:
    """Apply each pending migration once, each in its own transaction together with its version row."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    current = await schema_version(db)
    if current > len(migrations):
        raise RuntimeError(f"{label} is at schema {current}, newer than this code ({len(migrations)})")
    for version in range(current + 1, len(migrations) + 1):
        script = (
            f"BEGIN IMMEDIATE;\n{migrations[version - 1]}\n"
            f"INSERT INTO schema_migrations (version, applied_at) VALUES ({version}, {clock()!r});\nCOMMIT;"
        )
        try:
            await db.executescript(script)
        except sqlite3.Error:
            if db.in_transaction:
                await db.execute("ROLLBACK")
            raise
        log.info("%s migrated to schema %d", label, version)
