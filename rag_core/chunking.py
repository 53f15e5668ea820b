"""Semantic and sliding-window chunkers over a normalised document.

Both keep exact offsets (`doc.text[chunk.start:chunk.end] == chunk.text`), never cut inside a citation-like token
or a number with its unit, and label each chunk with the heading path in force where it starts.
"""
from __future__ import annotations

import bisect
import logging
import re
from typing import Protocol, Sequence

import numpy as np

from .config import ChunkingConfig
from .records import Chunk, Document, Heading
from .sentences import FULL_STOP, SENTENCE_END, clause_cuts, safe_cut_positions, sentence_spans

log = logging.getLogger(__name__)

PATH_SEP = " › "
_QUESTION = re.compile(r"\s*问[：:]")
_ANSWER = re.compile(r"\s*答[：:]")


class SentenceEmbedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def heading_paths(headings: Sequence[Heading]) -> tuple[list[int], list[str]]:
    """For each heading start (sorted), the heading path in force from there on."""
    starts: list[int] = []
    paths: list[str] = []
    stack: list[Heading] = []
    for h in sorted(headings, key=lambda h: h.start):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        starts.append(h.start)
        paths.append(PATH_SEP.join(x.text for x in stack))
    return starts, paths


class _Sections:
    def __init__(self, doc: Document):
        self.starts, self.paths = heading_paths(doc.headings)

    def at(self, pos: int) -> str:
        i = bisect.bisect_right(self.starts, pos) - 1
        return self.paths[i] if i >= 0 else ""


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _body_start(doc: Document, heading_ends: dict[int, int], start: int, end: int) -> int:
    """The first position of a chunk after its leading heading lines (the last heading when it is all headings)."""
    p = start
    while p in heading_ends:
        q = heading_ends[p]
        while q < end and doc.text[q].isspace():
            q += 1
        if q >= end:
            return p
        p = q
    return p


def _make_chunks(doc: Document, spans: Sequence[tuple[int, int]]) -> list[Chunk]:
    sections = _Sections(doc)
    heading_ends = {h.start: h.end for h in doc.headings}
    chunks: list[Chunk] = []
    for start, end in spans:
        start, end = _strip(doc.text, start, end)
        if start >= end:
            continue
        units = tuple(
            type(u)(u.start - start, u.end - start, u.canonical, u.original)
            for u in doc.units
            if start <= u.start and u.end <= end
        )
        chunks.append(
            Chunk(
                docid=doc.docid,
                cid=len(chunks),
                doc=doc.path,
                title=doc.title,
                section=sections.at(_body_start(doc, heading_ends, start, end)),
                text=doc.text[start:end],
                start=start,
                end=end,
                units=units,
            )
        )
    return chunks


def _sentences(doc: Document, l_hard: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sentence_spans(doc.text, ends=FULL_STOP):
        out.extend(clause_cuts(doc.text, s, e, l_hard) if e - s > l_hard else [(s, e)])
    return out


def semantic_chunks(doc: Document, cfg: ChunkingConfig, embedder: SentenceEmbedder | None) -> list[Chunk]:
    """Merge adjacent sentences while they stay on topic (cosine ≥ τ) and within L_min/L_max.

    A sentence ends at a full stop (。！？) or a line break, not at a semicolon: a standard's clause divides its cases
    with semicolons ("一般为 12～36 h …；高海拔地区…可延长至 24～36 h"), and a cut there splits one statement over two
    passages. A sentence longer than L_hard is first cut at semicolons, then at other clause punctuation. Headings
    and FAQ questions ("问：") open a new chunk once the current one has L_min/4 characters (stubs merge instead of
    standing alone), and a similarity cut never leaves less than L_min/2 before the next heading; an answer ("答：")
    stays with its question. Without an embedder, cuts fall on length and structure only.
    """
    sents = _sentences(doc, cfg.l_hard)
    if not sents:
        return []
    heading_starts = {h.start for h in doc.headings}
    is_heading = [any(s <= h < e for h in heading_starts) for s, e in sents]
    opens = [is_heading[i] or _QUESTION.match(doc.text, s) is not None for i, (s, _) in enumerate(sents)]
    answer = [_ANSWER.match(doc.text, s) is not None for s, _ in sents]
    min_unit = cfg.l_min // 4
    # characters from each sentence to the next opener: a similarity cut never leaves a stub before a heading
    to_opener = [0] * len(sents)
    nxt = sents[-1][1]
    for i in range(len(sents) - 1, -1, -1):
        if opens[i]:
            nxt = sents[i][0]
        to_opener[i] = nxt - sents[i][0] if nxt > sents[i][0] else sents[-1][1] - sents[i][0]
    sims = None
    if embedder is not None and len(sents) > 1:
        vectors = np.asarray(embedder.embed([doc.text[s:e].strip() for s, e in sents]), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1, norms)
        sims = np.sum(vectors[:-1] * vectors[1:], axis=1)

    spans: list[tuple[int, int]] = []
    cur_start, cur_end = sents[0]
    only_headings = is_heading[0]
    for i in range(1, len(sents)):
        s, e = sents[i]
        length = cur_end - cur_start
        if (e - cur_start) > cfg.l_max:
            cut = True
        elif answer[i]:
            cut = False  # an answer stays with its question
        elif opens[i]:
            cut = not only_headings and length >= min_unit
        elif length >= cfg.l_min and sims is not None and sims[i - 1] < cfg.tau and to_opener[i] >= min_unit * 2:
            cut = True
        else:
            cut = False
        if cut:
            spans.append((cur_start, cur_end))
            cur_start, only_headings = s, is_heading[i]
        else:
            only_headings = only_headings and is_heading[i]
        cur_end = e
    spans.append((cur_start, cur_end))
    return _make_chunks(doc, spans)


def sliding_chunks(doc: Document, cfg: ChunkingConfig) -> list[Chunk]:
    """Fixed windows of `window` characters overlapping by `overlap`, each end snapped back (at most `lookback`
    characters) to a sentence boundary, and never inside a protected span."""
    text = doc.text
    n = len(text)
    safe = safe_cut_positions(text)

    def boundary_before(pos: int) -> int:
        for i in range(pos, max(pos - cfg.lookback, 0), -1):
            if safe[i] and (text[i - 1] in SENTENCE_END or text[i - 1] == "\n"):
                return i
        return next((i for i in range(pos, 0, -1) if safe[i]), pos)

    def boundary_after(pos: int) -> int:
        for i in range(pos, min(pos + cfg.lookback, n)):
            if safe[i] and (i == 0 or text[i - 1] in SENTENCE_END or text[i - 1] == "\n"):
                return i
        return next((i for i in range(pos, n) if safe[i]), pos)

    spans: list[tuple[int, int]] = []
    start = 0
    while start < n:
        end = n if start + cfg.window >= n else boundary_before(start + cfg.window)
        if end <= start:
            end = min(start + cfg.window, n)
        spans.append((start, end))
        if end >= n:
            break
        nxt = boundary_after(max(end - cfg.overlap, start + 1))
        start = nxt if start < nxt < end else end
    return _make_chunks(doc, spans)


def chunk_document(doc: Document, cfg: ChunkingConfig, embedder: SentenceEmbedder | None = None) -> list[Chunk]:
    if cfg.method == "sliding":
        return sliding_chunks(doc, cfg)
    return semantic_chunks(doc, cfg, embedder)
