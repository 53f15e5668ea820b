"""The quality gate a finished build passes before it is swapped in.

Two checks, both against the build that is serving now:
1. every document the current build indexed, and that is still in kb/, must still parse in the candidate
   (a document that now fails would silently vanish from the answers; the failure's reason is reported);
2. a smoke set of questions must reach Hit@5 no worse than the current build's minus `[index] gate_margin`.

Hit@5 is measured at the document level: a question hits when one of its top five passages comes from one of the
documents it expects. Chunk-level gold would need quotes mapped to chunks and changes whenever the chunker does;
the document level is robust across chunking changes and still catches a broken parser, tokenizer or embedder.
The gate retrieves with BM25 + dense + RRF and no reranker: the cross-encoder is the same model for both builds, so
leaving it out measures the index alone (and keeps the gate fast). The candidate's learned ranker (trained for that
build) is checked on the same questions against the candidate's own fusion order: one that loses more than the
margin is removed from the build, which then serves in fusion order.

Only questions whose expected documents are in both builds count, so deleting a document on purpose does not fail
the gate. `[index] smoke_questions` entries read "问题 => a.md, b.md"; an entry without "=>" expects the document the
current build ranks first (a regression check rather than a correctness check).
"""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..config import Config
from ..lexical import Tokenizer
from ..models import Embedder
from ..rank.model import RANKER_FILE
from ..retrieve import Channels, Retriever
from .layout import Layout
from .store import IndexReader, IndexUnavailable

log = logging.getLogger(__name__)

K = 5
_EPS = 1e-9


@dataclass(frozen=True)
class SmokeQuestion:
    question: str
    docs: tuple[str, ...] = ()  # paths relative to kb/; empty: the document the current build ranks first


# From ../shared/eval/dev.jsonl: one question per document, each answered at rank 1 by the sample KB's index.
DEFAULT_SMOKE = (
    SmokeQuestion("咖啡锈病菌旱季是在哪里存活下来的？掉在地上的枯叶会带菌吗？", ("diseases.md",)),
    SmokeQuestion("旋皮天牛冬天躲在树的哪个部位过冬？", ("pests.md",)),
    SmokeQuestion("咖啡树最下面那几根枝条都拖到地上了，要剪不？", ("pruning.md",)),
    SmokeQuestion("采咖啡图快一把撸下来行不行？", ("harvest.md",)),
    SmokeQuestion("沙床里出的小苗，长到什么样子移进营养袋最好？", ("nursery_regulation.txt",)),
    SmokeQuestion("老树挖掉重新种新苗，要几年才能进入盛产？", ("renovation_faq.txt",)),
    SmokeQuestion("山上咖啡园全靠水窖浇水，整个旱季一亩地大概得备多少方水？", ("water_rainy_season_pdfnoisy.txt",)),
    SmokeQuestion("水洗发酵怎么判断已经发酵好、可以清洗了？", ("processing_regulation.txt",)),
    SmokeQuestion("合作社的打药记录、买药记录要保存几年？", ("ipm_pesticide_regulation.pdf",)),
    SmokeQuestion("咖啡地里套种的嫁接澳洲坚果，种下去几年能有收成？", ("shade_intercropping.docx",)),
)


def parse_smoke(entries: Sequence[str]) -> tuple[SmokeQuestion, ...]:
    """Config entries "问题 => a.md, b.md" (or just "问题") → smoke questions; empty → the built-in set."""
    if not entries:
        return DEFAULT_SMOKE
    out = []
    for entry in entries:
        question, _, docs = entry.partition("=>")
        names = tuple(d.strip() for d in docs.replace("，", ",").split(",") if d.strip())
        if question.strip():
            out.append(SmokeQuestion(question.strip(), names))
    return tuple(out)


@dataclass(frozen=True)
class GateResult:
    reason: str | None  # why the candidate must not be swapped in; None: it may
    summary: str  # one line for the admin report
    regressions: tuple[tuple[str, str], ...] = ()  # (path, reason) of documents that parsed before and fail now
    candidate_hit: float | None = None
    current_hit: float | None = None
    asked: int = 0


def parse_regressions(current: dict, candidate: dict) -> list[tuple[str, str]]:
    """Documents the current build indexed that the candidate could not read (manifests in, (path, reason) out)."""
    good = set(current.get("documents", {}))
    return [(f["path"], f["reason"]) for f in candidate.get("failures", []) if f["path"] in good]


def _top_docs(retriever: Retriever, question: str, rerank: bool = False) -> list[str]:
    return [h.chunk.doc for h in retriever.search(question, channels=Channels(rerank=rerank)).evidence[:K]]


