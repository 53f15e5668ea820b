"""The SQLite backend: one aiosqlite connection per store file (bot/sqlite.py: WAL, synchronous=FULL, autocommit,
numbered migrations). For one process; several workers need PostgreSQL."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import aiosqlite

from ..sqlite import open_db, schema_version
from .base import Migrations, Row


class SqliteDatabase:
    dialect = "sqlite"

    def __init__(self, db: aiosqlite.Connection) -> None:
        self.connection = db

    @classmethod
    async def open(cls, path: Path, migrations: Migrations, clock: Callable[[], float], label: str,
                   secure_delete: bool = False) -> "SqliteDatabase":
        db = await open_db(path, migrations.sqlite, clock, label)
        if secure_delete:  # deleted rows are overwritten in the file, not left in free pages
            await db.execute("PRAGMA secure_delete = ON")
        return cls(db)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cursor = await self.connection.execute(sql, tuple(params))
        count = cursor.rowcount
        await cursor.close()
        return count

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        async with self.connection.execute(sql, tuple(params)) as cursor:
            rows = await cursor.fetchall()  # all of them: an INSERT … RETURNING commits when its cursor is done
        return tuple(rows[0]) if rows else None

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self.connection.execute(sql, tuple(params)) as cursor:
            return [tuple(r) for r in await cursor.fetchall()]

    async def schema_version(self) -> int:
        return await schema_version(self.connection)

    def json_length(self, column: str) -> str:
        return f"json_array_length({column})"

    async def close(self) -> None:
        await self.connection.close()
