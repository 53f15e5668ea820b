"""The Telegram channel (python-telegram-bot ≥ 22.6): updates in, HTML messages out.

Thin on purpose: commands, rate limits, history and answers live in `ChatService`; this module only knows the wire:
who is addressed in a group, "typing…", a streamed answer, HTML pieces under Telegram's limits, source buttons.

- Every update goes through the durable inbox (bot/inbox.py) before Telegram may forget it, and is marked done once
  handled, so a crash loses no question; on start the stored ones without an answer are handled first. Polling is
  our own loop over `Bot.get_updates`: a batch is stored before the next call's offset confirms it. In
  `[telegram] mode = "webhook"` our aiohttp server stores the update before answering 200 (Telegram re-sends until
  it gets a 200), and checks a secret derived from the token.
- Connecting never ends the process: with no route to Telegram (blocked, no proxy, proxy down) the channel retries
  with capped exponential backoff, one log line per attempt, while the other channels keep running; `status()` says
  where it stands. `[telegram] proxy` sends every call through an HTTP or SOCKS5 proxy (PTB's own settings).
- Flood control (429) is PTB's `AIORateLimiter`: it spaces messages within Telegram's limits and waits out a
  RetryAfter before resending.
- With an LLM the answer grows in one message while it is written: a draft (`sendMessageDraft`) in private chats,
  edits of one message in groups, at most once per `[telegram] stream_interval_s`; then the final text with
  footnotes and 原文 buttons (bot/telegram_stream.py). Partial texts never show citation ids: citations are validated
  on the final text only.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from html import unescape
from typing import Any, Awaitable, Callable, TypeVar
from urllib.parse import urlsplit

from aiohttp import web
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters, Update
from telegram.constants import ChatAction, ChatType, MessageEntityType, ParseMode
from telegram.error import BadRequest, TelegramError
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters

from rag_core.config import Config

from . import metrics
from .formatting import escape_html, split_text, telegram_html
from .inbox import MAX_ATTEMPTS, Inbox
from .service import NON_TEXT, ChatService, Incoming, Reply, admin_ids, plain
from .telegram_stream import AnswerStream

log = logging.getLogger(__name__)
T = TypeVar("T")

CHANNEL = "telegram"
SOURCE_PREFIX = "src:"  # callback data of a 原文n button: "src:e76faa05#3" (Telegram allows 64 bytes)
MESSAGE_LIMIT = 4096  # UTF-16 code units
SEND_RETRIES = 2  # resends after a 429 (AIORateLimiter waits out the RetryAfter first)
ALLOWED_UPDATES = ["message", "callback_query"]
COMMANDS = [("start", "开始使用"), ("help", "帮助"), ("source", "查看引用原文，例如 /source e76faa05#3"),
            ("reset", "清除对话记录")]
MEDIA = (filters.VOICE | filters.AUDIO | filters.PHOTO | filters.Sticker.ALL | filters.VIDEO | filters.VIDEO_NOTE
         | filters.Document.ALL)
_GROUPS = (ChatType.GROUP, ChatType.SUPERGROUP)
_COMMAND_RE = re.compile(r"^(/[A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?(.*)$", re.DOTALL)
_TAG_RE = re.compile(r"<[^<>]+>")


def webhook_secret(token: str) -> str:
    """The X-Telegram-Bot-Api-Secret-Token for our webhook: stable per bot token, never the token itself."""
    return hmac.new(token.encode(), b"coffeebot telegram webhook", hashlib.sha256).hexdigest()


def source_keyboard(buttons: tuple[tuple[str, str], ...]) -> InlineKeyboardMarkup | None:
    """原文1 原文2 … buttons, four to a row; ids whose callback data would pass 64 bytes are left out."""
    keys = [InlineKeyboardButton(label, callback_data=f"{SOURCE_PREFIX}{cid}") for label, cid in buttons
            if len(f"{SOURCE_PREFIX}{cid}".encode()) <= 64]
    return InlineKeyboardMarkup([keys[i:i + 4] for i in range(0, len(keys), 4)]) if keys else None


def reply_html(reply: Reply) -> list[str]:
    """The HTML messages for a reply; a source passage gets its heading line (id, title, section) in bold."""
    if reply.kind != "source":
        return telegram_html(reply.body)
    head, _, rest = reply.text.partition("\n")
    body = f"<b>{escape_html(head)}</b>" + (f"\n{escape_html(rest)}" if rest else "")
    return split_text(body, MESSAGE_LIMIT, lambda s: len(s.encode("utf-16-le")) // 2, html=True)


def redact_proxy(url: str) -> str:
    """A proxy URL for logs and /healthz: scheme, host and port, never a user or password."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"


