"""Build an index: load → normalise → chunk → ids → BM25 tokens + dense vectors, written to a new build directory
that becomes current by an atomic pointer swap. A build that dies half-way leaves only a `.tmp-*` folder behind;
the build that was serving keeps serving.

Incremental: a document whose bytes are unchanged since the current build keeps that build's text, chunks and BM25
tokens when the pipeline that made them is unchanged too (same `fingerprint`: chunker settings, embedder, tokenizer,
lexicon and the ingest/chunking code); its vectors come from the embedding cache. One build at a time per data
directory (an advisory file lock, released by the kernel even when a build is killed).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import shutil
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: builds are not locked against each other
    fcntl = None

from ..chunking import chunk_document
from ..config import Config
from ..ids import docid_for
from ..ingest.clean import normalise
from ..ingest.kbfiles import MB, KbScan, TooLarge, read_regular, scan
from ..ingest.readers import SUPPORTED_SUFFIXES, IngestError, read_data
from ..lexical import Tokenizer
from ..models import Embedder
from ..rank.encoder import E5_FILE, load_encoder
from ..records import Chunk, Document, Heading, UnitSpan
from .archive import record_build
from .bm25 import load_tokens, save_tokens
from .dense import REMOTE_FILE, DenseStore, collection_for, drop_collections
from .embcache import EmbeddingCache, text_key
from .layout import Layout

log = logging.getLogger(__name__)


class EmptyKnowledgeBase(RuntimeError):
    pass


class BuildInProgress(RuntimeError):
    """Another build holds this data directory's lock."""


@dataclass(frozen=True)
class Failure:
    path: str
    reason: str
    sha256: str = ""  # of the file's bytes, so a watcher knows when the file was replaced


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
    reused: int = 0  # documents taken over from the previous build without parsing them again
    duration_s: float = 0.0
    swapped: bool = False
    gate: str = ""  # why the quality gate kept the build aside; empty when it passed
    checks: str = ""  # what the quality gate measured (its `summary`)
    lengths: dict[str, float] = field(default_factory=dict)  # chunk length distribution (characters)
    ranker: str = ""  # the learned ranker trained for this build, or why there is none
    e5_encoded: int = 0  # chunks encoded with e5 for the ranker in this build (the rest came from the cache)
    e5_cache_hits: int = 0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def length_summary(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {}
    q = statistics.quantiles(lengths, n=10) if len(lengths) > 1 else [lengths[0]] * 9
    return {"min": min(lengths), "p10": q[0], "median": statistics.median(lengths), "p90": q[8],
            "max": max(lengths), "mean": round(statistics.fmean(lengths), 1)}


def scan_kb_entries(kb_dir: Path) -> KbScan:
    """The regular files under kb/ to read, and the entries skipped with their reasons (see ingest.kbfiles)."""
    try:
        return scan(kb_dir)
    except FileNotFoundError:
        raise EmptyKnowledgeBase(f"knowledge base folder not found: {kb_dir}") from None


def scan_kb(kb_dir: Path) -> list[Path]:
    """Supported regular files inside kb/ (no links, hidden or special files, lock files), in a stable order."""
    return list(scan_kb_entries(kb_dir).files)


def load_document(kb_dir: Path, path: Path, data: bytes | None = None) -> Document:
    """Read and normalise one file (from `data` when already read); raises IngestError with the reason when it
    cannot be used."""
    rel = path.relative_to(kb_dir).as_posix()
    data = read_regular(path, 1 << 62) if data is None else data
    norm = normalise(read_data(data, path))
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


def chunk_from_json(row: dict) -> Chunk:
    return Chunk(**(row | {"units": tuple(UnitSpan(**u) for u in row.get("units", ()))}))


_PIPELINE_CODE = ("ingest/readers.py", "ingest/clean.py", "ingest/units.py", "chunking.py", "sentences.py", "lexical.py",
                  "ids.py", "index/dense.py", "resources/lexicon.txt", "resources/stopwords.txt")


def fingerprint(cfg: Config, embedder: Embedder, tokenizer: Tokenizer) -> str:
    """What a document's chunks and tokens depend on besides its bytes: equal fingerprints allow reuse."""
    h = hashlib.sha256()
    h.update(json.dumps([dataclasses.asdict(cfg.chunking), embedder.name, tokenizer.bigrams], sort_keys=True).encode())
    root = Path(__file__).resolve().parent.parent
    for name in _PIPELINE_CODE:
        path = root / name
        h.update(name.encode() + (path.read_bytes() if path.exists() else b"-"))
    return h.hexdigest()[:16]


@dataclass
class _Previous:
    """The current build's per-document artefacts, when its fingerprint allows reusing them."""

    documents: dict[str, dict]  # path → documents.jsonl row
    chunks: dict[str, list[Chunk]]  # path → chunks
    tokens: dict[str, list[list[str]]]  # path → BM25 tokens, aligned with chunks
    failures: dict[str, Failure]  # path → failure (matched by sha256)


def _load_previous(layout: Layout, manifest: dict, fp: str) -> _Previous | None:
    build_dir = layout.current_dir()
    if build_dir is None or manifest.get("fingerprint") != fp:
        return None
    try:
        with open(build_dir / "documents.jsonl", encoding="utf-8") as fh:
            docs = {row["path"]: row for row in (json.loads(line) for line in fh if line.strip())}
        with open(build_dir / "chunks.jsonl", encoding="utf-8") as fh:
            chunk_list = [chunk_from_json(json.loads(line)) for line in fh if line.strip()]
        token_list = load_tokens(build_dir / "tokens.jsonl")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("previous build %s not reusable, parsing everything: %s", build_dir.name, exc)
        return None
    if len(token_list) != len(chunk_list):
        return None
    chunks: dict[str, list[Chunk]] = {}
    tokens: dict[str, list[list[str]]] = {}
    for c, t in zip(chunk_list, token_list):
        chunks.setdefault(c.doc, []).append(c)
        tokens.setdefault(c.doc, []).append(t)
    failures = {f["path"]: Failure(**f) for f in manifest.get("failures", []) if f.get("sha256")}
    return _Previous(docs, chunks, tokens, failures)


@contextlib.contextmanager
def build_lock(layout: Layout) -> Iterator[None]:
    """Hold the data directory's build lock, or raise BuildInProgress at once."""
    layout.root.mkdir(parents=True, exist_ok=True)
    with open(layout.root / "build.lock", "a+") as fh:
        if fcntl is not None:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BuildInProgress(f"another index build is running in {layout.root}") from None
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_UN)


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
    reuse: bool = True,
    embedding_cache: Path | None = None,
) -> BuildReport:
    """Build a new index version beside the current one and swap it in.

    `gate(build_dir)` may veto the swap by returning a reason; the build is then kept aside under builds/ (a gate's
    `summary` attribute, when it has one, goes into the report). `reuse=False` parses every document again.
    `embedding_cache` is the data folder's cache unless given (the eval's builds share the project's).
    Raises BuildInProgress when another build holds the lock.
    """
    layout = Layout(cfg.data_dir)
    with build_lock(layout):
        return _build(cfg, layout, embedder, tokenizer, progress, gate, reuse, embedding_cache or layout.embedding_cache)


