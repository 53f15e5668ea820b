"""Telegram where Telegram is hard to reach: no route (retry with capped backoff, one line per attempt, state in
`status()`), and HTTP / SOCKS5 proxies through PTB's own settings, against loopback fakes."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import re

import pytest

from bot.history_store import HistoryStore
from bot.service import ChatService
from bot.telegram import TelegramChannel
from tests.fakes import FakeTelegramAPI
from tests.fakes.proxy import FakeProxy
from tests.test_telegram import QUESTION, ask, running, tg_config

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
async def store(tmp_path):
    history = await HistoryStore.open(tmp_path / "history.sqlite3")
    yield history
    await history.close()


async def until(predicate, timeout: float) -> None:
    async def loop() -> None:
        while not predicate():
            await asyncio.sleep(0.02)
    await asyncio.wait_for(loop(), timeout)


def with_telegram(cfg, **fields):
    return dataclasses.replace(cfg, telegram=dataclasses.replace(cfg.telegram, **fields))


async def test_no_route_to_telegram_is_retried_with_backoff_then_answers(sample_cfg, sample_engine, store, api, caplog):
    caplog.set_level(logging.INFO, logger="bot.telegram")
    cfg = with_telegram(tg_config(sample_cfg, api), retry_max_s=0.4)  # below the config minimum (1 s), for speed
    api.unreachable = True
    channel = TelegramChannel(cfg, api.token, ChatService(cfg, sample_engine, store))
    channel.retry_first_s = 0.05
    try:
        await asyncio.wait_for(channel.start(), 5)  # returns: serve and its other channels go on
        assert channel.status()["state"] == "retrying" and not channel.status()["connected"]
        await until(lambda: channel.status()["attempts"] >= 6, 10)  # 0.05 + 0.1 + 0.2 + 0.4 + 0.4 (capped) …
        status = channel.status()
        assert status["state"] == "retrying" and status["last_error"]
        failures = [r for r in caplog.records if "cannot reach the Bot API" in r.getMessage()]
        assert len(failures) == status["attempts"]  # one line per attempt …
        assert all(r.exc_info is None and r.levelno == logging.WARNING for r in failures)  # … and no traceback
        waits = [float(re.search(r"retrying in ([\d.]+) s", r.getMessage()).group(1)) for r in failures]
        assert waits[:4] == [0.05, 0.1, 0.2, 0.4] and set(waits[4:]) == {0.4}
        secret = api.token.partition(":")[2]
        assert not any(secret in r.getMessage() for r in caplog.records) and secret not in str(status)

        api.unreachable = False  # the route comes back
        sent = await ask(api, 42, QUESTION)
        assert "来源" in sent.plain and channel.status()["state"] == "connected"
        assert channel.status()["attempts"] == 0
        assert any("is up" in r.getMessage() and "failed attempts" in r.getMessage() for r in caplog.records)

        api.unreachable = True  # lost again while polling: retrying (once the long poll in flight ends), then back
        await until(lambda: channel.status()["state"] == "retrying", 5)
        api.unreachable = False
        sent = await ask(api, 43, QUESTION)
        assert "来源" in sent.plain and channel.status()["state"] == "connected"
    finally:
        await asyncio.wait_for(channel.stop(), 10)


@pytest.mark.parametrize("kind", ["http", "socks5"])
async def test_every_call_goes_through_the_configured_proxy(sample_cfg, sample_engine, store, api, kind):
    async with FakeProxy(kind, username="farmer" if kind == "socks5" else "", password="s3cret") as proxy:
        cfg = with_telegram(tg_config(sample_cfg, api), proxy=proxy.url)
        async with running(cfg, api, ChatService(cfg, sample_engine, store)) as channel:
            sent = await ask(api, 44, QUESTION)
            status = channel.status()
    assert "来源" in sent.plain
    assert proxy.targets and set(proxy.targets) == {("127.0.0.1", api.port)}
    if kind == "http":
        assert any(r.startswith(f"POST http://127.0.0.1:{api.port}/bot") for r in proxy.requests)
    assert status["proxy"] == f"{kind}://127.0.0.1:{proxy.port}" and "s3cret" not in str(status)
    # getUpdates has its own connection pool: it went through the proxy too
    assert len(proxy.targets) >= 2 and "getUpdates" in api.methods()


async def test_a_dead_proxy_is_retried_like_no_route(sample_cfg, sample_engine, store, api):
    async with FakeProxy("socks5") as proxy:
        url = proxy.url
    cfg = with_telegram(tg_config(sample_cfg, api), proxy=url)  # nothing listens there any more
    channel = TelegramChannel(cfg, api.token, ChatService(cfg, sample_engine, store))
    channel.retry_first_s = 0.05
    try:
        await asyncio.wait_for(channel.start(), 5)
        await until(lambda: channel.status()["attempts"] >= 2, 5)
        assert channel.status()["state"] == "retrying"
        assert not api.calls
    finally:
        await asyncio.wait_for(channel.stop(), 10)
