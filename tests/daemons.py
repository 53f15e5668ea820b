"""Running `coffeebot serve` as a real process in tests and benchmarks: one offline config writer, one waiter."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Sequence

from tests.conftest import KB, REPO

# The WeChat account of the multi-process tests and benchmarks (safe mode: the AES key is set).
WECHAT_ENV = {"WECHAT_APP_ID": "wx0123456789abcdef", "WECHAT_APP_SECRET": "app-secret",
              "WECHAT_TOKEN": "callback-token", "WECHAT_ENCODING_AES_KEY": "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"}

# What every daemon under test runs on: the sample KB, the weight-free embedder, no cross-encoder, no e5 ranker
# features (a rebuild would encode the sample KB for minutes), the rule-based HAR and a monitor on any free port (so
# parallel daemons never fight over 9810).
OFFLINE = {
    "models": {"embedder": "hashing", "reranker": ""},
    "retrieval": {"ranker_encoder": "off"},
    "history": {"har_llm": False},
    "monitor": {"port": 0},
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def write_daemon_config(path: Path, data_dir: Path, kb_dir: Path = KB, **sections: dict[str, Any]) -> Path:
    """A config.toml for a daemon: OFFLINE, the folders, then `sections` (each a table, merged over the defaults)."""
    tables: dict[str, dict[str, Any]] = {"paths": {"kb_dir": str(kb_dir), "data_dir": str(data_dir)}}
    for name, values in list(OFFLINE.items()) + list(sections.items()):
        tables.setdefault(name, {}).update(values)
    lines = []
    for name, values in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str, procs: Sequence = ()) -> None:
    """Poll `predicate` (in a thread) until it holds; fail after `timeout` s, or at once when a process dies."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(predicate):
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"a process exited ({p.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def start_wechat_role(config: Path, role: str, log: Path) -> subprocess.Popen:
    """`coffeebot serve --role ROLE` with the WeChat account of WECHAT_ENV and no other channel or LLM key."""
    env = dict(os.environ, **WECHAT_ENV, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    for key in ("TELEGRAM_BOT_TOKEN", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "--config", str(config), "serve", "--role", role],
                            cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def _healthz(port: int) -> dict | None:
    """The JSON of `GET /healthz` on 127.0.0.1:port when it answers 200, else None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
            return json.load(r) if r.status == 200 else None
    except (OSError, ValueError):  # refused, not yet up, 503 (HTTPError), or not JSON
        return None


def serving(port: int) -> str | None:
    """The index build the daemon on 127.0.0.1:port has loaded (its /healthz `index.build` once `loaded`)."""
    index = (_healthz(port) or {}).get("index", {})
    return index.get("build") if index.get("loaded") else None


def healthy(port: int) -> bool:
    """`GET /healthz` on 127.0.0.1:port answers 200."""
    return _healthz(port) is not None
