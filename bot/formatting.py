"""Answers for phones: [docid#cid] tags become numbered footnotes, long texts are split to platform limits.

Telegram gets HTML (escaped text, a bold "来源" list); WeChat gets plain text measured in UTF-8 bytes.
Splitting never cuts a citation tag, a footnote marker, an HTML entity or an HTML tag.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from html import unescape
from typing import Callable, Mapping

log = logging.getLogger(__name__)

CITATION_RE = re.compile(r"\[([0-9a-f]{8}#\d+)\]")
"""The canonical citation tag `[docid#cid]`; group 1 is the id."""

_ID = r"[0-9a-f]{8}#\d+"
# One bracket holding one or more ids ("[a]", "[a, b]", "[a；b]"), then a run of such brackets.
_GROUP = rf"\[{_ID}(?:\s*[,，;；、]\s*{_ID})*\]"
_RUN_RE = re.compile(rf"{_GROUP}(?:[ \t]*{_GROUP})*")
_ID_RE = re.compile(_ID)

# Units that splitting must keep whole: citation tags, footnote markers and HTML entities; in HTML also tags.
_ATOM = rf"\[{_ID}\]|\[\d{{1,4}}\]|&(?:#\d{{1,7}}|#[xX][0-9a-fA-F]{{1,6}}|[A-Za-z][A-Za-z0-9]{{1,31}});"
_ATOM_RE = re.compile(_ATOM)
_HTML_ATOM_RE = re.compile(_ATOM + r"|</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?>")
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)")

_PARAGRAPH, _SENTENCE, _COMMA, _SPACE, _ANY = 4, 3, 2, 1, 0
_SENTENCE_END = set("。！？；!?;\n")
_COMMAS = set("，、,")
_CLOSERS = set("”’」』）)】》\"'")
_NO_LINE_START = (_SENTENCE_END - {"\n"}) | _COMMAS | _CLOSERS | set("：:.…")  # kinsoku: never start a piece


@dataclass(frozen=True)
class Footnote:
    n: int  # 1-based, in order of first citation
    id: str  # "docid#cid"
    label: str  # e.g. "第八章 主要病害识别与防治 › 咖啡锈病"


@dataclass(frozen=True)
class Footnoted:
    text: str  # the answer with "[1]" markers in place of [docid#cid] tags
    footnotes: tuple[Footnote, ...]


def footnote(text: str, labels: Mapping[str, str]) -> Footnoted:
    """Number each cited id by first appearance and replace its tags with "[n]" markers.

    Adjacent tags ("[a][b]", "[a] [b]", "[a, b]") become "[1][2]"; an id repeated within such a run appears once.
    An id missing from `labels` (or with an empty label) is labelled with the id itself.
    """
    numbers: dict[str, int] = {}

    def replace(match: re.Match[str]) -> str:
        seen: list[int] = []
        for cid in _ID_RE.findall(match.group(0)):
            n = numbers.setdefault(cid, len(numbers) + 1)
            if n not in seen:
                seen.append(n)
        return "".join(f"[{n}]" for n in seen)

    body = _RUN_RE.sub(replace, text)
    notes = tuple(Footnote(n, cid, labels.get(cid) or cid) for cid, n in numbers.items())
    return Footnoted(body, notes)


def escape_html(s: str, *, quote: bool = False) -> str:
    """Escape & < > for Telegram HTML; also " when the text goes inside an attribute value."""
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace('"', "&quot;") if quote else s


