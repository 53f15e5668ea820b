"""Which files of kb/ may be read, and reading them safely.

Only regular files that lie inside kb/ are read. The walk never follows a symbolic link (to a file or a folder) and
never opens a special file (a FIFO would block the reader forever); hidden files and folders (".name") are not read.
Each of these is returned as `Skipped` with a short English reason, so the build can report it like any other file
it could not use. Files whose type is not supported, and editors' lock files ("~$name.docx"), are ignored quietly,
as before.

A symlink to another file inside kb/ is skipped too (that file is read under its own name: reading it twice would
give two documents with the same passages competing for the same top-k places).

`read_regular` opens with O_NOFOLLOW and checks the opened file itself (regular, not over the size cap), so a file
swapped for a link or a pipe between the walk and the read is refused as well.
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .readers import SUPPORTED_SUFFIXES, IngestError

LOCK_PREFIX = "~$"  # Word/Excel lock files, present while a document is open
MB = 1 << 20  # `[index] max_file_mb` counts these, as `ls -lh` and `du -h` do


@dataclass(frozen=True)
class Skipped:
    path: str  # relative to kb/, forward slashes; a folder ends with "/"
    reason: str

    @property
    def marker(self) -> str:
        """What stands for the file's hash in a manifest and in the watcher: it changes only when the reason does."""
        return f"skipped: {self.reason}"


@dataclass(frozen=True)
class KbScan:
    files: tuple[Path, ...]  # regular, inside kb/, a supported type: the ones to read, in a stable order
    skipped: tuple[Skipped, ...]  # the ones an admin should hear about, in the same order


class TooLarge(IngestError):
    """A file over the size cap; `.sha256` is its hash, computed without holding the file in memory."""

    def __init__(self, reason: str, sha256: str) -> None:
        super().__init__(reason)
        self.sha256 = sha256


def _supported(name: str) -> bool:
    return Path(name).suffix.lower() in SUPPORTED_SUFFIXES


def _link_reason(link: Path, root: Path, folder: bool) -> str:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):  # missing target, or a loop
        return "broken symlink (its target does not exist)"
    if not target.is_relative_to(root):
        kind = "folder" if folder else "file"
        return f"symlink to a {kind} outside kb/ ({target}): not read"
    rel = target.relative_to(root).as_posix()
    if folder:
        return f"symlink to the folder {rel}/ inside kb/: not followed (its files are read under their own names)"
    return f"symlink to {rel} inside kb/: not read twice (the file itself is read under its own name)"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "a special file"


def scan(kb_dir: Path) -> KbScan:
    """Walk kb/ without following links. Raises FileNotFoundError when kb/ is not a folder."""
    if not kb_dir.is_dir():
        raise FileNotFoundError(errno.ENOENT, "knowledge base folder not found", str(kb_dir))
    root = kb_dir.resolve()
    found: list[tuple[str, Path | Skipped]] = []
    for dirpath, dirnames, filenames in os.walk(kb_dir, followlinks=False):
        here = Path(dirpath)
        keep = []
        for name in dirnames:
            path = here / name
            rel = path.relative_to(kb_dir).as_posix()
            if path.is_symlink():
                found.append((rel, Skipped(rel + "/", _link_reason(path, root, folder=True))))
            elif name.startswith("."):
                found.append((rel, Skipped(rel + "/", "hidden folder (name starts with '.'): its files are not read")))
            else:
                keep.append(name)
        dirnames[:] = keep  # os.walk descends only into these
        for name in filenames:
            path = here / name
            rel = path.relative_to(kb_dir).as_posix()
            if name.startswith(LOCK_PREFIX) or not _supported(name):
                continue
            try:
                mode = path.lstat().st_mode
            except OSError:  # removed since the listing
                continue
            if stat.S_ISLNK(mode):
                found.append((rel, Skipped(rel, _link_reason(path, root, folder=False))))
            elif name.startswith("."):
                found.append((rel, Skipped(rel, "hidden file (name starts with '.'): not read")))
            elif not stat.S_ISREG(mode):
                found.append((rel, Skipped(rel, f"not a regular file ({_kind(mode)}): not read")))
            else:
                found.append((rel, path))
    found.sort(key=lambda item: item[0])
    return KbScan(
        files=tuple(x for _, x in found if isinstance(x, Path)),
        skipped=tuple(x for _, x in found if isinstance(x, Skipped)),
    )


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`, opened without following a link.

    Raises IngestError (not a regular file, a symlink) or TooLarge; OSError when it cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IngestError("symlink (replaced since the scan): not read", path) from exc
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise IngestError(f"not a regular file ({_kind(st.st_mode)}): not read", path)
        if st.st_size > max_bytes:
            raise _too_large(fh, st.st_size, max_bytes)
        data = fh.read(min(st.st_size, max_bytes) + 1)  # the size it has, and one byte to see if it grew
        while st.st_size < len(data) <= max_bytes:  # it grew since fstat: read on, in blocks, up to the cap
            block = fh.read(min(1 << 20, max_bytes + 1 - len(data)))
            if not block:
                break
            data += block
        if len(data) > max_bytes:  # grew past the cap since fstat
            fh.seek(0)
            raise _too_large(fh, max(st.st_size, len(data)), max_bytes)
    return data


def _too_large(fh, size: int, max_bytes: int) -> TooLarge:
    import hashlib

    h = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    limit_mb = max_bytes / MB
    return TooLarge(f"file too large: {size / MB:.1f} MB (limit [index] max_file_mb = {limit_mb:g})", h.hexdigest())
