"""Streamed answers on Telegram: the real OpenAI client streams from a loopback OpenAI-compatible fake that writes
slowly; the user sees a draft (private chat) or one edited message (group) grow, then the final text with footnotes
and 原文 buttons. Run with -s to see each partial state with its time."""
from __future__ import annotations

import dataclasses
import time

import pytest

from bot.history_store import HistoryStore
from bot.service import ChatService
from rag_core.llm import OpenAIChatModel
from tests.conftest import engine_for
from tests.fakes import FakeOpenAIServer, FakeTelegramAPI, Reply, answer
from tests.fakes.telegram_api import BOT_USERNAME
from tests.test_telegram import QUESTION, running, tg_config

pytestmark = pytest.mark.timeout(60)

INVENTED = "deadbeef#9"  # an id no passage has: shown to nobody, dropped from the final text


def streaming_engine(cfg, llm: FakeOpenAIServer, interval_s: float):
    cfg = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, base_url=llm.base_url, stream=True, max_retries=0,
                                                           timeout_s=20.0),
                              history=dataclasses.replace(cfg.history, har_llm=False),
                              telegram=dataclasses.replace(cfg.telegram, stream_interval_s=interval_s))
    return cfg, engine_for(cfg, chat=OpenAIChatModel(cfg.llm, "test-key"))


def scripted_answer(engine, piece_delay_s: float):
    """An answer citing the first real evidence id twice and an invented id once, streamed in eight slow pieces."""
    cid = engine.search(QUESTION).evidence[0].chunk.id
    pieces = ("锈病要以预防为主", f"，选用抗病品种[{cid}]。", "发病初期喷施", f"铜制剂保护新叶[{INVENTED}]，",
              "每隔十五天", "一次，连喷两到三次", f"；同时修剪通风透光[{cid}]", "。")
    return cid, answer("".join(pieces), pieces=pieces, piece_delay_s=piece_delay_s)


async def stream_one(sample_cfg, tmp_path, chat_id: int, *, interval_s: float, piece_delay_s: float, text: str = QUESTION,
                     group_interval_s: float = 3.0, chat_type: str | None = None, draft_fails: bool = False):
    """Ask one question through the fakes and wait for the final answer; (api, llm, cited id, time asked)."""
    async with FakeOpenAIServer() as llm, FakeTelegramAPI() as api:
        cfg, engine = streaming_engine(tg_config(sample_cfg, api), llm, interval_s)
        cid, reply = scripted_answer(engine, piece_delay_s)
        llm.push(reply)
        if draft_fails:
            api.fail_next("sendMessageDraft", status=404, description="Not Found: method not found")
        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            async with running(cfg, api, ChatService(cfg, engine, store)) as channel:
                channel.group_stream_interval_s = group_interval_s
                asked = time.monotonic()
                api.push_text(chat_id, text, 7, chat_type=chat_type)
                await api.wait_for(lambda: any("来源" in s.plain for s in api.sent), 20)
        finally:
            await store.close()
    return api, llm, cid, asked


def check_private_stream(api, llm, cid: str, asked: float, interval_s: float) -> None:
    drafts = api.drafts
    (final,) = api.sent
    final_at = api.calls_of("sendMessage")[0].at
    assert len(drafts) >= 2 and 0 not in {d.draft_id for d in drafts} and len({d.draft_id for d in drafts}) == 1
    assert all(b.text.startswith(a.text) and len(b.text) > len(a.text) for a, b in zip(drafts, drafts[1:]))
    assert all(b.at - a.at >= interval_s * 0.9 for a, b in zip(drafts, drafts[1:]))  # at most one per interval
    assert drafts[0].at < final_at - interval_s  # the user saw text well before the answer was done
    assert not any("#" in d.text or "[" in d.text for d in drafts)  # ids are never shown half-checked
    assert INVENTED not in final.text and "deadbeef" not in final.plain
    assert "[1]" in final.plain and "来源" in final.plain and final.parse_mode == "HTML"
    assert final.buttons == [("原文1", f"src:{cid}")]  # the invented id got no footnote and no button
    assert "铜制剂保护新叶" in final.plain and len(llm.requests) == 1 and llm.requests[0]["stream"] is True


async def test_private_chat_sees_a_growing_draft_then_the_cited_answer(sample_cfg, tmp_path):
    api, llm, cid, asked = await stream_one(sample_cfg, tmp_path, 42, interval_s=0.3, piece_delay_s=0.12)
    check_private_stream(api, llm, cid, asked, 0.3)


