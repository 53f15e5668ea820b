"""Normalise extracted text: characters, page furniture, hard wraps, whitespace, headings and units.

Output shape: one line per block (paragraph, heading, list item, table row), blocks separated by a single "\\n",
no blank lines. Headings are lines of their own without their markdown '#'s. Order of work:
1. characters: full-width ASCII letters/digits/symbols → ASCII and odd spaces → " " (a per-character NFKC that
   leaves Chinese punctuation ，。：；？！（）“”「」 and ～ untouched), whitespace collapsed, no space between
   two CJK characters;
2. page furniture (`furniture_lines`): page-number lines, running headers and footers;
3. blocks: markdown headings, table rows ('|---|' rules dropped), heading-like lines, list items and Q/A lines
   start blocks; a line that does not end a sentence is joined with the next one when the source looks hard-wrapped
   (a number hyphenated across the break loses its hyphen: "15-\\n0万亩" → "150万亩"); blank lines, and the blank
   lines around removed furniture and page breaks, are transparent only for that joining;
4. units (`units.canonicalise_units`), per line, with offsets into the final text.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass

from rag_core.ingest.readers import RawDocument
from rag_core.ingest.units import canonicalise_units
from rag_core.records import UnitSpan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Heading:
    start: int  # offsets into the normalised text of the heading line's text
    end: int
    level: int  # 1 = top
    text: str


@dataclass(frozen=True)
class Normalised:
    text: str
    headings: tuple[Heading, ...]
    units: tuple[UnitSpan, ...]  # offsets into text
    title: str  # first markdown H1 / docx Title or Heading 1 / first short line of a txt or pdf ("" if none)


# ---------------------------------------------------------------- characters and whitespace
_KEEP_FULLWIDTH = set("！（），：；？～")
_SPACES = dict.fromkeys(map(ord, "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                                 "\u200a\u202f\u205f\u3000"), " ")
_DROP = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)
_NEWLINES = dict.fromkeys(map(ord, "\r\v\u2028\u2029\x85"), "\n")
_CHAR_MAP: dict[int, str | None] = {**_SPACES, **_DROP, **_NEWLINES}
for _code in range(0xFF01, 0xFF5F):
    if chr(_code) not in _KEEP_FULLWIDTH:
        _CHAR_MAP[_code] = chr(_code - 0xFEE0)
_CJK = r"\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\u2018-\u201f\u2026"
_CHAPTER_MARK = re.compile(r"^((?:#{1,6} )?第[一二三四五六七八九十百零〇两\d]+[章节篇]) (?=\S)")
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")
_PUNCT_GAP = re.compile(r" (?=[，。：；？！、）」』”》】])|(?<=[，。：；？！、（「『“《【]) ")
_SPACE_RUN = re.compile(r"[ \t]{2,}|\t")
_ALIGNED_GAP = re.compile(r"(?<=\S)(?: {3,}|\t+)(?=\S)")  # columns of a plain-text table
_CELL_GAP = re.compile(r" {2,}|\t+")


def normalise_chars(text: str) -> str:
    """Full-width ASCII → ASCII (Chinese punctuation kept), odd spaces → " ", zero-width characters removed."""
    return text.translate(_CHAR_MAP)


def collapse_spaces(line: str) -> str:
    """One space between words, none at the ends, none between two CJK characters (except after 第八章 / 第二节)
    or next to full-width Chinese punctuation."""
    line = _PUNCT_GAP.sub("", _SPACE_RUN.sub(" ", line.strip()))
    marker = _CHAPTER_MARK.match(line)
    if marker:
        return marker.group(1) + " " + _CJK_GAP.sub("", line[marker.end() :])
    return _CJK_GAP.sub("", line)


def _source_line(line: str) -> str:
    """A character-normalised source line → a collapsed line, or a '| a | b |' row for a space-aligned table."""
    stripped = line.strip()
    gaps = _ALIGNED_GAP.findall(stripped)
    if len(gaps) >= 2 or any(len(gap) >= 4 for gap in gaps):
        return "| " + " | ".join(collapse_spaces(cell) for cell in _CELL_GAP.split(stripped)) + " |"
    return collapse_spaces(line)


def normalise_fragment(text: str) -> str:
    """The character-level normalisation of `normalise` for a quote or query (no page or block logic)."""
    flat = " ".join(normalise_chars(text).replace("\f", "\n").split("\n"))
    return canonicalise_units(collapse_spaces(flat))[0]


def _is_cjk(ch: str) -> bool:
    return bool(_CJK_RE.match(ch))


def _width(line: str) -> float:
    """Display width: a CJK character counts 1, anything narrower 0.5."""
    return sum(1.0 if ord(ch) >= 0x2E80 else 0.5 for ch in line)


# ---------------------------------------------------------------- line classes
_SENTENCE_END = set("。！？；：!?;:…")
_CLOSERS = set("”’」』）)》】\"'")
_JOINERS = set("，、,（(“‘《【-–—～~/")
_HEADING_PUNCT = re.compile(r"[。！？；：，,;:!?]")
_PAGE_NUMBER = re.compile(
    r"^(?:第\s*\d+\s*页(?:\s*[,，/]?\s*共\s*\d+\s*页)?|共\s*\d+\s*页\s*[,，]?\s*第\s*\d+\s*页"
    r"|[-—–―‐‑−~·•]+\s*\d{1,4}\s*[-—–―‐‑−~·•]+|(?:page|p\.)\s*\d+(?:\s*(?:of|/)\s*\d+)?)$",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(r"^\d{1,4}(?:\s*/\s*\d{1,4})?$")
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?$")
_CN_NUM = "一二三四五六七八九十百零〇两"
# after "1 " / "4.2 ": a word, not a measure ("30 天后", "1.5 公斤" are wrapped sentence text)
_NUM_TITLE = r"(?=[\u4e00-\u9fff])(?![米克升公千毫厘平立摄天年月时分秒个株次倍亩斤万多余])"
_HEADING_PATTERNS: tuple[tuple[re.Pattern[str], int | None], ...] = (
    (re.compile(rf"^第[{_CN_NUM}\d]+[章篇]"), 1),
    (re.compile(rf"^第[{_CN_NUM}\d]+节"), 2),
    (re.compile(r"^(?:前言|引言|目次|目录|参考文献|附录(?:\s*[A-Z])?)(?:\s|（|$)"), 0),
    (re.compile(rf"^[{_CN_NUM}]+、"), 3),
    (re.compile(rf"^[（(][{_CN_NUM}]+[)）]"), 4),
    (re.compile(rf"^\d{{1,2}}(?:\.\d{{1,2}}){{1,3}}\s*{_NUM_TITLE}"), None),  # 4.2 沙床准备: level = components
    (re.compile(rf"^\d{{1,2}}\s+{_NUM_TITLE}"), 1),  # 1 范围: only when the line above ended
)
_BLOCK_START = re.compile(
    rf"^(?:[-*+•·▪]\s|\d{{1,3}}[.、)）](?!\d)|[（(]\d{{1,3}}[)）]|[①-⑳]|[a-zA-Z][.)）]\s"
    rf"|(?:问|答|注|说明|Q|A)\s*[:：]|[{_CN_NUM}]+、|[（(][{_CN_NUM}]+[)）]|第[{_CN_NUM}\d]+[章节条篇]"
    rf"|\d{{1,2}}(?:\.\d{{1,2}})+\s*{_NUM_TITLE}|[A-Z]\.\d{{1,2}}|附录|[表图]\s*\d)"
)
_DIGITS = re.compile(r"\d+")
_HYPHENATED_NUMBER = re.compile(r"\d-$")
_CODE_TAIL = re.compile(r"\d+-\d+-$")  # 15-15- (a fertiliser code) keeps its hyphen


def ends_sentence(line: str) -> bool:
    """True when the line ends with sentence-final punctuation (possibly before a closing quote/bracket)."""
    tail = line.rstrip()
    while tail and tail[-1] in _CLOSERS:
        tail = tail[:-1]
    return bool(tail) and tail[-1] in _SENTENCE_END


def heading_level(line: str) -> tuple[int | None, bool]:
    """(level, strong) when the line looks like a heading; strong headings never depend on the line above."""
    if _width(line) > 40 or _HEADING_PUNCT.search(line):
        return None, False
    for pattern, level in _HEADING_PATTERNS:
        match = pattern.match(line)
        if not match:
            continue
        if level == 0:  # 前言, 附录 A …: a heading by itself
            return 1, True
        if line[match.end() :].strip():
            if level is None:
                return match.group(0).strip().count(".") + 1, False
            return level, not pattern.pattern.startswith(r"^\d")
    return None, False


# ---------------------------------------------------------------- page furniture
def _header_like(line: str) -> bool:
    return (
        2 <= _width(line) <= 40
        and not _HEADING_PUNCT.search(line)
        and heading_level(line)[0] is None
        and not _BLOCK_START.match(line)
        and not line.startswith(("|", "#"))
    )


def _edges(lines: list[str]) -> set[int]:
    """Indexes of the first two and last two non-blank lines of a page."""
    nonblank = [i for i, line in enumerate(lines) if line]
    return set(nonblank[:2] + nonblank[-2:])


def _beside_furniture(lines: list[str], i: int, noise: set[int], paged: bool) -> bool:
    """Is the nearest non-blank line above or below a page number (or the page's edge, for paged input)?"""
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(lines) and not lines[j]:
            j += step
        if not 0 <= j < len(lines):
            if paged:
                return True
        elif j in noise:
            return True
    return False


def furniture_lines(pages: list[list[str]], paged: bool) -> set[tuple[int, int]]:
    """(page, line) positions of page numbers, running headers and footers.

    - page numbers: "第 12 页", "第12页 共30页", "— 12 —", "- 12 -", "Page 3" anywhere; a bare "12" only at a page
      edge or next to a blank line;
    - paged input (PDF, form feeds): page-edge lines that recur, digits ignored, on about half the pages or more;
    - any input: short non-sentence, non-heading lines seen ≥ 3 times that sit next to page numbers / page edges
      at least half the time, or ≥ 4 times spread ≥ 10 lines apart (a header in text extracted without page
      breaks), and lines that start with such a header (a header with the chapter name after it).
    """
    noise: set[tuple[int, int]] = set()
    for p, lines in enumerate(pages):
        edges = _edges(lines) if paged else set()
        for i, line in enumerate(lines):
            if not line:
                continue
            beside_blank = (i == 0 or not lines[i - 1]) or (i == len(lines) - 1 or not lines[i + 1])
            if _PAGE_NUMBER.match(line) or (_BARE_NUMBER.match(line) and (i in edges or beside_blank)):
                noise.add((p, i))
    if paged and len(pages) >= 2:
        counts: Counter[str] = Counter()
        for lines in pages:
            counts.update({_DIGITS.sub("#", lines[i]) for i in _edges(lines)})
        threshold = max(2, -(-(len(pages) - 1) // 2))
        keys = {k for k, c in counts.items() if c >= threshold and _width(k) <= 50}
        noise |= {(p, i) for p, lines in enumerate(pages) for i in _edges(lines) if _DIGITS.sub("#", lines[i]) in keys}
    seen: dict[str, list[tuple[int, int]]] = {}
    for p, lines in enumerate(pages):
        for i, line in enumerate(lines):
            if line and (p, i) not in noise and _header_like(line):
                seen.setdefault(line, []).append((p, i))
    headers: list[str] = []
    for line, where in seen.items():
        if len(where) < 3:
            continue
        beside = sum(_beside_furniture(pages[p], i, {j for q, j in noise if q == p}, paged) for p, i in where)
        flat = [sum(len(pages[q]) for q in range(p)) + i for p, i in where]
        spread = min(b - a for a, b in zip(flat, flat[1:])) >= 10
        if 2 * beside >= len(where) or (len(where) >= 4 and spread):
            headers.append(line)
    for p, lines in enumerate(pages):
        for i, line in enumerate(lines):
            if line and any(
                line == h or (line.startswith(h) and _width(line) <= 60 and not _HEADING_PUNCT.search(line))
                for h in headers
            ):
                noise.add((p, i))
    if headers:
        log.debug("running headers: %s", headers)
    return noise


# ---------------------------------------------------------------- blocks
@dataclass
class _Block:
    text: str
    kind: str  # "body" | "heading" | "table" | "title"
    level: int = 0
    raw_tail_space: bool = False


def _joinable(prev: _Block, line: str, wrap_width: float) -> bool:
    """Does `line` continue `prev` (a hard-wrapped sentence)?"""
    if prev.kind != "body" or not line:
        return False
    if _HYPHENATED_NUMBER.search(prev.text) and line[0].isdigit():
        return True
    if ends_sentence(prev.text):
        return False
    return prev.text[-1] in _JOINERS or _width(prev.text) >= 0.5 * wrap_width


def _join(prev: _Block, line: str, lead_space: bool) -> str:
    left = prev.text
    if _HYPHENATED_NUMBER.search(left) and line[0].isdigit() and not _CODE_TAIL.search(left):
        return left[:-1] + line
    a, b = left[-1], line[0]
    if _is_cjk(a) and _is_cjk(b):
        return left + line
    if not _is_cjk(a) and not _is_cjk(b) and a not in "-–—～~/":
        return f"{left} {line}"
    return f"{left} {line}" if (prev.raw_tail_space or lead_space) and a not in "-–—～~/" else left + line


def _wrap_width(lines: list[str]) -> float:
    widths = sorted(_width(l) for l in lines if l and not l.startswith(("#", "|")))
    return widths[int(len(widths) * 0.8)] if widths else 0.0


def _blocks(pages: list[list[str]], raw_pages: list[list[str]], noise: set[tuple[int, int]]) -> list[_Block]:
    width = _wrap_width([l for lines in pages for l in lines])
    blocks: list[_Block] = []
    gap = "hard"  # what separates the next line from the last block: "none" | "soft" | "hard"
    first_text = True
    for p, lines in enumerate(pages):
        if p:
            gap = "soft"  # a page break never ends a paragraph by itself
        for i, line in enumerate(lines):
            if (p, i) in noise:
                gap = "soft"
                continue
            if not line:
                gap = "hard" if gap != "soft" else gap
                continue
            raw = raw_pages[p][i]
            lead, tail = raw[:1].isspace(), raw[-1:].isspace()
            if gap != "hard" and blocks and _appendix_title_part(blocks[-1], line):
                sep = "" if _is_cjk(blocks[-1].text[-1]) or _is_cjk(line[0]) else " "
                blocks[-1].text = collapse_spaces(blocks[-1].text + sep + line)
                gap = "none"
                continue
            cont = gap != "hard" and bool(blocks) and _joinable(blocks[-1], line, width)
            gap = "none"
            block = _classify(line, cont, first_text)
            first_text = False
            if block is None:
                continue  # a table rule
            if block.kind == "body" and cont and not _BLOCK_START.match(line):
                blocks[-1].text = collapse_spaces(_join(blocks[-1], line, lead))
                blocks[-1].raw_tail_space = tail
                continue
            block.raw_tail_space = tail
            blocks.append(block)
    return blocks


def _appendix_title_part(prev: _Block, line: str) -> bool:
    """"附录 A" is often followed by "（资料性）" and the appendix's title on lines of their own."""
    return (
        prev.kind == "heading"
        and prev.text.startswith("附录")
        and _width(prev.text + line) <= 40
        and not _HEADING_PUNCT.search(line)
        and not _BLOCK_START.match(line)
        and heading_level(line)[0] is None
        and not line.startswith("|")
    )


def _classify(line: str, cont: bool, first: bool) -> _Block | None:
    md = _MD_HEADING.match(line)
    if md and md.group(2).strip():
        return _Block(md.group(2).strip(), "heading", len(md.group(1)))
    if _TABLE_RULE.match(line):
        return None
    if line.startswith("|"):
        return _Block(line, "table")
    level, strong = heading_level(line)
    if level is not None and (strong or not cont):
        return _Block(line, "heading", level)
    if first and _width(line) <= 60 and not _HEADING_PUNCT.search(line):
        return _Block(line, "title")
    return _Block(line, "body")


# ---------------------------------------------------------------- entry point
def normalise(raw: RawDocument) -> Normalised:
    """Clean a raw document into the text every later stage refers to, with its headings and units."""
    raw_pages = [normalise_chars(page).split("\n") for page in raw.pages]
    pages = [[_source_line(line) for line in lines] for lines in raw_pages]
    noise = furniture_lines(pages, paged=raw.kind == "pdf" or len(pages) > 1)
    if noise:
        log.debug("removed %d page-furniture lines", len(noise))
    blocks = _blocks(pages, raw_pages, noise)

    out: list[str] = []
    headings: list[Heading] = []
    units: list[UnitSpan] = []
    offset = 0
    for block in blocks:
        text, spans = canonicalise_units(block.text)
        units.extend(UnitSpan(s.start + offset, s.end + offset, s.canonical, s.original) for s in spans)
        if block.kind == "heading":
            headings.append(Heading(offset, offset + len(text), block.level, text))
        out.append(text)
        offset += len(text) + 1
    return Normalised("\n".join(out), tuple(headings), tuple(units), _title(raw.kind, blocks, headings))


def _title(kind: str, blocks: list[_Block], headings: list[Heading]) -> str:
    """md/docx: the first level-1 heading; otherwise (or failing that) the short first line."""
    if kind in ("md", "docx"):
        for heading in headings:
            if heading.level == 1:
                return heading.text
    if blocks and blocks[0].kind in ("title", "heading"):
        return canonicalise_units(blocks[0].text)[0]
    return ""
