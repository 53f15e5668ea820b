"""`/source docid#cid`: the passage behind a citation, its document and section."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .ids import parse_id
from .records import Chunk

ID_HELP = "引用编号形如 fb82b28b#11（8位文档号 + # + 段号），可从回答末尾的来源列表中找到。"


@dataclass(frozen=True)
class Source:
    query: str
    chunk: Chunk | None
    note: str = ""  # e.g. that the passage changed since it was cited
    error: str = ""  # a user-facing Chinese message when nothing can be shown

    def to_json(self) -> dict:
        out = {"id": self.query, "found": self.chunk is not None, "note": self.note, "error": self.error}
        if self.chunk:
            c = self.chunk
            out |= {"id": c.id, "doc": c.doc, "title": c.title, "section": c.section, "text": c.text}
        return out

    def render_plain(self) -> str:
        if self.chunk is None:
            return self.error
        c = self.chunk
        section = c.section.removeprefix(c.title).removeprefix(" › ") if c.section else ""
        head = f"【{c.id}】{c.title}" + (f" › {section}" if section else "")
        return "\n".join(x for x in (head, self.note, c.text) if x)


def resolve_source(index, data_dir: Path, raw_id: str, as_of: float | None = None) -> Source:
    """The passage for an id. With `as_of` (when the citation was shown), a passage edited since then is found
    by its text, not by an id that now names something else."""
    from .index.archive import archived_version, find_archived

    cid = parse_id(raw_id)
    if cid is None:
        return Source(raw_id, None, error=f"“{raw_id.strip()[:40]}”不是有效的引用编号。{ID_HELP}")
    chunk = index.by_id.get(cid)
    if chunk is not None:
        shown = archived_version(data_dir, cid, as_of) if as_of is not None else None
        if shown is None or shown[3] == chunk.text:
            return Source(cid, chunk)
    archived = find_archived(data_dir, index, cid, as_of)
    if archived is not None:
        return archived
    return Source(cid, None, error=f"知识库中找不到编号 {cid} 的段落。{ID_HELP}")
