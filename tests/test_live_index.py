"""Keeping the knowledge base live: versioned builds, incremental rebuilds, the quality gate, citations that survive
edits and deletions, rollback, a build killed half-way, the kb/ watcher and the nightly job under a fake clock.

Every test works on its own copy of a small knowledge base (four documents of kb/) and of an index built once
for the module, never on the session's sample index.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.scheduler import IndexScheduler, KbWatcher, Rebuilder, report_text
from rag_core.config import with_overrides
from rag_core.index.admin import RollbackError, rollback
from rag_core.index.build import BuildInProgress, BuildReport, build_index, build_lock
from rag_core.index.gate import DEFAULT_SMOKE, QualityGate, SmokeQuestion, parse_smoke
from rag_core.index.layout import Layout
from rag_core.lexical import Tokenizer
from rag_core.models import HashingEmbedder
from rag_core.pipeline import Engine
from rag_core.sources import resolve_source
from tests.conftest import KB, REPO, offline_config

SMALL_KB = ("diseases.md", "pests.md", "pruning.md", "harvest.md")
NEW_DOC = """# 新品种简介

## 云咖9号

云咖9号是德宏试验站选育的矮秆品种，高抗咖啡锈病，适宜海拔1000至1400米种植，株行距1.5米乘2米，
定植后第三年投产，每亩鲜果产量可达800公斤以上。
"""
NEW_QUESTION = "云咖9号适合种在多高的海拔？"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    tok = Tokenizer(cache_dir=tmp_path_factory.mktemp("jieba"))
    tok.tokens("预热")
    return tok


@pytest.fixture(scope="module")
def template(tmp_path_factory, tokenizer) -> Path:
    """A small kb/ and its first build, made once; tests work on copies."""
    root = tmp_path_factory.mktemp("live-template")
    (root / "kb").mkdir()
    for name in SMALL_KB:
        shutil.copy(KB / name, root / "kb" / name)
    build_index(offline_config(root / "data", kb_dir=root / "kb"), HashingEmbedder(), tokenizer)
    return root


@pytest.fixture
def live(tmp_path, template):
    """A config on a private copy of the small kb/ and its index."""
    shutil.copytree(template / "kb", tmp_path / "kb")
    shutil.copytree(template / "data", tmp_path / "data")
    return offline_config(tmp_path / "data", kb_dir=tmp_path / "kb")


def make_engine(cfg, tokenizer) -> Engine:
    return Engine(cfg, tokenizer, HashingEmbedder(), None)


def gated_build(cfg, tokenizer, **kwargs) -> BuildReport:
    return build_index(cfg, HashingEmbedder(), tokenizer, gate=QualityGate(cfg, HashingEmbedder(), tokenizer), **kwargs)


def blank_pdf() -> bytes:
    """A PDF of two pages with no text layer: what a scanner produces."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(595, 842)
    writer.add_blank_page(595, 842)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# ---- hot update ----------------------------------------------------------------------------------------------------


async def test_hot_update_while_queries_run(live, tokenizer):
    engine = make_engine(live, tokenizer)
    old_id = Layout(live.data_dir).current_id()
    rebuilder = Rebuilder(live, engine, gate=QualityGate(live, engine.embedder, tokenizer))
    questions = ["咖啡锈病怎么防治？", "旋皮天牛冬天躲在哪里？", "采咖啡一把撸下来行不行？", "咖啡树怎么修剪？"]
    errors: list[BaseException] = []
    empty: list[str] = []
    served: list[str] = []  # the build each answer came from
    during = 0  # answers given while the build ran
    stop = asyncio.Event()

    async def ask_forever() -> None:
        nonlocal during
        n = 0
        while not stop.is_set():
            q = questions[n % len(questions)]
            n += 1
            try:
                result = await asyncio.to_thread(engine.search, q)
            except Exception as exc:  # noqa: BLE001 - collected and asserted on below
                errors.append(exc)
                continue
            if not result.evidence:
                empty.append(q)
            served.append(engine.index.build_id)
            during += rebuilder.running

    loop_task = asyncio.create_task(ask_forever())
    await asyncio.sleep(0.3)
    (live.kb_dir / "new_cultivar.md").write_text(NEW_DOC, encoding="utf-8")
    report = await rebuilder.request("test")
    assert report is not None and report.swapped, report
    deadline = time.monotonic() + 20
    while served.count(report.build_id) < 5 and time.monotonic() < deadline:  # keep asking on the new build
        await asyncio.sleep(0.05)
    stop.set()
    await loop_task

    assert errors == [] and empty == []
    assert during >= 3  # the bot kept answering while the build ran
    assert report.added == ["new_cultivar.md"] and report.reused == len(SMALL_KB)
    assert served.count(old_id) >= 3 and served.count(report.build_id) >= 5  # answered before and after the swap
    top = engine.search(NEW_QUESTION).evidence[0].chunk
    assert top.doc == "new_cultivar.md" and "云咖9号" in top.text


