"""WeChat Official Account adapter: the callback server, one answer per message, passive replies or pushes.

WeChat POSTs each user message to our callback URL and re-sends it (same MsgId, three deliveries in all, about 5 s
apart, possibly overlapping, possibly after we restarted) when no reply comes within 5 s. Generation takes longer,
so every text message goes through the ledger (bot/wechat_ledger.py) and one task per message and process:

- verified service accounts (`push = "customer_service"`): the callback gets "success" at once and the answer is
  pushed through the customer-service API, at most 5 messages, only within 48 h of the user's message;
- subscription accounts (`push = "none"`): each delivery is held up to `hold_s` for the answer, then left
  unanswered so WeChat re-sends; the last delivery says the answer is coming, and the user's next message fetches it.

Who may call: `[wechat] mode` ("auto": "safe" when WECHAT_ENCODING_AES_KEY is set, else "plain"). In safe mode only
encrypted callbacks whose msg_signature (over token, timestamp, nonce and the ciphertext) is valid are accepted; the
plain `signature` covers token, timestamp and nonce only, never the body, so a plaintext body proves nothing about
its sender. "compatible" accepts both, and "plain" plaintext only; admin commands run only from encrypted (verified)
messages. Every callback's signed timestamp must lie within `[wechat] max_age_s` of now (WeChat's re-deliveries come
within ~15 s): others are refused with 403, one log line per reason and minute.

Everything that is not about WeChat's wire format or delivery rules lives in ChatService.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import collections
import math
import os
import re
import socket
import time
import uuid
import unicodedata
from pathlib import Path

import requests
from aiohttp import web
from wechatpy import parse_message
from wechatpy.client import WeChatClient
from wechatpy.crypto import WeChatCrypto
from wechatpy.exceptions import InvalidAppIdException, InvalidSignatureException, WeChatClientException
from wechatpy.replies import TextReply
from wechatpy.utils import check_signature

from rag_core.config import Config, Secrets

from . import metrics
from .formatting import Footnoted, split_text, wechat_text
from .logs import redact
from .monitor import add_routes
from .service import BUSY_ERROR, NON_TEXT, ChatService, Incoming, Reply, admin_ids, plain, welcome
from .wechat_ledger import Entry, Ledger

log = logging.getLogger(__name__)

CHANNEL = "wechat"
TEXT_LIMIT = 2048  # bytes (UTF-8) in one text message
MAX_PUSHES = 5  # customer-service messages per user message
PUSH_WINDOW_S = 48 * 3600  # customer-service messages only within 48 h of the user's message; older: a replay
LAST_DELIVERY = 3  # WeChat gives up after the third delivery
KEEP_LEDGER_S = 7 * 86_400  # well past WeChat's retries and the 48-hour window
API_TIMEOUT_S = 10.0
REFUSAL_LOG_S = 60.0  # one log line per refusal reason and minute; the rest are counted
CLAIM_POLL_S = 0.2  # several workers: how often a worker holding a delivery it did not claim looks for the answer

PENDING = "答案正在生成，请回复任意文字获取"
MORE = "（未完，回复任意文字查看下一段）"
TRUNCATED = "……（回答太长，后面的内容略去；可回复“原文1”等查看原文）"
NO_SUCH_SOURCE = "找不到第{n}条出处。请先提问，再回复“原文1”查看回答中第1条出处的原文。"

_SOURCE_N = re.compile(r"原文\s*(\d{1,3})")
_SOURCE_ID = re.compile(r"原文\s*([0-9a-fA-F]{8}\s*#\s*\d+)")
_QUESTION_WORDS = ("怎么", "怎样", "如何", "什么", "为什么", "为啥", "咋", "哪", "吗", "呢", "多少", "几",
                   "是否", "能不能", "可不可以", "要不要", "有没有", "多久", "多长")


def is_new_question(text: str) -> bool:
    """Whether a message sent while an answer is owed asks something new (else it just fetches the answer)."""
    t = unicodedata.normalize("NFKC", text).strip()
    return len(t) > 4 and (t.endswith("?") or any(w in t for w in _QUESTION_WORDS))


def _utf8_bytes(s: str) -> int:
    return len(s.encode("utf-8"))


def _why(exc: BaseException) -> str:
    """An API failure for logs and the ledger: its type and text with URLs' credentials (access_token=, secret=)
    and configured secrets masked."""
    return redact(f"{type(exc).__name__}: {exc}")


class _TimeoutSession(requests.Session):
    """requests has no session-wide timeout, and wechatpy's token fetch passes none."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._timeout = timeout

    def request(self, *args, **kwargs):  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        return super().request(*args, **kwargs)


