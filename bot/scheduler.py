"""Keeping the index live while the bot keeps answering.

- `Rebuilder`: every trigger (the nightly job, the kb/ watcher, an admin's /reindex) asks it for a build; requests
  that arrive during a build coalesce into one more build after it. Builds run in a worker thread, off the event
  loop; the engine picks up a swapped-in build at its next question (queries in flight finish on the old one).
- `KbWatcher`: polls kb/ and reports files added, changed or removed since the serving build, once every changed
  file has kept its size and mtime for `[index] settle_s` (a file still being copied is not ingested).
- `IndexScheduler`: an APScheduler 3 `AsyncIOScheduler` with the nightly `CronTrigger` (`[index] nightly` in
  `[index] timezone`) and the watcher's interval job. Scheduler and watcher clock are injectable for tests.
  Beside the nightly rebuild it runs the housekeeping jobs (`housekeeping`: the retention purge of the chat history
  and the WeChat ledger), at the same time, or every 24 h when the nightly rebuild is off.

Admin notifications: the Rebuilder sends each build's report (`report_text`) to every subscribed callable.
A channel that can message admins implements `async def notify_admins(self, text: str) -> None` (sending to the
`[bot] admins` of its platform); `bot.app` subscribes it: `rebuilder.subscribe(channel.notify_admins)`.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Awaitable, Callable
from zoneinfo import ZoneInfo

from rag_core.config import Config
from rag_core.index.build import BuildInProgress, BuildReport, EmptyKnowledgeBase, build_index, scan_kb_entries
from rag_core.index.layout import Layout

from . import metrics

log = logging.getLogger(__name__)

Notify = Callable[[str], Awaitable[None]]

# ---- the admin report ----------------------------------------------------------------------------------------------

_REASONS = (  # the readers' English reasons (rag_core.ingest.readers) → what an admin should know, in Chinese
    ("no text layer", "没有文字层，可能是扫描版 PDF，请先做 OCR 或换成文字版"),
    ("undecodable text", "文字编码无法识别，请另存为 UTF-8"),
    ("invalid utf-16", "文字编码无法识别，请另存为 UTF-8"),
    ("binary file", "不是文本文件，内容是二进制数据"),
    ("empty file", "空文件"),
    ("no text after cleaning", "清洗后没有正文"),
    ("encrypted pdf", "PDF 已加密，无法读取"),
    ("pdf parse error", "PDF 解析出错，文件可能已损坏"),
    ("docx parse error", "DOCX 解析出错，文件可能已损坏"),
    ("unsupported file type", "不支持的文件类型"),
    ("unreadable", "文件无法读取"),
    ("cannot read file", "文件无法读取"),
    ("symlink to a file outside", "是指向知识库文件夹之外的符号链接，出于安全不读取"),
    ("symlink to a folder outside", "是指向知识库文件夹之外的文件夹链接，出于安全不读取"),
    ("symlink to the folder", "是指向知识库内文件夹的链接，不跟随（其中文件按原名收录）"),
    ("symlink", "是符号链接，不重复收录（链接不读取，原文件按原名收录）"),
    ("broken symlink", "符号链接已失效，指向的文件不存在"),
    ("not a regular file", "不是普通文件（管道、设备等），不读取"),
    ("hidden file", "隐藏文件（文件名以“.”开头），未收录"),
    ("hidden folder", "隐藏文件夹（名称以“.”开头），其中的文件未收录"),
    ("file too large", "文件太大，超过 [index] max_file_mb 的上限，未收录"),
)


def failure_text(reason: str) -> str:
    """A reader's failure reason for an admin: the Chinese gloss, with the original for the log-minded."""
    low = reason.lower()
    gloss = next((zh for key, zh in _REASONS if low.startswith(key)), "无法解析")
    return f"{gloss}（{reason}）"


def report_text(report: BuildReport, trigger: str = "", previous_chunks: int | None = None) -> str:
    """The admin report of a build, in Chinese."""
    state = "已启用" if report.swapped else f"未启用，继续使用原索引。原因：{report.gate}"
    lines = [f"索引重建 {report.build_id}{f'（{trigger}）' if trigger else ''}：{state}"]
    parsed = report.documents - report.reused
    chunks = f"段落 {report.chunks} 个" + (f"（原 {previous_chunks} 个）" if previous_chunks is not None else "")
    lines.append(
        f"收录文档 {report.documents} 份（重新解析 {parsed} 份，沿用 {report.reused} 份），{chunks}，"
        f"新算向量 {report.embedded} 条，用时 {report.duration_s} 秒"
    )
    for label, items in (("新增", report.added), ("修改", report.changed), ("删除", report.removed)):
        if items:
            lines.append(f"{label} {len(items)} 份：{'、'.join(items)}")
    if not (report.added or report.changed or report.removed):
        lines.append("收录的文档没有变化")
    if report.failures:
        lines.append(f"读取失败 {len(report.failures)} 个文件（未收录）：")
        lines += [f"  ✗ {f.path}：{failure_text(f.reason)}" for f in report.failures]
    if report.checks:
        lines.append(f"质量检查：{report.checks}")
    return "\n".join(lines)