# ---- incremental + citations ---------------------------------------------------------------------------------------


def test_old_citations_resolve_after_edit_and_delete(live, tokenizer):
    layout = Layout(live.data_dir)
    before = make_engine(live, tokenizer).index
    pests = [c for c in before.chunks if c.doc == "pests.md"]
    moved = pests[2]  # its text stays, its position moves when a section is inserted above it
    harvest = next(c for c in before.chunks if c.doc == "harvest.md" and c.cid == 1)
    unchanged = {c.id: c.text for c in before.chunks if c.doc in ("diseases.md", "pruning.md")}
    shown_at = time.time()

    path = live.kb_dir / "pests.md"
    text = path.read_text(encoding="utf-8")
    first_break = text.index("\n## ")
    inserted = "\n## 新增：咖啡绿蚧\n\n" + "咖啡绿蚧多在嫩枝和叶背吸食汁液，诱发煤烟病，发生重时叶片发黑、枝条枯萎。" * 12 + "\n"
    path.write_text(text[:first_break] + inserted + text[first_break:], encoding="utf-8")
    (live.kb_dir / "harvest.md").unlink()
    report = gated_build(live, tokenizer)

    assert report.swapped, report.gate
    assert report.changed == ["pests.md"] and report.removed == ["harvest.md"] and report.added == []
    assert report.reused == 2  # diseases.md and pruning.md were not parsed again
    after = make_engine(live, tokenizer).index
    assert after.build_id == layout.current_id() == report.build_id
    assert {c.id: c.text for c in after.chunks if c.doc in ("diseases.md", "pruning.md")} == unchanged
    new_pests = [c for c in after.chunks if c.doc == "pests.md"]
    assert report.cache_hits >= len(unchanged)  # only the edited document's chunks were embedded again

    found = resolve_source(after, live.data_dir, moved.id, as_of=shown_at)
    assert found.chunk is not None and found.chunk.text == moved.text
    assert found.chunk.id != moved.id and "内容未变" in found.note
    assert any(c.id == found.chunk.id for c in new_pests)

    gone = resolve_source(after, live.data_dir, harvest.id, as_of=shown_at)
    assert gone.chunk is not None and gone.chunk.text == harvest.text
    assert "删除" in gone.note and time.strftime("%Y-%m-%d") in gone.note
    assert resolve_source(after, live.data_dir, harvest.id).chunk.text == harvest.text  # also without the date


# ---- quality gate --------------------------------------------------------------------------------------------------


async def test_bad_files_are_reported_and_do_not_break_the_build(live, tokenizer):
    (live.kb_dir / "scanned_manual.pdf").write_bytes(blank_pdf())
    (live.kb_dir / "garbled.pdf").write_bytes(b"%PDF-1.4\n" + bytes((i * 37 + 11) % 256 for i in range(3000)))
    (live.kb_dir / "old_notes.txt").write_bytes("咖啡".encode() + b"\x80\x80\x80 broken")
    engine = make_engine(live, tokenizer)
    notes: list[str] = []

    async def to_admins(text: str) -> None:
        notes.append(text)

    rebuilder = Rebuilder(live, engine, notify=to_admins, gate=QualityGate(live, engine.embedder, tokenizer))
    report = await rebuilder.request("test")

    assert report.swapped and report.documents == len(SMALL_KB)
    reasons = {f.path: f.reason for f in report.failures}
    assert reasons["scanned_manual.pdf"].startswith("no text layer")
    assert reasons["garbled.pdf"].startswith("PDF parse error")
    assert reasons["old_notes.txt"].startswith("undecodable text")
    assert len(notes) == 1
    text = notes[0]
    assert "已启用" in text and "读取失败 3 个文件" in text
    assert "scanned_manual.pdf：没有文字层，可能是扫描版 PDF" in text and "old_notes.txt：文字编码无法识别" in text
    assert Layout(live.data_dir).last_report()["failures"][0]["path"] in reasons
    assert engine.search("咖啡锈病怎么防治？").evidence


