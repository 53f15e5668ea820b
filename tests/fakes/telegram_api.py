"""A loopback fake of the Telegram Bot API, for tests: real python-telegram-bot talks to it over HTTP.

    async with FakeTelegramAPI() as tg:
        app = Application.builder().token(tg.token).base_url(tg.base_url).base_file_url(tg.base_file_url).build()
        ...
        tg.push_text(42, "咖啡锈病怎么防治？")           # a user writes to the bot (private chat 42)
        sent = await tg.wait_sent(1)                   # the bot's sendMessage calls, as `Sent` records
        tg.fail_next("sendMessage", retry_after=1)     # the next sendMessage gets a 429

The server runs on 127.0.0.1 (an OS-chosen port) in the test's event loop and answers `POST /bot{token}/{method}`
with form-encoded or JSON parameters. `getUpdates` long-polls (up to `poll_wait_s`) and honours `offset` the way
Telegram does: an update is forgotten for good once getUpdates is called with an offset above its id (`confirmed`
counts them); until then every call returns it again. `sendMessageDraft` (Bot API 9.3+, private chats only) is kept
in `drafts`; `editMessageText` changes the `Sent` record in place (and answers 400 "message is not modified" for an
identical edit, as Telegram does). With `unreachable = True` every connection is dropped (a blocked network).
`sendMessage` checks parse_mode HTML the way Telegram does (only its tags, balanced; every `<` and `&` escaped;
at most 4096 UTF-16 units after parsing) and answers 400 "can't parse entities" otherwise. Every call is recorded
in order in `calls`.
"""
from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_ID = 7000001
BOT_USERNAME = "coffee_advisor_test_bot"
_TEXT_KEYS = {"text", "caption", "parse_mode", "callback_query_id", "url", "secret_token", "action", "data"}
_TG_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "span", "tg-spoiler",
            "tg-emoji", "blockquote"}
