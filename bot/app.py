"""Wiring: build the engine, the history store and the chat service, then run the configured channels."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from rag_core.config import Config, Secrets

from .history_store import HistoryStore
from .service import ChatService

if TYPE_CHECKING:
    from .scheduler import IndexScheduler, Rebuilder

log = logging.getLogger(__name__)


@dataclass
class Running:
    """What `start_services` opened: the chat service, the index rebuilder and its triggers (None when off)."""

    service: ChatService
    rebuilder: "Rebuilder"
    triggers: "IndexScheduler | None"
    close: Callable[[], Awaitable[None]]


async def start_services(
    cfg: Config, args=None, console_admin: bool = False, engine=None, triggers: bool = False
) -> Running:
    """The chat service over the configured models and index (built first when there is none), the rebuilder
    behind /reindex (with the quality gate) and, with `triggers`, the nightly rebuild and the kb/ watch."""
    from rag_core.index.gate import QualityGate

    from .cli import engine_for
    from .scheduler import IndexScheduler, Rebuilder

    if console_admin:  # whoever sits at the terminal runs the machine
        cfg = dataclasses.replace(cfg, bot=dataclasses.replace(cfg.bot, admins=cfg.bot.admins + ("console:console",)))
    if engine is None:
        engine = await asyncio.to_thread(engine_for, cfg, args, True, True)
    history = await HistoryStore.open(cfg.data_dir / cfg.bot.history_db, cfg.bot.history_retention_days)
    rebuilder = Rebuilder(cfg, engine, gate=QualityGate(cfg, engine.embedder, engine.tokenizer))
    service = ChatService(cfg, engine, history, reindex=rebuilder.request_text)
    scheduler = None
    if triggers:
        scheduler = IndexScheduler(cfg, rebuilder)
        scheduler.start()

    async def close() -> None:
        if scheduler is not None:
            scheduler.stop()
        await history.close()

    return Running(service, rebuilder, scheduler, close)


async def open_service(cfg: Config, args=None, console_admin: bool = False, engine=None) -> tuple[ChatService, Callable[[], Awaitable[None]]]:
    """The chat service (see `start_services`). An interactive console also runs the index triggers and prints
    the admin reports; piped input (`echo 问题 | coffeebot chat`) does not start them."""
    interactive = console_admin and sys.stdin.isatty()
    running = await start_services(cfg, args, console_admin, engine, triggers=interactive)
    if interactive:
        async def to_terminal(text: str) -> None:
            print(f"\n【管理员通知】\n{text}\n", file=sys.stderr)

        running.rebuilder.subscribe(to_terminal)
    return running.service, running.close


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
    running = await start_services(cfg, args, triggers=True)
    service, close = running.service, running.close
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
            if hasattr(r, "notify_admins"):  # build reports go to the admins of every channel that can reach them
                running.rebuilder.subscribe(r.notify_admins)
        log.info("serving on %s", ", ".join(channels))
        await stop.wait()
    finally:
        for r in reversed(runners):
            await r.stop()
        await close()
    print("stopped", file=sys.stderr)
    return 0
