"""The Telegram channel end to end: real python-telegram-bot, polling a loopback fake of the Bot API, over the real
ChatService and the sample knowledge base. Run with -s to see the transcript `test_transcript` prints."""
from __future__ import annotations

import asyncio
import dataclasses
import html
import socket
import uuid
from contextlib import asynccontextmanager
from typing import AsyncIterator

import pytest

from bot.formatting import CITATION_RE
from bot.history_store import HistoryStore
from bot.service import ADMIN_ONLY, NON_TEXT, RATE_LIMITED, ChatService, Incoming, Reply, plain, welcome
from bot.telegram import TelegramChannel, webhook_secret
from rag_core.config import Config
from tests.conftest import engine_for
from tests.fakes import FakeTelegramAPI, ScriptedChatModel
from tests.fakes.telegram_api import BOT_USERNAME, Sent

pytestmark = pytest.mark.timeout(60)

ADMIN = 900
QUESTION = "咖啡锈病怎么防治？"


def tg_config(cfg: Config, api: FakeTelegramAPI, **bot: object) -> Config:
    telegram = dataclasses.replace(cfg.telegram, base_url=api.base_url, base_file_url=api.base_file_url,
                                   inbox_db=f"telegram-inbox-{uuid.uuid4().hex}.sqlite3")  # each fake restarts ids at 1
    return dataclasses.replace(cfg, telegram=telegram, bot=dataclasses.replace(cfg.bot, admins=(f"telegram:{ADMIN}",), **bot))


@asynccontextmanager
async def running(cfg: Config, api: FakeTelegramAPI, service: ChatService) -> AsyncIterator[TelegramChannel]:
    channel = TelegramChannel(cfg, api.token, service)
    await asyncio.wait_for(channel.start(), 10)
    try:
        yield channel
    finally:
        await asyncio.wait_for(channel.stop(), 10)


class RecordingService(ChatService):
    """The real service, keeping every reply it hands to the channel (to read `Reply.answer`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.replies: list[Reply] = []

    async def handle(self, msg: Incoming) -> Reply:
        reply = await super().handle(msg)
        self.replies.append(reply)
        return reply


class SlowService(ChatService):
    """Takes half a second to reply "好的。" (to watch what happens meanwhile)."""

    async def handle(self, msg: Incoming) -> Reply:
        await asyncio.sleep(0.55)
        return plain("answer", "好的。")


class CitingWriter:
    """A scripted LLM's default answer: `template` with "{id}" set to the first evidence id in the prompt."""

    def __init__(self, template: str) -> None:
        self.template = template

    def __call__(self, messages: list[dict[str, str]]) -> str:
        evidence_id = CITATION_RE.findall(messages[-1]["content"])[0]
        return self.template.replace("{id}", evidence_id)


@pytest.fixture
async def api() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
async def store(tmp_path) -> AsyncIterator[HistoryStore]:
    history = await HistoryStore.open(tmp_path / "history.sqlite3")
    yield history
    await history.close()


async def ask(api: FakeTelegramAPI, chat_id: int, text: str, user_id: int | None = None, **kw: object) -> Sent:
    """Push a user's message and return the bot's next message to that chat."""
    before = len([s for s in api.sent if s.chat_id == chat_id])
    api.push_text(chat_id, text, user_id, **kw)
    return (await api.wait_sent(before + 1, chat_id=chat_id))[before]


async def test_transcript(sample_cfg, sample_engine, store, api):
    """Question → HTML answer with 原文 buttons → button press → /source → /status (as admin); printed."""
    cfg = tg_config(sample_cfg, api)
    lines: list[str] = []
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        answer = await ask(api, ADMIN, QUESTION)
        lines += [f"用户> {QUESTION}", f"机器人 [sendMessage parse_mode={answer.parse_mode}]\n{answer.text}",
                  f"  按钮: {answer.buttons}"]
        label, data = answer.buttons[0]
        api.push_callback(answer, data)
        passage = (await api.wait_sent(2))[1]
        lines += [f"用户> (按下 {label}, callback_data={data})",
                  f"机器人 [answerCallbackQuery] + [sendMessage]\n{passage.text}"]
        cid = data.removeprefix("src:")
        by_command = await ask(api, ADMIN, f"/source {cid}")
        lines += [f"用户> /source {cid}", f"机器人\n{by_command.text}"]
        status = await ask(api, ADMIN, "/status")
        lines += ["用户(管理员)> /status", f"机器人\n{status.text}"]
    print("\n\n".join(["==== Telegram transcript (loopback fake) ===="] + lines))

    methods = api.methods()
    assert methods[:1] == ["getMe"] and "setMyCommands" in methods
    assert methods.index("sendChatAction") < methods.index("sendMessage")
    assert api.calls_of("sendChatAction")[0].params == {"chat_id": ADMIN, "action": "typing"}
    assert answer.parse_mode == "HTML" and "[1]" in answer.plain and "<b>来源</b>" in answer.text
    assert [b[0] for b in answer.buttons] == [f"原文{i}" for i in range(1, len(answer.buttons) + 1)]
    assert all(d.startswith("src:") and len(d.encode()) <= 64 for _, d in answer.buttons)
    assert api.methods().index("answerCallbackQuery") < len(api.methods()) - 1
    chunk = sample_engine.index.by_id[cid]
    assert passage.text.startswith(f"<b>【{cid}】") and chunk.text in passage.plain
    assert chunk.text in by_command.plain
    assert "索引版本" in status.plain and "对话记录" in status.plain


