"""Every passage ever served, so that every citation ever shown keeps opening (the paper's id_map, done properly).

On each swap the new build's chunks are recorded; a passage missing from the new build is marked superseded at that
time. `/source` for an id that the current build no longer has maps the archived text to the current chunk with the
same text (exact), then to the best-overlapping chunk of the same document, else shows the archived text with the
date it changed or was removed.
"""
from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from ..records import Chunk

ARCHIVE = "archive.sqlite3"
MIN_OVERLAP = 0.5


def _connect(data_dir: Path) -> sqlite3.Connection:
    data_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(data_dir / ARCHIVE, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        """CREATE TABLE IF NOT EXISTS passages (
            id TEXT, text_hash TEXT, doc TEXT, title TEXT, section TEXT, text TEXT,
            first_seen REAL, superseded_at REAL, PRIMARY KEY (id, text_hash))"""
    )
    return db


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def record_build(data_dir: Path, chunks: list[Chunk], now: float | None = None) -> None:
    """Remember the passages of the build just made current; mark the ones it dropped as superseded."""
    now = time.time() if now is None else now
    db = _connect(data_dir)
    try:
        with db:
            live = {(c.id, _hash(c.text)) for c in chunks}
            db.executemany(
                "INSERT OR IGNORE INTO passages VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                [(c.id, _hash(c.text), c.doc, c.title, c.section, c.text, now) for c in chunks],
            )
            db.executemany("UPDATE passages SET superseded_at = NULL WHERE id = ? AND text_hash = ?", list(live))
            rows = db.execute("SELECT id, text_hash FROM passages WHERE superseded_at IS NULL").fetchall()
            gone = [r for r in rows if (r[0], r[1]) not in live]
            db.executemany("UPDATE passages SET superseded_at = ? WHERE id = ? AND text_hash = ?", [(now, *r) for r in gone])
    finally:
        db.close()


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def overlap(a: str, b: str) -> float:
    x, y = _bigrams(a), _bigrams(b)
    return len(x & y) / len(x | y) if x and y else 0.0


def archived_version(data_dir: Path, cid: str, as_of: float | None = None):
    """The archived passage for `cid`: the version current at `as_of`, else the latest one."""
    if not (data_dir / ARCHIVE).exists():
        return None
    db = _connect(data_dir)
    try:
        rows = db.execute(
            "SELECT doc, title, section, text, first_seen, superseded_at FROM passages WHERE id = ? ORDER BY first_seen DESC",
            (cid,),
        ).fetchall()
    finally:
        db.close()
    if as_of is not None:
        rows = [r for r in rows if r[4] <= as_of] or rows
    return rows[0] if rows else None


def find_archived(data_dir: Path, index, cid: str, as_of: float | None = None):
    from ..sources import Source

    row = archived_version(data_dir, cid, as_of)
    if row is None:
        return None
    doc, title, section, text, _first, superseded = row
    when = time.strftime("%Y-%m-%d", time.localtime(superseded)) if superseded else "近期"
    exact = [c for c in index.chunks if c.text == text]
    if exact:
        best = min(exact, key=lambda c: (c.doc != doc, c.cid))
        return Source(cid, best, note=f"该段落的编号已于 {when} 更新为 {best.id}，内容未变。")
    docid = cid.split("#")[0]
    same_doc = [c for c in index.chunks if c.docid == docid]
    if same_doc:
        best = max(same_doc, key=lambda c: overlap(c.text, text))
        if overlap(best.text, text) >= MIN_OVERLAP:
            return Source(cid, best, note=f"原段落已于 {when} 修改，以下是现行文档中最接近的段落 {best.id}。")
    docid, n = cid.split("#")
    ghost = Chunk(docid=docid, cid=int(n), doc=doc, title=title, section=section, text=text, start=0, end=len(text))
    verb = "修改" if same_doc else "删除"
    return Source(cid, ghost, note=f"注意：该段落已于 {when} 从知识库中{verb}，以下为存档原文，仅供参考。")
