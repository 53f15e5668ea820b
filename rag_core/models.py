"""Model resolution and loading: the configured model from a local path or the local Hugging Face cache, never the
network; a loud fallback when it cannot be had.

Real deployments fetch the configured models once with `coffeebot models fetch` (which honours HF_ENDPOINT, so
growers' servers in mainland China can use a mirror such as https://hf-mirror.com); everything at run time is
local only. sentence-transformers is imported lazily (it takes ~10 s), once, by the process that needs it.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from .config import ModelsConfig

log = logging.getLogger(__name__)
_RUN = re.compile(r"\w+")  # letters, digits, CJK: punctuation and spaces end a run


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""


class Reranker(Protocol):
    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Relevance of each text to the query; higher is better."""


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class HashingEmbedder:
    """Character uni- and bi-grams within word runs, hashed into a fixed space, sublinear TF, L2-normalised. No
    weights at all: a lexical 'dense' channel that still handles Chinese (see bench/results/embedders.md)."""

    def __init__(self, dim: int = 4096):
        self.dim = dim
        self.name = f"hashing-char12w-{dim}"

    def _index(self, gram: str) -> int:
        return int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest(), "little") % self.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for run in _RUN.findall(text.lower()):  # grams never span punctuation or spaces
                for gram in list(run) + [run[i : i + 2] for i in range(len(run) - 1)]:
                    out[row, self._index(gram)] += 1.0
        np.log1p(out, out=out)
        return _unit(out)


class SentenceTransformerEmbedder:
    def __init__(self, model, name: str, batch_size: int = 32):
        self._model = model
        self.name = name
        self.dim = int(model.get_embedding_dimension())
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return _unit(vectors)


class CrossEncoderReranker:
    def __init__(self, model, name: str, batch_size: int = 32):
        self._model = model
        self.name = name
        self.batch_size = batch_size

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        scores = self._model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False)
        return [float(s) for s in np.asarray(scores, dtype=np.float32).reshape(-1)]


def choose_device(preference: str) -> str:
    if preference != "auto":
        return preference
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a dependency
        return "cpu"


def resolve_model_path(name: str) -> Path | None:
    """A local folder, else the local Hugging Face cache (no network, ever); None when neither has it."""
    if not name:
        return None
    path = Path(name).expanduser()
    if path.exists():
        return path
    if name.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        return Path(snapshot_download(repo_id=name, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError) as exc:
        log.debug("model %s not in the local cache: %s", name, exc)
        return None


class ModelFetchError(RuntimeError):
    """`models fetch` could not download a model; the message is one line for the operator."""


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or (exc.__context__ is not None and not exc.__suppress_context__):
        exc = exc.__cause__ or exc.__context__
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:160]}" if first else type(exc).__name__


def fetch_model(name: str) -> Path:
    """Download a model into the Hugging Face cache once (honours HF_ENDPOINT for mirrors and HF_HOME for the
    folder); any failure is a ModelFetchError naming the endpoint and the folder."""
    from huggingface_hub import constants, snapshot_download

    source = f"from {constants.ENDPOINT} (HF_ENDPOINT) into {constants.HF_HUB_CACHE}"
    if constants.HF_HUB_OFFLINE:
        raise ModelFetchError(f"cannot download {name} {source}: HF_HUB_OFFLINE is set; unset it to download")
    try:
        return Path(snapshot_download(repo_id=name))
    except Exception as exc:  # noqa: BLE001 - network, DNS, 404, disk: all one line for the operator
        raise ModelFetchError(
            f"cannot download {name} {source}: {_root_cause(exc)}; check the network, or set HF_ENDPOINT to a "
            "mirror (e.g. HF_ENDPOINT=https://hf-mirror.com)"
        ) from None


@dataclass(frozen=True)
class Loaded:
    embedder: Embedder
    reranker: Reranker | None
    warnings: tuple[str, ...]
    device: str


def _sentence_transformers():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # we only ever load local folders; never let it try the hub
    import sentence_transformers

    return sentence_transformers


def bundled_embedder() -> Embedder:
    """The fallback that ships with the project's own code (see bench/results/embedders.md for the choice)."""
    return HashingEmbedder()


def load_embedder(cfg: ModelsConfig, device: str | None = None) -> tuple[Embedder, list[str]]:
    device = device or choose_device(cfg.device)
    warnings: list[str] = []
    if cfg.embedder in ("hashing", "bundled"):
        return bundled_embedder(), warnings
    path = resolve_model_path(cfg.embedder)
    if path is not None:
        try:
            st = _sentence_transformers()
            model = st.SentenceTransformer(str(path), device=device, local_files_only=True)
            return SentenceTransformerEmbedder(model, cfg.embedder, cfg.batch_size), warnings
        except Exception as exc:  # a broken model folder must not take the service down
            log.warning("embedder %s found at %s but failed to load: %s", cfg.embedder, path, exc)
            warnings.append(f"embedder {cfg.embedder} failed to load ({exc.__class__.__name__}: {exc})")
    else:
        warnings.append(f"embedder {cfg.embedder} not found locally (run `coffeebot models fetch`)")
    if cfg.embedder_fallback == "none":
        raise RuntimeError(f"{warnings[-1]}; [models] embedder_fallback = \"none\"")
    fallback = bundled_embedder()
    message = f"embedder fallback in use: {fallback.name} instead of {cfg.embedder}"
    log.warning("%s (%s)", message, warnings[-1])
    warnings.append(message)
    return fallback, warnings


def load_reranker(cfg: ModelsConfig, device: str | None = None) -> tuple[Reranker | None, list[str]]:
    if not cfg.reranker:
        return None, ["reranker disabled in config: the build's learned ranker reranks instead (fusion order without one)"]
    device = device or choose_device(cfg.device)
    path = resolve_model_path(cfg.reranker)
    if path is None:
        message = f"reranker unavailable: {cfg.reranker} not found locally; the build's learned ranker reranks instead (fusion order without one)"
        log.warning(message)
        return None, [message]
    try:
        st = _sentence_transformers()
        kwargs = {"model_kwargs": {"torch_dtype": "float16"}} if device == "cuda" else {}
        model = st.CrossEncoder(str(path), device=device, local_files_only=True, **kwargs)
        return CrossEncoderReranker(model, cfg.reranker, cfg.batch_size), []
    except Exception as exc:
        message = f"reranker unavailable: {cfg.reranker} failed to load ({exc.__class__.__name__}: {exc})"
        log.warning(message)
        return None, [message]


def load_models(cfg: ModelsConfig, with_reranker: bool = True) -> Loaded:
    device = choose_device(cfg.device)
    embedder, warnings = load_embedder(cfg, device)
    reranker, more = load_reranker(cfg, device) if with_reranker else (None, [])
    return Loaded(embedder, reranker, tuple(warnings + more), device)