# ---- builds off the event loop, coalesced --------------------------------------------------------------------------


async def _in_daemon_thread(fn, *args):
    """Run `fn` in a daemon thread: unlike asyncio.to_thread, stopping the bot never waits for a build to finish
    (a build cut short leaves only a `.tmp-*` folder that the next build removes)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(ok: bool, value) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def work() -> None:
        try:
            outcome = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop has closed: the bot stopped while this build ran
            pass

    threading.Thread(target=work, name="index-build", daemon=True).start()
    return await future


class Rebuilder:
    """Coalescing index builds: at most one at a time, and one more after it when asked during it."""

    def __init__(self, cfg: Config, engine, notify: Notify | None = None, gate=None, build=build_index):
        self.cfg = cfg
        self.engine = engine
        self.gate = gate
        self._build = build
        self.listeners: list[Notify] = [notify] if notify else []
        self._running: asyncio.Task | None = None
        self._again: list[str] = []
        self.last: BuildReport | None = None
        self.last_error: str | None = None
        self.last_text = ""  # the last report as sent to the admins

    def subscribe(self, notify: Notify) -> None:
        """Send every build report to `notify` (a channel's `notify_admins`)."""
        self.listeners.append(notify)

    @property
    def running(self) -> bool:
        return self._running is not None and not self._running.done()

    def start(self, trigger: str = "") -> asyncio.Task:
        """Start a build, or ask the running one for another round after it; never waits (for scheduled jobs)."""
        if self.running:
            self._again.append(trigger)
            log.info("index build requested (%s) during a build: one more round after it", trigger or "unspecified")
            return self._running
        self._running = asyncio.create_task(self._run(trigger), name="index-rebuild")
        return self._running

    async def request(self, trigger: str = "") -> BuildReport | None:
        """Start or join a build and wait for its report (None when the build failed; see `last_error`)."""
        return await asyncio.shield(self.start(trigger))

    async def request_text(self) -> str:
        """/reindex: build now (or join the build running) and answer with its report."""
        report = await self.request("管理员 /reindex")
        if report is None:
            return f"索引重建失败，继续使用原索引：{self.last_error}"
        return self.last_text

    async def _run(self, trigger: str) -> BuildReport | None:
        report = None
        while True:
            before = Layout(self.cfg.data_dir).current_manifest() or {}
            try:
                report = await _in_daemon_thread(
                    self._build, self.cfg, self.engine.embedder, self.engine.tokenizer, False, self.gate
                )
            except BuildInProgress as exc:
                report, self.last_error = None, str(exc)
                log.warning("rebuild skipped: %s", exc)
                await self._notify(f"索引重建未进行：另一个重建正在运行（{exc}）")
            except Exception as exc:  # noqa: BLE001 - whatever a build does, the bot keeps serving the old index
                report, self.last_error = None, f"{type(exc).__name__}: {exc}"
                log.exception("rebuild failed, the current index keeps serving")
                await self._notify(f"索引重建失败，继续使用原索引：{exc}")
            else:
                if report.swapped and hasattr(self.engine, "refresh"):
                    try:  # load the new build now, off the loop, so no grower's question waits for it
                        await _in_daemon_thread(self.engine.refresh)
                    except Exception:  # noqa: BLE001 - the next question loads it (or says the index is missing)
                        log.exception("could not load the new build %s ahead of questions", report.build_id)
                self.last, self.last_error = report, None
                self.last_text = report_text(report, trigger, before.get("chunk_count") if before else None)
                log.info("%s", self.last_text)
                await self._notify(self.last_text)
            metrics.observe_rebuild(report)  # swapped, rejected by the gate, or failed (None)
            if not self._again:
                return report
            trigger = "、".join(dict.fromkeys(t for t in self._again if t)) or "合并的请求"
            self._again = []

    async def _notify(self, text: str) -> None:
        for notify in list(self.listeners):
            try:
                await notify(text)
            except Exception:  # noqa: BLE001 - a channel that cannot deliver must not stop the others
                log.exception("could not deliver the index report through %r", notify)


# ---- the kb/ watcher -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KbChange:
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"{label} {'、'.join(items)}" for label, items in
                 (("新增", self.added), ("修改", self.changed), ("删除", self.removed)) if items]
        return "知识库文件变化：" + "；".join(parts)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class KbWatcher:
    """Which files of kb/ differ from the serving build, once they have settled.

    A file is settled when its (size, mtime) has not changed for `settle_s` seconds of `clock`. Only settled files
    are hashed; a file whose bytes equal the serving build's (a `touch`, a copy of the same file) is no change.
    A change is reported once: while a build for it runs, or after the gate kept that build aside, the same kb/
    state is not reported again (a new edit is).
    """

    def __init__(self, kb_dir: Path, data_dir: Path, settle_s: float, clock: Callable[[], float] = time.monotonic):
        self.kb_dir = kb_dir
        self.layout = Layout(data_dir)
        self.settle_s = settle_s
        self.clock = clock
        self._seen: dict[str, tuple[int, int]] = {}  # rel → (size, mtime_ns) last observed
        self._since: dict[str, float] = {}  # rel → clock time that signature was first observed
        self._hashed: dict[str, tuple[tuple[int, int], str]] = {}  # rel → (signature, sha256) last hashed
        self._reference: tuple[str | None, dict[str, str]] = (None, {})
        self._requested: dict[str, str] | None = None
        self.pending: tuple[str, ...] = ()  # files still changing at the last poll
        self._skipped: dict[str, str] = {}  # rel → marker of the kb/ entries a build skips (see ingest.kbfiles)

    def _serving(self) -> dict[str, str]:
        """rel → sha256 of the files the serving build read (indexed or failed; "" when it did not record one)."""
        build_id = self.layout.current_id()
        if build_id != self._reference[0]:
            manifest = self.layout.current_manifest() or {}
            files = {rel: d["sha256"] for rel, d in manifest.get("documents", {}).items()}
            files |= {f["path"]: f.get("sha256", "") for f in manifest.get("failures", [])}
            self._reference = (build_id, files)
        return self._reference[1]

    def _scan(self) -> dict[str, tuple[int, int]]:
        """(size, mtime) of each file to read; entries the build skips (links, special, hidden) are never opened:
        they stand for themselves by the marker the build records for them, kept in `self._skipped`."""
        try:
            entries = scan_kb_entries(self.kb_dir)
        except EmptyKnowledgeBase:
            return {}
        self._skipped = {skip.path: skip.marker for skip in entries.skipped}
        sigs = {}
        for path in entries.files:
            try:
                st = path.stat()
            except OSError:  # removed between listing and stat
                continue
            sigs[path.relative_to(self.kb_dir).as_posix()] = (st.st_size, st.st_mtime_ns)
        return sigs

    def poll(self) -> KbChange | None:
        """The change to build for, or None (nothing changed, already requested, or still settling: see `pending`)."""
        now = self.clock()
        sigs = self._scan()
        for rel, sig in sigs.items():
            if self._seen.get(rel) != sig:
                self._seen[rel], self._since[rel] = sig, now
        for rel in set(self._seen) - set(sigs):
            del self._seen[rel], self._since[rel]
            self._hashed.pop(rel, None)
        state: dict[str, str] = dict(self._skipped)
        pending = []
        for rel, sig in sigs.items():
            hashed = self._hashed.get(rel)
            if hashed and hashed[0] == sig:
                state[rel] = hashed[1]
            elif now - self._since[rel] < self.settle_s:
                pending.append(rel)
            else:
                try:
                    self._hashed[rel] = (sig, _sha256(self.kb_dir / rel))
                except OSError:
                    pending.append(rel)
                    continue
                state[rel] = self._hashed[rel][1]
        self.pending = tuple(sorted(pending))
        if pending:
            log.debug("kb/ files still settling: %s", ", ".join(self.pending))
            return None
        serving = self._serving()
        change = KbChange(
            added=tuple(sorted(r for r in state if r not in serving)),
            changed=tuple(sorted(r for r in state if r in serving and serving[r] and serving[r] != state[r])),
            removed=tuple(sorted(r for r in serving if r not in state)),
        )
        if not (change.added or change.changed or change.removed):
            self._requested = None
            return None
        if state == self._requested:
            return None
        self._requested = state
        return change


