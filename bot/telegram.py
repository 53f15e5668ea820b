"""The Telegram channel (python-telegram-bot ≥ 21): updates in, HTML messages out.

Thin on purpose: commands, rate limits, history and answers live in `ChatService`; this module only knows the wire:
who is addressed in a group, "typing…", HTML pieces under Telegram's limits, source buttons, and flood control.
Long polling by default; `[telegram] mode = "webhook"` serves a webhook guarded by a secret derived from the token
(that needs `python-telegram-bot[webhooks]`, i.e. tornado).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import warnings
from datetime import timedelta
from html import unescape
from typing import Awaitable, Callable, TypeVar
from urllib.parse import urlsplit

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters, Update
from telegram.constants import ChatAction, ChatType, MessageEntityType, ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters

from rag_core.config import Config

from .formatting import escape_html, split_text, telegram_html
from .service import NON_TEXT, ChatService, Incoming, Reply, admin_ids, plain

log = logging.getLogger(__name__)
T = TypeVar("T")

CHANNEL = "telegram"
SOURCE_PREFIX = "src:"  # callback data of a 原文n button: "src:e76faa05#3" (Telegram allows 64 bytes)
MESSAGE_LIMIT = 4096  # UTF-16 code units
SEND_ATTEMPTS = 3  # first try plus retries after a 429
MAX_RETRY_WAIT_S = 60.0  # a longer flood wait is not worth holding a handler for
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


def _retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns that the int form is deprecated in favour of timedelta
        warnings.simplefilter("ignore")
        wait = exc.retry_after
    return wait.total_seconds() if isinstance(wait, timedelta) else float(wait)


class TelegramChannel:
    """Runs one bot: `await start()` returns once polling (or the webhook) is up; `await stop()` drains and closes."""

    typing_every_s = 4.0  # Telegram shows "typing…" for about 5 s per chat action

    def __init__(self, cfg: Config, token: str, service: ChatService) -> None:
        self.cfg, self.service, self._token = cfg, service, token
        tg = cfg.telegram
        self.app: Application = (
            Application.builder().token(token).base_url(tg.base_url).base_file_url(tg.base_file_url)
            .concurrent_updates(max(1, cfg.bot.max_concurrent) * 4).build()
        )
        new = filters.UpdateType.MESSAGE  # edits and channel posts are not questions
        self.app.add_handler(CallbackQueryHandler(self.on_source_button, pattern=f"^{SOURCE_PREFIX}"))
        self.app.add_handler(MessageHandler(new & filters.COMMAND, self.on_command))
        self.app.add_handler(MessageHandler(new & filters.TEXT & ~filters.COMMAND, self.on_text))
        self.app.add_handler(MessageHandler(new & MEDIA, self.on_media))
        self.app.add_error_handler(self.on_error)

    async def start(self) -> None:
        """Connect (getMe), publish the command list, then start polling or the webhook."""
        tg = self.cfg.telegram
        if tg.mode == "webhook" and not tg.webhook_url:
            raise ValueError('[telegram] webhook_url must be set when [telegram] mode = "webhook"')
        await self.app.initialize()
        try:
            await self._retrying(lambda: self.app.bot.set_my_commands(COMMANDS), "the command list")
            await self.app.start()
            if tg.mode == "webhook":
                await self.app.updater.start_webhook(  # type: ignore[union-attr]
                    listen=tg.listen, port=tg.port, url_path=urlsplit(tg.webhook_url).path.lstrip("/"),
                    webhook_url=tg.webhook_url, secret_token=webhook_secret(self._token),
                    allowed_updates=["message", "callback_query"], drop_pending_updates=False)
            else:
                await self.app.updater.start_polling(  # type: ignore[union-attr]
                    allowed_updates=["message", "callback_query"], drop_pending_updates=False)
        except BaseException:
            await self.stop()
            raise
        log.info("telegram: @%s is up (%s)", self.app.bot.username, tg.mode)

    async def stop(self) -> None:
        """Stop fetching updates, let answers in progress be sent, then close the HTTP clients."""
        updater = self.app.updater
        if updater is not None and updater.running:
            await updater.stop()
        if self.app.running:
            await self.app.stop()
        await self.app.shutdown()

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
        await self._retrying(query.answer, "a callback answer")
        chat_id = query.message.chat.id if query.message else query.from_user.id
        reply = await self.service.source(query.data.removeprefix(SOURCE_PREFIX), (CHANNEL, str(chat_id)))
        await self.send_reply(chat_id, reply)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Log what a handler (or polling) raised; the bot keeps running."""
        update_id = getattr(update, "update_id", None)
        log.error("telegram: error while handling update %s", update_id, exc_info=context.error)

    # -- sending --------------------------------------------------------------------------------------------------
    async def _respond(self, msg: Message, update: Update, text: str) -> None:
        """Show "typing…" while the service prepares the reply, then send it."""
        user = update.effective_user
        incoming = Incoming(CHANNEL, str(msg.chat_id), str(user.id if user else msg.chat_id), text)
        typing = asyncio.create_task(self._keep_typing(msg.chat_id))
        try:
            reply = await self.service.handle(incoming)
        finally:
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)
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

        return await self._retrying(send, f"a message to {chat_id}")

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str) -> T | None:
        """Await `call()`, waiting out flood control (429) a few times; other Telegram errors are logged."""
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                return await call()
            except RetryAfter as exc:
                wait = _retry_seconds(exc)
                if attempt == SEND_ATTEMPTS or wait > MAX_RETRY_WAIT_S:
                    log.error("telegram: gave up sending %s: flood control asks to wait %.0f s", what, wait)
                    return None
                log.warning("telegram: flood control, resending %s in %.1f s", what, wait)
                await asyncio.sleep(wait)
            except TelegramError as exc:
                log.error("telegram: could not send %s: %s", what, exc)
                return None
        return None

    @staticmethod
    def _reply_to(msg: Message) -> int | None:
        """In groups the answer quotes the question so the thread stays readable; in private chats it does not."""
        return msg.message_id if msg.chat.type in _GROUPS else None
