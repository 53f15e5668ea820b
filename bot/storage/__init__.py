"""Durable state behind one small interface, chosen by `[storage] url`: SQLite files in the data directory (the
default: one process) or one PostgreSQL database shared by several workers (asyncpg).

Stores (chat history, the WeChat ledger) write their SQL once, with `?` placeholders and portable statements, and
give their numbered migrations for each dialect; `open_database` returns a `Database` for either."""
from .base import Database, Migrations, StorageUnavailable, is_postgres, open_database

__all__ = ["Database", "Migrations", "StorageUnavailable", "is_postgres", "open_database"]
