"""Only regular files inside kb/ are read (issue 11, item 2): symlinks, special files, hidden files and oversized
files are skipped and reported with their reason — in the build report, the admin report and the watcher."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bot.scheduler import KbWatcher, report_text
from rag_core.index.build import build_index, scan_kb_entries
from rag_core.index.store import IndexReader
from rag_core.index.layout import Layout
from rag_core.models import HashingEmbedder
from rag_core.pipeline import make_tokenizer
from tests.conftest import KB, offline_config

SECRET = "root:x:0:0:TOPSECRET-OUTSIDE-KB"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    shutil.copy(KB / "diseases.md", kb / "diseases.md")
    shutil.copy(KB / "pruning.md", kb / "pruning.md")
    return kb


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "etc" / "passwd"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}\n咖啡锈病 {SECRET}\n" * 20, encoding="utf-8")
    return secret


def build(kb: Path, data: Path, **index):
    cfg = offline_config(data, kb, index=index, retrieval={"learned_ranker": False})  # no ranker training: fast
    return cfg, build_index(cfg, HashingEmbedder(), make_tokenizer(cfg))


def indexed_text(data: Path) -> str:
    reader = IndexReader(Layout(data).current_dir())
    return "\n".join(c.text for c in reader.chunks)


def reasons(report) -> dict[str, str]:
    return {f.path: f.reason for f in report.failures}


def test_symlink_to_a_file_outside_kb_is_not_read(kb, outside, tmp_path):
    (kb / "notes.txt").symlink_to(outside)
    cfg, report = build(kb, tmp_path / "data")
    assert "notes.txt" not in report.added
    assert SECRET not in indexed_text(cfg.data_dir)
    assert "outside kb/" in reasons(report)["notes.txt"]
    text = report_text(report)
    assert "notes.txt" in text and "知识库文件夹之外" in text


def test_symlinked_folder_is_not_followed(kb, outside, tmp_path):
    (kb / "more").symlink_to(outside.parent, target_is_directory=True)
    (outside.parent / "leak.md").write_text(f"# 泄露\n\n{SECRET}\n", encoding="utf-8")
    cfg, report = build(kb, tmp_path / "data")
    assert SECRET not in indexed_text(cfg.data_dir)
    assert "more/" in reasons(report)


def test_symlink_inside_kb_is_reported_not_read_twice(kb, tmp_path):
    (kb / "alias.md").symlink_to(kb / "diseases.md")
    cfg, report = build(kb, tmp_path / "data")
    assert report.documents == 2  # diseases.md once, under its own name
    assert "diseases.md" in reasons(report)["alias.md"]
    assert "不重复收录" in report_text(report)


def test_fifo_and_broken_link_are_reported_without_blocking(kb, tmp_path):
    os.mkfifo(kb / "pipe.md")  # opening a FIFO to read it would wait forever
    (kb / "gone.md").symlink_to(tmp_path / "nowhere.md")
    _, report = build(kb, tmp_path / "data")
    assert "not a regular file" in reasons(report)["pipe.md"]
    assert "broken symlink" in reasons(report)["gone.md"]


def test_hidden_files_and_folders_are_reported(kb, tmp_path):
    (kb / ".draft.md").write_text("# 草稿\n\n咖啡锈病防治草稿内容。\n", encoding="utf-8")
    (kb / ".obsidian").mkdir()
    (kb / ".obsidian" / "notes.md").write_text("# x\n\n咖啡", encoding="utf-8")
    (kb / "~$lock.docx").write_bytes(b"office lock")  # an editor's lock file: ignored quietly, as before
    _, report = build(kb, tmp_path / "data")
    got = reasons(report)
    assert "hidden" in got[".draft.md"]
    assert "hidden" in got[".obsidian/"]
    assert not any("notes.md" in p or "~$" in p for p in got)
    assert "隐藏" in report_text(report)


def test_oversized_file_is_reported_and_not_read(kb, tmp_path):
    (kb / "huge.txt").write_text("咖啡锈病。" * 80_000, encoding="utf-8")  # 1.2 MB
    cfg, report = build(kb, tmp_path / "data", max_file_mb=1.0)
    assert "too large" in reasons(report)["huge.txt"]
    assert "huge.txt" not in report.added
    assert "太大" in report_text(report)
    assert report.documents == 2
    now = [0.0]
    watcher = KbWatcher(kb, cfg.data_dir, settle_s=5, clock=lambda: now[0])
    watcher.poll()
    now[0] += 10
    assert watcher.poll() is None  # recorded by its hash: not a change at every watch, only when it is edited


def test_watcher_reports_a_new_symlink_once_and_never_reads_it(kb, outside, tmp_path):
    now = [0.0]
    cfg, _ = build(kb, tmp_path / "data")
    watcher = KbWatcher(kb, cfg.data_dir, settle_s=5, clock=lambda: now[0])
    assert watcher.poll() is None
    (kb / "notes.txt").symlink_to(outside)
    os.mkfifo(kb / "pipe.md")
    watcher.poll()
    now[0] += 10
    change = watcher.poll()  # would block forever on the FIFO if the watcher opened it
    assert change is not None and set(change.added) == {"notes.txt", "pipe.md"}
    build_index(cfg, HashingEmbedder(), make_tokenizer(cfg))  # the build it triggers reports them as skipped
    now[0] += 10
    assert watcher.poll() is None  # and they are not a change any more


def test_scan_lists_regular_files_only(kb, outside):
    (kb / "notes.txt").symlink_to(outside)
    (kb / "sub").mkdir()
    (kb / "sub" / "a.md").write_text("# a\n\n咖啡", encoding="utf-8")
    (kb / "photo.jpg").write_bytes(b"\xff\xd8")
    scan = scan_kb_entries(kb)
    assert [p.relative_to(kb).as_posix() for p in scan.files] == ["diseases.md", "pruning.md", "sub/a.md"]
    assert [f.path for f in scan.skipped] == ["notes.txt"]