# ---- the triggers --------------------------------------------------------------------------------------------------

_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def nightly_trigger(cfg: Config):
    """The CronTrigger of `[index] nightly` ("HH:MM") in `[index] timezone`; None when nightly is "" or "off"."""
    from apscheduler.triggers.cron import CronTrigger

    value = cfg.index.nightly.strip()
    if value.lower() in ("", "off"):
        return None
    match = _HHMM.match(value)
    if not match:
        raise ValueError(f'[index] nightly must be "HH:MM" (or "off"), got {cfg.index.nightly!r}')
    return CronTrigger(hour=int(match.group(1)), minute=int(match.group(2)), timezone=_zone(cfg))


def _zone(cfg: Config) -> ZoneInfo:
    try:
        return ZoneInfo(cfg.index.timezone)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError for malformed keys
        raise ValueError(f"[index] timezone: unknown time zone {cfg.index.timezone!r}") from exc


class IndexScheduler:
    """The nightly rebuild and the kb/ watch, as jobs of an APScheduler 3 AsyncIOScheduler on the running loop."""

    NIGHTLY, WATCH, SETTLE, HOUSEKEEPING = "nightly-rebuild", "kb-watch", "kb-watch-settle", "housekeeping"

    def __init__(self, cfg: Config, rebuilder: Rebuilder, scheduler=None, watcher: KbWatcher | None = None,
                 housekeeping: list[Callable[[], Awaitable[object]]] | None = None):
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self.cfg = cfg
        self.rebuilder = rebuilder
        self.housekeeping = list(housekeeping or [])  # e.g. HistoryStore.purge_expired; channels append theirs
        self.scheduler = scheduler if scheduler is not None else AsyncIOScheduler(timezone=_zone(cfg))
        self.watcher = watcher if watcher is not None else KbWatcher(cfg.kb_dir, cfg.data_dir, cfg.index.settle_s)
        self._polling = asyncio.Lock()  # the interval job and a settle re-check must not poll at once

    def start(self) -> None:
        """Add the jobs and start the scheduler (call from the running event loop)."""
        from apscheduler.triggers.interval import IntervalTrigger

        trigger = nightly_trigger(self.cfg)
        if trigger is not None:
            self.scheduler.add_job(self.nightly, trigger, id=self.NIGHTLY, replace_existing=True,
                                   coalesce=True, max_instances=1, misfire_grace_time=3600)
        daily = trigger or IntervalTrigger(hours=24, timezone=self.scheduler.timezone)
        self.scheduler.add_job(self.housekeep, daily, id=self.HOUSEKEEPING, replace_existing=True,
                               coalesce=True, max_instances=1, misfire_grace_time=3600)
        interval = self.cfg.index.watch_interval_s
        if interval > 0:  # the first poll, one interval after start, also catches what changed while the bot was down
            self.scheduler.add_job(self.watch, IntervalTrigger(seconds=interval, timezone=self.scheduler.timezone),
                                   id=self.WATCH, replace_existing=True, coalesce=True, max_instances=1)
        if not self.scheduler.running:
            self.scheduler.start()
        job = self.scheduler.get_job(self.NIGHTLY)
        log.info("index triggers: nightly %s, kb/ watch every %ss (settle %ss)",
                 job.next_run_time if job else "off", interval or "-", self.cfg.index.settle_s)

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def nightly(self) -> None:
        """The nightly job: a full refresh (unchanged documents are reused, so it is cheap)."""
        self.rebuilder.start("每晚定时重建")

    async def housekeep(self) -> int:
        """The nightly housekeeping jobs, each on its own (one failing does not stop the others); rows deleted."""
        total = 0
        for job in list(self.housekeeping):
            try:
                total += int(await job() or 0)
            except Exception:  # noqa: BLE001 - housekeeping must never stop the scheduler
                log.exception("nightly housekeeping %r failed", job)
        return total

    async def watch(self) -> None:
        """The watch job: request a build once changed files have settled; re-check soon while they settle."""
        if self._polling.locked():
            return
        async with self._polling:
            change = await asyncio.to_thread(self.watcher.poll)
        if change is not None:
            log.info("%s", change.describe())
            self.rebuilder.start(change.describe())
        elif self.watcher.pending:
            when = datetime.now(self.scheduler.timezone) + timedelta(seconds=self.cfg.index.settle_s + 1)
            self.scheduler.add_job(self.watch, "date", run_date=when, id=self.SETTLE, replace_existing=True)