def _build(cfg, layout: Layout, embedder, tokenizer, progress, gate, reuse, cache_path: Path) -> BuildReport:
    started = time.monotonic()
    layout.clean_stale_tmp()
    build_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    report = BuildReport(build_id=build_id)
    kb_dir = cfg.kb_dir
    entries = scan_kb_entries(kb_dir)
    files = entries.files
    for skip in entries.skipped:
        log.warning("skipped %s: %s", skip.path, skip.reason)
        report.failures.append(Failure(skip.path, skip.reason, skip.marker))
    if not files:
        raise EmptyKnowledgeBase(f"no supported files ({', '.join(SUPPORTED_SUFFIXES)}) in {kb_dir}")
    max_bytes = int(cfg.index.max_file_mb * MB)

    previous = layout.current_manifest() or {}
    prev_docs = previous.get("documents", {})
    fp = fingerprint(cfg, embedder, tokenizer)
    reusable = _load_previous(layout, previous, fp) if reuse else None
    cache = EmbeddingCache(cache_path)
    doc_rows: list[dict] = []
    chunks: list[Chunk] = []
    tokens: list[list[str] | None] = []  # None: not tokenised yet
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
                data = read_regular(path, max_bytes)
            except TooLarge as exc:
                log.warning("skipped %s: %s", rel, exc.reason)
                report.failures.append(Failure(rel, exc.reason, exc.sha256))
                continue
            except IngestError as exc:  # swapped for a link or a special file since the scan
                log.warning("skipped %s: %s", rel, exc.reason)
                report.failures.append(Failure(rel, exc.reason, f"skipped: {exc.reason}"))
                continue
            except OSError as exc:
                log.warning("skipped %s: unreadable (%s)", rel, exc)
                report.failures.append(Failure(rel, f"unreadable: {exc.strerror or exc}"))
                continue
            sha = hashlib.sha256(data).hexdigest()
            old = prev_docs.get(rel)
            if reusable and old and old["sha256"] == sha and rel in reusable.chunks and rel in reusable.documents:
                doc_rows.append(reusable.documents[rel])
                chunks.extend(reusable.chunks[rel])
                tokens.extend(reusable.tokens[rel])
                manifest_docs[rel] = old
                report.reused += 1
                continue
            if reusable and rel in reusable.failures and reusable.failures[rel].sha256 == sha:
                report.failures.append(reusable.failures[rel])
                continue
            try:
                doc = load_document(kb_dir, path, data)
            except IngestError as exc:
                log.warning("skipped %s: %s", rel, exc.reason)
                report.failures.append(Failure(rel, exc.reason, sha))
                continue
            except OSError as exc:
                log.warning("skipped %s: unreadable (%s)", rel, exc)
                report.failures.append(Failure(rel, f"unreadable: {exc.strerror or exc}", sha))
                continue
            doc_chunks = chunk_document(doc, cfg.chunking, _CachedEmbedder() if cfg.chunking.method == "semantic" else None)
            doc_rows.append({"docid": doc.docid, "path": doc.path, "title": doc.title, "text": doc.text})
            chunks.extend(doc_chunks)
            tokens.extend([None] * len(doc_chunks))
            manifest_docs[rel] = {"docid": doc.docid, "sha256": doc.sha256, "title": doc.title, "chunks": len(doc_chunks)}
            if rel not in prev_docs:
                report.added.append(rel)
            elif prev_docs[rel]["sha256"] != doc.sha256:
                report.changed.append(rel)
        report.removed = sorted(set(prev_docs) - set(manifest_docs) - {f.path for f in report.failures})
        if not doc_rows:
            raise EmptyKnowledgeBase(f"no readable documents in {kb_dir} ({len(report.failures)} failed)")

        tmp = layout.new_tmp(build_id)
        texts = [c.text for c in chunks]
        hits_before = cache.hits
        embedded = [embedding_text(c) for c in chunks]
        vectors = cache.embed(embedder, embedded)
        report.embedded, report.cache_hits = cache.misses, cache.hits - hits_before
        tokens = [t if t is not None else tokenizer.tokens(embedding_text(c)) for c, t in zip(chunks, tokens)]
        save_tokens(tmp / "tokens.jsonl", tokens)
        e5 = write_e5(tmp / E5_FILE, cfg, cache, embedded, progress)
        e5_name = None
        if e5 is not None:
            report.e5_encoded, report.e5_cache_hits, e5_name = e5
        if cfg.index.chroma_url:  # a chromadb server: this build's own collection, named in its dense.json
            write_remote_dense(tmp, cfg.index.chroma_url, build_id, chunks, vectors, embedded)
        else:
            write_dense(tmp / "chroma", layout.current_dir() if reusable else None, chunks, vectors, embedded)
        with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as fh:
            for c in chunks:
                fh.write(json.dumps(chunk_to_json(c), ensure_ascii=False) + "\n")
        with open(tmp / "documents.jsonl", "w", encoding="utf-8") as fh:
            for row in doc_rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        report.documents, report.chunks, report.chars = len(doc_rows), len(chunks), sum(len(t) for t in texts)
        report.lengths = length_summary([len(t) for t in texts])
        manifest = {
            "build_id": build_id,
            "created": time.time(),
            "embedder": embedder.name,
            "embedder_dim": embedder.dim,
            "tokenizer": {"bigrams": tokenizer.bigrams, "section_prefix": True},
            "chunking": dataclasses.asdict(cfg.chunking),
            "fingerprint": fp,
            "documents": manifest_docs,
            "failures": [dataclasses.asdict(f) for f in report.failures],
            "chunk_count": len(chunks),
            "e5": e5_name,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        report.ranker = train_ranker(tmp, cfg, embedder, tokenizer, cache_path)
        final = layout.finish(tmp, build_id)
        veto = gate(final) if gate else None
        report.checks = getattr(gate, "summary", "") or ""
        if veto:
            report.gate = veto
            log.warning("build %s kept aside, not swapped in: %s", build_id, veto)
        else:
            record_build(cfg.data_dir, chunks)  # before the swap: every passage ever served is in the archive
            layout.swap(build_id)
            report.swapped = True
            layout.prune(cfg.index.keep_builds)
            if cfg.index.chroma_url:
                drop_collections(cfg.index.chroma_url, set(layout.all_builds()))
        report.duration_s = round(time.monotonic() - started, 2)
        layout.write_report(build_id, report.to_json())
        return report
    finally:
        cache.close()


def write_e5(path: Path, cfg: Config, cache: EmbeddingCache, texts: list[str],
             progress: bool) -> tuple[int, int, str] | None:
    """The chunks' e5 passage vectors for the learned ranker (float16, chunk order), through the embedding cache so
    a rebuild encodes only new or changed text. Returns (encoded, from cache, the encoder's model key), or None
    when e5 is off or missing."""
    if not cfg.retrieval.learned_ranker:
        return None
    encoder = load_encoder(cfg.retrieval.ranker_encoder)
    if encoder is None:
        return None
    started, misses, hits = time.monotonic(), cache.misses, cache.hits
    todo = cache.missing(encoder.name, texts)
    if todo:
        log.info("e5: encoding %d of %d passages for the learned ranker (about 4-5 a second on 2 cores; later builds "
                 "take them from the embedding cache)", todo, len(texts))
    bar = _bar(todo, progress and todo > 0, "e5 passages")
    parts, done, last_log = [], 0, started
    try:
        for i in range(0, len(texts), 64):
            before = cache.misses
            parts.append(cache.embed(encoder, texts[i : i + 64]))  # committed batch by batch: a killed build keeps them
            fresh = cache.misses - before
            done += fresh
            if bar is not None:
                bar.update(fresh)
            if fresh and time.monotonic() - last_log >= 10:
                last_log = time.monotonic()
                log.info("e5: %d/%d passages encoded (%.0f s)", done, todo, last_log - started)
    finally:
        if bar is not None:
            bar.close()
    matrix = np.vstack(parts) if parts else np.zeros((0, encoder.dim), dtype=np.float32)
    np.save(path, matrix.astype(np.float16))
    encoded, cached = cache.misses - misses, cache.hits - hits
    if encoded:
        log.info("e5: %d passages encoded in %.0f s, %d from the cache", encoded, time.monotonic() - started, cached)
    return encoded, cached, encoder.name


def _bar(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="passage", file=sys.stderr)


def train_ranker(build_dir: Path, cfg: Config, embedder: Embedder, tokenizer: Tokenizer, cache_path: Path) -> str:
    """Train the build's learned ranker (rag_core.rank), its e5 question vectors kept in the build's embedding cache;
    a failure leaves the build ranking in fusion order."""
    if not cfg.retrieval.learned_ranker:
        return "disabled ([retrieval] learned_ranker = false)"
    from ..rank.train import train_for_build

    try:
        model = train_for_build(build_dir, cfg, embedder, tokenizer, embedding_cache=cache_path)
    except Exception as exc:  # a ranker is an improvement, never a reason to lose a build
        log.warning("learned ranker not trained; this build ranks in fusion order: %s", exc)
        return f"not trained: {exc}"
    info = model.info
    return f"{model.name}: {info.get('labelled', 0)} labelled + {info.get('pseudo', 0)} pseudo-queries, {info.get('seconds')} s"


def embedding_text(chunk: Chunk) -> str:
    """What a chunk's vector and BM25 tokens are made from: its heading path, then its text."""
    return f"{chunk.section}\n{chunk.text}" if chunk.section else chunk.text


def write_remote_dense(build_dir: Path, url: str, build_id: str, chunks: list[Chunk], vectors,
                       embedded: list[str]) -> None:
    """The build's vectors in a new collection on the chromadb server (every vector: they come from the embedding
    cache), then dense.json naming it; readers of this build (every worker, once CURRENT names it) query it there."""
    name = collection_for(build_id)
    store = DenseStore(build_dir / "chroma", create=True, url=url, collection=name)
    try:
        store.add([c.id for c in chunks], vectors,
                  [{"doc": c.doc, "text_hash": text_key(t)} for c, t in zip(chunks, embedded)])
    finally:
        store.close()
    (build_dir / REMOTE_FILE).write_text(json.dumps({"url": url, "collection": name}), encoding="utf-8")


def write_dense(target: Path, previous: Path | None, chunks: list[Chunk], vectors, embedded: list[str]) -> None:
    """The build's dense store. From a copy of the previous build's store when the pipeline is unchanged, deleting
    and adding only the chunks whose id or text changed (at 10× the sample KB, inserting every vector again is
    most of a rebuild); otherwise from scratch."""
    hashes = [text_key(t) for t in embedded]
    if previous is not None and (previous / "chroma").is_dir():
        shutil.copytree(previous / "chroma", target)
        store = DenseStore(target)
    else:
        store = DenseStore(target, create=True)
    try:
        old = store.fingerprints()
        wanted = {c.id: h for c, h in zip(chunks, hashes)}
        stale = [i for i, h in old.items() if wanted.get(i) != h]
        store.delete(stale)
        fresh = [n for n, c in enumerate(chunks) if old.get(c.id) != hashes[n]]
        store.add([chunks[n].id for n in fresh], vectors[fresh], [{"doc": chunks[n].doc, "text_hash": hashes[n]} for n in fresh])
    finally:
        store.close()

