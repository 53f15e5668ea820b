"""Logging for the `coffeebot` command, configured once in `bot.cli.main`: stderr, an optional rotating file
(`[log] file`), and on every handler one filter that masks secrets and quiets third-party libraries.

- Secrets: the values of the secret environment variables (Telegram bot token, WeChat AppSecret, callback token and
  EncodingAESKey, the LLM API key), plus anything shaped like one whatever its source — `bot<id>:<token>` in
  Telegram URLs, `secret=`/`access_token=`/… query values, `Bearer …` headers, `"access_token": "…"` in JSON, the
  password of a `scheme://user:password@host` URL (a proxy's) —
  are replaced by `***` in the formatted message, the exception text and the stack text of every record.
- Third-party loggers (httpx, urllib3, telegram, apscheduler, chromadb, asyncio, …) reach the handlers at WARNING
  and above only, unless `-vvv` or `[log] levels` names them ("httpx=INFO").

`redact(text)` is the same masking for text that goes elsewhere (e.g. an error stored in a database).
"""
from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Iterable, Sequence

from rag_core.config import ConfigError, LogConfig

MASK = "***"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
OWN = ("bot", "rag_core", "coffeebot", "__main__", "py.warnings")  # our loggers: their levels follow -v
SECRET_ENV = ("TELEGRAM_BOT_TOKEN", "WECHAT_APP_SECRET", "WECHAT_TOKEN", "WECHAT_ENCODING_AES_KEY",
              "DEEPSEEK_API_KEY", "OPENAI_API_KEY")
# Named so that their DEBUG records are not even built (the filter also stops any library not listed here).
THIRD_PARTY = ("httpx", "httpcore", "urllib3", "requests", "telegram", "apscheduler", "chromadb", "asyncio",
               "aiohttp", "aiosqlite", "openai", "wechatpy", "hpack", "h2", "sentence_transformers", "transformers",
               "huggingface_hub", "filelock", "jieba", "matplotlib", "PIL", "posthog", "onnxruntime", "fsspec",
               "charset_normalizer", "multipart", "watchfiles", "tzlocal")

_PATTERNS = (
    (re.compile(r"(bot)\d{3,}:[A-Za-z0-9_-]{10,}"), r"\1" + MASK),  # Telegram: /bot<id>:<token>/getUpdates
    (re.compile(r"\b\d{6,}:[A-Za-z0-9_-]{30,}"), MASK),  # a bare Telegram bot token
    (re.compile(r"(?i)([?&;](?:access_token|secret|appsecret|app_secret|api_key|apikey|key|token|password|"
                r"encodingaeskey|refresh_token|ticket)=)[^&\s#'\"]+"), r"\1" + MASK),
    (re.compile(r"(?i)(\bbearer\s+)[^\s'\",}]+"), r"\1" + MASK),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@'\"]+:)[^@\s/'\"]+@"), r"\1" + MASK + "@"),  # user:password@
    (re.compile(r"(?i)([\"'](?:access_token|secret|appsecret|api_key|password|refresh_token)[\"']\s*:\s*[\"'])"
                r"[^\"']+"), r"\1" + MASK),
)

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first, each with its URL-encoded form


def set_secrets(values: Iterable[str | None]) -> None:
    """The literal values `redact` masks (empty ones are ignored)."""
    forms = set()
    for value in values:
        if value:
            forms.add(value)
            forms.add(urllib.parse.quote(value, safe=""))
            forms.add(urllib.parse.quote_plus(value, safe=""))
    global _secrets
    with _lock:
        _secrets = tuple(sorted(forms, key=len, reverse=True))


def secrets_from_env(env=None) -> list[str]:
    env = os.environ if env is None else env
    return [env[k] for k in SECRET_ENV if env.get(k)]


def redact(text: str) -> str:
    """`text` with every configured secret and every secret-shaped value masked."""
    for value in _secrets:
        if value in text:
            text = text.replace(value, MASK)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def _is_own(name: str) -> bool:
    return name == "root" or any(name == p or name.startswith(p + ".") for p in OWN)