def test_gate_keeps_a_build_aside_when_a_good_document_stops_parsing(live, tokenizer):
    layout = Layout(live.data_dir)
    old_id = layout.current_id()
    (live.kb_dir / "harvest.md").write_bytes(b"\x80\x80\x80" * 50)  # an admin saved it in a broken encoding
    report = gated_build(live, tokenizer)

    assert not report.swapped and layout.current_id() == old_id
    assert "harvest.md" in report.gate and "undecodable" in report.gate
    assert (layout.builds / report.build_id / "manifest.json").exists()  # kept aside for inspection
    assert "未启用，继续使用原索引" in report_text(report)
    assert make_engine(live, tokenizer).index.build_id == old_id


def test_gate_compares_smoke_hit_at_5_with_a_margin(live, tokenizer):
    layout = Layout(live.data_dir)
    old_id = layout.current_id()
    (live.kb_dir / "diseases.md").write_text("# 会议纪要\n\n" + "本次会议讨论了合作社的年度财务预算和人员安排。\n" * 40, encoding="utf-8")
    gate = QualityGate(live, HashingEmbedder(), tokenizer)
    report = build_index(live, HashingEmbedder(), tokenizer, gate=gate)

    assert not report.swapped and layout.current_id() == old_id
    assert gate.last.asked == len(SMALL_KB)  # the default smoke questions about these four documents
    assert gate.last.current_hit == 1.0 and gate.last.candidate_hit == 0.75
    assert "Hit@5" in report.gate and "Hit@5" in report.checks
    lenient = QualityGate(with_overrides(live, index={"gate_margin": 0.3}), HashingEmbedder(), tokenizer)
    assert lenient(layout.builds / report.build_id) is None
    custom = QualityGate(live, HashingEmbedder(), tokenizer, [SmokeQuestion("咖啡树怎么修剪？", ("pruning.md",))])
    assert custom(layout.builds / report.build_id) is None and custom.last.asked == 1
    regression_only = QualityGate(live, HashingEmbedder(), tokenizer, [SmokeQuestion("锈病菌在哪里越冬？")])
    assert regression_only(layout.builds / report.build_id) is not None  # expects what the current build ranks first


def test_smoke_questions_from_config():
    assert parse_smoke([]) == DEFAULT_SMOKE and len(DEFAULT_SMOKE) == 10
    assert parse_smoke(["咖啡锈病怎么防？ => diseases.md，pests.md", "怎么修剪？"]) == (
        SmokeQuestion("咖啡锈病怎么防？", ("diseases.md", "pests.md")),
        SmokeQuestion("怎么修剪？", ()),
    )


# ---- a build killed half-way ---------------------------------------------------------------------------------------


