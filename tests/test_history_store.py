"""Per-chat history in SQLite: order, limits, isolation, retention, persistence, migrations, concurrency."""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from bot.history_store import DAY_S, MIGRATIONS, HistoryStore, StoredTurn
from rag_core.records import Turn


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def store(tmp_path: Path):
    s = await HistoryStore.open(tmp_path / "nested" / "dir" / "history.sqlite3")
    yield s
    await s.close()


async def test_open_creates_dirs_and_sets_wal(tmp_path: Path):
    path = tmp_path / "a" / "b" / "h.db"
    s = await HistoryStore.open(path)
    await s.close()
    assert path.exists()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_recent_returns_last_turns_oldest_first(store: HistoryStore):
    for i in range(10):
        await store.add_turn("telegram", "42", "user" if i % 2 == 0 else "assistant", f"第{i}句")
    assert await store.recent("telegram", "42", 3) == [
        Turn("assistant", "第7句"), Turn("user", "第8句"), Turn("assistant", "第9句")
    ]
    assert len(await store.recent("telegram", "42", 100)) == 10
    assert await store.recent("telegram", "42", 0) == []
    assert await store.recent("telegram", "nobody", 5) == []


async def test_add_turn_returns_increasing_ids_and_rejects_bad_roles(store: HistoryStore):
    a = await store.add_turn("wechat", "openid-1", "user", "你好")
    b = await store.add_turn("wechat", "openid-1", "assistant", "您好")
    assert b > a
    with pytest.raises(ValueError):
        await store.add_turn("wechat", "openid-1", "system", "x")
    assert (await store.stats())["turns"] == 2


async def test_cited_ids_round_trip(store: HistoryStore):
    await store.add_turn("telegram", "1", "assistant", "答[1][2]", cited_ids=["e76faa05#3", "a1b2c3d4#0"])
    await store.add_turn("telegram", "1", "user", "问")
    first, second = await store.recent_stored("telegram", "1", 5)
    assert isinstance(first, StoredTurn)
    assert first.cited_ids == ("e76faa05#3", "a1b2c3d4#0") and second.cited_ids == ()
    assert (first.channel, first.chat_id, first.role, first.content) == ("telegram", "1", "assistant", "答[1][2]")


async def test_reset_only_affects_that_chat(store: HistoryStore):
    for chat in ("1", "2"):
        await store.add_turn("telegram", chat, "user", "问")
        await store.add_turn("telegram", chat, "assistant", "答")
    await store.add_turn("wechat", "1", "user", "同一个 chat_id，不同渠道")
    assert await store.reset("telegram", "1") == 2
    assert await store.recent("telegram", "1", 10) == []
    assert len(await store.recent("telegram", "2", 10)) == 2
    assert len(await store.recent("wechat", "1", 10)) == 1
    assert await store.stats() == {"turns": 3, "chats": 2, "purged": 0}
    assert await store.reset("telegram", "1") == 0


async def test_purge_expired_uses_retention_and_injected_now(tmp_path: Path):
    clock = FakeClock()
    s = await HistoryStore.open(tmp_path / "h.db", retention_days=30, clock=clock)
    start = clock.now
    await s.add_turn("telegram", "1", "user", "很久以前")
    clock.now = start + 10 * DAY_S
    await s.add_turn("telegram", "1", "user", "十天后")
    assert await s.purge_expired(now=start + 29 * DAY_S) == 0
    assert await s.purge_expired(now=start + 31 * DAY_S) == 1
    assert [t.content for t in await s.recent("telegram", "1", 5)] == ["十天后"]
    clock.now = start + 41 * DAY_S  # default `now` comes from the clock
    assert await s.purge_expired() == 1
    assert await s.stats() == {"turns": 0, "chats": 0, "purged": 2}
    await s.close()
    with pytest.raises(ValueError):
        await HistoryStore.open(tmp_path / "h.db", retention_days=0)


