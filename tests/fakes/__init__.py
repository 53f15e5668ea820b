"""Test doubles shared by the test suite: fakes over mocks (see STYLE.md)."""
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.openai_server import FakeOpenAIServer, Reply, answer, cut_stream, http_error, stalled_stream
from tests.fakes.wechat_api import Delivery, FakeWeChatAPI, WeChatPlatform
from tests.fakes.telegram_api import FakeTelegramAPI

__all__ = ["Delivery", "FakeOpenAIServer", "FakeWeChatAPI", "WeChatPlatform", "FakeTelegramAPI", "Reply", "ScriptedChatModel", "answer", "cut_stream", "http_error", "stalled_stream"]
