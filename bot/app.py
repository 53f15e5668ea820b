"""Wiring: build the engine, the history store and the chat service, then run the configured channels."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from typing import Awaitable, Callable

from rag_core.config import Config, Secrets

from .history_store import HistoryStore
from .service import ChatService

log = logging.getLogger(__name__)


async def open_service(cfg: Config, args=None, console_admin: bool = False, engine=None) -> tuple[ChatService, Callable[[], Awaitable[None]]]:
    """The chat service over the configured models and index (built first when there is none)."""
    from .cli import engine_for

    if console_admin:  # whoever sits at the terminal runs the machine
        cfg = dataclasses.replace(cfg, bot=dataclasses.replace(cfg.bot, admins=cfg.bot.admins + ("console:console",)))
    if engine is None:
        engine = await asyncio.to_thread(engine_for, cfg, args, True, True)
    history = await HistoryStore.open(cfg.data_dir / cfg.bot.history_db, cfg.bot.history_retention_days)
    from .scheduler import Rebuilder

    rebuilder = Rebuilder(cfg, engine)
    service = ChatService(cfg, engine, history, reindex=rebuilder.request_text)

    async def close() -> None:
        await history.close()

    return service, close


def serve(cfg: Config, args) -> int:
    secrets = Secrets.from_env()
    channels = []
    if secrets.telegram_token:
        channels.append("telegram")
    if secrets.wechat_app_id and secrets.wechat_token:
        channels.append("wechat")
    if not channels:
        from .console import run_console

        return run_console(cfg, args)
    return asyncio.run(_serve_channels(cfg, args, secrets, channels))


async def _serve_channels(cfg: Config, args, secrets: Secrets, channels: list[str]) -> int:
    service, close = await open_service(cfg, args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runners = []
    try:
        if "telegram" in channels:
            from .telegram import TelegramChannel

            runners.append(TelegramChannel(cfg, secrets.telegram_token, service))
        if "wechat" in channels:
            from .wechat import WeChatChannel

            runners.append(WeChatChannel(cfg, secrets, service))
        for r in runners:
            await r.start()
        log.info("serving on %s", ", ".join(channels))
        await stop.wait()
    finally:
        for r in reversed(runners):
            await r.stop()
        await close()
    print("stopped", file=sys.stderr)
    return 0
