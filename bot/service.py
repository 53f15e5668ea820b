"""The chat service every channel uses: (channel, chat, user, text) → Reply. Commands live here once.

The user's turn is committed before work starts and the answer before it is returned for sending, so a crash loses
no stored history. CPU-bound work (retrieval, generation) runs in a thread; a semaphore caps concurrent answers.

Every message is made safe here, once, whatever the channel: broken text (lone surrogates, undecodable bytes,
control characters) is replaced, a question is clipped to `[retrieval] max_query_chars`, and one chat's questions
are answered one after another, so its history reads question, answer, question, answer.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Literal

from rag_core.config import Config
from rag_core.ids import parse_id
from rag_core.index.layout import Layout
from rag_core.index.store import IndexUnavailable
from rag_core.pipeline import Engine
from rag_core.records import Answer, Chunk, Turn
from rag_core.retrieve import QueryError
from rag_core.sources import resolve_source

from . import metrics
from .formatting import Footnoted, footnote
from .history_store import HistoryStore, StoredTurn

log = logging.getLogger(__name__)

ReplyKind = Literal["answer", "command", "source", "notice", "error"]

SOURCE_HINT = {
    "telegram": "点“原文”按钮或发送 /source 编号",
    "wechat": "回复“原文1”（或“原文 编号”）",
}
WELCOME = (
    "您好！我是云南小粒咖啡种植顾问，根据农业技术资料回答咖啡种植、病虫害、施肥、修剪、采收加工等问题，"
    "每条要点后面都标有出处编号，{source_hint}可查看原文。\n\n"
    "可以这样问：\n• 叶子背面有黄粉咋办？\n• 卡蒂姆一年施几次肥？\n• 咖啡果小蠹怎么防治？\n• 鲜果采回来多久要脱皮？\n\n"
    "命令：/help 帮助　/source 编号 查看原文　/reset 清除对话记录"
)
RATE_LIMITED = "您发消息有点快，请稍等一分钟再问，谢谢理解。"
BUSY_ERROR = "抱歉，系统暂时出了点问题，没能回答这个问题。请稍后再试。"
INDEX_MISSING = "知识库索引正在建立或暂不可用，请稍后再试。"
EMPTY_QUESTION = "请直接输入您的问题，例如：咖啡锈病怎么防治？"
ADMIN_ONLY = "这个命令只对管理员开放。"
NON_TEXT = "目前只能识别文字消息，请用文字描述您的问题（例如：叶片背面有橙黄色粉末怎么办？）。"
NO_ANSWER_YET = "还没有可以查看的出处。请先提问，再发送 /source 1 查看回答中第1条出处的原文。"
NO_SUCH_FOOTNOTE = "上一条回答只有 {count} 条出处，请发送 /source 1 到 /source {count} 之间的编号。"

UNLIMITED_CHANNELS = frozenset({"console"})  # the person at the terminal runs the machine: no rate limit
DOUBLE_TAP_S = 10.0  # the same question again in one chat within this many seconds is answered once
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0/C1 controls except tab and newline


def clean_input(text: str) -> str:
    """A message as it can be stored, logged and echoed: lone surrogates and undecodable bytes (carried as
    surrogate escapes) become U+FFFD, a surrogate pair written as two halves becomes its character, line ends
    become "\\n" and other control characters (NUL, ESC, …) spaces."""
    if not text.isascii():
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub(" ", text)


def welcome(channel: str) -> str:
    return WELCOME.format(source_hint=SOURCE_HINT.get(channel, "发送 /source 编号"))


def admin_ids(admins: tuple[str, ...], channel: str) -> list[str]:
    """The ids of `[bot] admins` on one channel: "telegram:123" entries, and bare ids (any channel)."""
    ids = []
    for entry in admins:
        name, sep, ident = entry.partition(":")
        if not sep:
            ids.append(entry)
        elif name == channel:
            ids.append(ident)
    return ids


@dataclass(frozen=True)
class Incoming:
    channel: str
    chat_id: str
    user_id: str
    text: str


@dataclass(frozen=True)
class Reply:
    kind: ReplyKind
    body: Footnoted  # text with [n] markers and the numbered sources
    buttons: tuple[tuple[str, str], ...] = ()  # (label "原文1", citation id)
    answer: Answer | None = None

    @property
    def text(self) -> str:
        return self.body.text


def plain(kind: ReplyKind, text: str) -> Reply:
    return Reply(kind, Footnoted(text, ()))


def source_label(chunk: Chunk) -> str:
    """A compact label for a phone: the last two levels of the heading path, else the title."""
    parts = [p for p in chunk.section.split(" › ") if p]
    return " › ".join(parts[-2:]) if parts else chunk.title


@dataclass
class RateLimiter:
    """At most `per_minute` messages per chat in any 60 s. Chats idle for a minute are forgotten (swept at most
    once a minute), so memory follows the chats active lately, not every chat ever seen."""

    per_minute: int
    clock: Callable[[], float] = time.monotonic
    window_s: float = 60.0
    _seen: dict[tuple[str, str], deque] = field(default_factory=dict)
    _swept: float = float("-inf")

    def allow(self, key: tuple[str, str]) -> bool:
        if self.per_minute <= 0:
            return True
        now = self.clock()
        if now - self._swept >= self.window_s:
            self._seen = {k: q for k, q in self._seen.items() if q and now - q[-1] < self.window_s}
            self._swept = now
        q = self._seen.setdefault(key, deque())
        while q and now - q[0] >= self.window_s:
            q.popleft()
        if len(q) >= self.per_minute:
            return False
        q.append(now)
        return True


class ChatLocks:
    """One asyncio lock per chat, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: tuple[str, str]) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