def test_build_killed_with_sigkill_leaves_the_old_index_serving(live, tokenizer, tmp_path):
    layout = Layout(live.data_dir)
    old_id = layout.current_id()
    config = tmp_path / "coffeebot.toml"
    config.write_text(
        f'[paths]\nkb_dir = "{live.kb_dir}"\ndata_dir = "{live.data_dir}"\n'
        '[models]\nembedder = "hashing"\nreranker = ""\n[retrieval]\nranker_encoder = "off"\n',
        encoding="utf-8",
    )
    for n in range(6):  # new text to embed and index, so the build has work to do once its folder exists
        (live.kb_dir / f"extra_{n}.md").write_text(NEW_DOC.replace("9号", f"{n}0号") * 8, encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "--config", str(config), "index"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not any(layout.builds.glob(".tmp-*")):
            assert proc.poll() is None, f"the build ended before it could be killed: {proc.stderr.read()[-2000:]!r}"
            assert time.monotonic() < deadline, "no build folder appeared"
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()

    assert layout.current_id() == old_id
    assert list(layout.builds.glob(".tmp-*")), "the killed build left its unfinished folder"
    engine = make_engine(live, tokenizer)
    assert engine.index.build_id == old_id and engine.search("咖啡锈病怎么防治？").evidence

    report = build_index(live, HashingEmbedder(), tokenizer)  # the lock died with the process
    assert report.swapped and not list(layout.builds.glob(".tmp-*"))
    assert engine.index.build_id == report.build_id
    assert engine.search("云咖30号适合种在多高的海拔？").evidence[0].chunk.doc == "extra_3.md"


def test_only_one_build_at_a_time(live, tokenizer):
    with build_lock(Layout(live.data_dir)):
        with pytest.raises(BuildInProgress):
            build_index(live, HashingEmbedder(), tokenizer)


# ---- rollback ------------------------------------------------------------------------------------------------------


def test_rollback_and_cli(live, tokenizer, tmp_path, capsys):
    from bot.cli import main

    layout = Layout(live.data_dir)
    first = layout.current_id()
    with pytest.raises(RollbackError, match="no earlier build"):
        rollback(layout)
    engine = make_engine(live, tokenizer)
    (live.kb_dir / "new_cultivar.md").write_text(NEW_DOC, encoding="utf-8")
    second = build_index(live, HashingEmbedder(), tokenizer).build_id
    assert engine.search(NEW_QUESTION).evidence[0].chunk.doc == "new_cultivar.md"

    config = tmp_path / "coffeebot.toml"
    config.write_text(f'[paths]\nkb_dir = "{live.kb_dir}"\ndata_dir = "{live.data_dir}"\n', encoding="utf-8")
    assert main(["--config", str(config), "index", "--rollback"]) == 0
    assert first in capsys.readouterr().out
    assert layout.current_id() == first and engine.index.build_id == first
    assert all(c.doc != "new_cultivar.md" for c in engine.index.chunks)
    assert (layout.builds / second).exists()  # kept: the last K builds stay

    assert main(["--config", str(config), "index", "--rollback"]) == 2  # nothing before the first build
    assert "no earlier build" in capsys.readouterr().err
    assert layout.current_id() == first


# ---- coalescing and failures ---------------------------------------------------------------------------------------


class FakeEngine:
    embedder = HashingEmbedder()
    tokenizer = None


async def test_requests_during_a_build_coalesce_into_one_more(live):
    calls: list[float] = []

    def slow_build(cfg, embedder, tokenizer, progress, gate):
        calls.append(time.monotonic())
        time.sleep(0.3)
        return BuildReport(build_id=f"b{len(calls)}", swapped=True)

    rebuilder = Rebuilder(live, FakeEngine(), build=slow_build)
    reports = await asyncio.gather(*(rebuilder.request(f"r{i}") for i in range(5)))
    assert len(calls) == 2  # the first request's build, then one for the four that came during it
    assert {r.build_id for r in reports} == {"b2"}
    assert rebuilder.running is False


async def test_a_failing_build_is_reported_and_the_bot_carries_on(live):
    notes: list[str] = []

    def broken_build(*args):
        raise RuntimeError("disk full")

    async def to_admins(text: str) -> None:
        notes.append(text)

    async def deaf(text: str) -> None:
        raise ConnectionError("admin chat unreachable")

    rebuilder = Rebuilder(live, FakeEngine(), notify=deaf, build=broken_build)
    rebuilder.subscribe(to_admins)
    assert await rebuilder.request() is None
    assert "disk full" in rebuilder.last_error and notes == ["索引重建失败，继续使用原索引：disk full"]
    assert "disk full" in await rebuilder.request_text()


# ---- the kb/ watcher -----------------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_watcher_waits_for_files_to_settle_and_reports_a_change_once(live):
    clock = Clock()
    watcher = KbWatcher(live.kb_dir, live.data_dir, settle_s=30, clock=clock)
    assert watcher.poll() is None and len(watcher.pending) == len(SMALL_KB)  # first sight: not settled yet
    clock.now += 31
    assert watcher.poll() is None and watcher.pending == ()  # settled, and equal to the serving build

    new = live.kb_dir / "new_cultivar.md"
    new.write_text(NEW_DOC[:40], encoding="utf-8")  # a copy in progress
    clock.now += 10
    assert watcher.poll() is None and watcher.pending == ("new_cultivar.md",)
    new.write_text(NEW_DOC, encoding="utf-8")  # still growing
    clock.now += 25
    assert watcher.poll() is None and watcher.pending == ("new_cultivar.md",)
    clock.now += 25  # unchanged for 25 s only
    assert watcher.poll() is None
    clock.now += 10
    change = watcher.poll()
    assert change is not None and change.added == ("new_cultivar.md",) and "新增 new_cultivar.md" in change.describe()
    clock.now += 300
    assert watcher.poll() is None  # already requested: not again until kb/ changes again

    pruning = live.kb_dir / "pruning.md"
    os.utime(pruning, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))  # touched, same bytes
    clock.now += 1
    assert watcher.poll() is None and watcher.pending == ("pruning.md",)
    clock.now += 31
    assert watcher.poll() is None  # same state as already requested

    (live.kb_dir / "harvest.md").unlink()
    clock.now += 1
    change = watcher.poll()
    assert change.removed == ("harvest.md",) and change.added == ("new_cultivar.md",)


