"""Frozen records passed between the stages of the engine.

Every stage takes and returns these, never string-keyed dicts, so a field renamed here is caught everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping


@dataclass(frozen=True)
class UnitSpan:
    """A unit rewritten by the normaliser: `normalised[start:end]` reads `canonical`, the source said `original`."""

    start: int
    end: int
    canonical: str
    original: str


@dataclass(frozen=True)
class Heading:
    """A heading line of a document: `text` at `start:end` of the normalised text; level 1 is the top."""

    start: int
    end: int
    level: int
    text: str


@dataclass(frozen=True)
class Document:
    """One knowledge-base file after reading and cleaning."""

    docid: str  # stable per path relative to kb/ (see rag_core.ids)
    path: str  # relative to kb/, with forward slashes
    title: str
    text: str  # the normalised text every offset refers to
    sha256: str  # of the file's bytes
    units: tuple[UnitSpan, ...] = ()
    headings: tuple[Heading, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """A passage of a document; `document.text[start:end] == text`."""

    docid: str
    cid: int  # position in the document, from 0
    doc: str  # path relative to kb/
    title: str  # the document's title
    section: str  # heading path, e.g. "第八章 主要病害识别与防治 › 第二节 咖啡锈病"
    text: str
    start: int
    end: int
    units: tuple[UnitSpan, ...] = ()  # offsets relative to the chunk

    @property
    def id(self) -> str:
        """The citation id shown to people: `docid#cid`."""
        return f"{self.docid}#{self.cid}"


@dataclass(frozen=True)
class Hit:
    """A chunk in a ranked list, with the rank it had in every channel that saw it (1-based)."""

    chunk: Chunk
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


Role = Literal["user", "assistant"]
REPLIES = ("written", "own")  # whose assistant turns an evaluated history holds: the gold set's, or the engine's own


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str


Mode = Literal["llm", "extractive"]


@dataclass(frozen=True)
class Retrieval:
    """The result of retrieval alone: what `coffeebot search` prints."""

    query: str
    rewritten_query: str
    evidence: tuple[Hit, ...]
    timings_ms: Mapping[str, float]
    warnings: tuple[str, ...] = ()
    reranker: str = "none"  # what reranked the evidence: a cross-encoder's name, "learned-mlp", or "none" (fusion order)
    corrections: tuple[tuple[str, str], ...] = ()  # keyboard slips read as the KB's word: (typed, meant), 节顶 → 截顶


@dataclass(frozen=True)
class Answer:
    """A cited answer: what `coffeebot ask` prints and what the bot formats."""

    query: str
    rewritten_query: str
    text: str  # with canonical [docid#cid] tags
    mode: Mode
    citations: tuple[Chunk, ...]  # the chunks cited in `text`, in order of first citation
    evidence: tuple[Hit, ...]
    timings_ms: Mapping[str, float]
    warnings: tuple[str, ...] = ()
    covered: bool = True  # False when the knowledge base does not cover the question
    reranker: str = ""  # as Retrieval.reranker ("" when the pipeline did not say)
