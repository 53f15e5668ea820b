"""The stores on a real PostgreSQL (started by the test fixture, tests/servers.py): the same behaviour as on
SQLite, migrations applied once when several workers start together, and WeChat's re-deliveries answered once when
they land on different workers (the ledger's claim, not process memory, decides who answers)."""
from __future__ import annotations

import asyncio
import dataclasses
import time

import asyncpg
import pytest

from bot.history_store import DAY_S, HistoryStore
from bot.service import ChatService
from bot.storage import StorageUnavailable
from bot.storage.base import sqlite_path
from bot.storage.pg import numbered
from bot.wechat import WeChatChannel
from bot.wechat_ledger import Ledger
from rag_core.config import StorageConfig, WeChatConfig
from tests.fakes import FakeWeChatAPI, WeChatPlatform
from tests.servers import pg_cluster, postgres_url  # noqa: F401 - fixtures
from tests.test_wechat import APPID, QUESTION, SECRET, SECRETS, TOKEN, AES_KEY, USER, SlowEngine

pytestmark = pytest.mark.timeout(60)


def test_placeholders_and_sqlite_urls(tmp_path):
    assert numbered("UPDATE t SET a = ? WHERE b = ? AND c = ?") == "UPDATE t SET a = $1 WHERE b = $2 AND c = $3"
    default = tmp_path / "data" / "history.sqlite3"
    assert sqlite_path("", default) == default and sqlite_path("sqlite:", default) == default
    assert sqlite_path(f"sqlite://{tmp_path}/elsewhere", default) == tmp_path / "elsewhere" / "history.sqlite3"
    with pytest.raises(StorageUnavailable, match="sqlite:// or postgresql://"):
        sqlite_path("mysql://x/y", default)


async def test_history_on_postgres(postgres_url, tmp_path):
    now = time.time()
    store = await HistoryStore.open(tmp_path / "unused.sqlite3", 30, url=postgres_url, clock=lambda: now)
    try:
        first = await store.add_turn("wechat", "u1", "user", "咖啡锈病怎么防治？")
        second = await store.add_turn("wechat", "u1", "assistant", "喷波尔多液。[e76faa05#3]", ["e76faa05#3"])
        await store.add_turn("telegram", "42", "user", "别的聊天")
        assert second > first
        turns = await store.recent_stored("wechat", "u1", 8)
        assert [(t.role, t.content, t.cited_ids) for t in turns] == [
            ("user", "咖啡锈病怎么防治？", ()), ("assistant", "喷波尔多液。[e76faa05#3]", ("e76faa05#3",))]
        assert abs(turns[0].created_at - now) < 1e-6  # DOUBLE PRECISION, not PostgreSQL's 4-byte REAL
        assert [t.content for t in await store.recent("wechat", "u1", 1)] == ["喷波尔多液。[e76faa05#3]"]
        await store.put_state("k", "v1")
        await store.put_state("k", "v2")
        assert await store.get_state("k") == "v2" and await store.delete_state("k") and not await store.delete_state("k")
        assert await store.stats() == {"turns": 3, "chats": 2, "purged": 0}
        assert await store.purge_expired(now + 31 * DAY_S) == 3
        await store.add_turn("wechat", "u2", "user", "新问题")
        assert await store.purge_expired(now + 31 * DAY_S) == 1
        assert (await store.stats())["purged"] == 4  # the running total adds up across purges
        assert await store.reset("wechat", "u2") == 0
        await store.probe_write()
    finally:
        await store.close()
    assert not (tmp_path / "unused.sqlite3").exists()


async def test_migrations_run_once_when_workers_start_together(postgres_url, tmp_path):
    opened = await asyncio.gather(*[HistoryStore.open(tmp_path / "h", url=postgres_url) for _ in range(4)],
                                  *[Ledger.open(tmp_path / "l", url=postgres_url) for _ in range(4)])
    try:
        assert {await s.schema_version() for s in opened} == {1}
        conn = await asyncpg.connect(postgres_url)
        try:
            rows = await conn.fetch("SELECT component, version FROM schema_migrations ORDER BY 1, 2")
        finally:
            await conn.close()
        assert [tuple(r) for r in rows] == [("history", 1), ("wechat_ledger", 1)]
    finally:
        for s in opened:
            await s.close()


async def test_a_newer_schema_is_refused(postgres_url, tmp_path):
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("CREATE TABLE schema_migrations (component TEXT, version INTEGER, applied_at DOUBLE"
                           " PRECISION, PRIMARY KEY (component, version))")
        await conn.execute("INSERT INTO schema_migrations VALUES ('history', 99, 0)")
    finally:
        await conn.close()
    with pytest.raises(RuntimeError, match="newer than this code"):
        await HistoryStore.open(tmp_path / "h", url=postgres_url)


