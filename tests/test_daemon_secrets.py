"""`coffeebot -vv serve` as a real process with every channel on loopback fakes (the Bot API, WeChat's API and
callbacks, an OpenAI-compatible LLM), a WeChat push that fails once with the API unreachable (requests' error names
the token URL, `secret=` included), forged and stale callbacks: then no secret may be found in the log, the
`[log] file` or any file under the data directory (the SQLite databases with their WAL files).
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.daemons import wait_until, write_daemon_config
from tests.fakes import FakeOpenAIServer, FakeTelegramAPI, FakeWeChatAPI, WeChatPlatform
from tests.servers import free_port

TG_TOKEN = "7012345678:AAH5xSecretTelegramToken-0123456789ab"
APPID = "wx5ec7e7a5ab0b0001"
APP_SECRET = "wechat-appsecret-7d1f29c0b6"
CB_TOKEN = "callbacktoken4e2a9"
AES_KEY = "Qk9RbWtZc2VjcmV0QUVTa2V5Zm9yVGVzdHMxMjM0NTY"  # 43 characters
LLM_KEY = "sk-deepseek-test-key-8c41f0"
USER = "oFarmer-wx-0001"


def ledger(data_dir: Path) -> list[tuple]:
    with sqlite3.connect(data_dir / "wechat.sqlite3") as db:
        return db.execute("SELECT key, state, error FROM messages ORDER BY received_at").fetchall()


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("verbosity", ["-vv", "-vvv"])  # -vvv: third-party DEBUG too (httpx's URLs, urllib3's)
async def test_no_secret_in_the_vv_log_the_log_file_or_any_database(sample_cfg, tmp_path, verbosity):
    data_dir = tmp_path / "data"
    shutil.copytree(sample_cfg.data_dir, data_dir, ignore=shutil.ignore_patterns("*.sqlite3*", "*.log*"))
    wx_port = free_port()
    stderr_log = tmp_path / "stderr.log"
    with FakeOpenAIServer(default="用铜制剂保护叶片。") as llm:
        async with FakeTelegramAPI(token=TG_TOKEN) as tg, FakeWeChatAPI(APPID, APP_SECRET) as api:
            config = write_daemon_config(
                tmp_path / "config.toml", data_dir,
                llm={"base_url": llm.base_url, "max_retries": 0, "stream": False},
                telegram={"base_url": tg.base_url, "base_file_url": tg.base_file_url},
                wechat={"host": "127.0.0.1", "port": wx_port, "api_base_url": api.base_url},
                index={"watch_interval_s": 3600},
                log={"file": "data/coffeebot.log", "file_level": "DEBUG"},
            )
            env = dict(os.environ, TELEGRAM_BOT_TOKEN=TG_TOKEN, DEEPSEEK_API_KEY=LLM_KEY, WECHAT_APP_ID=APPID,
                       WECHAT_APP_SECRET=APP_SECRET, WECHAT_TOKEN=CB_TOKEN, WECHAT_ENCODING_AES_KEY=AES_KEY,
                       PYTHONUNBUFFERED="1")
            env.pop("OPENAI_API_KEY", None)
            daemon = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", verbosity, "--config", str(config), "serve"], cwd=REPO, env=env,
                stdout=stderr_log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                await wait_until(lambda: tg.calls_of("getUpdates"), 90, "the daemon to poll Telegram")
                wx = WeChatPlatform(f"http://127.0.0.1:{wx_port}/wechat", CB_TOKEN, APPID, AES_KEY, "safe")
                forger = WeChatPlatform(wx.url, CB_TOKEN, APPID, None, "plain")
                await wait_until(lambda: b"WeChat callback on" in stderr_log.read_bytes(), 30, "the WeChat server")

                tg.push_text(42, "咖啡锈病怎么防治？")
                await tg.wait_sent(1, timeout=30, chat_id=42)

                await api.go_down()  # the first push fails at connect: the error text holds the token-fetch URL
                assert await wx.post(wx.text(USER, "咖啡锈病怎么防治？")) == (200, "success")
                await wait_until(lambda: any(row[1] == "failed" for row in ledger(data_dir)), 30, "the failed push")
                await api.come_up()
                assert await wx.post(wx.text(USER, "卡蒂姆一年施几次肥？")) == (200, "success")
                await api.wait_for_pushes(1, timeout=30)

                forged = [await forger.post(forger.text(USER, text)) for text in ("/status", "/reindex", "你好")]
                now = int(time.time())
                stale = [await wx.post(wx.text(USER, "旧消息", create_time=now - 86_400 * d), timestamp=now - 86_400 * d)
                         for d in (1, 30)]
                daemon.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(daemon.wait, 30) == 0
            finally:
                if daemon.poll() is None:
                    daemon.kill()
            issued_tokens = [p.access_token for p in api.pushes]
    assert [status for status, _ in forged] == [403] * 3 and [status for status, _ in stale] == [403] * 2
    rows = ledger(data_dir)
    assert [row[1] for row in rows] == ["failed", "pushed"] and rows[0][2].startswith("ConnectionError")
    log_text = stderr_log.read_text(encoding="utf-8", errors="replace")
    file_text = (data_dir / "coffeebot.log").read_text(encoding="utf-8")
    # the run really logged, the failed push included, masked; at -vvv the libraries' URLs too
    assert " INFO bot." in log_text and "secret=***" in log_text and "secret=***" in file_text
    if verbosity == "-vvv":
        assert "/bot***/getUpdates" in log_text and "access_token=***" in log_text
    else:
        assert "getUpdates" not in log_text  # httpx at WARNING
    assert "refused (plaintext callback in safe mode" in log_text and "refused (stale timestamp" in log_text
    secrets = [TG_TOKEN, TG_TOKEN.split(":")[1], APP_SECRET, CB_TOKEN, AES_KEY, LLM_KEY, *issued_tokens]
    files = {"stderr": stderr_log, **{str(p.relative_to(data_dir)): p for p in data_dir.rglob("*")
                                      if p.is_file() and (".sqlite3" in p.name or p.name.startswith("coffeebot.log"))}}
    assert {"history.sqlite3", "wechat.sqlite3", "coffeebot.log"} <= set(files)
    found = {(name, s): path.read_bytes().count(s.encode()) for name, path in files.items() for s in secrets}
    assert {k: n for k, n in found.items() if n} == {}
    print(f"\nFIGURES {verbosity}: forged refused {len(forged)}/{len(forged)}, stale refused {len(stale)}/{len(stale)}, "
          f"secrets found {sum(found.values())} in {len(files)} files ({', '.join(sorted(files))}), "
          f"log {len(log_text.splitlines())} lines")