@pytest.mark.slow
async def test_record_a_streamed_answer_at_the_default_pace(sample_cfg, tmp_path):
    """The default pace (a draft at most once a second) with a model writing a piece every 0.4 s; printed (-s)."""
    api, llm, cid, asked = await stream_one(sample_cfg, tmp_path, 42, interval_s=1.0, piece_delay_s=0.4)
    lines = [f"+{d.at - asked:5.2f} s  sendMessageDraft  {d.text}" for d in api.drafts]
    lines.append(f"+{api.calls_of('sendMessage')[0].at - asked:5.2f} s  sendMessage       {api.sent[0].plain}")
    print("\n==== a streamed Telegram answer (private chat, loopback fakes) ====\n" + "\n".join(lines))
    check_private_stream(api, llm, cid, asked, 1.0)


async def test_group_sees_one_message_edited_into_the_answer(sample_cfg, tmp_path):
    group = -100500
    api, llm, cid, asked = await stream_one(sample_cfg, tmp_path, group, interval_s=0.3, piece_delay_s=0.15,
                                            text=f"@{BOT_USERNAME} {QUESTION}", group_interval_s=0.5,
                                            chat_type="supergroup")
    sends = [c for c in api.calls_of("sendMessage") if c.params["chat_id"] == group]
    edits = api.calls_of("editMessageText")
    assert len(sends) == 1 and "parse_mode" not in sends[0].params  # the first partial state, plain text
    assert len(edits) >= 2 and edits[-1].params["parse_mode"] == "HTML"  # partial edit(s), then the final text
    assert all(b.at - a.at >= 0.45 for a, b in zip(edits, edits[1:-1]))  # the group pace, not the private one
    assert not api.drafts  # drafts are for private chats
    (final,) = [s for s in api.sent if s.chat_id == group]
    question_id = api.calls_of("sendMessage")[0].params["reply_parameters"]["message_id"]
    assert final.reply_to == question_id and final.buttons == [("原文1", f"src:{cid}")]
    assert "[1]" in final.plain and "deadbeef" not in final.plain
    assert not any(INVENTED in str(c.params.get("text", "")) for c in api.calls)


async def test_without_drafts_a_private_chat_gets_edits(sample_cfg, tmp_path):
    """A Bot API server that refuses sendMessageDraft (older, or a local server): one message is edited instead."""
    api, llm, cid, asked = await stream_one(sample_cfg, tmp_path, 43, interval_s=0.3, piece_delay_s=0.12,
                                            draft_fails=True)
    assert len(api.calls_of("sendMessageDraft")) == 1 and not api.drafts
    assert len(api.calls_of("sendMessage")) == 1 and api.calls_of("editMessageText")
    (final,) = api.sent
    assert final.buttons == [("原文1", f"src:{cid}")] and "[1]" in final.plain


async def test_a_stream_cut_mid_answer_leaves_no_partial_text_behind(sample_cfg, tmp_path):
    """The LLM's connection drops after three pieces: the engine answers extractively, and that answer replaces the
    partial text in the group's message (no half sentence of the failed answer survives)."""
    group = -100600
    async with FakeOpenAIServer() as llm, FakeTelegramAPI() as api:
        cfg, engine = streaming_engine(tg_config(sample_cfg, api), llm, 0.3)
        pieces = ("这段回答", "写到一半", "连接就断了", "，后面不会再来", "。")
        llm.push(Reply(text="".join(pieces), pieces=pieces, cut_after=3, piece_delay_s=0.15))
        store = await HistoryStore.open(tmp_path / "history.sqlite3")
        try:
            async with running(cfg, api, ChatService(cfg, engine, store)) as channel:
                channel.group_stream_interval_s = 0.3
                api.push_text(group, f"@{BOT_USERNAME} {QUESTION}", 7, chat_type="supergroup")
                await api.wait_for(lambda: any("来源" in s.plain for s in api.sent), 20)
        finally:
            await store.close()
    first = api.calls_of("sendMessage")[0].params["text"]
    assert first.startswith("这段回答")  # the partial text was shown …
    (final,) = api.sent
    assert "写到一半" not in final.plain and "这段回答" not in final.plain  # … and replaced by the extractive answer
    assert "来源" in final.plain and final.parse_mode == "HTML" and final.buttons


def test_partial_text_hides_ids_and_half_written_brackets():
    from bot.telegram_stream import partial_text

    assert partial_text("喷铜制剂[fb82b28b#11]。注意通风 [deadbeef#9]，") == "喷铜制剂。注意通风，"
    assert partial_text("喷铜制剂[fb82b2") == "喷铜制剂"  # the id is still being written
    assert partial_text("喷铜制剂【fb82b28b#11】。[注意]事项") == "喷铜制剂。[注意]事项"  # brackets without ids stay
    assert partial_text("[fb82b28b#11]") == ""  # nothing to show yet
    long = partial_text("锈" * 5000)
    assert len(long.encode("utf-16-le")) // 2 <= 4096 and long.endswith("…")
