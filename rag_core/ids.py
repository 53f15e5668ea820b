"""Citation ids: `docid` is stable per document path, `cid` is the chunk's position; rendered `[docid#cid]`."""
from __future__ import annotations

import hashlib
import re

ID_RE = re.compile(r"(?<![0-9a-f])([0-9a-f]{8})#(\d+)(?!\d)")


def docid_for(relpath: str) -> str:
    """The document id: the first 8 hex digits of SHA-1 over its path relative to kb/ (forward slashes).

    Derived from the path alone, so editing a file keeps its id; renaming it makes a new document.
    """
    return hashlib.sha1(relpath.replace("\\", "/").encode("utf-8")).hexdigest()[:8]


def render(chunk_id: str) -> str:
    return f"[{chunk_id}]"


MAX_CID_DIGITS = 9  # far beyond any document's chunk count; longer numbers are not ids (and int() refuses 4,300+)


def parse_id(text: str) -> str | None:
    """'e76faa05#3', '[e76faa05#3]' or 'E76FAA05 ＃ 3' → 'e76faa05#3'; anything else → None."""
    cleaned = re.sub(r"\s+", "", text.strip().strip("[]【】")).replace("＃", "#").lower()
    match = ID_RE.fullmatch(cleaned)
    if not match:
        return None
    digits = match.group(2).lstrip("0") or "0"
    return f"{match.group(1)}#{int(digits)}" if len(digits) <= MAX_CID_DIGITS else None