async def test_status_is_for_admins_and_other_commands_work(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        assert (await ask(api, 5, "/status")).plain == ADMIN_ONLY
        assert (await ask(api, 5, "/start")).plain == welcome("telegram")
        assert (await ask(api, 5, "/reset")).plain.startswith("已清除")


async def test_long_answer_is_split_with_buttons_under_the_last(sample_cfg, store, api):
    sentence = "第{n}条：锈病要及早预防，修剪后注意通风透光，发病初期喷药保护新叶[{id}]。"
    template = "".join(sentence.replace("{n}", str(n)) for n in range(1, 200))
    assert len(template) > 6000
    cfg = tg_config(sample_cfg, api)
    engine = engine_for(cfg, chat=ScriptedChatModel(default=CitingWriter(template)))
    async with running(cfg, api, ChatService(cfg, engine, store)):
        api.push_text(42, QUESTION)
        sent = await api.wait_sent(2)
        await asyncio.sleep(0.3)  # nothing more follows
    assert len(api.sent) == 2
    first, last = api.sent
    assert all(len(s.plain.encode("utf-16-le")) // 2 <= 4096 and s.parse_mode == "HTML" for s in sent)
    assert first.reply_markup is None and [b[0] for b in last.buttons] == ["原文1"]
    assert "<b>来源</b>" in last.text and "来源" not in first.text
    assert (first.plain + last.plain).count("[1]") == 199 + 1  # every sentence's marker, plus the source line
    assert "第199条" in last.plain and first.plain.endswith("。")


async def test_markup_characters_arrive_intact(sample_cfg, store, api):
    tricky = "叶片<b>不是标签</b> a<b && c>d *粗体* _斜体_ 2 < 3 & 5 > 4[{id}]。"
    cfg = tg_config(sample_cfg, api)
    engine = engine_for(cfg, chat=ScriptedChatModel(default=CitingWriter(tricky)))
    async with running(cfg, api, ChatService(cfg, engine, store)):
        sent = await ask(api, 43, QUESTION)
    original = tricky.replace("[{id}]", "[1]")
    assert sent.parse_mode == "HTML"  # the fake parses HTML like Telegram: a bad escape would have been a 400
    assert original in html.unescape(sent.text) and original in sent.plain


async def test_rejected_html_goes_out_as_plain_text(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        api.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: unsupported tag")
        sent = await ask(api, 44, QUESTION)
    assert len(api.calls_of("sendMessage")) == 2
    assert sent.parse_mode is None and "<b>" not in sent.text and "来源" in sent.text and sent.buttons


async def test_seventh_question_in_a_minute_is_rate_limited(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api, rate_limit_per_minute=6)
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        questions = [QUESTION, "卡蒂姆一年施几次肥？", "咖啡果小蠹怎么防治？", "鲜果采回来多久要脱皮？", "咖啡怎么修剪？",
                     "叶子背面有黄粉咋办", "咖啡什么时候采收？"]
        replies = [await ask(api, 45, q) for q in questions]
    assert all("来源" in r.plain for r in replies[:6])
    assert replies[6].plain == RATE_LIMITED and replies[6].buttons == []


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")  # raised inside PTB's RetryAfter
async def test_flood_control_retry_after_is_honoured(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        api.fail_next("sendMessage", retry_after=1)
        sent = await ask(api, 46, QUESTION)
    tries = api.calls_of("sendMessage")
    assert len(tries) == 2 and tries[1].at - tries[0].at >= 0.95
    assert tries[0].params["text"] == tries[1].params["text"] == sent.text and sent.buttons


async def test_typing_is_refreshed_while_the_answer_is_prepared(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, SlowService(cfg, sample_engine, store)) as channel:
        channel.typing_every_s = 0.1
        await ask(api, 47, "慢慢答")
        await asyncio.sleep(0.25)  # no typing after the answer
    methods = [m for m in api.methods() if m in ("sendChatAction", "sendMessage")]
    assert methods[-1] == "sendMessage" and methods.count("sendChatAction") >= 4


async def test_stop_lets_an_answer_in_progress_finish(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, SlowService(cfg, sample_engine, store)):
        api.push_text(51, "慢慢答")
        await api.wait_for(lambda: "sendChatAction" in api.methods(), 5)
    assert [s.plain for s in api.sent] == ["好的。"]


async def test_media_gets_a_polite_notice(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        api.push_media(-100200, "photo", 7, chat_type="supergroup")  # not addressed: ignored
        for kind in ("voice", "photo", "sticker"):
            api.push_media(48, kind)
        notices = await api.wait_sent(3, chat_id=48)
        await asyncio.sleep(0.3)
    assert [n.plain for n in notices] == [NON_TEXT] * 3
    assert all(s.chat_id == 48 for s in api.sent)


async def test_group_answers_only_when_addressed(sample_cfg, sample_engine, store, api):
    group = -100300
    cfg = tg_config(sample_cfg, api)
    async with running(cfg, api, ChatService(cfg, sample_engine, store)):
        api.push_text(group, QUESTION, 7, chat_type="supergroup")  # not for the bot
        api.push_text(group, "/help@SomeOtherBot", 7)  # for another bot
        mention = api.push_text(group, f"@{BOT_USERNAME} {QUESTION}", 7)["message"]
        answer = (await api.wait_sent(1, chat_id=group))[0]
        follow = await ask(api, group, "那用什么药？", 8, reply_to=answer.message_id)
        help_ = await ask(api, group, f"/help@{BOT_USERNAME}", 8)
        await asyncio.sleep(0.3)
    assert answer.reply_to == mention["message_id"] and "来源" in answer.plain
    assert "来源" in follow.plain and help_.plain == welcome("telegram")
    assert len([s for s in api.sent if s.chat_id == group]) == 3
    turns = await store.recent("telegram", str(group), 10)
    assert [t.content for t in turns if t.role == "user"] == [QUESTION, "那用什么药？"]


async def test_history_survives_a_restart(sample_cfg, sample_engine, tmp_path, api):
    cfg = tg_config(sample_cfg, api)
    path = tmp_path / "history.sqlite3"
    first_store = await HistoryStore.open(path)
    try:
        async with running(cfg, api, ChatService(cfg, sample_engine, first_store)):
            await ask(api, 49, QUESTION)
    finally:
        await first_store.close()
    store = await HistoryStore.open(path)
    try:
        service = RecordingService(cfg, sample_engine, store)
        async with running(cfg, api, service):
            follow = await ask(api, 49, "那用什么药？")
        turns = await store.recent("telegram", "49", 10)
    finally:
        await store.close()
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[0].content == QUESTION and turns[2].content == "那用什么药？"
    answer = service.replies[-1].answer
    assert answer is not None and "锈病" in answer.rewritten_query and "来源" in follow.plain


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_webhook_mode_checks_the_secret(sample_cfg, sample_engine, store, api):
    import aiohttp

    port = _free_port()
    url = f"http://127.0.0.1:{port}/tg-hook"
    cfg = tg_config(sample_cfg, api)
    cfg = dataclasses.replace(cfg, telegram=dataclasses.replace(cfg.telegram, mode="webhook", webhook_url=url,
                                                                 listen="127.0.0.1", port=port))
    update = {"update_id": 1, "message": api.message(50, text=QUESTION)}
    async with running(cfg, api, ChatService(cfg, sample_engine, store)) as channel:
        assert api.webhook["url"] == url and api.webhook["secret_token"] == webhook_secret(api.token)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            async with http.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}) as r:
                assert r.status == 403
            headers = {"X-Telegram-Bot-Api-Secret-Token": webhook_secret(api.token)}
            async with http.post(url, json=update, headers=headers) as r:
                assert r.status == 200
            stored = await channel.inbox.counts()  # stored before the 200: a crash now would not lose it
            async with http.post(url, json=update, headers=headers) as r:  # Telegram re-sends: answered once
                assert r.status == 200
        sent = (await api.wait_sent(1))[0]
        await asyncio.sleep(0.3)
    assert sum(stored.values()) == 1 and len(api.sent) == 1
    assert sent.chat_id == 50 and "来源" in sent.plain and "getUpdates" not in api.methods()


async def test_index_reports_reach_the_telegram_admins_only(sample_cfg, sample_engine, store, api):
    cfg = tg_config(sample_cfg, api)
    cfg = dataclasses.replace(cfg, bot=dataclasses.replace(cfg.bot, admins=(f"telegram:{ADMIN}", "wechat:oXYZ")))
    async with running(cfg, api, ChatService(cfg, sample_engine, store)) as channel:
        await channel.notify_admins("索引重建 b1：已启用\n✗ 未能读取 scan.pdf：没有文字层")
        (sent,) = await api.wait_sent(1, chat_id=ADMIN)
        assert "scan.pdf" in sent.plain and "<" not in sent.plain
    assert {s.chat_id for s in api.sent} == {ADMIN}
