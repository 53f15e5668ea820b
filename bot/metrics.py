"""The daemon's Prometheus metrics (names prefixed `coffeebot_`), in one registry of their own.

Instrumented code calls the small functions at the bottom (one line at each call site); `GET /metrics`
(bot/monitor.py) renders `REGISTRY`. Counters only go up, so tests compare values before and after.
"""
from __future__ import annotations

import logging
from typing import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

disable_created_metrics()  # no `*_created` series: Prometheus does not use them, operators only scroll past them
REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Stage latencies run from ~0.1 ms (fusion) to seconds (an LLM); total answers to ~30 s with retries.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

QUESTIONS = Counter("coffeebot_questions", "Questions received, by channel", ["channel"], registry=REGISTRY)
ANSWERS = Counter("coffeebot_answers", "Answers given, by mode (llm, extractive, refused)", ["mode"],
                  registry=REGISTRY)
LLM_ERRORS = Counter("coffeebot_llm_errors", "LLM calls that failed (the answer fell back to extractive), by kind",
                     ["kind"], registry=REGISTRY)
STAGE_SECONDS = Histogram("coffeebot_stage_seconds", "Time per pipeline stage of an answer (rewrite, bm25, dense, "
                          "rrf, rerank, generate, total)", ["stage"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
REBUILDS = Counter("coffeebot_index_rebuilds", "Index rebuilds, by outcome (swapped, rejected by the quality gate, "
                   "failed)", ["outcome"], registry=REGISTRY)
REBUILD_SECONDS = Histogram("coffeebot_index_rebuild_seconds", "Duration of index rebuilds that finished",
                            buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800), registry=REGISTRY)
INDEX_BUILD_TIME = Gauge("coffeebot_index_build_timestamp_seconds", "When the serving index build was made "
                         "(Unix time; set by /healthz)", registry=REGISTRY)
WECHAT_DELIVERIES = Counter("coffeebot_wechat_deliveries", "WeChat callback deliveries of user messages and events",
                            registry=REGISTRY)
WECHAT_DUPLICATES = Counter("coffeebot_wechat_duplicates", "WeChat re-deliveries of a message already received "
                            "(answered once, not again)", registry=REGISTRY)
TELEGRAM_RETRIES = Counter("coffeebot_telegram_retries", "Telegram calls retried (flood control, network, "
                           "reconnecting), by reason", ["reason"], registry=REGISTRY)

MODES = ("llm", "extractive", "refused")
for _mode in MODES:  # every series present from the start, so rates work from the first scrape
    ANSWERS.labels(_mode)
for _outcome in ("swapped", "rejected", "failed"):
    REBUILDS.labels(_outcome)
for _reason in ("retry_after", "connect"):
    TELEGRAM_RETRIES.labels(_reason)


def render() -> bytes:
    """The Prometheus text exposition of every coffeebot metric."""
    return generate_latest(REGISTRY)


def count_question(channel: str) -> None:
    QUESTIONS.labels(channel).inc()


def answer_mode(mode: str, covered: bool) -> str:
    """llm / extractive, or refused when the knowledge base does not cover the question."""
    return "refused" if not covered else mode if mode in MODES else "extractive"


def llm_error_kinds(warnings: Iterable[str]) -> list[str]:
    """The kinds of LLM failure an answer's warnings report ("LLM unavailable (timeout): extractive answer")."""
    kinds = []
    for w in warnings:
        if w.startswith("LLM unavailable"):
            kind = w[w.find("(") + 1 : w.find(")")] if "(" in w and ")" in w else "error"
            kinds.append(kind or "error")
    return kinds


def observe_answer(answer) -> None:
    """Count an answer (`rag_core.records.Answer`) by mode, its LLM failures, and its per-stage timings."""
    ANSWERS.labels(answer_mode(answer.mode, answer.covered)).inc()
    for kind in llm_error_kinds(answer.warnings):
        LLM_ERRORS.labels(kind).inc()
    observe_timings(answer.timings_ms)


def observe_timings(timings_ms: Mapping[str, float]) -> None:
    for stage, ms in timings_ms.items():
        STAGE_SECONDS.labels(stage).observe(max(float(ms), 0.0) / 1000)


def observe_rebuild(report) -> None:
    """Count a rebuild from its `BuildReport` (None: the build failed or could not start)."""
    if report is None:
        REBUILDS.labels("failed").inc()
        return
    REBUILDS.labels("swapped" if report.swapped else "rejected").inc()
    REBUILD_SECONDS.observe(float(report.duration_s))


def observe_wechat_delivery(deliveries: int) -> None:
    """One WeChat callback delivery; `deliveries` is how many of this message have arrived so far (1 = first)."""
    WECHAT_DELIVERIES.inc()
    if deliveries > 1:
        WECHAT_DUPLICATES.inc()


def count_telegram_retry(reason: str = "retry_after") -> None:
    TELEGRAM_RETRIES.labels(reason).inc()


def counting_rate_limiter(max_retries: int):
    """PTB's AIORateLimiter (it spaces messages and waits out a 429's retry_after before resending) that also counts
    each 429 in coffeebot_telegram_retries_total{reason="retry_after"}. Only its public process_request is wrapped."""
    from telegram.error import RetryAfter
    from telegram.ext import AIORateLimiter

    class CountingRateLimiter(AIORateLimiter):
        async def process_request(self, callback, args, kwargs, endpoint, data, rate_limit_args):
            async def counted(*a, **kw):
                try:
                    return await callback(*a, **kw)
                except RetryAfter:
                    count_telegram_retry("retry_after")
                    raise

            return await super().process_request(counted, args, kwargs, endpoint, data, rate_limit_args)

    return CountingRateLimiter(max_retries=max_retries)


def value(name: str, **labels: str) -> float:
    """A sample's current value (0 when absent), e.g. value("coffeebot_answers_total", mode="llm")."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