@dataclass(frozen=True)
class _Answered:
    question: str
    arrived: float  # service clock
    reply: Reply


class ChatService:
    def __init__(
        self,
        cfg: Config,
        engine: Engine,
        history: HistoryStore,
        reindex: Callable[[], Awaitable[str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cfg = cfg
        self.engine = engine
        self.history = history
        self.reindex = reindex
        self.clock = clock
        self.limiter = RateLimiter(cfg.bot.rate_limit_per_minute, clock)
        self._slots = asyncio.Semaphore(max(1, cfg.bot.max_concurrent))
        self._chats = ChatLocks()
        self._answered: dict[tuple[str, str], _Answered] = {}  # each chat's last answer, for double taps
        self.started = time.time()

    def is_admin(self, channel: str, user_id: str) -> bool:
        return user_id in admin_ids(self.cfg.bot.admins, channel)

    async def handle(self, msg: Incoming, on_delta: Callable[[str], None] | None = None) -> Reply:
        """The reply to one message from any channel; never raises for anything a user can type."""
        arrived = self.clock()
        text = clean_input(msg.text).strip()
        if text.startswith("/"):
            return await self._command(msg, text)
        if not text:
            return plain("notice", EMPTY_QUESTION)
        key = (msg.channel, msg.chat_id)
        if msg.channel not in UNLIMITED_CHANNELS and not self.limiter.allow(key):
            return plain("notice", RATE_LIMITED)
        question = self.clip(text)
        async with self._chats.hold(key):  # one question at a time per chat, in the order they came
            last = self._answered.get(key)
            if last and last.question == question and arrived - last.arrived <= DOUBLE_TAP_S:
                log.info("same question again within %.0f s in %s:%s: answered once", DOUBLE_TAP_S, *key)
                return last.reply
            reply = await self.ask(msg.channel, msg.chat_id, question, on_delta)
            if reply.kind == "answer":
                self._remember(key, _Answered(question, arrived, reply))
            return reply

    def clip(self, question: str) -> str:
        """The question as the engine gets it: at most `[retrieval] max_query_chars` characters."""
        limit = self.cfg.retrieval.max_query_chars
        if len(question) <= limit:
            return question
        log.info("question clipped from %d to %d characters", len(question), limit)
        return question[:limit].rstrip()

    def _remember(self, key: tuple[str, str], answered: _Answered) -> None:
        self._answered[key] = answered
        if len(self._answered) > 256:  # keep only those a double tap could still hit
            horizon = answered.arrived - DOUBLE_TAP_S
            self._answered = {k: a for k, a in self._answered.items() if a.arrived >= horizon}

    async def start_session(self, channel: str, chat_id: str) -> None:
        """Start a new conversation in a chat: earlier turns stay stored (their citations still open with
        /source) but no longer steer the questions that follow."""
        last = await self.history.recent_stored(channel, chat_id, 1)
        await self.history.put_state(_session_key(channel, chat_id), str(last[-1].id if last else 0))

    async def _session_turns(self, channel: str, chat_id: str, limit: int) -> list[StoredTurn]:
        """The last `limit` turns of the chat's current conversation, oldest first: those after the session's
        start and younger than `[history] max_age_minutes` (a question asked hours later starts afresh)."""
        turns = await self.history.recent_stored(channel, chat_id, limit)
        start = await self.history.get_state(_session_key(channel, chat_id))
        if start:
            turns = [t for t in turns if t.id > int(start)]
        max_age_s = self.cfg.history.max_age_minutes * 60
        if max_age_s > 0:
            turns = [t for t in turns if time.time() - t.created_at <= max_age_s]
        return turns

    async def ask(self, channel: str, chat_id: str, question: str, on_delta: Callable[[str], None] | None = None) -> Reply:
        """Answer a question with this chat's history; both turns are stored before the reply goes out.
        `on_delta` gets the LLM's text as it streams (from a worker thread), for channels that show it growing."""
        metrics.count_question(channel)
        limit = max(self.cfg.history.ihi_turns, self.cfg.history.har_turns) + 1
        history = [Turn(t.role, t.content) for t in await self._session_turns(channel, chat_id, limit)]  # type: ignore[arg-type]
        if history and history[-1] == Turn("user", question):
            history = history[:-1]  # the same question again after a crash or a platform re-delivery: stored once
        else:
            await self.history.add_turn(channel, chat_id, "user", question)
        try:
            async with self._slots:
                answer = await asyncio.to_thread(self.engine.answer, question, history, on_delta=on_delta)
        except QueryError:
            return plain("notice", EMPTY_QUESTION)
        except IndexUnavailable as exc:
            log.error("no index to answer from: %s", exc)
            return plain("error", INDEX_MISSING)
        except Exception:
            log.exception("answering failed for %s:%s", channel, chat_id)
            return plain("error", BUSY_ERROR)
        metrics.observe_answer(answer)  # by mode, LLM errors, per-stage latency (bot/metrics.py)
        await self.history.add_turn(channel, chat_id, "assistant", answer.text, [c.id for c in answer.citations])
        return self.answer_reply(answer)

    def answer_reply(self, answer: Answer) -> Reply:
        labels = {c.id: source_label(c) for c in answer.citations}
        body = footnote(answer.text, labels)
        buttons = tuple((f"原文{f.n}", f.id) for f in body.footnotes)
        return Reply("answer", body, buttons, answer)

    async def source(self, raw_id: str, chat: tuple[str, str] | None = None) -> Reply:
        """The passage behind a citation; with the chat, the version that was shown there."""
        as_of = None
        raw_id = clean_input(raw_id)[:200]  # also reached directly, by Telegram's 原文 buttons
        cid = parse_id(raw_id)
        if chat and cid:
            for turn in reversed(await self.history.recent_stored(chat[0], chat[1], 200)):
                if cid in turn.cited_ids:
                    as_of = turn.created_at
                    break
        try:
            found = await asyncio.to_thread(resolve_source, self.engine.index, self.cfg.data_dir, raw_id, as_of)
        except IndexUnavailable:
            return plain("error", INDEX_MISSING)
        return plain("source" if found.chunk else "notice", found.render_plain())

    async def footnote_source(self, channel: str, chat_id: str, n: int) -> Reply:
        """`/source 1`: footnote n of the last answer in this chat's conversation, as the 原文1 button opens it."""
        turns = await self._session_turns(channel, chat_id, 20)
        last = next((t for t in reversed(turns) if t.role == "assistant"), None)
        ids = [f.id for f in footnote(last.content, {}).footnotes] if last else []
        if not ids:
            return plain("notice", NO_ANSWER_YET)
        if not 1 <= n <= len(ids):
            return plain("notice", NO_SUCH_FOOTNOTE.format(count=len(ids)))
        return await self.source(ids[n - 1], (channel, chat_id))

    async def _command(self, msg: Incoming, text: str) -> Reply:
        name, arg = (text.split(None, 1) + [""])[:2]  # any whitespace: "/source\tid", "/help\nmore"
        name = name.split("@", 1)[0].lower()  # "/help@MyBot" in groups
        arg = arg.strip()
        if name in ("/start", "/help"):
            return plain("command", welcome(msg.channel))
        if name == "/source":
            if not arg:
                return plain("notice", "用法：/source 编号，例如 /source 1（上一条回答的第1条出处）或 /source fb82b28b#11")
            if arg.isdecimal() and len(arg) <= 3:
                return await self.footnote_source(msg.channel, msg.chat_id, int(arg))
            return await self.source(arg, (msg.channel, msg.chat_id))
        if name == "/reset":
            async with self._chats.hold((msg.channel, msg.chat_id)):
                n = await self.history.reset(msg.channel, msg.chat_id)
                self._answered.pop((msg.channel, msg.chat_id), None)
            return plain("command", f"已清除本对话的 {n} 条记录，我们重新开始。")
        if name in ("/status", "/reindex") and not self.is_admin(msg.channel, msg.user_id):
            return plain("notice", ADMIN_ONLY)
        if name == "/status":
            return plain("command", await self.status_text())
        if name == "/reindex":
            if self.reindex is None:
                return plain("notice", "本实例没有启用重建索引。")
            return plain("command", await self.reindex())
        return plain("notice", f"不认识的命令 {name[:40]}。\n\n{welcome(msg.channel)}")

    async def status_text(self) -> str:
        layout = Layout(self.cfg.data_dir)
        lines = []
        try:
            index = self.engine.index
            m = index.manifest
            built = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.get("created", 0)))
            lines.append(f"索引版本 {index.build_id}（{built}）：{len(m.get('documents', {}))} 份文档，{len(index.chunks)} 个段落")
            lines.append(f"向量模型：{m.get('embedder')}")
        except IndexUnavailable as exc:
            lines.append(f"索引不可用：{exc}")
        try:
            reranker = self.engine.retriever.reranker_name  # the cross-encoder, else the build's learned ranker
        except IndexUnavailable:
            reranker = getattr(self.engine.reranker, "name", None)
        lines.append(f"重排模型：{reranker if reranker and reranker != 'none' else '未启用（按融合顺序）'}")
        lines.append(f"生成：{getattr(self.engine.chat, 'model_name', None) or '摘录模式（未配置大模型）'}")
        for w in self.engine.warnings:
            lines.append(f"⚠ {w}")
        report = layout.last_report()
        if report:
            lines.append(
                f"最近一次重建 {report['build_id']}：{'已启用' if report.get('swapped') else '未启用：' + report.get('gate', '')}，"
                f"用时 {report.get('duration_s')} 秒，失败文件 {len(report.get('failures', []))} 个"
            )
            for f in report.get("failures", [])[:5]:
                lines.append(f"  ✗ {f['path']}：{f['reason']}")
        stats = await self.history.stats()
        lines.append(f"对话记录：{stats['turns']} 条，{stats['chats']} 个会话；保留 {self.cfg.bot.history_retention_days} 天，"
                     f"已清除过期记录 {stats.get('purged', 0)} 条")
        return "\n".join(lines)


def _session_key(channel: str, chat_id: str) -> str:
    """The history-store state key holding the id of the last turn before the chat's current conversation."""
    return f"session:{channel}:{chat_id}"
