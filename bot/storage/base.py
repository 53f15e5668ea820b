"""The interface the stores use, and the choice of backend from `[storage] url`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence
from urllib.parse import urlsplit

Row = tuple[Any, ...]


class StorageUnavailable(RuntimeError):
    """The configured database cannot be opened; the message names it without any password."""


def describe(url: str) -> str:
    """host:port/database of a URL, never its user's password."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


@dataclass(frozen=True)
class Migrations:
    """A store's numbered migrations: `sqlite[i]` / `postgresql[i]` is version i + 1 in that dialect. Append new
    ones; never edit an applied one. `component` names the store in PostgreSQL's shared schema_migrations table."""

    component: str
    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...]


class Database(Protocol):
    """One store's connection (SQLite) or pool (PostgreSQL). Every method is one committed statement; SQL uses `?`
    placeholders."""

    dialect: str  # "sqlite" or "postgresql"

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    async def schema_version(self) -> int: ...

    def json_length(self, column: str) -> str:
        """SQL for the length of the JSON array stored as text in `column`."""

    async def close(self) -> None: ...


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme in ("postgresql", "postgres")


def sqlite_path(url: str, default: Path) -> Path:
    """Where a store's SQLite file lives: `default` (in the data directory) for an empty or bare "sqlite:" URL,
    else the same file name in the folder `sqlite:///folder` names."""
    if not url or url in ("sqlite:", "sqlite://"):
        return default
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise StorageUnavailable(f"[storage] url must start with sqlite:// or postgresql://, got {parts.scheme!r}")
    folder = parts.path if not parts.netloc else f"{parts.netloc}{parts.path}"
    return Path(folder) / default.name


async def open_database(url: str, default_path: Path, migrations: Migrations, clock: Callable[[], float],
                        label: str, secure_delete: bool = False) -> Database:
    """Open the store's database and bring its schema up to date (safe when several workers start at once)."""
    if is_postgres(url):
        from .pg import PgDatabase

        return await PgDatabase.open(url, migrations, clock, label)
    from .sqlite import SqliteDatabase

    return await SqliteDatabase.open(sqlite_path(url, Path(default_path)), migrations, clock, label, secure_delete)
