"""`GET /healthz` and `GET /metrics` for operators, load balancers and Prometheus.

- `/healthz`: 200 with JSON when the daemon can answer (an index build to answer from, a writable history database),
  503 with the same JSON when it cannot. Channels are listed with whether each is connected; a channel that is down
  (Telegram reconnecting, say) makes the status "degraded" but not 503: the other channels still answer.
- `/metrics`: Prometheus text of bot/metrics.py's registry.

Served on the WeChat callback server when WeChat runs (`add_routes`), otherwise by `MonitorServer` on
`[monitor] host:port`, in every mode of `coffeebot serve`, the console included.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from rag_core.config import Config
from rag_core.index.layout import Layout

from . import metrics
from .version import version

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0


def channel_status(channel: Any) -> dict:
    """A channel's `status()` (a dict with at least "connected"), or a plain "connected" for one without it."""
    if isinstance(channel, dict):
        return dict(channel)
    status = getattr(channel, "status", None)
    if callable(status):
        try:
            out = dict(status())
        except Exception as exc:  # noqa: BLE001 - a broken status() must not break /healthz
            log.warning("status() of %r failed: %r", channel, exc)
            return {"connected": False, "error": type(exc).__name__}
        out["connected"] = bool(out.get("connected", False))
        return out
    return {"connected": True}


@dataclass
class Monitor:
    """What /healthz reports on: the service's engine and history store, and the running channels."""

    cfg: Config
    service: Any  # bot.service.ChatService (engine, history)
    channels: dict[str, Any] = field(default_factory=dict)  # name → channel object (or a dict, for the console)
    started: float = field(default_factory=time.time)

    def add_channel(self, name: str, channel: Any) -> None:
        self.channels[name] = channel

    def index_state(self) -> dict:
        """The build being served (or, before the first question, the one that will be), without loading anything."""
        layout = Layout(self.cfg.data_dir)
        current = layout.current_id()
        retriever = getattr(self.service.engine, "_retriever", None)  # loaded builds only: never load one here
        serving = getattr(getattr(retriever, "index", None), "build_id", None)
        manifest = getattr(getattr(retriever, "index", None), "manifest", None) if serving else None
        if manifest is None and current:
            try:
                manifest = layout.current_manifest()
            except (OSError, ValueError) as exc:
                log.warning("cannot read the manifest of index build %s: %s", current, exc)
        created = (manifest or {}).get("created")
        out: dict[str, Any] = {"build": serving or current, "current": current, "loaded": serving is not None,
                               "ok": bool(serving or current)}
        if created:
            out["built_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
            out["age_s"] = round(time.time() - float(created), 1)
            metrics.INDEX_BUILD_TIME.set(float(created))
        if manifest:
            out["chunks"] = manifest.get("chunk_count")
        return out

    async def history_state(self) -> dict:
        """Whether the history database takes writes: a write statement that changes nothing, in autocommit (so it
        never joins or holds a transaction other coroutines share), refused by a read-only or closed database."""
        probe = getattr(self.service.history, "probe_write", None)
        if probe is None:
            return {"writable": False, "error": "history store not open"}
        try:
            await asyncio.wait_for(probe(), PROBE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - closed, read-only, locked past the timeout, disk gone …
            return {"writable": False, "error": f"{type(exc).__name__}: {exc}"[:200]}
        return {"writable": True}

    async def health(self) -> tuple[int, dict]:
        """(HTTP status, JSON body) of /healthz."""
        index = await asyncio.to_thread(self.index_state)
        history = await self.history_state()
        channels = {name: channel_status(ch) for name, ch in self.channels.items()}
        can_answer = index["ok"] and history["writable"]
        everything = can_answer and all(c["connected"] for c in channels.values())
        body = {
            "status": "ok" if everything else "degraded" if can_answer else "unavailable",
            "version": version(),
            "uptime_s": round(time.time() - self.started, 1),
            "index": index,
            "history_db": history,
            "channels": channels,
        }
        return (200 if can_answer else 503), body


def add_routes(app: web.Application, monitor: Monitor | None) -> None:
    """Add GET /healthz and GET /metrics to an aiohttp app (the WeChat callback server, or our own)."""
    if monitor is None:
        return

    async def healthz(request: web.Request) -> web.Response:
        try:
            status, body = await monitor.health()
        except Exception as exc:  # noqa: BLE001 - a health check that cannot tell says so with 503
            log.exception("/healthz failed")
            status, body = 503, {"status": "unavailable", "error": type(exc).__name__}
        return web.json_response(body, status=status, dumps=_dumps)

    async def metrics_page(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": metrics.CONTENT_TYPE})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)


def _dumps(obj) -> str:
    import json

    return json.dumps(obj, ensure_ascii=False)


class MonitorServer:
    """/healthz and /metrics on `[monitor] host:port` when no WeChat server carries them."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.host = monitor.cfg.monitor.host
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str | None:
        return f"http://{self.host}:{self.port}" if self.port is not None else None

    async def start(self) -> bool:
        """Listen; False (with a warning) when the address cannot be had, e.g. the port is taken: the chat goes on."""
        app = web.Application()
        add_routes(app, self.monitor)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.monitor.cfg.monitor.port).start()
        except OSError as exc:
            await runner.cleanup()
            log.warning("monitor not started: cannot listen on %s:%s (%s); set [monitor] port",
                        self.host, self.monitor.cfg.monitor.port, exc.strerror or exc)
            return False
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("monitor on %s/healthz and /metrics", self.url)
        return True

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
