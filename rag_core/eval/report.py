"""The evaluation report in Markdown: Table 4 (ablations), Table 5 (chunking), errors, latency."""
from __future__ import annotations

import re
from pathlib import Path

TABLE4 = ("full", "b1", "b2a", "b2b", "b3", "b4", "b5", "simple")
TABLE5 = ("semantic", "sliding")


def label_for(label: str, reranker: str | None) -> str:
    """A system's label naming the reranker that ran: "+ rerank" becomes "+ rerank (NAME)", or goes when none ran."""
    if reranker is None or not re.search(r"\brerank\b", label):
        return label
    if reranker in ("", "none"):
        return re.sub(r"\s*\+\s*rerank\b", "", label)
    return re.sub(r"\brerank\b", f"rerank ({reranker})", label, count=1)


def _f(x, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _table(report: dict, names) -> list[str]:
    systems, comps = report["systems"], {c["b"]: c for c in report.get("comparisons", [])}
    rows = ["| system | P | R | F1 [95% CI] | doc F1 | Hit@1 | Hit@5 | MRR | ΔF1 vs full | p |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in names:
        if name in systems:
            s = systems[name]
            c = comps.get(name)
            delta = "" if c is None else f"{-c['delta_f1']:+.3f}"
            p = "" if c is None else f"{c['p']:.4f}"
            rows.append(f"| {s['label']} | {_f(s['precision'])} | {_f(s['recall'])} | {_f(s['f1'])} "
                        f"[{_f(s['f1_ci'][0])}, {_f(s['f1_ci'][1])}] | {_f(s['doc_f1'])} | {_f(s['hit_at_1'])} | "
                        f"{_f(s['hit_at_5'])} | {_f(s['mrr'])} | {delta} | {p} |")
        elif name in report.get("skipped", {}):
            rows.append(f"| {name}: skipped — {report['skipped'][name]} | | | | | | | | | |")
    return rows


def markdown(report: dict) -> str:
    lines = [f"# Evaluation on {Path(report['gold']).name}", "",
             f"{report['items']} items, {report['runs']} run(s) per system; citation metrics are macro averages over "
             "items; intervals are 95 % bootstrap (items resampled); p from a paired sign-flip permutation test "
             "against the full system.", ""]
    if report.get("replies") == "own":
        lines += ["Histories carry each system's own replies (`--replies own`), not the assistant turns written "
                  "in the gold set.", ""]
    lines += ["## Ablations (Table 4)", ""] + _table(report, TABLE4) + [""]
    if any(n in report["systems"] for n in TABLE5):
        lines += ["## Chunking (Table 5)", ""] + _table(report, TABLE5) + [""]
    other = [n for n in report["systems"] if n not in TABLE4 + TABLE5]
    if other:
        lines += ["## Other systems", ""] + _table(report, other) + [""]
    for name, s in report["systems"].items():
        if s.get("refusal_rate_unanswerable") is not None:
            false = s.get("false_refusal_rate")
            on_answerable = f", cited nothing on {false:.0%} of answerable ones" if false is not None else ""
            lines.append(f"- {name}: refused {s['refusal_rate_unanswerable']:.0%} of unanswerable items"
                         f"{on_answerable}; modes {', '.join(s['modes'])}")
    warnings = sorted({w for s in report["systems"].values() for w in s.get("warnings", [])})
    if warnings:
        lines += ["", "Warnings (models in use):"] + [f"- {w}" for w in warnings]
    if report.get("errors"):
        lines += ["", f"## Error analysis ({report['errors']['system']})", "", "| category | share |", "| --- | --- |"]
        lines += [f"| {k} | {v:.1%} |" for k, v in report["errors"]["shares"].items()]
    if report.get("latency"):
        from .plots import stages_that_ran

        skipped = report.get("skipped_stages", [])
        ran = stages_that_ran(report["latency"], skipped)
        lines += ["", f"## Latency (ms, {report.get('errors', {}).get('system', 'full')})", "",
                  "| stage | p50 | p90 | p99 | mean | share |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {k} | {v['p50']:.1f} | {v['p90']:.1f} | {v['p99']:.1f} | {v['mean']:.1f} | {v['share']:.1%} |"
                  for k, v in ran.items()]
        gone = [k for k in report["latency"] if k not in ran]
        if gone:
            lines += ["", f"Did not run: {', '.join(gone)}."]
    if report.get("gold_errors"):
        lines += ["", "## Gold-set errors", ""] + [f"- {e}" for e in report["gold_errors"]]
    if report.get("plots"):
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in report["plots"]]
    return "\n".join(lines) + "\n"
