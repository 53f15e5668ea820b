"""GET /healthz and GET /metrics against the real aiohttp servers on 127.0.0.1, and `coffeebot serve` with the
console answering both while it chats."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time

import aiohttp
import pytest

from bot import metrics
from bot.history_store import HistoryStore
from bot.monitor import Monitor, MonitorServer, channel_status
from bot.scheduler import Rebuilder
from bot.service import ChatService, Incoming
from bot.wechat import WeChatChannel
from rag_core.config import MonitorConfig, Secrets, WeChatConfig
from rag_core.llm import LLMError
from tests.conftest import REPO, engine_for, offline_config
from tests.fakes import FakeWeChatAPI, ScriptedChatModel, WeChatPlatform
from tests.servers import free_port

pytestmark = pytest.mark.timeout(60)

QUESTION = "咖啡锈病怎么防治？"


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
            return r.status, r.headers.get("Content-Type", ""), await r.text()


class Down:
    """A channel whose status() says it is not connected (Telegram reconnecting through a proxy, say)."""

    def status(self) -> dict:
        return {"connected": False, "retrying_in_s": 8}


class Broken:
    def status(self) -> dict:
        raise RuntimeError("boom")


@pytest.fixture
async def service(sample_cfg, sample_engine, tmp_path):
    cfg = dataclasses.replace(sample_cfg, bot=dataclasses.replace(sample_cfg.bot, rate_limit_per_minute=0),
                              monitor=MonitorConfig(host="127.0.0.1", port=0))
    history = await HistoryStore.open(tmp_path / "history.sqlite3")
    yield ChatService(cfg, sample_engine, history)
    await history.close()


@pytest.fixture
async def served(service):
    monitor = Monitor(service.cfg, service)
    server = MonitorServer(monitor)
    assert await server.start()
    yield monitor, server
    await server.stop()


async def test_healthz_reports_index_history_and_channels(served, sample_cfg):
    monitor, server = served
    monitor.add_channel("console", {"connected": True, "listen": "stdin"})
    status, ctype, text = await get(f"{server.url}/healthz")
    body = json.loads(text)
    assert status == 200 and ctype.startswith("application/json")
    assert body["status"] == "ok"
    from rag_core.index.layout import Layout

    assert body["index"]["build"] == Layout(sample_cfg.data_dir).current_id()
    assert 0 <= body["index"]["age_s"] < 86_400 and body["index"]["chunks"] > 0
    assert body["history_db"] == {"writable": True}
    assert body["channels"] == {"console": {"connected": True, "listen": "stdin"}}


async def test_a_disconnected_channel_is_degraded_not_down(served):
    monitor, server = served
    monitor.add_channel("telegram", Down())
    monitor.add_channel("wechat", Broken())
    status, _, text = await get(f"{server.url}/healthz")
    body = json.loads(text)
    assert status == 200 and body["status"] == "degraded"
    assert body["channels"]["telegram"] == {"connected": False, "retrying_in_s": 8}
    assert body["channels"]["wechat"] == {"connected": False, "error": "RuntimeError"}
    assert channel_status(object()) == {"connected": True}


async def test_503_when_the_history_database_cannot_be_written(served, service):
    monitor, server = served
    await service.history.close()
    status, _, text = await get(f"{server.url}/healthz")
    body = json.loads(text)
    assert status == 503 and body["status"] == "unavailable"
    assert body["history_db"]["writable"] is False and body["history_db"]["error"]


async def test_503_when_there_is_no_index(tmp_path):
    cfg = offline_config(tmp_path / "empty-data", monitor={"port": 0})
    history = await HistoryStore.open(tmp_path / "h.sqlite3")
    try:
        monitor = Monitor(cfg, ChatService(cfg, engine_for(cfg), history))
        server = MonitorServer(monitor)
        assert await server.start()
        try:
            status, _, text = await get(f"{server.url}/healthz")
        finally:
            await server.stop()
    finally:
        await history.close()
    body = json.loads(text)
    assert status == 503 and body["index"]["ok"] is False and body["index"]["build"] is None


async def test_a_taken_port_is_a_warning_not_a_crash(service, caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cfg = dataclasses.replace(service.cfg, monitor=MonitorConfig("127.0.0.1", taken.getsockname()[1]))
        server = MonitorServer(Monitor(cfg, service))
        assert await server.start() is False
    assert server.url is None and "monitor not started" in caplog.text


async def test_metrics_count_questions_answers_and_stage_latency(served, service):
    _, server = served
    before = {m: metrics.value("coffeebot_answers_total", mode=m) for m in metrics.MODES}
    asked = metrics.value("coffeebot_questions_total", channel="console")
    totals = metrics.value("coffeebot_stage_seconds_count", stage="total")
    await service.handle(Incoming("console", "c1", "u", QUESTION))
    await service.handle(Incoming("console", "c1", "u", "咖啡期货价格明天会涨吗？"))  # not covered: refused
    status, ctype, text = await get(f"{server.url}/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert metrics.value("coffeebot_questions_total", channel="console") == asked + 2
    assert metrics.value("coffeebot_answers_total", mode="extractive") == before["extractive"] + 1
    assert metrics.value("coffeebot_answers_total", mode="refused") == before["refused"] + 1
    assert metrics.value("coffeebot_answers_total", mode="llm") == before["llm"]
    assert metrics.value("coffeebot_stage_seconds_count", stage="total") == totals + 2
    for line in ('coffeebot_questions_total{channel="console"}', 'coffeebot_answers_total{mode="refused"}',
                 'coffeebot_stage_seconds_bucket{le="0.005",stage="bm25"}', "coffeebot_index_rebuilds_total",
                 "coffeebot_wechat_duplicates_total", 'coffeebot_telegram_retries_total{reason="retry_after"}',
                 "coffeebot_llm_errors_total"):
        assert line in text, line
    names = {ln.split("{")[0].split(" ")[0] for ln in text.splitlines() if ln and not ln.startswith("#")}
    assert names and all(n.startswith("coffeebot_") for n in names)


async def test_llm_failures_are_counted_by_kind(sample_cfg, tmp_path):
    chat = ScriptedChatModel(LLMError("timeout", "read timed out"), LLMError("timeout", "read timed out"))
    engine = engine_for(sample_cfg, chat=chat)
    history = await HistoryStore.open(tmp_path / "h.sqlite3")
    try:
        service = ChatService(sample_cfg, engine, history)
        before = metrics.value("coffeebot_llm_errors_total", kind="timeout")
        extractive = metrics.value("coffeebot_answers_total", mode="extractive")
        reply = await service.handle(Incoming("telegram", "c", "u", QUESTION))
    finally:
        await history.close()
    assert reply.answer is not None and reply.answer.mode == "extractive"
    assert metrics.value("coffeebot_llm_errors_total", kind="timeout") == before + 1
    assert metrics.value("coffeebot_answers_total", mode="extractive") == extractive + 1


async def test_rebuilds_are_counted_by_outcome(sample_cfg, sample_engine):
    def failing_build(*args):
        raise OSError("disk full")

    failed = metrics.value("coffeebot_index_rebuilds_total", outcome="failed")
    rebuilder = Rebuilder(sample_cfg, sample_engine, build=failing_build)
    assert await rebuilder.request("test") is None
    assert metrics.value("coffeebot_index_rebuilds_total", outcome="failed") == failed + 1


async def test_wechat_server_carries_the_endpoints_and_counts_duplicates(sample_cfg, sample_engine, tmp_path):
    appid, secret, token = "wx0123456789abcdef", "app-secret", "callback-token"
    cfg = dataclasses.replace(sample_cfg, wechat=WeChatConfig(host="127.0.0.1", port=0, path="/wechat",
                                                              push="customer_service"))
    history = await HistoryStore.open(tmp_path / "history.sqlite3")
    async with FakeWeChatAPI(appid, secret) as api:
        cfg = dataclasses.replace(cfg, wechat=dataclasses.replace(cfg.wechat, api_base_url=api.base_url))
        service = ChatService(cfg, sample_engine, history)
        channel = WeChatChannel(cfg, Secrets(None, None, appid, secret, token, None), service,
                                ledger_path=tmp_path / "wechat.sqlite3")
        monitor = Monitor(cfg, service)
        channel.monitor = monitor  # as bot/app.py does
        monitor.add_channel("wechat", channel)
        await channel.start()
        try:
            deliveries = metrics.value("coffeebot_wechat_deliveries_total")
            duplicates = metrics.value("coffeebot_wechat_duplicates_total")
            wx = WeChatPlatform(f"http://127.0.0.1:{channel.port}/wechat", token, appid, None, "plain")
            xml = wx.text("oUser-1", QUESTION, msg_id=424242)
            assert (await wx.post(xml))[0] == 200
            assert (await wx.post(xml))[0] == 200  # WeChat re-sends the same MsgId
            await api.wait_for_pushes(1)
            status, _, text = await get(f"http://127.0.0.1:{channel.port}/healthz")
            m_status, _, m_text = await get(f"http://127.0.0.1:{channel.port}/metrics")
        finally:
            await channel.stop()
            await history.close()
    assert status == 200 and json.loads(text)["channels"] == {"wechat": {"connected": True}}
    assert m_status == 200 and "coffeebot_wechat_deliveries_total" in m_text
    assert metrics.value("coffeebot_wechat_deliveries_total") == deliveries + 2
    assert metrics.value("coffeebot_wechat_duplicates_total") == duplicates + 1


@pytest.mark.slow
def test_serve_with_only_the_console_answers_healthz_and_metrics(sample_cfg, tmp_path):
    """`coffeebot serve` (no platform configured) on piped input: /healthz and /metrics while it answers, and the
    one start-up line at the default log level."""
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text(
        f'[paths]\nkb_dir = "{sample_cfg.kb_dir}"\ndata_dir = "{tmp_path / "data"}"\n'
        f'[models]\nembedder = "hashing"\nreranker = ""\n'
        f'[retrieval]\nranker_encoder = "off"\n[monitor]\nport = {port}\n', encoding="utf-8")
    import shutil

    shutil.copytree(sample_cfg.data_dir, tmp_path / "data", ignore=shutil.ignore_patterns("history*", "eval"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("TELEGRAM_BOT_TOKEN", "WECHAT_APP_ID", "WECHAT_TOKEN", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "--config", str(config), "serve"], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 40
        health = None
        while time.monotonic() < deadline and health is None:
            try:
                status, _, text = asyncio.run(get(f"http://127.0.0.1:{port}/healthz"))
                health = (status, json.loads(text))
            except aiohttp.ClientError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.3)
        assert health is not None, "no /healthz within 40 s"
        assert health[0] == 200 and health[1]["channels"]["console"]["connected"] is True
        probe = subprocess.run([sys.executable, "-m", "bot.cli", "--config", str(config), "health"], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=30)
        assert probe.returncode == 0 and json.loads(probe.stdout)["status"] == "ok", probe.stderr
        out, err = proc.communicate(QUESTION + "\n" + "叶子背面有黄粉咋办\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.count("来源：") == 2
    startup = [ln for ln in err.splitlines() if " up: console (stdin (piped))" in ln]
    assert len(startup) == 1, err
    assert f"http://127.0.0.1:{port}/healthz" in startup[0] and "index build" in startup[0]
    assert "embedder hashing-char12w-4096" in startup[0] and "answers extractive" in startup[0]


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")  # raised inside PTB's RetryAfter
async def test_telegram_429s_are_counted_as_retries(sample_cfg, sample_engine, tmp_path):
    from tests.fakes import FakeTelegramAPI
    from tests.test_telegram import ask, running, tg_config

    await asyncio.to_thread(sample_engine.answer, QUESTION)  # load the index first: the fake waits 10 s at most
    history = await HistoryStore.open(tmp_path / "h.sqlite3")
    try:
        async with FakeTelegramAPI() as api:
            cfg = tg_config(sample_cfg, api)
            before = metrics.value("coffeebot_telegram_retries_total", reason="retry_after")
            async with running(cfg, api, ChatService(cfg, sample_engine, history)) as channel:
                api.fail_next("sendMessage", retry_after=1)
                await ask(api, 46, QUESTION)
                assert channel_status(channel)["connected"] is True
    finally:
        await history.close()
    assert len(api.calls_of("sendMessage")) == 2
    assert metrics.value("coffeebot_telegram_retries_total", reason="retry_after") == before + 1
