"""The `coffeebot` command: index, chunks, search, ask, source, chat, serve, eval, models."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

_OFFLINE_BY_OPERATOR = "HF_HUB_OFFLINE" in os.environ  # `models fetch` goes online unless the operator said not to
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("PTB_TIMEDELTA", "1")  # python-telegram-bot: timedeltas, not deprecated integer seconds

from rag_core.config import Config, ConfigError, Secrets, load_config  # noqa: E402
from rag_core.records import REPLIES, Answer, Chunk, Hit, Retrieval, Turn  # noqa: E402

from .version import version  # noqa: E402

if TYPE_CHECKING:
    from rag_core.pipeline import Options

log = logging.getLogger("coffeebot")


class CliError(Exception):
    """A problem to report in one line, with exit status 2."""


class _Logged(logging.Handler):
    """Remembers the WARNING records of this command, so a warning the log already showed is not printed again."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # noqa: BLE001 - a bad format string is the logger's problem, not ours
            pass


_logged = _Logged()


def _watch_warnings() -> None:
    """Start remembering this command's WARNING records (before models load and say what they fall back to)."""
    root = logging.getLogger()
    if _logged not in root.handlers:
        root.addHandler(_logged)


def print_warnings(warnings, file=None) -> None:
    """Each warning once per command: not when a log record already said it (its text up to the first "(" or
    ":" appears in the record: the model loaders word their fallbacks a little differently in log and JSON)."""
    for w in dict.fromkeys(warnings):
        key = w.split("(")[0].split(":")[0].strip()
        if key and any(key in m for m in _logged.messages):
            continue
        print(f"warning: {w}", file=file or sys.stderr)


# ---- JSON shapes (the contract in DESIGN.md) ---------------------------------------------------------------------


def hit_json(hit: Hit) -> dict:
    c = hit.chunk
    return {"id": c.id, "doc": c.doc, "title": c.title, "section": c.section, "text": c.text,
            "score": round(hit.score, 6), "ranks": dict(hit.ranks)}


def chunk_json(c: Chunk) -> dict:
    return {"id": c.id, "doc": c.doc, "title": c.title, "section": c.section, "text": c.text}


def _ms(timings) -> dict:
    return {k: round(v, 2) for k, v in timings.items()}


def retrieval_json(r: Retrieval) -> dict:
    return {"query": r.query, "rewritten_query": r.rewritten_query, "evidence": [hit_json(h) for h in r.evidence],
            "timings_ms": _ms(r.timings_ms), "warnings": list(r.warnings), "reranker": r.reranker}


def answer_json(a: Answer) -> dict:
    return {"query": a.query, "rewritten_query": a.rewritten_query, "answer": a.text, "mode": a.mode,
            "covered": a.covered, "citations": [chunk_json(c) for c in a.citations],
            "evidence": [hit_json(h) for h in a.evidence], "timings_ms": _ms(a.timings_ms), "warnings": list(a.warnings),
            **({"reranker": a.reranker} if a.reranker else {})}