def addressed_text(msg: Message, bot_id: int, username: str) -> str | None:
    """The text meant for the bot with its @mention removed; None for a group message not addressed to the bot."""
    text = msg.text or msg.caption or ""
    if msg.chat.type not in _GROUPS:
        return text
    kinds = [MessageEntityType.MENTION, MessageEntityType.TEXT_MENTION]
    found = msg.parse_entities(kinds) if msg.text else msg.parse_caption_entities(kinds)
    mine = [t for e, t in found.items()
            if (e.type == MessageEntityType.MENTION and t[1:].lower() == username.lower())
            or (e.user is not None and e.user.id == bot_id)]
    to_bot = msg.reply_to_message is not None and msg.reply_to_message.from_user is not None \
        and msg.reply_to_message.from_user.id == bot_id
    if not mine and not to_bot:
        return None
    for mention in mine:
        text = text.replace(mention, "", 1)
    return text.strip()


class TelegramChannel:
    """Runs one bot: `await start()` returns once connected or, when Telegram cannot be reached, once retrying has
    begun in the background; `await stop()` stops fetching, lets answers in progress be sent, and closes."""

    typing_every_s = 4.0  # Telegram shows "typing…" for about 5 s per chat action
    poll_timeout_s = 20  # long polling: Telegram holds an empty getUpdates this long
    retry_first_s = 1.0  # reconnect backoff: 1 s, 2 s, 4 s, … up to [telegram] retry_max_s
    drain_s = 30.0  # how long stop() waits for answers in progress (the rest are answered after the restart)
    group_stream_interval_s = 3.0  # Telegram allows about 20 messages (edits too) per minute in a group

    def __init__(self, cfg: Config, token: str, service: ChatService) -> None:
        self.cfg, self.service, self._token = cfg, service, token
        tg = cfg.telegram
        builder = (
            Application.builder().token(token).base_url(tg.base_url).base_file_url(tg.base_file_url)
            .rate_limiter(metrics.counting_rate_limiter(SEND_RETRIES))  # AIORateLimiter, 429s counted
        )
        if tg.proxy:
            builder = builder.proxy(tg.proxy).get_updates_proxy(tg.proxy)
        # no PTB Updater: it confirms (polling) or acknowledges (webhook) updates before they are stored
        self.app: Application = builder.updater(None).build()
        new = filters.UpdateType.MESSAGE  # edits and channel posts are not questions
        self.app.add_handler(CallbackQueryHandler(self.on_source_button, pattern=f"^{SOURCE_PREFIX}"))
        self.app.add_handler(MessageHandler(new & filters.COMMAND, self.on_command))
        self.app.add_handler(MessageHandler(new & filters.TEXT & ~filters.COMMAND, self.on_text))
        self.app.add_handler(MessageHandler(new & MEDIA, self.on_media))
        self.app.add_error_handler(self.on_error)
        self.inbox: Inbox | None = None
        self._slots = asyncio.Semaphore(max(1, cfg.bot.max_concurrent) * 4)  # updates handled at once
        self._handling: set[asyncio.Task] = set()
        self._runner: asyncio.Task | None = None
        self._webhook: web.AppRunner | None = None
        self._state, self._since, self._attempt, self._last_error = "starting", time.time(), 0, ""

    # -- lifecycle ------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the inbox and connect; with no route to Telegram, keep trying in the background and return."""
        tg = self.cfg.telegram
        if tg.mode == "webhook" and not tg.webhook_url:
            raise ValueError('[telegram] webhook_url must be set when [telegram] mode = "webhook"')
        bot_id = int(self._token.partition(":")[0]) if self._token.partition(":")[0].isdigit() else 0
        self.inbox = await Inbox.open(self.cfg.data_dir / tg.inbox_db, bot_id, url=self.cfg.storage.url,
                                      lease_s=self.cfg.storage.claim_lease_s)
        try:
            await self._connect()
        except TelegramError as exc:
            self._failed(exc, self.retry_first_s)
            self._runner = asyncio.create_task(self._reconnect(), name="telegram-reconnect")
            return
        except BaseException:
            await self.stop()
            raise
        self._connected()
        self._runner = asyncio.create_task(self._run(), name="telegram-updates")

    async def stop(self) -> None:
        """Stop fetching updates, let answers in progress be sent, then close the HTTP clients and the inbox."""
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        if self._webhook is not None:
            await self._webhook.cleanup()
            self._webhook = None
        if self._handling:
            done, unfinished = await asyncio.wait(set(self._handling), timeout=self.drain_s)
            for task in unfinished:  # still in the inbox: answered after the restart
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
        if self.app.running:
            await self.app.stop()
        await self.app.shutdown()
        if self.inbox is not None:
            await self.inbox.close()
            self.inbox = None
        self._state = "stopped"

    def status(self) -> dict[str, Any]:
        """Where the channel stands, for /healthz: state "connected" / "retrying" / "starting" / "stopped"."""
        tg = self.cfg.telegram
        return {"channel": CHANNEL, "state": self._state, "connected": self._state == "connected",
                "since": self._since, "attempts": self._attempt, "last_error": self._last_error or None,
                "mode": tg.mode, "proxy": redact_proxy(tg.proxy) if tg.proxy else None,
                "in_progress": len(self._handling)}

    async def _connect(self) -> None:
        """getMe, the command list, then our webhook server and setWebhook (or, for polling, no webhook in the way)."""
        tg = self.cfg.telegram
        await self.app.initialize()
        await self.app.bot.set_my_commands(COMMANDS)
        if not self.app.running:
            await self.app.start()
        if tg.mode == "webhook":
            if self._webhook is None:
                self._webhook = await self._serve_webhook()
            await self.app.bot.set_webhook(tg.webhook_url, secret_token=webhook_secret(self._token),
                                           allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)
        else:
            await self.app.bot.delete_webhook(drop_pending_updates=False)

    def _connected(self) -> None:
        if self._state != "connected":
            how = self.cfg.telegram.mode + (f" via {redact_proxy(self.cfg.telegram.proxy)}" if self.cfg.telegram.proxy else "")
            log.info("telegram: @%s is up (%s)%s", self.app.bot.username, how,
                     f" after {self._attempt} failed attempts" if self._attempt else "")
        self._state, self._since, self._attempt = "connected", time.time(), 0

    def _failed(self, exc: BaseException, retry_in: float) -> None:
        """One line per failed attempt: what went wrong (never the token) and when the next try is."""
        self._attempt += 1
        metrics.count_telegram_retry("connect")
        if self._state != "retrying":
            self._since = time.time()
        self._state = "retrying"
        self._last_error = f"{type(exc).__name__}: {exc}".replace(self._token, "<token>")[:300]
        via = f" via {redact_proxy(self.cfg.telegram.proxy)}" if self.cfg.telegram.proxy else ""
        log.warning("telegram: cannot reach the Bot API%s (attempt %d: %s); retrying in %.3g s",
                    via, self._attempt, self._last_error, retry_in)

    async def _reconnect(self) -> None:
        delay = self.retry_first_s
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.cfg.telegram.retry_max_s)
            try:
                await self._connect()
            except TelegramError as exc:
                self._failed(exc, delay)
                continue
            break
        self._connected()
        await self._run()

    # -- updates through the inbox ----------------------------------------------------------------------------------
    async def _run(self) -> None:
        """Handle what the inbox kept from before; then, when polling, fetch → store → confirm → handle."""
        assert self.inbox is not None
        found = await self.inbox.recover(self.cfg.telegram.inbox_max_age_s)
        if found.pending or found.stale or found.abandoned:  # a warning when questions go unanswered
            log.log(logging.WARNING if found.stale or found.abandoned else logging.INFO,
                    "telegram: %d stored updates from before the restart to handle; %d skipped as older than %d s, "
                    "%d after %s attempts", len(found.pending), found.stale, self.cfg.telegram.inbox_max_age_s,
                    found.abandoned, MAX_ATTEMPTS)
        for stored in found.pending:
            update = Update.de_json(stored.payload, self.app.bot)
            if update is not None:
                self._handle(update)
        if self.cfg.telegram.mode == "polling":
            await self._poll()

    async def _poll(self) -> None:
        assert self.inbox is not None
        offset, delay = 0, self.retry_first_s
        while True:
            try:
                updates = await self.app.bot.get_updates(offset=offset, timeout=self.poll_timeout_s,
                                                         allowed_updates=ALLOWED_UPDATES)
            except TelegramError as exc:
                self._failed(exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.cfg.telegram.retry_max_s)
                continue
            self._connected()
            try:
                fresh = await self.inbox.store([(u.update_id, u.to_dict()) for u in updates])
            except Exception:  # not stored, so not confirmed: the same batch is fetched again
                log.exception("telegram: could not store %d updates; fetching them again in %.0f s", len(updates), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.cfg.telegram.retry_max_s)
                continue
            delay = self.retry_first_s
            if updates:
                offset = max(u.update_id for u in updates) + 1
            for update in updates:
                if update.update_id in fresh:
                    self._handle(update)

    async def _serve_webhook(self) -> web.AppRunner:
        """Our webhook endpoint on `[telegram] listen:port`, at the path of `webhook_url`."""
        tg = self.cfg.telegram
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_post("/" + urlsplit(tg.webhook_url).path.lstrip("/"), self._on_webhook)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, tg.listen, tg.port).start()
        return runner

    async def _on_webhook(self, request: web.Request) -> web.Response:
        """One update from Telegram: 200 only once it is stored (a 5xx makes Telegram send it again)."""
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not hmac.compare_digest(given.encode(), webhook_secret(self._token).encode()):
            log.warning("telegram: webhook call without the right secret token from %s", request.remote)
            return web.Response(status=403)
        try:
            data = await request.json()
            update = Update.de_json(data, self.app.bot)
        except Exception:  # noqa: BLE001 - not an update: nothing Telegram would re-send
            log.warning("telegram: unreadable webhook body from %s", request.remote)
            return web.Response(status=400)
        if update is None or self.inbox is None:
            return web.Response(status=400 if update is None else 503)
        fresh = await self.inbox.store([(update.update_id, data)])
        if update.update_id in fresh:
            self._handle(update)
        return web.Response(status=200)

    def _handle(self, update: Update) -> None:
        task = asyncio.create_task(self._process(update), name=f"telegram-update-{update.update_id}")
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    async def _process(self, update: Update) -> None:
        """Run the handlers (their errors go to `on_error`), then mark the update done in the inbox."""
        async with self._slots:
            await self.app.process_update(update)
        if self.inbox is not None:
            await self.inbox.done(update.update_id)

    # -- handlers -------------------------------------------------------------------------------------------------
    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A question: answer it; in a group only when the bot is @mentioned or replied to."""
        msg = update.effective_message
        text = addressed_text(msg, context.bot.id, context.bot.username) if msg else None
        if msg is not None and text is not None:
            await self._respond(msg, update, text)

    async def on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A command: the service runs it; "/help@OtherBot" is left to the other bot."""
        msg = update.effective_message
        m = _COMMAND_RE.match(msg.text or "") if msg else None
        if msg is None or m is None or (m.group(2) and m.group(2).lower() != context.bot.username.lower()):
            return
        await self._respond(msg, update, m.group(1) + m.group(3))

    async def on_media(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A voice, photo, sticker or file: ask politely for text (in a group only when addressed)."""
        msg = update.effective_message
        if msg is not None and addressed_text(msg, context.bot.id, context.bot.username) is not None:
            await self.send_reply(msg.chat_id, plain("notice", NON_TEXT), self._reply_to(msg))

    async def on_source_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A 原文n button: acknowledge it, then send the cited passage as a new message."""
        query = update.callback_query
        if query is None or not query.data:
            return
        await self._quietly(query.answer, "a callback answer")
        chat_id = query.message.chat.id if query.message else query.from_user.id
        reply = await self.service.source(query.data.removeprefix(SOURCE_PREFIX), (CHANNEL, str(chat_id)))
        await self.send_reply(chat_id, reply)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Log what a handler raised; the bot keeps running."""
        update_id = getattr(update, "update_id", None)
        log.error("telegram: error while handling update %s", update_id, exc_info=context.error)

    # -- answering --------------------------------------------------------------------------------------------------
    async def _respond(self, msg: Message, update: Update, text: str) -> None:
        """Show "typing…" (and, with an LLM, the answer as it is written) while the service prepares the reply."""
        user = update.effective_user
        incoming = Incoming(CHANNEL, str(msg.chat_id), str(user.id if user else msg.chat_id), text)
        stream = None
        if self.cfg.telegram.stream and getattr(self.service.engine, "chat", None) is not None \
                and not text.startswith("/"):
            tg, private = self.cfg.telegram, msg.chat.type == ChatType.PRIVATE
            interval = tg.stream_interval_s if private else max(tg.stream_interval_s, self.group_stream_interval_s)
            stream = AnswerStream(self.app.bot, msg, interval, self._reply_to(msg))
        typing = asyncio.create_task(self._keep_typing(msg.chat_id))
        try:
            if stream is None:
                reply = await self.service.handle(incoming)
            else:
                async with stream:
                    reply = await self.service.handle(incoming, on_delta=stream.feed)
        finally:
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)
        if stream is not None and stream.message is not None:
            await self._replace(stream.message, reply, self._reply_to(msg))
        else:
            await self.send_reply(msg.chat_id, reply, self._reply_to(msg))

    async def _keep_typing(self, chat_id: int) -> None:
        """Send the typing action every few seconds until cancelled."""
        while True:
            try:
                await self.app.bot.send_chat_action(chat_id, ChatAction.TYPING)
            except TelegramError as exc:
                log.debug("telegram: typing action for %s failed: %s", chat_id, exc)
            await asyncio.sleep(self.typing_every_s)

    async def notify_admins(self, text: str) -> None:
        """Send an index report to the Telegram admins of `[bot] admins` (their private chats)."""
        for chat_id in admin_ids(self.cfg.bot.admins, "telegram"):
            if chat_id.lstrip("-").isdigit():
                await self.send_reply(int(chat_id), plain("notice", text))

    # -- sending --------------------------------------------------------------------------------------------------
    async def send_reply(self, chat_id: int, reply: Reply, reply_to: int | None = None) -> list[Message]:
        """Send a service reply as HTML messages; the source buttons go under the last one."""
        pieces = reply_html(reply)
        keyboard = source_keyboard(reply.buttons)
        sent = []
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            message = await self._send(chat_id, piece, keyboard if last else None, reply_to if i == 0 else None)
            if message is not None:
                sent.append(message)
        return sent

    async def _replace(self, streamed: Message, reply: Reply, reply_to: int | None) -> None:
        """The final reply over a streamed message: its first piece edits that message, the rest follow."""
        pieces = reply_html(reply)
        keyboard = source_keyboard(reply.buttons)
        markup = keyboard if len(pieces) == 1 else None

        async def edit() -> Any:
            try:
                return await streamed.edit_text(pieces[0], parse_mode=ParseMode.HTML, reply_markup=markup)
            except BadRequest as exc:
                if "not modified" in exc.message.lower():
                    return True
                if "entities" not in exc.message.lower():
                    raise
                log.error("telegram: rejected our HTML (%s); sending it as plain text", exc.message)
                return await streamed.edit_text(unescape(_TAG_RE.sub("", pieces[0])), reply_markup=markup)

        if await self._quietly(edit, f"the final text over message {streamed.message_id}") is None:
            await self.send_reply(streamed.chat_id, reply, reply_to)  # the streamed message is gone: send anew
            return
        for i, piece in enumerate(pieces[1:], start=1):
            await self._send(streamed.chat_id, piece, keyboard if i == len(pieces) - 1 else None, None)

    async def _send(
        self, chat_id: int, html: str, keyboard: InlineKeyboardMarkup | None, reply_to: int | None
    ) -> Message | None:
        """One HTML message; should Telegram reject the HTML, the same text goes out plain."""
        extra = {"reply_markup": keyboard,
                 "reply_parameters": ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None}

        async def send() -> Message:
            try:
                return await self.app.bot.send_message(chat_id, html, parse_mode=ParseMode.HTML, **extra)
            except BadRequest as exc:
                if "entities" not in exc.message.lower():
                    raise
                log.error("telegram: rejected our HTML (%s); sending it as plain text", exc.message)
                return await self.app.bot.send_message(chat_id, unescape(_TAG_RE.sub("", html)), **extra)

        return await self._quietly(send, f"a message to {chat_id}")

    async def _quietly(self, call: Callable[[], Awaitable[T]], what: str) -> T | None:
        """Await `call()` (the rate limiter has already waited out any 429); a Telegram error is logged, not raised."""
        try:
            return await call()
        except TelegramError as exc:
            log.error("telegram: could not send %s: %s", what, str(exc).replace(self._token, "<token>"))
            return None

    @staticmethod
    def _reply_to(msg: Message) -> int | None:
        """In groups the answer quotes the question so the thread stays readable; in private chats it does not."""
        return msg.message_id if msg.chat.type in _GROUPS else None
