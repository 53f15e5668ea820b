"""`coffeebot serve` as a real process: killed with SIGKILL mid-answer, restarted, stopped with SIGTERM.

The daemon talks to a loopback fake of the Bot API and a slow loopback LLM; its history must survive intact, and the
question it died on is answered after the restart (the Telegram inbox kept it).
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.daemons import wait_until, write_daemon_config
from tests.fakes import FakeOpenAIServer, FakeTelegramAPI, answer


def write_config(path: Path, data_dir: Path, tg: FakeTelegramAPI, llm: FakeOpenAIServer, **sections) -> Path:
    """A Telegram daemon answering with the LLM fake (sections override or add tables)."""
    return write_daemon_config(
        path, data_dir,
        llm={"base_url": llm.base_url, "timeout_s": 60.0, "max_retries": 0, "stream": False},
        telegram={"base_url": tg.base_url, "base_file_url": tg.base_file_url},
        index={"watch_interval_s": 3600},
        **sections,
    )


def start_daemon(config: Path, token: str, log: Path, *flags: str) -> subprocess.Popen:
    """`coffeebot [flags] serve` with the Telegram token and an LLM key, its output appended to `log`."""
    env = dict(os.environ, TELEGRAM_BOT_TOKEN=token, DEEPSEEK_API_KEY="test-key", PYTHONUNBUFFERED="1")
    env.pop("WECHAT_APP_ID", None)
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *flags, "--config", str(config), "serve"],
        cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )


def turns(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute("SELECT role, content FROM turns ORDER BY id").fetchall()


@pytest.mark.slow
async def test_sigkill_mid_answer_loses_no_history_and_sigterm_stops_cleanly(sample_cfg, tmp_path):
    data_dir = tmp_path / "data"
    # the built sample index, so the daemon starts at once; not the chat history other tests may have left there
    shutil.copytree(sample_cfg.data_dir, data_dir, ignore=shutil.ignore_patterns("history.sqlite3*", "wechat.sqlite3*"))
    db = data_dir / "history.sqlite3"
    log = tmp_path / "daemon.log"
    with FakeOpenAIServer(default="用铜制剂保护。") as llm:
        async with FakeTelegramAPI() as tg:
            config = write_config(tmp_path / "config.toml", data_dir, tg, llm)
            llm.push(answer("这个回答永远不会送达。", delay_s=30))  # the generation the daemon dies in
            daemon = start_daemon(config, tg.token, log)
            try:
                await wait_until(lambda: tg.calls_of("getUpdates"), 60, "the daemon to poll")
                tg.push_text(42, "咖啡锈病怎么防治？")
                await wait_until(lambda: len(llm.requests) >= 1, 30, "the generation to start")
                daemon.send_signal(signal.SIGKILL)
                await asyncio.to_thread(daemon.wait, 10)
            finally:
                if daemon.poll() is None:
                    daemon.kill()
            assert turns(db) == [("user", "咖啡锈病怎么防治？")]

            first_prompt = llm.requests[0]["messages"]
            # the question the daemon died on is answered after the restart (the Telegram inbox kept it), then the next
            llm.push(answer("发病初期喷施铜制剂保护。"), answer("可以轮换使用三唑酮。"))
            daemon = start_daemon(config, tg.token, log)
            try:
                await wait_until(lambda: len(tg.calls_of("getUpdates")) > 3, 60, "the restarted daemon to poll")
                await tg.wait_sent(1, timeout=60, chat_id=42)
                tg.push_text(42, "那用什么药？")
                await tg.wait_sent(2, timeout=60, chat_id=42)
                daemon.send_signal(signal.SIGTERM)  # the fake must keep serving while the daemon shuts down
                assert await asyncio.to_thread(daemon.wait, 30) == 0
            finally:
                if daemon.poll() is None:
                    daemon.kill()
    history = turns(db)
    assert [role for role, _ in history] == ["user", "assistant", "user", "assistant"]
    assert history[0] == ("user", "咖啡锈病怎么防治？") and "铜制剂" in history[1][1]
    assert history[2] == ("user", "那用什么药？") and "三唑酮" in history[3][1]
    # after the restart the stored history fed HAR and the prompt (IHI)
    second_prompt = llm.requests[-1]["messages"]
    assert {"role": "user", "content": "咖啡锈病怎么防治？"} in second_prompt
    assert "结合上文" in second_prompt[-1]["content"] and "锈病" in second_prompt[-1]["content"]
    assert first_prompt[0]["role"] == "system"
    assert "Traceback" not in log.read_text(encoding="utf-8", errors="replace")
