"""Administrative operations on the index versions: rollback.

`rollback` makes the build that served before the current one current again, by the same atomic pointer swap a
build uses (queries in flight finish on the build they started with). The build rolled back from is remembered in
ROLLED_BACK and skipped by later rollbacks, so rolling back twice goes two builds back instead of undoing itself.
"""
from __future__ import annotations

import json
import logging

from .archive import record_build
from .build import BuildInProgress, build_lock
from .layout import Layout
from .store import IndexReader, IndexUnavailable

log = logging.getLogger(__name__)

ROLLED_BACK = "ROLLED_BACK"


class RollbackError(IndexUnavailable):
    """Nothing (usable) to roll back to; the current build keeps serving. The message says why.

    A subclass of IndexUnavailable so the CLI reports it in one line, like any other index problem."""


def rolled_back(layout: Layout) -> set[str]:
    try:
        return set((layout.root / ROLLED_BACK).read_text(encoding="utf-8").split())
    except FileNotFoundError:
        return set()


def rollback_target(layout: Layout) -> str:
    """The build that served before the current one, skipping builds already rolled back from."""
    current = layout.current_id()
    if current is None:
        raise RollbackError(f"no current index in {layout.root}: nothing to roll back from")
    skip = rolled_back(layout) | {current}
    for build_id in reversed(layout.served_history()):
        if build_id not in skip:
            return build_id
    kept = ", ".join(layout.all_builds()) or "none"
    raise RollbackError(f"no earlier build to roll back to (current {current}; builds kept: {kept})")


def rollback(layout: Layout) -> str:
    """Make the previous served build current again; return its id. Raises RollbackError when there is none."""
    try:
        with build_lock(layout):  # a build finishing meanwhile would swap over the rollback, or prune its target
            return _rollback(layout)
    except BuildInProgress as exc:
        raise RollbackError(f"{exc}: roll back after it has finished") from None


def _rollback(layout: Layout) -> str:
    target = rollback_target(layout)
    current = layout.current_id()
    target_dir = layout.builds / target
    reader = IndexReader(target_dir)  # unreadable → IndexUnavailable before anything changes
    now_embedder = json.loads((layout.builds / current / "manifest.json").read_text(encoding="utf-8")).get("embedder")
    if reader.manifest.get("embedder") != now_embedder:
        raise RollbackError(
            f"build {target} was made with embedder {reader.manifest.get('embedder')!r} but the serving one with "
            f"{now_embedder!r}: the bot could not query it; rebuild with `coffeebot index` instead"
        )
    record_build(layout.root, reader.chunks)  # passages of the rolled-back-from build are marked superseded now
    with open(layout.root / ROLLED_BACK, "a", encoding="utf-8") as fh:
        fh.write(current + "\n")
    layout.swap(target)
    log.warning("rolled back from build %s to %s", current, target)
    return target