async def test_ledger_claims_each_message_once_across_workers(postgres_url, tmp_path):
    a, b = await Ledger.open(tmp_path / "a", url=postgres_url), await Ledger.open(tmp_path / "b", url=postgres_url)
    try:
        assert a.shared and b.shared
        key = f"msg:{USER}:6054768590064713728"
        rows = await asyncio.gather(*[ledger.record_delivery(key, USER, 1.0, QUESTION) for ledger in (a, b, a)])
        assert sorted(r.deliveries for r in rows) == [1, 2, 3]
        claims = await asyncio.gather(*[ledger.claim(key, f"worker-{i}", lease_s=60) for i, ledger in
                                        enumerate([a, b] * 10)])
        assert claims.count(True) == 1
        assert (await b.get(key)).state == "answering"
        await a.store_answer(key, ["第一段", "第二段"])
        assert (await b.store_answer(key, ["迟到的答案"])).parts == ("第一段", "第二段")  # the first answer stays
        taken = await asyncio.gather(*[ledger.take_part(key, 0, "pushed") for ledger in (a, b, a, b)])
        assert taken.count(True) == 1
        assert await b.take_part(key, 1, "pushed") and not await a.take_part(key, 1, "pushed")
        entry = await a.get(key)
        assert entry.state == "pushed" and entry.sent == 2 and not entry.unsent
        assert not await b.claim(key, "worker-x", lease_s=0)  # finished: nobody answers it again
        await a.set_last_sources(USER, ["e76faa05#3"])
        assert await b.last_sources(USER) == ("e76faa05#3",)
        await b.mark_owed(key)
        assert await a.purge(time.time() + 1) == 2
    finally:
        await a.close()
        await b.close()


async def test_a_dead_claimants_message_is_taken_over_after_the_lease(postgres_url, tmp_path):
    now = [1000.0]
    ledger = await Ledger.open(tmp_path / "l", url=postgres_url, clock=lambda: now[0])
    try:
        await ledger.record_delivery("msg:u:1", "u", 1000.0, QUESTION)
        assert await ledger.claim("msg:u:1", "dead-worker", lease_s=120)
        now[0] += 119
        assert not await ledger.claim("msg:u:1", "live-worker", lease_s=120)
        now[0] += 2
        assert await ledger.claim("msg:u:1", "live-worker", lease_s=120)
        assert [e.key for e in await ledger.unfinished(0)] == ["msg:u:1"]
    finally:
        await ledger.close()


# --- two WeChat workers on one database -------------------------------------------------------------------------


@pytest.fixture
def workers(tmp_path, sample_cfg, postgres_url):
    """`async with workers(engine, push=…) as (a, b):` two WeChat channels (two workers) sharing the database."""
    from contextlib import AsyncExitStack, asynccontextmanager

    @asynccontextmanager
    async def running(engine, *, push: bool, api: FakeWeChatAPI | None = None):
        cfg = dataclasses.replace(
            sample_cfg,
            wechat=WeChatConfig(host="127.0.0.1", port=0, path="/wechat", mode="compatible", hold_s=0.9,
                                api_base_url=api.base_url if api else "http://127.0.0.1:9/cgi-bin/",
                                push="customer_service" if push else "none"),
            bot=dataclasses.replace(sample_cfg.bot, rate_limit_per_minute=0),
            storage=StorageConfig(url=postgres_url),
        )
        async with AsyncExitStack() as stack:
            channels = []
            for name in ("a", "b"):
                history = await HistoryStore.open(tmp_path / f"{name}.sqlite3", url=postgres_url)
                stack.push_async_callback(history.close)
                channel = WeChatChannel(cfg, SECRETS, ChatService(cfg, engine, history),
                                        ledger_path=tmp_path / f"{name}-wechat.sqlite3")
                await channel.start()
                stack.push_async_callback(channel.stop)
                channels.append(channel)
            yield channels
        assert not list(tmp_path.glob("*.sqlite3"))  # everything went to PostgreSQL

    return running


def platform(channel) -> WeChatPlatform:
    return WeChatPlatform(f"http://127.0.0.1:{channel.port}/wechat", TOKEN, APPID, AES_KEY, "safe")


