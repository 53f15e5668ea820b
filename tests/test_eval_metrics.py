"""Tests of the evaluation harness's pure statistics: metrics, resampling statistics, error categories, plots."""
from __future__ import annotations

import os
import tempfile

os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="mplconfig-"))

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from rag_core.eval.metrics import (  # noqa: E402
    ERROR_CATEGORIES,
    category_shares,
    classify_error,
    latency_summary,
    macro_average,
    missing_evidence_kind,
    score_item,
)
from rag_core.eval.stats import bootstrap_ci, mean_over_runs, paired_permutation_test  # noqa: E402

approx = pytest.approx


# ---------------------------------------------------------------- citation P/R/F1
def test_prf_hand_computed() -> None:
    gold = {"a#1", "a#2", "b#0"}
    s = score_item(["a#1", "c#4"], [], gold, True)
    assert (s.precision, s.recall) == (approx(1 / 2), approx(1 / 3))
    assert s.f1 == approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))  # 0.4
    s = score_item(["a#1", "a#2", "b#0"], [], gold, True)
    assert (s.precision, s.recall, s.f1) == (1.0, 1.0, 1.0)
    s = score_item(["c#1"], [], gold, True)
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)


def test_duplicate_citations_count_once() -> None:
    s = score_item(["a#1", "a#1", "x#0"], [], {"a#1"}, True)
    assert (s.precision, s.recall) == (approx(0.5), 1.0)


def test_empty_prediction_with_gold_scores_zero() -> None:
    s = score_item([], ["a#1"], {"a#1"}, True)
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    assert (s.doc_precision, s.doc_recall, s.doc_f1) == (0.0, 0.0, 0.0)


def test_unanswerable() -> None:
    s = score_item([], ["a#1"], set(), False)
    assert (s.precision, s.recall, s.f1, s.doc_f1) == (1.0, 1.0, 1.0, 1.0)
    assert s.hit is None and s.rr is None
    s = score_item(["a#1"], ["a#1"], set(), False)
    assert (s.precision, s.recall, s.f1, s.doc_precision, s.doc_recall, s.doc_f1) == (0.0,) * 6


def test_inconsistent_gold_is_an_error() -> None:
    with pytest.raises(ValueError):
        score_item(["a#1"], [], set(), True)
    with pytest.raises(ValueError):
        score_item([], [], {"a#1"}, False)


def test_document_level() -> None:
    gold = {"a#1", "b#2"}  # gold docs {a, b}
    s = score_item(["a#5", "a#6", "c#0"], [], gold, True)  # cited docs {a, c}
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    assert (s.doc_precision, s.doc_recall, s.doc_f1) == (approx(0.5), approx(0.5), approx(0.5))
    custom = score_item(["x:a", "y:b"], [], {"x:c"}, True, doc_of=lambda i: i.split(":")[0])
    assert (custom.doc_precision, custom.doc_recall) == (approx(0.5), 1.0)


# ---------------------------------------------------------------- Hit@K and MRR
def test_hit_and_mrr() -> None:
    ev = ["x#0", "y#1", "a#1", "z#2", "b#0", "w#9"]
    s = score_item([], ev, {"a#1", "b#0"}, True, ks=(1, 3, 5))
    assert s.hit == {1: 0.0, 3: 1.0, 5: 1.0}
    assert s.rr == approx(1 / 3)
    s = score_item([], ["a#1", "x#0"], {"a#1"}, True)
    assert s.hit == {1: 1.0, 3: 1.0, 5: 1.0} and s.rr == 1.0
    s = score_item([], ["x#0", "y#0"], {"a#1"}, True)
    assert s.hit == {1: 0.0, 3: 0.0, 5: 0.0} and s.rr == 0.0
    s = score_item([], ["x#0", "x#0", "a#1"], {"a#1"}, True)  # duplicates do not push the rank down
    assert s.rr == approx(1 / 2)


def test_macro_average_excludes_unanswerable_from_retrieval() -> None:
    scores = [
        score_item(["a#1"], ["a#1"], {"a#1"}, True),  # f1 1, rr 1
        score_item([], ["x#0", "a#1"], {"a#1"}, True),  # f1 0, rr 1/2
        score_item([], ["a#1"], set(), False),  # f1 1, retrieval None
    ]
    avg = macro_average(scores)
    assert avg["f1"] == approx(2 / 3)
    assert avg["rr"] == approx(0.75)
    assert avg["hit@1"] == approx(0.5) and avg["hit@3"] == approx(1.0)
    assert macro_average([scores[2]])["rr"] is None


# ---------------------------------------------------------------- error categories
GOLD = {"a#1"}  # gold doc "a"


@pytest.mark.parametrize(
    ("cited", "evidence", "gold", "answerable", "expected"),
    [
        (["a#1"], ["a#1"], GOLD, True, "Correct"),
        ([], ["a#1"], GOLD, True, "NoCitation"),
        (["b#0"], ["b#0", "a#1"], GOLD, True, "WrongDoc"),
        (["a#2"], ["a#2"], GOLD, True, "WrongChunk"),
        (["a#2", "b#0"], ["a#2", "b#0"], GOLD, True, "WrongChunk"),
        (["a#1"], ["a#1"], {"a#1", "c#3"}, True, "MissingEvidence"),  # c#3 not retrieved
        (["a#1"], ["a#1", "c#3"], {"a#1", "c#3"}, True, "MissingEvidence"),  # c#3 retrieved, not cited
        (["a#1", "b#0"], ["a#1", "b#0"], GOLD, True, "ExtraCitation"),
        (["a#1"], ["a#1"], set(), False, "FalseCitation"),
        ([], ["a#1"], set(), False, "Correct"),
    ],
)
def test_classify_error(cited, evidence, gold, answerable, expected) -> None:
    assert classify_error(cited, evidence, gold, answerable) == expected
    assert expected in ERROR_CATEGORIES
    perfect = score_item(cited, evidence, gold, answerable).f1 == 1.0
    assert perfect == (expected == "Correct")