class RecordingRebuilder:
    def __init__(self):
        self.triggers: list[str] = []

    def start(self, trigger: str = "") -> None:
        self.triggers.append(trigger)


@contextlib.contextmanager
def _apscheduler_clock(now):
    """APScheduler 3 reads the time with datetime.now() in its base scheduler: make that read `now()`."""
    import apscheduler.schedulers.base as base

    real = base.datetime

    class FakeDatetime(real):
        @classmethod
        def now(cls, tz=None):
            return now().astimezone(tz)

    base.datetime = FakeDatetime
    try:
        yield
    finally:
        base.datetime = real


class ClockedScheduler(AsyncIOScheduler):
    """An AsyncIOScheduler whose notion of now is a test's clock; `tick()` makes it look for due jobs."""

    def __init__(self, now, **options):
        self.now = now
        super().__init__(**options)

    def _process_jobs(self):
        with _apscheduler_clock(self.now):
            return super()._process_jobs()

    def _real_add_job(self, *args, **kwargs):
        with _apscheduler_clock(self.now):
            return super()._real_add_job(*args, **kwargs)

    async def tick(self) -> None:
        self.wakeup()
        for _ in range(5):
            await asyncio.sleep(0.01)


async def test_nightly_job_fires_at_the_configured_time_under_a_fake_clock(live):
    zone = ZoneInfo("Asia/Shanghai")
    # Fake days in the future: APScheduler's executor compares a run time with the real clock to detect misfires.
    day = (datetime.now(zone) + timedelta(days=400)).replace(hour=0, minute=0, second=0, microsecond=0)
    fake = {"now": day.replace(hour=2, minute=59)}
    cfg = with_overrides(live, index={"nightly": "03:00", "watch_interval_s": 0})
    scheduler = ClockedScheduler(lambda: fake["now"], timezone=zone)
    rebuilder = RecordingRebuilder()
    triggers = IndexScheduler(cfg, rebuilder, scheduler=scheduler)
    triggers.start()
    try:
        job = scheduler.get_job(IndexScheduler.NIGHTLY)
        assert job.next_run_time == day.replace(hour=3)
        assert job.next_run_time.astimezone(ZoneInfo("UTC")).hour == 19  # 03:00 in Shanghai is 19:00 UTC
        await scheduler.tick()
        assert rebuilder.triggers == []
        fake["now"] = day.replace(hour=3, second=1)
        await scheduler.tick()
        assert rebuilder.triggers == ["每晚定时重建"]
        fake["now"] = day.replace(hour=3, minute=30)
        await scheduler.tick()
        assert len(rebuilder.triggers) == 1
        fake["now"] = day.replace(hour=3, second=2) + timedelta(days=1)
        await scheduler.tick()
        assert len(rebuilder.triggers) == 2
        assert scheduler.get_job(IndexScheduler.NIGHTLY).next_run_time == day.replace(hour=3) + timedelta(days=2)
    finally:
        triggers.stop()
        await asyncio.sleep(0.01)


async def test_watch_job_requests_a_build_once_files_settle(live):
    zone = ZoneInfo("Asia/Shanghai")
    clock = Clock()
    scheduler = ClockedScheduler(lambda: datetime.now(zone), timezone=zone)
    rebuilder = RecordingRebuilder()
    watcher = KbWatcher(live.kb_dir, live.data_dir, settle_s=30, clock=clock)
    triggers = IndexScheduler(live, rebuilder, scheduler=scheduler, watcher=watcher)
    triggers.start()
    try:
        assert scheduler.get_job(IndexScheduler.WATCH) is not None
        await triggers.watch()  # first sight of every file: settling, so a re-check is scheduled
        assert rebuilder.triggers == [] and scheduler.get_job(IndexScheduler.SETTLE) is not None
        (live.kb_dir / "new_cultivar.md").write_text(NEW_DOC, encoding="utf-8")
        clock.now += 31
        await triggers.watch()
        assert rebuilder.triggers == []  # the new file has only just been seen
        clock.now += 31
        await triggers.watch()
        assert rebuilder.triggers == ["知识库文件变化：新增 new_cultivar.md"]
    finally:
        triggers.stop()
        await asyncio.sleep(0.01)


def test_bad_nightly_setting_names_the_key(live):
    from bot.scheduler import nightly_trigger

    bad = with_overrides(live, index={"nightly": "3am"})
    with pytest.raises(ValueError, match=r"\[index\] nightly"):
        nightly_trigger(bad)
    off = with_overrides(live, index={"nightly": "off"})
    assert nightly_trigger(off) is None
