"""The chat-model interface and its OpenAI-compatible client (DeepSeek by default).

`ChatModel.complete(messages, on_delta)` is synchronous: the core is sync and the bot calls it through
`asyncio.to_thread`. `OpenAIChatModel` does its own retries (the SDK's are off): exponential backoff with jitter on
429, 5xx, timeouts and connection errors, honouring Retry-After (capped), within an overall deadline of
`timeout_s * (max_retries + 1)`. Every failure leaves as one `LLMError` whose `kind` says what went wrong.
"""
from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

import openai

from rag_core.config import LLMConfig

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]
LLMErrorKind = Literal["timeout", "rate_limited", "server", "auth", "bad_request", "connection", "empty"]
RETRYABLE: frozenset[str] = frozenset({"timeout", "rate_limited", "server", "connection"})
MAX_RETRY_AFTER_S = 20.0
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 8.0


class LLMError(Exception):
    """A chat completion failed; `kind` is one of LLMErrorKind, the message is for logs (English)."""

    def __init__(
        self, kind: LLMErrorKind, message: str = "", *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        message = message or f"LLM call failed: {kind}"
        super().__init__(message)
        self.kind: LLMErrorKind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


class ChatModel(Protocol):
    """Anything that turns chat messages into an answer; `on_delta` receives streamed pieces in order."""

    model_name: str

    def complete(self, messages: Messages, on_delta: Callable[[str], None] | None = None) -> str: ...


class OpenAIChatModel:
    """A ChatModel over the `openai` SDK's sync client, for any OpenAI-compatible Chat Completions endpoint."""

    def __init__(
        self,
        cfg: LLMConfig,
        api_key: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("an LLM API key is required (DEEPSEEK_API_KEY or OPENAI_API_KEY)")
        self.cfg = cfg
        self.model_name = cfg.model
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client = openai.OpenAI(base_url=cfg.base_url, api_key=api_key, timeout=cfg.timeout_s, max_retries=0)

    @classmethod
    def from_config(cls, cfg: LLMConfig, api_key: str, **kwargs: Any) -> OpenAIChatModel:
        return cls(cfg, api_key, **kwargs)

    def close(self) -> None:
        self._client.close()

    def complete(self, messages: Messages, on_delta: Callable[[str], None] | None = None) -> str:
        cfg = self.cfg
        started = time.monotonic()
        deadline = started + cfg.timeout_s * (cfg.max_retries + 1)
        emitted: list[str] = []  # pieces already given to on_delta: after one, a failure is not retried

        def emit(piece: str) -> None:
            emitted.append(piece)
            if on_delta is not None:
                on_delta(piece)

        attempt = 0
        while True:
            attempt += 1
            attempt_timeout = max(0.05, min(cfg.timeout_s, deadline - time.monotonic()))
            try:
                if cfg.stream:
                    text = self._streamed(messages, emit, attempt_timeout)
                else:
                    text = self._plain(messages, attempt_timeout)
            except LLMError as err:
                error = err
            except openai.OpenAIError as exc:
                error = _translate(exc, attempt_timeout)
            else:
                log.debug("LLM %s answered in %.2f s (attempt %d)", cfg.model, time.monotonic() - started, attempt)
                return text
            where = f"{cfg.model} at {cfg.base_url}, attempt {attempt}/{cfg.max_retries + 1}"
            if not error.retryable or attempt > cfg.max_retries:
                raise LLMError(error.kind, f"{error.message} ({where})", status=error.status) from error
            if emitted:
                raise LLMError(error.kind, f"{error.message} after {sum(map(len, emitted))} streamed characters; "
                               f"not retried, the pieces were already delivered ({where})", status=error.status)
            delay = self._backoff(attempt, error.retry_after)
            remaining = deadline - time.monotonic()
            if delay >= remaining - 0.05:
                raise LLMError(error.kind, f"{error.message}; giving up: a {delay:.1f} s wait would pass the "
                               f"overall deadline ({remaining:.1f} s left) ({where})", status=error.status)
            log.warning("LLM call failed (%s: %s; %s); retrying in %.2f s", error.kind, error.message, where, delay)
            self._sleep(delay)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt `attempt + 1`: Retry-After (capped) or exponential, plus jitter."""
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_S) * (1 + 0.1 * self._rng.random())
        return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempt - 1)) * (0.5 + 0.5 * self._rng.random())

    def _request(self, messages: Messages, timeout: float, stream: bool) -> Any:
        return self._client.chat.completions.create(
            model=self.cfg.model,
            messages=messages,  # type: ignore[arg-type]  # plain role/content dicts are valid message params
            max_tokens=self.cfg.max_tokens,
            temperature=self.cfg.temperature,
            stream=stream,
            timeout=timeout,
        )

    def _plain(self, messages: Messages, timeout: float) -> str:
        completion = self._request(messages, timeout, stream=False)
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content or "") if choice else ""
        return self._finished(text, choice.finish_reason if choice else None)

    def _streamed(self, messages: Messages, emit: Callable[[str], None], timeout: float) -> str:
        give_up_at = time.monotonic() + timeout  # the read timeout bounds silences; this bounds trickles
        parts: list[str] = []
        finish: str | None = None
        with self._request(messages, timeout, stream=True) as stream:
            for chunk in stream:
                if time.monotonic() > give_up_at:
                    raise LLMError("timeout", f"stream still running after the {timeout:.1f} s attempt timeout")
                for choice in chunk.choices:
                    piece = choice.delta.content if choice.delta else None
                    if piece:
                        parts.append(piece)
                        emit(piece)
                    finish = choice.finish_reason or finish
        text = "".join(parts)
        if finish is None:
            raise LLMError("connection", f"stream ended without a finish_reason after {len(text)} characters")
        return self._finished(text, finish)

    def _finished(self, text: str, finish_reason: str | None) -> str:
        if not text.strip():
            raise LLMError("empty", f"empty completion (finish_reason={finish_reason!r})")
        if finish_reason == "length":
            log.warning("LLM answer cut at max_tokens=%d (%d characters)", self.cfg.max_tokens, len(text))
        return text


def _translate(exc: openai.OpenAIError, timeout: float) -> LLMError:
    """One SDK exception → one LLMError (APITimeoutError is a subclass of APIConnectionError: test it first)."""
    if isinstance(exc, openai.APITimeoutError):
        return LLMError("timeout", f"no response within the {timeout:.1f} s attempt timeout")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return LLMError("connection", f"connection failed: {cause or exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = f"HTTP {status}: {body.get('message') or exc.message}"
        if status == 429:
            return LLMError("rate_limited", detail, status=status, retry_after=retry_after_s(exc.response.headers))
        if status in (401, 403):
            return LLMError("auth", detail, status=status)
        if status == 408:
            return LLMError("timeout", detail, status=status)
        if status >= 500:
            return LLMError("server", detail, status=status, retry_after=retry_after_s(exc.response.headers))
        return LLMError("bad_request", detail, status=status)
    if isinstance(exc, openai.APIError):  # an error event inside a stream, or an unreadable body
        return LLMError("server", f"API error: {exc.message}")
    return LLMError("bad_request", f"{type(exc).__name__}: {exc}")


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None when absent or bad."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            seconds = when.timestamp() - (time.time() if now is None else now)
        if seconds == seconds and seconds != float("inf"):  # not NaN, not infinite
            return max(0.0, seconds)
    return None
