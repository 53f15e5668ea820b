"""A scripted ChatModel: outputs are queued, inputs are recorded, queued exceptions are raised."""
from __future__ import annotations

import collections
import copy
import threading
from collections.abc import Callable

Messages = list[dict[str, str]]


class ScriptedChatModel:
    """Satisfies `rag_core.llm.ChatModel` without a network.

    Each `complete` call records its messages in `calls` and takes the next queued output: a string is returned
    (and streamed to `on_delta` in `piece_chars`-character pieces), an exception is raised. With nothing queued it
    uses `default` (a string or a function of the messages); with no default it fails the test loudly.
    """

    def __init__(
        self,
        *outputs: str | BaseException,
        default: str | Callable[[Messages], str] | None = None,
        model_name: str = "scripted",
        piece_chars: int = 4,
    ) -> None:
        self.model_name = model_name
        self.default = default
        self.piece_chars = piece_chars
        self.calls: list[Messages] = []
        self._outputs: collections.deque[str | BaseException] = collections.deque(outputs)
        self._lock = threading.Lock()  # the bot calls models through asyncio.to_thread

    def push(self, *outputs: str | BaseException) -> None:
        with self._lock:
            self._outputs.extend(outputs)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._outputs)

    @property
    def last_messages(self) -> Messages:
        if not self.calls:
            raise AssertionError("ScriptedChatModel was never called")
        return self.calls[-1]

    def complete(self, messages: Messages, on_delta: Callable[[str], None] | None = None) -> str:
        with self._lock:
            self.calls.append(copy.deepcopy(messages))
            output = self._outputs.popleft() if self._outputs else None
            call_no = len(self.calls)
        if output is None:
            if self.default is None:
                raise AssertionError(f"ScriptedChatModel: no output queued for call #{call_no}")
            output = self.default(messages) if callable(self.default) else self.default
        if isinstance(output, BaseException):
            raise output
        if on_delta is not None:
            for i in range(0, len(output), self.piece_chars):
                on_delta(output[i : i + self.piece_chars])
        return output
