"""bot/logs.py: secrets masked on every handler (message, arguments, exception text), third-party libraries quiet
unless -vvv or [log] levels ask, and [log] file with rotation."""
from __future__ import annotations

import logging
import sys
import threading

import pytest

from bot import logs
from rag_core.config import ConfigError, LogConfig

TG_TOKEN = "7012345678:AAH5x-Secret_TelegramToken0123456789"
APP_SECRET = "wechat-app-secret-3f9a"
AES_KEY = "abcdefghijklmnopqrstuvwxyz0123456789ABCD+/G"
LLM_KEY = "sk-llm-key-55aa"
SECRETS = (TG_TOKEN, APP_SECRET, AES_KEY, LLM_KEY)


@pytest.fixture
def logging_setup(tmp_path):
    """`setup(...)` as the CLI does, undone afterwards; yields the path of the file `[log] file` names."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), sys.excepthook, threading.excepthook,
             {n: logging.getLogger(n).level for n in logs.THIRD_PARTY + ("httpx.sub",)})

    def configure(verbosity: int, **log_cfg) -> None:
        logs.setup(verbosity, LogConfig(**log_cfg), tmp_path, secrets=SECRETS)

    yield configure
    for handler in [h for h in root.handlers if h not in saved[1]]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(saved[0])
    sys.excepthook, threading.excepthook = saved[2], saved[3]
    for name, level in saved[4].items():
        logging.getLogger(name).setLevel(level)
    logs.set_secrets(())
    logging.captureWarnings(False)


def emit_everything() -> None:
    """What the libraries and our code log when a token or key is in play."""
    logging.getLogger("httpx").info('HTTP Request: POST http://127.0.0.1:1/bot%s/getUpdates "HTTP/1.1 200 OK"',
                                    TG_TOKEN)
    logging.getLogger("urllib3.connectionpool").debug(
        'http://127.0.0.1:2 "GET /cgi-bin/token?grant_type=client_credential&appid=wx1&secret=%s HTTP/1.1" 200 59',
        APP_SECRET)
    log = logging.getLogger("bot.wechat")
    log.warning("push failed: https://api.weixin.qq.com/cgi-bin/message/custom/send?access_token=ACCESS-TOKEN-77")
    log.info("key %s and aes %s", LLM_KEY, AES_KEY)
    try:
        raise RuntimeError(f"Authorization: Bearer {LLM_KEY} refused for bot{TG_TOKEN}")
    except RuntimeError:
        log.exception("call failed")
    log.debug('token reply {"access_token": "ACCESS-TOKEN-88", "expires_in": 7200}')


def test_redact_masks_configured_secrets_and_secret_shaped_values():
    logs.set_secrets([APP_SECRET, AES_KEY])
    try:
        text = (f"secret={APP_SECRET} {AES_KEY} {AES_KEY.replace('+', '%2B').replace('/', '%2F')} "
                f"?access_token=abc&x=1 /bot{TG_TOKEN}/getMe Bearer {LLM_KEY} socks5://farmer:pr0xy-pw@10.0.0.1:1080")
        masked = logs.redact(text)
    finally:
        logs.set_secrets(())
    assert all(s not in masked for s in (APP_SECRET, AES_KEY, "%2F", "abc", TG_TOKEN.split(":")[1], LLM_KEY, "pr0xy-pw"))
    assert "?access_token=***&x=1" in masked and "/bot***/getMe" in masked
    assert "socks5://farmer:***@10.0.0.1:1080" in masked


def test_every_secret_is_masked_in_stderr_and_the_file_at_vvv(logging_setup, tmp_path, capsys):
    logging_setup(3, file="logs/coffeebot.log")
    emit_everything()
    err = capsys.readouterr().err
    text = (tmp_path / "logs" / "coffeebot.log").read_text(encoding="utf-8")
    for out in (err, text):
        assert "getUpdates" in out and "secret=***" in out and "Traceback" in out and "Bearer ***" in out
        for leaked in (*SECRETS, TG_TOKEN.split(":")[1], "ACCESS-TOKEN-77", "ACCESS-TOKEN-88"):
            assert leaked not in out, leaked


def test_third_party_loggers_are_quiet_at_vv_unless_named(logging_setup, capsys):
    logging_setup(2)
    emit_everything()
    err = capsys.readouterr().err
    assert "getUpdates" not in err and "cgi-bin/token" not in err  # httpx INFO, urllib3 DEBUG: dropped
    assert "bot.wechat: call failed" in err and "token reply" in err  # our own DEBUG: kept
    logging_setup(2, levels=("httpx=INFO",))
    emit_everything()
    logging.getLogger("httpx.sub").info("child of httpx")
    logging.getLogger("somelib").info("an unlisted library")
    err = capsys.readouterr().err
    assert "getUpdates" in err and "child of httpx" in err and TG_TOKEN not in err
    assert "cgi-bin/token" not in err and "an unlisted library" not in err


def test_default_level_is_warning_and_the_file_records_info(logging_setup, tmp_path, capsys):
    logging_setup(0, file="coffeebot.log")
    logging.getLogger("bot.app").info("serving on telegram")
    logging.getLogger("bot.app").warning("a warning")
    err = capsys.readouterr().err
    text = (tmp_path / "coffeebot.log").read_text(encoding="utf-8")
    assert "serving on telegram" not in err and "a warning" in err
    assert "serving on telegram" in text and "a warning" in text


def test_the_file_rotates(logging_setup, tmp_path):
    logging_setup(1, file="c.log", max_bytes=2048, backup_count=2)
    for i in range(200):
        logging.getLogger("bot.x").info("line %d %s", i, APP_SECRET)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["c.log", "c.log.1", "c.log.2"]
    assert all((tmp_path / f).stat().st_size <= 2048 for f in files)
    assert "line 199 ***" in (tmp_path / "c.log").read_text(encoding="utf-8")


def test_a_second_setup_replaces_the_first_handlers(logging_setup):
    logging_setup(0)
    logging_setup(1)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_coffeebot", False)]
    assert len(ours) == 1


def test_bad_level_override_names_the_key():
    with pytest.raises(ConfigError, match=r"\[log\] levels"):
        logs.parse_levels(["httpx"])
    assert logs.parse_levels(["httpx = info"]) == {"httpx": logging.INFO}
