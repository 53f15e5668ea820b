"""Rebuilding the index while the bot keeps answering: requests coalesce into one build that runs off the event
loop; the engine picks up the new build at its next question (queries in flight finish on the old one)."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from rag_core.config import Config
from rag_core.index.build import BuildReport, EmptyKnowledgeBase, build_index

log = logging.getLogger(__name__)


def report_text(report: BuildReport) -> str:
    """The admin report of a build, in Chinese."""
    lines = [
        f"索引重建 {report.build_id}：{'已启用' if report.swapped else '未启用（' + report.gate + '）'}",
        f"文档 {report.documents} 份，段落 {report.chunks} 个，用时 {report.duration_s} 秒（新算向量 {report.embedded} 条）",
    ]
    for label, items in (("新增", report.added), ("修改", report.changed), ("删除", report.removed)):
        if items:
            lines.append(f"{label}：{'、'.join(items)}")
    for f in report.failures:
        lines.append(f"✗ 未能读取 {f.path}：{f.reason}")
    return "\n".join(lines)


class Rebuilder:
    def __init__(self, cfg: Config, engine, notify: Callable[[str], Awaitable[None]] | None = None, gate=None):
        self.cfg = cfg
        self.engine = engine
        self.notify = notify
        self.gate = gate
        self._running: asyncio.Task | None = None
        self._again = False
        self.last: BuildReport | None = None
        self.last_error: str | None = None

    async def request(self) -> BuildReport | None:
        """Start a build, or join the one running (a request during a build schedules one more after it)."""
        if self._running and not self._running.done():
            self._again = True
            return await asyncio.shield(self._running)
        self._running = asyncio.create_task(self._run())
        return await asyncio.shield(self._running)

    async def _run(self) -> BuildReport | None:
        report = None
        while True:
            self._again = False
            try:
                report = await asyncio.to_thread(build_index, self.cfg, self.engine.embedder, self.engine.tokenizer, False, self.gate)
                self.last, self.last_error = report, None
                log.info("rebuild %s: %s", report.build_id, "swapped" if report.swapped else f"kept aside: {report.gate}")
                if self.notify:
                    await self.notify(report_text(report))
            except (EmptyKnowledgeBase, OSError, ValueError) as exc:
                self.last_error = str(exc)
                log.error("rebuild failed, the current index keeps serving: %s", exc)
                if self.notify:
                    await self.notify(f"索引重建失败，继续使用原索引：{exc}")
            if not self._again:
                return report

    async def request_text(self) -> str:
        report = await self.request()
        if report is None:
            return f"索引重建失败，继续使用原索引：{self.last_error}"
        return report_text(report)