async def test_history_persists_across_reopen_and_migrations_run_once(tmp_path: Path):
    path = tmp_path / "h.db"
    s = await HistoryStore.open(path)
    assert await s.schema_version() == len(MIGRATIONS)
    await s.add_turn("telegram", "7", "user", "锈病怎么防治？", cited_ids=["e76faa05#3"])
    await s.put_state("wechat:pending:o1", "答案")
    await s.close()
    await s.close()  # closing twice is harmless

    s = await HistoryStore.open(path)
    assert await s.schema_version() == len(MIGRATIONS)
    assert [t.cited_ids for t in await s.recent_stored("telegram", "7", 5)] == [("e76faa05#3",)]
    assert await s.get_state("wechat:pending:o1") == "答案"
    await s.close()
    with sqlite3.connect(path) as db:
        versions = [v for (v,) in db.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))


async def test_newer_schema_is_refused(tmp_path: Path):
    path = tmp_path / "h.db"
    await (await HistoryStore.open(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_migrations VALUES (?, 0)", (len(MIGRATIONS) + 1,))
    with pytest.raises(RuntimeError, match="newer"):
        await HistoryStore.open(path)


async def test_concurrent_add_turn(store: HistoryStore):
    ids = await asyncio.gather(
        *(store.add_turn("telegram", str(i % 5), "user", f"问题{i}") for i in range(50))
    )
    assert len(set(ids)) == 50
    assert await store.stats() == {"turns": 50, "chats": 5, "purged": 0}
    assert len(await store.recent("telegram", "3", 100)) == 10


async def test_state_put_get_delete(store: HistoryStore):
    assert await store.get_state("k") is None
    await store.put_state("k", "v1")
    await store.put_state("k", "v2")
    assert await store.get_state("k") == "v2"
    assert await store.delete_state("k") is True
    assert await store.delete_state("k") is False
    assert await store.get_state("k") is None


async def test_failed_migration_rolls_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "h.db"
    await (await HistoryStore.open(path)).close()
    broken = "CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1);"
    monkeypatch.setattr("bot.history_store.MIGRATIONS", MIGRATIONS + (broken,))
    with pytest.raises(sqlite3.OperationalError):
        await HistoryStore.open(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None


# --- retention applied by the daemon (issue 11, item 5) --------------------------------------------------------------

async def test_retention_purges_old_turns_on_start_and_nightly_and_status_counts_them(sample_cfg, sample_engine,
                                                                                    tmp_path: Path):
    """A 400-day-old turn is gone once the services start; a recent one stays; /status says how many went; the
    nightly housekeeping job purges what aged past the limit since."""
    import dataclasses
    import time

    from bot.app import start_services
    from bot.scheduler import IndexScheduler

    db = tmp_path / "history.sqlite3"
    cfg = dataclasses.replace(sample_cfg, bot=dataclasses.replace(sample_cfg.bot, history_db=str(db),
                                                                  history_retention_days=180))
    now = time.time()
    old = await HistoryStore.open(db, clock=lambda: now - 400 * DAY_S)
    await old.add_turn("telegram", "42", "user", "去年的问题：咖啡锈病怎么防治？")
    await old.close()
    recent = await HistoryStore.open(db, clock=lambda: now - 2 * DAY_S)
    await recent.add_turn("telegram", "42", "user", "前天的问题：卡蒂姆一年施几次肥？")
    await recent.close()

    running = await start_services(cfg, engine=sample_engine)
    try:
        turns = await running.service.history.recent_stored("telegram", "42", 10)
        assert [t.content for t in turns] == ["前天的问题：卡蒂姆一年施几次肥？"]
        assert "已清除过期记录 1 条" in await running.service.status_text()
        store = running.service.history
        store._clock = lambda: now + 179 * DAY_S  # the recent turn is now 181 days old
        triggers = IndexScheduler(cfg, running.rebuilder, housekeeping=[store.purge_expired])
        assert await triggers.housekeep() == 1
        assert (await store.stats())["turns"] == 0 and (await store.stats())["purged"] == 2
    finally:
        await running.close()
    assert "去年的问题".encode() not in db.read_bytes()
