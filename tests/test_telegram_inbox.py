"""The Telegram inbox: updates stored before Telegram forgets them, handled again after a crash, stale ones skipped;
and the channel end to end over it (real python-telegram-bot, the loopback Bot API fake that forgets confirmed
updates as Telegram does)."""
from __future__ import annotations

import asyncio
import logging

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
