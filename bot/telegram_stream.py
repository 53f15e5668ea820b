"""A Telegram answer shown while the LLM writes it: a draft (`sendMessageDraft`, Bot API 9.3+) in a private chat,
else one message that is edited; the channel then puts the final text (footnotes, 原文 buttons) in its place.

Partial texts are plain text without citation ids: ids are validated, numbered and footnoted in the final text only,
so an id the model invents is never shown, not even for a second.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ChatType
from telegram.error import BadRequest, InvalidToken, TelegramError

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096  # UTF-16 code units
_PARTIAL_CITATION_RE = re.compile(r"[ \t]*[\[【][^\[\]【】\n]{0,80}#[^\[\]【】\n]{0,16}[\]】]")


def partial_text(raw: str) -> str:
    """What a user sees of an answer still being written: the LLM's text without citation ids (they are checked,
    numbered and footnoted only in the final text), a half-written "[…" cut off, at most one message long."""
    text = _PARTIAL_CITATION_RE.sub("", raw)
    opened = max(text.rfind("["), text.rfind("【"))
    if opened >= 0 and "]" not in text[opened:] and "】" not in text[opened:]:
        text = text[:opened]
    text = text.strip()
    if len(text.encode("utf-16-le")) // 2 > MESSAGE_LIMIT - 2:
        text = text[:MESSAGE_LIMIT // 2 - 1] + "…"
    return text


class AnswerStream:
    """The answer as the LLM writes it, shown in one place: a draft in a private chat, else one message edited.

    `feed` is called from the generation thread with each new piece; an asyncio task shows the text so far at once
    and then at most every `interval_s`. `states` records what was shown, and when.
    """

    def __init__(self, bot: Bot, msg: Message, interval_s: float, reply_to: int | None = None) -> None:
        self.bot, self.chat_id, self.interval, self.reply_to = bot, msg.chat_id, interval_s, reply_to
        self.private = msg.chat.type == ChatType.PRIVATE
        self.draft_id = msg.message_id or 1  # non-zero; one draft per question
        self.message: Message | None = None  # the streamed message (edit mode)
        self.states: list[tuple[float, str, str]] = []  # (seconds since the question, "draft"/"message"/"edit", text)
        self._pieces: list[str] = []
        self._shown = ""
        self._started = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._done = asyncio.Event()
        self._task: asyncio.Task | None = None

    def feed(self, piece: str) -> None:
        """A streamed piece (any thread)."""
        self._pieces.append(piece)
        self._loop.call_soon_threadsafe(self._wake.set)

    async def __aenter__(self) -> "AnswerStream":
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        """No more partial states; one being sent is let finish (so the streamed message is known)."""
        self._done.set()
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if self._done.is_set():
                return
            self._wake.clear()
            await self._show(partial_text("".join(self._pieces)))
            try:
                await asyncio.wait_for(self._done.wait(), self.interval)
                return
            except asyncio.TimeoutError:
                pass

    async def _show(self, text: str) -> None:
        if not text or text == self._shown:
            return
        bot = self.bot
        try:
            if self.private:
                try:
                    await bot.send_message_draft(self.chat_id, self.draft_id, text)
                    kind = "draft"
                except (BadRequest, InvalidToken) as exc:  # a Bot API server without drafts (404): edit instead
                    log.info("telegram: no draft streaming in chat %s (%s); editing a message", self.chat_id, exc.message)
                    self.private = False
                    await self._show(text)
                    return
            elif self.message is None:
                params = ReplyParameters(self.reply_to, allow_sending_without_reply=True) if self.reply_to else None
                self.message = await bot.send_message(self.chat_id, text, reply_parameters=params)
                kind = "message"
            else:
                await bot.edit_message_text(text, self.chat_id, self.message.message_id)
                kind = "edit"
        except TelegramError as exc:
            log.warning("telegram: streaming to %s failed: %s", self.chat_id, exc)
            return
        self._shown = text
        self.states.append((time.monotonic() - self._started, kind, text))
