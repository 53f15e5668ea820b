"""Build an index: load → normalise → chunk → ids → BM25 tokens + dense vectors, written to a new build directory
that becomes current by an atomic pointer swap. A build that dies half-way leaves only a `.tmp-*` folder behind;
the build that was serving keeps serving.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..chunking import chunk_document
from ..config import Config
from ..ids import docid_for
from ..ingest.clean import normalise
from ..ingest.readers import SUPPORTED_SUFFIXES, IngestError, read_file
from ..lexical import Tokenizer
from ..models import Embedder
from ..records import Chunk, Document, Heading
from .archive import record_build
from .bm25 import save_tokens
from .dense import DenseStore
from .embcache import EmbeddingCache
from .layout import Layout

log = logging.getLogger(__name__)


class EmptyKnowledgeBase(RuntimeError):
    pass


@dataclass(frozen=True)
class Failure:
    path: str
    reason: str


@dataclass
class BuildReport:
    build_id: str
    documents: int = 0
    chunks: int = 0
    chars: int = 0
    failures: list[Failure] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    embedded: int = 0
    cache_hits: int = 0
    duration_s: float = 0.0
    swapped: bool = False
    gate: str = ""

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def scan_kb(kb_dir: Path) -> list[Path]:
    """Supported files under kb/, skipping hidden files and editors' lock files, in a stable order."""
    if not kb_dir.is_dir():
        raise EmptyKnowledgeBase(f"knowledge base folder not found: {kb_dir}")
    files = [
        p
        for p in kb_dir.rglob("*")
        if p.is_file()
        and not any(part.startswith((".", "~$")) for part in p.relative_to(kb_dir).parts)
        and p.suffix.lower() in SUPPORTED_SUFFIXES
    ]
    return sorted(files, key=lambda p: p.relative_to(kb_dir).as_posix())


def load_document(kb_dir: Path, path: Path) -> Document:
    """Read and normalise one file; raises IngestError with the reason when it cannot be used."""
    rel = path.relative_to(kb_dir).as_posix()
    data = path.read_bytes()
    norm = normalise(read_file(path))
    if not norm.text.strip():
        raise IngestError("no text after cleaning")
    headings = tuple(Heading(h.start, h.end, h.level, h.text) for h in norm.headings)
    return Document(
        docid=docid_for(rel),
        path=rel,
        title=norm.title or path.stem,
        text=norm.text,
        sha256=hashlib.sha256(data).hexdigest(),
        units=tuple(norm.units),
        headings=headings,
    )


def chunk_to_json(chunk: Chunk) -> dict:
    return dataclasses.asdict(chunk)


def _progress(items, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="doc", file=sys.stderr)


def build_index(
    cfg: Config,
    embedder: Embedder,
    tokenizer: Tokenizer,
    progress: bool = False,
    gate: Callable[[Path], str | None] | None = None,
) -> BuildReport:
    """Build a new index version beside the current one and swap it in.

    `gate(build_dir)` may veto the swap by returning a reason; the build is then kept aside under builds/.
    """
    started = time.monotonic()
    layout = Layout(cfg.data_dir)
    layout.clean_stale_tmp()
    build_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    report = BuildReport(build_id=build_id)
    kb_dir = cfg.kb_dir
    files = scan_kb(kb_dir)
    if not files:
        raise EmptyKnowledgeBase(f"no supported files ({', '.join(SUPPORTED_SUFFIXES)}) in {kb_dir}")

    previous = layout.current_manifest() or {}
    prev_docs = previous.get("documents", {})
    cache = EmbeddingCache(layout.embedding_cache)
    documents: list[Document] = []
    chunks: list[Chunk] = []
    manifest_docs: dict[str, dict] = {}

    class _CachedEmbedder:  # the semantic chunker's sentence vectors go through the cache too
        name, dim = embedder.name, embedder.dim

        @staticmethod
        def embed(texts):
            return cache.embed(embedder, texts)

    try:
        for path in _progress(files, progress, "chunking"):
            rel = path.relative_to(kb_dir).as_posix()
            try:
                doc = load_document(kb_dir, path)
            except IngestError as exc:
                log.warning("skipped %s: %s", rel, exc.reason)
                report.failures.append(Failure(rel, exc.reason))
                continue
            except OSError as exc:
                log.warning("skipped %s: unreadable (%s)", rel, exc)
                report.failures.append(Failure(rel, f"unreadable: {exc.strerror or exc}"))
                continue
            doc_chunks = chunk_document(doc, cfg.chunking, _CachedEmbedder() if cfg.chunking.method == "semantic" else None)
            documents.append(doc)
            chunks.extend(doc_chunks)
            manifest_docs[rel] = {"docid": doc.docid, "sha256": doc.sha256, "title": doc.title, "chunks": len(doc_chunks)}
            if rel not in prev_docs:
                report.added.append(rel)
            elif prev_docs[rel]["sha256"] != doc.sha256:
                report.changed.append(rel)
        report.removed = sorted(set(prev_docs) - set(manifest_docs) - {f.path for f in report.failures})
        if not documents:
            raise EmptyKnowledgeBase(f"no readable documents in {kb_dir} ({len(report.failures)} failed)")

        tmp = layout.new_tmp(build_id)
        texts = [c.text for c in chunks]
        hits_before = cache.hits
        vectors = cache.embed(embedder, [f"{c.section}\n{c.text}" if c.section else c.text for c in chunks])
        report.embedded, report.cache_hits = cache.misses, cache.hits - hits_before
        save_tokens(tmp / "tokens.jsonl", [tokenizer.tokens(f"{c.section}\n{c.text}") for c in chunks])
        store = DenseStore(tmp / "chroma", create=True)
        store.add(vectors, [{"id": c.id, "doc": c.doc} for c in chunks], texts)
        del store
        with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as fh:
            for c in chunks:
                fh.write(json.dumps(chunk_to_json(c), ensure_ascii=False) + "\n")
        with open(tmp / "documents.jsonl", "w", encoding="utf-8") as fh:
            for d in documents:
                fh.write(json.dumps({"docid": d.docid, "path": d.path, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n")
        report.documents, report.chunks, report.chars = len(documents), len(chunks), sum(len(t) for t in texts)
        manifest = {
            "build_id": build_id,
            "created": time.time(),
            "embedder": embedder.name,
            "embedder_dim": embedder.dim,
            "tokenizer": {"bigrams": tokenizer.bigrams, "section_prefix": True},
            "chunking": dataclasses.asdict(cfg.chunking),
            "documents": manifest_docs,
            "failures": [dataclasses.asdict(f) for f in report.failures],
            "chunk_count": len(chunks),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        final = layout.finish(tmp, build_id)
        report.duration_s = round(time.monotonic() - started, 2)
        veto = gate(final) if gate else None
        if veto:
            report.gate = veto
            log.warning("build %s kept aside, not swapped in: %s", build_id, veto)
        else:
            layout.swap(build_id)
            record_build(cfg.data_dir, chunks)
            report.swapped = True
            layout.prune(cfg.index.keep_builds)
        layout.write_report(build_id, report.to_json())
        return report
    finally:
        cache.close()


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
