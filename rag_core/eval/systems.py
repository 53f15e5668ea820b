"""The systems of the paper's Table 4 (one component changed at a time) and Table 5 (chunking), and how to make
their engines. A system whose model cannot be had here is skipped with the reason, never faked."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..config import Config, with_overrides
from ..index.build import build_index, fingerprint, scan_kb
from ..index.layout import Layout
from ..models import Embedder, Reranker, bundled_embedder, load_embedder, load_reranker, resolve_model_path
from ..pipeline import Engine, Options, make_tokenizer
from ..rank.encoder import E5_FILE, load_encoder
from ..rank.model import STATS_FILE
from ..rank.train import code_files
from .gold import GOLD_DIR, GOLD_FILES
from ..retrieve import Channels

log = logging.getLogger(__name__)

LIGHT_RERANKER = "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"  # B4: a lighter multilingual cross-encoder
SOURCE_FILE = "eval-source.key"  # beside an eval index's builds: the source_key its current build was made from


def source_key(cfg: Config, embedder: Embedder, tokenizer) -> str:
    """What an eval build depends on: the KB's files, the pipeline that cuts and tokenises them (the build's
    fingerprint), and the learned ranker's inputs (its code, the resources it reads, its training sets and the
    retrieval settings). A build of another key measures something `make run` no longer serves."""
    h = hashlib.sha256(fingerprint(cfg, embedder, tokenizer).encode())
    for path in scan_kb(cfg.kb_dir):
        h.update(str(path.relative_to(cfg.kb_dir)).encode() + b"\0" + path.read_bytes())
    for path in [*code_files(), *(GOLD_DIR / name for name in GOLD_FILES)]:
        h.update(path.name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"-"))
    h.update(json.dumps([dataclasses.asdict(cfg.retrieval), cfg.history.har_turns], sort_keys=True).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class System:
    name: str
    label: str
    options: Options = Options()
    embedder: str = "configured"  # "configured" | "fallback"
    reranker: str = "configured"  # "configured" | "light" | "none"
    chunking: str = "configured"  # "configured" | "semantic" | "sliding"


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("full", "Full system (hybrid + RRF + rerank + HAR/IHI)"),
        System("b1", "B1: no reranker (fusion order)", Options(channels=Channels(rerank=False)), reranker="none"),
        System("b2a", "B2a: dense only", Options(channels=Channels(bm25=False))),
        System("b2b", "B2b: BM25 only", Options(channels=Channels(dense=False))),
        System("b3", "B3: embedder fallback", embedder="fallback"),
        System("b4", "B4: the other reranker", reranker="other"),
        System("b5", "B5: no HAR/IHI", Options(har=False, ihi=False)),
        System("simple", "Simple RAG (dense-only + generation)",
               Options(channels=Channels(bm25=False, rerank=False), har=False, ihi=False), reranker="none"),
        System("semantic", "Chunking: semantic", chunking="semantic"),
        System("sliding", "Chunking: sliding window", chunking="sliding"),
    )
}


class Skip(Exception):
    """This system cannot run here; the message says why."""


class EngineFactory:
    """Builds (once) the index each system needs under `work_dir`, and the engines over them."""

    def __init__(self, cfg: Config, work_dir: Path, chat=None):
        self.cfg = cfg
        self.work_dir = work_dir
        self.chat = chat
        self._embedders: dict[str, tuple[Embedder, list[str]]] = {}
        self._rerankers: dict[str, tuple[Reranker | None, list[str]]] = {}
        self._indexes: dict[tuple[str, str], Config] = {}

    def embedder(self, which: str) -> tuple[Embedder, list[str]]:
        if which not in self._embedders:
            if which == "fallback":
                self._embedders[which] = (bundled_embedder(), [])
            else:
                emb, warnings = load_embedder(self.cfg.models)
                self._embedders[which] = (emb, warnings)
        return self._embedders[which]

    def reranker(self, which: str) -> tuple[Reranker | None, list[str]]:
        """"configured": the configured cross-encoder (the learned ranker stands in when it cannot be loaded);
        "none": no reranking; "other": the learned ranker when the configured cross-encoder loads, else the lighter
        cross-encoder when it is here (else Skip)."""
        if which == "none":
            return None, []
        if which == "other":
            configured, _ = self.reranker("configured")
            if configured is not None:
                return None, [f"learned ranker instead of the cross-encoder {configured.name}"]
            which = "light"
        if which not in self._rerankers:
            if which == "light":
                if resolve_model_path(LIGHT_RERANKER) is None:
                    raise Skip(f"no other reranker here: the configured cross-encoder is not loaded (the full system "
                               f"runs the learned ranker) and the lighter {LIGHT_RERANKER} is not available locally")
                models = dataclasses.replace(self.cfg.models, reranker=LIGHT_RERANKER)
            else:
                models = self.cfg.models
            self._rerankers[which] = load_reranker(models)
        return self._rerankers[which]

    def index_config(self, embedder: Embedder, chunking: str) -> Config:
        method = self.cfg.chunking.method if chunking == "configured" else chunking
        key = (embedder.name, method)
        if key not in self._indexes:
            data_dir = self.work_dir / f"index-{method}-{embedder.name.replace('/', '_')}"
            cfg = with_overrides(self.cfg, chunking={"method": method}, paths={"data_dir": str(data_dir)})
            # the project's embedding cache, so the eval builds cost little (e5 passages: minutes otherwise)
            current = Layout(data_dir).current_dir()
            untrained = cfg.retrieval.learned_ranker and current is not None and not (
                (current / STATS_FILE).exists()
                and ((current / E5_FILE).exists() or load_encoder(cfg.retrieval.ranker_encoder) is None))
            tokenizer = make_tokenizer(cfg)
            source = source_key(cfg, embedder, tokenizer)
            marker = data_dir / SOURCE_FILE
            stale = current is not None and (not marker.exists() or marker.read_text(encoding="utf-8") != source)
            if current is None or untrained or stale:  # none yet, one made before the learned ranker or its e5
                # features, or one of another KB, pipeline or ranker: rebuild (the embedding cache makes it cheap)
                log.info("building the %s index with %s for evaluation", method, embedder.name)
                build_index(cfg, embedder, tokenizer, embedding_cache=Layout(self.cfg.data_dir).embedding_cache)
                marker.write_text(source, encoding="utf-8")
            self._indexes[key] = cfg
        return self._indexes[key]

    def engine(self, system: System) -> tuple[Engine, list[str]]:
        embedder, warnings = self.embedder(system.embedder)
        reranker, more = self.reranker(system.reranker)
        cfg = self.index_config(embedder, system.chunking)
        engine = Engine(cfg, make_tokenizer(cfg), embedder, reranker, self.chat, tuple(warnings + more))
        return engine, warnings + more

