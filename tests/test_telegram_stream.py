"""Streamed answers on Telegram: the real OpenAI client streams from a loopback OpenAI-compatible fake that writes
slowly; the user sees a draft (private chat) or one edited message (group) grow, then the final text with footnotes
and 原文 buttons. Run with -s to see each partial state with its time."""
from __future__ import annotations

import dataclasses
import time

import pytest

from bot.service import ChatService
from rag_core.llm import OpenAIChatModel
from tests.conftest import engine_for
from tests.fakes import FakeOpenAIServer, FakeTelegramAPI, answer
from tests.fakes.telegram_api import BOT_USERNAME
from tests.test_telegram import QUESTION, running, tg_config

pytestmark = pytest.mark.timeout(60)

INVENTED = "deadbeef#9"  # an id no passage has: shown to nobody, dropped from the final text


def streaming_engine(cfg, llm: FakeOpenAIServer):
    cfg = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, base_url=llm.base_url, stream=True, max_retries=0,
                                                           timeout_s=20.0),
                              history=dataclasses.replace(cfg.history, har_llm=False))
    return cfg, engine_for(cfg, chat=OpenAIChatModel(cfg.llm, "test-key"))


def scripted_answer(engine, piece_delay_s: float):
    """An answer citing the first real evidence id twice and an invented id once, streamed in eight slow pieces."""
    cid = engine.search(QUESTION).evidence[0].chunk.id
    pieces = ("锈病要以预防为主", f"，选用抗病品种[{cid}]。", "发病初期喷施", f"铜制剂保护新叶[{INVENTED}]，",
              "每隔十五天", "一次，连喷两到三次", f"；同时修剪通风透光[{cid}]", "。")
    return cid, answer("".join(pieces), pieces=pieces, piece_delay_s=piece_delay_s)


async def test_private_chat_sees_a_growing_draft_then_the_cited_answer(sample_cfg, tmp_path):
    async with FakeOpenAIServer() as llm, FakeTelegramAPI() as api:
        cfg, engine = streaming_engine(tg_config(sample_cfg, api), llm)
        cid, reply = scripted_answer(engine, piece_delay_s=0.4)
        llm.push(reply)
        from bot.history_store import HistoryStore

        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            async with running(cfg, api, ChatService(cfg, engine, store)):
                asked = time.monotonic()
                api.push_text(42, QUESTION)
                (final,) = await api.wait_sent(1, timeout=20, chat_id=42)
                final_at = next(c.at for c in api.calls_of("sendMessage"))
        finally:
            await store.close()
    drafts = api.drafts
    lines = [f"+{d.at - asked:5.2f} s  draft    {d.text}" for d in drafts]
    lines.append(f"+{final_at - asked:5.2f} s  message  {final.plain}")
    print("\n==== a streamed Telegram answer (private chat, loopback fakes) ====\n" + "\n".join(lines))

    assert len(drafts) >= 2 and {d.draft_id for d in drafts} != {0} and len({d.draft_id for d in drafts}) == 1
    assert all(b.text.startswith(a.text) and len(b.text) > len(a.text) for a, b in zip(drafts, drafts[1:]))
    assert all(b.at - a.at >= 0.9 for a, b in zip(drafts, drafts[1:]))  # at most about once a second
    assert drafts[0].at - asked < final_at - asked - 1.5  # the user saw text well before the answer was done
    assert not any("#" in d.text or "[" in d.text for d in drafts)  # ids are never shown half-checked
    assert INVENTED not in final.text and "deadbeef" not in final.plain
    assert "[1]" in final.plain and "来源" in final.plain and final.parse_mode == "HTML"
    assert final.buttons == [("原文1", f"src:{cid}")]  # the invented id got no footnote and no button
    assert "铜制剂保护新叶" in final.plain and len(llm.requests) == 1 and llm.requests[0]["stream"] is True


async def test_group_sees_one_message_edited_into_the_answer(sample_cfg, tmp_path):
    group = -100500
    async with FakeOpenAIServer() as llm, FakeTelegramAPI() as api:
        cfg, engine = streaming_engine(tg_config(sample_cfg, api), llm)
        cid, reply = scripted_answer(engine, piece_delay_s=0.55)
        llm.push(reply)
        from bot.history_store import HistoryStore

        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            async with running(cfg, api, ChatService(cfg, engine, store)):
                question = api.push_text(group, f"@{BOT_USERNAME} {QUESTION}", 7, chat_type="supergroup")["message"]
                await api.wait_for(lambda: any("来源" in s.plain for s in api.sent), 20)
        finally:
            await store.close()
    sends = [c for c in api.calls_of("sendMessage") if c.params["chat_id"] == group]
    edits = api.calls_of("editMessageText")
    assert len(sends) == 1 and "parse_mode" not in sends[0].params  # the first partial state, plain text
    assert len(edits) >= 2 and edits[-1].params["parse_mode"] == "HTML"  # partial edit(s), then the final text
    assert all(b.at - a.at >= 2.9 for a, b in zip(edits, edits[1:-1]))  # groups: partial edits 3 s apart
    assert not api.drafts  # drafts are for private chats
    (final,) = [s for s in api.sent if s.chat_id == group]
    assert final.reply_to == question["message_id"] and final.buttons == [("原文1", f"src:{cid}")]
    assert "[1]" in final.plain and "deadbeef" not in final.plain
    assert not any(INVENTED in str(c.params.get("text", "")) for c in api.calls)


async def test_without_drafts_a_private_chat_gets_edits(sample_cfg, tmp_path):
    """A Bot API server that refuses sendMessageDraft (older, or a local server): one message is edited instead."""
    async with FakeOpenAIServer() as llm, FakeTelegramAPI() as api:
        cfg, engine = streaming_engine(tg_config(sample_cfg, api), llm)
        cid, reply = scripted_answer(engine, piece_delay_s=0.3)
        llm.push(reply)
        api.fail_next("sendMessageDraft", status=404, description="Not Found: method not found")
        from bot.history_store import HistoryStore

        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            async with running(cfg, api, ChatService(cfg, engine, store)):
                api.push_text(43, QUESTION)
                await api.wait_for(lambda: any("来源" in s.plain for s in api.sent), 20)
        finally:
            await store.close()
    assert len(api.calls_of("sendMessageDraft")) == 1 and not api.drafts
    assert len(api.calls_of("sendMessage")) == 1 and api.calls_of("editMessageText")
    (final,) = api.sent
    assert final.buttons == [("原文1", f"src:{cid}")] and "[1]" in final.plain
