"""Wiring: build the engine, the history store and the chat service, then run the configured channels.

Roles (`coffeebot serve --role`): `all` (default) is one process doing everything; several `worker`s answer on the
configured channels (behind a load balancer; their state in the PostgreSQL of `[storage] url`) and follow the index
build CURRENT names in the shared data directory; one `builder` runs the nightly rebuild and the kb/ watch and
publishes builds there (and, with `[index] chroma_url`, their vectors on the chromadb server)."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import logging.handlers
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from rag_core.config import Config, Secrets

from .history_store import HistoryStore
from .logs import redact
from .monitor import Monitor, MonitorServer
from .service import ChatService
from .version import version

if TYPE_CHECKING:
    from .scheduler import IndexScheduler, Rebuilder

log = logging.getLogger(__name__)
ROLES = ("all", "worker", "builder")
FOLLOW_S = 2.0  # a worker looks at CURRENT this often (one small file read)
WORKER_REINDEX = "本节点只负责回答问题。索引由构建节点（coffeebot serve --role builder）每晚和知识库变化时自动重建，请在构建节点上操作。"
# The one start-up line: shown at the default level (WARNING) without letting anyone else's INFO through.
startup_log = logging.getLogger("coffeebot.startup")


@dataclass
class Running:
    """What `start_services` opened: the chat service, the index rebuilder and its triggers (None when off)."""

    service: ChatService
    rebuilder: "Rebuilder"
    triggers: "IndexScheduler | None"
    close: Callable[[], Awaitable[None]]
    monitor: Monitor


async def start_services(
    cfg: Config, args=None, console_admin: bool = False, engine=None, triggers: bool = False, role: str = "all"
) -> Running:
    """The chat service over the configured models and index (built first when there is none, except by a worker,
    which waits for the builder's), the rebuilder behind /reindex (with the quality gate; a worker only explains
    that the builder rebuilds) and, with `triggers`, the nightly rebuild and the kb/ watch."""
    from rag_core.index.gate import QualityGate

    from .cli import engine_for
    from .scheduler import IndexScheduler, Rebuilder

    if console_admin:  # whoever sits at the terminal runs the machine
        cfg = dataclasses.replace(cfg, bot=dataclasses.replace(cfg.bot, admins=cfg.bot.admins + ("console:console",)))
    if engine is None:
        engine = await asyncio.to_thread(engine_for, cfg, args, role != "builder", role != "worker")
    await asyncio.to_thread(_load_index, engine)
    history = await HistoryStore.open(cfg.data_dir / cfg.bot.history_db, cfg.bot.history_retention_days,
                                      url=cfg.storage.url)  # [storage] url: SQLite (default) or PostgreSQL
    await history.purge_expired()  # [bot] history_retention_days: on start, and nightly (IndexScheduler.housekeep)
    rebuilder = Rebuilder(cfg, engine, gate=QualityGate(cfg, engine.embedder, engine.tokenizer))
    service = ChatService(cfg, engine, history,
                          reindex=_worker_reindex if role == "worker" else rebuilder.request_text)
    scheduler = None
    if triggers:
        scheduler = IndexScheduler(cfg, rebuilder, housekeeping=[history.purge_expired])
        scheduler.start()
    follower = asyncio.create_task(follow_current(engine), name="follow-current") if role == "worker" else None

    async def close() -> None:
        if follower is not None:
            follower.cancel()
        if scheduler is not None:
            scheduler.stop()
        await history.close()

    return Running(service, rebuilder, scheduler, close, Monitor(cfg, service))


async def follow_current(engine, interval_s: float = FOLLOW_S) -> None:
    """A worker loads each build the builder publishes soon after the swap, not at its next question: an idle
    worker would otherwise still hold a build the builder prunes (files and chromadb collection gone) after a few
    more swaps, and the questions arriving while the first one loads the new build would be answered from it."""
    from rag_core.index.layout import Layout

    layout = Layout(engine.cfg.data_dir)
    while True:
        await asyncio.sleep(interval_s)
        current = await asyncio.to_thread(layout.current_id)
        serving = getattr(engine, "_retriever", None)
        if current and (serving is None or serving.index.build_id != current):
            try:
                await asyncio.to_thread(engine.refresh)
            except Exception:  # noqa: BLE001 - the next question tries again (or says the index is missing)
                log.exception("could not load the published build %s", current)


async def _worker_reindex() -> str:
    return WORKER_REINDEX


def _load_index(engine) -> None:
    """Open the current build before the first question (and so the start-up line can say which reranker runs)."""
    try:
        engine.refresh()
    except Exception as exc:  # noqa: BLE001 - the first question says it (IndexUnavailable) as before
        log.debug("index not loaded at start-up: %s", exc)


async def open_service(cfg: Config, args=None, console_admin: bool = False, engine=None) -> tuple[ChatService, Callable[[], Awaitable[None]]]:
    """The chat service (see `start_services`). An interactive console also runs the index triggers and prints
    the admin reports; piped input (`echo 问题 | coffeebot chat`) does not start them. Under `coffeebot serve`
    (the console as the daemon's only channel) /healthz and /metrics are served on `[monitor] host:port`."""
    interactive = console_admin and sys.stdin.isatty()
    running = await start_services(cfg, args, console_admin, engine, triggers=interactive)
    if interactive:
        async def to_terminal(text: str) -> None:
            print(f"\n【管理员通知】\n{text}\n", file=sys.stderr)

        running.rebuilder.subscribe(to_terminal)
    if getattr(args, "command", None) != "serve":
        return running.service, running.close
    running.monitor.add_channel("console", {"connected": True, "listen": "stdin"})
    server = MonitorServer(running.monitor)
    await server.start()
    announce(cfg, running, {"console": "stdin" if interactive else "stdin (piped)"}, server.url)

    async def close() -> None:
        await server.stop()
        await running.close()

    return running.service, close


def serve(cfg: Config, args) -> int:
    if startup_log.level == logging.NOTSET:  # not set by the logging configuration: show the start-up line
        startup_log.setLevel(logging.INFO)
    role = getattr(args, "role", None) or "all"
    if role == "builder":
        return asyncio.run(_serve_builder(cfg, args))
    secrets = Secrets.from_env()
    channels = []
    if secrets.telegram_token:
        channels.append("telegram")
    if secrets.wechat_app_id and secrets.wechat_token:
        channels.append("wechat")
    if not channels and role == "worker":
        print("coffeebot serve --role worker needs a channel: set the WeChat (WECHAT_APP_ID, WECHAT_TOKEN) or "
              "Telegram (TELEGRAM_BOT_TOKEN) secrets", file=sys.stderr)
        return 2
    if role == "worker" and "telegram" in channels and cfg.telegram.mode != "webhook":
        log.warning("several workers polling Telegram take each other's updates: use [telegram] mode = \"webhook\" "
                    "behind the load balancer")
    if not channels:
        from .console import run_console

        return run_console(cfg, args)
    return asyncio.run(_serve_channels(cfg, args, secrets, channels, role))


async def _serve_builder(cfg: Config, args) -> int:
    """The builder: builds the first index if there is none, then the nightly rebuild, the kb/ watch and the
    nightly housekeeping; /healthz and /metrics on [monitor]. No channel: the workers answer."""
    running = await start_services(cfg, args, triggers=True, role="builder")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = MonitorServer(running.monitor)
    try:
        await server.start()
        announce(cfg, running, {"builder": f"publishing builds to {cfg.data_dir}"}, server.url)
        await stop.wait()
    finally:
        await server.stop()
        await running.close()
    print("stopped", file=sys.stderr)
    return 0


async def _serve_channels(cfg: Config, args, secrets: Secrets, channels: list[str], role: str = "all") -> int:
    running = await start_services(cfg, args, triggers=role == "all", role=role)
    service, close = running.service, running.close
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runners = []
    monitor_server: MonitorServer | None = None
    try:
        if "telegram" in channels:
            from .telegram import TelegramChannel

            runners.append(TelegramChannel(cfg, secrets.telegram_token, service))
            running.monitor.add_channel("telegram", runners[-1])
        if "wechat" in channels:
            from .wechat import WeChatChannel

            runners.append(WeChatChannel(cfg, secrets, service))
            runners[-1].monitor = running.monitor  # /healthz and /metrics ride on the WeChat server
            running.monitor.add_channel("wechat", runners[-1])
        else:
            monitor_server = MonitorServer(running.monitor)
            await monitor_server.start()
        for r in runners:
            await r.start()
            if hasattr(r, "notify_admins"):  # build reports go to the admins of every channel that can reach them
                running.rebuilder.subscribe(r.notify_admins)
            if running.triggers is not None and hasattr(r, "purge_expired"):  # e.g. the WeChat ledger, nightly
                running.triggers.housekeeping.append(r.purge_expired)
        monitor_url = monitor_server.url if monitor_server else _wechat_url(cfg, runners[-1])
        announce(cfg, running, {name: _how_it_listens(cfg, name, r) for name, r in zip(channels, runners)}, monitor_url)
        await stop.wait()
    finally:
        for r in reversed(runners):
            await r.stop()
        if monitor_server is not None:
            await monitor_server.stop()
        await close()
    print("stopped", file=sys.stderr)
    return 0


# ---- the start-up line ---------------------------------------------------------------------------------------------


def _wechat_url(cfg: Config, channel) -> str:
    return f"http://{cfg.wechat.host}:{getattr(channel, 'port', None) or cfg.wechat.port}"


def _how_it_listens(cfg: Config, name: str, channel) -> str:
    if name == "wechat":
        mode = "push" if cfg.wechat.push == "customer_service" else "passive replies"
        return f"callback {_wechat_url(cfg, channel)}{cfg.wechat.path}, {mode}"
    if name == "telegram":
        if cfg.telegram.mode == "webhook":
            return f"webhook on {cfg.telegram.listen}:{cfg.telegram.port}"
        proxy = getattr(cfg.telegram, "proxy", "")
        return "polling" + (" through a proxy" if proxy else "")
    return name


def startup_text(cfg: Config, running: Running, listening: dict[str, str], monitor_url: str | None) -> str:
    """One line: version, channels and how they listen, the monitor, the index build, models or their fallbacks."""
    engine = running.service.engine
    channels = ", ".join(f"{name} ({how})" for name, how in listening.items())
    monitor = f"{monitor_url}/healthz and /metrics" if monitor_url else "no /healthz (address in use)"
    state = running.monitor.index_state()
    index = "no index build" if not state["build"] else (
        f"index build {state['build']} ({state.get('chunks')} chunks, built {state.get('built_at', '?')})")
    embedder = getattr(engine.embedder, "name", "?")
    if embedder != cfg.models.embedder and cfg.models.embedder not in ("hashing", "bundled"):
        embedder += f" (fallback: {cfg.models.embedder} not available)"
    retriever = getattr(engine, "_retriever", None)  # loaded by start_services; never load it here
    reranker = getattr(retriever, "reranker_name", None) or getattr(engine.reranker, "name", None) or "none"
    reranker += " (fusion order)" if reranker == "none" else ""
    chat = getattr(engine.chat, "model_name", None)
    answers = f"LLM {chat}" if chat else "extractive (no LLM key)"
    return (f"coffeebot {version()} up: {channels}; {monitor}; {index}; embedder {embedder}, reranker {reranker}, "
            f"answers {answers}")


def announce(cfg: Config, running: Running, listening: dict[str, str], monitor_url: str | None) -> None:
    """Log the start-up line at INFO (the log file keeps it), and put it on stderr even at the default level
    (WARNING), where the stderr handler would drop it, without letting any other INFO record through."""
    try:
        text = startup_text(cfg, running, listening, monitor_url)
    except Exception:  # noqa: BLE001 - a start-up line must never stop the start-up
        log.exception("could not compose the start-up line")
        return
    startup_log.info("%s", text)
    if not _stderr_shows(logging.INFO):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        print(f"{stamp} INFO {startup_log.name}: {redact(text)}", file=sys.stderr, flush=True)  # past the filter


def _stderr_shows(level: int) -> bool:
    """Whether a record at `level` from the start-up logger reaches a handler writing to the terminal."""
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.FileHandler or isinstance(handler, logging.handlers.BaseRotatingHandler):
            continue
        if isinstance(handler, logging.StreamHandler) and handler.level <= level:
            return True
    return False