def test_missing_evidence_kind_and_shares() -> None:
    gold = {"a#1", "c#3"}
    assert missing_evidence_kind(["a#1"], ["a#1"], gold) == "not_retrieved"
    assert missing_evidence_kind(["a#1"], ["a#1", "c#3"], gold) == "not_cited"
    shares = category_shares(["Correct", "Correct", "WrongDoc", "NoCitation"])
    assert shares["Correct"] == 0.5 and shares["WrongDoc"] == 0.25 and shares["FalseCitation"] == 0.0
    assert sum(shares.values()) == approx(1.0)
    assert set(ERROR_CATEGORIES) <= set(shares)


# ---------------------------------------------------------------- stats
def test_mean_over_runs() -> None:
    runs = [[1.0, 0.0, 0.5], [0.0, 0.0, 1.0]]
    assert mean_over_runs(runs).tolist() == [0.5, 0.0, 0.75]
    assert mean_over_runs([[1.0, 2.0]]).tolist() == [1.0, 2.0]
    out = mean_over_runs([[1.0, None], [0.0, None]])
    assert out[0] == 0.5 and np.isnan(out[1])


def test_bootstrap_constant_vector() -> None:
    lo, hi, means = bootstrap_ci([0.7] * 40)
    assert (lo, hi) == (0.7, 0.7)
    assert means.shape == (5000,)


def test_bootstrap_random_data() -> None:
    rng = np.random.default_rng(1)
    small = rng.random(30)
    lo, hi, means = bootstrap_ci(small, seed=3)
    assert lo < small.mean() < hi
    assert means.shape == (5000,)
    assert bootstrap_ci(small, seed=3)[:2] == (lo, hi)  # seeded
    large = rng.random(1200)
    lo2, hi2, _ = bootstrap_ci(large, seed=3)
    assert lo2 < large.mean() < hi2
    assert hi2 - lo2 < hi - lo


def test_bootstrap_drops_none() -> None:
    lo, hi, _ = bootstrap_ci([1.0, None, 1.0])
    assert (lo, hi) == (1.0, 1.0)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_permutation_identical_systems() -> None:
    a = np.random.default_rng(2).random(25)
    assert paired_permutation_test(a, a.copy()) == 1.0


def test_permutation_clearly_different() -> None:
    rng = np.random.default_rng(4)
    b = rng.random(30) * 0.5
    a = b + 0.5
    p = paired_permutation_test(a, b, seed=7)
    assert 0 < p < 0.01
    assert p == approx(1 / 5001)  # no sign flip reaches an all-positive shift except the identity


def test_permutation_p_in_range() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random(20), rng.random(20)
    p = paired_permutation_test(a, b)
    assert 0 < p <= 1
    assert paired_permutation_test(a, b) == p  # seeded
    with pytest.raises(ValueError):
        paired_permutation_test([1.0, 2.0], [1.0])


# ---------------------------------------------------------------- latency
def test_latency_summary_known_numbers() -> None:
    timings = [{"bm25": float(v), "generate": 3.0 * v, "total": 4.0 * v} for v in range(1, 101)]
    summary = latency_summary(timings)
    assert summary["bm25"]["p50"] == approx(50.5)
    assert summary["bm25"]["p90"] == approx(90.1)
    assert summary["bm25"]["p99"] == approx(99.01)
    assert summary["bm25"]["mean"] == approx(50.5)
    assert summary["bm25"]["share"] == approx(0.25)
    assert summary["generate"]["share"] == approx(0.75)
    assert summary["total"]["share"] == approx(1.0) and summary["total"]["p50"] == approx(202.0)
    assert summary["rerank"] == {"p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0, "share": 0.0}
    assert set(summary) == {"spell", "rewrite", "bm25", "dense", "rrf", "rerank", "generate", "total"}


def test_latency_total_defaults_to_sum() -> None:
    summary = latency_summary([{"bm25": 1.0, "generate": 3.0}], stages=("bm25", "total"))
    assert summary["total"]["p50"] == 4.0 and summary["bm25"]["share"] == approx(0.25)


# ---------------------------------------------------------------- plots
def test_plot_report_writes_pngs(tmp_path: Path) -> None:
    from rag_core.eval.plots import plot_report

    rng = np.random.default_rng(0)
    systems = {"baseline": {"f1": 0.55, "f1_ci": [0.48, 0.62]}, "hybrid+rerank": {"f1": 0.71, "f1_ci": [0.65, 0.77]}}
    boots = {name: bootstrap_ci(rng.random(40), n_resamples=500)[2] for name in systems}
    timings = [{"rewrite": 50.0 * rng.random(), "bm25": 3.0, "dense": 20.0, "rrf": 0.2, "rerank": 80.0,
                "generate": 1500.0 + 100 * rng.random()} for _ in range(50)]
    for t in timings:
        t["total"] = sum(t.values())
    paths = plot_report(tmp_path / "plots", systems, boots, latency_summary(timings))
    assert len(paths) == 4
    for path in paths:
        assert path.suffix == ".png" and path.parent == tmp_path / "plots"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000