class ApiClient(WeChatClient):
    """wechatpy's client aimed at `[wechat] api_base_url`, including the token fetch (wechatpy's URL is fixed)."""

    def __init__(self, api_base_url: str, appid: str, secret: str, timeout: float = API_TIMEOUT_S) -> None:
        super().__init__(appid, secret, timeout=timeout)
        self.API_BASE_URL = api_base_url if api_base_url.endswith("/") else api_base_url + "/"
        self._http = _TimeoutSession(timeout)

    def fetch_access_token(self):
        return self._fetch_access_token(
            url=self.API_BASE_URL + "token",
            params={"grant_type": "client_credential", "appid": self.appid, "secret": self.secret},
        )


async def _first(task: asyncio.Future | None, superseded: asyncio.Event, timeout: float) -> str:
    """Which comes first: `task` finishing ("ready"), the event ("superseded"), or `timeout` seconds ("timeout")."""
    waiter = asyncio.ensure_future(superseded.wait())
    try:
        done, _ = await asyncio.wait({waiter} | ({task} if task else set()), timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task is not None and task in done:
        return "ready"
    return "superseded" if superseded.is_set() else "timeout"


class WeChatChannel:
    """The callback server for one Official Account; `start()` listens on [wechat] host:port/path."""

    def __init__(self, cfg: Config, secrets: Secrets, service: ChatService, *,
                 ledger_path: Path | None = None, clock=time.time) -> None:
        if not secrets.wechat_token:
            raise ValueError("WECHAT_TOKEN must be set to verify WeChat's callbacks")
        self.cfg = cfg.wechat
        self.service = service
        self.token = secrets.wechat_token
        self.push = self.cfg.push == "customer_service"
        self.mode = self.cfg.mode if self.cfg.mode != "auto" else ("safe" if secrets.wechat_aes_key else "plain")
        if self.mode != "plain" and not secrets.wechat_aes_key:
            raise ValueError(f'[wechat] mode = "{self.mode}" needs WECHAT_ENCODING_AES_KEY')
        self.crypto = None
        if self.mode != "plain":
            try:
                self.crypto = WeChatCrypto(self.token, secrets.wechat_aes_key, secrets.wechat_app_id)
            except Exception as exc:  # wrong length or not base64: wechatpy asserts or raises binascii.Error
                raise ValueError("WECHAT_ENCODING_AES_KEY must be the 43-character EncodingAESKey") from exc
        self.client = ApiClient(self.cfg.api_base_url, secrets.wechat_app_id or "", secrets.wechat_app_secret or "")
        self.ledger_path = ledger_path or cfg.data_dir / "wechat.sqlite3"
        self.storage_url = cfg.storage.url
        self.claim_lease_s = cfg.storage.claim_lease_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # this process, in claims
        self.clock = clock
        self.ledger: Ledger | None = None
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: dict[str, asyncio.Task[Entry]] = {}  # the one task per message key in this process
        self._holders: dict[str, asyncio.Event] = {}  # the newest held delivery per key; set: superseded
        self._stopping = False
        self._purged_at = 0.0
        self.refused: collections.Counter[str] = collections.Counter()  # refused callbacks by reason
        self._refusal_log: dict[str, tuple[float, int]] = {}  # reason → (last logged, refusals not logged since)
        self.retention_s = cfg.bot.history_retention_days * 86_400.0
        if not self.push and not 0 < self.cfg.hold_s < 5:
            log.warning("[wechat] hold_s = %s: it must stay under WeChat's 5-second limit", self.cfg.hold_s)
        if self.push and not secrets.wechat_app_secret:
            log.warning("[wechat] push = customer_service but WECHAT_APP_SECRET is not set: pushes will fail")

    async def start(self) -> None:
        self.ledger = await Ledger.open(self.ledger_path, clock=self.clock, url=self.storage_url)
        app = web.Application(client_max_size=self.cfg.max_body_bytes)
        app.router.add_get(self.cfg.path, self._on_verify)
        app.router.add_post(self.cfg.path, self._on_message)
        add_routes(app, getattr(self, "monitor", None))  # GET /healthz, /metrics (bot/monitor.py; set by bot/app.py)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        try:
            await self._runner.setup()
            await web.TCPSite(self._runner, self.cfg.host, self.cfg.port).start()
        except BaseException:  # e.g. the port is taken
            await self.stop()
            raise
        self.port = self._runner.addresses[0][1]
        await self.purge_expired()
        if self.mode != "safe":
            log.warning("WeChat [wechat] mode = %s: plaintext callbacks are accepted, and their bodies are not signed "
                        "(admin commands need encrypted ones); use safe mode with WECHAT_ENCODING_AES_KEY", self.mode)
        resumed = await self.ledger.unfinished(self.clock() - PUSH_WINDOW_S)
        for entry in resumed:
            self._task_for(entry.key)
        log.info("WeChat callback on http://%s:%s%s (%s mode, %s), %d unfinished answers resumed", self.cfg.host,
                 self.port, self.cfg.path, self.mode, "push" if self.push else "passive replies", len(resumed))

    async def purge_expired(self) -> int:
        """Forget ledger rows past WeChat's retries and push window (7 days, or the retention period if shorter)
        and users' last citations older than `[bot] history_retention_days`; on start and nightly."""
        if self.ledger is None:
            return 0
        now = self.clock()
        self._purged_at = now
        return await self.ledger.purge(now - min(KEEP_LEDGER_S, self.retention_s), now - self.retention_s)

    async def stop(self) -> None:
        """Stop listening; answers still being made are abandoned to the ledger and resumed by the next start."""
        self._stopping = True
        for superseded in self._holders.values():
            superseded.set()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.ledger is not None:
            await self.ledger.close()
            self.ledger = None

    # --- HTTP -------------------------------------------------------------------------------------------------

    async def _on_verify(self, request: web.Request) -> web.Response:
        """The URL check when the callback is configured: echo `echostr` if the signature is ours."""
        q = request.query
        try:
            check_signature(self.token, q.get("signature", ""), q.get("timestamp", ""), q.get("nonce", ""))
        except InvalidSignatureException:
            log.warning("WeChat URL check with a bad signature from %s", request.remote)
            return web.Response(status=403, text="forbidden")
        return web.Response(text=q.get("echostr", ""))

    async def _on_message(self, request: web.Request) -> web.Response:
        q = request.query
        limit = self.cfg.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            log.warning("WeChat callback body of %d bytes refused (max_body_bytes %d)", request.content_length, limit)
            return web.Response(status=413, text="too large")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            log.warning("WeChat callback body over max_body_bytes (%d) refused", limit)
            return web.Response(status=413, text="too large")
        timestamp, nonce = q.get("timestamp", ""), q.get("nonce", "")
        encrypted = q.get("encrypt_type", "raw") == "aes"
        if not encrypted and self.mode == "safe":
            return self._refuse(request, "plaintext callback in safe mode", "no encrypt_type=aes")
        if encrypted and self.crypto is None:
            log.error("encrypted WeChat callback refused: [wechat] mode is plain")
            return web.Response(status=400, text="encryption not configured")
        try:
            if encrypted:
                xml = self.crypto.decrypt_message(body, q.get("msg_signature", ""), timestamp, nonce)
            else:
                check_signature(self.token, q.get("signature", ""), timestamp, nonce)
                xml = body
        except (InvalidSignatureException, InvalidAppIdException) as exc:
            return self._refuse(request, "bad signature", str(exc.errmsg))
        except Exception as exc:  # bad base64 or padding: signed, but not WeChat's ciphertext
            log.warning("malformed WeChat callback from %s (%s: %s): %r", request.remote, type(exc).__name__, exc,
                        body[:200])
            return web.Response(status=400, text="malformed")
        age = self._age(timestamp)
        if age is None or abs(age) > self.cfg.max_age_s:
            how = "unreadable" if age is None else f"{age:.0f} s old"
            return self._refuse(request, "stale timestamp",
                                f"timestamp {timestamp[:20]!r}, {how}, max_age_s {self.cfg.max_age_s}")
        try:
            msg = parse_message(xml)
            if msg is None or not msg.source:
                raise ValueError("no message or no FromUserName")
            created = float(msg.time)
        except Exception as exc:  # expat, a missing element, bad base64 or padding: all mean a malformed body
            log.warning("malformed WeChat callback from %s (%s: %s): %r", request.remote, type(exc).__name__, exc,
                        body[:200])
            return web.Response(status=400, text="malformed")
        text = await self._respond(msg, created, verified=encrypted)
        if not text:
            return web.Response(text="success")
        xml = TextReply(source=msg.target, target=msg.source, content=text, time=int(self.clock())).render()
        if encrypted:
            xml = self.crypto.encrypt_message(xml, nonce, timestamp)
        return web.Response(text=xml, content_type="application/xml")

    def _age(self, timestamp: str) -> float | None:
        """Seconds since the callback's signed timestamp (negative: from the future); None when unreadable."""
        try:
            age = self.clock() - int(timestamp)
        except ValueError:
            return None
        return age if math.isfinite(age) else None

    def _refuse(self, request: web.Request, reason: str, detail: str) -> web.Response:
        """403, counted by reason; logged once per reason and REFUSAL_LOG_S (a flood is one line a minute)."""
        self.refused[reason] += 1
        now = time.monotonic()
        last, hidden = self._refusal_log.get(reason, (-math.inf, 0))
        if now - last >= REFUSAL_LOG_S:
            log.warning("WeChat callback refused (%s: %s) from %s%s", reason, detail, request.remote,
                        f"; {hidden} more refused for this reason since the last report" if hidden else "")
            self._refusal_log[reason] = (now, 0)
        else:
            self._refusal_log[reason] = (last, hidden + 1)
        return web.Response(status=403, text="forbidden")

    # --- one message, one answer ------------------------------------------------------------------------------

    async def _respond(self, msg, created: float, verified: bool = False) -> str | None:
        """The passive reply to one delivery (None: "success")."""
        if self._stopping or self.ledger is None:
            raise web.HTTPServiceUnavailable()  # WeChat re-sends; the next process answers
        openid = msg.source
        if msg.type == "event" or (msg.type == "unknown" and "Event" in msg._data):
            key = f"event:{openid}:{int(created)}"
            static: str | None = welcome("wechat") if str(msg._data.get("Event", "")).lower().startswith("subscribe") else ""
        else:
            key = f"msg:{openid}:{msg.id}" if msg.id else f"time:{openid}:{int(created)}"
            static = None if msg.type == "text" else NON_TEXT
        if static is None and self.clock() - created > PUSH_WINDOW_S:
            log.warning("replayed WeChat message %s from %s ignored: sent %.1f h ago", key, openid,
                        (self.clock() - created) / 3600)
            return None
        if self.clock() - self._purged_at > 86_400:
            await self.purge_expired()
        text = (msg.content or "") if static is None else f"[{msg.type}]"
        entry = await self.ledger.record_delivery(key, openid, created, text, static, verified)
        metrics.observe_wechat_delivery(entry.deliveries)
        if entry.deliveries > 1:
            log.info("WeChat delivery %d of %s (%s)", entry.deliveries, key, entry.state)
        if static is not None:  # a constant reply, given passively: nothing to generate
            return static
        task = self._task_for(key)
        if self.push:
            return None
        return await self._hold(entry, task)

    def _task_for(self, key: str) -> asyncio.Task[Entry]:
        """The task answering `key` in this process, started on first need (no await: no race)."""
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.create_task(self._process(key), name=f"wechat {key}")
            self._tasks[key] = task
            task.add_done_callback(functools.partial(self._forget, key))
        return task

    def _forget(self, key: str, task: asyncio.Task) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("answering WeChat message %s failed", key, exc_info=task.exception())

    async def _process(self, key: str) -> Entry:
        """Make the answer unless the ledger has it, then (service accounts) push what is not pushed yet; only
        the process holding the ledger's claim on the message does either. Elsewhere (another worker got an
        earlier delivery) a held passive reply waits for the claimant's stored answer."""
        assert self.ledger is not None
        # One process (SQLite): a claim left by a previous run is taken over at once.
        lease = self.claim_lease_s if self.ledger.shared else 0.0
        while not await self.ledger.claim(key, self.owner, lease):
            entry = await self.ledger.get(key)
            assert entry is not None
            if self.push or entry.parts is not None or entry.state in ("delivered", "pushed", "failed"):
                return entry  # the claimant pushes; or the answer is there for `_next_part`
            await asyncio.sleep(CLAIM_POLL_S)
        entry = await self.ledger.get(key)
        assert entry is not None
        if entry.parts is None:
            entry = await self.ledger.store_answer(key, await self._answer(entry))
        if self.push and entry.state == "answered":
            await self._push(entry)
        return entry

    async def _answer(self, entry: Entry) -> list[str]:
        """The reply to a text message, as WeChat messages: a source, an owed answer, or the chat service's."""
        text = entry.text.strip()
        norm = unicodedata.normalize("NFKC", text)  # full-width ／ＳＯＵＲＣＥ, 原文１, ＃
        chat = (CHANNEL, entry.openid)
        if norm.startswith("/"):
            # Admin rights need an authenticated body: a plaintext one could have been written by anyone.
            user = entry.openid if entry.verified else ""
            if not entry.verified and self.service.is_admin(CHANNEL, entry.openid):
                log.warning("WeChat command %s from admin %s arrived unencrypted: run as a non-admin's",
                            norm.split()[0][:20], entry.openid)
            reply = await self.service.handle(Incoming(CHANNEL, entry.openid, user, norm))
        elif m := _SOURCE_N.fullmatch(norm):
            n, ids = int(m.group(1)), await self.ledger.last_sources(entry.openid)
            if 1 <= n <= len(ids):
                reply = await self.service.source(ids[n - 1], chat)
            else:
                reply = plain("notice", NO_SUCH_SOURCE.format(n=n))
        elif m := _SOURCE_ID.fullmatch(norm):
            reply = await self.service.source(re.sub(r"\s", "", m.group(1)).lower(), chat)
        else:
            if not self.push and not is_new_question(text):
                owed = await self._take_owed(entry)
                if owed is not None:
                    return [owed]
            reply = await self.service.handle(Incoming(CHANNEL, entry.openid, entry.openid, text))
        if reply.kind == "answer":
            await self.ledger.set_last_sources(entry.openid, [f.id for f in reply.body.footnotes])
        return self._parts(reply)

    async def _take_owed(self, entry: Entry) -> str | None:
        """The next part of an answer this user is owed (subscription accounts), waiting for it if need be."""
        owed = await self.ledger.owed_to(entry.openid, self.clock() - PUSH_WINDOW_S, exclude=entry.key)
        if owed is None:
            return None
        if owed.parts is None:
            await self._task_for(owed.key)  # running here, or left unfinished by a restart
            owed = await self.ledger.get(owed.key)
        while owed is not None and owed.parts and owed.sent < len(owed.parts):
            if await self.ledger.take_part(owed.key, owed.sent, "delivered"):
                log.info("owed answer %s part %d/%d fetched by %s", owed.key, owed.sent + 1, len(owed.parts),
                         entry.key)
                return owed.parts[owed.sent]
            owed = await self.ledger.get(owed.key)
        return None

    def _parts(self, reply: Reply) -> list[str]:
        """The reply as WeChat text messages: ≤ 5 pushes, or passive parts that say when more follows."""
        if self.push:
            parts = wechat_text(reply.body, TEXT_LIMIT)
            if len(parts) > MAX_PUSHES:
                log.warning("answer of %d messages truncated to %d pushes", len(parts), MAX_PUSHES)
                room = TEXT_LIMIT - _utf8_bytes("\n" + TRUNCATED)
                last = split_text(parts[MAX_PUSHES - 1], room, _utf8_bytes)[0]
                parts = parts[: MAX_PUSHES - 1] + [last + "\n" + TRUNCATED]
            return parts
        parts = wechat_text(reply.body, TEXT_LIMIT - _utf8_bytes("\n\n" + MORE))
        return [p + "\n\n" + MORE for p in parts[:-1]] + parts[-1:]

    # --- subscription accounts: hold the callback -------------------------------------------------------------

    async def _hold(self, entry: Entry, task: asyncio.Task[Entry]) -> str | None:
        """Wait up to hold_s for the answer; stay silent so WeChat re-sends, and on its last try say it is coming."""
        superseded = asyncio.Event()
        if (older := self._holders.get(entry.key)) is not None:
            older.set()  # WeChat re-sent, so it gave up on the older delivery
        self._holders[entry.key] = superseded
        try:
            outcome = await _first(task, superseded, self.cfg.hold_s)
            if outcome == "timeout" and entry.deliveries < LAST_DELIVERY:
                # Silence makes WeChat re-send at 5 s; that delivery supersedes this one. The answer may still
                # come first; if neither does (no re-send), fall through to the last-delivery notice.
                outcome = await _first(task, superseded, self.cfg.hold_s)
            if self._stopping:
                raise web.HTTPServiceUnavailable()
            if outcome == "superseded":
                return None
            if outcome == "ready":
                return await self._next_part(entry.key, task)
            await self.ledger.mark_owed(entry.key)
            log.info("WeChat message %s: no answer by delivery %d, the user fetches it later", entry.key,
                     entry.deliveries)
            return PENDING
        finally:
            if self._holders.get(entry.key) is superseded:
                del self._holders[entry.key]

    async def _next_part(self, key: str, task: asyncio.Task[Entry]) -> str | None:
        if task.cancelled() or task.exception() is not None:
            return BUSY_ERROR
        entry = await self.ledger.get(key)
        while entry is not None and entry.parts and entry.sent < len(entry.parts):
            if await self.ledger.take_part(key, entry.sent, "delivered"):
                if entry.sent + 1 < len(entry.parts):
                    await self.ledger.mark_owed(key)
                return entry.parts[entry.sent]
            entry = await self.ledger.get(key)
        # All given already: WeChat re-sent because it did not get our reply, so repeat the last part.
        return entry.parts[entry.sent - 1] if entry and entry.parts and entry.sent else None

    # --- service accounts: push -------------------------------------------------------------------------------

    async def notify_admins(self, text: str) -> None:
        """Push an index report to the WeChat admins of `[bot] admins` (service accounts only; WeChat accepts it
        within 48 h of the admin's last message, and refusals are logged)."""
        if self.cfg.push != "customer_service":
            return
        for openid in admin_ids(self.service.cfg.bot.admins, "wechat"):
            for part in wechat_text(Footnoted(text, ()))[:MAX_PUSHES]:
                try:
                    await asyncio.to_thread(self.client.message.send_text, openid, part)
                except Exception as exc:  # a report that cannot be delivered must not disturb the channel
                    log.warning("could not push the index report to admin %s: %s", openid, _why(exc))
                    break

    async def _push(self, entry: Entry) -> None:
        """Push the unsent parts in order; WeChat's refusals are logged and end the pushing, never the daemon."""
        assert entry.parts is not None
        for i in range(entry.sent, len(entry.parts)):
            age = self.clock() - entry.create_time
            if age > PUSH_WINDOW_S:
                log.warning("not pushing %s to %s: the message is %.1f h old (48 h limit)", entry.key, entry.openid,
                            age / 3600)
                await self.ledger.set_state(entry.key, "failed", "48 h window passed")
                return
            send = asyncio.ensure_future(asyncio.to_thread(self.client.message.send_text, entry.openid, entry.parts[i]))
            try:
                try:
                    await asyncio.shield(send)
                except asyncio.CancelledError:  # stopping: a push under way goes out anyway, so record it
                    await send
                    await self.ledger.take_part(entry.key, i, "pushed")
                    raise
            except WeChatClientException as exc:
                why = {45015: "reply time limit exceeded", 45047: "too many pushes"}.get(exc.errcode, "refused")
                log.warning("push %d/%d of %s to %s failed: %s (errcode %s: %s)", i + 1, len(entry.parts), entry.key,
                            entry.openid, why, exc.errcode, exc.errmsg)
                await self.ledger.set_state(entry.key, "failed", redact(f"{exc.errcode} {exc.errmsg}"))
                return
            except Exception as exc:  # e.g. requests' ConnectionError, whose text holds the URL and its access_token
                log.error("push %d/%d of %s to %s failed: %s", i + 1, len(entry.parts), entry.key, entry.openid,
                          _why(exc))
                await self.ledger.set_state(entry.key, "failed", _why(exc)[:200])
                return
            await self.ledger.take_part(entry.key, i, "pushed")
        log.info("pushed %s to %s in %d messages", entry.key, entry.openid, len(entry.parts))
