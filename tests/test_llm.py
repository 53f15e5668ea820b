"""OpenAIChatModel against the loopback fake OpenAI-compatible server: answers, streaming, retries, failures."""
from __future__ import annotations

import asyncio
import dataclasses
import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rag_core.config import LLMConfig
from rag_core.llm import LLMError, OpenAIChatModel, retry_after_s
from tests.fakes import FakeOpenAIServer, ScriptedChatModel, answer, cut_stream, http_error, stalled_stream

pytestmark = pytest.mark.timeout(20)

MESSAGES = [{"role": "system", "content": "你是咖啡种植顾问。"}, {"role": "user", "content": "咖啡锈病怎么防治？"}]


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake
    assert not any(t.name == "fake-openai-server" for t in threading.enumerate()), "server thread left running"


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_model(base_url: str, sleeps: list[float], **overrides: object) -> OpenAIChatModel:
    cfg = LLMConfig(base_url=base_url, model="deepseek-chat", timeout_s=5.0, max_retries=2, max_tokens=321,
                    temperature=0.2, stream=False)
    cfg = dataclasses.replace(cfg, **overrides)
    return OpenAIChatModel.from_config(cfg, "sk-test", sleep=sleeps.append, rng=random.Random(7))


def test_plain_answer_and_the_request_it_sent(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(answer("喷施波尔多液预防锈病[e76faa05#3]。"))
    model = make_model(server.base_url, sleeps)
    assert model.complete(MESSAGES) == "喷施波尔多液预防锈病[e76faa05#3]。"
    assert model.model_name == "deepseek-chat"
    (request,) = server.requests
    assert request["model"] == "deepseek-chat"
    assert request["max_tokens"] == 321
    assert request["temperature"] == 0.2
    assert request["messages"] == MESSAGES
    assert not request.get("stream")


def test_streamed_answer_reaches_on_delta_in_order(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    pieces = ("咖啡", "锈病用", "铜制剂", "[e76faa05#3]", "。")
    server.push(answer("".join(pieces), pieces=pieces))
    deltas: list[str] = []
    text = make_model(server.base_url, sleeps, stream=True).complete(MESSAGES, on_delta=deltas.append)
    assert deltas == list(pieces)
    assert text == "".join(pieces)
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["max_tokens"] == 321


def test_rate_limited_then_success_waits_retry_after(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(http_error(429, retry_after=2), answer("好的"))
    assert make_model(server.base_url, sleeps).complete(MESSAGES) == "好的"
    assert len(server.requests) == 2
    assert len(sleeps) == 1 and 2.0 <= sleeps[0] <= 2.2


def test_server_errors_exhaust_the_retries(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(http_error(500), http_error(503), http_error(500))
    with pytest.raises(LLMError) as caught:
        make_model(server.base_url, sleeps, max_retries=2).complete(MESSAGES)
    assert caught.value.kind == "server" and caught.value.status == 500
    assert "attempt 3/3" in str(caught.value)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0  # exponential, with jitter


@pytest.mark.parametrize(("status", "kind"), [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "bad_request")])
def test_client_errors_are_not_retried(server: FakeOpenAIServer, sleeps: list[float], status: int, kind: str) -> None:
    server.push(http_error(status, message="invalid api key"))
    with pytest.raises(LLMError) as caught:
        make_model(server.base_url, sleeps).complete(MESSAGES)
    assert caught.value.kind == kind and caught.value.status == status
    assert f"HTTP {status}" in str(caught.value)
    assert len(server.requests) == 1 and sleeps == []


def test_a_slow_server_times_out_quickly(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(answer("太迟了", delay_s=10), answer("也太迟了", delay_s=10))
    model = make_model(server.base_url, sleeps, timeout_s=0.5, max_retries=1)
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        model.complete(MESSAGES)
    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 3
    assert len(server.requests) == 2 and len(sleeps) == 1


def test_a_stalled_stream_times_out_and_keeps_what_was_delivered(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(stalled_stream("咖啡锈病防治要点", after=1))
    deltas: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        make_model(server.base_url, sleeps, stream=True, timeout_s=0.5).complete(MESSAGES, on_delta=deltas.append)
    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 3
    assert deltas == ["咖啡锈病"]
    assert len(server.requests) == 1, "pieces were already delivered: no retry"


def test_a_stream_cut_before_any_text_is_retried(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(cut_stream("断了", after=0), answer("第二次成功"))
    deltas: list[str] = []
    assert make_model(server.base_url, sleeps, stream=True).complete(MESSAGES, on_delta=deltas.append) == "第二次成功"
    assert "".join(deltas) == "第二次成功"
    assert len(server.requests) == 2


def test_a_stream_cut_midway_fails_without_retry(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(cut_stream("咖啡锈病防治要点", after=1))
    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        make_model(server.base_url, sleeps, stream=True).complete(MESSAGES, on_delta=deltas.append)
    assert caught.value.kind == "connection"
    assert "not retried" in str(caught.value)
    assert deltas == ["咖啡锈病"] and len(server.requests) == 1


def test_connection_refused(sleeps: list[float]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(LLMError) as caught:
        make_model(f"http://127.0.0.1:{port}/v1", sleeps, max_retries=1).complete(MESSAGES)
    assert caught.value.kind == "connection"
    assert len(sleeps) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_an_empty_completion_is_an_error(server: FakeOpenAIServer, sleeps: list[float], stream: bool) -> None:
    server.push(answer("  "))
    with pytest.raises(LLMError) as caught:
        make_model(server.base_url, sleeps, stream=stream).complete(MESSAGES)
    assert caught.value.kind == "empty"
    assert len(server.requests) == 1


def test_a_retry_after_beyond_the_deadline_gives_up_at_once(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.push(http_error(429, retry_after=60))
    with pytest.raises(LLMError) as caught:
        make_model(server.base_url, sleeps, timeout_s=1.0, max_retries=3).complete(MESSAGES)
    assert caught.value.kind == "rate_limited" and "deadline" in str(caught.value)
    assert sleeps == [] and len(server.requests) == 1


def test_retry_after_header_forms() -> None:
    assert retry_after_s({"Retry-After": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert retry_after_s({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_s({"Retry-After": "soon"}) is None
    assert retry_after_s({}) is None


async def test_from_async_code_with_a_responder() -> None:
    async with FakeOpenAIServer(default=lambda body: "回声：" + body["messages"][-1]["content"]) as fake:
        model = make_model(fake.base_url, [], stream=True)
        text = await asyncio.to_thread(model.complete, MESSAGES)
    assert text == "回声：咖啡锈病怎么防治？"


def test_scripted_chat_model_records_and_raises() -> None:
    model = ScriptedChatModel("第一个回答", LLMError("timeout", "scripted timeout"))
    deltas: list[str] = []
    assert model.complete(MESSAGES, on_delta=deltas.append) == "第一个回答"
    assert "".join(deltas) == "第一个回答"
    with pytest.raises(LLMError):
        model.complete(MESSAGES)
    assert model.calls == [MESSAGES, MESSAGES]
    with pytest.raises(AssertionError, match="no output queued"):
        model.complete(MESSAGES)
