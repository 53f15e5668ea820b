"""The dense channel's store: our own vectors (never chromadb's default embedding function, which would download a
model), telemetry off. Embedded (a PersistentClient in the build's chroma/ folder, the default) or on a chromadb
server (`[index] chroma_url`, an HttpClient): there each build has its own collection, named after the build, and
the build's dense.json records it, so the CURRENT pointer that names a build also names its collection."""
from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

import numpy as np

log = logging.getLogger(__name__)
COLLECTION = "chunks"
# A wide search beam: at our sizes (10³–10⁵ chunks) it costs little, and the default (10) both misses true
# neighbours for top-20 and makes results vary from one process to the next.
HNSW = {"hnsw:space": "cosine", "hnsw:search_ef": 200, "hnsw:construction_ef": 200, "hnsw:M": 32}
CACHED_VECTORS = 2048  # vectors a store keeps after reading them (at most 32 MB, at the bundled embedder's 4,096 dims)
SERVER_PREFIX = "coffeebot_"  # a build's collection on a chromadb server: coffeebot_<build id>
REMOTE_FILE = "dense.json"  # in a build folder: {"url": …, "collection": …} when its vectors are on a server


def collection_for(build_id: str) -> str:
    return f"{SERVER_PREFIX}{build_id}"


def remote_of(build_dir: Path) -> dict | None:
    """The server and collection a build's vectors live in; None for an embedded store."""
    try:
        return json.loads((build_dir / REMOTE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _client(path: Path):
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False))


def http_client(url: str):
    """A client of the chromadb server at `url` ("http://host:port")."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"[index] chroma_url must look like http://host:port, got {url!r}")
    return chromadb.HttpClient(host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 80),
                               ssl=parts.scheme == "https", settings=Settings(anonymized_telemetry=False))


def drop_collections(url: str, keep_builds: set[str]) -> list[str]:
    """Delete the server's build collections whose build is gone (pruned); the names deleted."""
    client = http_client(url)
    dropped = []
    try:
        for col in client.list_collections():
            name = col if isinstance(col, str) else col.name
            if name.startswith(SERVER_PREFIX) and name[len(SERVER_PREFIX):] not in keep_builds:
                client.delete_collection(name)
                dropped.append(name)
    finally:
        client.close()
    if dropped:
        log.info("dropped %d chromadb collections of pruned builds", len(dropped))
    return dropped


class DenseStore:
    """Vectors keyed by chunk id ("docid#cid"), with the embedded text's hash in the metadata; cosine space.

    Keyed by id, a build can start from a copy of the previous build's store and touch only what changed.
    """

    def __init__(self, path: Path, create: bool = False, *, url: str = "", collection: str = COLLECTION):
        self.path = path
        self._cache: dict[str, np.ndarray] = {}  # vectors read by `vectors`, oldest first
        self._lock = threading.Lock()
        self._client = http_client(url) if url else _client(path)
        if create:
            if url and collection in _names(self._client.list_collections()):  # left by a build that died
                self._client.delete_collection(collection)
            self._col = self._client.create_collection(collection, embedding_function=None, metadata=HNSW)
        else:
            self._col = self._client.get_collection(collection, embedding_function=None)

    def add(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict], batch: int = 2000) -> None:
        with self._lock:
            self._cache.clear()
        for i in range(0, len(ids), batch):
            self._col.add(
                ids=list(ids[i : i + batch]),
                embeddings=np.asarray(vectors[i : i + batch], dtype=np.float32),
                metadatas=list(metadatas[i : i + batch]),
            )

    def delete(self, ids: Sequence[str], batch: int = 2000) -> None:
        with self._lock:
            self._cache.clear()
        for i in range(0, len(ids), batch):
            self._col.delete(ids=list(ids[i : i + batch]))

    def fingerprints(self) -> dict[str, str]:
        """Chunk id → hash of the text its vector was made from."""
        got = self._col.get(include=["metadatas"])
        return {i: (m or {}).get("text_hash", "") for i, m in zip(got["ids"], got["metadatas"])}

    def close(self) -> None:
        """Release chromadb's shared system for this path (it is cached per path for the process's lifetime)."""
        self._client.close()

    def count(self) -> int:
        return self._col.count()

    def top(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) best first."""
        return self.top_many([vector], k)[0]

    def top_many(self, vectors: Sequence[np.ndarray] | np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """`top` of each vector, in one query of the index (the same results as one query each; ranker training asks
        thousands)."""
        n = self.count()
        if n == 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        res = self._col.query(query_embeddings=np.asarray(vectors, dtype=np.float32), n_results=min(k, n), include=["distances"])
        return [[(i, 1.0 - float(d)) for i, d in zip(ids, dists)] for ids, dists in zip(res["ids"], res["distances"])]

    def vectors(self, ids: Sequence[str]) -> list[np.ndarray | None] | None:
        """The stored vectors of these ids, in order (None for an unknown id); None when none is known. Vectors read
        once are kept (up to CACHED_VECTORS, oldest dropped first): the ranker asks for the same candidates often."""
        with self._lock:  # questions are answered on several threads
            missing = [i for i in dict.fromkeys(ids) if i not in self._cache]
            if missing:
                got = self._col.get(ids=missing, include=["embeddings"])
                for i, v in zip(got["ids"], got["embeddings"]):
                    while len(self._cache) >= CACHED_VECTORS:
                        del self._cache[next(iter(self._cache))]
                    self._cache[i] = np.asarray(v, dtype=np.float32)
            found = [self._cache.get(i) for i in ids]
        return found if any(v is not None for v in found) else None


def _names(collections) -> set[str]:
    return {c if isinstance(c, str) else c.name for c in collections}
