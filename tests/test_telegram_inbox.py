"""The Telegram inbox: updates stored before Telegram forgets them, handled again after a crash, stale ones skipped;
and the channel end to end over it (real python-telegram-bot, the loopback Bot API fake that forgets confirmed
updates as Telegram does)."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from bot.history_store import HistoryStore
from bot.inbox import MAX_ATTEMPTS, Inbox
from bot.service import ChatService, Incoming, Reply
from bot.telegram import TelegramChannel
from tests.fakes import FakeTelegramAPI
from tests.test_telegram import QUESTION, running, tg_config

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def update(update_id: int, chat_id: int = 42) -> tuple[int, dict]:
    return update_id, {"update_id": update_id, "message": {"message_id": update_id, "chat": {"id": chat_id}}}


async def test_store_is_durable_and_dedupes_by_bot_and_update_id(tmp_path):
    path = tmp_path / "inbox.sqlite3"
    inbox = await Inbox.open(path, bot_id=1)
    assert await inbox.store([update(1), update(2)]) == {1, 2}
    assert await inbox.store([update(2), update(3)]) == {3}  # a batch fetched again: only the new one
    await inbox.done(1)
    await inbox.close()
    again = await Inbox.open(path, bot_id=1)  # as after a crash: nothing but the file
    found = await again.recover(3600)
    assert [s.update_id for s in found.pending] == [2, 3] and found.pending[0].payload == update(2)[1]
    assert await again.counts() == {"handled": 1, "pending": 2}
    await again.close()
    other = await Inbox.open(path, bot_id=2)  # another bot's update 1 is not the first bot's
    assert await other.store([update(1)]) == {1}
    await other.close()


async def test_recover_skips_stale_and_gives_up_after_max_attempts(tmp_path):
    clock = Clock()
    inbox = await Inbox.open(tmp_path / "inbox.sqlite3", bot_id=1, clock=clock)
    await inbox.store([update(1)])
    clock.now += 3000
    await inbox.store([update(2)])
    clock.now += 1000  # update 1 is 4000 s old, update 2 1000 s
    found = await inbox.recover(3600)
    assert [s.update_id for s in found.pending] == [2] and found.stale == 1 and found.abandoned == 0
    for _ in range(MAX_ATTEMPTS - 2):  # a message that kills the process each time it is handled
        assert [s.update_id for s in (await inbox.recover(3600)).pending] == [2]
    found = await inbox.recover(3600)
    assert not found.pending and found.abandoned == 1
    assert await inbox.counts() == {"stale": 1, "abandoned": 1}
    clock.now += 3 * 86400
    assert await inbox.prune() == 2
    await inbox.close()


class StuckService(ChatService):
    """Never answers: the process dies with these questions in flight."""

    async def handle(self, msg: Incoming, on_delta=None) -> Reply:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_questions_in_flight_at_a_crash_are_answered_after_the_restart(sample_cfg, sample_engine, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="bot.telegram")
    async with FakeTelegramAPI() as api:
        cfg = tg_config(sample_cfg, api)
        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            first = TelegramChannel(cfg, api.token, StuckService(cfg, sample_engine, store))
            first.drain_s = 0  # what a crash leaves: nothing is finished
            await first.start()
            chats = range(61, 66)
            for chat in chats:
                api.push_text(chat, QUESTION)
            await api.wait_for(lambda: api.confirmed == len(chats), 10)  # Telegram has forgotten all five
            await first.stop()
            assert not api.sent

            async with running(cfg, api, ChatService(cfg, sample_engine, store)) as second:
                for chat in chats:
                    await api.wait_sent(1, chat_id=chat)
                await asyncio.sleep(0.3)
                counts = await second.inbox.counts()
        finally:
            await store.close()
    answers = {chat: [s for s in api.sent if s.chat_id == chat] for chat in chats}
    assert all(len(a) == 1 and "来源" in a[0].plain for a in answers.values())  # each answered exactly once here
    assert counts == {"handled": len(chats)}
    assert any("5 stored updates from before the restart" in r.getMessage() for r in caplog.records)


async def test_stored_questions_older_than_the_limit_are_skipped_and_counted(sample_cfg, sample_engine, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="bot.telegram")
    async with FakeTelegramAPI() as api:
        cfg = tg_config(sample_cfg, api)
        bot_id = int(api.token.partition(":")[0])
        old = Clock(time.time() - 2 * 3600)  # stored two hours ago by a process that then died
        inbox = await Inbox.open(cfg.data_dir / cfg.telegram.inbox_db, bot_id, clock=old)
        await inbox.store([(900, {"update_id": 900, "message": api.message(71, text=QUESTION)})])
        old.now = time.time() - 60  # and a minute ago
        await inbox.store([(901, {"update_id": 901, "message": api.message(72, text=QUESTION)})])
        await inbox.close()
        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            async with running(cfg, api, ChatService(cfg, sample_engine, store)) as channel:
                await api.wait_sent(1, chat_id=72)
                await asyncio.sleep(0.3)
                counts = await channel.inbox.counts()
        finally:
            await store.close()
    assert {s.chat_id for s in api.sent} == {72}  # the two-hour-old question is not answered out of the blue
    assert counts == {"stale": 1, "handled": 1}
    (line,) = [r for r in caplog.records if "stored updates from before the restart" in r.getMessage()]
    assert line.levelno == logging.WARNING and "1 skipped as older than 3600 s" in line.getMessage()
