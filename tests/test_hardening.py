"""Input that used to break the bot (issue 11, item 6) and the console's conversation rules (issue 14, section 5).

Everything goes through the real ChatService, the real engine over the sample index and a real SQLite history.
"""
from __future__ import annotations

import asyncio
import dataclasses
import io
import random
import re
import threading
import time

import pytest

from bot.console import console_loop
from bot.formatting import CITATION_RE
from bot.history_store import HistoryStore
from bot.service import ChatService, Incoming, RateLimiter, Reply, clean_input
from rag_core.ids import parse_id


class Recording:
    """The real engine, recording the questions it is asked; `delay_s` makes each answer take that long."""

    def __init__(self, engine, delay_s: float = 0.0) -> None:
        self._engine = engine
        self.delay_s = delay_s
        self.questions: list[str] = []
        self._lock = threading.Lock()

    def answer(self, question, history, **kw):
        with self._lock:
            self.questions.append(question)
        if self.delay_s:
            time.sleep(self.delay_s)
        return self._engine.answer(question, history, **kw)

    def __getattr__(self, name):
        return getattr(self._engine, name)


@pytest.fixture
async def store(tmp_path):
    history = await HistoryStore.open(tmp_path / "history.sqlite3")
    yield history
    await history.close()


def msg(text: str, chat: str = "c1", channel: str = "telegram") -> Incoming:
    return Incoming(channel, chat, "u1", text)


# ---- broken text ---------------------------------------------------------------------------------------------------

def test_clean_input_replaces_surrogates_and_controls_once():
    assert clean_input("咖啡\ud800锈病") == "咖啡\ufffd锈病"
    assert clean_input("bad\udcffbyte") == "bad\ufffdbyte"  # an undecodable byte, as surrogateescape carries it
    assert clean_input("\ud83d\ude00") == "😀"  # a pair written as two halves is one character
    assert clean_input("a\x00b\x07c\x1bd\x7f") == "a b c d "
    assert clean_input("第一行\r\n第二行\r第三行\t完") == "第一行\n第二行\n第三行\t完"
    text = "咖啡锈病怎么防治？😀 שלום"
    assert clean_input(text) is text or clean_input(text) == text
    clean_input(clean_input("\ud800")).encode("utf-8")


