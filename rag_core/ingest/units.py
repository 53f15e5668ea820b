"""Canonical unit symbols, with the original wording kept as `UnitSpan`s.

Rules:
- A Chinese unit word is rewritten only when it follows a number directly (optionally after one space), so
  玉米, 米粒, 克服, 上升, 每公顷 are never touched: 公斤/千克 → kg, 克 → g, 毫克 → mg, 摄氏度 → °C, 毫米 → mm,
  厘米/公分 → cm, 米 → m, 千米/公里 → km, 公顷 → hm², 平方米 → m², 平方公里/平方千米 → km², 立方米 → m³,
  毫升 → mL, 升 → L. A range such as 1000～1600米 is covered because its last number is followed by the unit.
- Unit symbols that are single characters (℃, ㎏, ㎡ …) are rewritten wherever they occur.
- 亩, 万亩, 斤, 小时, 天 and a bare 度 (温度 30 度) are kept as they are.
- Spacing: the space between the number and the unit is kept exactly as the source had it (one space at most,
  the normaliser collapses runs before this runs): "1200米" → "1200m", "21–25 ℃" → "21–25 °C",
  "1500 毫米" → "1500 mm". Nothing is inserted, so offsets stay easy to reason about.

Each rewrite records `UnitSpan(start, end, canonical, original)` where `out[start:end] == canonical`.
"""
from __future__ import annotations

import logging
import re

from rag_core.records import UnitSpan

log = logging.getLogger(__name__)

# Longest words first, so 平方米 wins over 米 and 毫米 over 米.
_AFTER_NUMBER: dict[str, str] = {
    "摄氏度": "°C",
    "平方公里": "km²",
    "平方千米": "km²",
    "平方米": "m²",
    "立方米": "m³",
    "千克": "kg",
    "公斤": "kg",
    "毫克": "mg",
    "毫米": "mm",
    "厘米": "cm",
    "公分": "cm",
    "千米": "km",
    "公里": "km",
    "公顷": "hm²",
    "毫升": "mL",
    "克": "g",
    "米": "m",
    "升": "L",
}
# A unit word directly followed by one of these characters is part of another word (米粒, 克服, 升高).
_NOT_FOLLOWED_BY: dict[str, str] = {
    "米": "粒饭糠酒汤粉浆面",
    "克": "服隆拉百",
    "升": "高级温值起降",
    "公分": "母子",
}
_SYMBOLS: dict[str, str] = {
    "℃": "°C",
    "㎏": "kg",
    "㎎": "mg",
    "㎜": "mm",
    "㎝": "cm",
    "㎞": "km",
    "㎡": "m²",
    "㎥": "m³",
    "㏊": "hm²",
}

_WORDS = "|".join(re.escape(w) for w in sorted(_AFTER_NUMBER, key=len, reverse=True))
_PATTERN = re.compile(
    rf"(?P<num>\d+(?:\.\d+)?)(?P<space>[ ]?)(?P<word>{_WORDS})"
    rf"|(?P<symbol>[{''.join(_SYMBOLS)}])"
)


def canonicalise_units(text: str) -> tuple[str, tuple[UnitSpan, ...]]:
    """Rewrite units to canonical symbols; return the new text and one span per rewrite (offsets into it)."""
    pieces: list[str] = []
    spans: list[UnitSpan] = []
    out_len = 0
    pos = 0
    for m in _PATTERN.finditer(text):
        if m.group("symbol"):
            original = m.group("symbol")
            keep_before = text[pos : m.start()]
        else:
            original = m.group("word")
            following = text[m.end() : m.end() + 1]
            if following and following in _NOT_FOLLOWED_BY.get(original, ""):
                continue
            keep_before = text[pos : m.start("word")]
        canonical = _SYMBOLS.get(original) or _AFTER_NUMBER[original]
        pieces.append(keep_before)
        out_len += len(keep_before)
        pieces.append(canonical)
        spans.append(UnitSpan(out_len, out_len + len(canonical), canonical, original))
        out_len += len(canonical)
        pos = m.end()
    if not spans:
        return text, ()
    pieces.append(text[pos:])
    return "".join(pieces), tuple(spans)