def _dump(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


# ---- helpers -------------------------------------------------------------------------------------------------------


def read_history(path: str | None) -> list[Turn]:
    if not path:
        return []
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read history file {path}: {exc}") from exc
    return parse_history(data, path)


def parse_history(data, where: str = "history") -> list[Turn]:
    if not isinstance(data, list):
        raise CliError(f"{where}: expected a JSON list of {{role, content}} objects")
    turns = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or item.get("role") not in ("user", "assistant") or not isinstance(item.get("content"), str):
            raise CliError(f"{where}[{i}]: expected {{\"role\": \"user\"|\"assistant\", \"content\": str}}")
        turns.append(Turn(item["role"], item["content"]))
    return turns


def read_batch(path: str) -> Iterable[tuple[object, str, list[Turn]]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CliError(f"cannot read batch file {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            yield item.get("id", n), str(item["question"]), parse_history(item.get("history", []), f"{path}:{n} history")
        except (ValueError, KeyError, TypeError) as exc:
            raise CliError(f"{path}:{n}: expected {{\"id\", \"question\", \"history\"?}}: {exc}") from exc


def run_batch(path: str, run: Callable[[str, list[Turn]], dict]) -> int:
    """One JSON result a line, each with its item's id; models are loaded once, by the caller."""
    for item_id, question, history in read_batch(path):
        _dump({"id": item_id} | run(question, history))
    return 0


def options_from(args) -> Options:
    from rag_core.pipeline import Options
    from rag_core.retrieve import Channels

    channels = Channels(bm25=not args.no_bm25, dense=not args.no_dense, rerank=not args.no_rerank)
    return Options(channels=channels, har=not getattr(args, "no_har", False), ihi=not getattr(args, "no_har", False),
                   llm=not getattr(args, "no_llm", False))


def engine_for(cfg: Config, args, need_llm: bool = False, build_if_missing: bool = False):
    from rag_core.index.layout import Layout
    from rag_core.pipeline import load_engine

    _watch_warnings()
    with_reranker = not getattr(args, "no_rerank", False)
    api_key = Secrets.from_env().llm_api_key if need_llm else None
    engine = load_engine(cfg, api_key=api_key, with_reranker=with_reranker)
    if build_if_missing and Layout(cfg.data_dir).current_id() is None:
        print(f"first run: building the index of {cfg.kb_dir} (a few minutes: every passage is encoded once for the "
              f"ranker; later builds reuse them) …", file=sys.stderr)
        run_build(cfg, engine, progress=sys.stderr.isatty())
    return engine


def run_build(cfg: Config, engine, progress: bool):
    from rag_core.index.build import build_index

    return build_index(cfg, engine.embedder, engine.tokenizer, progress=progress)


# ---- commands ------------------------------------------------------------------------------------------------------


def cmd_index(cfg: Config, args) -> int:
    from rag_core.index.layout import Layout

    if args.rollback:
        from rag_core.index.admin import rollback

        build_id = rollback(Layout(cfg.data_dir))
        print(f"rolled back: build {build_id} is current")
        return 0
    from rag_core.pipeline import make_tokenizer
    from rag_core.models import load_embedder

    _watch_warnings()
    embedder, warnings = load_embedder(cfg.models)
    print_warnings(warnings)
    from rag_core.index.build import build_index

    tokenizer = make_tokenizer(cfg)
    gate = None
    if not args.force:
        from rag_core.index.gate import QualityGate

        gate = QualityGate(cfg, embedder, tokenizer)
    report = build_index(cfg, embedder, tokenizer, progress=sys.stderr.isatty() and not args.json, gate=gate)
    if args.json:
        _dump(report.to_json() | {"warnings": warnings})
        return 0
    print(f"index build {report.build_id}: {report.documents} documents, {report.chunks} chunks, "
          f"{report.chars} characters, {report.duration_s} s (embedded {report.embedded}, cached {report.cache_hits})")
    if report.lengths:
        ln = report.lengths
        print(f"  chunk length: min {ln['min']}, p10 {ln['p10']:.0f}, median {ln['median']:.0f}, "
              f"p90 {ln['p90']:.0f}, max {ln['max']}, mean {ln['mean']}")
    for label, items in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
        if items:
            print(f"  {label}: {', '.join(items)}")
    for f in report.failures:
        print(f"  skipped {f.path}: {f.reason}")
    if report.checks:
        print(f"  quality gate: {report.checks}")
    if not report.swapped:
        print(f"  NOT swapped in: {report.gate} (the previous build keeps serving; --force swaps anyway)")
    return 0


def cmd_chunks(cfg: Config, args) -> int:
    from rag_core.index.store import open_current

    index = open_current(cfg.data_dir)
    wanted = args.doc
    chunks = [c for c in index.chunks if c.doc == wanted or c.docid == wanted or Path(c.doc).name == wanted]
    if not chunks:
        raise CliError(f"no document {wanted!r} in the index (documents: {', '.join(sorted({c.doc for c in index.chunks}))})")
    if args.json:
        for c in chunks:
            _dump(chunk_json(c) | {"start": c.start, "end": c.end, "chars": len(c.text)})
        return 0
    print(f"{chunks[0].doc} [{chunks[0].docid}] — {chunks[0].title}: {len(chunks)} chunks")
    for c in chunks:
        preview = c.text.replace("\n", " ")
        print(f"\n[{c.id}] {len(c.text)} chars, {c.start}–{c.end}  {c.section}\n  {preview[:160]}{'…' if len(preview) > 160 else ''}")
    return 0


def cmd_search(cfg: Config, args) -> int:
    engine = engine_for(cfg, args)
    options = options_from(args)
    if args.batch:
        return run_batch(args.batch, lambda q, h: retrieval_json(engine.search(q, h, options)))
    result = engine.search(_question(args), read_history(args.history), options)
    if args.json:
        _dump(retrieval_json(result))
        return 0
    if result.rewritten_query != result.query:
        print(f"rewritten query: {result.rewritten_query}")
    for n, hit in enumerate(result.evidence, 1):
        ranks = " ".join(f"{k}={v}" for k, v in hit.ranks.items())
        print(f"{n}. [{hit.chunk.id}] {hit.chunk.doc} › {hit.chunk.section}  score={hit.score:.4f}  ({ranks})")
        print(f"   {hit.chunk.text[:120].replace(chr(10), ' ')}…")
    print("timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items()))
    print_warnings(result.warnings)
    return 0


def cmd_ask(cfg: Config, args) -> int:
    engine = engine_for(cfg, args, need_llm=not args.no_llm)
    options = options_from(args)
    if args.batch:
        return run_batch(args.batch, lambda q, h: answer_json(engine.answer(q, h, options)))
    answer = engine.answer(_question(args), read_history(args.history), options)
    if args.json:
        _dump(answer_json(answer))
        return 0
    print(answer.text)
    for c in answer.citations:
        print(f"  [{c.id}] {c.doc} › {c.section}")
    print_warnings(answer.warnings)
    return 0


def cmd_source(cfg: Config, args) -> int:
    from rag_core.index.store import open_current
    from rag_core.sources import resolve_source

    index = open_current(cfg.data_dir)
    found = resolve_source(index, cfg.data_dir, args.id)
    if args.json:
        _dump(found.to_json())
        return 0 if found.chunk else 1
    print(found.render_plain())
    return 0 if found.chunk else 1


def cmd_chat(cfg: Config, args) -> int:
    from bot.console import run_console

    return run_console(cfg, args)


def cmd_serve(cfg: Config, args) -> int:
    from bot.app import serve

    return serve(cfg, args)


def cmd_eval(cfg: Config, args) -> int:
    from rag_core.eval.run import main as eval_main
    from rag_core.eval.systems import SYSTEMS

    if not Path(args.gold).is_file():
        raise CliError(f"gold file not found: {args.gold} (the dev sets are in tests/data/eval/: dev.jsonl, "
                       "dev-multiturn.jsonl, dev2.jsonl)")
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise CliError(f"unknown system(s) {', '.join(unknown) or '(none given)'}; valid: {', '.join(SYSTEMS)}")
    if args.runs < 1 or args.resamples < 1:
        raise CliError("--runs and --resamples must be at least 1")
    return eval_main(cfg, args)


def cmd_gold(cfg: Config, args) -> int:
    """`gold synth`: draft gold items from the index's chunks with the configured LLM and keep those that pass."""
    from rag_core.eval.synth import TOPICS, synthesize, write_jsonl
    from rag_core.index.store import open_current
    from rag_core.llm import LLMError, OpenAIChatModel

    api_key = Secrets.from_env().llm_api_key
    if not api_key:
        raise CliError("gold synth drafts with the LLM: set DEEPSEEK_API_KEY or OPENAI_API_KEY")
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else list(TOPICS)
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        raise CliError(f"unknown topic(s) {', '.join(unknown)}; choose from {', '.join(TOPICS)}")
    if args.n < 1:
        raise CliError("--n must be at least 1")
    index = open_current(cfg.data_dir)
    chat = OpenAIChatModel(cfg.llm, api_key)
    tty = sys.stderr.isatty()

    def progress(reason: str) -> None:
        if tty:
            print(f"  {reason}", file=sys.stderr)

    try:
        report = synthesize(index, chat, args.n, args.seed, topics, max_calls=args.max_calls, on_draft=progress)
    except LLMError as exc:
        raise CliError(f"the LLM failed ({exc.kind}): {exc}") from exc
    finally:
        chat.close()
    write_jsonl(report.items, Path(args.out))
    print(f"kept {len(report.items)} of {args.n} wanted ({report.calls} LLM calls) → {args.out}")
    for reason, count in report.reasons().most_common():
        print(f"  rejected {count}: {reason}")
    if len(report.items) < args.n:
        print(f"warning: only {len(report.items)} items passed the checks", file=sys.stderr)
    return 0


def cmd_models(cfg: Config, args) -> int:
    if not _OFFLINE_BY_OPERATOR:
        os.environ["HF_HUB_OFFLINE"] = "0"  # this command's one job is to download (set before huggingface_hub loads)
    from rag_core.models import ModelFetchError, fetch_model

    for name in [cfg.models.embedder, cfg.models.reranker]:
        if not name or name in ("hashing", "bundled"):
            continue
        if Path(name).expanduser().exists():
            print(f"{name}: a local folder, nothing to fetch")
            continue
        try:
            print(f"{name} → {fetch_model(name)}")
        except ModelFetchError as exc:
            raise CliError(str(exc)) from None
    return 0


def health_url(cfg: Config, secrets: Secrets) -> str:
    """Where `serve` answers GET /healthz: the WeChat callback server when WeChat runs, else [monitor]."""
    host, port = cfg.monitor.host, cfg.monitor.port
    if secrets.wechat_app_id and secrets.wechat_token:
        host, port = cfg.wechat.host, cfg.wechat.port
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://{host}:{port}/healthz"


def cmd_health(cfg: Config, args) -> int:
    """GET /healthz of the running daemon (for Docker's HEALTHCHECK and operators): the JSON, exit 0 on 200."""
    import urllib.error
    import urllib.request

    url = args.url or health_url(cfg, Secrets.from_env())
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as r:
            status, body = r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:  # 503: the body says why
        status, body = exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        raise CliError(f"no answer from {url}: {getattr(exc, 'reason', None) or exc}") from None
    print(body)
    return 0 if status == 200 else 1


def _question(args) -> str:
    if not args.question:
        raise CliError("give a question, or --batch FILE")
    return args.question


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="coffeebot", description="Yunnan coffee advisor: cited answers from the knowledge base")
    p.add_argument("--config", help="config file (default: $COFFEEBOT_CONFIG or ./config.toml)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more log output: -v INFO, -vv DEBUG, -vvv DEBUG for libraries too (default: warnings only)")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("index", help="build or refresh the index of kb/")
    s.add_argument("--rollback", action="store_true", help="make the previous build current again")
    s.add_argument("--force", action="store_true", help="swap the new build in even if the quality gate objects")
    s.add_argument("--json", action="store_true", help="print the build report as JSON")

    s = sub.add_parser("chunks", help="show how a document was cut into chunks")
    s.add_argument("doc", help="path relative to kb/, file name, or docid")
    s.add_argument("--json", action="store_true", help="one JSON object a chunk")

    for name, helptext in (("search", "ranked evidence, no generation"), ("ask", "one cited answer")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("question", nargs="?", help="the question, in Chinese (or use --batch)")
        s.add_argument("--json", action="store_true", help="print the result as JSON (the contract in DESIGN.md)")
        s.add_argument("--batch", metavar="FILE", help="JSON Lines of {id, question, history?}; one JSON result a line")
        s.add_argument("--history", metavar="FILE", help="JSON list of {role, content}")
        s.add_argument("--no-bm25", action="store_true", help="leave out the BM25 channel")
        s.add_argument("--no-dense", action="store_true", help="leave out the dense (embedding) channel")
        s.add_argument("--no-rerank", action="store_true", help="keep fusion order (no reranker)")
        s.add_argument("--no-har", action="store_true", help="no history-aware rewriting or history in the prompt")
        if name == "ask":
            s.add_argument("--no-llm", action="store_true", help="extractive answer even when an LLM key is set")

    s = sub.add_parser("source", help="show a cited passage")
    s.add_argument("id", help="docid#cid, e.g. fb82b28b#11")
    s.add_argument("--json", action="store_true", help="print the passage as JSON")

    sub.add_parser("chat", help="chat in the terminal (history kept across restarts)")
    s = sub.add_parser("serve", help="run the configured channels (the console when none is configured)")
    s.add_argument("--role", choices=("all", "worker", "builder"), default="all",
                   help="all: one process does everything (default); worker: answer on the configured channels and "
                        "follow the current index build; builder: nightly rebuild, kb/ watch, publish builds")

    s = sub.add_parser("health", help="ask the running daemon's GET /healthz (exit 0 when it can answer)")
    s.add_argument("--url", help="the /healthz URL (default: the WeChat server when WeChat is configured, else "
                                 "[monitor] host:port)")
    s.add_argument("--timeout", type=float, default=5.0, help="seconds to wait (default: 5)")

    s = sub.add_parser("eval", help="evaluate systems on a gold set")
    s.add_argument("--gold", required=True, metavar="FILE",
                   help="gold set, JSON Lines (e.g. tests/data/eval/dev.jsonl)")
    s.add_argument("--systems", default="full,b1,b2a,b2b,b3,b4,b5,simple,semantic,sliding",
                   help="comma-separated systems to run (default: all): full, b1 no reranker, b2a dense only, "
                        "b2b BM25 only, b3 embedder fallback, b4 other reranker, b5 no HAR/IHI, simple RAG, "
                        "semantic and sliding chunking")
    s.add_argument("--runs", type=int, default=1, help="runs per system, averaged per item (default: 1)")
    s.add_argument("--out", default="eval-out", metavar="DIR",
                   help="folder for report.md, results.json and the plots (default: eval-out)")
    s.add_argument("--json", action="store_true", help="print the metrics as JSON instead of the Markdown report")
    s.add_argument("--resamples", type=int, default=5000, help="bootstrap and permutation resamples (default: 5000)")
    s.add_argument("--replies", choices=REPLIES, default="written",
                   help="the histories' assistant turns: as written in the gold set (default), or each system's own "
                        "reply to the turn before it, as a user of the bot would have them")

    s = sub.add_parser("gold", help="gold question sets: draft new items with the LLM")
    gold = s.add_subparsers(dest="gold_action", required=True)
    g = gold.add_parser("synth", help="draft quote-anchored items from chunks; keep those passing the automatic checks")
    g.add_argument("--n", type=int, default=50, help="items to keep")
    g.add_argument("--out", required=True, help="JSON Lines file to write")
    g.add_argument("--seed", type=int, default=0, help="random seed for choosing chunks (default: 0)")
    g.add_argument("--topics", default="", help="comma-separated topics to draw from (default: all)")
    g.add_argument("--max-calls", type=int, default=None, help="LLM calls at most (default: 3n + 10)")

    s = sub.add_parser("models", help="fetch the configured models once (honours HF_ENDPOINT)")
    s.add_argument("action", choices=["fetch"], help="fetch: download the configured embedder and reranker")
    return p


COMMANDS = {"index": cmd_index, "chunks": cmd_chunks, "search": cmd_search, "ask": cmd_ask, "source": cmd_source,
            "chat": cmd_chat, "serve": cmd_serve, "eval": cmd_eval, "gold": cmd_gold,
            "models": cmd_models, "health": cmd_health}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from . import logs

    logs.setup(args.verbose)  # secrets masked, third-party libraries quiet; [log] applied once the config is read
    from rag_core.index.build import EmptyKnowledgeBase
    from rag_core.index.store import IndexUnavailable
    from rag_core.retrieve import QueryError

    from .storage import StorageUnavailable

    try:
        cfg = load_config(args.config)
        logs.setup(args.verbose, cfg.log, cfg.root)
        return COMMANDS[args.command](cfg, args)
    except (CliError, ConfigError, IndexUnavailable, EmptyKnowledgeBase, QueryError, StorageUnavailable) as exc:
        print(f"coffeebot: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