async def test_lone_surrogate_question_is_answered_and_stored(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    reply = await service.handle(msg("咖啡\ud800锈病怎么防治\udcff"))
    assert reply.kind == "answer"
    reply.text.encode("utf-8")
    turns = await store.recent("telegram", "c1", 10)
    assert [t.role for t in turns] == ["user", "assistant"]
    assert turns[0].content == "咖啡\ufffd锈病怎么防治\ufffd"


async def test_unknown_command_with_surrogate_echo_renders(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    reply = await service.handle(msg("/fo\ud800o"))
    reply.text.encode("utf-8")
    assert "/fo\ufffdo" in reply.text


# ---- /source ---------------------------------------------------------------------------------------------------------

def test_parse_id_rejects_huge_numbers():
    assert parse_id("e76faa05#" + "1" * 4400) is None
    assert parse_id("e76faa05#0003") == "e76faa05#3"


async def test_source_with_4400_digits_is_a_polite_notice(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    reply = await service.handle(msg("/source e76faa05#" + "1" * 4400))
    assert reply.kind == "notice"
    assert "不是有效的引用编号" in reply.text
    assert len(reply.text) < 300


@pytest.mark.parametrize("text", ["/source\t{id}", "/source\n{id}", "/source\u3000{id}", "/source  {id}"])
async def test_commands_split_on_any_whitespace(sample_engine, store, text):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    cid = sample_engine.index.chunks[0].id
    reply = await service.handle(msg(text.format(id=cid)))
    assert reply.kind == "source", reply.text
    assert cid in reply.text


async def test_help_followed_by_a_new_line(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    reply = await service.handle(msg("/help\nmore"))
    assert reply.kind == "command"
    assert "不认识" not in reply.text


async def test_source_number_opens_footnote_of_last_answer(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    answer = await service.handle(msg("咖啡锈病怎么防治", channel="wechat"))
    assert answer.body.footnotes
    first = answer.body.footnotes[0].id
    reply = await service.handle(msg("/source 1", channel="wechat"))
    assert reply.kind == "source", reply.text
    assert reply.text.startswith(f"【{first}】")
    missing = await service.handle(msg(f"/source {len(answer.body.footnotes) + 1}", channel="wechat"))
    assert missing.kind == "notice"
    fresh = await service.handle(msg("/source 1", chat="nobody", channel="wechat"))
    assert fresh.kind == "notice" and "先提问" in fresh.text


# ---- long questions --------------------------------------------------------------------------------------------------

async def test_long_question_is_clipped_before_the_engine(sample_engine, store):
    cfg = sample_engine.cfg
    engine = Recording(sample_engine)
    service = ChatService(cfg, engine, store)
    reply = await service.handle(msg("咖啡锈病怎么防治？" + "啊" * 30_000))
    assert reply.kind == "answer"
    assert engine.questions and all(len(q) <= cfg.retrieval.max_query_chars for q in engine.questions)
    stored = await store.recent("telegram", "c1", 2)
    assert len(stored[0].content) <= cfg.retrieval.max_query_chars


# ---- rate limiter ----------------------------------------------------------------------------------------------------

def test_rate_limiter_forgets_idle_chats():
    now = [0.0]
    limiter = RateLimiter(3, lambda: now[0])
    for i in range(5000):
        assert limiter.allow(("telegram", str(i)))
    assert len(limiter._seen) == 5000
    now[0] += 61
    assert limiter.allow(("telegram", "new"))
    assert len(limiter._seen) == 1
    for _ in range(2):
        assert limiter.allow(("telegram", "new"))
    assert not limiter.allow(("telegram", "new"))  # still limits the chat it remembers


async def test_console_is_not_rate_limited(sample_engine, store):
    cfg = dataclasses.replace(sample_engine.cfg, bot=dataclasses.replace(sample_engine.cfg.bot, rate_limit_per_minute=6))
    service = ChatService(cfg, sample_engine, store)
    questions = ["咖啡锈病怎么防治", "卡蒂姆一年施几次肥", "咖啡果小蠹怎么防治", "鲜果采回来多久要脱皮",
                 "叶子背面有黄粉咋办", "咖啡什么时候修剪", "荫蔽树怎么种", "咖啡苗怎么育",
                 "咖啡炭疽病怎么办", "采收标准是什么", "干燥要几天", "施什么肥好"]
    out = io.StringIO()
    await console_loop(service, io.StringIO("\n".join(questions) + "\n"), out)
    assert "有点快" not in out.getvalue()
    assert out.getvalue().count("以下内容摘自知识库") == 12
    turns = await store.recent("console", "local", 100)
    assert [t.role for t in turns] == ["user", "assistant"] * 12
    # a Telegram chat is still limited
    replies = [await service.handle(msg(q, chat="t1")) for q in questions[:8]]
    assert [r.kind for r in replies].count("notice") == 2


# ---- one chat at a time ----------------------------------------------------------------------------------------------

async def test_six_messages_at_once_are_stored_in_turn(sample_engine, store):
    engine = Recording(sample_engine, delay_s=0.05)
    service = ChatService(sample_engine.cfg, engine, store)
    questions = ["咖啡锈病怎么防治", "卡蒂姆一年施几次肥", "咖啡果小蠹怎么防治", "鲜果采回来多久要脱皮",
                 "叶子背面有黄粉咋办", "咖啡什么时候修剪"]
    replies = await asyncio.gather(*(service.handle(msg(q)) for q in questions))
    assert all(r.kind == "answer" for r in replies)
    turns = await store.recent("telegram", "c1", 100)
    assert [t.role for t in turns] == ["user", "assistant"] * 6
    assert [t.content for t in turns[0::2]] == questions  # in the order they arrived


async def test_double_tapped_question_is_answered_once(sample_engine, store):
    now = [1000.0]
    engine = Recording(sample_engine, delay_s=0.05)
    service = ChatService(sample_engine.cfg, engine, store, clock=lambda: now[0])
    first, second = await asyncio.gather(service.handle(msg("咖啡锈病怎么防治")), service.handle(msg("咖啡锈病怎么防治")))
    assert first.kind == second.kind == "answer"
    assert second.text == first.text
    assert engine.questions == ["咖啡锈病怎么防治"]
    assert [t.role for t in await store.recent("telegram", "c1", 100)] == ["user", "assistant"]
    now[0] += 60  # asked again a minute later: a real question again
    await service.handle(msg("咖啡锈病怎么防治"))
    assert len(engine.questions) == 2
    await service.handle(msg("咖啡锈病怎么防治", chat="c2"))  # another chat asking the same is not a double tap
    assert len(engine.questions) == 3


# ---- console sessions ------------------------------------------------------------------------------------------------

async def test_new_console_session_starts_a_new_conversation(sample_engine, store):
    engine = Recording(sample_engine)
    service = ChatService(sample_engine.cfg, engine, store)
    seen_history: list[list] = []
    real_answer = engine.answer

    def answer(question, history, **kw):
        seen_history.append(list(history))
        return real_answer(question, history, **kw)

    engine.answer = answer
    out = io.StringIO()
    await console_loop(service, io.StringIO("霜冻怎么预防\n"), out)  # yesterday
    old_ids = CITATION_RE.findall((await store.recent("console", "local", 2))[1].content)
    assert old_ids
    seen_history.clear()
    out = io.StringIO()
    await console_loop(service, io.StringIO(f"怎么施肥\n/source {old_ids[0]}\n"), out)  # today
    assert seen_history == [[]]  # yesterday's frost question does not steer today's first question
    assert f"【{old_ids[0]}】" in out.getvalue()  # an older answer's citation still opens


async def test_console_source_number(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)
    out = io.StringIO()
    await console_loop(service, io.StringIO("咖啡锈病怎么防治\n/source 1\n"), out)
    answer, source = out.getvalue().split("\n\n")[:2]
    first_id = re.search(r"\[1\] .*（/source ([0-9a-f]{8}#\d+)）", answer).group(1)
    assert source.startswith(f"【{first_id}】")


async def test_console_survives_invalid_bytes(sample_engine, store):
    service = ChatService(sample_engine.cfg, sample_engine, store)

    class Stdin(io.TextIOWrapper):
        def isatty(self):
            return False

    raw = "咖啡锈病怎么防治".encode() + b"\xff\xfe\n" + "/help".encode() + b"\n"
    out = io.StringIO()
    await console_loop(service, Stdin(io.BytesIO(raw), encoding="utf-8"), out)
    assert "以下内容摘自知识库" in out.getvalue() and "命令：/help" in out.getvalue()


# ---- fuzz ------------------------------------------------------------------------------------------------------------

_PIECES = ["咖啡锈病怎么防治", "卡蒂姆施肥", "/source", "/help", "/reset", "/status", "/start", "/foo", "e76faa05#",
           "原文1", " ", "\t", "\n", "\u202e", "\u200f", "שלום", "مرحبا", "😀", "👨‍👩‍👧", "\x00", "\x1b[31m", "\ud800",
           "\udcff", "\udbff\udfff", "&amp;<b>", "[e76faa05#3]", "#" * 5, "9" * 50, "\ufeff", "\u3000"]


def fuzz_messages(n: int, seed: int = 11) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rnd.random()
        if kind < 0.6:
            text = "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 8)))
        elif kind < 0.9:
            text = "".join(chr(rnd.randint(0, 0x10FFFF)) for _ in range(rnd.randint(1, 40)))
        else:
            text = rnd.choice(_PIECES) * rnd.randint(100, 20_000)
        out.append(text)
    return out


async def run_fuzz(service: ChatService, messages: list[str]) -> tuple[int, int]:
    """(exceptions, replies that are not a Reply or cannot be encoded as UTF-8)."""
    errors = bad = 0
    for i, text in enumerate(messages):
        try:
            reply = await service.handle(Incoming("telegram", f"f{i % 50}", "u", text))
        except Exception:  # noqa: BLE001 - counting is the point
            errors += 1
            continue
        if not isinstance(reply, Reply) or not reply.text.strip():
            bad += 1
            continue
        reply.text.encode("utf-8")
    return errors, bad


async def test_fuzzed_messages_all_get_a_reply(sample_engine, store):
    cfg = dataclasses.replace(sample_engine.cfg, bot=dataclasses.replace(sample_engine.cfg.bot, rate_limit_per_minute=0))
    service = ChatService(cfg, sample_engine, store)
    assert await run_fuzz(service, fuzz_messages(100)) == (0, 0)


@pytest.mark.slow
async def test_1000_fuzzed_messages_all_get_a_reply(sample_engine, store):
    # 1,000 (was 2,000, 74 s of a suite near its 10-minute budget): every message kind of fuzz_messages still comes
    # up scores of times, and the 100-message test above runs with another seed
    cfg = dataclasses.replace(sample_engine.cfg, bot=dataclasses.replace(sample_engine.cfg.bot, rate_limit_per_minute=0))
    service = ChatService(cfg, sample_engine, store)
    assert await run_fuzz(service, fuzz_messages(1000, seed=2026)) == (0, 0)


async def test_telegram_inbox_stores_a_message_with_a_lone_surrogate(tmp_path):
    """Telegram's JSON may carry "\\ud800"; one such update must not make the whole fetched batch unstorable."""
    from bot.inbox import Inbox

    inbox = await Inbox.open(tmp_path / "inbox.sqlite3", 1)
    try:
        assert await inbox.store([(5, {"message": {"text": "咖啡\ud800锈病"}}), (6, {"message": {"text": "好"}})]) == {5, 6}
        recovered = await inbox.recover(max_age_s=3600)
        assert [s.payload["message"]["text"] for s in recovered.pending] == ["咖啡\ud800锈病", "好"]
    finally:
        await inbox.close()