async def test_three_deliveries_to_alternating_workers_one_answer_one_push(workers, sample_engine):
    slow = SlowEngine(sample_engine, delay_s=1.0)
    async with FakeWeChatAPI(APPID, SECRET) as api:
        async with workers(slow, push=True, api=api) as (a, b):
            xml = platform(a).text(USER, QUESTION)
            replies = []
            for channel in (a, b, a):  # WeChat's three deliveries, through a load balancer
                replies.append((await platform(channel).post(xml, timeout=2.0))[1])
                await asyncio.sleep(0.3)
            await api.wait_for_pushes(1)
            await asyncio.sleep(1.5)  # time for a second push, were there one
            entry = await b.ledger.get(f"msg:{USER}:{_msg_id(xml)}")
    assert replies == ["success"] * 3
    assert len(slow.calls) == 1 and len(api.pushes) == 1 and "来源" in api.pushes[0].content
    assert entry.state == "pushed" and entry.deliveries == 3


async def test_passive_replies_across_workers_one_generation(workers, sample_engine):
    slow = SlowEngine(sample_engine, delay_s=1.2)
    async with workers(slow, push=False) as (a, b):
        xml = platform(a).text(USER, QUESTION)
        first = asyncio.create_task(platform(a).post(xml, timeout=3.0))
        await asyncio.sleep(0.5)
        second = await platform(b).post(xml, timeout=3.0)  # the re-delivery lands on the other worker
        await first
        entry = await a.ledger.get(f"msg:{USER}:{_msg_id(xml)}")
    assert len(slow.calls) == 1  # generated once, by the worker holding the claim
    assert "来源：" in second[1]  # the newest delivery (the one WeChat still waits on) carries it
    assert entry.state == "delivered" and entry.sent == 1 and entry.deliveries == 2  # the part was taken once


async def test_history_written_by_one_worker_is_read_by_the_other(workers, sample_engine):
    async with workers(sample_engine, push=False) as (a, b):
        await platform(a).post(platform(a).text(USER, QUESTION), timeout=3.0)
        turns = await b.service.history.recent("wechat", USER, 8)
    assert [t.role for t in turns] == ["user", "assistant"] and turns[0].content == QUESTION


def _msg_id(xml: str) -> str:
    return xml.split("<MsgId>")[1].split("</MsgId>")[0]


# --- the Telegram inbox shared by webhook workers ----------------------------------------------------------------


async def test_inbox_stores_an_update_once_across_workers_and_takes_over_a_dead_ones(postgres_url, tmp_path):
    from bot.inbox import Inbox

    now = [5000.0]
    a, b, c = [await Inbox.open(tmp_path / f"{n}.sqlite3", 7, lambda: now[0], url=postgres_url, lease_s=120)
               for n in "abc"]
    try:
        update = {"update_id": 1, "message": {"text": "咖啡\ud800锈病"}}  # a lone surrogate stays storable
        stored = await asyncio.gather(a.store([(1, update), (2, {"update_id": 2})]), b.store([(1, update)]))
        assert stored[0] | stored[1] == {1, 2} and not stored[0] & stored[1]  # each update stored (and handled) once
        assert await c.store([(i, {"update_id": i}) for i in range(3, 253)]) == set(range(3, 253))  # 3 statements
        await a.done(2)
        assert (await b.recover(3600)).pending == ()  # worker a is alive: its updates are not taken
        now[0] += 121  # a died; its unhandled updates are taken over, each by one worker
        found = await asyncio.gather(b.recover(3600), c.recover(3600))
        taken = [s.update_id for f in found for s in f.pending]
        assert sorted(taken) == [1] + list(range(3, 253))
        assert await a.counts() == {"pending": 251, "handled": 1}
    finally:
        for inbox in (a, b, c):
            await inbox.close()
    assert not list(tmp_path.glob("*.sqlite3"))


def test_an_unreachable_database_is_one_clear_line_without_the_password(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import KB, REPO
    from tests.servers import free_port

    port = free_port()  # nothing listens there
    config = tmp_path / "c.toml"
    data = tmp_path / "data"
    config.write_text(f'[paths]\nkb_dir = "{KB}"\ndata_dir = "{data}"\n[models]\nembedder = "hashing"\n'
        '[retrieval]\nranker_encoder = "off"\n'
                      f'[storage]\nurl = "postgresql://bot:hunter2-secret@127.0.0.1:{port}/coffee"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WECHAT_", "TELEGRAM_"))}
    env |= {"WECHAT_APP_ID": APPID, "WECHAT_TOKEN": TOKEN}  # a worker (it builds no index) with a channel
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "--config", str(config), "serve", "--role", "worker"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"cannot open the history database in PostgreSQL at 127.0.0.1:{port}/coffee ([storage] url)" in proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
