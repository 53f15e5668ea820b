"""Where builds live in the data directory, and the atomic pointer that says which one serves.

    data_dir/
      builds/<build_id>/        manifest.json, chunks.jsonl, documents.jsonl, tokens.jsonl, chroma/
      builds/.tmp-<build_id>/   a build in progress (or one that died): never read
      CURRENT                   the serving build's id, replaced atomically (write a temp file, os.replace)
      reports/<build_id>.json   what each build did
      embeddings.sqlite3        the embedding cache
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


class Layout:
    def __init__(self, data_dir: Path):
        self.root = data_dir
        self.builds = data_dir / "builds"
        self.pointer = data_dir / "CURRENT"
        self.reports = data_dir / "reports"
        self.embedding_cache = data_dir / "embeddings.sqlite3"
        self.jieba_cache = data_dir / "jieba"

    def current_id(self) -> str | None:
        try:
            build_id = self.pointer.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return build_id if build_id and (self.builds / build_id / "manifest.json").exists() else None

    def current_dir(self) -> Path | None:
        build_id = self.current_id()
        return self.builds / build_id if build_id else None

    def current_manifest(self) -> dict | None:
        current = self.current_dir()
        return json.loads((current / "manifest.json").read_text(encoding="utf-8")) if current else None

    def new_tmp(self, build_id: str) -> Path:
        tmp = self.builds / f".tmp-{build_id}"
        tmp.mkdir(parents=True)
        return tmp

    def finish(self, tmp: Path, build_id: str) -> Path:
        final = self.builds / build_id
        os.replace(tmp, final)
        return final

    def swap(self, build_id: str) -> None:
        """Make `build_id` current: readers see the old id or the new one, never a half-written file."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.pointer.with_name(f".CURRENT.{os.getpid()}")
        tmp.write_text(build_id, encoding="utf-8")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.pointer)
        history = self.root / "HISTORY"
        with open(history, "a", encoding="utf-8") as fh:
            fh.write(build_id + "\n")
        log.info("index build %s is now current", build_id)

    def served_history(self) -> list[str]:
        """Build ids that were made current, oldest first (for rollback)."""
        try:
            lines = (self.root / "HISTORY").read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return []
        return [b for b in lines if (self.builds / b / "manifest.json").exists()]

    def all_builds(self) -> list[str]:
        if not self.builds.exists():
            return []
        return sorted(p.name for p in self.builds.iterdir() if p.is_dir() and not p.name.startswith("."))

    def clean_stale_tmp(self) -> None:
        if self.builds.exists():
            for p in self.builds.glob(".tmp-*"):
                log.info("removing an unfinished build: %s", p.name)
                shutil.rmtree(p, ignore_errors=True)

    def prune(self, keep: int) -> None:
        """Keep the last `keep` served builds (rollback targets, the current one among them) and the newest build
        that was kept aside; delete the rest."""
        served = self.served_history()
        keep_ids = set(served[-keep:]) | {self.current_id()}
        never_served = [b for b in self.all_builds() if b not in served]
        if never_served:
            keep_ids.add(never_served[-1])
        for build_id in self.all_builds():
            if build_id not in keep_ids:
                shutil.rmtree(self.builds / build_id, ignore_errors=True)

    def write_report(self, build_id: str, report: dict) -> None:
        self.reports.mkdir(parents=True, exist_ok=True)
        (self.reports / f"{build_id}.json").write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")

    def last_report(self) -> dict | None:
        if not self.reports.exists():
            return None
        files = sorted(self.reports.glob("*.json"))
        return json.loads(files[-1].read_text(encoding="utf-8")) if files else None
