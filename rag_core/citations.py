"""Citation tags in model output: parse the forms models really write, keep the ids that are in the evidence,
normalise them to `[docid#cid]`, and backfill when none is left."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Sequence

log = logging.getLogger(__name__)

_ID = r"[0-9a-fA-F]{8}\s*[#＃]\s*\d+"
# A bracket ([], 【】, （）, ()) holding one or more ids separated by commas, semicolons, spaces or 、.
_GROUP = re.compile(rf"[\[【（(]\s*((?:{_ID})(?:\s*[,，;；、/|\s]\s*(?:{_ID}))*)\s*[\]】）)]")
_BARE = re.compile(rf"(?<![0-9A-Za-z\[【])({_ID})(?![0-9A-Za-z])")
_ONE = re.compile(r"([0-9a-fA-F]{8})\s*[#＃]\s*(\d+)")
CANONICAL = re.compile(r"\[([0-9a-f]{8})#(\d+)\]")


@dataclass(frozen=True)
class Validated:
    text: str  # canonical tags only, unknown ids removed
    cited: tuple[str, ...]  # valid ids in order of first citation
    dropped: tuple[str, ...]  # ids the model cited that are not in the evidence


def _ids(group: str) -> list[str]:
    return [f"{m.group(1).lower()}#{int(m.group(2))}" for m in _ONE.finditer(group)]


def validate_citations(text: str, evidence_ids: Sequence[str]) -> Validated:
    """Rewrite every citation form to `[docid#cid]`, drop ids not in `evidence_ids`, and tidy what is left."""
    allowed = set(evidence_ids)
    dropped: list[str] = []

    def render(ids: list[str]) -> str:
        kept = []
        for cid in ids:
            if cid in allowed:
                if cid not in kept:
                    kept.append(cid)
            else:
                dropped.append(cid)
        return "".join(f"[{c}]" for c in kept)

    text = _GROUP.sub(lambda m: render(_ids(m.group(1))), text)
    text = _BARE.sub(lambda m: render(_ids(m.group(1))), text)
    text = re.sub(r"(\[[0-9a-f]{8}#\d+\])(?:\s*\1)+", r"\1", text)  # the same tag twice in a row
    text = re.sub(r"[ \t]+(?=\[[0-9a-f]{8}#\d+\])", "", text)  # no space before a tag
    text = re.sub(r"[ \t]+\n", "\n", text).strip()
    cited = cited_ids(text)
    if dropped:
        log.warning("dropped %d citation(s) not in the evidence: %s", len(dropped), ", ".join(dropped))
    return Validated(text, tuple(cited), tuple(dropped))


def backfill(text: str, ids: Sequence[str]) -> str:
    """The paper's backfill: an answer with no valid citation gets "参考：[…]" with the top evidence ids."""
    if not ids:
        return text
    return f"{text.rstrip()}\n参考：{''.join(f'[{i}]' for i in ids)}"


def cited_ids(text: str) -> list[str]:
    """The canonical citation ids of a text, each once, in their order ("docid#cid")."""
    return list(dict.fromkeys(f"{a}#{b}" for a, b in CANONICAL.findall(text)))