class RedactingFilter(logging.Filter):
    """On a handler: mask secrets in the record's message, exception and stack text; drop third-party records
    under `third_party_level` unless their logger (or a parent) has an explicit override."""

    def __init__(self, third_party_level: int = logging.WARNING, overrides: dict[str, int] | None = None) -> None:
        super().__init__()
        self.third_party_level = third_party_level
        self.overrides = dict(overrides or {})

    def _threshold(self, name: str) -> int:
        if _is_own(name):
            return logging.NOTSET
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            level = self.overrides.get(".".join(parts[:i]))
            if level is not None:
                return level
        return self.third_party_level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self._threshold(record.name):
            return False
        if getattr(record, "_redacted", False):  # a second handler: already done
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what we have, masked
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        record._redacted = True
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (pytest swaps it between tests)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def parse_levels(specs: Sequence[str]) -> dict[str, int]:
    """["httpx=INFO", …] → {"httpx": 20, …}; a wrong entry is a ConfigError naming the key."""
    levels = {}
    for spec in specs:
        name, _, level = spec.partition("=")
        value = logging.getLevelName(level.strip().upper())
        if not name.strip() or not isinstance(value, int):
            raise ConfigError(f'[log] levels: expected "logger=LEVEL" (DEBUG, INFO, WARNING, ERROR), got {spec!r}')
        levels[name.strip()] = value
    return levels


def _ours(handler: logging.Handler) -> bool:
    return getattr(handler, "_coffeebot", False)


def _install(handler: logging.Handler, level: int, flt: RedactingFilter) -> None:
    handler._coffeebot = True  # type: ignore[attr-defined]
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(flt)
    logging.getLogger().addHandler(handler)


def setup(verbosity: int, cfg: LogConfig | None = None, root: Path | None = None,
          secrets: Iterable[str | None] | None = None) -> None:
    """Configure logging for this process (again: replaces what an earlier call installed).

    `verbosity` is the count of -v: 0 WARNING, 1 INFO, 2 DEBUG, 3 DEBUG for third-party libraries too.
    With `cfg.file`, a rotating file (relative to `root`) records at `cfg.file_level` or what -v asks, if more.
    """
    cfg = cfg or LogConfig()
    set_secrets(secrets_from_env() if secrets is None else secrets)
    overrides = parse_levels(cfg.levels)
    console = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    file_level = min(console, logging.getLevelName(cfg.file_level)) if cfg.file else console
    third_party = logging.DEBUG if verbosity >= 3 else logging.WARNING
    flt = RedactingFilter(third_party, overrides)
    root_logger = logging.getLogger()
    for handler in [h for h in root_logger.handlers if _ours(h)]:
        root_logger.removeHandler(handler)
        handler.close()
    _install(_StderrHandler(), console, flt)
    if cfg.file:
        path = Path(cfg.file) if root is None else root / cfg.file
        path.parent.mkdir(parents=True, exist_ok=True)
        _install(logging.handlers.RotatingFileHandler(path, maxBytes=cfg.max_bytes, backupCount=cfg.backup_count,
                                                      encoding="utf-8", delay=True), file_level, flt)
    root_logger.setLevel(min(console, file_level))
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(overrides.get(name, third_party))
    for name, level in overrides.items():
        logging.getLogger(name).setLevel(level)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = lambda args: _log_uncaught(args.exc_type, args.exc_value, args.exc_traceback,
                                                      f"thread {args.thread.name if args.thread else '?'}")


def _log_uncaught(exc_type, exc, tb, where: str = "main thread") -> None:
    """Uncaught exceptions go through the handlers (and so the filter) instead of straight to stderr."""
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    logging.getLogger("coffeebot").critical("uncaught exception in the %s", where, exc_info=(exc_type, exc, tb))
