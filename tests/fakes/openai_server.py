"""A loopback fake of the OpenAI-compatible Chat Completions endpoint, for tests.

`FakeOpenAIServer` runs an aiohttp server on 127.0.0.1 (an OS-chosen port) in a background thread with its own
event loop, so sync tests and async tests use it the same way:

    with FakeOpenAIServer() as server:            # or: async with FakeOpenAIServer() as server:
        server.push(http_error(429, retry_after=2), answer("你好[e76faa05#3]"))
        ... OpenAI(base_url=server.base_url, ...) ...
        assert server.requests[0]["model"] == "deepseek-chat"

Each request takes the next scripted `Reply`; when the queue is empty it gets the default answer (a string, or a
function of the request JSON). A text answer is served as one `chat.completion` or, when the request asks for
`"stream": true`, as SSE `chat.completion.chunk` events ending with `data: [DONE]`.
"""
from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Responder = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Reply:
    """One scripted response. Build it with `answer`, `http_error`, `stalled_stream` or `cut_stream`."""

    text: str = ""
    pieces: tuple[str, ...] = ()  # how a streamed answer is split; empty: a few characters at a time
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (to exceed the client's timeout)
    stall_after: int | None = None  # stream: send this many content pieces, then hang until the client gives up
    cut_after: int | None = None  # stream: send this many content pieces, then drop the connection
    finish_reason: str = "stop"
    piece_delay_s: float = 0.0  # stream: wait this long before each content piece (a model writing as it thinks)

    def stream_pieces(self) -> tuple[str, ...]:
        if self.pieces:
            return self.pieces
        return tuple(self.text[i : i + 4] for i in range(0, len(self.text), 4))


def answer(text: str, *, pieces: tuple[str, ...] = (), delay_s: float = 0.0, finish_reason: str = "stop",
           piece_delay_s: float = 0.0) -> Reply:
    """A successful answer; `pieces` (when given) must join to `text` and fix how it is streamed, `piece_delay_s`
    how long each takes."""
    if pieces and "".join(pieces) != text:
        raise ValueError("pieces must join to text")
    return Reply(text=text, pieces=pieces, delay_s=delay_s, finish_reason=finish_reason, piece_delay_s=piece_delay_s)


def http_error(status: int, *, retry_after: float | str | None = None, message: str = "", delay_s: float = 0.0) -> Reply:
    """An error status with an OpenAI-style JSON error body (and a Retry-After header when given)."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Reply(text=message or f"fake error {status}", status=status, headers=headers, delay_s=delay_s)


def stalled_stream(text: str, *, after: int = 1) -> Reply:
    """A stream that sends `after` pieces of `text`, then goes silent (plain requests get the same silence)."""
    return Reply(text=text, stall_after=after)


def cut_stream(text: str, *, after: int = 1) -> Reply:
    """A stream that sends `after` pieces of `text`, then drops the connection mid-body."""
    return Reply(text=text, cut_after=after)


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error"}


class FakeOpenAIServer:
    """POST /v1/chat/completions on 127.0.0.1; scripted replies; every request's JSON kept in `requests`."""

    def __init__(self, default: str | Responder = "默认回答。", *, model: str = "") -> None:
        self.default = default
        self.model = model  # reported model name; empty: echo the request's
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._queue: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self._serial = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Reply | str) -> None:
        """Queue replies (a plain string is `answer(string)`), served in order, one per request."""
        with self._lock:
            self._queue.extend(answer(r) if isinstance(r, str) else r for r in replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._setup())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start within 10 s")
        if failure:
            raise failure[0]
        return self

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._teardown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> FakeOpenAIServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.close)

    async def _setup(self) -> None:
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _teardown(self) -> None:
        assert self._closing is not None and self._runner is not None
        self._closing.set()  # wakes delayed and stalled handlers
        await self._runner.cleanup()

    # -- serving ---------------------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            self._serial += 1
            serial = self._serial
            reply = self._queue.popleft() if self._queue else None
        if reply is None:
            text = self.default(body) if callable(self.default) else self.default
            reply = answer(text)
        if reply.delay_s and await self._wait_closing(reply.delay_s):
            raise web.HTTPServiceUnavailable()
        if reply.status != 200:
            kind = _ERROR_TYPES.get(reply.status, "server_error")
            error = {"error": {"message": reply.text, "type": kind, "param": None, "code": kind}}
            return web.json_response(error, status=reply.status, headers=dict(reply.headers))
        model = self.model or str(body.get("model", "fake-model"))
        ident = f"chatcmpl-fake-{serial}"
        if body.get("stream"):
            return await self._stream(request, body, reply, ident, model)
        if reply.stall_after is not None:
            await self._wait_closing(3600)
            raise web.HTTPServiceUnavailable()
        message = {"role": "assistant", "content": reply.text}
        return web.json_response({
            "id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": _usage(body, reply.text),
        })

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply, ident: str, model: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        created = int(time.time())

        async def send(delta: dict[str, str], finish: str | None = None, usage: dict | None = None) -> None:
            chunk: dict[str, Any] = {
                "id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            }
            if usage is not None:
                chunk["usage"] = usage
            await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        for n, piece in enumerate(reply.stream_pieces()):
            if n == reply.stall_after:
                await self._wait_closing(3600)
                return response
            if n == reply.cut_after:
                assert request.transport is not None
                request.transport.abort()  # mid-body: the client sees an incomplete chunked response
                return response
            if reply.piece_delay_s and await self._wait_closing(reply.piece_delay_s):
                return response
            await send({"content": piece})
        await send({}, reply.finish_reason, _usage(body, reply.text))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _wait_closing(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if the server is closing; True when it is closing."""
        assert self._closing is not None
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True


def _usage(body: Mapping[str, Any], text: str) -> dict[str, int]:
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    return {"prompt_tokens": prompt, "completion_tokens": len(text), "total_tokens": prompt + len(text)}
