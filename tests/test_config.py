"""config.toml → frozen dataclasses: defaults, validation messages that name the key, secrets from the environment."""
from __future__ import annotations

import pytest

from rag_core.config import Config, ConfigError, Secrets, load_config, parse_config
from tests.conftest import REPO


def test_the_shipped_config_is_all_defaults():
    cfg = load_config(REPO / "config.toml")
    assert cfg.retrieval == Config().retrieval and cfg.models == Config().models and cfg.llm == Config().llm


@pytest.mark.parametrize(
    "data, message",
    [
        ({"retrieval": {"final_topk": "5"}}, "[retrieval] final_topk must be int"),
        ({"retrieval": {"topk": 5}}, "unknown key [retrieval] topk"),
        ({"chunking": {"method": "fixed"}}, "[chunking] method must be one of semantic, sliding"),
        ({"index": {"keep_builds": 1}}, "[index] keep_builds must be at least 2"),
        ({"nonsense": {}}, "unknown section [nonsense]"),
        ({"bot": {"admins": [1]}}, "[bot] admins must be a list of strings"),
    ],
)
def test_bad_values_name_the_key(data, message):
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert message in str(err.value)


def test_floats_accept_integers_and_paths_resolve_against_the_file(tmp_path):
    (tmp_path / "c.toml").write_text('[llm]\ntimeout_s = 5\n[paths]\ndata_dir = "d"\n', encoding="utf-8")
    cfg = load_config(tmp_path / "c.toml")
    assert cfg.llm.timeout_s == 5.0 and cfg.data_dir == (tmp_path / "d").resolve()
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_secrets_only_from_the_environment():
    s = Secrets.from_env({"OPENAI_API_KEY": "k2", "TELEGRAM_BOT_TOKEN": "", "WECHAT_TOKEN": "t"})
    assert s.llm_api_key == "k2" and s.telegram_token is None and s.wechat_token == "t"
    assert Secrets.from_env({"DEEPSEEK_API_KEY": "k1", "OPENAI_API_KEY": "k2"}).llm_api_key == "k1"