def doc_hits(retriever: Retriever, questions: Sequence[SmokeQuestion], rerank: bool = False) -> list[bool]:
    """Whether each question has one of its expected documents among the top K passages."""
    return [bool(set(_top_docs(retriever, q.question, rerank)) & set(q.docs)) for q in questions]


def check_ranker(retriever: Retriever, questions: Sequence[SmokeQuestion], fusion_hit: float, margin: float) -> str:
    """The build's learned ranker must not lose more than `margin` of its own fusion order's Hit@K on the smoke
    questions; one that does is removed from the build (which then ranks in fusion order). Returns a summary."""
    if retriever.learned is None:
        return ""
    ranked = sum(doc_hits(retriever, questions, rerank=True)) / len(questions)
    if ranked < fusion_hit - margin - _EPS:
        (retriever.index.dir / RANKER_FILE).unlink(missing_ok=True)
        log.warning("learned ranker of %s removed: smoke Hit@%d %.2f against fusion order's %.2f",
                    retriever.index.dir.name, K, ranked, fusion_hit)
        return f"；学习排序模型使 Hit@{K} 降到 {ranked:.2f}，已停用（按融合顺序）"
    return f"；学习排序后 {ranked:.2f}"


class QualityGate:
    """`gate(build_dir) -> reason | None`, as `build_index` expects; `last` and `summary` describe the last check."""

    def __init__(
        self, cfg: Config, embedder: Embedder, tokenizer: Tokenizer, smoke: Sequence[SmokeQuestion] | None = None
    ):
        self.cfg = cfg
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.smoke = tuple(smoke) if smoke is not None else parse_smoke(cfg.index.smoke_questions)
        self.margin = cfg.index.gate_margin
        self.last: GateResult | None = None

    @property
    def summary(self) -> str:
        return self.last.summary if self.last else ""

    def __call__(self, build_dir: Path) -> str | None:
        self.last = self.check(build_dir)
        log.info("quality gate for %s: %s", build_dir.name, self.last.summary)
        return self.last.reason

    def _retriever(self, build_dir: Path) -> Retriever:
        retrieval = dataclasses.replace(self.cfg.retrieval, final_topk=K)
        return Retriever(IndexReader(build_dir, retrieval.bm25_engine), self.tokenizer, self.embedder, None, retrieval)

    def check(self, build_dir: Path) -> GateResult:
        candidate_manifest = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8"))
        current_dir = Layout(self.cfg.data_dir).current_dir()
        if current_dir is None or current_dir.resolve() == build_dir.resolve():
            return GateResult(None, "首次建立索引，没有可比较的现行版本")
        current_manifest = json.loads((current_dir / "manifest.json").read_text(encoding="utf-8"))

        regressions = tuple(parse_regressions(current_manifest, candidate_manifest))
        if regressions:
            listed = "；".join(f"{path}（{reason}）" for path, reason in regressions)
            return GateResult(f"原先可用的文档现在读不出来：{listed}", f"{len(regressions)} 份原有文档解析失败", regressions)

        if current_manifest.get("embedder") != self.embedder.name:
            return GateResult(None, f"向量模型已更换（{current_manifest.get('embedder')} → {self.embedder.name}），未做冒烟对比")
        try:
            current = self._retriever(current_dir)
            candidate = self._retriever(build_dir)
        except IndexUnavailable as exc:
            return GateResult(None, f"未做冒烟对比：{exc}")
        both = set(current_manifest.get("documents", {})) & set(candidate_manifest.get("documents", {}))
        questions = []
        for q in self.smoke:
            if not q.docs:  # no expected document given: whatever the current build ranks first
                top = _top_docs(current, q.question)
                q = SmokeQuestion(q.question, tuple(top[:1]))
            docs = tuple(d for d in q.docs if d in both)
            if docs:
                questions.append(SmokeQuestion(q.question, docs))
        if not questions:
            return GateResult(None, "冒烟问题涉及的文档都不在两个版本中，未做对比")
        now_hit = sum(doc_hits(current, questions)) / len(questions)
        new_hit = sum(doc_hits(candidate, questions)) / len(questions)
        summary = f"冒烟问题 {len(questions)} 个，文档级 Hit@{K}：新版 {new_hit:.2f}，现行 {now_hit:.2f}（允许下降 {self.margin:.2f}）"
        summary += check_ranker(candidate, questions, new_hit, self.margin)
        reason = None
        if new_hit < now_hit - self.margin - _EPS:
            reason = f"冒烟问题文档级 Hit@{K} 从 {now_hit:.2f} 降到 {new_hit:.2f}，超过允许的 {self.margin:.2f}"
        return GateResult(reason, summary, (), new_hit, now_hit, len(questions))
