"""Sentence and clause boundaries in normalised Chinese text, and the spans a cut must never enter."""
from __future__ import annotations

import re

SENTENCE_END = "。！？；!?;"
FULL_STOP = "。！？!?"  # sentences a reader would quote whole (no break at semicolons)
CLAUSE_END = "，、,："
TABLE_RULE = re.compile(r"^[\s|:：\-—]+$")  # a Markdown table's rule row (|---|:---:|), which holds nothing

# A cut may not fall inside these: citation-like tokens, and numbers with their units or ranges.
_PROTECTED = re.compile(
    r"\[[0-9a-fA-F]{8}\s*[#＃]\s*\d+\]"
    r"|\d+(?:\.\d+)?(?:\s*[～~–\-—至到]\s*\d+(?:\.\d+)?)*\s*"
    r"(?:%|‰|°C|kg|g|mg|mL|L|mm|cm|km|m³|m²|m|hm²|亩|株|天|周|月|年|小时|分钟|倍|次|厘米|毫米|米|公斤|千克|克|斤)?"
)


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Spans (start, end) that must stay whole in one chunk."""
    return [m.span() for m in _PROTECTED.finditer(text) if m.end() - m.start() > 1]


def safe_cut_positions(text: str) -> list[bool]:
    """safe[i] is True when a cut between text[i-1] and text[i] keeps every protected span whole."""
    safe = [True] * (len(text) + 1)
    for start, end in protected_spans(text):
        for i in range(start + 1, end):
            safe[i] = False
    return safe


def sentence_spans(text: str, start: int = 0, end: int | None = None, ends: str = SENTENCE_END) -> list[tuple[int, int]]:
    """Split text[start:end] into sentences: after sentence-final punctuation (with closing quotes) and at line breaks.

    Spans cover the range without gaps; whitespace-only spans are dropped.
    """
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    i = s = start
    while i < end:
        ch = text[i]
        cut = None
        if ch == "\n":
            cut = i + 1
        elif ch in ends:
            cut = i + 1
            while cut < end and text[cut] in "”’\"）)】":
                cut += 1
        if cut is not None:
            if text[s:cut].strip():
                spans.append((s, cut))
            elif spans:
                spans[-1] = (spans[-1][0], cut)
            s = i = cut
            continue
        i += 1
    if s < end:
        if text[s:end].strip():
            spans.append((s, end))
        elif spans:
            spans[-1] = (spans[-1][0], end)
    return spans


def clause_cuts(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Cut an over-long sentence into pieces of at most `limit` characters, preferring semicolons, then other clause
    punctuation."""
    safe = safe_cut_positions(text[start:end])
    pieces: list[tuple[int, int]] = []
    s = start
    while end - s > limit:
        best = None
        for marks in ("；;", CLAUSE_END):  # a semicolon's clause first, then any clause
            best = next((i for i in range(s + limit, s + limit // 3, -1)
                         if safe[i - start] and text[i - 1] in marks), None)
            if best is not None:
                break
        if best is None:
            best = next((i for i in range(s + limit, s, -1) if safe[i - start]), s + limit)
        pieces.append((s, best))
        s = best
    pieces.append((s, end))
    return pieces