def _tokenize(text: str, html: bool) -> list[tuple[int, int]]:
    """Spans of the units of `text`: each atom whole, every other character alone."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in (_HTML_ATOM_RE if html else _ATOM_RE).finditer(text):
        spans.extend((i, i + 1) for i in range(pos, m.start()))
        spans.append(m.span())
        pos = m.end()
    spans.extend((i, i + 1) for i in range(pos, len(text)))
    return spans


def _effective_char(unit: str) -> str | None:
    """The character a cut after `unit` is judged by; "" to look further back; None for an opening tag."""
    if len(unit) == 1:
        return unit
    if unit.startswith("&"):
        return unescape(unit)[-1:]
    if unit.startswith("<") and len(unit) > 1:
        return "" if unit.startswith("</") else None
    return ""  # citation tag or marker: a cut after it is judged by what precedes it


def _priorities(units: list[str]) -> list[int]:
    """How good a cut before unit k is (k = len(units) is the end): -1 (worst) to _PARAGRAPH."""
    prio = [_ANY] * (len(units) + 1)
    for k in range(1, len(units)):
        if len(units[k]) > 1 and (units[k][0] == "[" or units[k].startswith("</")):
            continue  # keep a citation with its sentence; never leave an element empty
        if units[k] in _NO_LINE_START:
            prio[k] = -1
            continue
        j, char = k - 1, ""
        while j >= 0:
            char = _effective_char(units[j])
            if char is None or char not in _CLOSERS and char != "":
                break
            j -= 1
        if not char:
            continue
        if char == "\n":
            before = "".join(units[max(0, j - 8):j]).rstrip(" \t")
            prio[k] = _PARAGRAPH if before.endswith("\n") else _SENTENCE
        elif char in _SENTENCE_END or (char == "." and units[k].isspace()):
            prio[k] = _SENTENCE
        elif char in _COMMAS:
            prio[k] = _COMMA
        elif char.isspace():
            prio[k] = _SPACE
    return prio


def _open_stacks(units: list[str], html_mode: bool) -> list[tuple[str, ...]]:
    """The opening tags still open before each unit (and at the end)."""
    stacks: list[tuple[str, ...]] = [()]
    stack: list[str] = []
    for unit in units:
        m = _TAG_RE.match(unit) if html_mode and len(unit) > 1 and unit.startswith("<") else None
        if m and not unit.endswith("/>"):
            name = m.group(2).lower()
            if not m.group(1):
                stack.append(unit)
            else:
                for i in range(len(stack) - 1, -1, -1):
                    if _tag_name(stack[i]) == name:
                        del stack[i]
                        break
        stacks.append(tuple(stack))
    return stacks


def _tag_name(opening: str) -> str:
    m = _TAG_RE.match(opening)
    return m.group(2).lower() if m else ""


def _closing(stack: tuple[str, ...]) -> str:
    return "".join(f"</{_tag_name(t)}>" for t in reversed(stack))


def split_text(text: str, limit: int, size: Callable[[str], int] = len, *, html: bool = False) -> list[str]:
    """Cut `text` into pieces with `size(piece) <= limit`.

    Cuts prefer paragraph breaks, then sentence ends (。！？；!?; newline), then commas (，、,), then spaces, then
    anywhere, and favour the later half of what fits; never inside a citation tag, "[n]" marker, entity or tag.
    Whitespace at a cut is dropped. With `html`, elements open at a cut are closed at the end of the piece and
    reopened at the start of the next. `size` must be additive over concatenation (as len and UTF-8 length are).
    Raises ValueError when a single unbreakable unit (plus reopened tags) cannot fit in `limit`.
    """
    spans = _tokenize(text, html)
    units = [text[a:b] for a, b in spans]
    n = len(units)
    cum = [0]
    for unit in units:
        cum.append(cum[-1] + size(unit))
    prio = _priorities(units)
    stacks = _open_stacks(units, html)
    pieces: list[str] = []
    s = 0
    while True:
        while s < n and units[s].isspace():
            s += 1
        if s >= n:
            return pieces
        opening = "".join(stacks[s])
        base = size(opening) - cum[s]
        fits: list[int] = []
        k = s + 1
        while k <= n and base + cum[k] <= limit:
            if base + cum[k] + size(_closing(stacks[k])) <= limit:
                fits.append(k)
            k += 1
        if not fits:
            raise ValueError(f"limit {limit} is too small for {units[s]!r} after {opening!r}")
        if fits[-1] == n:
            end = n
        else:
            half = s + (fits[-1] - s) / 2
            end = max(fits, key=lambda j: (prio[j] - (2 if j < half else 0), j))
        body = text[spans[s][0]:spans[end - 1][1]].rstrip()
        pieces.append(opening + body + _closing(stacks[end]))
        s = end


def _sized_messages(body: str, tail: str, limit: int, size: Callable[[str], int], html: bool) -> list[str]:
    """Split `body`, then put `tail` (the source list) after the last piece, or alone if it does not fit."""
    pieces = split_text(body, limit, size, html=html) if body.strip() else []
    if not tail:
        return pieces
    if pieces and size(pieces[-1] + "\n\n" + tail) <= limit:
        pieces[-1] = pieces[-1] + "\n\n" + tail
        return pieces
    return pieces + split_text(tail, limit, size, html=html)


def _utf16_units(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def telegram_html(f: Footnoted, limit: int = 4096) -> list[str]:
    """Telegram messages (parse_mode HTML): the escaped answer with "[n]" markers, then a bold source list.

    Telegram's limit is 4096 UTF-16 code units of the text *after* entity parsing. We measure the raw HTML in
    UTF-16 code units: tags and entities only shrink when parsed, so that is a safe upper bound. (Plain len()
    would not be: a character outside the BMP, e.g. an emoji, is one Python character but two UTF-16 units.)
    """
    sources = ""
    if f.footnotes:
        lines = "\n".join(f"[{fn.n}] {escape_html(fn.label)}" for fn in f.footnotes)
        sources = f"<b>来源</b>\n{lines}"
    return _sized_messages(escape_html(f.text), sources, limit, _utf16_units, html=True)


def _utf8_bytes(s: str) -> int:
    return len(s.encode("utf-8"))


def wechat_text(f: Footnoted, limit_bytes: int = 2048) -> list[str]:
    """WeChat text replies: the answer, "来源：" with one line per footnote and how to open one, split by bytes."""
    tail = ""
    if f.footnotes:
        lines = "\n".join(f"[{fn.n}] {fn.label}" for fn in f.footnotes)
        tail = f"来源：\n{lines}\n回复“原文1”查看第1条原文"
    return _sized_messages(f.text, tail, limit_bytes, _utf8_bytes, html=False)