_HTML_TOKEN = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)>|&(#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|lt|gt|amp|quot);|[<>&]")
_WORD_START = re.compile(r"(?<![\w@])(@[A-Za-z0-9_]{3,32}|/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?)")


class BadHTML(ValueError):
    """The text would be rejected by Telegram's HTML parser."""


def parse_telegram_html(text: str) -> str:
    """The plain text Telegram would show for `text` with parse_mode HTML; BadHTML where Telegram answers 400."""
    out: list[str] = []
    stack: list[str] = []
    pos = 0
    for m in _HTML_TOKEN.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        token = m.group(0)
        if m.group(2):
            name = m.group(2).lower()
            if name not in _TG_TAGS:
                raise BadHTML(f"Unsupported start tag \"{name}\" at byte offset {m.start()}")
            if m.group(1):
                if not stack or stack[-1] != name:
                    raise BadHTML(f"Unmatched end tag at byte offset {m.start()}, expected \"</{stack[-1] if stack else ''}>\"")
                stack.pop()
            else:
                stack.append(name)
        elif m.group(4):
            out.append(html.unescape(token))
        elif token == ">":
            out.append(">")
        else:
            raise BadHTML(f"Unsupported start tag or entity at byte offset {m.start()}: {token!r} must be escaped")
    out.append(text[pos:])
    if stack:
        raise BadHTML(f"Can't find end tag corresponding to start tag \"{stack[-1]}\"")
    return "".join(out)


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def entities_for(text: str) -> list[dict[str, Any]]:
    """The entities Telegram attaches to a user's text: a bot_command at the start, @mentions anywhere."""
    found = []
    for m in _WORD_START.finditer(text):
        kind = "mention" if m.group(0).startswith("@") else "bot_command"
        if kind == "bot_command" and m.start() != 0:
            continue
        found.append({"type": kind, "offset": _utf16_len(text[:m.start()]), "length": _utf16_len(m.group(0))})
    return found


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Sent:
    """One message the bot sent: the raw text (HTML when parse_mode is HTML) and what Telegram would show."""

    message_id: int
    chat_id: int
    text: str
    plain: str
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    reply_to: int | None

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """(label, callback_data) of every inline button, row by row."""
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [(b["text"], b.get("callback_data", "")) for row in rows for b in row]


@dataclass(frozen=True)
class Draft:
    """One sendMessageDraft call: the partial text shown in a private chat while the answer is written."""

    chat_id: int
    draft_id: int
    text: str
    at: float


@dataclass
class FakeTelegramAPI:
    """The Bot API on loopback. Push updates with `push_*`; read what the bot did in `calls` and `sent`."""

    token: str = "123456:TEST-token-for-the-loopback-fake"
    poll_wait_s: float = 0.5
    bot_id: int = BOT_ID
    username: str = BOT_USERNAME
    calls: list[Call] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    webhook: dict[str, Any] = field(default_factory=dict)
    drafts: list[Draft] = field(default_factory=list)
    confirmed: int = 0  # updates forgotten because a getUpdates offset passed them
    unreachable: bool = False  # drop every connection, as a blocked network or a dead proxy would

    def __post_init__(self) -> None:
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._chat_types: dict[int, str] = {}
        self._failures: dict[str, list[dict[str, Any]]] = {}
        self._changed = asyncio.Event()  # any call or push: wakes `wait_for`
        self._pushed = asyncio.Event()  # a new update: wakes a long-polling getUpdates
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------------------------
    async def __aenter__(self) -> "FakeTelegramAPI":
        app = web.Application()
        app.router.add_route("POST", "/bot{token}/{method}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._pushed.set()  # wake a pending getUpdates so the server can close at once
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    @property
    def bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": "咖啡顾问", "username": self.username,
                "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False}

    # -- what users do ----------------------------------------------------------------------------------------------
    def chat(self, chat_id: int) -> dict[str, Any]:
        kind = self._chat_types.get(chat_id) or ("private" if chat_id > 0 else "supergroup")
        name = {"first_name": "农户"} if kind == "private" else {"title": "咖啡种植交流群"}
        return {"id": chat_id, "type": kind} | name

    def user(self, user_id: int) -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": f"用户{user_id}", "language_code": "zh-hans"}

    def message(self, chat_id: int, user_id: int | None = None, *, chat_type: str | None = None,
                reply_to: int | None = None, **content: Any) -> dict[str, Any]:
        """A Message from a user; `reply_to` names one of the bot's sent message ids."""
        if chat_type:
            self._chat_types[chat_id] = chat_type
        msg: dict[str, Any] = {"message_id": next(self._message_ids), "date": int(time.time()),
                               "chat": self.chat(chat_id), "from": self.user(user_id or abs(chat_id))} | content
        if reply_to is not None:
            original = next(s for s in self.sent if s.message_id == reply_to)
            msg["reply_to_message"] = self._bot_message(original.chat_id, original.plain, original.message_id)
        return msg

    def push(self, update_content: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._update_ids)} | update_content
        self._updates.append(update)
        self._pushed.set()
        self._changed.set()
        return update

    def push_text(self, chat_id: int, text: str, user_id: int | None = None, *, chat_type: str | None = None,
                  reply_to: int | None = None) -> dict[str, Any]:
        """A user's text message, with the entities Telegram would attach (commands, @mentions)."""
        msg = self.message(chat_id, user_id, chat_type=chat_type, reply_to=reply_to, text=text)
        if entities := entities_for(text):
            msg["entities"] = entities
        return self.push({"message": msg})

    def push_media(self, chat_id: int, kind: str, user_id: int | None = None, *, chat_type: str | None = None,
                   caption: str | None = None) -> dict[str, Any]:
        """A voice, audio, photo, sticker, video or document message."""
        file = {"file_id": f"{kind}-file", "file_unique_id": f"{kind}-u"}
        content: dict[str, Any] = {
            "voice": {"voice": file | {"duration": 3}},
            "audio": {"audio": file | {"duration": 60}},
            "photo": {"photo": [file | {"width": 320, "height": 240}]},
            "sticker": {"sticker": file | {"type": "regular", "width": 512, "height": 512, "is_animated": False,
                                           "is_video": False}},
            "video": {"video": file | {"width": 640, "height": 480, "duration": 5}},
            "document": {"document": file | {"file_name": "病叶.pdf"}},
        }[kind]
        if caption:
            content["caption"] = caption
        return self.push({"message": self.message(chat_id, user_id, chat_type=chat_type, **content)})

    def push_callback(self, sent: Sent, data: str, user_id: int | None = None) -> dict[str, Any]:
        """A user presses an inline button under one of the bot's messages."""
        query = {"id": str(next(self._update_ids) + 500000), "from": self.user(user_id or abs(sent.chat_id)),
                 "chat_instance": f"ci-{sent.chat_id}", "data": data,
                 "message": self._bot_message(sent.chat_id, sent.plain, sent.message_id)}
        return self.push({"callback_query": query})

    def fail_next(self, method: str, *, retry_after: int | None = None, status: int = 429, description: str = "") -> None:
        """The next call of `method` gets an error: a 429 with `retry_after`, or `status` with `description`."""
        body: dict[str, Any] = {"ok": False, "error_code": status,
                                "description": description or f"Too Many Requests: retry after {retry_after}"}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        self._failures.setdefault(method, []).append(body)

    # -- what the test reads ------------------------------------------------------------------------------------------
    def methods(self) -> list[str]:
        return [c.method for c in self.calls]

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, predicate, timeout: float = 10.0) -> None:
        """Wait until `predicate()` is true (checked on every call the bot makes); TimeoutError after `timeout`."""
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(loop(), timeout)

    async def wait_sent(self, n: int, timeout: float = 10.0, chat_id: int | None = None) -> list[Sent]:
        """Wait for at least `n` sent messages (to `chat_id` when given); return them all."""
        mine = lambda: [s for s in self.sent if chat_id is None or s.chat_id == chat_id]  # noqa: E731
        await self.wait_for(lambda: len(mine()) >= n, timeout)
        return mine()

    # -- the server ------------------------------------------------------------------------------------------------
    def _bot_message(self, chat_id: int, text: str, message_id: int | None = None) -> dict[str, Any]:
        return {"message_id": message_id or next(self._message_ids), "date": int(time.time()),
                "chat": self.chat(chat_id), "from": self.bot_user, "text": text}

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            raw = await request.json() if request.can_read_body else {}
            return dict(raw or {})
        form = await request.post()
        params: dict[str, Any] = {}
        for key, value in form.items():
            if not isinstance(value, str) or key in _TEXT_KEYS:
                params[key] = value
                continue
            try:
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
        return params

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if self.unreachable:
            assert request.transport is not None
            request.transport.abort()
            raise ConnectionResetError("the fake Bot API is unreachable")
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        params = await self._params(request)
        self.calls.append(Call(method, params))
        self._changed.set()
        if failures := self._failures.get(method):
            body = failures.pop(0)
            return web.json_response(body, status=body["error_code"])
        handler = getattr(self, f"_api_{method.lower()}", None)
        try:
            result = await handler(params) if handler else True
        except BadHTML as exc:
            return _error(400, f"Bad Request: can't parse entities: {exc}")
        except _ApiError as exc:
            return _error(exc.status, exc.description)
        return web.json_response({"ok": True, "result": result})

    async def _api_getme(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.bot_user

    async def _api_getupdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        if offset:
            kept = [u for u in self._updates if u["update_id"] >= offset]
            self.confirmed += len(self._updates) - len(kept)
            self._updates = kept
        if not self._updates and float(params.get("timeout") or 0) > 0:
            self._pushed.clear()
            try:
                await asyncio.wait_for(self._pushed.wait(), min(self.poll_wait_s, float(params["timeout"])))
            except asyncio.TimeoutError:
                pass
        limit = int(params.get("limit") or 100)
        return self._updates[:limit]

    async def _api_sendmessage(self, params: dict[str, Any]) -> dict[str, Any]:
        text, mode, plain = _message_text(params)
        chat_id = int(params["chat_id"])
        reply_to = (params.get("reply_parameters") or {}).get("message_id") or params.get("reply_to_message_id")
        msg = self._bot_message(chat_id, plain)
        if params.get("reply_markup"):
            msg["reply_markup"] = params["reply_markup"]
        self.sent.append(Sent(msg["message_id"], chat_id, text, plain, mode, params.get("reply_markup"), reply_to))
        return msg

    async def _api_editmessagetext(self, params: dict[str, Any]) -> dict[str, Any]:
        text, mode, plain = _message_text(params)
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        msg = self._bot_message(chat_id, plain, message_id)
        for i, old in enumerate(self.sent):
            if old.chat_id == chat_id and old.message_id == message_id:
                if old.text == text and old.parse_mode == mode and old.reply_markup == params.get("reply_markup"):
                    raise _ApiError(400, "Bad Request: message is not modified: specified new message content and "
                                         "reply markup are exactly the same as a current content and reply markup "
                                         "of the message")
                self.sent[i] = Sent(message_id, chat_id, text, plain, mode, params.get("reply_markup"), old.reply_to)
                break
        else:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if params.get("reply_markup"):
            msg["reply_markup"] = params["reply_markup"]
        return msg

    async def _api_sendmessagedraft(self, params: dict[str, Any]) -> bool:
        chat_id, draft_id = int(params["chat_id"]), int(params.get("draft_id") or 0)
        if self.chat(chat_id)["type"] != "private":
            raise _ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if not draft_id:
            raise _ApiError(400, "Bad Request: draft_id must be non-zero")
        text = str(params.get("text") or "")
        plain = parse_telegram_html(text) if str(params.get("parse_mode")).upper() == "HTML" else text
        if _utf16_len(plain) > 4096:
            raise _ApiError(400, "Bad Request: message is too long")
        self.drafts.append(Draft(chat_id, draft_id, plain, time.monotonic()))
        return True

    async def _api_setwebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = dict(params)
        return True

    async def _api_deletewebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = {}
        return True

    async def _api_getwebhookinfo(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.webhook.get("url", ""), "has_custom_certificate": False, "pending_update_count": 0}


class _ApiError(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status, self.description = status, description


def _error(status: int, description: str) -> web.Response:
    return web.json_response({"ok": False, "error_code": status, "description": description}, status=status)


def _message_text(params: dict[str, Any]) -> tuple[str, Any, str]:
    """(text as sent, parse_mode, text as shown), refused as Telegram refuses an empty or over-long message."""
    text = str(params.get("text", ""))
    mode = params.get("parse_mode")
    plain = parse_telegram_html(text) if str(mode).upper() == "HTML" else text
    if not plain.strip():
        raise _ApiError(400, "Bad Request: message text is empty")
    if _utf16_len(plain) > 4096:
        raise _ApiError(400, "Bad Request: message is too long")
    return text, mode, plain
