"""The PostgreSQL backend (asyncpg): one small pool per store, shared by the store's coroutines; every statement
commits alone. Migrations run under a PostgreSQL advisory lock, so of several workers starting at once one applies
them and the others wait and then find them applied. The password, if any, comes from the environment (PGPASSWORD,
or ~/.pgpass), never from the config file."""
from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Callable, Sequence

import asyncpg

from .base import Migrations, Row, StorageUnavailable, describe

log = logging.getLogger(__name__)

MIGRATION_LOCK = 0x636F66666565  # pg_advisory_lock key ("coffee"): one migration runner at a time, all stores
_PLACEHOLDER = re.compile(r"\?")


def numbered(sql: str) -> str:
    """`?` placeholders → `$1, $2, …` (our statements never hold a literal question mark)."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


def _rowcount(status: str) -> int:
    """asyncpg's command tag ("UPDATE 3", "INSERT 0 1", "DELETE 0") → the rows changed."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class PgDatabase:
    dialect = "postgresql"

    def __init__(self, pool: asyncpg.Pool, component: str) -> None:
        self.pool = pool
        self.component = component

    @classmethod
    async def open(cls, url: str, migrations: Migrations, clock: Callable[[], float], label: str,
                   max_size: int = 8) -> "PgDatabase":
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=max_size, command_timeout=30, timeout=10)
        except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StorageUnavailable(f"cannot open the {label} in PostgreSQL at {describe(url)} ([storage] url): "
                                     f"{type(exc).__name__}: {exc}") from None
        try:
            await migrate(pool, migrations, clock, label)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, migrations.component)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return _rowcount(await self.pool.execute(numbered(sql), *params))

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = await self.pool.fetchrow(numbered(sql), *params)
        return None if row is None else tuple(row)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [tuple(r) for r in await self.pool.fetch(numbered(sql), *params)]

    async def schema_version(self) -> int:
        return await _version(self.pool, self.component)

    def json_length(self, column: str) -> str:
        return f"json_array_length({column}::json)"

    async def close(self) -> None:
        await self.pool.close()


async def _version(conn, component: str) -> int:
    return int(await conn.fetchval(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = $1", component))


async def migrate(pool: asyncpg.Pool, migrations: Migrations, clock: Callable[[], float], label: str) -> None:
    """Apply each pending migration once, each in its own transaction with its version row, holding the advisory
    lock so that two workers starting together never both apply one."""
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL,"
                " applied_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (component, version))")
            current = await _version(conn, migrations.component)
            scripts = migrations.postgresql
            if current > len(scripts):
                raise RuntimeError(f"{label} is at schema {current}, newer than this code ({len(scripts)})")
            for version in range(current + 1, len(scripts) + 1):
                async with conn.transaction():
                    await conn.execute(scripts[version - 1])
                    await conn.execute(
                        "INSERT INTO schema_migrations (component, version, applied_at) VALUES ($1, $2, $3)",
                        migrations.component, version, clock())
                log.info("%s migrated to schema %d (PostgreSQL)", label, version)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)
