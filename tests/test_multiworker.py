"""Two `coffeebot serve --role worker` processes and one `--role builder`, on a real PostgreSQL and a chromadb
server started by the fixtures (tests/servers.py), WeChat's callbacks from the fake platform and pushes to the fake
API (tests/fakes/wechat_api.py), extractive answers (no LLM key):

- the same MsgId delivered three times to alternating workers → one answer (one push);
- a question on worker A, its follow-up on worker B → B answers it from A's history;
- a rebuild published by the builder (a new kb/ file) → both workers serve it, and no question fails meanwhile;
- worker A SIGKILLed → worker B keeps answering.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import KB, REPO
from tests.daemons import WECHAT_ENV, healthy, serving, start_wechat_role, wait_until, write_daemon_config
from tests.fakes import FakeWeChatAPI, WeChatPlatform
from tests.servers import chroma_url, free_port, pg_cluster, postgres_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(120)

APPID, SECRET, TOKEN = (WECHAT_ENV[k] for k in ("WECHAT_APP_ID", "WECHAT_APP_SECRET", "WECHAT_TOKEN"))
AES_KEY = WECHAT_ENV["WECHAT_ENCODING_AES_KEY"]
QUESTION, FOLLOW_UP = "咖啡锈病怎么防治？", "那要打什么药？"
REFUSAL = "知识库中没有找到"
NEW_DOC = "# 咖啡晒场管理\n\n晒场要用竹席架空晾晒咖啡豆，晒豆时每天翻动四次，阴雨天盖上塑料布防潮。\n"
NEW_QUESTION = "晒场上用竹席晾晒咖啡豆要注意什么？"


def write_config(path: Path, kb: Path, data: Path, storage: str, chroma: str, api: FakeWeChatAPI, port: int) -> Path:
    """A worker or builder: verified WeChat pushes on `port`, the shared database and chromadb server."""
    return write_daemon_config(
        path, data, kb,
        retrieval={"learned_ranker": False},
        bot={"rate_limit_per_minute": 0},
        wechat={"host": "127.0.0.1", "port": port, "api_base_url": api.base_url, "push": "customer_service",
                "mode": "safe"},
        index={"chroma_url": chroma, "watch_interval_s": 1, "settle_s": 0, "nightly": ""},
        storage={"url": storage},
    )


class Workers:
    def __init__(self, ports: dict[str, int]) -> None:
        self.platforms = {name: WeChatPlatform(f"http://127.0.0.1:{port}/wechat", TOKEN, APPID, AES_KEY, "safe")
                          for name, port in ports.items()}

    async def post(self, worker: str, xml: str) -> str | None:
        status, reply = await self.platforms[worker].post(xml, timeout=5.0)
        assert status == 200, (worker, status, reply)
        return reply

    def text(self, user: str, content: str) -> str:
        return self.platforms["a"].text(user, content)


async def pushes_to(api: FakeWeChatAPI, user: str, n: int = 1, timeout: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(got := [p.content for p in api.pushes if p.touser == user]) < n:
        assert time.monotonic() < deadline, f"expected {n} pushes to {user}, got {got}"
        await asyncio.sleep(0.05)
    return got


@pytest.mark.slow
async def test_two_workers_and_a_builder(tmp_path, postgres_url, chroma_url):
    kb, data = tmp_path / "kb", tmp_path / "data"  # data: the shared path the builder publishes builds in
    kb.mkdir()
    for name in ("diseases.md", "pests.md", "harvest.md"):
        shutil.copy(KB / name, kb / name)
    procs: dict[str, subprocess.Popen] = {}
    logs = {name: tmp_path / f"{name}.log" for name in ("builder", "a", "b")}
    async with FakeWeChatAPI(APPID, SECRET) as api:
        ports = {"a": free_port(), "b": free_port()}
        try:
            builder_cfg = write_config(tmp_path / "builder.toml", kb, data, postgres_url, chroma_url, api, 0)
            procs["builder"] = start_wechat_role(builder_cfg, "builder", logs["builder"])
            await wait_until(lambda: (data / "CURRENT").exists(), 45, "the builder's first build", procs.values())
            first_build = (data / "CURRENT").read_text().strip()
            for name, port in ports.items():
                cfg = write_config(tmp_path / f"{name}.toml", kb, data, postgres_url, chroma_url, api, port)
                procs[name] = start_wechat_role(cfg, "worker", logs[name])
            for port in ports.values():
                await wait_until(lambda: healthy(port), 45, f"a worker on port {port}", procs.values())
            wx = Workers(ports)

            # 1. One MsgId, three deliveries to alternating workers: one answer.
            xml = wx.text("o-dup", QUESTION)
            replies = []
            for worker in ("a", "b", "a"):
                replies.append(await wx.post(worker, xml))
                await asyncio.sleep(0.2)
            assert replies == ["success"] * 3
            answer = (await pushes_to(api, "o-dup"))[0]
            assert "来源" in answer and REFUSAL not in answer

            # 2. A question on A, its follow-up on B: B uses the history A wrote.
            await wx.post("a", wx.text("o-chat", QUESTION))
            await pushes_to(api, "o-chat", 1)
            await wx.post("b", wx.text("o-chat", FOLLOW_UP))
            follow_up = (await pushes_to(api, "o-chat", 2))[1]
            await wx.post("b", wx.text("o-alone", FOLLOW_UP))  # the control: the same words with no history
            alone = (await pushes_to(api, "o-alone"))[0]
            assert REFUSAL in alone and REFUSAL not in follow_up and "来源" in follow_up

            # 3. The builder publishes a rebuild; both workers serve it, with questions asked all the while.
            (kb / "drying.md").write_text(NEW_DOC, encoding="utf-8")
            asked: list[str] = []
            k = 0
            while (data / "CURRENT").read_text().strip() == first_build:
                user = f"o-during-{k}"
                await wx.post("ab"[k % 2], wx.text(user, QUESTION))
                asked.append(user)
                k += 1
                assert k < 300, "the builder did not publish a new build"
                await asyncio.sleep(0.1)
            new_build = (data / "CURRENT").read_text().strip()
            for port in ports.values():  # a worker answers from the old build while it loads the new one
                await wait_until(lambda: serving(port) == new_build, 45, f"the worker on {port} to load {new_build}",
                                 procs.values())
            for worker in ("a", "b"):
                await wx.post(worker, wx.text(f"o-new-{worker}", NEW_QUESTION))
            for worker in ("a", "b"):
                assert "竹席" in (await pushes_to(api, f"o-new-{worker}"))[0]
            for user in asked:
                assert "来源" in (await pushes_to(api, user))[0]  # no failed question during the swap

            print(f"E2E {len(asked)} questions asked during the rebuild; {len(api.refused)} pushes refused (token ping-pong)")
            # 4. Worker A dies; B keeps answering.
            procs["a"].send_signal(signal.SIGKILL)
            procs["a"].wait(10)
            await wx.post("b", wx.text("o-after-kill", QUESTION))
            assert "来源" in (await pushes_to(api, "o-after-kill"))[0]

            await asyncio.sleep(1.0)  # time for a duplicate push, were there one
            assert len([p for p in api.pushes if p.touser == "o-dup"]) == 1
            conn = await asyncpg.connect(postgres_url)
            try:
                row = await conn.fetchrow("SELECT state, deliveries FROM messages WHERE openid = 'o-dup'")
                turns = await conn.fetchval("SELECT COUNT(*) FROM turns WHERE chat_id = 'o-dup'")
            finally:
                await conn.close()
            assert tuple(row) == ("pushed", 3) and turns == 2  # one question, one answer in the history
        except BaseException:
            for name, log in logs.items():
                if log.exists():
                    print(f"--- {name} log ---\n{log.read_text(errors='replace')[-3000:]}")
            raise
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs.values():
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def test_a_worker_needs_a_channel(tmp_path):
    config = tmp_path / "worker.toml"
    data = tmp_path / "data"
    config.write_text(f'[paths]\nkb_dir = "{KB}"\ndata_dir = "{data}"\n[models]\nembedder = "hashing"\n'
        '[retrieval]\nranker_encoder = "off"\n',
                      encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WECHAT_", "TELEGRAM_"))}
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "--config", str(config), "serve", "--role", "worker"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "--role worker needs a channel" in proc.stderr
    assert not (tmp_path / "data" / "CURRENT").exists()  # a worker never builds (the builder does)


async def test_a_worker_loads_a_published_build_without_waiting_for_a_question(sample_cfg, tmp_path):
    import dataclasses
    import json

    from bot.app import follow_current
    from rag_core.index.layout import Layout
    from tests.conftest import engine_for

    data = tmp_path / "data"
    shutil.copytree(sample_cfg.data_dir, data, ignore=shutil.ignore_patterns("history.sqlite3*", "wechat.sqlite3*"))
    cfg = dataclasses.replace(sample_cfg, paths=dataclasses.replace(sample_cfg.paths, data_dir=str(data)))
    layout = Layout(data)
    old = layout.current_id()
    new = f"{old}-published"  # what the builder publishes: a new build folder, then the CURRENT swap
    shutil.copytree(layout.builds / old, layout.builds / new)
    manifest = json.loads((layout.builds / new / "manifest.json").read_text(encoding="utf-8"))
    (layout.builds / new / "manifest.json").write_text(json.dumps(manifest | {"build_id": new}), encoding="utf-8")
    engine = engine_for(cfg)
    engine.refresh()
    follower = asyncio.create_task(follow_current(engine, interval_s=0.05))
    try:
        layout.swap(new)
        await wait_until(lambda: engine._retriever.index.build_id == new, 10, "the worker to load the new build")
    finally:
        follower.cancel()
    assert engine._retriever.index.build_id == new  # no question was asked
